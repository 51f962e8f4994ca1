"""Repository path globs: one meaning for every glob relay matches (docs/audit.md, "Globs").

Used by a deliverable's ``changed:`` (SPEC §9) and by the protected paths
(``tools.protected_paths``, SPEC §5, §14): the file tools, the sandbox's read-only mounts, the
undo of a shell command's change and the audit's ``tamper`` check all ask this module.

* An entry without a wildcard (``*``, ``?``, ``[``) or a backslash names one path from the
  repository root: that path, and everything below it when it is a folder. ``relay.yaml`` is
  the root's ``relay.yaml`` only; ``tests`` and ``tests/`` are the root's ``tests`` folder.
* Any other entry is one gitignore pattern, matched with git's wildmatch rules (the
  ``pathspec`` library): ``*`` and ``?`` never match ``/``; ``**`` matches any number of
  folders (``**/test_*.py`` also matches ``test_x.py`` at the root); a pattern with no slash
  but a trailing one matches at any depth (``*.lock`` matches ``a/b.lock``); one with a slash
  is anchored at the root (``src/*.py`` matches ``src/x.py``, not ``src/sub/x.py``); a
  trailing ``/`` matches folders only; a matched folder covers everything below it; ``\\``
  escapes the next character. One entry is one pattern: a leading ``!`` or ``#`` is literal
  (no negation, no comment). A ``[`` that no ``]`` closes makes the entry invalid
  (:func:`check_glob` refuses it; git would match nothing, pathspec the ``[`` literally).
* A leading ``./`` is dropped; a leading ``/`` anchors at the root; an absolute path inside
  the repository is taken relative to it.
* An entry also matches the path it spells literally (a goal file named ``notes[1].md``).
"""

from __future__ import annotations

import functools
import os
import posixpath
import re
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pathspec import GitIgnoreSpec

from relay.errors import ConfigError
from relay.fsread import fixed_real_path, real_path

__all__ = [
    "Glob",
    "GlobError",
    "existing_matches",
    "first_match",
    "glob_match",
    "literal_path",
    "may_hold",
    "parse_glob",
    "parse_globs",
]

_WILD = frozenset("*?[\\")


class GlobError(ConfigError):
    """An entry that is not a valid glob (names the entry and why)."""


@dataclass(frozen=True)
class Glob:
    """One parsed entry.

    Attributes:
        entry: the entry as given.
        literal: the repo-relative POSIX path an entry without a wildcard names, else None.
        text: the gitignore pattern of a glob entry (normalised), else None.
        error: why the glob entry is not a valid pattern (it then matches only literally).
    """

    entry: str
    literal: str | None
    text: str | None
    error: str | None = None

    def matches(self, path: str, *, folder: bool = False) -> bool:
        """Whether the repo-relative POSIX ``path`` (a folder when ``folder``) matches."""
        spelled = self.literal if self.literal is not None else _spelled(self.text)
        if spelled and (path == spelled or path.startswith(spelled + "/")):
            return True
        spec = _spec(self.text) if self.text and not self.error else None
        return spec is not None and spec.match_file(path + "/" if folder else path)

    def covers(self, folder: str) -> bool:
        """Whether the folder ``folder`` and everything below it match (one read-only mount
        protects all of it): the folder matches, or the pattern is ``X/**`` and ``X`` matches
        the folder."""
        if self.matches(folder, folder=True):
            return True
        text = self.text
        if not text or self.error or not text.endswith("/**") or len(text) <= 3:
            return False
        head = text[:-3]
        head = head if head.startswith("/") else "/" + head
        spec = _spec(head + "/")
        return spec is not None and spec.match_file(folder + "/")

    def prefix(self) -> tuple[str, ...] | None:
        """The folders a match must lie in (the pattern's leading parts without a wildcard),
        or None when it may match at any depth."""
        if self.literal is not None:
            return tuple(self.literal.split("/"))
        if self.error:  # matches only as spelled
            return tuple((_spelled(self.text) or "").split("/"))
        text = (self.text or "").rstrip("/")
        if not text or "/" not in text:
            return None
        parts = text.lstrip("/").split("/")
        fixed = []
        for part in parts[:-1]:
            if _WILD & set(part):
                break
            fixed.append(part)
        return tuple(fixed)


def _spelled(text: str | None) -> str | None:
    """A glob's text as a plain path (its anchor and trailing slash dropped)."""
    if not text:
        return None
    return text.lstrip("/").rstrip("/").removeprefix("\\") or None


@functools.lru_cache(maxsize=512)
def _spec(text: str) -> GitIgnoreSpec | None:
    """The compiled one-pattern spec of ``text``; None when pathspec refuses it."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return GitIgnoreSpec.from_lines([text])
    except (ValueError, re.error):
        return None


def _relative(text: str, root: str | None) -> str:
    """``text`` without ``./`` prefixes; an absolute path inside ``root`` made ``/``-anchored."""
    if root and text.startswith("/"):
        normal = os.path.normpath(text)
        if normal == root or normal.startswith(root.rstrip("/") + "/"):
            text = "/" + normal[len(root) :].lstrip("/")
    while text.startswith("./"):
        text = text[2:]
    return text


@functools.lru_cache(maxsize=1024)
def _parse(entry: str, root: str | None) -> Glob:
    text = _relative(entry.strip(), root)
    if not _WILD & set(text):
        path = posixpath.normpath(text.strip("/")) if text.strip("/") else ""
        named = path not in ("", ".", "..") and not path.startswith("../")
        return Glob(entry, path if named else None, None)
    if text.startswith(("!", "#")):
        text = "\\" + text
    if _spec(text) is None or _unclosed_bracket(text):
        return Glob(entry, None, text, f"'{entry}' is not a valid glob (gitignore syntax)")
    return Glob(entry, None, text)


def _unclosed_bracket(text: str) -> bool:
    """Whether ``text`` opens a character class (``[``, not escaped) that no ``]`` closes:
    git matches nothing with it, pathspec takes the ``[`` literally (issue 28, item 12). A
    ``]`` right after ``[`` or ``[!``/``[^`` is a member of the class, not its end."""
    i, n = 0, len(text)
    while i < n:
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == "[":
            j = i + 1
            j += j < n and text[j] in "!^"
            j += j < n and text[j] == "]"
            while j < n and text[j] != "]":
                j += 2 if text[j] == "\\" else 1
            if j >= n:
                return True
            i = j
        i += 1
    return False


def parse_glob(entry: str, root: Path | str | None = None) -> Glob:
    """The parsed ``entry`` (see the module docstring); never raises.

    Args:
        entry: a deliverable's ``changed:`` or a protected entry, e.g. ``"src/**"``.
        root: the repository root, for entries given as absolute paths inside it.
    """
    return _parse(entry, fixed_real_path(root) if root is not None else None)


def parse_globs(entries: Iterable[str], root: Path | str | None = None) -> list[Glob]:
    """Each of ``entries`` parsed (:func:`parse_glob`), in order, ``root`` resolved once."""
    real_root = fixed_real_path(root) if root is not None else None
    return [_parse(entry, real_root) for entry in entries]


def check_glob(entry: str, what: str) -> None:
    """Raise :class:`GlobError` when ``entry`` is not a valid glob.

    Args:
        entry: the glob as configured.
        what: where it comes from, for the message, e.g. ``"tools.protected_paths"``.
    """
    error = parse_glob(entry).error
    if error:
        raise GlobError(
            f"{what}: {error}: a backslash escapes the next character (so it cannot end a "
            "glob) and [ opens a character class that ] closes (write \\[ for a literal [)"
        )


def glob_match(path: str, entry: str, root: Path | str | None = None) -> bool:
    """Whether the repo-relative POSIX ``path`` matches ``entry``."""
    return parse_glob(entry, root).matches(path)


def first_match(path: str, entries: Iterable[str], root: Path | str | None = None) -> str | None:
    """The first of ``entries`` that ``path`` (repo-relative, POSIX) matches, or None."""
    return next((g.entry for g in parse_globs(entries, root) if g.matches(path)), None)


def literal_path(entry: str, root: Path | str | None = None) -> str | None:
    """The repo-relative path an entry without a wildcard names (None for a glob, or an
    entry naming nothing such as ``.`` or ``../x``)."""
    return parse_glob(entry, root).literal


def may_hold(folder: tuple[str, ...], prefixes: list[tuple[str, ...] | None]) -> bool:
    """Whether a match of some glob may lie in ``folder`` (its parts; ``prefixes``: each
    glob's :meth:`Glob.prefix`)."""
    for prefix in prefixes:
        if prefix is None:
            return True
        n = min(len(prefix), len(folder))
        if prefix[:n] == folder[:n]:
            return True
    return False


def _walk(root: str, globs: list[Glob]) -> Iterator[str]:
    """Repo-relative paths of existing entries that ``globs`` match, topmost only (a covered
    folder is one entry); symlinks and ``.git`` entries are left out."""
    prefixes = [g.prefix() for g in globs]
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            entries = sorted(os.scandir(os.path.join(root, rel)), key=lambda e: e.name)
        except OSError:
            continue
        below: list[str] = []
        for entry in entries:
            try:
                if entry.name.lower() == ".git" or entry.is_symlink():
                    continue
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            path = f"{rel}/{entry.name}" if rel else entry.name
            if any(g.covers(path) if is_dir else g.matches(path) for g in globs):
                yield path
            elif is_dir and may_hold(tuple(path.split("/")), prefixes):
                below.append(path)
        stack.extend(reversed(below))


def existing_matches(root: Path, entries: Iterable[str], limit: int) -> list[Path]:
    """Existing paths of the tree at ``root`` that ``entries`` protect, topmost first found,
    resolved, inside ``root``, without symlinks (none is followed); at most ``limit``.

    A folder is listed when it and everything below it match (then nothing below it is);
    a file when it matches. A file lies at or below a listed path exactly when
    :func:`first_match` finds an entry for it.
    """
    real_root = real_path(root)
    globs = [parse_glob(e, real_root) for e in entries]
    found: list[Path] = []

    def add(rel: str) -> bool:
        path = Path(real_root, rel)
        if not path.is_symlink() and path.exists():
            real = Path(real_path(path))
            inside = real != Path(real_root) and Path(real_root) in real.parents
            if inside and real not in found:
                found.append(real)
        return len(found) >= limit

    for glob in globs:
        if glob.literal is not None and add(glob.literal):
            return found
    if any(g.text for g in globs):
        usable = [g for g in globs if g.literal is not None or g.text]
        for rel in _walk(real_root, usable):  # literal entries too: no mount below theirs
            if add(rel):
                break
    return found
