"""read_file, write_file and edit_file as the model uses them (SPEC §5)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from relay.models.base import ToolCall
from relay.tools import ToolContext, ToolResult, execute


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    return root.resolve()


@pytest.fixture()
def ctx(repo: Path, tmp_path: Path) -> ToolContext:
    return ToolContext(
        repo_root=repo,
        state_dir=repo / ".relay" / "state",
        run_dir=tmp_path / f"run-{tmp_path.name}",
        output_limit_bytes=1024,
    )


def call(ctx: ToolContext, name: str, **arguments: object) -> ToolResult:
    return execute(ToolCall(id="c1", name=name, arguments=dict(arguments)), ctx)


# --- write_file ------------------------------------------------------------------------------


def test_write_file_creates_parents_and_reports_bytes(ctx: ToolContext, repo: Path) -> None:
    result = call(ctx, "write_file", path="pkg/sub/mod.py", content="é = 1\n")
    assert not result.is_error
    assert result.content == "wrote 7 bytes to pkg/sub/mod.py"
    assert result.paths_written == ("pkg/sub/mod.py",)
    assert (repo / "pkg" / "sub" / "mod.py").read_bytes() == "é = 1\n".encode()


def test_write_file_overwrites_and_keeps_newlines_exactly(ctx: ToolContext, repo: Path) -> None:
    (repo / "a.txt").write_text("old content that is long\n")
    result = call(ctx, "write_file", path="a.txt", content="new\r\nlines")
    assert not result.is_error
    assert (repo / "a.txt").read_bytes() == b"new\r\nlines"


def test_write_file_onto_a_directory_is_an_error(ctx: ToolContext, repo: Path) -> None:
    (repo / "folder").mkdir()
    result = call(ctx, "write_file", path="folder", content="x")
    assert result.is_error and "directory" in result.content
    assert result.paths_written == ()


def test_write_file_under_a_file_is_an_error_result(ctx: ToolContext, repo: Path) -> None:
    (repo / "plain").write_text("x")
    result = call(ctx, "write_file", path="plain/child.txt", content="y")
    assert result.is_error and result.paths_written == ()
    assert (repo / "plain").read_text() == "x"


# --- read_file -------------------------------------------------------------------------------


def test_read_file_returns_the_text(ctx: ToolContext, repo: Path) -> None:
    (repo / "a.txt").write_text("one\ntwo\nthree\n")
    result = call(ctx, "read_file", path="a.txt")
    assert not result.is_error and result.content == "one\ntwo\nthree\n"


def test_read_file_offset_and_limit_select_lines(ctx: ToolContext, repo: Path) -> None:
    (repo / "a.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    result = call(ctx, "read_file", path="a.txt", offset=3, limit=2)
    assert result.content == "line 3\nline 4\n"
    assert call(ctx, "read_file", path="a.txt", offset=10).content == "line 10\n"
    assert call(ctx, "read_file", path="a.txt", limit=1).content == "line 1\n"


def test_read_file_offset_past_the_end_says_so(ctx: ToolContext, repo: Path) -> None:
    (repo / "a.txt").write_text("a\nb\n")
    result = call(ctx, "read_file", path="a.txt", offset=5)
    assert not result.is_error
    assert "past the end" in result.content and "2 lines" in result.content


def test_read_file_rejects_offset_zero(ctx: ToolContext, repo: Path) -> None:
    (repo / "a.txt").write_text("a\n")
    result = call(ctx, "read_file", path="a.txt", offset=0)
    assert result.is_error and "offset" in result.content


def test_read_file_replaces_non_utf8_bytes(ctx: ToolContext, repo: Path) -> None:
    (repo / "bin.dat").write_bytes(b"ok \xff\xfe end\n")
    result = call(ctx, "read_file", path="bin.dat")
    assert not result.is_error
    assert result.content == "ok \ufffd\ufffd end\n"


def test_read_file_of_a_big_file_is_bounded_and_says_how_to_continue(
    ctx: ToolContext, repo: Path
) -> None:
    (repo / "big.txt").write_text("".join(f"line {n:05d}\n" for n in range(1, 100001)))
    result = call(ctx, "read_file", path="big.txt")
    assert not result.is_error
    assert len(result.content.encode()) <= 1024 + 200
    assert result.content.startswith("line 00001\n")
    last_line = result.content.splitlines()[-2]
    next_offset = int(last_line.split()[1]) + 1
    assert f"offset={next_offset}" in result.content
    following = call(ctx, "read_file", path="big.txt", offset=next_offset, limit=1)
    assert following.content == f"line {next_offset:05d}\n"


def test_read_file_of_one_huge_line_is_bounded(ctx: ToolContext, repo: Path) -> None:
    (repo / "min.js").write_text("x" * 5_000_000)
    result = call(ctx, "read_file", path="min.js")
    assert len(result.content.encode()) <= 1024 + 300
    assert "longer than the output limit" in result.content


def test_read_file_missing_and_directory_are_errors(ctx: ToolContext, repo: Path) -> None:
    missing = call(ctx, "read_file", path="nope.txt")
    assert missing.is_error and "no such file: nope.txt" in missing.content
    (repo / "pkg").mkdir()
    (repo / "pkg" / "mod.py").write_text("")
    (repo / "pkg" / "inner").mkdir()
    folder = call(ctx, "read_file", path="pkg")
    assert folder.is_error and "is a directory" in folder.content
    assert "mod.py" in folder.content and "inner/" in folder.content


def test_read_file_of_an_empty_file(ctx: ToolContext, repo: Path) -> None:
    (repo / "empty.txt").write_text("")
    result = call(ctx, "read_file", path="empty.txt")
    assert not result.is_error and "empty" in result.content


# --- edit_file -------------------------------------------------------------------------------


def test_edit_file_replaces_the_single_occurrence(ctx: ToolContext, repo: Path) -> None:
    (repo / "m.py").write_text("def f():\n    return 1\n")
    result = call(ctx, "edit_file", path="m.py", old="return 1", new="return 2")
    assert not result.is_error
    assert result.paths_written == ("m.py",)
    assert "line 2" in result.content
    assert (repo / "m.py").read_text() == "def f():\n    return 2\n"


def test_edit_file_zero_occurrences_names_the_count(ctx: ToolContext, repo: Path) -> None:
    (repo / "m.py").write_text("a = 1\n")
    result = call(ctx, "edit_file", path="m.py", old="b = 1", new="b = 2")
    assert result.is_error
    assert "found 0 times in m.py" in result.content
    assert result.paths_written == ()
    assert (repo / "m.py").read_text() == "a = 1\n"


def test_edit_file_several_occurrences_names_the_count(ctx: ToolContext, repo: Path) -> None:
    (repo / "m.py").write_text("x = 0\nx = 0\n")
    result = call(ctx, "edit_file", path="m.py", old="x = 0", new="x = 1")
    assert result.is_error
    assert "found 2 times" in result.content and "more context" in result.content
    assert (repo / "m.py").read_text() == "x = 0\nx = 0\n"


def test_edit_file_counts_overlapping_matches(ctx: ToolContext, repo: Path) -> None:
    (repo / "a.txt").write_text("aaa")
    result = call(ctx, "edit_file", path="a.txt", old="aa", new="b")
    assert result.is_error and "found 2 times" in result.content


def test_edit_file_empty_old_is_an_error(ctx: ToolContext, repo: Path) -> None:
    (repo / "a.txt").write_text("abc")
    result = call(ctx, "edit_file", path="a.txt", old="", new="x")
    assert result.is_error and "old is empty" in result.content
    assert (repo / "a.txt").read_text() == "abc"


def test_edit_file_missing_file_is_an_error(ctx: ToolContext) -> None:
    result = call(ctx, "edit_file", path="nope.py", old="a", new="b")
    assert result.is_error and "no such file" in result.content


def test_edit_file_keeps_other_non_utf8_bytes(ctx: ToolContext, repo: Path) -> None:
    (repo / "latin1.txt").write_bytes(b"caf\xe9\nname = old\n")
    result = call(ctx, "edit_file", path="latin1.txt", old="old", new="new")
    assert not result.is_error
    assert (repo / "latin1.txt").read_bytes() == b"caf\xe9\nname = new\n"


def test_write_through_a_hard_link_leaves_the_other_file_alone(ctx, tmp_path) -> None:
    """``ln OUTSIDE x`` then write_file/edit_file x: the file outside keeps its content."""
    outside = tmp_path / "outside.cfg"
    outside.write_text("[core]\n\tbare = false\n")
    os.link(outside, ctx.repo_root / "x.cfg")
    result = call(ctx, "edit_file", path="x.cfg", old="false", new="true")
    assert not result.is_error, result.content
    call(ctx, "write_file", path="x.cfg", content="[core]\n\tfsmonitor = evil\n")
    assert outside.read_text() == "[core]\n\tbare = false\n"
    assert (ctx.repo_root / "x.cfg").read_text() == "[core]\n\tfsmonitor = evil\n"


def test_new_files_get_the_usual_permissions(ctx) -> None:
    call(ctx, "write_file", path="new.txt", content="x")
    mode = os.stat(ctx.repo_root / "new.txt").st_mode & 0o777
    assert mode == 0o666 & ~_current_umask()


def _current_umask() -> int:
    value = os.umask(0o022)
    os.umask(value)
    return value
