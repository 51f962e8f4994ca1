"""The round's changes listed and staged by one ``git add -A --verbose`` (relay.gitstage):
what a user sees in the history is the same as with a ``git status`` first, every change is
committed and the listing is exact; whenever it could not be exact (someone staged or committed,
a submodule, a file name git's listing cannot show unambiguously) relay scans as before."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from relay.gitrepo import GitRepo
from relay.gitstage import parse_verbose_add
from tests.conftest import git
from tests.git_support import (
    Spawns,
    committed_files,
    note_rounds,
    porcelain,
    remembering,
    spawns,
)

__all__ = ["remembering", "spawns"]  # fixtures


@pytest.fixture()
def round_one(remembering: tuple[Path, GitRepo]) -> tuple[Path, GitRepo, str]:
    """The tree, its repository object (remembering its scans) and the sha of relay's first
    commit, as a goal's round leaves them."""
    root, repo = remembering
    repo.commit_all("relay: round 1")
    return root, repo, repo.head_sha()


def test_the_listing_of_git_add_is_read_with_what_is_on_disk(tmp_path: Path) -> None:
    (tmp_path / "new.py").write_text("x\n")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "changed.md").write_text("y\n")
    out = b"remove 'gone.txt'\nadd 'new.py'\nadd 'd/changed.md'\n"
    assert parse_verbose_add(out, tmp_path) == ["d/changed.md", "gone.txt", "new.py"]
    assert parse_verbose_add(b"", tmp_path) == []


def test_a_listed_file_must_have_changed_since_relays_commit(tmp_path: Path) -> None:
    (tmp_path / "old.py").write_text("x\n")
    later = (tmp_path / "old.py").lstat().st_ctime_ns + 1
    assert parse_verbose_add(b"add 'old.py'\n", tmp_path, later) is None
    assert parse_verbose_add(b"add 'old.py'\n", tmp_path, later - 1) == ["old.py"]


@pytest.mark.parametrize(
    "out",
    [
        b"add 'missing.py'\n",  # listed as added, not there: not what git said
        b"remove 'new.py'\n",  # listed as removed, still there
        b"add 'new.py'\nadd 'new.py'\n",
        b"warning: something\nadd 'new.py'\n",
        b"add 'new\n",  # a name with a line break in it
    ],
)
def test_a_listing_that_cannot_be_read_for_certain_is_refused(tmp_path: Path, out: bytes) -> None:
    (tmp_path / "new.py").write_text("x\n")
    assert parse_verbose_add(out, tmp_path) is None


def test_after_relays_commit_one_git_process_lists_and_stages_the_round(
    round_one: tuple[Path, GitRepo, str], spawns: Spawns
) -> None:
    root, repo, start = round_one
    (root / "src" / "a.py").write_text("a = 2\n")  # as a shell command would, unannounced
    (root / "src" / "new.py").write_text("n\n")
    (root / "docs" / "x.md").unlink()
    (root / "src" / "b.py").write_text("b = 1\n")  # rewritten unchanged: not a change
    spawns.clear()
    assert repo.stage_changes(start) == ["docs/x.md", "src/a.py", "src/new.py"]
    assert spawns.staging() == ["add -A"]
    (root / ".relay").mkdir()
    from relay.fswrite import replace_file

    replace_file(root / ".relay" / "progress.md", b"round 2\n")  # relay's own file, after
    repo.commit_all("relay: round 2")
    assert spawns.staging() == ["add -A", "add -A", "commit"]  # the new own file: listed add
    files = committed_files(root)
    assert files["src/a.py"] == "a = 2\n" and files["src/new.py"] == "n\n"
    assert "docs/x.md" not in files and files[".relay/progress.md"] == "round 2\n"
    assert porcelain(root) == ""
    assert repo.status_short() == ""


def test_a_staged_listing_is_not_taken_for_a_clean_tree(
    remembering: tuple[Path, GitRepo],
) -> None:
    root, repo = remembering
    repo.commit_all("relay: round 1")
    (root / "src" / "a.py").write_text("a = 2\n")
    assert repo.stage_changes(repo.head_sha()) == ["src/a.py"]
    assert repo.status_short() == "M  src/a.py"
    assert repo.is_dirty_paths() == ["src/a.py"]


def scanned_answer(root: Path, repo: GitRepo, since: str) -> list[str]:
    fresh = GitRepo(root)
    try:
        return fresh.changed_paths(since)
    finally:
        fresh.close()


def test_what_someone_else_staged_is_listed_too(
    round_one: tuple[Path, GitRepo, str], spawns: Spawns
) -> None:
    root, repo, start = round_one
    (root / "staged.txt").write_text("s\n")
    git(root, "add", "staged.txt")  # the index no longer holds HEAD's tree
    (root / "src" / "a.py").write_text("a = 3\n")
    spawns.clear()
    assert repo.stage_changes(start) == ["src/a.py", "staged.txt"]
    assert "status" in spawns.staging()  # it scanned instead


def test_a_commit_made_meanwhile_is_part_of_the_rounds_changes(
    round_one: tuple[Path, GitRepo, str],
) -> None:
    root, repo, start = round_one
    (root / "committed.txt").write_text("c\n")
    git(root, "add", "committed.txt")
    git(root, "commit", "-q", "-m", "by hand")
    (root / "after.txt").write_text("later\n")
    assert repo.stage_changes(start) == ["after.txt", "committed.txt"]


def test_a_file_name_that_would_read_as_two_lines_is_listed_exactly(
    remembering: tuple[Path, GitRepo],
) -> None:
    root, repo = remembering
    for decoy in ("q", "r"):  # files that exist, unchanged in the round
        (root / decoy).write_text("decoy\n")
    time.sleep(0.05)  # past the kernel's coarse clock: the commit is later than the decoys
    repo.commit_all("relay: round 1")
    start = repo.head_sha()
    tricky = "q'\nadd 'r"  # git prints: add 'q'  /  add 'r'
    (root / tricky).write_text("t\n")
    (root / "src" / "a.py").write_text("a = 4\n")
    assert parse_verbose_add(b"add 'q'\nadd 'src'\n", root) is None  # a folder is not listed
    expected = scanned_answer(root, repo, start)
    assert tricky in expected
    assert repo.stage_changes(start) == expected
    repo.commit_all("relay: round 2")
    assert tricky in committed_files(root)
    assert porcelain(root) == ""


def test_without_a_commit_of_relays_own_it_scans(
    make_repo: Callable[..., Path], spawns: Spawns
) -> None:
    root = make_repo({"a.txt": "a\n"})
    repo = GitRepo(root)
    repo.remember_scans()
    (root / "a.txt").write_text("b\n")
    spawns.clear()
    assert repo.stage_changes(repo.head_sha()) == ["a.txt"]
    assert spawns.staging() == ["status"]
    repo.close()


def test_gits_parallel_lstat_is_switched_off_for_a_small_index(
    make_repo: Callable[..., Path],
) -> None:
    """Starting git's preload threads costs more than it saves below some thousands of
    tracked files (bench/overhead.py); relay says so on its git command lines."""
    from relay.gitsafe import PRELOAD_MIN_ENTRIES, index_entries

    root = make_repo({"a.txt": "a\n"})
    repo = GitRepo(root)
    try:
        entries = index_entries(root / ".git" / "index")
        assert entries is not None and entries < PRELOAD_MIN_ENTRIES
        assert "core.preloadIndex=false" in repo._git.command(
            ["status"], read_only=True, network=False
        )
        index = root / ".git" / "index"
        data = bytearray(index.read_bytes())
        data[8:12] = PRELOAD_MIN_ENTRIES.to_bytes(4, "big")  # what the header says counts
        index.write_bytes(bytes(data))
        assert "core.preloadIndex=false" not in repo._git.command(
            ["status"], read_only=True, network=False
        )
        index.unlink()
        assert "core.preloadIndex=false" not in repo._git.command(
            ["status"], read_only=True, network=False
        )
    finally:
        repo.close()


def test_a_fifo_in_place_of_the_index_is_not_waited_on(tmp_path: Path) -> None:
    from relay.gitsafe import index_entries

    os.mkfifo(tmp_path / "index")  # a model without the sandbox could plant one
    assert index_entries(tmp_path / "index") is None


def test_a_sandboxed_goal_ends_each_round_with_one_add_and_one_commit(
    make_repo: Callable[..., Path],
    write_script: Callable[..., Path],
    relay_run: Callable[..., tuple[int, dict[str, Any], str]],
    spawns: Spawns,
) -> None:
    """Inside the sandbox the model cannot touch the git directories, so from the second
    round on a round's end lists and stages with ``git add -A --verbose`` and commits: no
    ``git status``; every change is committed and the round records list them."""
    from tests.sandbox_support import require_bwrap

    require_bwrap()
    repo = make_repo(config={"sandbox": {"mode": "required"}})
    rounds = 3
    responses = note_rounds(rounds)
    limits = ["--max-rounds", str(rounds), "--max-no-progress", str(rounds + 1)]
    _code, data, err = relay_run(repo, write_script(responses), "Write notes.", *limits)
    assert data["rounds"] == rounds, err
    assert porcelain(repo) == ""
    assert git(repo, "show", "HEAD:counter.txt") == f"{rounds}\n"
    names = spawns.staging()
    assert names.count("add -A") >= rounds - 1  # rounds 2.. (round 1 has no commit of relay's yet)
    last_status = max(i for i, name in enumerate(names) if name == "status")
    first_verbose = next(
        i for i, c in enumerate(spawns.commands) if "--verbose" in c and "add" in c
    )
    assert last_status < first_verbose  # once staging took over, no tree scan by status
    state = json.loads(git(repo, "show", "HEAD:.relay/goal.json"))
    recorded = [set(r["files_changed"]) for r in state["rounds"]][-2:]
    assert recorded == [{"notes/r2.md", "counter.txt"}, {"notes/r3.md", "counter.txt"}]
