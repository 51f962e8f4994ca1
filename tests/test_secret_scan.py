"""relay.secret_scan (the forms of a secret looked for) and the hand-over of relay's secrets
to its re-executed self through a pipe (relay.secrets; SPEC §14, issue 27)."""

from __future__ import annotations

import base64
import json
import os
import random
import subprocess
import sys
import urllib.parse

import pytest

from relay import secrets
from relay.secret_scan import Finding, SecretScanner

KEY = "sk-ant-api03-Qm9v~~~?>>?YmFyYmF6cXV4+/eHl6MTIz~?>NDU2Nzg5MA"  # base64: + and /


@pytest.fixture()
def scanner() -> SecretScanner:
    return SecretScanner({"ANTHROPIC_API_KEY": KEY, "SHORT_TOKEN": "abc123"})


def _encodings(scanner: SecretScanner, data: bytes) -> set[str]:
    found = scanner.find(data)
    assert {f.name for f in found} <= {"ANTHROPIC_API_KEY"}
    return {f.encoding for f in found}


def test_every_form_is_found_by_name_never_by_value(scanner: SecretScanner) -> None:
    raw = KEY.encode()
    assert _encodings(scanner, b"x=" + raw + b"\n") == {"plain"}
    assert _encodings(scanner, KEY[::-1].encode()) == {"reversed"}
    assert _encodings(scanner, raw.hex().encode()) == {"hex"}
    assert _encodings(scanner, raw.hex().upper().encode()) == {"hex"}
    assert _encodings(scanner, urllib.parse.quote(KEY, safe="").encode()) == {"percent-encoded"}
    assert _encodings(scanner, "".join(f"%{b:02x}" for b in raw).encode()) == {"percent-encoded"}
    assert scanner.find(base64.b64encode(raw)) == [Finding("ANTHROPIC_API_KEY", "base64")]
    assert scanner.find(base64.urlsafe_b64encode(raw)) == [
        Finding("ANTHROPIC_API_KEY", "base64url")
    ]


def test_a_key_inside_a_longer_encoded_blob_is_found_at_every_offset(
    scanner: SecretScanner,
) -> None:
    rng = random.Random(27)
    for _ in range(200):
        before = rng.randbytes(rng.randrange(40))
        after = rng.randbytes(rng.randrange(40))
        blob = before + KEY.encode() + after
        assert "base64" in _encodings(scanner, b"v: " + base64.b64encode(blob))
        assert "base64url" in _encodings(scanner, base64.urlsafe_b64encode(blob))
        assert "base64" in _encodings(scanner, base64.encodebytes(blob))  # wrapped at 76


def test_short_values_and_other_text_are_no_findings(scanner: SecretScanner) -> None:
    assert scanner.find(b"abc123 " + KEY[:20].encode() + b" sk-ant-api03-") == []
    assert scanner.find(base64.b64encode(os.urandom(100_000))) == []
    assert not SecretScanner({"A_KEY": "   short   ", "B_KEY": ""})
    assert SecretScanner({"A_KEY": f"  {KEY}\n"}).find(KEY.encode())  # stripped


def test_a_key_split_between_chunks_is_found(scanner: SecretScanner) -> None:
    data = os.urandom(5000) + base64.b64encode(b"..." + KEY.encode()) + os.urandom(5000)
    for size in (1, 7, 64, 4096):
        chunks = (data[i : i + size] for i in range(0, len(data), size))
        assert scanner.find_in_chunks(chunks) == [Finding("ANTHROPIC_API_KEY", "base64")]


def test_one_value_under_two_names_and_two_values_under_one_name() -> None:
    twice = SecretScanner([("B_KEY", KEY), ("A_KEY", KEY), ("A_KEY", "other-value-0123456")])
    assert twice.find(KEY.encode() + b" other-value-0123456") == [Finding("A_KEY", "plain")]


# --------------------------------------------------------------------------- the hand-over

_CHILD = """
import json, os, sys
from relay import secrets
print(json.dumps({
    "held": secrets.held(),
    "token": os.environ.get("GH_TOKEN"),
    "fd_variable": os.environ.get("RELAY_HELD_SECRETS_FD"),
    "block": open("/proc/self/environ", "rb").read().decode("utf-8", "replace"),
    "open": sorted(os.listdir("/proc/self/fd")),
}))
"""


def _child(env: dict[str, str], *, fds: tuple[int, ...] = ()) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        pass_fds=fds,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_secrets_passed_through_the_pipe_are_held_out_of_the_block() -> None:
    read_end, write_end = os.pipe()
    message = {"relay": 1, "held": {"OPENAI_API_KEY": KEY}, "environ": {"GH_TOKEN": "ghp_x1"}}
    os.write(write_end, json.dumps(message).encode())
    os.close(write_end)
    env = {"PATH": os.environ["PATH"], "RELAY_HELD_SECRETS_FD": str(read_end)}
    try:
        data = _child(env, fds=(read_end,))
    finally:
        os.close(read_end)
    assert data["held"] == {"OPENAI_API_KEY": KEY} and data["token"] == "ghp_x1"
    assert data["fd_variable"] is None  # not passed on to what relay starts
    assert KEY not in str(data["block"]) and "ghp_x1" not in str(data["block"])
    assert str(read_end) not in data["open"]  # read, then closed


@pytest.mark.parametrize("value", ["0", "1", "-3", "banana", "99", "3 "])
def test_a_bad_pipe_variable_is_ignored_without_waiting(value: str) -> None:
    env = {"PATH": os.environ["PATH"], "RELAY_HELD_SECRETS_FD": value}
    assert _child(env)["held"] == {}


def test_a_pipe_still_open_for_writing_or_holding_other_text_is_ignored() -> None:
    for text, close in ((b'{"relay": 1, "held": {"A_KEY": "x"}}', False), (b"not json", True)):
        read_end, write_end = os.pipe()
        os.write(write_end, text)
        if close:
            os.close(write_end)
        env = {"PATH": os.environ["PATH"], "RELAY_HELD_SECRETS_FD": str(read_end)}
        try:
            assert _child(env, fds=(read_end,))["held"] == {}
        finally:
            os.close(read_end)
            if not close:
                os.close(write_end)


def test_only_names_with_a_secret_word_are_scanned_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", "https://api.openai.com/v1")
    names = {name for name, _ in secrets.secret_values()}
    assert "OPENAI_API_KEY" in names and "OPENAI_BASE_URL" not in names
