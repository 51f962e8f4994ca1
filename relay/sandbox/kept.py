"""A running kept sandbox and a command in it (SPEC §14; :mod:`relay.sandbox.session` decides
when one starts, is planned again and ends).

:class:`KeptSandbox` is bubblewrap's process, relay's end of the server's socket
(:mod:`relay.sandbox.session_server`), the mounts it was started with and what they were
planned from; :class:`SessionProcess` is one command running in it, driven by
:func:`relay.tools.shell.run_shell` as it drives a ``subprocess.Popen``.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import stat
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from relay.pathalarm import PathAlarm
from relay.sandbox.mounts import Mount
from relay.sandbox.reaper import children

__all__ = [
    "KeptSandbox",
    "SessionProcess",
    "Watch",
    "identity",
    "look",
    "stop_group",
    "wait_ready",
    "watches",
]

READY_WAIT_S = 20.0
"""Seconds a new kept sandbox may take to say it is ready (a loaded machine)."""
STOP_WAIT_S = 2.0

Identity = tuple[int, ...] | None
Watch = tuple[str, bool]
"""A path relay watches, and whether its contents count (a folder's modification time)."""


def identity(watch: Watch) -> Identity:
    """What says that a watched path is still the same: device, inode and type, plus size
    and modification time for a file, plus the names in it for a folder whose contents count
    (not its modification time: git rewrites files of ``.git`` at every commit); None when
    nothing is there."""
    path, contents = watch
    try:
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode):
            names = tuple(sorted(os.listdir(path))) if contents else ()
            return (st.st_dev, st.st_ino, st.st_mode, hash(names))
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns)


def watches(paths: list[str]) -> tuple[Watch, ...]:
    """What to watch for ``paths``: an existing path itself; for a missing one, its nearest
    existing folder and the names in it (the path appearing adds one), so that fifty missing
    credential files of the home folder cost one look at it."""
    found: dict[Watch, None] = {}
    for path in paths:
        if os.path.lexists(path):
            found[(path, False)] = None
            continue
        folder = os.path.dirname(path)
        while folder != "/" and not os.path.lexists(folder):
            folder = os.path.dirname(folder)
        found[(folder, True)] = None
    return tuple(found)


def look(paths: tuple[str, ...]) -> tuple[PathAlarm, tuple[Watch, ...], tuple[Identity, ...]]:
    """What ``paths`` are now: an alarm armed on them first (a change made after the look
    rings it), then their watches and the identities of those."""
    alarm = PathAlarm(paths, contents=True)
    watched = watches(list(paths))
    return alarm, watched, tuple(identity(w) for w in watched)


@dataclass
class KeptSandbox:
    """A running kept sandbox: bubblewrap's process, relay's end of the server's socket, the
    mounts it was started with, the paths it was planned from (``paths``) with their
    watches, identities and alarm (:func:`look`)."""

    monitor: subprocess.Popen[bytes]
    conn: socket.socket
    mounts: list[Mount]
    paths: tuple[str, ...]
    alarm: PathAlarm
    watched: tuple[Watch, ...]
    seen: tuple[Identity, ...]
    busy: bool = False
    ended: bool = False
    ready: bool = False

    def changed(self) -> set[Watch]:
        """The watches whose identity changed since the sandbox was planned. They are looked
        at only when the alarm rang (then armed again first): otherwise nothing changed."""
        if not self.alarm.rang():
            return set()
        self.alarm = self.alarm.rearmed()
        now = (identity(w) for w in self.watched)
        return {w for w, was, new in zip(self.watched, self.seen, now, strict=True) if was != new}

    def remounts(self, changed: set[Watch]) -> bool:
        """Whether a change hits a mount itself: the kernel removes a mount from the sandbox
        when its file or folder is replaced or removed on the host, so a new sandbox is due
        (a folder's changed contents are not such a change)."""
        hit = {path for path, contents in changed if not contents}
        return any(str(m.path) in hit or str(m.source) in hit for m in self.mounts)


def wait_ready(kept: KeptSandbox) -> bool:
    """Wait for a new sandbox's server to say it is ready; False when it ended or took more
    than :data:`READY_WAIT_S` seconds."""
    try:
        said = kept.conn.recv(64) if _readable(kept.conn, READY_WAIT_S) else b""
    except OSError:
        return False
    kept.ready = said == b'{"ready": true}'
    return kept.ready


def _readable(conn: socket.socket, timeout: float | None) -> bool:
    """Whether ``conn`` has something to read (or reached its end) within ``timeout`` seconds
    (None: as long as it takes); ``poll``, so that a descriptor number above 1023 works."""
    poller = select.poll()
    poller.register(conn, select.POLLIN)
    return bool(poller.poll(None if timeout is None else max(0, round(timeout * 1000))))


def stop_group(monitor: subprocess.Popen[bytes]) -> None:
    """Kill bubblewrap's process group and the init of its PID namespace (which takes every
    process of the sandbox with it), and reap bubblewrap."""
    if monitor.poll() is None:
        inits = children(monitor.pid)
        with contextlib.suppress(OSError):
            os.killpg(monitor.pid, signal.SIGKILL)
        for pid in inits:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        monitor.wait(timeout=STOP_WAIT_S)


class SessionProcess:
    """A command running in a kept sandbox, with the parts of ``subprocess.Popen`` that
    :func:`relay.tools.shell.run_shell` uses: ``pid`` is bubblewrap's (signalling its group
    stops the whole sandbox), ``stdout`` and ``stderr`` the read ends of the command's pipes,
    ``returncode`` the command's exit status from the server's answer (bubblewrap's, or
    ``-9``, when the sandbox was stopped before it answered)."""

    def __init__(
        self,
        kept: KeptSandbox,
        out_fd: int,
        err_fd: int,
        args: list[str],
        renew: Callable[[KeptSandbox], None],
    ) -> None:
        self._kept = kept
        self._renew = renew
        self.args = args
        self.pid = kept.monitor.pid
        self.stdout = open(out_fd, "rb", buffering=0)  # noqa: SIM115 - closed by the caller
        self.stderr = open(err_fd, "rb", buffering=0)  # noqa: SIM115
        self.returncode: int | None = None

    def exit_fd(self) -> int:
        """A descriptor that becomes readable when the command ended (the server's answer,
        or the end of the sandbox)."""
        return os.dup(self._kept.conn.fileno())

    def poll(self) -> int | None:
        if self.returncode is None:
            self._receive(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None and not self._receive(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def _receive(self, timeout: float | None) -> bool:
        kept = self._kept
        try:
            data = kept.conn.recv(65536) if _readable(kept.conn, timeout) else None
        except (OSError, ValueError):
            data = b""
        if data is None:
            return False
        try:
            answer = json.loads(data) if data else {}
            code = int(answer["code"])
        except (ValueError, KeyError, TypeError):
            answer = {}
            code = kept.monitor.poll() or -signal.SIGKILL
        self.returncode = code
        kept.busy = False
        if not data or answer.get("used"):
            kept.ended = True
        if answer.get("used"):
            self._renew(kept)
        return True
