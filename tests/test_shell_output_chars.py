"""Issue 28 item 15: what the model sees of a command's output is capped in characters of the
text it gets, not in bytes of the raw output. A 2 MB binary output made a request of 77k
characters (each byte that is not UTF-8 text travels as a 6-character ``\\ufffd``/``\\u00XX``
JSON escape); now such output is told in one line, control characters never reach the request,
and multi-byte text gets the whole limit in characters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from relay.models.base import ToolCall
from relay.tools import ToolContext, ToolResult, execute

LIMIT = 4096


@pytest.fixture()
def ctx(tmp_path: Path) -> ToolContext:
    repo = tmp_path / "repo"
    repo.mkdir()
    return ToolContext(
        repo_root=repo.resolve(),
        state_dir=tmp_path / "state",
        run_dir=tmp_path / "run",
        output_limit_bytes=LIMIT,
        shell_timeout_s=20.0,
        max_shell_timeout_s=30.0,
    )


def shell(ctx: ToolContext, command: str) -> ToolResult:
    return execute(ToolCall(id="s1", name="shell", arguments={"command": command}), ctx)


def _sent(content: str) -> int:
    """Characters the result takes in a request body (JSON, ASCII-escaped or not)."""
    return max(len(json.dumps(content)), len(json.dumps(content, ensure_ascii=False)))


def test_a_2_mb_binary_output_makes_a_small_request(ctx: ToolContext) -> None:
    result = shell(ctx, "head -c 2000000 /dev/urandom")
    assert _sent(result.content) < LIMIT + 600, result.content[:500]
    assert "not UTF-8 text" in result.content
    assert "2000000 bytes" in result.content
    assert result.full_output_path is not None and result.full_output_path in result.content
    assert Path(result.full_output_path).stat().st_size == 2_000_000


def test_control_characters_never_reach_the_request(ctx: ToolContext) -> None:
    result = shell(ctx, r"printf 'a\033[31mred\033[0m b\x00c\x07d\te\n'")
    assert "ared b\ufffdc\ufffdd\te" in result.content  # colours dropped, tab kept
    assert not any(ord(ch) < 32 and ch not in "\n\t" for ch in result.content)


def test_the_cap_counts_characters_of_multi_byte_text(ctx: ToolContext) -> None:
    result = shell(ctx, "python3 -c \"print('é' * 3000)\"")  # 6000 bytes, 3000 characters
    assert "é" * 3000 in result.content and "cut" not in result.content
    assert result.full_output_path is None
    big = shell(ctx, "python3 -c \"print('é' * 100000)\"")
    shown = big.content.split("--- stdout ---\n")[1]
    assert LIMIT - 10 <= shown.count("é") <= LIMIT
    assert len(big.content) < LIMIT + 400
    cut = int(big.content.split("[... ")[1].split(" bytes cut")[0])
    assert cut == 200001 - 2 * shown.count("é") - 1  # the marker counts the raw bytes cut


def test_a_latin_1_text_is_still_shown_with_replacement_characters(ctx: ToolContext) -> None:
    result = shell(ctx, r"for i in $(seq 2000); do printf 'caf\xe9 ligne %s\n' $i; done")
    assert "caf\ufffd ligne 1\n" in result.content and "caf\ufffd ligne 2000" in result.content
    assert len(result.content) < LIMIT + 400


def test_a_binary_output_under_the_cap_is_told_in_one_line_too(ctx: ToolContext) -> None:
    result = shell(ctx, "head -c 4000 /dev/urandom")  # 4,000 characters: nothing to cut
    assert _sent(result.content) < 1000, result.content[:500]
    assert "4000 bytes, mostly not UTF-8 text" in result.content
    assert result.full_output_path is not None and result.full_output_path in result.content
    assert Path(result.full_output_path).stat().st_size == 4000


def test_a_few_stray_bytes_are_still_shown(ctx: ToolContext) -> None:
    result = shell(ctx, r"printf 'ok\xff\xfe\x00\n'")
    assert "ok\ufffd\ufffd\ufffd" in result.content and result.full_output_path is None
