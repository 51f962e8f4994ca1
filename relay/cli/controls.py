"""The user controls of a goal (SPEC §10): ``relay pause``, ``relay clear``, ``relay say``.

Each refuses a process started by the running goal's own tool calls (SPEC §14).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Annotated

import typer

from relay.cli.app import app, err, open_goal_store, the_open_goal
from relay.cli.options import ConfigOpt, RepoOpt
from relay.errors import ConfigError, GoalStateError

__all__ = ["clear", "pause", "say"]


def _signal_holder(state_dir: Path) -> int | None:
    """Ask the process running the goal to stop at once (its tool's process group is
    stopped); returns its PID, or None when no run is live."""
    from relay.interrupts import PAUSE_SIGNAL
    from relay.runlock import lock_holder

    pid = lock_holder(state_dir)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, PAUSE_SIGNAL)
    return pid


@app.command()
def pause(repo: RepoOpt = Path("."), config: ConfigOpt = None) -> None:
    """Pause the running goal: its tool's process group is stopped and no model call follows
    until `relay resume`.

    \b
    Example: relay pause
    """
    from relay.goal import GoalStatus

    store, state_dir = open_goal_store(repo, config, "pause")
    with store:
        goal = the_open_goal(store)
        if goal.status != GoalStatus.ACTIVE:
            raise GoalStateError(f"goal {goal.id} is {goal.status}, not running; nothing to pause")
        store.save_goal(
            goal.id, "active", status="paused", reason="user", message="Paused by relay pause."
        )
        store.add_event(goal.id, "paused", "paused by relay pause")
    pid = _signal_holder(state_dir)
    where = f" (run pid {pid} stops at once)" if pid else ""
    err.print(f"paused goal {goal.id}{where}; `relay resume` continues it", markup=False)


@app.command()
def clear(repo: RepoOpt = Path("."), config: ConfigOpt = None) -> None:
    """Drop the open goal (status cleared); its history stays in the store.

    \b
    Example: relay clear
    """
    store, state_dir = open_goal_store(repo, config, "clear")
    with store:
        goal = the_open_goal(store)
        store.save_goal(
            goal.id, goal.status, status="cleared", reason="user", message="Cleared by the user."
        )
        store.add_event(goal.id, "cleared", f"cleared by relay clear (was {goal.status})")
    _signal_holder(state_dir)
    where = _from_where(repo, goal.branch)
    err.print(f"cleared goal {goal.id}; a new goal can start here{where}", markup=False)


def _from_where(repo: Path, branch: str | None) -> str:
    """What ``relay clear`` adds when the cleared goal's branch is checked out: a new goal
    would start from its commits."""
    from relay.gitrepo import GitRepo

    git = GitRepo(repo)
    try:
        if branch is None or git.current_branch() != branch:
            return ""
    finally:
        git.close()
    return (
        f" (from the current branch, {branch}, which keeps the goal's commits: `git switch`"
        " to another branch first to start from there)"
    )


@app.command()
def say(
    text: Annotated[str, typer.Argument(metavar="TEXT", help="What to add to the goal.")],
    repo: RepoOpt = Path("."),
    config: ConfigOpt = None,
) -> None:
    """Add a supplement to the open goal; a running goal gets it at its next step, and the
    round counts restart.

    \b
    Example: relay say "Use the standard library only"
    """
    if not text.strip():
        raise ConfigError("the supplement is empty; say what to add to the goal")
    store, _ = open_goal_store(repo, config, "say")
    with store:
        goal = the_open_goal(store)
        store.add_supplement(goal.id, text.strip(), "say")
    err.print(f"added to goal {goal.id} ({goal.status})", markup=False)
