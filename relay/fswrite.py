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
import tempfile
from pathlib import Path

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
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            if sync:
                os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    treewrites.wrote(target, replaced=replaced)


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
