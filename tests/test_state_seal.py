"""relay's seal on the state it leaves where others can write (relay.state_seal; SPEC §14,
issue 27): where the key comes from, what a bad key says, and what a seal proves."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from conftest import call, respond

from relay.errors import ConfigError
from relay.state_seal import (
    KEY_ENV,
    StateKey,
    check_seal,
    key_file_path,
    seal,
    sealing_key,
    verifying_keys,
)

CI_KEY = "0123456789abcdef" * 3


def test_the_key_file_is_made_once_with_mode_0600(clean_env: Path) -> None:
    key = sealing_key()
    path = clean_env / ".config" / "relay" / "state.key"
    assert key.source == str(path) == str(key_file_path())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert len(path.read_text().strip()) == 64
    assert sealing_key() == key  # the same key the next time
    assert verifying_keys() == (key,)
    assert not [p for p in path.parent.iterdir() if p.name != "state.key"]  # no leftovers


def test_the_key_file_follows_xdg_config_home(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert sealing_key().source == str(tmp_path / "xdg" / "relay" / "state.key")
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/ignored")  # the XDG rule: absolute only
    assert sealing_key().source == str(clean_env / ".config" / "relay" / "state.key")


def test_relay_state_key_wins_and_no_file_is_made(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, f"  {CI_KEY}\n")  # a CI secret pasted with a newline
    key = sealing_key()
    assert key == StateKey(CI_KEY.encode(), KEY_ENV)
    assert not key_file_path().exists()
    monkeypatch.setenv(KEY_ENV, "")  # empty counts as unset
    assert sealing_key().source == str(key_file_path())


@pytest.mark.parametrize(
    ("value", "found"),
    [("short", "found 5 characters"), ("x" * 31, "found 31 characters"),
     ("a" * 20 + " b" * 10, "not printable"), ("é" * 40, "not printable")],
)  # fmt: skip
def test_a_bad_relay_state_key_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, value: str, found: str
) -> None:
    monkeypatch.setenv(KEY_ENV, value)
    for read in (sealing_key, verifying_keys):
        with pytest.raises(ConfigError) as info:
            read()
        said = str(info.value)
        assert KEY_ENV in said and "at least 32 printable ASCII characters" in said
        assert found in said and value.strip() not in said  # never the value itself


def test_a_bad_key_file_is_a_clear_error(clean_env: Path) -> None:
    path = key_file_path()
    path.parent.mkdir(parents=True)
    path.write_text("too short\n")
    with pytest.raises(ConfigError, match=r"holds no key .*remove it .*or set RELAY_STATE_KEY"):
        sealing_key()
    path.unlink()
    path.mkdir()
    with pytest.raises(ConfigError, match="cannot read relay's key file"):
        sealing_key()


def test_a_key_file_that_cannot_be_made_names_the_variable(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if os.geteuid() == 0:
        blocker = tmp_path / "not-a-folder"
        blocker.write_text("")
        monkeypatch.setenv("XDG_CONFIG_HOME", str(blocker))  # root writes every folder
    else:
        (clean_env / ".config").mkdir(mode=0o500)
    with pytest.raises(ConfigError, match=r"cannot write relay's key file .*set RELAY_STATE_KEY"):
        sealing_key()


def test_a_seal_proves_the_content_the_purpose_and_the_key(clean_env: Path) -> None:
    key = sealing_key()
    other = StateKey(b"y" * 40, "another machine")
    payload = {"goal": {"deliverables": [{"file": "done.txt"}], "cost": 0.1}, "n": 3}
    made = seal(payload, "goal-state", key)
    assert made["alg"] == "HMAC-SHA256" and made["key_id"] == key.key_id
    assert key.secret.decode() not in json.dumps(made)
    reread = json.loads(json.dumps(payload, indent=1))  # as read back from the file
    assert check_seal(reread, made, "goal-state").status == "sealed"
    changed = {**payload, "n": 4}
    assert check_seal(changed, made, "goal-state").status == "forged"
    assert check_seal(payload, made, "audit-base").status == "forged"
    assert check_seal(payload, seal(payload, "goal-state", other), "goal-state").status == (
        "other_key"
    )
    assert check_seal(payload, made, "goal-state", (other,)).status == "other_key"
    for bad in (None, "x", {"alg": "none"}, {**made, "key_id": "\x1b[2J" + "0" * 8}, [made]):
        assert check_seal(payload, bad, "goal-state").status == "unsealed"


def test_a_seal_made_with_the_ci_key_verifies_where_the_file_key_is_also_known(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A laptop that continues a CI goal sets RELAY_STATE_KEY; its own goals, sealed with its
    key file, still verify."""
    mine = sealing_key()
    monkeypatch.setenv(KEY_ENV, CI_KEY)
    assert sealing_key().source == KEY_ENV
    assert check_seal({"a": 1}, seal({"a": 1}, "goal-state", mine), "goal-state").trusted


def test_a_bad_relay_state_key_stops_relay_run_before_anything_changes(
    make_repo, write_script, run_relay, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo()
    monkeypatch.setenv(KEY_ENV, "tiny")
    script = write_script([respond(call("write_file", path="a.txt", content="a"))])
    argv = ["run", "Do it.", "--repo", repo, "--model", f"scripted:{script}", "--json"]
    code, _, err = run_relay(argv)
    assert code == 1 and "Traceback" not in err, err
    assert "RELAY_STATE_KEY must hold at least 32" in " ".join(err.split())
    assert "tiny" not in err
    assert not (repo / "a.txt").exists()
    branches = [b.strip("* ") for b in os.popen(f"git -C {repo} branch").read().splitlines()]
    assert branches == ["main"]
