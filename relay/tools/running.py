"""The model's commands running now (SPEC §5, §10, §14): what :func:`kill_running` stops.

:func:`relay.tools.shell.run_shell` registers each command while it runs. A pause (Ctrl+C,
SIGTERM, ``relay pause``) stops them all at once through :func:`kill_running`; observers
(:func:`observe`: the run's watchdog, :mod:`relay.watchdog`) are told of each command's first
process as it starts and ends, so that a process the model's commands cannot stop can kill them
when the time budget is spent.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass

from relay.sandbox.kept import SessionProcess
from relay.sandbox.reaper import children

__all__ = ["Process", "Running", "kill_running", "observe", "register", "signal_group"]

Process = subprocess.Popen[bytes] | SessionProcess
"""A running command: its own sandbox's (or the reaper's) process, or one in the kept sandbox."""

Observer = Callable[[int, bool], None]
"""Told ``(pid, started)`` for each command's first process: True as it starts, False as it
ended. Called in the thread that runs the command; must not raise."""


@dataclass
class Running:
    """A running command: its first process (bubblewrap's monitor, relay's reaper), whether it
    runs in bubblewrap, and whether relay stopped it."""

    proc: Process
    sandboxed: bool = False
    interrupted: bool = False


_running: tuple[Running, ...] = ()
_observers: tuple[Observer, ...] = ()
_lock = threading.Lock()


def observe(observer: Observer, on: bool = True) -> None:
    """Add ``observer`` (``on``) or remove it; it then hears of every command that starts or
    ends (:data:`Observer`)."""
    global _observers
    with _lock:
        _observers = tuple(o for o in _observers if o is not observer)
        if on:
            _observers = (*_observers, observer)


def _tell(pid: int, started: bool) -> None:
    for observer in _observers:  # a tuple replaced atomically
        with contextlib.suppress(Exception):
            observer(pid, started)


def register(entry: Running, on: bool = True) -> None:
    """Add the running command ``entry`` (``on``) or remove it once it has ended; observers
    are told."""
    global _running
    with _lock:
        if on:
            _running = (*_running, entry)
        else:
            _running = tuple(item for item in _running if item is not entry)
    _tell(entry.proc.pid, on)


def signal_group(entry: Running, sig: int) -> bool:
    """Send ``sig`` to the process group led by the command's first process; False when the
    group is gone.

    In bubblewrap the command runs in a PID namespace whose init is a child of that first
    process (bubblewrap's monitor, which the signal kills); the init is bound to die with the
    monitor only once it has set itself up, so a stop in the first milliseconds would orphan it
    with the command. It is killed directly (SIGKILL from outside its namespace ends every
    process in it), found before the monitor dies."""
    inits = children(entry.proc.pid) if entry.sandboxed else []
    try:
        os.killpg(entry.proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        sent = False
    else:
        sent = True
    for pid in inits:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return sent


def kill_running() -> bool:
    """Stop the shell command(s) currently running: SIGTERM to their process groups now; the
    thread running the command sends SIGKILL after a grace period and returns an error result
    saying the command was stopped.

    Safe to call from another thread or from a signal handler (takes no lock).

    Returns:
        True if a running command was signalled.
    """
    killed = False
    for entry in _running:  # a tuple replaced atomically: no lock needed to read it
        entry.interrupted = True
        killed = signal_group(entry, signal.SIGTERM) or killed
    return killed
