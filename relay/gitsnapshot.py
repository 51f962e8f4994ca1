"""Snapshots of a repository's git configuration files, and driver lines of ``.gitattributes``.

For the loop (SPEC §14): before a round, :func:`take_snapshot` records the bytes (or absence)
of every configuration and attributes file inside ``.git/`` that the model's shell could write
(``config``, ``config.worktree``, ``info/attributes``); after it, :func:`restore_snapshot`
puts back those that changed. A restore never writes through a symbolic or hard link: the
earlier content goes to a new file in the same directory that then replaces the name
(``os.replace``), so a link the model planted is replaced and whatever it points at is left
alone. :func:`new_driver_attributes` finds the lines of a ``.gitattributes`` text that newly
select a ``filter``, ``diff`` or ``merge`` driver, for the loop to undo.

No git process is started here.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from relay.fswrite import own_folder, replace_file

__all__ = ["ConfigSnapshot", "FileState", "new_driver_attributes", "restore_snapshot"]

#: Attributes whose ``name=value`` form selects a driver that runs a program.
DRIVER_ATTRIBUTES = ("filter", "diff", "merge")

_DEFAULT_MODE = 0o644


@dataclass(frozen=True)
class FileState:
    """One file as found by :func:`capture`.

    Attributes:
        path: absolute path.
        kind: ``"absent"``, ``"file"`` (a regular file), ``"symlink"`` or ``"other"``
            (a directory, FIFO, device…: never read, never restored).
        content: a file's bytes; a symlink's target's bytes (None when the link dangles or
            points at something that is not a regular file); None otherwise.
        mode: a regular file's permission bits (a symlink's target's), else 0.
        links: a regular file's hard-link count, else 0.
        target: a symlink's target as stored in the link, else None.
    """

    path: Path
    kind: Literal["absent", "file", "symlink", "other"]
    content: bytes | None = None
    mode: int = 0
    links: int = 0
    target: str | None = None


@dataclass(frozen=True)
class ConfigSnapshot:
    """The state of a repository's model-writable git configuration files at one moment.

    Attributes:
        files: one :class:`FileState` per watched path, in a stable order, no duplicates.
    """

    files: tuple[FileState, ...]


def _read_regular(path: Path) -> tuple[bytes, int] | None:
    """The bytes and permission bits of the regular file at ``path`` (links followed)."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return None
        return path.read_bytes(), stat.S_IMODE(st.st_mode)
    except OSError:
        return None


def capture(path: Path) -> FileState:
    """The :class:`FileState` of ``path`` now (never blocks on a FIFO or device)."""
    try:
        st = os.lstat(path)
    except OSError:  # missing, or a parent is not a directory
        return FileState(path, "absent")
    if stat.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(path)
        except OSError:
            target = ""
        read = _read_regular(path)
        content, mode = read if read else (None, 0)
        return FileState(path, "symlink", content=content, mode=mode, target=target)
    if stat.S_ISREG(st.st_mode):
        read = _read_regular(path)
        if read is None:  # replaced or unreadable in between
            return FileState(path, "other")
        return FileState(
            path, "file", content=read[0], mode=read[1], links=st.st_nlink, target=None
        )
    return FileState(path, "other")


def take_snapshot(paths: Sequence[Path]) -> ConfigSnapshot:
    """Capture ``paths`` (duplicates dropped, order kept)."""
    unique = list(dict.fromkeys(Path(p) for p in paths))
    return ConfigSnapshot(tuple(capture(p) for p in unique))


def _changed(before: FileState, now: FileState) -> bool:
    if before.kind == "other":
        return False  # nothing relay could put back
    if before.kind != now.kind or before.content != now.content or before.mode != now.mode:
        return True
    if before.kind == "symlink":
        return before.target != now.target
    # A new hard link to the file lets whoever holds it write the configuration later.
    return before.kind == "file" and now.links > before.links


def _clear(path: Path) -> None:
    """Remove whatever is at ``path`` (a directory is moved aside, then deleted)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        aside = path.with_name(f".{path.name}.relay-removed-{uuid.uuid4().hex[:8]}")
        os.rename(path, aside)
        shutil.rmtree(aside, ignore_errors=True)  # never follows symbolic links
    else:
        os.unlink(path)


def _ensure_parent(path: Path, stops: Sequence[Path]) -> None:
    """Make every directory below one of ``stops`` on the way to ``path`` a real directory
    (:func:`relay.fswrite.own_folder`: a symbolic link or a file in the way is removed)."""
    parent = path.parent
    base = next((s for s in stops if parent == s or s in parent.parents), None)
    if base is None:
        parent.mkdir(parents=True, exist_ok=True)
    else:
        own_folder(base, parent)


def _write_replacing(path: Path, content: bytes, mode: int) -> None:
    """Atomically make ``path`` a new regular file holding ``content`` (a folder there is
    removed first)."""
    if os.path.isdir(path) and not os.path.islink(path):
        _clear(path)
    replace_file(path, content, mode or _DEFAULT_MODE, sync=True)


def _symlink_replacing(path: Path, target: str) -> None:
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


def _put_back(before: FileState, now: FileState, stops: Sequence[Path]) -> None:
    path = before.path
    if before.kind == "absent":
        _clear(path)
        return
    _ensure_parent(path, stops)
    if before.kind == "file":
        _write_replacing(path, before.content or b"", before.mode)
    elif before.content is None:
        _clear(path)  # it dangled: git read nothing there, and reads nothing now
    elif now.kind == "symlink" and now.target == before.target:
        # The model wrote through the link: the target outside is left as it is, and the
        # name becomes a regular file with the earlier content.
        _write_replacing(path, before.content, before.mode)
    else:
        _symlink_replacing(path, before.target or "")


def restore_snapshot(
    snapshot: ConfigSnapshot, *, stops: Sequence[Path], name: Callable[[Path], str]
) -> list[str]:
    """Put back every file of ``snapshot`` that changed since; return their names.

    Args:
        snapshot: from :func:`take_snapshot`.
        stops: directories that are never replaced (the git directories); missing or
            replaced directories below them on the way to a file (``info/``) are made real
            directories again.
        name: how a path is shown, e.g. ``".git/config"``.

    Returns:
        ``name(path)`` of each restored file in the snapshot's order; ``[]`` when none changed.
        A file that was absent is removed; a regular file is replaced by a new one with its
        earlier bytes and permissions; a symbolic link is re-created (or, when only its
        target's content changed, replaced by a regular file with that earlier content).

    Raises:
        OSError: a file could not be put back (the ones before it are restored).
    """
    restored = []
    for before in snapshot.files:
        now = capture(before.path)
        if _changed(before, now):
            _put_back(before, now, stops)
            restored.append(name(before.path))
    return restored


# ------------------------------------------------------------------ .gitattributes


def _split_line(line: str) -> tuple[str, list[str]] | None:
    """``(pattern, attribute tokens)`` of one ``.gitattributes`` line; None for none."""
    text = line.strip(" \t\r")
    if not text or text.startswith("#"):
        return None
    if text.startswith('"'):
        i, escaped = 1, False
        while i < len(text) and (escaped or text[i] != '"'):
            escaped = not escaped and text[i] == "\\"
            i += 1
        pattern, rest = text[: i + 1], text[i + 1 :]
    else:
        pattern, _, rest = text.replace("\t", " ").partition(" ")
    return pattern, rest.split()


BUILTIN_DRIVERS = {
    "diff": frozenset(
        "ada bash bibtex cpp csharp css dts elixir fortran fountain golang html java kotlin "
        "markdown matlab objc pascal perl php python ruby rust scheme tex".split()
    ),
    "merge": frozenset({"text", "binary", "union"}),
    "filter": frozenset(),
}
"""Drivers git has built in (its ``userdiff`` patterns, the merge drivers): they run no
program, so selecting one is no threat."""


def _sets_driver(token: str) -> bool:
    name, eq, value = token.partition("=")
    return bool(eq) and name in DRIVER_ATTRIBUTES and value not in BUILTIN_DRIVERS.get(name, ())


def _driver_macros(lines: list[tuple[str, list[str]]]) -> set[str]:
    """Names of the macros (``[attr]<name> …``) that set a driver attribute."""
    return {
        pattern[len("[attr]") :]
        for pattern, tokens in lines
        if pattern.startswith("[attr]") and any(_sets_driver(t) for t in tokens)
    }


def _assignments(lines: list[tuple[str, list[str]]], macros: set[str]) -> set[tuple[str, str]]:
    return {
        (pattern, token)
        for pattern, tokens in lines
        for token in tokens
        if _sets_driver(token) or token in macros
    }


def new_driver_attributes(before: str | None, after: str | None) -> list[tuple[int, str]]:
    """The lines of ``after`` that newly select a ``filter``, ``diff`` or ``merge`` driver.

    A line counts when it assigns ``filter=…``, ``diff=…`` or ``merge=…`` (or names a macro,
    defined in ``after``, that does) for a pattern that had no such assignment in ``before``;
    lines that only moved, or only changed other attributes, do not. Macro definitions
    (``[attr]name filter=x``) count like any other line.

    Args:
        before: the file's earlier text; None when it did not exist.
        after: its text now; None when it does not exist.

    Returns:
        ``[(line number, line), …]``, 1-based, the line without its end-of-line characters,
        in file order; ``[]`` when nothing new selects a driver.
    """
    if not after:
        return []
    old = [p for p in (_split_line(ln) for ln in (before or "").split("\n")) if p]
    new_lines = after.split("\n")
    parsed_new = [p for p in (_split_line(ln) for ln in new_lines) if p]
    macros = _driver_macros(parsed_new)
    known = _assignments(old, macros | _driver_macros(old))
    found = []
    for number, line in enumerate(new_lines, start=1):
        parsed = _split_line(line)
        if parsed is None:
            continue
        pattern, tokens = parsed
        if any((_sets_driver(t) or t in macros) and (pattern, t) not in known for t in tokens):
            found.append((number, line.rstrip("\r")))
    return found
