"""A run that relay's own files stop mid-way (issue 13; SPEC §10): the state database failed
(a full disk, a file made read-only, a corrupt file), or a file relay writes could not be
written (``ENOSPC`` on the transcript or the progress file), or git refused relay's commit.

:func:`stopped_run` leaves what a second Ctrl+C leaves, as far as the failure allows: the run's
processes stopped, the goal ``paused`` (reason ``interrupted``) when its status can still be
written, the round's changes committed (:func:`relay.recovery.settle`) or left in the tree for
``relay resume`` to commit, the run's end recorded. Every step that fails again is skipped: the
goal stays resumable (an ``active`` goal without a run is continued like one after a crash).
The error it returns says what happened, what state the goal is in and what to do.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Callable
from typing import TYPE_CHECKING

from relay import recovery
from relay.errors import GoalStateError, RelayError, RunStoppedError, StoreAccessError
from relay.goal import GoalStatus
from relay.sandbox import stop_run_processes
from relay.supervisor import Stop

if TYPE_CHECKING:
    from relay.loop import LoopSetup
    from relay.store import Store

__all__ = ["disk_is_full", "mark_paused", "stopped_at_once", "stopped_run"]

_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_WRITE_ERRNOS = _FULL_ERRNOS | {errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG}


def disk_is_full(exc: BaseException) -> bool:
    """Whether ``exc`` says that a disk (or the user's quota) is full."""
    if isinstance(exc, StoreAccessError):
        return exc.kind == "full"
    if isinstance(exc, OSError):
        return exc.errno in _FULL_ERRNOS
    return "no space left on device" in str(exc).lower()


def cause(exc: RelayError | OSError) -> str:
    """What failed, in words naming the file and what to do."""
    if isinstance(exc, RelayError):
        return str(exc)
    where = f" {exc.filename}" if exc.filename else ""
    verb = "cannot write" if exc.errno in _WRITE_ERRNOS else "failed on"
    said = f"relay {verb}{where} ({exc.strerror or exc})"
    if disk_is_full(exc):
        return f"{said}: the disk is full; free disk space, then `relay resume` continues the goal"
    return f"{said}; `relay resume` continues the goal once the cause is fixed"


def stopped_run(setup: LoopSetup, goal_id: str, exc: RelayError | OSError) -> RunStoppedError:
    """Stop the run of ``goal_id`` after ``exc`` escaped its loop, keep what can be kept (see
    the module's docstring) and return the error to raise: the cause, the goal's state and
    where its work is. Its exit code is the cause's (1 for a file or database)."""
    store, run_id = setup.store, setup.run_id
    stop_run_processes(run_id)  # nothing of the run writes into the tree after this
    said = cause(exc)
    if disk_is_full(exc):  # room for the goal's pause
        store.release_reserve()
    paused = _quietly(lambda: mark_paused(store, goal_id, f"The run stopped: {said}"))
    _quietly(lambda: recovery.settle(setup.git, store, goal_id, setup.config))
    _quietly(lambda: store.end_run(run_id, "paused", 1))
    state = (
        f"Goal {goal_id} is paused"
        if paused
        else f"Goal {goal_id} stays active (its status could not be written)"
    )
    left: list[str] | None = None
    with contextlib.suppress(RelayError, OSError):
        left = setup.git.is_dirty_paths()
    if left is None:
        work = "its work is in the working tree"
    elif left:
        work = "the round's changes are left in the working tree; `relay resume` commits them"
    else:
        work = "its work is committed"
    error = RunStoppedError(f"{said}\n{state}; {work}.")
    error.exit_code = getattr(exc, "exit_code", 1)
    return error


def mark_paused(store: Store, goal_id: str, message: str) -> None:
    """Pause the active goal (reason ``interrupted``: ``relay resume`` recovers its round);
    a goal another process changed meanwhile keeps its status. Raises ``StoreError``."""
    with contextlib.suppress(GoalStateError):
        store.save_goal(goal_id, "active", status="paused", reason="interrupted", message=message)


def _quietly(action: Callable[[], object]) -> bool:
    """Run ``action``; False when it fails too (the first failure is the one told)."""
    try:
        action()
    except (RelayError, OSError):
        return False
    return True


def stopped_at_once(setup: LoopSetup, goal_id: str) -> Stop:
    """After a second Ctrl+C/SIGTERM: the goal paused (reason ``interrupted``), the run's
    processes stopped, the round committed by :func:`relay.recovery.settle`; returns the
    goal's stop as the store now has it (the outputs of ``--json`` follow as for any end)."""
    store = setup.store
    mark_paused(store, goal_id, "interrupted twice; stopped at once")
    stop_run_processes(setup.run_id)  # nothing of the run writes into the tree after this
    recovery.settle(setup.git, store, goal_id, setup.config)  # committed and resumable
    try:
        goal = store.goal(goal_id)
        return Stop(GoalStatus(goal.status), goal.reason or "interrupted", goal.message or "")
    except (RelayError, OSError, ValueError):
        return Stop(GoalStatus.PAUSED, "interrupted", "interrupted twice; stopped at once")
