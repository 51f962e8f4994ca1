"""Control commands come from the user, never from the goal's own tool calls (SPEC §14).

``relay say``, ``pause``, ``resume`` and ``clear`` change the running goal: a supplement restarts
the round counts, so a model that could run ``relay say`` from its ``shell`` would lift its own
round limits. A process that descends from the relay process running the goal (the holder of the
working tree's run lock) is one the goal started, and these commands refuse it.

Ancestry is read from ``/proc/<pid>/stat`` (Linux), else from ``ps -o ppid=``. The holder of the
run lock is read from ``/proc/locks`` (the kernel's view, which the model cannot rewrite) where
it lists the lock file, else from the PID the holder wrote into the lock file. Without the
sandbox the goal's commands run in a PID namespace of their own where the kernel allows it
(:mod:`relay.sandbox.pidns`): there no ancestor is relay's, and the kernel lists no holder of a
lock that is held. A process that cannot see the holder of the held lock at all is taken for
the goal's own too.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from relay.errors import GoalStateError

MAX_DEPTH = 4096
"""Ancestors followed at most (a guard against a loop in what the system reports)."""

__all__ = [
    "asked_from_goal_shell",
    "lock_pids",
    "parent_pid",
    "refuse_from_goal_shell",
    "run_from_goal_shell",
]


def parent_pid(pid: int) -> int | None:
    """The parent PID of process ``pid``, or None when it is gone or unknown.

    Reads field 4 of ``/proc/<pid>/stat`` (after the command name in parentheses, which may
    itself hold spaces and parentheses); without ``/proc``, asks ``ps``.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            return None  # /proc works: the process is gone
        return _ps_parent(pid)
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    try:
        return int(fields[1])
    except (IndexError, ValueError):
        return None


def _ps_parent(pid: int) -> int | None:
    try:
        proc = subprocess.run(
            ["ps", "-o", "ppid=", "-p", str(pid)],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            check=False,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = proc.stdout.strip()
    return int(text) if proc.returncode == 0 and text.isdigit() else None


def run_from_goal_shell(lock_pid: int, pid: int | None = None) -> bool:
    """Whether process ``pid`` (default: this one) descends from ``lock_pid``, the relay
    process that runs the goal: then it was started by the goal's tool calls.

    Args:
        lock_pid: the PID holding the working tree's run lock (> 1; PID 1 and below are
            never taken as a goal's process, they are everyone's ancestor).
        pid: the process to check; it counts as its own descendant only when it is not
            ``lock_pid`` itself (the run's own process asking, e.g. in tests, is the user).
    """
    if lock_pid <= 1:
        return False
    current = os.getpid() if pid is None else pid
    if current == lock_pid:
        return False
    for _ in range(MAX_DEPTH):
        parent = parent_pid(current)
        if parent is None or parent <= 0 or parent == current:
            return False
        if parent == lock_pid:
            return True
        current = parent
    return False


def lock_pids(lock_file: Path) -> set[int]:
    """PIDs holding an ``flock`` on ``lock_file`` according to ``/proc/locks``; empty when
    the file is not listed there (or there is no ``/proc/locks``)."""
    try:
        st = lock_file.stat()
        text = Path("/proc/locks").read_text(encoding="ascii", errors="replace")
    except OSError:
        return set()
    wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    pids = set()
    for line in text.splitlines():
        parts = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 fe:00:2360149 0 EOF" (blocked waiters have "->")
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5] == wanted and parts[4].isdigit():
            pids.add(int(parts[4]))
    return pids


def refuse_from_goal_shell(lock_file: Path, holder: int | None, command: str) -> None:
    """Refuse ``relay COMMAND`` run by the goal's own tool calls (SPEC §14).

    Args:
        lock_file: the working tree's run lock file.
        holder: the PID the lock file names while it is held (``runner.lock_holder``), or
            None; used only where ``/proc/locks`` does not list the lock.
        command: the command's name, for the message.

    Raises:
        GoalStateError: this process descends from the process that runs the goal (exit 1).
    """
    if asked_from_goal_shell(lock_file, holder):
        raise GoalStateError(
            f"relay {command} was refused: control commands (say, pause, resume, clear) cannot "
            "be run from the goal's own tool calls; supplements and controls come only from "
            "the user, in another terminal"
        )


def asked_from_goal_shell(lock_file: Path, holder: int | None) -> bool:
    """Whether this process was started by the goal's own tool calls (SPEC §14): it descends
    from the process holding the run lock ``lock_file``, or the lock is held (``holder``: the
    PID :func:`relay.runlock.lock_holder` found, None when it is free) by a process this one
    cannot see at all: the kernel's ``/proc/locks`` names no holder visible here, and no
    process ``holder`` exists here. That is a command in the PID namespace relay gives the
    model's commands without the sandbox (:mod:`relay.sandbox.pidns`)."""
    listed = lock_pids(lock_file)
    pids = listed or ({holder} if holder is not None else set())
    if any(run_from_goal_shell(pid) for pid in pids):
        return True
    if holder is None or listed - {0} or not Path("/proc/locks").is_file():
        return False
    return not Path(f"/proc/{holder}").exists()
