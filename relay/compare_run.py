"""One run of a comparison: the goal in one mode in its worktree, and its figures read back
from its store and git afterwards (SPEC §3; :mod:`relay.compare`)."""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from relay import runner
from relay.compare_result import RunRow
from relay.display import call_summary
from relay.errors import RelayError
from relay.gitrepo import GitRepo
from relay.json_output import goal_json
from relay.loop import Display
from relay.models.base import ToolCall
from relay.protected import rel_inside
from relay.store import Store
from relay.terminal import printable

__all__ = ["LineDisplay", "RunDone", "RunSpec", "diff_shortstat", "mapped", "read_row", "run_one"]


@dataclass(frozen=True)
class RunSpec:
    """One run to make: picklable, for a worker process."""

    mode: str
    repetition: int
    label: str
    branch: str
    worktree: Path
    request: runner.RunRequest
    show_progress: bool
    verbose: bool = False


@dataclass(frozen=True)
class RunDone:
    goal_id: str | None
    run_id: str | None
    exit_code: int | None
    store_path: str | None
    error: str | None


class LineDisplay(Display):
    """One line per round on stderr, prefixed with the run's label; ``verbose``: also one
    line per tool call."""

    def __init__(self, label: str, *, verbose: bool = False) -> None:
        self.label = label
        self.verbose = verbose

    def tool_called(self, call: ToolCall, result: str, is_error: bool) -> None:
        if self.verbose:
            mark = "✗" if is_error else "✓"
            line = printable(f"[{self.label}]   {mark} {call_summary(call)}")
            print(line, file=sys.stderr, flush=True)

    def round_ended(self, round_n: int, reason: str, commit: str | None) -> None:
        sha = f", commit {commit[:7]}" if commit else ""
        line = printable(f"[{self.label}] round {round_n} ended: {reason}{sha}")
        print(line, file=sys.stderr, flush=True)

    def event(self, kind: str, detail: str) -> None:
        if kind == "goal_ended":
            print(printable(f"[{self.label}] {detail}"), file=sys.stderr, flush=True)


def run_one(spec: RunSpec) -> RunDone:
    """Run one mode's goal in its worktree (in this process); errors become a result."""
    display = LineDisplay(spec.label, verbose=spec.verbose) if spec.show_progress else None
    try:
        outcome = runner.run(spec.request, display)
    except RelayError as exc:
        return RunDone(None, None, exc.exit_code, None, f"{type(exc).__name__}: {exc}")
    except SystemExit as exc:  # a second Ctrl+C: the goal stays resumable in its worktree
        return RunDone(None, None, int(exc.code or 130), None, "interrupted")
    return RunDone(
        outcome.goal_id,
        outcome.run_dir.name,
        outcome.exit_code,
        str(outcome.store_path),
        None,
    )


_SHORTSTAT = re.compile(
    r"(\d+) files? changed(?:, (\d+) insertions?\(\+\))?(?:, (\d+) deletions?\(-\))?"
)


def diff_shortstat(
    root: Path, base: str, branch: str, exclude: Sequence[str]
) -> tuple[int, int, int]:
    """``(files changed, lines added, lines removed)`` between ``base`` and ``branch``
    (``git diff --shortstat base..branch``), leaving out the ``exclude`` paths."""
    git = GitRepo(root)
    try:
        out = git.shortstat(base, branch, exclude)
    finally:
        git.close()
    m = _SHORTSTAT.search(out)
    if not m:
        return 0, 0, 0
    return int(m.group(1)), int(m.group(2) or 0), int(m.group(3) or 0)


def mapped(root: Path, worktree: Path, path: Path | None) -> Path | None:
    """``path`` inside the main tree → the same path inside ``worktree``; else unchanged."""
    rel = rel_inside(root, path)
    if path is None or rel is None:
        return path.resolve() if path is not None else None
    return worktree / rel


def read_row(
    row: RunRow, done: RunDone, git_root: Path, base: str, exclude: Sequence[str]
) -> RunRow:
    """Fill ``row`` with the figures of its finished run, read from the run's store and git.

    Args:
        row: the run's row (mode, label, branch, worktree already set).
        done: how the run ended (goal id, store path, exit code or error).
        git_root: the main working tree (branches are shared by all worktrees).
        base: the base commit.
        exclude: repository paths left out of the line counts (relay's committed files).
    """
    row.exit_code, row.error, row.run_id = done.exit_code, done.error, done.run_id
    if done.goal_id is None or done.store_path is None:
        return row
    row.goal_id, row.store_path = done.goal_id, done.store_path
    store = Store(Path(done.store_path))
    try:
        data = goal_json(store, done.goal_id)
        goal = store.goal(done.goal_id)
        rounds = store.rounds(done.goal_id)
        steps = store.steps(done.goal_id)
    finally:
        store.close()
    row.status, row.reason, row.message = data["status"], data["reason"], data["message"]
    row.rounds = data["rounds"]
    row.model_calls = goal.model_calls
    row.tool_calls = sum(r.tool_calls for r in rounds)
    tokens = data["tokens"]
    row.uncached_input, row.cache_write = tokens["uncached_input"], tokens["cache_write"]
    row.cached_input, row.output = tokens["cached_input"], tokens["output"]
    row.cost_usd, row.elapsed_s = data["cost_usd"], data["elapsed_s"]
    audit = data["audit"]
    row.audit = "none" if not audit else ("passed" if audit["passed"] else "failed")
    row.final_response = next((s["text"] for s in reversed(steps) if (s["text"] or "").strip()), "")
    row.files_changed, row.lines_added, row.lines_removed = diff_shortstat(
        git_root, base, row.branch, exclude
    )
    return row
