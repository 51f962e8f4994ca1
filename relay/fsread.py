"""Reading files the model could have planted, without hanging or exhausting memory (SPEC §14).

The audit and the guards read files of the working tree that the model's commands may have
turned into a FIFO (``mkfifo conftest.py``: a plain ``read`` blocks forever), a symlink to
``/dev/zero`` (a plain ``read`` never ends) or a huge file. :func:`read_regular_bytes` opens
without blocking, reads only regular files, and stops at a size limit. :func:`real_path` says
where a path really leads (symlinks resolved) with one lookup by the kernel;
:func:`fixed_real_path` remembers it for relay's own fixed paths while the kernel tells of no
change on their way.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from relay.pathalarm import PathAlarm

__all__ = [
    "MAX_READ_BYTES",
    "fixed_real_path",
    "read_regular_bytes",
    "read_regular_text",
    "real_path",
]

MAX_READ_BYTES = 16 * 1024 * 1024
"""Files larger than this are read up to it (the rest is ignored)."""


def read_regular_bytes(path: Path | str, limit: int = MAX_READ_BYTES) -> bytes | None:
    """The first ``limit`` bytes of ``path`` (symlinks followed), or None when it does not
    exist, cannot be read, or is not a regular file (a FIFO, a device, a folder, a socket)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        chunks: list[bytes] = []
        got = 0
        while got < limit:
            want = min(limit - got, 1 << 20)
            chunk = os.read(fd, want)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
            if len(chunk) < want and got == st.st_size:
                break  # the whole file as fstat saw it, in a short read: no read for its end
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_regular_text(path: Path | str, limit: int = MAX_READ_BYTES) -> str | None:
    """:func:`read_regular_bytes` decoded as UTF-8 (undecodable bytes replaced)."""
    data = read_regular_bytes(path, limit)
    return None if data is None else data.decode("utf-8", errors="replace")


_O_PATH = getattr(os, "O_PATH", None)


def real_path(path: Path | str) -> str:
    """``os.path.realpath(path)``: the absolute path with every symlink resolved.

    Where ``path`` exists, the kernel's own lookup says it (an ``open`` with ``O_PATH``, which
    opens nothing for reading and never blocks, and the ``readlink`` of its
    ``/proc/self/fd`` entry): about 2 µs, against one ``lstat`` per component in Python
    (about 10 µs for a path in a repository; the file tools and the protected paths ask
    tens of times a round). A path that does not exist (yet), a symlink loop, a system
    without ``O_PATH`` or ``/proc``: ``os.path.realpath``.
    """
    if _O_PATH is None:
        return os.path.realpath(path)
    try:
        fd = os.open(path, _O_PATH | os.O_CLOEXEC)
    except (OSError, ValueError):
        return os.path.realpath(path)
    try:
        found = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        found = ""
    finally:
        os.close(fd)
    if not found.startswith("/") or found.endswith(" (deleted)"):
        return os.path.realpath(path)  # no /proc, or removed meanwhile
    return found


_FIXED: dict[str, PathAlarm] = {}
_FIXED_MAX = 64


def fixed_real_path(path: Path | str) -> str:
    """:func:`real_path` of one of relay's own fixed paths (the repository root, the state
    folder, the folder of a protected path). A path that is its own real path (no symlink on
    the way) is remembered as such while the kernel tells of no change to it or to a folder
    on its way (:class:`relay.pathalarm.PathAlarm`: a symlink made anywhere on the way is a
    change); any other path is looked up every time. At most :data:`_FIXED_MAX` paths are
    remembered."""
    key = os.fspath(path)
    if not key.startswith("/") or os.path.normpath(key) != key:
        return real_path(key)  # relative, or ``..`` that only the lookup may resolve
    alarm = _FIXED.pop(key, None)
    if alarm is not None and not alarm.rang():
        _FIXED[key] = alarm
        return key
    # armed before the look: a change after it rings
    alarm = alarm.rearmed() if alarm is not None else PathAlarm([key], contents=False)
    found = real_path(key)
    if found != key:
        alarm.close()
        return found
    if len(_FIXED) >= _FIXED_MAX:
        _FIXED.pop(next(iter(_FIXED))).close()
    _FIXED[key] = alarm
    return found
