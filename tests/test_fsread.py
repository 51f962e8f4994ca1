"""relay.fsread: whole regular files read with as few system calls as it takes (a file of
/proc, whose size says nothing, still read whole), and real_path, where a path really leads
from the kernel's lookup, always the answer ``os.path.realpath`` gives (symlinks, ``..``,
missing tails, loops, FIFOs)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relay import fsread
from relay.fsread import fixed_real_path, read_regular_bytes, real_path


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tree of folders, files and symlinks (relative, absolute, chained, dangling, a loop,
    a FIFO)."""
    root = tmp_path_factory.mktemp("real") / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f.txt").write_text("x")
    (root / "c").mkdir()
    os.symlink("a/b", root / "to_b")
    os.symlink(root / "c", root / "abs_c")
    os.symlink("to_b", root / "chain")
    os.symlink("../c", root / "a" / "up_c")
    os.symlink("missing/far", root / "dangling")
    os.symlink("loop2", root / "loop1")
    os.symlink("loop1", root / "loop2")
    os.mkfifo(root / "fifo")
    return root


CASES = [
    ".",
    "a",
    "a/b/f.txt",
    "to_b/f.txt",
    "chain/../c",
    "abs_c/..",
    "a/up_c",
    "a/up_c/../a/b",
    "to_b/..",
    "dangling",
    "dangling/more",
    "loop1",
    "loop1/x",
    "fifo",
    "a/b/f.txt/",
    "a/b/f.txt/..",
    "new/file.py",
    "a/b/new.py",
    "to_b/new.py",
    "a//b/./f.txt",
]


@pytest.mark.parametrize("rel", CASES)
def test_the_answer_is_realpaths(tree: Path, rel: str) -> None:
    path = f"{tree}/{rel}"
    assert real_path(path) == os.path.realpath(path)
    assert real_path(Path(path)) == os.path.realpath(Path(path))


def test_a_relative_path_is_taken_from_the_working_folder(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tree / "a")
    for rel in ("b", "up_c", "../to_b/f.txt", "", "nothing/here"):
        assert real_path(rel) == os.path.realpath(rel)


def test_a_nul_byte_is_refused_as_realpath_refuses_it(tree: Path) -> None:
    with pytest.raises(ValueError):
        os.path.realpath(f"{tree}/a\x00b")
    with pytest.raises(ValueError):
        real_path(f"{tree}/a\x00b")


NAMES = st.sampled_from(["a", "b", "c", "f.txt", "to_b", "abs_c", "chain", "up_c", "..", ".", "x"])


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(NAMES, max_size=6))
def test_any_walk_through_the_tree_agrees_with_realpath(tree: Path, parts: list[str]) -> None:
    path = os.path.join(tree, *parts)
    assert real_path(path) == os.path.realpath(path)


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, (1 << 20) - 1, 1 << 20, (1 << 20) + 7, 3 << 20])
def test_a_regular_file_is_read_whole(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    (tmp_path / "f").write_bytes(data)
    assert read_regular_bytes(tmp_path / "f") == data
    assert read_regular_bytes(tmp_path / "f", limit=size // 2) == data[: size // 2]


def test_a_proc_file_is_read_past_its_first_short_read() -> None:
    """/proc files have size 0 and come a page per read: the size never ends the read."""
    expected = Path("/proc/self/smaps").read_bytes()
    got = read_regular_bytes("/proc/self/smaps")
    assert got is not None and len(got) > 8192 and len(got) >= len(expected) // 2


def test_a_file_that_is_no_regular_file_is_not_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    assert read_regular_bytes(tmp_path / "fifo") is None  # not waited on
    assert read_regular_bytes(tmp_path) is None
    assert read_regular_bytes(tmp_path / "missing") is None


def test_a_fixed_real_path_is_remembered_until_something_changes_on_its_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "work" / "repo"
    root.mkdir(parents=True)
    lookups: list[object] = []
    real = fsread.real_path
    monkeypatch.setattr(fsread, "real_path", lambda p: lookups.append(p) or real(p))
    assert [fixed_real_path(root) for _ in range(4)] == [str(root)] * 4
    assert len(lookups) == 1
    # the folder on the way moved, and a symlink to it put in its place
    os.rename(tmp_path / "work", tmp_path / "moved")
    os.symlink(tmp_path / "moved", tmp_path / "work")
    assert fixed_real_path(root) == str(tmp_path / "moved" / "repo")
    assert fixed_real_path(root) == str(tmp_path / "moved" / "repo")  # not remembered now
    os.unlink(tmp_path / "work")
    os.symlink(tmp_path / "elsewhere", tmp_path / "work")
    assert fixed_real_path(root) == str(tmp_path / "elsewhere" / "repo")


def test_a_relative_or_unnormalised_fixed_path_is_looked_up(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tree)
    for rel in ("to_b", f"{tree}/to_b/..", f"{tree}/chain/../c"):
        assert fixed_real_path(rel) == os.path.realpath(rel)
