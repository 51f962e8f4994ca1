"""Secret values are replaced in what relay records (relay/sandbox/redact.py, SPEC §14)."""

from __future__ import annotations

from pathlib import Path

from relay.sandbox import Redactor

KEY = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz"


def test_values_of_credential_variables_are_replaced_by_their_name() -> None:
    redact = Redactor.from_environ({"ANTHROPIC_API_KEY": KEY, "HOME": "/home/someone", "X": "1"})
    assert redact(f"key={KEY} home=/home/someone") == (
        "key=[redacted: ANTHROPIC_API_KEY] home=/home/someone"
    )


def test_short_values_are_not_secrets() -> None:
    assert Redactor.from_environ({"MY_TOKEN": "1"})("1 2 3") == "1 2 3"


def test_a_longer_secret_containing_another_is_replaced_whole() -> None:
    redact = Redactor.from_environ({"A_KEY": "abcdefgh", "B_KEY": "abcdefgh-ijklmnop"})
    assert redact("abcdefgh-ijklmnop") == "[redacted: B_KEY]"


def test_a_large_file_is_redacted_in_chunks_also_across_chunk_borders(tmp_path: Path) -> None:
    path = tmp_path / "out.log"
    filler = b"x" * 1000
    path.write_bytes(filler + KEY.encode() + filler * 3 + KEY.encode())
    redact = Redactor.from_environ({"ANTHROPIC_API_KEY": KEY})
    assert redact.redact_file(path, chunk_bytes=1010)  # the first key straddles a border
    data = path.read_bytes()
    assert KEY.encode() not in data and data.count(b"[redacted: ANTHROPIC_API_KEY]") == 2
    assert not redact.redact_file(path)  # nothing left: the file is left as it is
