"""One scan of the working tree per round (SPEC §11; relay.gitscan, relay.treewrites).

With :meth:`GitRepo.remember_scans` (the goal loop's setting), what one ``git status`` found
stays true while nobody wrote the tree: the round message's status after relay's commit needs
no git process, and the round's commit stages only what the round-end scan found plus the files
relay wrote since. Every test checks what a user would see in the history and the tree: every
change committed, nothing extra, the tree clean afterwards; and how many git processes scan the
whole tree.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import relay.gitrepo
from relay import treewrites
from relay.fswrite import replace_file
from relay.gitrepo import GitRepo
from relay.tools import ToolContext, run_shell
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


def tool_context(root: Path, tmp_path: Path) -> ToolContext:
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    return ToolContext(repo_root=root, state_dir=root / ".git" / "relay", run_dir=run_dir)


# --------------------------------------------------------------------------- the write log


def test_the_write_log_names_files_and_knows_when_anything_may_have_changed(
    tmp_path: Path,
) -> None:
    start = treewrites.mark()
    assert treewrites.since(start) == frozenset()
    treewrites.wrote(tmp_path / "a")
    treewrites.wrote(tmp_path / "b")
    assert treewrites.since(start) == {tmp_path / "a", tmp_path / "b"}
    middle = treewrites.mark()
    treewrites.wrote_anything()
    assert treewrites.since(start) is None
    assert treewrites.since(middle) is None
    later = treewrites.mark()
    for n in range(treewrites.KEEP + 1):  # more named writes than the log keeps
        treewrites.wrote(tmp_path / str(n))
    assert treewrites.since(later) is None


# --------------------------------------------------------------------------- after a commit


def test_after_relays_commit_the_status_needs_no_git_process(
    remembering: tuple[Path, GitRepo], spawns: Spawns
) -> None:
    root, repo = remembering
    (root / "src" / "a.py").write_text("a = 2\n")
    repo.commit_all("relay: round 1")
    spawns.clear()
    assert repo.status_short() == ""
    assert repo.is_dirty_paths() == []
    assert repo.changed_paths(repo.head_sha()) == []
    assert spawns.commands == []
    assert porcelain(root) == ""


def test_a_file_relay_writes_after_the_commit_shows_and_is_committed_next(
    remembering: tuple[Path, GitRepo], spawns: Spawns
) -> None:
    root, repo = remembering
    repo.commit_all("relay: round 1")
    replace_file(root / "docs" / "x.md", b"changed\n")
    assert repo.status_short() == " M docs/x.md"
    spawns.clear()
    repo.commit_all("relay: round 2")
    assert spawns.full_scans() == 0  # the listed path is staged, the tree is not walked
    assert committed_files(root)["docs/x.md"] == "changed\n"
    assert porcelain(root) == ""


def test_a_shell_command_makes_the_next_look_scan_again(
    remembering: tuple[Path, GitRepo], spawns: Spawns, tmp_path: Path
) -> None:
    root, repo = remembering
    repo.commit_all("relay: round 1")
    result = run_shell(tool_context(root, tmp_path), "echo new > made-by-shell.txt")
    assert not result.is_error, result.content
    spawns.clear()
    assert repo.status_short() == "?? made-by-shell.txt"
    assert spawns.full_scans() == 1
    repo.commit_all("relay: round 2")
    assert committed_files(root)["made-by-shell.txt"] == "new\n"
    assert porcelain(root) == ""


def test_a_commit_or_staging_by_plain_git_drops_what_was_remembered(
    remembering: tuple[Path, GitRepo],
) -> None:
    root, repo = remembering
    repo.commit_all("relay: round 1")
    (root / "staged.txt").write_text("s\n")
    git(root, "add", "staged.txt")  # the index changed: the clean tree is no longer known
    assert repo.status_short() == "A  staged.txt"
    repo.commit_all("relay: round 2")
    (root / "committed.txt").write_text("c\n")
    git(root, "add", "committed.txt")
    git(root, "commit", "-q", "-m", "by hand")  # HEAD moved
    (root / "after.txt").write_text("later\n")
    assert repo.status_short() == "?? after.txt"


def test_without_remembering_every_look_scans(make_repo: Callable[..., Path]) -> None:
    root = make_repo()
    repo = GitRepo(root)
    repo.commit_all("relay: round 1")
    (root / "plain.txt").write_text("written without telling relay\n")
    assert repo.status_short() == "?? plain.txt"
    repo.commit_all("relay: round 2")
    assert "plain.txt" in committed_files(root)
    repo.close()


# --------------------------------------------------------------------------- the round's commit


def test_the_rounds_commit_stages_what_the_scan_found_and_relays_own_files(
    remembering: tuple[Path, GitRepo], spawns: Spawns, tmp_path: Path
) -> None:
    root, repo = remembering
    start = repo.head_sha()
    script = (
        "echo 'a = 2' > src/a.py && rm src/b.py && git rm -q docs/x.md && "
        "mkdir -p new/deep && echo n > new/deep/n.txt && echo t > 'with space.txt' && "
        "ln -s src/a.py link && chmod +x src/a.py"
    )
    result = run_shell(tool_context(root, tmp_path), script)
    assert not result.is_error, result.content
    spawns.clear()
    changed = repo.changed_paths(start)
    assert changed == [
        "docs/x.md",
        "link",
        "new/deep/n.txt",
        "src/a.py",
        "src/b.py",
        "with space.txt",
    ]
    (root / ".relay").mkdir()
    replace_file(root / ".relay" / "progress.md", b"# progress\n")  # relay's own file
    repo.commit_all("relay: round 1")
    assert spawns.full_scans() == 1  # the round-end status; the add is given the paths
    files = committed_files(root)
    assert set(files) == {
        "README.md",
        "src/a.py",
        "new/deep/n.txt",
        "with space.txt",
        "link",
        ".relay/progress.md",
    }
    assert git(root, "ls-files", "-s", "src/a.py").startswith("100755")
    assert git(root, "ls-files", "-s", "link").startswith("120000")
    assert porcelain(root) == ""


def test_an_ignored_file_relay_writes_is_not_committed(
    remembering: tuple[Path, GitRepo],
) -> None:
    root, repo = remembering
    (root / ".gitignore").write_text("cache/\n")
    repo.commit_all("relay: round 1")
    (root / "cache").mkdir()
    replace_file(root / "cache" / "state.json", b"{}")
    replace_file(root / "kept.txt", b"kept\n")
    repo.commit_all("relay: round 2")
    files = committed_files(root)
    assert "kept.txt" in files
    assert not any(p.startswith("cache/") for p in files)
    assert porcelain(root) == ""


def test_a_listed_path_git_refuses_falls_back_to_staging_everything(
    remembering: tuple[Path, GitRepo],
) -> None:
    root, repo = remembering
    repo.commit_all("relay: round 1")
    replace_file(root / "gone.txt", b"x\n")
    os.unlink(root / "gone.txt")  # named, then removed without a word: git knows no such path
    (root / "src" / "a.py").write_text("a = 3\n")  # an unannounced change, found by the fallback
    repo.commit_all("relay: round 2")
    assert committed_files(root)["src/a.py"] == "a = 3\n"
    assert porcelain(root) == ""


def test_relay_repairing_git_state_drops_what_was_remembered(
    remembering: tuple[Path, GitRepo],
) -> None:
    root, repo = remembering
    repo.commit_all("relay: round 1")
    snapshot = repo.config_snapshot()
    with (root / ".git" / "config").open("a") as fh:
        fh.write("[core]\n\texcludesFile = /nonexistent\n")
    (root / "after-restore.txt").write_text("seen only by a new scan\n")
    assert repo.restore_config(snapshot) == [".git/config"]
    assert repo.status_short() == "?? after-restore.txt"


# --------------------------------------------------------------------------- a whole goal


def test_a_goal_scans_the_tree_once_per_round_and_commits_everything(
    make_repo: Callable[..., Path],
    write_script: Callable[..., Path],
    relay_run: Callable[..., tuple[int, dict[str, Any], str]],
    spawns: Spawns,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_init = relay.gitrepo.GitRepo.__init__

    def init(self: GitRepo, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        self.remember_scans()  # as the goal loop does

    monkeypatch.setattr(relay.gitrepo.GitRepo, "__init__", init)
    repo = make_repo()
    rounds = 4
    responses = note_rounds(rounds)
    script = write_script(responses)
    starts: list[int] = []  # where each round's end began (its listing of the changes)
    inside: list[bool] = []
    for name in ("changed_paths", "stage_changes"):  # outside / inside the sandbox
        real = getattr(relay.gitrepo.GitRepo, name)

        def listing(self: GitRepo, since: str, real: Any = real) -> list[str]:
            if not inside:
                starts.append(len(spawns.commands))
            inside.append(True)
            try:
                return real(self, since)  # type: ignore[no-any-return]
            finally:
                inside.pop()

        monkeypatch.setattr(relay.gitrepo.GitRepo, name, listing)
    limits = ["--max-rounds", str(rounds), "--max-no-progress", str(rounds + 1)]
    _code, data, err = relay_run(repo, script, "Write notes.", *limits)
    assert data["rounds"] == rounds, err
    assert porcelain(repo) == ""
    for n in range(1, rounds + 1):
        assert git(repo, "show", f"HEAD:notes/r{n}.md") == f"round {n}\n"
    assert git(repo, "show", "HEAD:counter.txt") == f"{rounds}\n"
    # from the second round's end on: one full scan per round (the round-end status)
    tail = Spawns()
    tail.commands = spawns.commands[starts[1] : starts[-1]]
    assert tail.full_scans() == rounds - 2


def test_a_goal_file_edit_the_watcher_sees_counts_as_a_write_of_the_tree(tmp_path: Path) -> None:
    """The user edits the goal file between two commands of the model: the watcher's poll
    records the write, so a remembered scan of the tree is not reused and the round's commit
    carries the edit."""
    from relay import treewrites
    from relay.watch import SupplementWatcher

    goal = tmp_path / "GOAL.md"
    goal.write_text("first\n", encoding="utf-8")
    watcher = SupplementWatcher(tmp_path / "inbox", tmp_path / "done", goal)
    watcher.poll()  # the start: nothing new
    mark = treewrites.mark()
    goal.write_text("first\nsecond\n", encoding="utf-8")
    watcher.changed.set()  # what the file-system watch does on the edit
    assert [source for source, _ in watcher.poll()] == ["goal_file"]
    written = treewrites.since(mark)
    assert written == frozenset({goal})


def test_a_round_that_changed_only_tracked_files_commits_in_one_git_process(
    remembering: tuple[Path, GitRepo], spawns: Spawns, tmp_path: Path
) -> None:
    root, repo = remembering
    start = repo.head_sha()
    script = "echo 'a = 2' > src/a.py && rm src/b.py && chmod +x src/a.py"
    assert not run_shell(tool_context(root, tmp_path), script).is_error
    assert repo.changed_paths(start) == ["src/a.py", "src/b.py"]
    replace_file(root / "docs" / "x.md", b"rewritten by relay\n")  # a tracked file replaced
    spawns.clear()
    repo.commit_all("relay: round 1")
    assert spawns.staging() == ["commit"]  # `git commit --include` stages the paths
    files = committed_files(root)
    assert files["src/a.py"] == "a = 2\n" and "src/b.py" not in files
    assert files["docs/x.md"] == "rewritten by relay\n"
    assert git(root, "ls-files", "-s", "src/a.py").startswith("100755")
    assert porcelain(root) == ""


def test_a_file_relay_creates_after_the_scan_is_added_not_left_out(
    remembering: tuple[Path, GitRepo], spawns: Spawns, tmp_path: Path
) -> None:
    """``git commit --include`` leaves an untracked path out without a word: a file relay
    created after the round-end scan is staged with ``git add`` first."""
    root, repo = remembering
    start = repo.head_sha()
    assert not run_shell(tool_context(root, tmp_path), "echo 'a = 2' > src/a.py").is_error
    assert repo.changed_paths(start) == ["src/a.py"]
    (root / ".relay").mkdir()
    replace_file(root / ".relay" / "progress.md", b"# progress\n")  # new since the scan
    replace_file(root / ".relay" / "progress.md", b"# progress, again\n")  # still new
    spawns.clear()
    repo.commit_all("relay: round 1")
    assert spawns.staging() == ["add -A", "commit"]
    assert committed_files(root)[".relay/progress.md"] == "# progress, again\n"
    assert porcelain(root) == ""


def test_the_write_log_tells_replaced_files_from_new_ones(tmp_path: Path) -> None:
    start = treewrites.mark()
    treewrites.wrote(tmp_path / "kept", replaced=True)
    treewrites.wrote(tmp_path / "made")
    treewrites.wrote(tmp_path / "made", replaced=True)  # created since the mark all the same
    assert treewrites.since(start) == {tmp_path / "kept", tmp_path / "made"}
    assert treewrites.since(start, new_only=True) == {tmp_path / "made"}
    treewrites.wrote_anything()
    assert treewrites.since(start, new_only=True) is None
