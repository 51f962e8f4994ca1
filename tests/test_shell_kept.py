"""What relay keeps on disk of a shell command's output (issue 27): at most
``tools.kept_output_bytes``, its head and its tail around a note naming the full size and the
bytes dropped; memory bounded however much the command prints."""

from __future__ import annotations

import re
import tracemalloc
from pathlib import Path

import pytest

from relay.config import ConfigError, validate_config
from relay.models.base import ToolCall
from relay.tools import ToolContext, ToolResult, execute
from relay.tools.kept_output import DEFAULT_KEPT_BYTES

NUMBERS = 24_000_000
"""``seq 1 NUMBERS`` prints 204,888,897 bytes (about 195 MiB)."""
NOTE = re.compile(
    rb"\n\[relay: (\d+) bytes dropped here; the command printed (\d+) bytes, of which this "
    rb"file keeps the first (\d+) and the last (\d+) \(tools.kept_output_bytes\)\]\n"
)


def _seq_head(size: int) -> bytes:
    """The first ``size`` bytes ``seq 1 NUMBERS`` prints."""
    out, n, total = [], 1, 0
    while total < size:
        line = f"{n}\n".encode()
        out.append(line)
        total += len(line)
        n += 1
    return b"".join(out)[:size]


def _seq_tail(size: int) -> bytes:
    """The last ``size`` bytes ``seq 1 NUMBERS`` prints."""
    out, n, total = [], NUMBERS, 0
    while total < size:
        line = f"{n}\n".encode()
        out.append(line)
        total += len(line)
        n -= 1
    return b"".join(reversed(out))[-size:]


def config_error(data: object) -> str:
    with pytest.raises(ConfigError) as info:
        validate_config(data, "relay.yaml")
    assert info.value.exit_code == 1
    return str(info.value)


def _seq_size() -> int:
    return sum(len(str(i)) + 1 for i in range(1, NUMBERS + 1))


@pytest.fixture()
def ctx(tmp_path: Path) -> ToolContext:
    repo = tmp_path / "repo"
    repo.mkdir()
    return ToolContext(
        repo_root=repo.resolve(),
        state_dir=tmp_path / "state",
        run_dir=tmp_path / "run",
        shell_timeout_s=120.0,
    )


def shell(ctx: ToolContext, command: str) -> ToolResult:
    return execute(ToolCall(id="s1", name="shell", arguments={"command": command}), ctx)


def test_200_mb_of_output_keeps_head_and_tail_within_the_cap(ctx: ToolContext) -> None:
    tracemalloc.start()
    try:
        result = shell(ctx, f"seq 1 {NUMBERS}")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    total = _seq_size()
    assert result.exit_code == 0 and result.full_output_path is not None
    assert peak < DEFAULT_KEPT_BYTES // 2 + 2_000_000  # the tail's ring, never the output
    kept = Path(result.full_output_path).read_bytes()
    note = NOTE.search(kept)
    assert note is not None, kept[DEFAULT_KEPT_BYTES // 2 - 100 : DEFAULT_KEPT_BYTES // 2 + 300]
    dropped, printed, head, tail = (int(g) for g in note.groups())
    assert (printed, head, tail) == (total, DEFAULT_KEPT_BYTES // 2, DEFAULT_KEPT_BYTES // 2)
    assert dropped == total - DEFAULT_KEPT_BYTES
    assert len(kept) == DEFAULT_KEPT_BYTES + len(note.group(0))
    assert kept[: note.start()] == _seq_head(head)
    assert kept[note.end() :] == _seq_tail(tail)
    # what the model sees names the kept file, the full size and the bytes dropped
    assert f"output kept in {result.full_output_path}" in result.content
    assert f"{dropped} of {total} bytes dropped" in result.content
    assert result.content.rstrip().endswith(str(NUMBERS))


def test_an_output_within_the_cap_is_kept_whole_without_a_note(ctx: ToolContext) -> None:
    result = shell(ctx, "seq 1 200000")
    assert result.full_output_path is not None
    kept = Path(result.full_output_path).read_bytes()
    assert kept == b"".join(f"{n}\n".encode() for n in range(1, 200001))
    assert "full output in" in result.content and "dropped" not in result.content


@pytest.mark.parametrize("keep", [4096, 5001])
def test_a_small_cap_keeps_exactly_its_bytes_of_both_streams(ctx: ToolContext, keep: int) -> None:
    from dataclasses import replace

    ctx = replace(ctx, kept_output_bytes=keep, output_limit_bytes=1024)
    result = shell(ctx, "seq 1 100000; seq 1 3 >&2")
    kept = Path(result.full_output_path or "").read_bytes()
    note = NOTE.search(kept)
    assert note is not None
    assert len(kept) - len(note.group(0)) == keep
    assert kept.startswith(b"1\n2\n3\n") and kept.endswith(b"\n")
    assert int(note.group(2)) == len(b"".join(f"{n}\n".encode() for n in range(1, 100001))) + 6


@pytest.mark.parametrize("value", [100, -1, "lots", 4095])
def test_a_bad_cap_is_a_clear_error(value: object) -> None:
    msg = config_error({"tools": {"kept_output_bytes": value}})
    assert f"tools.kept_output_bytes = {value!r}" in msg


def test_the_cap_is_a_setting_with_a_documented_default() -> None:
    config = validate_config({"tools": {"kept_output_bytes": 65536}}, "relay.yaml")
    assert config.tools.kept_output_bytes == 65536
    assert validate_config({}, "relay.yaml").tools.kept_output_bytes == DEFAULT_KEPT_BYTES
    assert "4096" in config_error({"tools": {"kept_output_bytes": 10}})
