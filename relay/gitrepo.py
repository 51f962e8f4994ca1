"""The git side of goal-relay (SPEC §11): preflight refusals, the relay branch, round commits.

A thin wrapper over :mod:`git` (gitpython). Repository discovery and cheap look-ups (HEAD, the
current branch) are done by gitpython in-process, with an in-process object database so that
gitpython never starts a git process of its own (apart from the ``git version`` it runs once
when it is imported, which reads no repository configuration); everything else is one ``git`` subprocess per
operation with NUL-separated (``-z``) output, so that paths with spaces, newlines or non-ASCII
characters round-trip exactly.

Every refusal raises :class:`relay.errors.RepoStateError` with a message that says what to do,
and is raised before anything in the repository has been changed.

Guarantees of every git process relay starts (SPEC §14; :mod:`relay.gitsafe` builds them):

* **No credentials**: its environment is ``os.environ`` without provider keys, ``*KEY*``,
  ``*TOKEN*``, ``*SECRET*``… and ``SSH_AUTH_SOCK``, and without ``GIT_*`` variables other than
  identity and config-file selection (no ``GIT_DIR``, ``GIT_INDEX_FILE``,
  ``GIT_CONFIG_PARAMETERS``, ``GIT_SSH_COMMAND``, ``GIT_PAGER``, ``GIT_TRACE*``…). Only
  :meth:`GitRepo.push` keeps what a push authenticates with (``SSH_AUTH_SOCK``, ``GH_TOKEN``,
  ``GIT_ASKPASS``…), never a model provider's variable.
* **The repository's configuration cannot make it run a program**: ``-c`` overrides switch off
  fsmonitor, hooks (``core.hooksPath=<devnull>``), commit/tag/push signing, pagers, editors,
  external diff, ``ext::`` URLs, ``core.alternateRefsCommand``, automatic gc/maintenance and
  submodule recursion (and, outside a push, ssh commands, askpass programs and credential
  helpers); every configured ``filter``/``diff``/``merge`` driver (system, global, repository,
  worktree, included files) is neutralised, so ``.gitattributes`` cannot select one. A failing
  ``gpg.program`` with ``commit.gpgsign=true`` therefore never breaks relay's commits.
* ``--git-dir``/``--work-tree`` of the opened repository, ``core.quotepath=false``;
  ``--no-optional-locks`` for read-only commands, so that looking never writes the index;
  status and diff do not look inside submodules' working trees.
* Its own session (a Ctrl+C in the terminal cannot kill git mid-commit).

For the loop, :class:`relay.gitround.RoundChecks` (part of :class:`GitRepo`) snapshots and
restores the model-writable configuration files (:meth:`GitRepo.config_snapshot`,
:meth:`GitRepo.restore_config`) and detects and repairs a rewritten history
(:meth:`GitRepo.is_ancestor`, :meth:`GitRepo.restore_branch`, :meth:`GitRepo.reachable_commits`);
:func:`new_driver_attributes` finds ``.gitattributes`` lines that newly select a driver.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import git
from git.refs.symbolic import SymbolicReference
from gitdb.db import LooseObjectDB

from relay.errors import RepoStateError
from relay.gitround import RoundChecks
from relay.gitsafe import SafeGit
from relay.gitsnapshot import ConfigSnapshot, new_driver_attributes

__all__ = ["CommitSummary", "ConfigSnapshot", "GitRepo", "goal_slug", "new_driver_attributes"]

#: At most this many uncommitted paths are listed in the dirty-tree refusal.
MAX_LISTED_PATHS = 20

#: Seconds a ``git push`` may take before it is killed.
PUSH_TIMEOUT_S = 300.0

_ASCII_FOLD = {
    "ß": "ss",
    "æ": "ae",
    "Æ": "ae",
    "œ": "oe",
    "Œ": "oe",
    "ø": "o",
    "Ø": "o",
    "đ": "d",
    "Đ": "d",
    "ð": "d",
    "Ð": "d",
    "þ": "th",
    "Þ": "th",
    "ł": "l",
    "Ł": "l",
    "ı": "i",
}

_TRAILER_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*$")
_TRAILER_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9-]*)\s*:\s?(.*)$")
_SHA = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")


#: Options of relay's ``git status``/``git diff`` against the working tree. A submodule's
#: working tree is not looked into: git would run ``git status`` inside it, with the
#: submodule's own configuration (filters relay has not neutralised). A submodule whose
#: checked-out commit changed still shows; relay never commits inside submodules.
_STATUS_OPTIONS = ("--ignore-submodules=dirty",)

#: A submodule entry's mode (0o160000) as stored in the index (32-bit big-endian).
_GITLINK_MODE = (0o160000).to_bytes(4, "big")

_SHORTSTAT = re.compile(r"^\s*\d+ files? changed")
_LOG_CACHE_MAX = 100


@dataclass(frozen=True)
class CommitSummary:
    """One commit as shown in ``relay status`` / the round message.

    Attributes:
        sha: full hexadecimal object name (40 characters, 64 in SHA-256 repositories).
        short: the first 7 characters of ``sha``.
        subject: the first line of the commit message.
        shortstat: git's ``--shortstat`` line, e.g. ``"2 files changed, 10 insertions(+),
            1 deletion(-)"``; ``""`` for an empty commit or a merge.
    """

    sha: str
    short: str
    subject: str
    shortstat: str


def goal_slug(text: str, max_len: int = 40) -> str:
    """Make a branch-name slug from the first words of a goal.

    Args:
        text: the goal text, any length, any script.
        max_len: the longest slug returned, in characters (at least 1).

    Returns:
        Lowercase ASCII letters, digits and single hyphens, without a leading or trailing hyphen,
        at most ``max_len`` characters, cut at a word boundary when the first words allow it.
        Accented letters are transliterated (``"été"`` -> ``"ete"``, ``"ß"`` -> ``"ss"``);
        characters without an ASCII form are dropped. Never empty: ``"goal"`` when nothing is
        left. The result is always a valid git branch-name component.
    """
    max_len = max(1, max_len)
    folded = "".join(_ASCII_FOLD.get(ch, ch) for ch in text)
    ascii_text = unicodedata.normalize("NFKD", folded).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    if len(slug) > max_len:
        cut = slug[:max_len]
        if slug[max_len] != "-":
            boundary = cut.rfind("-")
            # Keep whole words unless that would throw away more than half of the room.
            if boundary >= max_len // 2:
                cut = cut[:boundary]
        slug = cut.strip("-")
    return slug or "goal"[:max_len]


@dataclass
class _Status:
    """Parsed ``git status --porcelain=v2 -z --branch``."""

    unborn: bool
    branch: str | None  # None when detached
    dirty: list[str]  # every uncommitted path, untracked ones included, in git's order
    unmerged: list[str]


def _decode_path(raw: bytes) -> str:
    """Decode a path from git output the way the OS would (undecodable bytes survive)."""
    return os.fsdecode(raw)


def _text(raw: bytes | str | None) -> str:
    if raw is None:
        return ""
    if isinstance(raw, bytes):
        return raw.decode("utf-8", "replace")
    return raw


def _listing(paths: Sequence[str], limit: int = MAX_LISTED_PATHS) -> str:
    lines = [f"  {p}" for p in paths[:limit]]
    if len(paths) > limit:
        lines.append(f"  … and {len(paths) - limit} more")
    return "\n".join(lines)


class GitRepo(RoundChecks):
    """A non-bare git repository relay works in.

    Args:
        path: any directory (or file) inside the working tree; parent directories are searched
            for the repository, as git does.

    Raises:
        RepoStateError: ``path`` is not inside a git working tree, or the repository is bare.

    Attributes:
        root: the resolved absolute path of the working tree's top directory.
    """

    root: Path

    def __init__(self, path: Path) -> None:
        path = Path(path)
        if not path.exists():
            raise RepoStateError(f"{path} does not exist; give the repository's folder")
        start = path.parent if path.is_file() else path
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
        self._identity_cache: dict[tuple[str, str], dict[str, str]] = {}
        # (head sha, newest-first summaries, whether they are the whole history): lets the
        # round message reuse the log after relay's own commits without a git process.
        self._log_cache: tuple[str, list[CommitSummary], bool] | None = None
        self.root = Path(repo.working_tree_dir).resolve()
        self._git_dir = Path(repo.git_dir).resolve()
        self._common_dir = Path(repo.common_dir).resolve()
        self._git = SafeGit(self.root, self._git_dir, self._common_dir)

    def __repr__(self) -> str:
        return f"GitRepo({str(self.root)!r})"

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
        """Drop the cached log (the branch moved in a way relay did not record)."""
        self._log_cache = None

    # ------------------------------------------------------------------ running git

    def _run(
        self,
        args: Sequence[str],
        *,
        read_only: bool = True,
        network: bool = False,
        env: Mapping[str, str] | None = None,
        stdin_bytes: bytes | None = None,
        timeout_s: float | None = None,
    ) -> tuple[int, bytes, str]:
        """Run one hardened git command in this repository (:meth:`SafeGit.run`); return
        (exit code, stdout bytes, stderr text)."""
        return self._git.run(
            args,
            read_only=read_only,
            network=network,
            env=env,
            stdin_bytes=stdin_bytes,
            timeout_s=timeout_s,
        )

    def _check(
        self,
        args: Sequence[str],
        what: str,
        *,
        read_only: bool = True,
        network: bool = False,
        env: Mapping[str, str] | None = None,
        stdin_bytes: bytes | None = None,
        timeout_s: float | None = None,
    ) -> bytes:
        """Run git; raise RepoStateError(``what: <git's message>``) on a non-zero exit."""
        status, out, err = self._run(
            args,
            read_only=read_only,
            network=network,
            env=env,
            stdin_bytes=stdin_bytes,
            timeout_s=timeout_s,
        )
        if status != 0:
            raise RepoStateError(f"{what}: {err or f'git exited with status {status}'}")
        return out

    def _status(self, *, branch: bool) -> _Status:
        args = ["status", *_STATUS_OPTIONS, "--porcelain=v2", "-z", "--untracked-files=normal"]
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
                dirty.append(_decode_path(token.split(b" ", 8)[8]))
            elif kind == b"2":
                dirty.append(_decode_path(token.split(b" ", 9)[9]))
                if i < len(tokens):  # the rename's original path
                    dirty.append(_decode_path(tokens[i]))
                    i += 1
            elif kind == b"u":
                path = _decode_path(token.split(b" ", 10)[10])
                unmerged.append(path)
                dirty.append(path)
            elif kind == b"?":
                dirty.append(_decode_path(token[2:]))
        return _Status(unborn=unborn, branch=current, dirty=dirty, unmerged=unmerged)

    # ------------------------------------------------------------------ preflight

    def _operation_in_progress(self) -> str | None:
        """A refusal message for a half-done merge/rebase/… in this worktree, or None."""
        d = self._git_dir
        if (d / "rebase-merge").is_dir() or (
            (d / "rebase-apply").is_dir() and not (d / "rebase-apply" / "applying").exists()
        ):
            return (
                "a rebase is in progress; finish it (resolve conflicts, git add, then "
                "git rebase --continue) or abort it (git rebase --abort), then run relay again"
            )
        if (d / "rebase-apply").is_dir():
            return (
                "a git am (applying patches) is in progress; finish it (git am --continue) or "
                "abort it (git am --abort), then run relay again"
            )
        if (d / "MERGE_HEAD").exists():
            return (
                "a merge is in progress; finish it (resolve conflicts, git add, then git commit) "
                "or abort it (git merge --abort), then run relay again"
            )
        if (d / "CHERRY_PICK_HEAD").exists():
            return (
                "a cherry-pick is in progress; finish it (resolve conflicts, git add, then "
                "git cherry-pick --continue) or abort it (git cherry-pick --abort), "
                "then run relay again"
            )
        if (d / "REVERT_HEAD").exists():
            return (
                "a revert is in progress; finish it (resolve conflicts, git add, then "
                "git revert --continue) or abort it (git revert --abort), then run relay again"
            )
        if (d / "sequencer").is_dir():
            return (
                "a cherry-pick or revert sequence is in progress; finish it "
                "(git cherry-pick --continue / git revert --continue) or abort it "
                "(git cherry-pick --abort / git revert --abort), then run relay again"
            )
        if (d / "BISECT_LOG").exists():
            return "a bisect is in progress; end it with git bisect reset, then run relay again"
        return None

    def preflight(self, *, allow_dirty: bool = False, in_place: bool = False) -> None:
        """Refuse to work on a repository in a state relay must not touch (SPEC §11).

        Checks, in this order, and raises on the first that fails: the repository has a commit;
        no merge, rebase, ``git am``, cherry-pick, revert or bisect is in progress; no unmerged
        paths; HEAD is on a branch (only when ``in_place``); the working tree is clean (unless
        ``allow_dirty``). Ignored files (``.gitignore``, ``.git/info/exclude``,
        ``core.excludesFile``) never count as dirty, nor do changes inside a submodule's working
        tree (a submodule at another commit does). Changes nothing; one git process.

        Args:
            allow_dirty: accept uncommitted changes and untracked files (``--allow-dirty``).
            in_place: relay will commit on the current branch (``--in-place``), so HEAD must not
                be detached.

        Raises:
            RepoStateError: with a message naming the problem and how to fix it.
        """
        status = self._status(branch=True)
        if status.unborn:
            raise RepoStateError(
                f"the repository at {self.root} has no commits yet; make a first commit "
                "(git add -A && git commit -m 'initial commit'), then run relay again"
            )
        operation = self._operation_in_progress()
        if operation:
            if status.unmerged:
                operation += "\nunmerged paths:\n" + _listing(status.unmerged)
            raise RepoStateError(operation)
        if status.unmerged:
            raise RepoStateError(
                "the repository has unmerged paths:\n"
                + _listing(status.unmerged)
                + "\nresolve them (edit, then git add) or discard them (git restore --staged "
                "--worktree <path>), then run relay again"
            )
        if in_place and status.branch is None:
            raise RepoStateError(
                "HEAD is detached, so there is no current branch to work on in place; "
                "check out a branch (git switch <branch>) or run without --in-place"
            )
        if status.dirty and not allow_dirty:
            raise RepoStateError(
                f"the working tree has {len(status.dirty)} uncommitted "
                f"path{'s' if len(status.dirty) != 1 else ''}:\n"
                + _listing(status.dirty)
                + "\ncommit them (git add -A && git commit) or stash them (git stash -u), "
                "or pass --allow-dirty to let relay carry them along"
            )

    # ------------------------------------------------------------------ configuration

    def exclude(self, rel_path: str) -> None:
        """Make sure a pattern is listed in the repository's ``info/exclude``.

        Args:
            rel_path: a gitignore pattern relative to the working-tree root, e.g.
                ``".relay/state/"``. Written as given, on a line of its own.

        Creates ``info/`` and the file if missing; does nothing when the line is already there.
        Uses the common git directory, so it also works from a linked worktree. No git process.
        """
        pattern = rel_path.strip()
        if not pattern:
            return
        exclude_file = self._common_dir / "info" / "exclude"
        existing = exclude_file.read_bytes() if exclude_file.exists() else b""
        wanted = pattern.encode("utf-8")
        if any(line.strip() == wanted for line in existing.splitlines()):
            return
        exclude_file.parent.mkdir(parents=True, exist_ok=True)
        prefix = b"" if not existing or existing.endswith(b"\n") else b"\n"
        with exclude_file.open("ab") as fh:
            fh.write(prefix + wanted + b"\n")

    # ------------------------------------------------------------------ refs and branches

    def current_branch(self) -> str | None:
        """The checked-out branch's short name (e.g. ``"relay/fix-login"``); None if detached.

        For a new repository without commits this is the unborn branch's name. No git process.
        """
        head = self._repo.head
        if head.is_detached:
            return None
        path = head.reference.path
        return path.removeprefix("refs/heads/")

    def _has_commits(self) -> bool:
        status, _, _ = self._run(["rev-parse", "--verify", "-q", "HEAD^{commit}"])
        return status == 0

    def head_sha(self) -> str:
        """The full sha of the commit HEAD points to.

        Raises:
            RepoStateError: the repository has no commits yet.
        """
        try:
            sha = SymbolicReference.dereference_recursive(self._repo, "HEAD")
        except (ValueError, OSError):
            sha = ""
        if _SHA.match(sha or ""):
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
        """``base`` if no local branch has that name, else the first free ``base-2``, ``base-3``, …

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

    # ------------------------------------------------------------------ committing

    def _identity_env(self, author_name: str, author_email: str) -> dict[str, str]:
        """GIT_AUTHOR_*/GIT_COMMITTER_* for the parts of the identity nobody configured
        (looked up once per repository object: one git process saved per commit)."""
        key = (author_name, author_email)
        cached = self._identity_cache.get(key)
        if cached is None:
            cached = self._identity_cache[key] = self._lookup_identity(author_name, author_email)
        return cached

    def _lookup_identity(self, author_name: str, author_email: str) -> dict[str, str]:
        status, out, _ = self._run(
            ["config", "--get-regexp", r"^(user|author|committer)\.(name|email)$"]
        )
        configured: set[str] = set()
        if status == 0:
            for line in out.decode("utf-8", "replace").splitlines():
                key, _, value = line.partition(" ")
                if value.strip():
                    configured.add(key.lower())
        env: dict[str, str] = {}
        for role in ("author", "committer"):
            for field, default in (("name", author_name), ("email", author_email)):
                var = f"GIT_{role.upper()}_{field.upper()}"
                if os.environ.get(var):
                    continue
                if f"{role}.{field}" in configured or f"user.{field}" in configured:
                    continue
                if field == "email" and os.environ.get("EMAIL"):
                    continue
                env[var] = default
        return env

    def _gitlinks(self) -> list[bytes]:
        """The index's submodule entries (raw paths); no git process when there are none."""
        try:
            index = (self._git_dir / "index").read_bytes()
        except FileNotFoundError:
            return []
        except OSError:
            index = _GITLINK_MODE
        split = any(self._git_dir.glob("sharedindex.*"))
        if _GITLINK_MODE not in index and not split:
            return []  # no entry can have the mode 160000
        out = self._check(["ls-files", "--stage", "-z"], "git ls-files failed")
        return [
            entry.partition(b"\t")[2] for entry in out.split(b"\0") if entry.startswith(b"160000 ")
        ]

    def _stage_all(self) -> None:
        """``git add -A``, except that submodules are updated with ``git update-index``:
        ``git add`` runs ``git status`` inside each submodule, with the submodule's own
        configuration (filters relay has not neutralised); ``update-index`` only reads the
        submodule's HEAD. At most one more process when the index has no submodule."""
        gitlinks = self._gitlinks()
        args = ["add", "-A"]
        if gitlinks:
            excluded = [f":(top,literal,exclude){os.fsdecode(p)}" for p in gitlinks]
            args += ["--", ":/", *excluded]
        self._check(args, "git add failed", read_only=False)
        if gitlinks:
            self._check(
                ["update-index", "--add", "--remove", "-z", "--stdin"],
                "git update-index failed",
                read_only=False,
                stdin_bytes=b"".join(p + b"\0" for p in gitlinks),
            )

    @staticmethod
    def _message(subject: str, body: str, trailers: Mapping[str, str] | None) -> str:
        subject_line = " ".join(subject.split()) or "relay: commit"
        paragraphs = [subject_line]
        if body.strip():
            paragraphs.append(body.strip("\n").rstrip())
        if trailers:
            lines = []
            for key, value in trailers.items():
                if not _TRAILER_KEY.match(key):
                    raise ValueError(f"invalid git trailer key {key!r}")
                lines.append(f"{key}: {' '.join(str(value).split())}")
            paragraphs.append("\n".join(lines))
        return "\n\n".join(paragraphs) + "\n"

    def commit_all(
        self,
        subject: str,
        *,
        body: str = "",
        trailers: dict[str, str] | None = None,
        author_name: str = "goal-relay",
        author_email: str = "relay@localhost",
    ) -> str:
        """Stage every change (``git add -A``) and commit it; return the new commit's full sha.

        New, modified and deleted files are committed; ignored files are not. The message is
        ``subject``, a blank line, ``body`` (if any), a blank line and the trailers, one
        ``Key: value`` line each, as the final paragraph (readable by ``git interpret-trailers
        --parse`` and :meth:`head_trailers`). Lines of ``body`` starting with ``#`` are kept.
        An empty commit is made when nothing changed. Hooks do not run (``--no-verify`` and no
        hooks path). Three git processes (config once, add, commit; two more when the index
        has submodules, which are staged without looking inside them); the sha is read
        in-process.

        Args:
            subject: the first line; internal whitespace and newlines are collapsed to spaces.
            body: free text, may span paragraphs.
            trailers: e.g. ``{"Relay-Goal": "12", "Relay-Round": "3"}``; keys are letters,
                digits and hyphens, values are put on one line.
            author_name: used for author and committer only when git has no configured name
                (``user.name``/``author.name``/``committer.name`` or ``GIT_*_NAME``).
            author_email: likewise for the e-mail address.

        Raises:
            RepoStateError: git refused to stage or commit (its message is included).
            ValueError: a trailer key is not a valid trailer token.
        """
        message = self._message(subject, body, trailers)
        env = self._identity_env(author_name, author_email)
        parent = self.head_sha() if self._log_cache is not None else None
        self._stage_all()
        out = self._check(
            [
                "commit",
                "--no-status",
                "--no-verify",
                "--allow-empty",
                "--cleanup=whitespace",
                "--no-edit",
                "-F",
                "-",
            ],
            "git commit failed",
            read_only=False,
            env=env,
            stdin_bytes=message.encode("utf-8"),
        )
        sha = self.head_sha()
        cache = self._log_cache
        if cache is not None and cache[0] == parent:
            text = out.decode("utf-8", "replace")
            stat = next((ln.strip() for ln in text.splitlines() if _SHORTSTAT.match(ln)), "")
            summary = message.split("\n", 1)[0]
            entry = CommitSummary(sha=sha, short=sha[:7], subject=summary, shortstat=stat)
            self._log_cache = (sha, [entry, *cache[1][:_LOG_CACHE_MAX]], cache[2])
        else:
            self._log_cache = None
        return sha

    # ------------------------------------------------------------------ looking at changes

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
                *_STATUS_OPTIONS,
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
            changes[_decode_path(tokens[i + 1])] = letter if letter in ("A", "D") else "M"
        untracked = self._check(
            ["ls-files", "--others", "--exclude-standard", "-z"], "git ls-files failed"
        )
        for raw in untracked.split(b"\0"):
            if raw:
                path = _decode_path(raw)
                # Removed from the index but still on disk: it exists in both, so "M".
                changes[path] = "M" if changes.get(path) == "D" else "A"
        return sorted(((letter, path) for path, letter in changes.items()), key=lambda c: c[1])

    def _changes_since_head(self) -> list[tuple[str, str]]:
        """:meth:`changes_since` for ``HEAD`` itself: one ``git status`` process."""
        out = self._check(
            [
                "status",
                *_STATUS_OPTIONS,
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
            xy, path = token[:2].decode("ascii", "replace"), _decode_path(token[3:])
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
        return sorted({_decode_path(raw) for raw in out.split(b"\0") if raw})

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
            ["status", *_STATUS_OPTIONS, "--short", "--untracked-files=normal"],
            "git status failed",
        )
        return out.decode("utf-8", "replace").rstrip("\n")

    def recent_commits(self, n: int) -> list[CommitSummary]:
        """The last ``n`` commits reachable from HEAD, newest first, with their shortstat.

        One ``git log`` process whatever the history's length. Empty when ``n <= 0`` or the
        repository has no commits.
        """
        if n <= 0:
            return []
        cache = self._log_cache
        if cache is not None and cache[0] == self.head_sha() and (cache[2] or len(cache[1]) >= n):
            return list(cache[1][:n])
        commits = self._log(n)
        if commits:
            self._log_cache = (commits[0].sha, commits, len(commits) < n)
        return commits

    def _log(self, n: int) -> list[CommitSummary]:
        status, out, err = self._run(
            [
                "log",
                f"--max-count={n}",
                "--shortstat",
                "--no-color",
                "--no-show-signature",
                "--no-ext-diff",
                "--no-textconv",
                "--format=%x00%H%x1f%s",
                "HEAD",
                "--",
            ]
        )
        if status != 0:
            if not self._has_commits():
                return []
            raise RepoStateError(f"git log failed: {err}")
        commits: list[CommitSummary] = []
        for record in out.decode("utf-8", "replace").split("\0"):
            if not record.strip():
                continue
            header, _, rest = record.partition("\n")
            sha, _, subject = header.partition("\x1f")
            shortstat = " ".join(line.strip() for line in rest.splitlines() if line.strip())
            commits.append(
                CommitSummary(sha=sha, short=sha[:7], subject=subject, shortstat=shortstat)
            )
        return commits

    def file_at(self, commit: str, path: str) -> str | None:
        """The text of ``path`` as of ``commit``; None if absent there (or not a file).

        Args:
            commit: a commit-ish (sha, branch, ``HEAD``…).
            path: repo-relative POSIX path, e.g. ``".relay/progress.md"``.

        Returns:
            The content decoded as UTF-8 (invalid bytes replaced), or None when the commit or
            the file does not exist. One git process.
        """
        if not commit or commit.startswith("-"):
            return None
        status, out, _ = self._run(["cat-file", "blob", f"{commit}:{path.lstrip('/')}"])
        if status != 0:
            return None
        return out.decode("utf-8", "replace")

    def head_trailers(self) -> dict[str, str]:
        """The trailers of HEAD's commit message, e.g. ``{"Relay-Goal": "12", "Relay-Round": "3"}``.

        Keys keep their case; a key given twice keeps its last value. Empty when HEAD has no
        trailers or there are no commits. One git process.
        """
        status, out, _ = self._run(
            ["log", "-1", "--no-show-signature", "--format=%(trailers:only,unfold)", "HEAD", "--"]
        )
        if status != 0:
            return {}
        trailers: dict[str, str] = {}
        for line in out.decode("utf-8", "replace").splitlines():
            match = _TRAILER_LINE.match(line)
            if match:
                trailers[match.group(1)] = match.group(2).strip()
        return trailers

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

        Raises:
            RepoStateError: with git's message when the push fails (rejected, no such remote…).
        """
        if not branch or branch.startswith("-") or not remote or remote.startswith("-"):
            raise RepoStateError(f"cannot push {branch!r} to {remote!r}: invalid name")
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

    # ------------------------------------------------------------------ housekeeping

    def close(self) -> None:
        """Release gitpython's resources (its cached processes, if any)."""
        self._repo.close()
