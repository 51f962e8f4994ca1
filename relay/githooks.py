"""Snapshots of git's hooks folders, and their restore after the model's commands (SPEC §11,
§14).

git runs the programs of its hooks folder (``.git/hooks``, shared by linked worktrees, or the
folder ``core.hooksPath`` names) on the user's own ``git commit``, ``checkout``, ``push``…,
unconfined. Inside the sandbox that folder is read-only; without it a ``shell`` command could
plant a ``pre-commit`` hook, edit a sample, ``chmod +x`` one (``pre-commit.sample`` does not
run, but a copy does) or put a symbolic link to a script of its own there. relay's own git
calls never run hooks (:mod:`relay.gitsafe`); this module keeps the user's from being changed:

* :func:`take_hooks` records every entry below each folder (name, kind, bytes of regular
  files, permission bits, symbolic links' targets), never following a link inside it;
* :func:`restore_hooks` compares the folders with it and puts them back exactly: entries that
  were added are removed, changed or deleted ones are written again (a new file replaces the
  name: a planted hard or symbolic link is cut, what it points at is left alone), modes are
  set back. It returns what it undid, one line per folder, for a ``tamper`` finding.

A folder that is itself a symbolic link (the user's ``.git/hooks -> ~/dotfiles/hooks``) is
looked into and kept a link to the same target. No git process is started here.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from relay.fswrite import replace_file

__all__ = ["HooksSnapshot", "restore_hooks", "take_hooks"]

Kind = Literal["absent", "file", "symlink", "dir", "other"]

MAX_LISTED = 5
"""Changes named in a folder's finding; more are counted."""
MAX_ENTRIES = 2000
MAX_BYTES = 32 * 1024 * 1024
"""A hooks folder holding more entries or bytes than these (a ``core.hooksPath`` naming a
big folder) is recorded at its top level only, where the hooks git runs are."""
MAX_FILE_BYTES = 1024 * 1024
"""In a folder recorded at its top level only, larger files are not kept (nor restored)."""


@dataclass(frozen=True)
class Entry:
    """One entry of a hooks folder: its kind, a regular file's bytes, its permission bits, a
    regular file's hard-link count and a symbolic link's target."""

    kind: Kind
    content: bytes | None = None
    mode: int = 0
    links: int = 0
    target: str | None = None
    size: int = 0


@dataclass(frozen=True)
class Folder:
    """A hooks folder as found: ``path`` as git names it, its own entry (a folder, a link to
    one, absent…) and, when it is or points at a folder, ``entries`` by relative POSIX path."""

    path: Path
    own: Entry
    entries: dict[str, Entry] = field(default_factory=dict)
    deep: bool = True
    """Whether ``entries`` holds everything below the folder (else its top level alone)."""


@dataclass(frozen=True)
class HooksSnapshot:
    """The hooks folders of a repository at one moment (:func:`take_hooks`)."""

    folders: tuple[Folder, ...] = ()


def _entry(path: Path, *, content: bool) -> Entry:
    """The :class:`Entry` at ``path`` (links not followed); a regular file's bytes only with
    ``content`` (never blocks on a FIFO: it is ``other``)."""
    try:
        st = os.lstat(path)
    except OSError:
        return Entry("absent")
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        try:
            return Entry("symlink", target=os.readlink(path))
        except OSError:
            return Entry("symlink", target="")
    if stat.S_ISDIR(st.st_mode):
        return Entry("dir", mode=mode)
    if not stat.S_ISREG(st.st_mode):
        return Entry("other", mode=mode)
    data = None
    if content:
        try:
            data = path.read_bytes()
        except OSError:
            return Entry("other", mode=mode)
    return Entry("file", data, mode, st.st_nlink, size=st.st_size)


def _real_folder(path: Path, own: Entry) -> Path | None:
    """The folder whose entries count: ``path`` itself, or the folder a link there names."""
    if own.kind == "dir":
        return path
    if own.kind == "symlink" and os.path.isdir(path):
        return Path(os.path.realpath(path))
    return None


class _TooBig(Exception):
    """A folder holds more than :data:`MAX_ENTRIES` entries or :data:`MAX_BYTES` of files."""


def _walk(folder: Path, *, content: bool, deep: bool = True) -> dict[str, Entry]:
    """Every entry below ``folder`` by relative POSIX path (links inside are not entered;
    only the top level unless ``deep``). With ``content`` and ``deep``, raises
    :class:`_TooBig` past the budget; with ``content`` but not ``deep``, a regular file
    larger than :data:`MAX_FILE_BYTES` is recorded as ``other`` (never restored)."""
    found: dict[str, Entry] = {}
    pending, read = [""], 0
    while pending:
        rel = pending.pop()
        try:
            names = sorted(os.listdir(folder / rel if rel else folder))
        except OSError:
            continue
        for name in names:
            sub = f"{rel}/{name}" if rel else name
            entry = _entry(folder / sub, content=False)
            if content and deep and (len(found) >= MAX_ENTRIES or read + entry.size > MAX_BYTES):
                raise _TooBig(folder)  # checked before the file is read
            if content and entry.kind == "file":
                if deep or entry.size <= MAX_FILE_BYTES:
                    read += entry.size
                    entry = _entry(folder / sub, content=True)
                else:
                    entry = Entry("other", mode=entry.mode)
            found[sub] = entry
            if entry.kind == "dir" and deep:
                pending.append(sub)
    return found


def _folder(path: Path) -> Folder:
    """A hooks folder with its entries' contents: all of them, or, past the budget, its top
    level alone (the hooks git runs are there)."""
    own = _entry(path, content=False)
    real = _real_folder(path, own)
    if real is None:
        return Folder(path, own)
    try:
        return Folder(path, own, _walk(real, content=True))
    except _TooBig:
        return Folder(path, own, _walk(real, content=True, deep=False), deep=False)


def take_hooks(paths: Sequence[Path]) -> HooksSnapshot:
    """Record the hooks folders ``paths`` (duplicates dropped, order kept; a missing one is
    recorded as absent). Never raises: what cannot be read is recorded as ``other`` (never
    restored)."""
    unique = list(dict.fromkeys(Path(p) for p in paths))
    return HooksSnapshot(tuple(_folder(p) for p in unique))


def _clear(path: Path) -> None:
    """Remove whatever is at ``path``; a folder is renamed aside first, then deleted whole
    (:func:`shutil.rmtree` never follows a link)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        aside = path.with_name(f".{path.name}.relay-removed-{uuid.uuid4().hex[:8]}")
        os.rename(path, aside)
        _open_up(aside)
        shutil.rmtree(aside, ignore_errors=True)
    else:
        os.unlink(path)


def _open_up(folder: Path) -> None:
    """Give the owner every right on ``folder`` and the folders below it (a folder the model
    made unreadable or unwritable could not be emptied); links are never followed."""
    with contextlib.suppress(OSError):
        os.chmod(folder, 0o700)
    for top, dirs, _files in os.walk(folder):
        for name in dirs:
            sub = os.path.join(top, name)
            if not os.path.islink(sub):
                with contextlib.suppress(OSError):
                    os.chmod(sub, 0o700)


def _symlink(path: Path, target: str) -> None:
    """Make ``path`` a symbolic link to ``target`` in one rename (whatever was there goes)."""
    tmp = path.with_name(f".{path.name}.relay-restore-{uuid.uuid4().hex[:8]}")
    os.symlink(target, tmp)
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            _clear(path)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _put(path: Path, before: Entry, now: Entry) -> None:
    """Make ``path`` what ``before`` says (``now`` is what is there)."""
    if before.kind == "dir":
        if now.kind != "dir":
            _clear(path)
            os.mkdir(path, before.mode)
        os.chmod(path, before.mode)
    elif before.kind == "symlink":
        _symlink(path, before.target or "")
    elif before.kind == "file":
        if now.kind == "dir":
            _clear(path)
        replace_file(path, before.content or b"", before.mode)


def _differs(before: Entry, now: Entry, path: Path) -> str | None:
    """How ``now`` differs from ``before`` in kind or content (None: the same, but maybe in
    mode). A regular file gaining hard links counts: whoever holds one may write it later."""
    if before.kind != now.kind:
        return "deleted" if now.kind == "absent" else "replaced"
    if before.kind == "symlink" and before.target != now.target:
        return "re-pointed"
    if before.kind == "file":
        if now.size != before.size or now.links > before.links:
            return "changed"
        if _entry(path, content=True).content != before.content:
            return "changed"
    return None


def _mode_change(rel: str, before: Entry, now: Entry) -> str | None:
    if before.kind not in ("file", "dir") or before.mode == now.mode:
        return None
    if before.kind == "file" and not before.mode & 0o111 and now.mode & 0o111:
        return f"made {rel} executable"
    return f"changed the mode of {rel} ({before.mode:o} to {now.mode:o})"


def _restore_entries(root: Path, entries: dict[str, Entry], *, deep: bool) -> list[str]:
    """Put the entries below ``root`` back as ``entries`` says (its top level alone unless
    ``deep``); what was undone."""
    now = _walk(root, content=False, deep=deep)
    undone = []
    removed: list[str] = []
    for rel in sorted(set(now) - set(entries)):  # a folder before what it holds
        if any(rel.startswith(f"{gone}/") for gone in removed):  # gone with its folder
            continue
        _clear(root / rel)
        removed.append(rel)
        undone.append(f"added {rel}")
    for rel, before in sorted(entries.items()):  # a folder before what it holds
        if before.kind in ("other", "absent"):
            continue
        current = _entry(root / rel, content=False)
        how = _differs(before, current, root / rel)
        if how is not None:
            _put(root / rel, before, current)
            undone.append(f"{how} {rel}")
        elif (change := _mode_change(rel, before, current)) is not None:
            os.chmod(root / rel, before.mode)
            undone.append(change)
    return undone


def _restore_folder(folder: Folder) -> list[str]:
    """Put one hooks folder back; what was undone (relative to the folder)."""
    path, before = folder.path, folder.own
    now = _entry(path, content=False)
    if before.kind == "other":
        return []
    if before.kind == "absent":
        if now.kind == "absent":
            return []
        _clear(path)
        return ["created the folder"]
    undone = []
    if before.kind != now.kind or (before.kind == "symlink" and before.target != now.target):
        _put(path, before, now)
        undone.append("replaced the folder")
    elif before.kind == "dir" and before.mode != now.mode:
        os.chmod(path, before.mode)
        undone.append(f"changed the folder's mode ({before.mode:o} to {now.mode:o})")
    real = _real_folder(path, _entry(path, content=False))
    if real is not None:
        undone += _restore_entries(real, folder.entries, deep=folder.deep)
    return undone


def restore_hooks(snapshot: HooksSnapshot, *, name: Callable[[Path], str]) -> list[str]:
    """Put every hooks folder of ``snapshot`` back as it was.

    Args:
        snapshot: from :func:`take_hooks`.
        name: how a folder is shown, e.g. ``".git/hooks"``.

    Returns:
        One line per folder that had changed, e.g. ``".git/hooks: added pre-commit, made
        pre-commit.sample executable"`` (at most :data:`MAX_LISTED` changes named, the rest
        counted); ``[]`` when none had.

    Raises:
        OSError: an entry could not be put back (the folders before it are restored).
    """
    lines = []
    for folder in snapshot.folders:
        undone = _restore_folder(folder)
        if undone:
            shown = ", ".join(undone[:MAX_LISTED])
            if len(undone) > MAX_LISTED:
                shown += f" and {len(undone) - MAX_LISTED} more"
            lines.append(f"{name(folder.path)}: {shown}")
    return lines
