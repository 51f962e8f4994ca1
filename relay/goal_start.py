"""Creating a goal, and making the open goal active again (SPEC §10, §11).

Both run under the working tree's run lock, after every check of :mod:`relay.runner` passed:
they are the first changes a run makes to the repository and the store.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from relay import recovery
from relay.errors import GoalStateError, RepoStateError
from relay.gitrepo import goal_slug
from relay.goal import CLOSED_STATUSES, RESUMABLE_STATUSES, GoalStatus
from relay.protected import rel_inside
from relay.supervisor import Counters
from relay.text import counted
from relay.watch import file_digest

if TYPE_CHECKING:
    from relay.config import Config
    from relay.gitrepo import GitRepo
    from relay.store import GoalRecord, Store

__all__ = [
    "commit_users_changes",
    "create_goal",
    "limits_line",
    "refuse_uncommitted_goal_file",
    "resume_goal",
]


def limits_line(config: Config) -> str:
    """The effective limits of a run, as printed when it starts (SPEC §7.2)."""
    lim = config.limits
    parts = [
        f"{counted(lim.max_rounds_total, 'round')} in total",
        f"{lim.max_no_progress} without progress",
        f"blocked accepted at report {lim.blocked_accept_at}",
        f"{counted(lim.max_steps_per_round, 'step')} per round",
    ]
    if lim.token_budget:
        parts.append(f"token budget {lim.token_budget}")
    if lim.time_budget:
        parts.append(f"time budget {lim.time_budget:.0f} s")
    if lim.cost_budget:
        parts.append(f"cost budget ${lim.cost_budget:.2f}")
    return ", ".join(parts)


def commit_users_changes(git: GitRepo, config: Config, body: str) -> str | None:
    """Commit the uncommitted changes that ``--allow-dirty`` let into the goal, so that they
    are the user's commit and not part of the agent's next round (SPEC §11).

    Args:
        git: the repository, on the goal's branch.
        config: for the author of relay's commits.
        body: the commit message's body: which command committed them, and when.

    Returns:
        The new commit's sha, or None when the tree was clean.
    """
    if not git.is_dirty_paths():
        return None
    return git.commit_all(
        "relay: uncommitted changes carried into the goal",
        body=body,
        author_name=config.git.author_name,
        author_email=config.git.author_email,
    )


def refuse_uncommitted_goal_file(git: GitRepo, goal_file: Path | None) -> None:
    """A new goal's ``--goal-file`` inside the tree and not committed makes the tree dirty:
    say so plainly, with the ways on (SPEC §11). Raises RepoStateError."""
    rel = rel_inside(git.root, goal_file)
    if rel is None or git.is_dirty_paths() != [rel]:  # else the usual listing says it all
        return
    raise RepoStateError(
        f"the goal file {rel} has uncommitted changes, and relay starts only from a clean tree:"
        f" commit it (git add {shlex.quote(rel)} && git commit -m 'Add the goal'), keep it"
        " outside the repository (its edits still reach the running goal), or pass"
        " --allow-dirty to have relay commit it as yours"
    )


def _goal_branch(
    git: GitRepo, config: Config, goal_text: str, *, branch: str | None, in_place: bool
) -> tuple[str, str]:
    """Check out the new goal's branch (``--in-place``: the current one; ``--branch``: that
    one, created or taken from the remote; else a new ``relay/<slug>``); returns the branch and
    the base commit. Raises ``RepoStateError`` for ``--in-place`` on a detached HEAD."""
    base = git.head_sha()
    if in_place:
        current = git.current_branch()
        if current is None:
            raise RepoStateError("HEAD is detached; --in-place needs a branch")
        return current, base
    if branch:
        ref = git.branch_ref(branch)
        if ref is not None and ref != branch:  # only on the remote: build on it
            git.track_branch(branch)
        if ref is None:
            git.create_branch(branch)
            return branch, base
        git.checkout(branch)
        return branch, git.head_sha()
    branch = git.unique_branch(config.git.branch_prefix + goal_slug(goal_text))
    git.create_branch(branch)
    return branch, base


def create_goal(
    git: GitRepo,
    store: Store,
    config: Config,
    goal_text: str,
    *,
    goal_file: Path | None,
    branch: str | None,
    in_place: bool,
    started_with: dict[str, Any],
) -> GoalRecord:
    """Create a goal: its branch, a commit of changes ``--allow-dirty`` carried in (the base),
    and its store row with the frozen deliverables, limits and settings (SPEC §9, §11).

    Args:
        goal_file: the ``--goal-file`` path, if any (stored repo-relative when inside).
        branch: ``--branch``; in_place: ``--in-place``.
        started_with: the front matter and flag overrides the goal started with.

    Raises:
        RepoStateError: the branch cannot be made. Whatever fails once it is checked out
            (a commit, the store) is raised after the start is undone
            (:meth:`relay.gitrepo.GitRepo.undo_branch_start`): the branch it created is
            deleted, and HEAD and the uncommitted changes are back as they were; once the
            goal's row is stored (a Ctrl+C just after) it all stays, for ``relay resume``.
    """
    before, index = git.current_branch(), git.index_tree()
    created = not in_place and not (branch and git.branch_exists(branch))
    branch, base = _goal_branch(git, config, goal_text, branch=branch, in_place=in_place)
    try:
        return _record_goal(git, store, config, goal_text, goal_file, branch, base, started_with)
    except BaseException:  # nothing of the start is left: no branch, no commit (issue 28)
        if _stored(store, branch):  # the goal is stored (a Ctrl+C just after): resume it
            raise
        try:
            git.undo_branch_start(before, branch, base, created=created, index=index)
        except RepoStateError as exc:
            print(f"warning: {exc}", file=sys.stderr, flush=True)
        raise


def _stored(store: Store, branch: str) -> bool:
    """Whether the store holds an open goal on ``branch`` (its row committed before the
    failure): then the start is not undone, so that ``relay resume`` continues it."""
    try:
        goal = store.latest_goal(open_only=True)
    except Exception:  # the store itself failed: nothing of the goal was kept
        return False
    return goal is not None and goal.branch == branch


def _record_goal(
    git: GitRepo,
    store: Store,
    config: Config,
    goal_text: str,
    goal_file: Path | None,
    branch: str,
    base: str,
    started_with: dict[str, Any],
) -> GoalRecord:
    """:func:`create_goal` once the goal's branch is checked out: commit what
    ``--allow-dirty`` carried in, and store the goal."""
    base = (
        commit_users_changes(
            git, config, "Committed by relay run --allow-dirty before the goal started."
        )
        or base
    )
    rel = rel_inside(git.root, goal_file) if goal_file else None
    goal = store.create_goal(
        text=goal_text,
        goal_file=rel,
        branch=branch,
        base_commit=base,
        mode=config.mode,
        model=config.model,
        worker=config.worker,
        deliverables=[d.model_dump(exclude_none=True) for d in config.deliverables],
        limits=config.limits.model_dump(),
        overrides=started_with,
        goal_file_digest=file_digest(git.root / rel) if rel else None,
    )
    store.add_event(
        goal.id,
        "goal_started",
        f"branch {branch}, base {base[:7]}, limits: {limits_line(config)}",
    )
    return goal


def resume_goal(
    git: GitRepo,
    store: Store,
    goal: GoalRecord,
    config: Config,
    *,
    interrupted: bool,
    allow_dirty: bool = False,
) -> tuple[GoalRecord, Counters]:
    """Make the open goal active again (SPEC §10). An interrupted round (a crash, a second
    Ctrl+C) is closed first; else, with ``allow_dirty`` (``relay resume --allow-dirty``), the
    uncommitted changes are committed as the user's. A user's resume of a stopped goal
    restarts the round counts. Returns the goal as stored now and its counters.

    Raises:
        GoalStateError: the goal cannot be resumed. RepoStateError: its branch is gone.
    """
    if goal.status not in RESUMABLE_STATUSES or goal.status in CLOSED_STATUSES:
        raise GoalStateError(f"goal {goal.id} is {goal.status} and cannot be resumed")
    if goal.branch and git.current_branch() != goal.branch:
        if not git.branch_exists(goal.branch):
            raise RepoStateError(
                f"the goal's branch {goal.branch} no longer exists; `relay clear` drops the goal"
            )
        git.checkout(goal.branch)
    if interrupted:
        goal = recovery.recover(git, store, goal, config)
    counters = Counters(
        rounds=goal.rounds,
        counted_rounds=goal.counted_rounds,
        no_progress_streak=goal.no_progress_streak,
        blocked_reports=goal.blocked_reports,
        auto_replies=goal.auto_replies,
    )
    if not interrupted and allow_dirty:
        body = "Committed by relay resume --allow-dirty before the goal continued."
        commit_users_changes(git, config, body)
    fields: dict[str, Any] = {"status": "active", "reason": None, "message": None}
    if goal.status != GoalStatus.ACTIVE:  # the user resumes a stopped goal
        counters = counters.restarted()
        fields.update(
            question=None,
            counted_rounds=0,
            no_progress_streak=0,
            blocked_reports=0,
            risk_score=0.0,
            failure_streak=0,
            diagnosis=None,
        )
        store.add_event(goal.id, "resumed", f"resumed from {goal.status}; round counts restarted")
    store.save_goal(goal.id, goal.status, **fields)
    return store.goal(goal.id), counters
