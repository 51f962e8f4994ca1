"""relay's atomic file writes (relay.fswrite.replace_file; SPEC §10, §14; issue 12).

A write that replaces a file exchanges the new file with the old one (Linux renameat2) instead
of renaming onto it; both ways must give what a user (and the model) can see: the new content
at the path, a planted link cut and never written through, a folder refused, no temporary file
left, the file's mode kept.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from relay import fswrite
from relay.fswrite import TEMP_SUFFIX, replace_file


@pytest.fixture(params=["exchange", "rename"])
def how(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test runs with the exchange and with the plain rename (systems without it)."""
    if request.param == "rename":
        monkeypatch.setattr(fswrite, "_renameat2", False)
    return request.param


def _temporaries(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(TEMP_SUFFIX)]


def test_a_file_is_replaced_with_its_mode_and_no_temporary_left(tmp_path: Path, how: str) -> None:
    target = tmp_path / "notes.md"
    target.write_text("old\n")
    target.chmod(0o640)
    replace_file(target, b"new\n")
    assert target.read_bytes() == b"new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert _temporaries(tmp_path) == []


def test_a_new_file_is_created(tmp_path: Path, how: str) -> None:
    replace_file(tmp_path / "new.txt", b"hello")
    assert (tmp_path / "new.txt").read_bytes() == b"hello"
    assert _temporaries(tmp_path) == []


def test_a_hard_link_is_cut_not_written_through(tmp_path: Path, how: str) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    os.link(outside, repo / "app.py")
    replace_file(repo / "app.py", b"print(1)\n")
    assert (repo / "app.py").read_bytes() == b"print(1)\n"
    assert outside.read_text() == "keep me\n"
    assert os.stat(repo / "app.py").st_ino != os.stat(outside).st_ino
    assert _temporaries(repo) == []


def test_a_symlink_is_replaced_by_a_file_and_its_target_kept(tmp_path: Path, how: str) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("secret\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "progress.md").symlink_to(outside)
    replace_file(repo / "progress.md", b"# Progress\n")
    assert not (repo / "progress.md").is_symlink()
    assert (repo / "progress.md").read_bytes() == b"# Progress\n"
    assert outside.read_text() == "secret\n"
    assert _temporaries(repo) == []


def test_a_folder_in_the_way_is_an_error_and_stays(tmp_path: Path, how: str) -> None:
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "kept.py").write_text("x = 1\n")
    with pytest.raises(OSError):
        replace_file(folder, b"data")
    assert (folder / "kept.py").read_text() == "x = 1\n"
    assert _temporaries(tmp_path) == []


def test_the_exchange_is_used_where_the_system_has_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On Linux (CI), replacing a file goes through the exchange, not a rename onto it."""
    if os.uname().sysname != "Linux":
        pytest.skip("renameat2 is Linux's")
    target = tmp_path / "goal.json"
    target.write_text("{}\n")
    renames: list[str] = []
    real = os.replace

    def counted(src: str, dst: str) -> None:
        renames.append(str(dst))
        real(src, dst)

    monkeypatch.setattr(os, "replace", counted)
    replace_file(target, b'{"a": 1}\n')
    assert target.read_bytes() == b'{"a": 1}\n'
    assert renames == []


def test_a_ctrl_c_right_after_the_rename_leaves_the_write_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """The round's commit finds what relay wrote through relay.treewrites: a write whose rename
    was done when a Ctrl+C interrupted relay must be named there (issue 12: two Ctrl+C at the
    point after a file tool's write left the file uncommitted)."""
    from relay import treewrites

    target = tmp_path / "app.py"
    target.write_text("old\n")
    real_exchange, real_replace = fswrite._exchange, os.replace

    def exchange_then_interrupt(new: str, dest: Path) -> bool:
        if not real_exchange(new, dest):
            return False
        raise KeyboardInterrupt

    def replace_then_interrupt(src: str, dst: str) -> None:
        real_replace(src, dst)
        raise KeyboardInterrupt

    monkeypatch.setattr(fswrite, "_exchange", exchange_then_interrupt)
    monkeypatch.setattr(os, "replace", replace_then_interrupt)
    mark = treewrites.mark()
    with pytest.raises(KeyboardInterrupt):
        replace_file(target, b"new\n")
    assert target.read_bytes() == b"new\n"
    named = treewrites.since(mark)
    assert named is not None and Path(os.path.abspath(target)) in named
