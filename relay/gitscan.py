"""Looking at the working tree (a part of :class:`relay.gitrepo.GitRepo`; SPEC §11): what
changed since a commit, what is uncommitted, the tracked and untracked files.

Every scan is one ``git status``, ``git diff`` or ``git ls-files`` process with NUL-separated
output, run with ``--no-optional-locks`` (looking never writes the index); a submodule's
working tree is never looked into.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from relay.errors import RepoStateError
from relay.gitbase import decode_path
from relay.gitrefs import GitRefs

__all__ = ["STATUS_OPTIONS", "GitScan"]

#: Options of relay's ``git status``/``git diff`` against the working tree. A submodule's
#: working tree is not looked into: git would run ``git status`` inside it, with the
#: submodule's own configuration (filters relay has not neutralised). A submodule whose
#: checked-out commit changed still shows; relay never commits inside submodules.
STATUS_OPTIONS = ("--ignore-submodules=dirty",)


@dataclass
class _Status:
    """Parsed ``git status --porcelain=v2 -z --branch``."""

    unborn: bool
    branch: str | None  # None when detached
    dirty: list[str]  # every uncommitted path, untracked ones included, in git's order
    unmerged: list[str]


class GitScan(GitRefs):
    """Scans of the working tree (see the module docstring)."""

    def _status(self, *, branch: bool) -> _Status:
        args = ["status", *STATUS_OPTIONS, "--porcelain=v2", "-z", "--untracked-files=normal"]
        if branch:
            args.append("--branch")
        out = self._check(args, "git status failed")
        unborn = False
        current: str | None = None
        dirty: list[str] = []
        unmerged: list[str] = []
        tokens = out.split(b"\0")
        i = 0
        while i < len(tokens):
            token = tokens[i]
            i += 1
            if not token:
                continue
            kind = token[:1]
            if kind == b"#":
                header = token.decode("utf-8", "replace")
                if header.startswith("# branch.oid "):
                    unborn = header.endswith("(initial)")
                elif header.startswith("# branch.head "):
                    name = header[len("# branch.head ") :]
                    current = None if name == "(detached)" else name
            elif kind == b"1":
                dirty.append(decode_path(token.split(b" ", 8)[8]))
            elif kind == b"2":
                dirty.append(decode_path(token.split(b" ", 9)[9]))
                if i < len(tokens):  # the rename's original path
                    dirty.append(decode_path(tokens[i]))
                    i += 1
            elif kind == b"u":
                path = decode_path(token.split(b" ", 10)[10])
                unmerged.append(path)
                dirty.append(path)
            elif kind == b"?":
                dirty.append(decode_path(token[2:]))
        return _Status(unborn=unborn, branch=current, dirty=dirty, unmerged=unmerged)

    def changes_since(self, since: str) -> list[tuple[str, str]]:
        """Every path that differs between commit ``since`` and the working tree, with a letter.

        Covers committed changes after ``since``, staged and unstaged changes, and untracked files
        that are not ignored. Renames appear as ``("D", old)`` and ``("A", new)``; type changes
        and unmerged entries as ``"M"``. Two git processes.

        Args:
            since: a commit-ish (sha, branch, ``HEAD~3``…).

        Returns:
            ``[(letter, path), …]`` with letter ``"A"``, ``"M"`` or ``"D"`` and the path
            repo-relative in POSIX form, sorted by path.

        Raises:
            RepoStateError: ``since`` is not a commit of this repository.
        """
        if since == self.head_sha():
            return self._changes_since_head()
        out = self._check(
            [
                "diff",
                *STATUS_OPTIONS,
                "--no-renames",
                "--no-ext-diff",
                "--no-textconv",
                "--name-status",
                "-z",
                "--end-of-options",
                since,
                "--",
            ],
            f"cannot compare with {since!r}",
        )
        changes: dict[str, str] = {}
        tokens = out.split(b"\0")
        for i in range(0, len(tokens) - 1, 2):
            letter = tokens[i].decode("ascii", "replace")[:1]
            changes[decode_path(tokens[i + 1])] = letter if letter in ("A", "D") else "M"
        untracked = self._check(
            ["ls-files", "--others", "--exclude-standard", "-z"], "git ls-files failed"
        )
        for raw in untracked.split(b"\0"):
            if raw:
                path = decode_path(raw)
                # Removed from the index but still on disk: it exists in both, so "M".
                changes[path] = "M" if changes.get(path) == "D" else "A"
        return sorted(((letter, path) for path, letter in changes.items()), key=lambda c: c[1])

    def _changes_since_head(self) -> list[tuple[str, str]]:
        """:meth:`changes_since` for ``HEAD`` itself: one ``git status`` process."""
        out = self._check(
            [
                "status",
                *STATUS_OPTIONS,
                "--porcelain=v1",
                "-z",
                "--no-renames",
                "--untracked-files=all",
            ],
            "git status failed",
        )
        changes: dict[str, str] = {}
        for token in out.split(b"\0"):
            if len(token) < 4:
                continue
            xy, path = token[:2].decode("ascii", "replace"), decode_path(token[3:])
            if xy == "??":
                changes[path] = "M" if changes.get(path) == "D" else "A"
            elif "D" in xy and path not in changes:
                changes[path] = "D"
            elif "A" in xy and "D" not in xy:
                changes[path] = "A"
            else:
                changes[path] = "M"
        return sorted(((letter, path) for path, letter in changes.items()), key=lambda c: c[1])

    def shortstat(self, base: str, other: str, exclude: Sequence[str] = ()) -> str:
        """``git diff --shortstat base..other`` (``""`` when nothing differs), leaving out the
        ``exclude`` paths (repo-relative). Raises ``RepoStateError`` for an unknown commit."""
        for rev in (base, other):
            if not rev or rev.startswith("-"):
                raise RepoStateError(f"unknown revision {rev!r}")
        pathspec = ["--", ".", *(f":(exclude,literal){p}" for p in exclude)]
        out = self._check(
            [
                "diff",
                "--shortstat",
                "--no-ext-diff",
                "--no-textconv",
                f"{base}..{other}",
                *pathspec,
            ],
            f"cannot compare {base} with {other}",
        )
        return out.decode("utf-8", "replace").strip()

    def files(self) -> list[str]:
        """Tracked and untracked (not ignored) files of the working tree, repo-relative."""
        out = self._check(
            ["ls-files", "--cached", "--others", "--exclude-standard", "-z"], "git ls-files failed"
        )
        return sorted({decode_path(raw) for raw in out.split(b"\0") if raw})

    def changed_paths(self, since: str) -> list[str]:
        """The paths of :meth:`changes_since` (renames give both paths), sorted, POSIX form."""
        return [path for _, path in self.changes_since(since)]

    def is_dirty_paths(self) -> list[str]:
        """Uncommitted paths: staged or unstaged changes and untracked, not ignored, files.

        Paths are repo-relative, as ``git status --porcelain`` prints them (an untracked
        directory is one entry ending in ``/``; a rename gives both paths). Empty when clean.
        One git process.
        """
        return self._status(branch=False).dirty

    def status_short(self) -> str:
        """``git status --short`` output without the trailing newline; ``""`` when clean."""
        out = self._check(
            ["status", *STATUS_OPTIONS, "--short", "--untracked-files=normal"],
            "git status failed",
        )
        return out.decode("utf-8", "replace").rstrip("\n")
