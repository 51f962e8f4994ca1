"""Looking at the working tree (a part of :class:`relay.gitrepo.GitRepo`; SPEC §11): what
changed since a commit, what is uncommitted, the tracked and untracked files.

Every scan is one ``git status``, ``git diff`` or ``git ls-files`` process with NUL-separated
output, run with ``--no-optional-locks`` (looking never writes the index); a submodule's
working tree is never looked into.

One scan per round (after :meth:`GitScan.remember_scans`, which the goal loop calls): the last
scan of the whole tree against HEAD (:class:`TreeScan`, taken by :meth:`GitScan.changes_since`
of HEAD, or known after a commit that staged everything) is remembered while HEAD and the index
file are unchanged, relay ran no git command that writes, and no command ran since
(:mod:`relay.treewrites`). While it holds,
:meth:`~GitScan.status_short`, :meth:`~GitScan.is_dirty_paths` and ``changes_since(HEAD)``
answer from it when no file was written since either, and
:meth:`relay.gitcommit.GitCommits.commit_all` stages only the paths it lists plus the files
relay wrote since (:meth:`~GitScan._remembered`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from relay import treewrites
from relay.errors import RepoStateError
from relay.gitbase import decode_path
from relay.gitrefs import GitRefs

__all__ = ["STATUS_OPTIONS", "GitScan", "TreeScan"]

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


#: ``git status`` of the whole tree as :class:`TreeScan` records it.
_TREE_STATUS = (
    "status",
    *STATUS_OPTIONS,
    "--porcelain=v1",
    "-z",
    "--no-renames",
    "--untracked-files=all",
)


@dataclass(frozen=True)
class TreeScan:
    """What one ``git status`` of the whole working tree against HEAD found, and when.

    Attributes:
        mark: :func:`relay.treewrites.mark` taken before the scan.
        head: HEAD's full sha at the scan.
        index: the index file's ``stat`` at the scan (None when there was none).
        entries: ``(XY, path)`` of each uncommitted path in git's order (``git status
            --porcelain=v1 --no-renames --untracked-files=all``); ``()`` when clean.
        staged: the index holds every change (``git add -A`` staged them,
            :meth:`relay.gitstage.GitStaging.stage_changes`) but they were not listed here:
            the tree is not clean, only nothing is left to stage.
    """

    mark: int
    head: str
    index: tuple[int, ...] | None
    entries: tuple[tuple[str, str], ...] = ()
    staged: bool = False

    def letters(self) -> list[tuple[str, str]]:
        """The entries as :meth:`GitScan.changes_since` gives them: ``(letter, path)``."""
        changes: dict[str, str] = {}
        for xy, path in self.entries:
            if xy == "??":
                changes[path] = "M" if changes.get(path) == "D" else "A"
            elif "D" in xy and path not in changes:
                changes[path] = "D"
            elif "A" in xy and "D" not in xy:
                changes[path] = "A"
            else:
                changes[path] = "M"
        return sorted(((letter, path) for path, letter in changes.items()), key=lambda c: c[1])

    def paths_to_stage(self, root: Path) -> set[str]:
        """The paths ``git add`` must be given to record every entry (a deletion staged
        already, with nothing on disk, needs nothing)."""
        return {
            path
            for xy, path in self.entries
            if xy != "D " or os.path.lexists(root / path.rstrip("/"))
        }


class GitScan(GitRefs):
    """Scans of the working tree (see the module docstring)."""

    _scan: TreeScan | None = None
    _remembering = False

    def remember_scans(self, *, watch_head: bool = False) -> None:
        """Remember the last scan of the working tree from now on (see the module docstring):
        one ``git status`` per round instead of three scans. ``watch_head``: remember HEAD's
        sha while the kernel tells of no change to its files
        (:meth:`relay.gitrefs.GitRefs.head_sha`); only where the model's commands cannot
        write the git directory (the sandbox: a write through ``mmap`` tells the kernel's
        file events nothing).

        Call it only when every write to the working tree from then on is made by relay's
        writers, which record it (:mod:`relay.treewrites`: :mod:`relay.fswrite`, the
        ``shell`` tool and the audit's commands, the stop of escaped processes) or by this
        object's own git commands, as in the goal loop. A file written any other way (plain
        ``open``, a process relay did not start) may otherwise be missing from
        :meth:`status_short` and from the next :meth:`relay.gitcommit.GitCommits.commit_all`.
        """
        self._remembering = True
        self._watch_head = watch_head

    def _tree_may_change(self) -> None:
        self._scan = None

    def _index_stat(self) -> tuple[int, ...] | None:
        try:
            st = os.stat(self._git_dir / "index")
        except OSError:
            return None
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def _remember_clean(self, mark: int, head: str) -> None:
        """Remember that everything was committed at ``head`` (writes after ``mark`` aside)."""
        if self._remembering:
            self._scan = TreeScan(mark, head, self._index_stat())

    def _tree_path(self, path: Path) -> str | None:
        """``path`` repo-relative (POSIX) when it is in the working tree outside the git
        directories, else None."""
        for candidate in (path, path.resolve()):
            if any(d == candidate or d in candidate.parents for d in self._git_dirs()):
                return None
            if self.root in candidate.parents:
                return candidate.relative_to(self.root).as_posix()
        return None

    def _git_dirs(self) -> tuple[Path, ...]:
        return (self._git_dir, self._common_dir)

    def _remembered(self) -> tuple[TreeScan, set[str], set[str]] | None:
        """The remembered scan, the tree's files relay wrote since and those of them a write
        may have created (both repo-relative), while the scan holds (see the module
        docstring); else None (and it is forgotten)."""
        scan = self._scan
        if scan is None:
            return None
        written = treewrites.since(scan.mark)
        try:
            head = self.head_sha()
        except RepoStateError:
            head = ""
        new = treewrites.since(scan.mark, new_only=True)
        if written is None or new is None or head != scan.head or self._index_stat() != scan.index:
            self._scan = None
            return None
        return (
            scan,
            {rel for p in written if (rel := self._tree_path(p)) is not None},
            {rel for p in new if (rel := self._tree_path(p)) is not None},
        )

    def _exact_scan(self) -> TreeScan | None:
        """The remembered scan when nothing at all was written since (and it listed what
        differs from HEAD: not a scan of changes staged unlisted)."""
        remembered = self._remembered()
        if remembered is None or remembered[1] or remembered[0].staged:
            return None
        return remembered[0]

    def _scan_tree(self) -> TreeScan:
        """Scan the whole tree against HEAD now (one ``git status``) and remember it."""
        mark = treewrites.mark()
        head, index = self.head_sha(), self._index_stat()
        out = self._check(list(_TREE_STATUS), "git status failed")
        entries = tuple(
            (token[:2].decode("ascii", "replace"), decode_path(token[3:]))
            for token in out.split(b"\0")
            if len(token) >= 4
        )
        scan = TreeScan(mark, head, index, entries)
        if self._remembering:
            self._scan = scan
        return scan

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
        """:meth:`changes_since` for ``HEAD`` itself: one ``git status`` process, none while
        the remembered scan holds and nothing was written since."""
        return (self._exact_scan() or self._scan_tree()).letters()

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
        One git process; none right after relay committed everything (the remembered scan).
        """
        scan = self._exact_scan()
        if scan is not None and not scan.entries:
            return []
        return self._status(branch=False).dirty

    def status_short(self) -> str:
        """``git status --short`` output without the trailing newline; ``""`` when clean.

        One git process; none right after relay committed everything (the remembered scan).
        """
        scan = self._exact_scan()
        if scan is not None and not scan.entries:
            return ""
        out = self._check(
            ["status", *STATUS_OPTIONS, "--short", "--untracked-files=normal"],
            "git status failed",
        )
        return out.decode("utf-8", "replace").rstrip("\n")
