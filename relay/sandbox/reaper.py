"""No process the model starts outlives its call, also without a sandbox (SPEC §14).

Inside bubblewrap this is the PID namespace's job. Without it (``sandbox: off``, or ``auto`` on a
machine without bubblewrap) the command runs under a small **reaper**: a Python process that
makes itself the child subreaper of everything the command starts (``PR_SET_CHILD_SUBREAPER``:
processes that detach with ``nohup``, ``setsid`` or a double fork are re-parented to it instead
of ``init``), runs the command, and when the command's first process ends, kills and reaps
every process that is left. It also asks the kernel for a signal when relay dies
(``PR_SET_PDEATHSIG``), so that a ``kill -9`` of relay still ends the command's processes.

A hostile command can still kill the reaper itself first without a sandbox; docs/sandbox.md
says so.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import sys
import time
from collections.abc import Sequence

from relay import treewrites

__all__ = [
    "REAPER_SOURCE",
    "become_subreaper",
    "children",
    "protect_process",
    "reaped_argv",
    "stop_escaped",
]

PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
ESCAPE_MARK = b"RELAY_SANDBOX=off"
"""In the environment every unsandboxed model command starts with (:meth:`Sandbox.environment`)."""

REAPER_SOURCE = r"""
import ctypes, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(36, 1, 0, 0, 0)                    # PR_SET_CHILD_SUBREAPER
libc.prctl(1, signal.SIGTERM, 0, 0, 0)        # PR_SET_PDEATHSIG: relay died -> SIGTERM
if os.getppid() == 1:
    sys.exit(125)
child = os.fork()
if child == 0:
    try:
        for name in ("SIGPIPE", "SIGXFSZ", "SIGINT", "SIGTERM"):
            if hasattr(signal, name):
                signal.signal(getattr(signal, name), signal.SIG_DFL)
        os.execvp(sys.argv[1], sys.argv[1:])
    finally:
        os._exit(127)

def children():
    mine, found = os.getpid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                if int(fh.read().rsplit(b")", 1)[1].split()[1]) == mine:
                    found.append(int(name))
        except (OSError, ValueError, IndexError):
            pass
    return found

def reap():
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return

def sweep():
    # SIGTERM to every process left, then SIGKILL until none is left: a process whose parent
    # dies meanwhile is re-parented here and found by the next look (bounded to ~3 s).
    pids = children()
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + 0.3
    while pids and time.monotonic() < deadline:
        reap()
        pids = children()
        if pids:
            time.sleep(0.01)
    deadline = time.monotonic() + 3.0
    while pids and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)
        reap()
        pids = children()

def stop(signum, _frame):
    sweep()
    os._exit(128 + signum)

signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
status = 0
while True:
    try:
        pid, status = os.waitpid(child, 0)
        break
    except ChildProcessError:
        break
    except InterruptedError:
        continue
sweep()
code = os.waitstatus_to_exitcode(status)
if code < 0:
    if -code not in (signal.SIGKILL, signal.SIGSTOP):
        signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"""
"""The reaper's program (run with ``python -I -S -c``); its arguments are the command."""


def reaped_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` run under the reaper (Linux); unchanged elsewhere (no subreapers there)."""
    if not sys.platform.startswith("linux"):
        return list(argv)
    return [sys.executable, "-I", "-S", "-c", REAPER_SOURCE, *argv]


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` (Linux ``/proc/PID/task/PID/children``; [] where the
    kernel does not list them)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as fh:
            return [int(word) for word in fh.read().split()]
    except (OSError, ValueError):
        return []


def become_subreaper() -> bool:
    """Make this process the child subreaper of everything it starts (Linux): a process of a
    model command that kills relay's reaper and detaches is re-parented to relay, not to
    ``init``, so that it still counts as the goal's own (``relay say`` from it is refused,
    :mod:`relay.controls`) and :func:`stop_escaped` finds it. Returns True when set."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


def stop_escaped(run_id: str) -> list[int]:
    """Kill and reap the children of this process that come from a model command of the run
    ``run_id`` (their starting environment holds ``RELAY_SANDBOX=off`` and ``RELAY_RUN=<run_id>``,
    so that goals run in threads of one process never stop each other's commands): processes
    that killed relay's reaper to outlive their call. Returns their PIDs."""
    marks = {ESCAPE_MARK, f"RELAY_RUN={run_id}".encode()}
    mine = os.getpid()
    stopped: list[int] = []
    for name in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                if int(fh.read().rsplit(b")", 1)[1].split()[1]) != mine:
                    continue
            with open(f"/proc/{name}/environ", "rb") as fh:
                if not marks <= set(fh.read().split(b"\0")):
                    continue
            os.kill(int(name), signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            continue
        stopped.append(int(name))
    for pid in stopped:
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)
    if stopped:  # they may have written anything in the tree until now
        treewrites.wrote_anything()
    return stopped


def stop_run_processes(run_id: str, wait_s: float = 2.0) -> int:
    """Kill every process that still runs a model command of the run ``run_id`` (its starting
    environment holds ``RELAY_RUN=<run_id>``, with or without the sandbox) and wait up to
    ``wait_s`` seconds until none is left, so that nothing writes into the tree after relay
    settled it (a second Ctrl+C, SIGTERM; SPEC §10). Returns how many were killed."""
    mark = f"RELAY_RUN={run_id}".encode()
    deadline = time.monotonic() + wait_s
    killed: set[int] = set()
    while True:
        alive = [pid for pid in _marked_pids(mark) if pid != os.getpid()]
        for pid in alive:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        killed.update(alive)
        if not alive or time.monotonic() >= deadline:
            break
        time.sleep(0.01)
    if killed:
        treewrites.wrote_anything()
    return len(killed)


def _marked_pids(mark: bytes) -> list[int]:
    """The live (not zombie) processes whose starting environment holds ``mark``."""
    found = []
    for name in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue
            with open(f"/proc/{name}/environ", "rb") as fh:
                if mark not in fh.read().split(b"\0"):
                    continue
        except (OSError, IndexError):
            continue
        found.append(int(name))
    return found


def protect_process() -> bool:
    """Make this process non-dumpable (``PR_SET_DUMPABLE`` 0, Linux): other processes of the
    same user can then neither read its ``/proc/<pid>/environ`` (where provider keys are) nor
    attach a debugger to it. A process with ``CAP_SYS_PTRACE`` (root) still can: only the
    sandbox's own PID namespace hides relay from a command run as root.

    Returns:
        True when the kernel accepted the setting.
    """
    return _prctl(PR_SET_DUMPABLE, 0)
