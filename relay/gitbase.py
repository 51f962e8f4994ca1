"""The base of :class:`relay.gitrepo.GitRepo`: opening the repository and running git in it.

:class:`GitBase` discovers the repository with gitpython (in-process, with a loose-object
database so that gitpython never starts a git process of its own) and runs every git command
through :class:`relay.gitsafe.SafeGit` (hardened environment and configuration, SPEC §14).
The other parts of ``GitRepo`` (:mod:`relay.gitrefs`, :mod:`relay.gitscan`,
:mod:`relay.gitcommit`, :mod:`relay.gitround`) build on it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Unpack

import git
from gitdb.db import LooseObjectDB

from relay.errors import RepoStateError
from relay.gitsafe import GitOptions, SafeGit

__all__ = ["FULL_SHA", "GitBase", "decode_path"]

#: A full object name: 40 hexadecimal digits (SHA-1) or 64 (SHA-256), lowercase.
FULL_SHA = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")


def decode_path(raw: bytes) -> str:
    """Decode a path from git output the way the OS would (undecodable bytes survive)."""
    return os.fsdecode(raw)


class GitBase:
    """A non-bare git repository relay works in (see :class:`relay.gitrepo.GitRepo`).

    Args:
        path: any directory (or file) inside the working tree; parent directories are searched
            for the repository, as git does.

    Raises:
        RepoStateError: ``path`` is not inside a git working tree, or the repository is bare.

    Attributes:
        root: the resolved absolute path of the working tree's top directory.
    """

    _watch_head = False
    """Whether HEAD's sha is remembered while the kernel tells of no change to its files."""

    root: Path

    def __init__(self, path: Path) -> None:
        path = Path(path)
        try:
            exists, is_file = path.exists(), path.is_file()
        except OSError as exc:  # a name too long for the file system, …
            raise RepoStateError(f"{path}: {exc.strerror}; give the repository's folder") from None
        if not exists:
            raise RepoStateError(f"{path} does not exist; give the repository's folder")
        start = path.parent if is_file else path
        try:
            # A loose-object database read in-process: gitpython never starts its persistent
            # `git cat-file` (which would carry relay's whole environment). relay reads refs
            # through gitpython, never objects.
            repo = git.Repo(start, search_parent_directories=True, odbt=LooseObjectDB)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise RepoStateError(
                f"{path.resolve()} is not a git repository: run relay inside one (or point "
                "--repo at one), or make this folder one with git init and a first commit"
            ) from None
        if repo.bare or repo.working_tree_dir is None:
            repo.close()
            raise RepoStateError(
                f"{path} is a bare git repository (it has no working tree); "
                "clone it or add a worktree (git worktree add) and run relay there"
            )
        self._repo = repo
        self.root = Path(repo.working_tree_dir).resolve()
        self._git_dir = Path(repo.git_dir).resolve()
        self._common_dir = Path(repo.common_dir).resolve()
        self._git = SafeGit(self.root, self._git_dir, self._common_dir)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.root)!r})"

    @property
    def git_dir(self) -> Path:
        """The working tree's own git directory (``.git``, or ``.git/worktrees/<name>`` of a
        linked worktree), resolved."""
        return self._git_dir

    @property
    def common_dir(self) -> Path:
        """The repository's shared git directory (the same as :attr:`git_dir` except in a
        linked worktree), resolved."""
        return self._common_dir

    def _forget_log(self) -> None:
        """Drop what is cached about the history (the branch moved in a way relay did not
        record); the parts that cache something extend it."""

    def _tree_may_change(self) -> None:
        """Drop what is remembered about the working tree and the index (relay is about to run
        a git command that may change them, or changed git's configuration); the parts that
        remember something extend it."""

    # ------------------------------------------------------------------ running git

    def _run(self, args: Sequence[str], **options: Unpack[GitOptions]) -> tuple[int, bytes, str]:
        """Run one hardened git command in this repository (:meth:`SafeGit.run`, with its
        options); return (exit code, stdout bytes, stderr text). A command that is not
        ``read_only`` (and talks to no remote) first drops what is remembered about the tree."""
        if not options.get("read_only", True) and not options.get("network", False):
            self._tree_may_change()
        return self._git.run(args, **options)

    def _check(self, args: Sequence[str], what: str, **options: Unpack[GitOptions]) -> bytes:
        """Run git; raise RepoStateError(``what: <git's message>``) on a non-zero exit."""
        status, out, err = self._run(args, **options)
        if status != 0:
            raise RepoStateError(f"{what}: {err or f'git exited with status {status}'}")
        return out

    def close(self) -> None:
        """Release gitpython's resources (its cached processes, if any)."""
        self._repo.close()
