"""Refs, branches and worktrees of a repository (a part of :class:`relay.gitrepo.GitRepo`;
SPEC §11): HEAD and the current branch (read in-process), branch look-ups and creation,
checkouts, linked worktrees and the push of the goal's branch.
"""

from __future__ import annotations

import os
from pathlib import Path

from git.refs.symbolic import SymbolicReference

from relay.errors import RepoStateError
from relay.fsread import read_regular_bytes
from relay.gitbase import FULL_SHA
from relay.gitsecrets import GitSecrets
from relay.pathalarm import PathAlarm

__all__ = ["PUSH_TIMEOUT_S", "GitRefs"]

#: Seconds a ``git push`` may take before it is killed.
PUSH_TIMEOUT_S = 300.0


class GitRefs(GitSecrets):
    """Refs, branches, worktrees and the push (see the module docstring)."""

    def current_branch(self) -> str | None:
        """The checked-out branch's short name (e.g. ``"relay/fix-login"``); None if detached.

        For a new repository without commits this is the unborn branch's name. No git process:
        HEAD is read in-process (gitpython for anything but ``ref: refs/heads/<name>`` or a
        sha).
        """
        try:
            text = (self._git_dir / "HEAD").read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            text = ""
        if text.startswith("ref: refs/heads/") and len(text) > 16:
            return text[16:]
        if len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text):
            return None
        head = self._repo.head
        if head.is_detached:
            return None
        path = head.reference.path
        return path.removeprefix("refs/heads/")

    def _has_commits(self) -> bool:
        status, _, _ = self._run(["rev-parse", "--verify", "-q", "HEAD^{commit}"])
        return status == 0

    _head_seen: tuple[tuple[object, ...], str] | None = None
    _head_alarm: PathAlarm | None = None

    def head_sha(self) -> str:
        """The full sha of the commit HEAD points to. Read in-process, and only when one of
        the files it is read from (HEAD, the ref it names, ``packed-refs``) changed since the
        last call: the kernel tells of a change to them (:mod:`relay.pathalarm`; in the
        sandbox, see :meth:`relay.gitscan.GitScan.remember_scans`), else their contents are
        compared (:meth:`_head_files`). A round asks about ten times.

        Raises:
            RepoStateError: the repository has no commits yet.
        """
        seen, alarm = self._head_seen, self._head_alarm
        if seen is not None and alarm is not None and not alarm.rang():
            return seen[1]  # only armed with remember_scans(watch_head=True)
        if alarm is not None and not alarm.reset():  # before the read: a change after rings
            alarm.close()
            alarm = self._head_alarm = None
        key = self._head_files()
        if key is not None and seen is not None and seen[0] == key:
            sha = seen[1]
        else:
            sha = _named_sha(key) or self._read_head()
        self._head_seen = (key, sha) if key is not None else None
        paths = self._head_paths(key) if key is not None else None
        if alarm is not None and alarm.paths != paths:
            alarm.close()  # HEAD names another ref now (or cannot be cached)
            alarm = self._head_alarm = None
        if alarm is None and key is not None and paths is not None and self._watch_head:
            self._arm_head_alarm(key, paths)
        return sha

    def _head_paths(self, key: tuple[object, ...]) -> tuple[str, ...]:
        """The files HEAD's sha was read from when it read as ``key``: HEAD, and for a
        symbolic HEAD the loose ref in both git directories and ``packed-refs``."""
        head = key[0]
        assert isinstance(head, bytes)
        paths = [f"{self._git_dir}/HEAD"]
        if head.startswith(b"ref:"):
            ref = head[4:].strip().decode("utf-8", "replace")
            paths += [os.path.join(d, ref) for d in (self._git_dir, self._common_dir)]
            paths.append(os.path.join(self._common_dir, "packed-refs"))
        return tuple(paths)

    def _arm_head_alarm(self, key: tuple[object, ...], paths: tuple[str, ...]) -> None:
        """Watch ``paths`` when they still read as ``key`` once the alarm is armed (a change
        in between is then not missed)."""
        alarm = PathAlarm(paths, contents=True)
        if self._head_files() == key:
            self._head_alarm = alarm
        else:
            alarm.close()

    def _head_files(self) -> tuple[object, ...] | None:
        """What HEAD's sha is read from: HEAD's content, the content of the loose ref it
        names, else the identity (inode, size, times) of ``packed-refs`` (git replaces it by
        renaming a new file onto it). None when HEAD cannot be read or names a ref that is
        itself symbolic (no cache then)."""
        head = read_regular_bytes(f"{self._git_dir}/HEAD")  # no file object: asked often
        if head is None:
            return None
        if not head.startswith(b"ref:"):
            return (head,)
        ref = head[4:].strip().decode("utf-8", "replace")
        for folder in (self._git_dir, self._common_dir):
            loose = read_regular_bytes(os.path.join(folder, ref))
            if loose is None:
                continue
            return None if loose.startswith(b"ref:") else (head, loose)
        try:
            st = os.stat(self._common_dir / "packed-refs")
        except OSError:
            return (head, None)
        return (head, None, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def _read_head(self) -> str:
        """HEAD's sha through gitpython (packed refs), else ``git rev-parse``."""
        try:
            sha = SymbolicReference.dereference_recursive(self._repo, "HEAD")
        except (ValueError, OSError):
            sha = ""
        if FULL_SHA.match(sha or ""):
            return sha
        status, out, _ = self._run(["rev-parse", "--verify", "-q", "HEAD^{commit}"])
        if status != 0:
            raise RepoStateError("the repository has no commits yet; make a first commit")
        return out.decode("ascii").strip()

    def branch_exists(self, name: str) -> bool:
        """True when the local branch ``name`` (short name, e.g. ``"relay/x"``) exists."""
        if not name or name.startswith("-"):
            return False
        status, _, _ = self._run(["show-ref", "--verify", "--quiet", f"refs/heads/{name}"])
        return status == 0

    def branch_ref(self, name: str, remote: str = "origin") -> str | None:
        """The ref that holds branch ``name``: the local branch, else ``<remote>/<name>`` (a
        fresh CI clone has only the remote-tracking one); None when neither exists."""
        if self.branch_exists(name):
            return name
        if not name or name.startswith("-"):
            return None
        status, _, _ = self._run(
            ["show-ref", "--verify", "--quiet", f"refs/remotes/{remote}/{name}"]
        )
        return f"{remote}/{name}" if status == 0 else None

    def resolve(self, ref: str) -> str:
        """The full sha of commit-ish ``ref``; raises ``RepoStateError`` when unknown."""
        out = self._check(
            ["rev-parse", "--verify", "--end-of-options", f"{ref}^{{commit}}"],
            f"unknown revision {ref!r}",
        )
        return out.decode("ascii", "replace").strip()

    def track_branch(self, name: str, remote: str = "origin") -> None:
        """Create the local branch ``name`` from ``<remote>/<name>`` (no checkout)."""
        self._check(
            ["branch", "--track", name, f"{remote}/{name}"],
            f"cannot create the local branch {name} from {remote}/{name}",
            read_only=False,
        )

    def _branches(self) -> set[str]:
        out = self._check(
            ["for-each-ref", "--format=%(refname)", "refs/heads/"], "git for-each-ref failed"
        )
        return {
            line.removeprefix("refs/heads/")
            for line in out.decode("utf-8", "surrogateescape").splitlines()
            if line
        }

    def unique_branch(self, base: str) -> str:
        """``base`` if no local branch has that name, else the first free ``base-2``, ``base-3``…

        Args:
            base: a branch short name, e.g. ``"relay/fix-login"``. One git process.
        """
        existing = self._branches()
        if base not in existing:
            return base
        n = 2
        while f"{base}-{n}" in existing:
            n += 1
        return f"{base}-{n}"

    def validate_branch_name(self, name: str) -> None:
        """Raise ``RepoStateError`` unless ``name`` is a valid branch name."""
        status, out, _ = self._run(["check-ref-format", "--branch", name]) if name else (1, b"", "")
        # `--branch` expands @{-N}; only a name that is its own expansion is acceptable.
        if status != 0 or out.decode("utf-8", "surrogateescape").strip() != name:
            raise RepoStateError(
                f"{name!r} is not a valid git branch name (see git check-ref-format); "
                "choose another name with --branch"
            )

    def create_branch(self, name: str) -> None:
        """Create the local branch ``name`` at HEAD and check it out.

        Uncommitted changes (when the tree was allowed to be dirty) are carried along.

        Args:
            name: the new branch's short name, e.g. ``"relay/fix-login"``.

        Raises:
            RepoStateError: ``name`` is not a valid branch name, already exists, or git refused.
        """
        self.validate_branch_name(name)
        self._check(
            # -q: no report of local changes (it would run `git status` inside submodules)
            ["switch", "-q", "--no-guess", "-c", name],
            f"cannot create branch {name}",
            read_only=False,
        )

    def checkout(self, name: str) -> None:
        """Check out the existing local branch ``name`` (uncommitted changes are carried along).

        Raises:
            RepoStateError: no such branch, or git refused (e.g. local changes would be lost).
        """
        if not name or name.startswith("-"):
            raise RepoStateError(f"{name!r} is not a valid git branch name")
        self._check(
            ["switch", "-q", "--no-guess", name], f"cannot check out {name}", read_only=False
        )

    def detach_head(self) -> None:
        """Detach HEAD at its commit (frees the branch for a checkout elsewhere); files and
        index stay as they are. Raises ``RepoStateError`` when git refuses."""
        self._check(["switch", "-q", "--detach"], "cannot detach HEAD", read_only=False)

    def remove_worktree(self, path: Path) -> None:
        """Remove the linked worktree at ``path`` with its files and its git folder (``git
        worktree remove --force``). Raises ``RepoStateError`` when git refuses (not a
        worktree of this repository, the main worktree)."""
        self._check(
            ["worktree", "remove", "--force", str(Path(path).absolute())],
            f"cannot remove the worktree {path}",
            read_only=False,
        )

    def add_worktree(self, path: Path, commit: str, *, branch: str | None = None) -> None:
        """Add a linked worktree at ``path`` with ``commit`` checked out.

        Args:
            path: the new worktree's folder (must not exist, or be empty).
            commit: a commit-ish, e.g. a sha or ``"HEAD"``.
            branch: a new branch created at ``commit`` and checked out there; detached when
                None.

        Raises:
            RepoStateError: invalid names, or git refused (the branch exists, the folder is
                not empty…).
        """
        if not commit or commit.startswith("-"):
            raise RepoStateError(f"cannot add a worktree at {commit!r}: not a commit")
        args = ["worktree", "add", "-q"]
        if branch is not None:
            self.validate_branch_name(branch)
            args += ["-b", branch]
        else:
            args.append("--detach")
        self._check(
            [*args, str(Path(path).absolute()), commit],
            f"cannot add a worktree at {path}",
            read_only=False,
        )

    # ------------------------------------------------------------------ remote

    def push(self, branch: str, remote: str = "origin") -> None:
        """Push the local ``branch`` to the same name on ``remote``, never forcing.

        Git never prompts for credentials (``GIT_TERMINAL_PROMPT=0``); the push is killed after
        :data:`PUSH_TIMEOUT_S` seconds. The push's environment keeps what it may authenticate
        with (``SSH_AUTH_SOCK``, ``GH_TOKEN``, ``GIT_SSH_COMMAND``, …) but no model provider's
        variable, and it honours the repository's transport configuration (``core.sshCommand``,
        credential helpers, remote URLs; never an ``ext::`` URL): restore the configuration
        (:meth:`restore_config`) after the model's last round and before pushing. Submodules
        are not pushed or checked, and push certificates are never signed.

        Nothing is pushed when an object the push would send holds a secret relay holds
        (:meth:`refuse_unpushed_secrets`, issue 27).

        Raises:
            RepoStateError: with git's message when the push fails (rejected, no such remote…).
            SecretInPushError: the push would send one of relay's secrets.
        """
        if not branch or branch.startswith("-") or not remote or remote.startswith("-"):
            raise RepoStateError(f"cannot push {branch!r} to {remote!r}: invalid name")
        self.refuse_unpushed_secrets(branch, remote)
        self._check(
            [
                "push",
                "--recurse-submodules=no",
                "--no-verify",
                remote,
                f"refs/heads/{branch}:refs/heads/{branch}",
            ],
            f"git push of {branch} to {remote} failed",
            read_only=False,
            network=True,
            timeout_s=PUSH_TIMEOUT_S,
        )

    def remote_head(self, branch: str, remote: str = "origin") -> str | None:
        """The sha that ``branch`` has on ``remote`` now (``git ls-remote``, a network call
        killed after :data:`PUSH_TIMEOUT_S`), or None when the remote has no such branch.

        Raises:
            RepoStateError: the remote cannot be reached or read.
        """
        if not branch or branch.startswith("-") or not remote or remote.startswith("-"):
            raise RepoStateError(f"cannot read {branch!r} on {remote!r}: invalid name")
        out = self._check(
            ["ls-remote", "--heads", remote, f"refs/heads/{branch}"],
            f"cannot read the branch {branch} on {remote}",
            network=True,
            timeout_s=PUSH_TIMEOUT_S,
        )
        for line in out.decode("ascii", "replace").splitlines():
            sha, _, ref = line.partition("\t")
            if ref.strip() == f"refs/heads/{branch}" and FULL_SHA.match(sha):
                return sha
        return None

    def fetch_branch(self, branch: str, remote: str = "origin") -> bool:
        """Fetch ``branch`` from ``remote`` into ``refs/remotes/<remote>/<branch>`` (never
        into a local branch). Returns False when the remote has no such branch.

        Raises:
            RepoStateError: the remote cannot be reached, or git refused.
        """
        if self.remote_head(branch, remote) is None:
            return False
        self._check(
            [
                "fetch",
                "--quiet",
                "--no-tags",
                "--recurse-submodules=no",
                remote,
                f"+refs/heads/{branch}:refs/remotes/{remote}/{branch}",
            ],
            f"cannot fetch the branch {branch} from {remote}",
            read_only=False,
            network=True,
            timeout_s=PUSH_TIMEOUT_S,
        )
        return True

    def has_remote(self, remote: str = "origin") -> bool:
        """Whether the repository names a remote ``remote``."""
        status, _, _ = self._run(["remote", "get-url", "--", remote])
        return status == 0

    def remote_url(self, remote: str = "origin") -> str:
        """The URL of ``remote``. Raises ``RepoStateError`` when there is no such remote."""
        out = self._check(["remote", "get-url", "--", remote], f"no remote {remote!r}")
        return out.decode("utf-8", "surrogateescape").strip()

    def move_branch(self, name: str, commit: str) -> None:
        """Point the local branch ``name`` (not checked out) at ``commit``. Raises
        ``RepoStateError`` when git refuses."""
        if not name or name.startswith("-") or not FULL_SHA.match(commit):
            raise RepoStateError(f"cannot move {name!r} to {commit!r}: invalid name or commit")
        self._check(
            ["update-ref", f"refs/heads/{name}", commit],
            f"cannot move the branch {name}",
            read_only=False,
        )


def _named_sha(key: tuple[object, ...] | None) -> str | None:
    """The sha that :meth:`GitRefs._head_files` read itself: a detached HEAD's content or the
    loose ref's; None when the ref is packed (or the content is no full sha)."""
    if key is None or len(key) > 2 or key[-1] is None:
        return None
    text = key[-1]
    assert isinstance(text, bytes)
    sha = text.strip().decode("ascii", "replace")
    return sha if FULL_SHA.match(sha) else None
