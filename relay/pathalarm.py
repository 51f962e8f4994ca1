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
import struct
import sys
from collections.abc import Iterable
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
IN_ONLYDIR = 0x1000000

ENTRIES = (
    IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF
)
"""An entry of a watched folder made, removed, renamed or its mode changed; the folder itself
gone."""
DATA = IN_MODIFY | IN_CLOSE_WRITE
"""An entry's data written (watched in the folders that hold the paths, with ``contents``)."""
ALWAYS = IN_Q_OVERFLOW | IN_IGNORED | IN_UNMOUNT | IN_DELETE_SELF | IN_MOVE_SELF
"""Events that ring whatever their name: events were lost, or a watched folder went away."""
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then the name)

_libc: Any = None  # libc with inotify, looked up on first use; False where there is none


def _inotify() -> Any:
    """libc with ``inotify_init1`` and ``inotify_add_watch`` typed, or False."""
    global _libc
    if _libc is None:
        _libc = False
        if sys.platform.startswith("linux"):
            with contextlib.suppress(OSError, AttributeError):
                libc = ctypes.CDLL(None, use_errno=True)
                libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
                libc.inotify_init1.argtypes = [ctypes.c_int]
                _libc = libc
    return _libc


class PathAlarm:
    """Rings once something touched one of ``paths`` or a folder on the way to one.

    Args:
        paths: absolute paths; they need not exist (the creation of a missing one, or of a
            missing folder on its way, rings).
        contents: a change of a path's data or metadata (its size, times, mode) rings too;
            else only its creation, removal, renaming or replacement.

    Arm it *before* taking the state it guards, so that a change made meanwhile rings.
    """

    def __init__(self, paths: Iterable[str], *, contents: bool) -> None:
        self._fd: int | None = None
        self._rung = True
        self._names: dict[int, frozenset[str]] = {}  # watch -> the names that count in it
        libc = _inotify()
        if libc is False:
            return
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            return
        self._fd = fd
        for folder, (names, holds) in _folders(paths).items():
            mask = ENTRIES | IN_ONLYDIR | (DATA if contents and holds else 0)
            wd = libc.inotify_add_watch(fd, os.fsencode(folder), mask)
            if wd < 0:  # no such folder any more, or the limit of watches: always look
                self.close()
                return
            self._names[wd] = self._names.get(wd, frozenset()) | names
        self._rung = False

    def rang(self) -> bool:
        """Whether something touched the paths since the alarm was armed (it stays rung)."""
        if self._rung or self._fd is None:
            return True
        while not self._rung:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                break
            except OSError:
                self._rung = True
                break
            self._rung = self._rings(data)
        return self._rung

    def close(self) -> None:
        """Stop watching (again is harmless)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        self._rung = True

    def __del__(self) -> None:
        self.close()

    def _rings(self, data: bytes) -> bool:
        """Whether one of the events in ``data`` concerns a watched path."""
        at = 0
        while at + _EVENT.size <= len(data):
            wd, mask, _cookie, size = _EVENT.unpack_from(data, at)
            raw = data[at + _EVENT.size : at + _EVENT.size + size]
            at += _EVENT.size + size
            name = os.fsdecode(raw.split(b"\0", 1)[0])
            if mask & ALWAYS or not name or name in self._names.get(wd, ()):
                return True
        return False


def _folders(paths: Iterable[str]) -> dict[str, tuple[frozenset[str], bool]]:
    """Each folder to watch, with the names in it that lead to one of ``paths`` and whether
    it holds one of them itself: every existing folder on the way (symlinks followed, as a
    look at the path follows them), down to the path's own folder or to the first component
    that is missing."""
    names: dict[str, set[str]] = {}
    holds: set[str] = set()
    for path in paths:
        folder = "/"
        parts = [p for p in os.path.normpath(os.path.join("/", path)).split("/") if p]
        for n, name in enumerate(parts):
            names.setdefault(folder, set()).add(name)
            if n == len(parts) - 1:
                holds.add(folder)
            folder = os.path.join(folder, name)
            if not os.path.isdir(folder):
                break
    return {folder: (frozenset(found), folder in holds) for folder, found in names.items()}
