"""Whether paths may have changed, from the kernel's file events (SPEC §14).

relay checks some paths before every step it takes on trust, such as the paths the kept
sandbox's mounts were planned from (:mod:`relay.sandbox.kept`), before every command. An
``lstat`` per path and a listing per folder is most of what such a check costs. A
:class:`PathAlarm` asks the kernel instead (Linux ``inotify``): armed on the paths, it
*rings* once an event touched one of them or a folder on the way to one (created, removed,
renamed, replaced, its mode or, with ``contents``, its data changed), and the caller then
looks as before. While it has not rung, one ``read`` that finds nothing says that nothing
changed.

The events are queued by the kernel when the change is made, so a change made before
:meth:`PathAlarm.rang` is asked is seen by it, whatever process or mount namespace made it. An
alarm that cannot be set up (no inotify, a limit on watches reached, a queue that overflowed)
rings at every question: the caller's own look then decides, as without an alarm. Changes the
kernel does not see (another machine's write to a network file system, a mount made over a
path) are not rung; a look at every call would see the latter, and the former only as late
as the file system's own attribute cache lets it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import stat
import struct
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["PathAlarm"]

IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_CLOSE_WRITE = 0x8
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_UNMOUNT = 0x2000
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_MASK_ADD = 0x20000000
IN_ONLYDIR = 0x1000000

ENTRIES = (
    IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF
)
"""An entry of a watched folder made, removed, renamed or its mode changed; the folder itself
gone."""
DATA = IN_MODIFY | IN_CLOSE_WRITE
"""An entry's data written (watched in the folders that hold the paths, with ``contents``)."""
ALWAYS = IN_IGNORED | IN_UNMOUNT | IN_DELETE_SELF | IN_MOVE_SELF
"""Events that ring whatever their name: a watched folder went away (``IN_Q_OVERFLOW``, events
lost, rings every alarm)."""
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then the name)

_libc: Any = None  # libc with inotify, looked up on first use; False where there is none


def _inotify() -> Any:
    """libc with ``inotify_init1``, ``inotify_add_watch`` and ``inotify_rm_watch`` typed, or
    False."""
    global _libc
    if _libc is None:
        _libc = False
        if sys.platform.startswith("linux"):
            with contextlib.suppress(OSError, AttributeError):
                libc = ctypes.CDLL(None, use_errno=True)
                libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
                libc.inotify_init1.argtypes = [ctypes.c_int]
                libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
                _libc = libc
    return _libc


@dataclass(frozen=True)
class _Interest:
    """What an alarm listens for in one folder: the events (``mask``), the names that lead
    to its paths, those of them that lead further down (``way``), whether it watches data
    (``contents``) and whether it does here (``data``: the folder holds a file it watches)."""

    mask: int
    names: frozenset[str]
    way: frozenset[str]
    contents: bool
    data: bool

    def joined(self, other: _Interest) -> _Interest:
        """Both interests in one (two of an alarm's folders are the same folder)."""
        return _Interest(
            self.mask | other.mask,
            self.names | other.names,
            self.way | other.way,
            self.contents or other.contents,
            self.data or other.data,
        )

    def moves(self, mask: int, name: str) -> bool:
        """Whether an event that rang may have changed which folders are on the way, or
        which of the paths are files to watch the data of (an alarm then arms anew)."""
        if mask & ALWAYS or not name or name in self.way:
            return True
        made = mask & (IN_CREATE | IN_MOVED_TO)
        return bool(made) and self.contents and not self.data


class _Hub:
    """The process's one inotify instance, shared by its alarms: the kernel allows a user
    128 instances, shared with every other program of the user (an editor's file watching
    among them). A child process made by ``fork`` gets an instance of its own (it would
    otherwise read the parent's events)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.forked = False  # set in a child process: the instance is its parent's
        self.fd: int | None = None
        self.ready = select.poll()  # whether events are queued, without a failing read
        # watch -> the alarms listening on it, each with its names and events of interest
        self.listeners: dict[int, dict[PathAlarm, _Interest]] = {}

    def watch(self, alarm: PathAlarm, folder: str, interest: _Interest) -> bool:
        """Add ``folder`` to ``alarm``; False when it cannot be watched."""
        libc = _inotify()
        if libc is False:
            return False
        if self.fd is None:
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
            if fd < 0:
                return False
            self.fd = fd
            self.ready.register(fd, select.POLLIN)
        mask = interest.mask | IN_ONLYDIR | IN_MASK_ADD
        wd = libc.inotify_add_watch(self.fd, os.fsencode(folder), mask)
        if wd < 0:  # no such folder any more, or the user's limit of watches
            return False
        listening = self.listeners.setdefault(wd, {})
        known = listening.get(alarm)  # two folders of its, one folder (a symlink between)
        listening[alarm] = interest if known is None else known.joined(interest)
        alarm.wds.add(wd)
        return True

    def forget(self, alarm: PathAlarm) -> None:
        """Stop ``alarm``'s watches that no other alarm shares."""
        for wd in alarm.wds:
            listening = self.listeners.get(wd)
            if listening is None:
                continue
            listening.pop(alarm, None)
            if not listening:
                del self.listeners[wd]
                if self.fd is not None:
                    _inotify().inotify_rm_watch(self.fd, wd)
        alarm.wds.clear()

    def drain(self) -> None:
        """Read the events the kernel queued and ring the alarms they concern."""
        while self.fd is not None and self.ready.poll(0):
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return
            except OSError:
                self._ring_all()
                return
            at = 0
            while at + _EVENT.size <= len(data):
                wd, mask, _cookie, size = _EVENT.unpack_from(data, at)
                raw = data[at + _EVENT.size : at + _EVENT.size + size]
                at += _EVENT.size + size
                self._deliver(wd, mask, os.fsdecode(raw.split(b"\0", 1)[0]))

    def _deliver(self, wd: int, mask: int, name: str) -> None:
        if mask & IN_Q_OVERFLOW:
            self._ring_all()
            return
        for alarm, interest in self.listeners.get(wd, {}).items():
            if mask & ALWAYS or (mask & interest.mask and (not name or name in interest.names)):
                alarm.rung = True
                alarm.moved = alarm.moved or interest.moves(mask, name)
        if mask & IN_IGNORED:  # the watch is gone (its folder removed): its alarms rang
            for alarm in self.listeners.pop(wd, {}):
                alarm.wds.discard(wd)

    def _ring_all(self) -> None:
        for listening in self.listeners.values():
            for alarm in listening:
                alarm.rung = alarm.moved = True


_hub = _Hub()


def _forked() -> None:
    global _hub
    _hub.forked = True  # the child's copy: the parent's instance and alarms stay the parent's
    _hub = _Hub()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


class PathAlarm:
    """Rings once something touched one of ``paths`` or a folder on the way to one.

    Args:
        paths: absolute paths; they need not exist (the creation of a missing one, or of a
            missing folder on its way, rings).
        contents: a change of a path's data (its size, times) rings too; else only its
            creation, removal, renaming, replacement or a change of its mode.

    Arm it *before* taking the state it guards, so that a change made meanwhile rings. Its
    methods may be called from any thread.
    """

    def __init__(self, paths: Iterable[str], *, contents: bool) -> None:
        self.paths, self.contents = tuple(paths), contents
        self.rung = False
        self.moved = False  # a ring that may have changed which folders are on the way
        self.wds: set[int] = set()
        self._hub = hub = _hub
        with hub.lock:
            hub.drain()  # events queued before this alarm are its neighbours' only
            for folder, (names, way, holds) in _folders(self.paths).items():
                data = contents and holds
                interest = _Interest(ENTRIES | (DATA if data else 0), names, way, contents, data)
                if not hub.watch(self, folder, interest):
                    self.rung = self.moved = True  # always look
                    break

    def rang(self) -> bool:
        """Whether something touched the paths since the alarm was armed (it stays rung)."""
        if not self.rung:
            if self._hub.forked:  # armed in the parent process: its events are not ours (and
                self.rung = True  # its lock may have been held by a thread at the fork)
            else:
                with self._hub.lock:
                    self._hub.drain()
        return self.rung

    def reset(self) -> bool:
        """Silence the alarm again after it rang, keeping its watches, when the events it
        rang for cannot have changed which folders are on the way (a watched file written,
        replaced or removed); False when it must be armed anew (a folder on the way made,
        removed or moved, events lost, a process forked). Reset it *before* taking the
        state again, as an alarm is armed."""
        if self._hub.forked:
            return False
        with self._hub.lock:
            self._hub.drain()
            if self.moved or not self.wds:
                return False
            self.rung = False
            return True

    def rearmed(self) -> PathAlarm:
        """This alarm :meth:`reset`, or, where it cannot be, closed and a new one armed on the
        same paths."""
        if self.reset():
            return self
        self.close()
        return PathAlarm(self.paths, contents=self.contents)

    def close(self) -> None:
        """Stop watching (again is harmless); a closed alarm has rung."""
        self.rung = True
        if self.wds and not self._hub.forked:
            with self._hub.lock:
                self._hub.forget(self)
        self.wds.clear()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


def _folders(paths: Iterable[str]) -> dict[str, tuple[frozenset[str], frozenset[str], bool]]:
    """Each folder to watch, with the names in it that lead to one of ``paths``, those of
    them that lead further down (folders on the way), and whether it holds one of the paths
    that is a regular file or missing (the data of a device such as ``/dev/null``, written by
    every process, counts for nothing): every existing folder on the way (symlinks followed,
    as a look at the path follows them), down to the path's own folder or to the first
    component that is missing."""
    names: dict[str, set[str]] = {}
    way: dict[str, set[str]] = {}
    holds: set[str] = set()
    for path in paths:
        folder = "/"
        parts = [p for p in os.path.normpath(os.path.join("/", path)).split("/") if p]
        for n, name in enumerate(parts):
            names.setdefault(folder, set()).add(name)
            below = os.path.join(folder, name)
            if n == len(parts) - 1:
                if _file_or_missing(below):
                    holds.add(folder)
            else:
                way.setdefault(folder, set()).add(name)
            folder = below
            if not os.path.isdir(folder):
                break
    return {
        folder: (frozenset(found), frozenset(way.get(folder, ())), folder in holds)
        for folder, found in names.items()
    }


def _file_or_missing(path: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return True
