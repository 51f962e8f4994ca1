"""What a run that stopped mid-way leaves, made whole before the goal goes on (SPEC §10, §11).

A run can stop at any instruction: ``kill -9``, a power cut, a second Ctrl+C. A round's commit
is its point of no return: before it the round is *interrupted*, after it the round is done,
whatever the store had time to record. :func:`recover` runs under the run lock when an
interrupted goal is resumed (and when a second Ctrl+C stops a run) and makes the store, git and
the tree agree again:

* relay's temporary files (a kill between writing one and renaming it) are removed, and
  relay's own files of the tree (progress file, goal state) are put back as the last commit has
  them: the next round writes them afresh from the store;
* rounds committed but not recorded get their commit, and the goal its counters (and a final
  status other than ``complete``) from the goal state that commit holds;
* a round that started but was never committed is closed: its changes are committed as
  ``relay: round N (interrupted)`` and it counts, so its number is never used again;
* a scripted model's script goes back to the last step the store recorded, so that the step in
  flight is made again (SPEC §13: the same script gives the same result).

A ``complete`` claim is kept by the store before its audit runs (:meth:`Store.add_claim`);
:func:`pending_claim` hands the one no audit has answered yet to the loop, which audits it again
before anything else, so a kill during the audit or before the goal was saved never loses it.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from pathlib import Path
from typing import Any

from relay.branch_trust import read_trusted
from relay.config import Config
from relay.errors import RelayError, RepoStateError
from relay.fswrite import is_temporary, put_own_file
from relay.gitrepo import GitRepo
from relay.goal import CLOSED_STATUSES, GoalStatus
from relay.protected import goal_state_path
from relay.store import GoalRecord, Round, Store

__all__ = ["interrupted", "pending_claim", "recover", "script_position", "settle"]

INDEX_LOCK_WAIT_S = 10.0
"""Seconds recovery waits for a git process the stopped run left (it finishes on its own)."""

SETTLE_WAIT_S = 2.0
"""The same wait when a second Ctrl+C stops a run (which should exit at once)."""

ADOPTED_STATUSES = frozenset(
    {"needs_user_input", "blocked", "limit_reached", "budget_limited", "terminated", "failed"}
)
"""Final statuses taken from a round's commit the store missed. ``complete`` is not among
them: a claim is audited again instead (SPEC §14: complete only after a passed audit)."""

_COUNTERS = ("rounds", "counted_rounds", "no_progress_streak", "blocked_reports", "auto_replies")


def interrupted(store: Store | None, goal: GoalRecord | None, carried: object) -> bool:
    """Whether ``goal``'s last run stopped without finishing its bookkeeping: still
    ``active`` with no run (a crash; not for a goal ``carried`` by its branch from another
    machine), paused by a second Ctrl+C, or a last round that never ended or was never
    counted. Its leftovers in the tree are then relay's to commit (:func:`recover`)."""
    if goal is None:
        return False
    if goal.status == GoalStatus.ACTIVE and carried is None:
        return True
    if store is None:
        return False
    if goal.status == GoalStatus.PAUSED and goal.reason == "interrupted":
        return True
    last = store.last_round(goal.id)
    return last is not None and (not last.finished or last.n > goal.rounds)


def pending_claim(store: Store, goal_id: str) -> dict[str, Any] | None:
    """The ``update_goal`` arguments of the goal's latest ``complete`` claim that no failed
    audit answered, or None; the loop audits it again before its first model call."""
    return store.pending_claim(goal_id)


def script_position(store: Store | None, goal: GoalRecord) -> int:
    """Where a scripted model continues the goal's script: its model calls, less those of
    the step in flight when the run stopped (counted, but the step never recorded), so that
    the step is made again. A claim in flight is not made again: it is audited again."""
    last = store.last_round(goal.id) if store is not None else None
    if last is None or last.model_calls is None or last.claim:
        return goal.model_calls
    if last.finished and last.n <= goal.rounds:
        return goal.model_calls  # the round is closed: nothing is in flight
    return min(goal.model_calls, last.model_calls)


def settle(git: GitRepo, store: Store, goal_id: str, config: Config) -> None:
    """:func:`recover` as a run stopped by a second Ctrl+C leaves: committed and resumable.
    A failure (a third Ctrl+C, git refusing) is left to the next ``relay resume``."""
    with contextlib.suppress(RelayError, OSError, sqlite3.Error):
        goal = store.goal(goal_id)
        if goal.status not in CLOSED_STATUSES:
            recover(git, store, goal, config, wait_s=SETTLE_WAIT_S)


def recover(
    git: GitRepo,
    store: Store,
    goal: GoalRecord,
    config: Config,
    *,
    wait_s: float = INDEX_LOCK_WAIT_S,
) -> GoalRecord:
    """Make the store, git and the tree agree after a run that stopped mid-way (see the
    module's docstring); the goal's branch must be checked out. Records a ``recovered``
    event naming what was done. Returns the goal as it is now. ``wait_s``: seconds to wait
    for a git process that holds the index.

    Raises:
        RepoStateError: a git process keeps the index locked, or git refused to commit.
        GoalStateError: another process changed the goal meanwhile.
    """
    _wait_for_index(git, wait_s)
    position = script_position(store, goal)
    done = _clean_tree(git, config)
    committed = _round_commits(git, goal)
    fields, notes = _close_rounds(git, store, goal, config, committed)
    if goal.model.startswith("scripted:") and position < goal.model_calls:
        fields["model_calls"] = position
        notes.append("the scripted model makes the step in flight again")
    if fields:
        store.save_goal(goal.id, goal.status, **fields)
    notes = done + notes
    if notes:
        store.add_event(goal.id, "recovered", "; ".join(notes))
    return store.goal(goal.id)


def _wait_for_index(git: GitRepo, wait_s: float) -> None:
    """Wait up to ``wait_s`` seconds until no git process holds the index (one the stopped
    run started finishes on its own); raise ``RepoStateError`` naming the lock if it stays."""
    lock = git.git_dir / "index.lock"
    deadline = time.monotonic() + wait_s
    while lock.exists():
        if time.monotonic() > deadline:
            raise RepoStateError(
                f"{lock} exists: a git process is using the repository; if none is running, "
                "remove the file, then `relay resume`"
            )
        time.sleep(0.05)


def _own_paths(config: Config) -> tuple[str, ...]:

    return (Path(config.progress.path).as_posix(), goal_state_path(config))


def _clean_tree(git: GitRepo, config: Config) -> list[str]:
    """Remove relay's temporary files and put relay's own files back as HEAD has them;
    returns what was done, in words."""
    done: list[str] = []
    for rel in git.files():
        if is_temporary(Path(rel).name) and git.file_at("HEAD", rel) is None:
            (git.root / rel).unlink(missing_ok=True)
            done.append(f"removed the unfinished write {rel}")
    for rel in _own_paths(config):
        path = git.root / rel
        text = git.file_at("HEAD", rel)
        if text is None:
            if path.is_file() or path.is_symlink():
                path.unlink()
                done.append(f"removed the uncommitted {rel}")
            continue
        try:
            current = path.read_text(encoding="utf-8") if not path.is_symlink() else None
        except (OSError, UnicodeDecodeError):
            current = None
        if current != text:
            put_own_file(git.root, path, text.encode("utf-8"))
            done.append(f"put {rel} back as the last commit has it")
    return done


def _round_commits(git: GitRepo, goal: GoalRecord) -> dict[int, str]:
    """``{round number: commit}`` of the goal's round commits since its base commit on the
    checked-out branch (the ``Relay-Goal``/``Relay-Round`` trailers); the newest commit wins
    if a number appears twice."""
    rounds: dict[int, str] = {}
    for sha, trailers in git.commit_trailers(goal.base_commit):
        n = trailers.get("Relay-Round", "")
        if trailers.get("Relay-Goal") == goal.id and n.isdigit():
            rounds.setdefault(int(n), sha)
    return rounds


def _close_rounds(
    git: GitRepo, store: Store, goal: GoalRecord, config: Config, committed: dict[int, str]
) -> tuple[dict[str, Any], list[str]]:
    """Record the commits of rounds the store missed and close an uncommitted last round;
    returns the goal's fields to write and what was done, in words."""
    rows = {r.n: r for r in store.rounds(goal.id) if r.n > goal.rounds}
    highest = max([goal.rounds, *committed, *rows])
    notes: list[str] = []
    for n, sha in sorted(committed.items()):
        if n <= goal.rounds or (n in rows and rows[n].commit_sha == sha):
            continue
        if n not in rows:  # committed, but the store never recorded the round's start
            store.start_round(goal.id, n, "recovered")
        ended = n in rows and rows[n].finished
        store.end_round(goal.id, n, **_closing(rows.get(n), sha, interrupted=not ended))
        notes.append(f"round {n} was committed ({sha[:7]}); recorded")
    if highest <= goal.rounds:
        return {}, notes
    if highest in committed:
        return _committed_fields(git, goal, config, highest, committed[highest]), notes
    sha = _commit_leftovers(git, goal, config, highest)
    store.end_round(goal.id, highest, **_closing(rows[highest], sha, interrupted=True))
    kept = f"its changes are committed ({sha[:7]})" if sha else "it left no change"
    notes.append(f"round {highest} was interrupted; {kept}")
    return _counted(goal, highest), notes


def _closing(row: Round | None, sha: str | None, *, interrupted: bool) -> dict[str, Any]:
    """The fields that close a round's record: its commit and, for a round the run never
    finished, the end reason ``interrupted`` (and a handoff saying so, if it wrote none)."""
    fields: dict[str, Any] = {"commit_sha": sha}
    if interrupted:
        fields["end_reason"] = "interrupted"
        if row is None or row.handoff is None:
            fields.update(
                handoff="(interrupted: the run stopped during this round)", handoff_auto=1
            )
    return fields


def _counted(goal: GoalRecord, n: int) -> dict[str, Any]:
    """The goal's round counts once rounds up to ``n`` are done (each one counts)."""
    return {"rounds": n, "counted_rounds": goal.counted_rounds + n - goal.rounds}


def _commit_leftovers(git: GitRepo, goal: GoalRecord, config: Config, n: int) -> str | None:
    """Commit what an interrupted round ``n`` left in the tree; None when it left nothing."""
    if not git.is_dirty_paths():
        return None
    return git.commit_all(
        f"relay: round {n} (interrupted)",
        body="The run stopped in this round; these are the changes it left.",
        trailers={"Relay-Goal": goal.id, "Relay-Round": str(n)},
        author_name=config.git.author_name,
        author_email=config.git.author_email,
    )


def _committed_fields(
    git: GitRepo, goal: GoalRecord, config: Config, n: int, sha: str
) -> dict[str, Any]:
    """The goal's counters (and a final status other than ``complete``) as the goal state
    committed with round ``n`` (commit ``sha``) has them; the round counts alone when it
    cannot be read or does not carry relay's seal made with this machine's key (a commit
    with relay's trailers may be the model's, SPEC §14: its counters would reset the limits
    and the time budget)."""
    text = git.file_at(sha, goal_state_path(config))
    carried = read_trusted(text, f"the goal state of commit {sha[:7]}")
    state = carried["goal"] if carried is not None else {}
    if state.get("id") != goal.id or state.get("rounds") != n:
        return _counted(goal, n)
    fields = {name: state[name] for name in _COUNTERS}
    fields["elapsed_s"] = state["elapsed_s"]
    fields["progress_text"] = git.file_at(sha, Path(config.progress.path).as_posix())
    stopped_mid_way = goal.status == GoalStatus.ACTIVE or goal.reason == "interrupted"
    if state.get("status") in ADOPTED_STATUSES and stopped_mid_way:  # never over a user's word
        fields.update(
            status=state["status"],
            reason=state.get("reason"),
            message=state.get("message"),
            question=state.get("question"),
        )
    return fields
