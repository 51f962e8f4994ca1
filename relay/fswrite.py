"""Writing relay's files where the model could have planted links (SPEC §14).

One place for what the file tools, relay's own files of the tree (progress file, goal state),
the restore of protected paths and the restore of git's configuration all need:

* :func:`replace_file` writes a new inode and renames it over the target, so a hard link or a
  symlink the model put there is cut instead of written through;
* :func:`own_folder` makes the folders on the way real folders inside a root, so nothing is
  written through a folder the model replaced by a symlink;
* :func:`put_own_file` writes one of relay's own files of the tree with both;
* :func:`is_temporary` names the temporary files a crash in the middle of a write leaves
  (SPEC §10: recovery removes them, so they are never committed).

The writes are recorded in :mod:`relay.treewrites` (what relay's remembered scan of the working
tree must add to what it found).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

from relay import treewrites

__all__ = [
    "DEFAULT_MODE",
    "TEMP_SUFFIX",
    "is_temporary",
    "own_folder",
    "put_own_file",
    "replace_file",
]

TEMP_SUFFIX = ".relay-tmp"
"""The suffix of :func:`replace_file`'s temporary files (``.<name>.<8 random>.relay-tmp``)."""

_TEMP_NAME = re.compile(r"^\..+\.[a-z0-9_]{8}" + re.escape(TEMP_SUFFIX) + "$")


def _read_umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current


DEFAULT_MODE = 0o666 & ~_read_umask()
"""Permission bits of a new file (read once at import: changing the umask later, even for an
instant, would race with other threads)."""


def replace_file(target: Path, data: bytes, mode: int | None = None, *, sync: bool = False) -> None:
    """Write ``data`` as a new file that replaces ``target`` atomically.

    Args:
        target: the file (its folder must exist); whatever is there that is no folder is
            replaced, never written through (a hard link to a file elsewhere is cut).
        data: the new content.
        mode: permission bits; default those of the existing file, else :data:`DEFAULT_MODE`.
        sync: ``fsync`` the new file before the rename (a crash never leaves it empty).

    Raises:
        OSError: the folder is not writable, or the rename failed (the temporary file is
            removed).
    """
    replaced = os.path.lexists(target)
    if mode is None:
        try:
            mode = stat.S_IMODE(os.stat(target).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            mode = DEFAULT_MODE
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=TEMP_SUFFIX, dir=target.parent)
    try:
        try:  # the descriptor itself: no buffered file object (three system calls less)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        # named before the rename as well: a Ctrl+C that interrupts relay right after it must
        # not leave the write out of what the round's commit looks at (relay.treewrites)
        treewrites.wrote(target, replaced=replaced)
        if sync or not replaced or not _exchange(tmp, target):
            os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    treewrites.wrote(target, replaced=replaced)


_RENAME_EXCHANGE = 2  # renameat2's flag (linux/fs.h)
_AT_FDCWD = -100
_renameat2: Any = None  # libc's renameat2, looked up on first use; False where there is none


def _exchange(new: str, target: Path) -> bool:
    """Put the file ``new`` in place of the existing entry ``target`` (no folder) by
    exchanging the two names atomically (Linux ``renameat2(RENAME_EXCHANGE)``), then remove
    the old entry, which now has the name ``new``. False, and nothing changed, where the
    exchange is not available or ``target`` is (or became) a folder: the caller renames.

    A rename onto an existing file makes ext4 start writing the new file's data out at once
    (``auto_da_alloc``), which costs more than the rest of a small write; the exchange is as
    atomic for every reader and for a killed process, without that. A write that must
    survive a power loss passes ``sync`` to :func:`replace_file` (an ``fsync``), as before.
    """
    global _renameat2
    if _renameat2 is None:
        _renameat2 = _load_renameat2()
    try:
        if _renameat2 is False or stat.S_ISDIR(os.lstat(target).st_mode):
            return False
    except OSError:  # gone meanwhile: the rename creates it
        return False
    old, dest = os.fsencode(new), os.fsencode(target)
    if _renameat2(_AT_FDCWD, old, _AT_FDCWD, dest, _RENAME_EXCHANGE) != 0:
        return False  # not supported here (EINVAL), or the target went away: rename
    try:
        os.unlink(new)  # the old file, or the symlink or hard link that was planted
    except OSError:  # a folder swapped in meanwhile: put both back, the caller's rename fails
        _renameat2(_AT_FDCWD, old, _AT_FDCWD, dest, _RENAME_EXCHANGE)
        return False
    return True


def _load_renameat2() -> Any:
    """libc's ``renameat2`` (glibc 2.28+), or False when this system has none."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    function.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    function.restype = ctypes.c_int
    return function


def own_folder(root: Path, folder: Path, *, create: bool = True) -> None:
    """Make the components of ``folder`` (inside ``root``) real folders: one that is a symlink
    or not a folder is removed (the symlink itself, never what it points at) and made a
    folder; a missing one is created only with ``create``."""
    current = root
    for part in folder.relative_to(root).parts:
        current = current / part
        if current.is_symlink() or (current.exists() and not current.is_dir()):
            current.unlink()
            current.mkdir()
            treewrites.wrote(current)
        elif not current.exists():
            if not create:
                return
            current.mkdir()


def put_own_file(root: Path, path: Path, data: bytes) -> None:
    """Write one of relay's own files of the tree (progress file, goal state) at ``path``
    inside ``root`` as a new file: a symlink, a file or a folder the model put at its place or
    at the place of a folder above it (``.relay`` -> elsewhere) is removed first, so that relay
    never writes outside the repository (SPEC §14). Raises OSError when it cannot write."""
    own_folder(root, path.parent)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.is_symlink():
        path.unlink()
    replace_file(path, data)


def is_temporary(name: str) -> bool:
    """Whether a file name (no folder) is one of :func:`replace_file`'s temporary files."""
    return bool(_TEMP_NAME.match(name))
