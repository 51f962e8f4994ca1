"""Writing relay's files where the model could have planted links (SPEC §14).

One place for what the file tools, relay's own files of the tree (progress file, goal state),
the restore of protected paths and the restore of git's configuration all need:

* :func:`replace_file` writes a new inode and renames it over the target, so a hard link or a
  symlink the model put there is cut instead of written through;
* :func:`own_folder` makes the folders on the way real folders inside a root, so nothing is
  written through a folder the model replaced by a symlink.

Both record what they changed in :mod:`relay.treewrites` (what relay's remembered scan of the
working tree must add to what it found).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from relay import treewrites

__all__ = ["DEFAULT_MODE", "own_folder", "replace_file"]


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
    if mode is None:
        try:
            mode = stat.S_IMODE(os.stat(target).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            mode = DEFAULT_MODE
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".relay-tmp", dir=target.parent)
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
    treewrites.wrote(target)


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
