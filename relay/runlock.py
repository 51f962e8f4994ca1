"""One run per working tree (SPEC §10): the run lock in relay's state folder.

The lock is an ``flock`` on ``run.lock``; the file also names the holder's PID for messages,
but the kernel's record (``/proc/locks``) decides who holds it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from relay.controls import lock_pids, refuse_from_goal_shell
from relay.errors import GoalStateError

__all__ = ["lock_holder", "refuse_live_run", "take_lock", "working_tree_lock"]


def take_lock(fh: IO[str]) -> str | None:
    """Take an exclusive ``flock`` on the open lock file ``fh`` without waiting. Returns None
    when taken, else the PID text the file names (``"unknown"`` when it names none)."""
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        return fh.read().strip() or "unknown"
    return None


def lock_holder(state_dir: Path) -> int | None:
    """PID of the live process that holds the working tree's run lock, or None.

    The kernel's record (``/proc/locks``) wins over the PID written into the lock file, which
    anything that can write the file could change."""
    path = state_dir / "run.lock"
    if not path.exists():
        return None
    with path.open("a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held_by = lock_pids(path)
            if len(held_by) == 1:
                return held_by.pop()
            fh.seek(0)
            text = fh.read().strip()
            return int(text) if text.isdigit() else None
        fcntl.flock(fh, fcntl.LOCK_UN)
    return None


@contextlib.contextmanager
def working_tree_lock(state_dir: Path) -> Iterator[str | None]:
    """Hold the one-run-per-working-tree lock (SPEC §10).

    Yields a warning when the lock file named a process that died without releasing it (taken
    over). Raises ``GoalStateError`` naming the holder's PID when a live run holds it."""
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / "run.lock"
    fh = path.open("a+")
    try:
        holder = take_lock(fh)
        if holder is not None:
            raise GoalStateError(
                f"another relay run (pid {holder}) is working in this tree; wait for it, "
                "or stop it with `relay pause`"
            ) from None
        fh.seek(0)
        previous = fh.read().strip()
        warning = None
        if previous.isdigit() and int(previous) != os.getpid():
            warning = f"took over the run lock of process {previous}, which is no longer running"
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        yield warning
    finally:
        with contextlib.suppress(OSError):
            fh.seek(0)
            fh.truncate()
        with contextlib.suppress(OSError):
            fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()


def refuse_live_run(state_dir: Path, command: str) -> None:
    """Refuse a run from the goal's own tool calls, and a second run beside a live one
    (SPEC §10, §14); ``command`` is ``run`` or ``resume``. Raises ``GoalStateError`` naming
    the live run's PID."""
    holder = lock_holder(state_dir)
    refuse_from_goal_shell(state_dir / "run.lock", holder, command)
    if holder is not None:
        raise GoalStateError(
            f"another relay run (pid {holder}) is working in this tree; wait for it, "
            "follow it with `relay log -f`, or stop it with `relay pause`"
        )
