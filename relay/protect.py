"""Undo a command's change to a protected path (SPEC §5, §8, §14).

:func:`snapshot` records what every protected path is before model-written code runs (a shell
call, the audit's commands): the paths named literally and, for a folder (``tests``,
``tests/``) or a glob (``tests/**``, ``tests/*.py``), every existing path below or matched,
content included (issue 28: a ``sed -i`` into ``tests/`` was neither undone nor flagged).
:func:`restore` puts back what changed, removes what the command added where the entries
protect, and says what it found. What running code or tests creates (``__pycache__``, byte
code, caches: :data:`relay.audit_checks.GENERATED`) is left alone. Nothing is written through
a symlink or a hard link the command put there, nor through a folder it replaced by a symlink
(the symlink itself is removed).
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from relay import treewrites
from relay.audit_checks import GENERATED
from relay.fsread import fixed_real_path, read_regular_bytes
from relay.fswrite import own_folder, replace_file
from relay.globs import Glob, may_hold, parse_globs
from relay.testfiles import IGNORED_FOLDERS

WHOLE = 1 << 62
"""A protected file is kept whole, whatever its size (it is written back from the copy)."""

PathState = tuple[str, bytes | str | None]
"""``("file", bytes)``, ``("link", target)``, ``("dir", None)`` or ``("none", None)``."""

Saved = tuple[str, bytes | str | None, str]
"""A protected path's :data:`PathState` and the real path of its folder."""

MAX_NAMED = 8
"""Changed paths of a protected folder or glob named one by one in :func:`restore`'s findings;
the others are counted in one more finding."""


@dataclass(frozen=True)
class Snapshot:
    """The protected paths as they were before model-written code ran.

    Attributes:
        paths: every protected path that existed and what it was (:data:`Saved`), parents
            before what they hold.
        entries: the entries whose every path was listed (:func:`tree_paths`): a path they
            match that is not in ``paths`` afterwards is the code's and is removed. Empty for
            a snapshot of literal paths only (:func:`snapshot_of`).
        skip: repo-relative paths never listed nor restored (the goal file, the progress file).
    """

    paths: dict[Path, Saved]
    entries: tuple[str, ...] = ()
    skip: frozenset[str] = field(default_factory=frozenset)


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


def tree_paths(root: Path, entries: Iterable[str], skip: Iterable[str | None] = ()) -> list[Path]:
    """Every existing path of the tree at ``root`` that ``entries`` protect, parents first: a
    path an entry matches (:meth:`relay.globs.Glob.matches`) and everything below a matched
    folder; symlinks are listed, never followed. Left out: ``.git``, the entries and paths in
    ``skip`` (repo-relative), what running code creates (:data:`GENERATED`) and, unless an
    entry matches them, virtual environments and dependencies
    (:data:`relay.testfiles.IGNORED_FOLDERS`: ``.venv``, ``node_modules`` …)."""
    skipped = {s for s in skip if s}
    globs = [g for g in parse_globs(entries, root) if g.entry not in skipped]
    prefixes = [g.prefix() for g in globs]
    found: list[Path] = []
    stack: list[tuple[str, bool]] = [("", False)]
    while stack:
        rel, covered = stack.pop()
        below: list[tuple[str, bool]] = []
        for name, is_dir in _entries(root / rel if rel else root):
            path = f"{rel}/{name}" if rel else name
            if path in skipped or GENERATED.search(path):
                continue
            matched = covered or _matches(globs, path, is_dir)
            if matched:
                found.append(root / path)
            if is_dir and (matched or _may_hold(name, path, prefixes)):
                below.append((path, matched))
        stack.extend(reversed(below))
    return found


def _may_hold(name: str, path: str, prefixes: list[tuple[str, ...] | None]) -> bool:
    """Whether a protected path may lie in the folder ``path`` that no entry matches itself
    (virtual environments and dependencies are not looked into)."""
    return name not in IGNORED_FOLDERS and may_hold(tuple(path.split("/")), prefixes)


def _matches(globs: list[Glob], path: str, is_dir: bool) -> bool:
    return any(g.matches(path, folder=is_dir) for g in globs)


def _entries(folder: Path) -> list[tuple[str, bool]]:
    """``(name, is a real folder)`` of what ``folder`` holds, sorted, without ``.git``."""
    out = []
    try:
        with os.scandir(folder) as scan:
            for entry in scan:
                if entry.name.lower() == ".git":
                    continue
                try:
                    out.append((entry.name, entry.is_dir(follow_symlinks=False)))
                except OSError:
                    continue
    except OSError:
        return []
    return sorted(out)


def snapshot(root: Path, entries: Iterable[str], skip: Iterable[str | None] = ()) -> Snapshot:
    """The state of every path of :func:`tree_paths` (folders' and globs' contents included),
    and what :func:`restore` needs to find the paths added since."""
    entries = tuple(entries)
    skipped = frozenset(s for s in skip if s)
    return Snapshot(_states(tree_paths(root, entries, skipped)), entries, skipped)


def snapshot_of(paths: Iterable[Path]) -> Snapshot:
    """The state of each of ``paths`` (absolute) and the real path of its folder; a path
    added later is not looked for."""
    return Snapshot(_states(paths))


def _states(paths: Iterable[Path]) -> dict[Path, Saved]:
    snap: dict[Path, Saved] = {}
    folders: dict[Path, str] = {}  # each folder's real path, looked up once
    for path in paths:
        if path.parent not in folders:
            folders[path.parent] = fixed_real_path(path.parent)
        snap[path] = (*path_state(path), folders[path.parent])
    return snap


def restore(root: Path, before: Snapshot) -> list[str]:
    """Put every path of ``before`` back as it was and remove the paths its entries match
    that were added since; returns the findings: one per changed path, the paths past
    :data:`MAX_NAMED` counted in one more.

    A path that cannot be put back or removed (made immutable or read-only by the command)
    is a finding saying so; the audit's export takes protected paths from the base commit.
    """
    changed = _remove_added(root, before)
    folders: dict[Path, str] = {}
    for path, (kind, value, folder) in before.paths.items():
        if path.parent not in folders:
            folders[path.parent] = fixed_real_path(path.parent)
        moved = folders[path.parent] != folder
        if moved:
            own_folder(root, path.parent, create=False)
            del folders[path.parent]  # looked up again for the next path in it
        now = path_state(path)
        if not moved and now == (kind, value):
            continue
        rel = path.relative_to(root).as_posix()
        try:
            _put_back(root, path, kind, value)
        except OSError as exc:  # e.g. made immutable (chattr +i) or read-only by the command
            changed.append(
                f"a shell command changed the protected path {rel}; relay could not "
                f"put it back ({exc.strerror or exc}); the audit takes it from the base commit"
            )
            continue
        if kind == "dir":
            changed.append(f"a shell command changed the protected folder {rel}; restored")
        elif now[0] == "none":
            changed.append(f"a shell command deleted the protected file {rel}; restored")
        else:
            changed.append(f"a shell command changed the protected file {rel}; restored")
    if len(changed) <= MAX_NAMED + 1:
        return changed
    rest = len(changed) - MAX_NAMED
    return [*changed[:MAX_NAMED], f"a shell command changed {rest} more protected paths; undone"]


def _put_back(root: Path, path: Path, kind: str, value: bytes | str | None) -> None:
    """Make ``path`` what it was (:data:`PathState` ``kind`` and ``value``)."""
    if path.is_dir() and not path.is_symlink():
        if kind == "dir":
            return  # the folder is there again (a folder above it was put back)
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        path.unlink(missing_ok=True)
    if kind == "dir":
        own_folder(root, path)
    elif kind in ("file", "link"):
        own_folder(root, path.parent)
    if kind == "file" and isinstance(value, bytes):
        replace_file(path, value)
    elif kind == "link" and isinstance(value, str):
        os.symlink(value, path)
    treewrites.wrote(path)


def _remove_added(root: Path, before: Snapshot) -> list[str]:
    """Remove what the code added where ``before``'s entries protect (topmost paths only);
    one finding per removed path."""
    if not before.entries:
        return []
    findings = []
    gone: list[str] = []
    for path in tree_paths(root, before.entries, before.skip):
        rel = path.relative_to(root).as_posix()
        if path in before.paths or any(rel.startswith(g + "/") for g in gone):
            continue
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        except OSError as exc:  # made immutable or unreadable by the command: said, not hidden
            findings.append(
                f"a shell command created {rel} in a protected path; relay could "
                f"not remove it ({exc.strerror or exc}): the audit judges without it"
            )
            continue
        finally:
            treewrites.wrote(path)
        gone.append(rel)
        findings.append(f"a shell command created {rel} in a protected path; removed")
    return findings
