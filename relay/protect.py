"""Undo a command's change to a protected path (SPEC §5, §8, §14).

:func:`snapshot` records what every protected path named literally is before model-written
code runs (a shell call, the audit's commands); :func:`restore` puts back what changed and says
what it found. Nothing is written through a symlink or a hard link the command put there, nor
through a folder it replaced by a symlink (the symlink itself is removed).
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path

from relay.fsread import fixed_real_path, read_regular_bytes
from relay.fswrite import own_folder, replace_file
from relay.globs import parse_globs

WHOLE = 1 << 62
"""A protected file is kept whole, whatever its size (it is written back from the copy)."""

PathState = tuple[str, bytes | str | None]
"""``("file", bytes)``, ``("link", target)``, ``("dir", None)`` or ``("none", None)``."""

Snapshot = dict[Path, tuple[str, bytes | str | None, str]]
"""For each protected path: its :data:`PathState` and the real path of its folder."""


def path_state(path: Path) -> PathState:
    """What ``path`` is now (:data:`PathState`); an unreadable path counts as absent."""
    try:
        mode = os.lstat(path).st_mode  # one look, as the symlink itself
        if stat.S_ISLNK(mode):
            return ("link", os.readlink(path))
        if stat.S_ISREG(mode):
            data = read_regular_bytes(path, limit=WHOLE)
            return ("file", data) if data is not None else ("none", None)
        if stat.S_ISDIR(mode):
            return ("dir", None)
    except OSError:
        pass
    return ("none", None)


def literal_paths(
    root: Path, entries: Iterable[str], skip: Iterable[str | None] = ()
) -> list[Path]:
    """The paths of the protected entries of ``entries`` (relative to ``root``) that name one
    path (no glob: :func:`relay.globs.literal_path`), except those in ``skip``."""
    skipped = set(skip)
    return [
        root / glob.literal
        for glob in parse_globs(entries, root)
        if glob.literal is not None and glob.entry not in skipped
    ]


def snapshot(root: Path, entries: Iterable[str], skip: Iterable[str | None] = ()) -> Snapshot:
    """The state of every path of :func:`literal_paths`."""
    return snapshot_of(literal_paths(root, entries, skip))


def snapshot_of(paths: Iterable[Path]) -> Snapshot:
    """The state of each of ``paths`` (absolute) and the real path of its folder."""
    snap: Snapshot = {}
    folders: dict[Path, str] = {}  # each folder's real path, looked up once
    for path in paths:
        if path.parent not in folders:
            folders[path.parent] = fixed_real_path(path.parent)
        snap[path] = (*path_state(path), folders[path.parent])
    return snap


def restore(root: Path, before: Snapshot) -> list[str]:
    """Put every path of ``before`` back as it was; returns one finding per changed path
    (a folder's content is not kept: the audit compares it with the base commit)."""
    findings = []
    folders: dict[Path, str] = {}
    for path, (kind, value, folder) in before.items():
        if path.parent not in folders:
            folders[path.parent] = fixed_real_path(path.parent)
        moved = folders[path.parent] != folder
        if moved:
            own_folder(root, path.parent, create=False)
            del folders[path.parent]  # looked up again for the next path in it
        if not moved and path_state(path) == (kind, value):
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.lexists(path):
            path.unlink(missing_ok=True)
        if kind in ("file", "link"):
            own_folder(root, path.parent)
        if kind == "file" and isinstance(value, bytes):
            replace_file(path, value)
        elif kind == "link" and isinstance(value, str):
            os.symlink(value, path)
        rel = path.relative_to(root).as_posix()
        if kind == "dir":
            what = "the audit compares it with the base commit"
            findings.append(f"a shell command changed the protected folder {rel}; {what}")
        else:
            findings.append(f"a shell command changed the protected file {rel}; restored")
    return findings
