"""What the loop checks in the repository at a round's end (SPEC §11, §14).

:class:`RoundChecks` is a part of :class:`relay.gitrepo.GitRepo` (it is mixed into it): the
configuration snapshot and its restore (:meth:`~RoundChecks.config_snapshot`,
:meth:`~RoundChecks.restore_config`), and the detection and repair of a rewritten history
(:meth:`~RoundChecks.is_ancestor`, :meth:`~RoundChecks.restore_branch`,
:meth:`~RoundChecks.reachable_commits`), and what recovery and the audit read of commits
(:meth:`~RoundChecks.commit_trailers`, :meth:`~RoundChecks.path_commits`,
:meth:`~RoundChecks.archive`, :meth:`~RoundChecks.grep_commit`). Every git process goes through the repository's hardened
runner (:mod:`relay.gitsafe`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from relay.errors import RepoStateError
from relay.gitbase import FULL_SHA
from relay.githooks import HooksSnapshot, restore_hooks, take_hooks
from relay.gitrefs import GitRefs
from relay.gitsnapshot import ConfigSnapshot, restore_snapshot, take_snapshot

__all__ = ["RoundChecks"]

#: The reflog message of relay's repair of a rewritten branch.
_RESTORE_REFLOG = "relay: restore the history rewritten during a round"


class RoundChecks(GitRefs):
    """Round-end checks of a repository (a part of ``GitRepo``; see the module docstring)."""

    # ------------------------------------------------------------------ configuration

    def _config_paths(self) -> list[Path]:
        return [
            self._git_dir / "config",
            self._common_dir / "config",
            self._git_dir / "config.worktree",
            self._common_dir / "config.worktree",
            self._git_dir / "info" / "attributes",
            self._common_dir / "info" / "attributes",
        ]

    def _display(self, path: Path) -> str:
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    def config_snapshot(self) -> ConfigSnapshot:
        """Record the bytes (or absence) of every git configuration file of this repository
        the model could write: ``config`` and ``config.worktree`` of the git directory and of
        the common one, and their ``info/attributes``. No git process.
        """
        return take_snapshot(self._config_paths())

    def restore_config(self, snapshot: ConfigSnapshot) -> list[str]:
        """Put back every file of ``snapshot`` that changed since it was taken.

        Each is replaced atomically by a new file (never written through a symbolic or hard
        link: what a planted link points at stays unchanged); a file that did not exist is
        removed. No git process.

        Returns:
            The restored files as shown to the user, e.g. ``[".git/config"]`` (paths outside
            the working tree, as in a linked worktree, are absolute); ``[]`` when none changed.

        Raises:
            RepoStateError: a file could not be put back (with the reason).
        """
        try:
            restored = restore_snapshot(
                snapshot, stops=(self._git_dir, self._common_dir), name=self._display
            )
        except OSError as exc:
            self._tree_may_change()
            raise RepoStateError(f"cannot restore the git configuration: {exc}") from None
        if restored:  # what git ignores or how it reads files may differ now
            self._tree_may_change()
        return restored

    def hooks_folders(self) -> list[Path]:
        """The folders whose programs git runs as hooks in this repository: the common git
        directory's ``hooks`` (linked worktrees share it) and the folder the configuration's
        ``core.hooksPath`` names (relative to the working tree's root), when it lies outside
        the working tree (inside it, its files are the tree's, committed with the round). One
        git process (relay's own calls override the setting, so the files' value is read)."""
        folders = [self._common_dir / "hooks"]
        status, out, _ = self._run(
            ["config", "--show-scope", "--get-all", "--type=path", "-z", "core.hooksPath"]
        )
        fields = out.split(b"\0") if status == 0 else []
        values = [
            os.fsdecode(value)
            for scope, value in zip(fields[::2], fields[1::2], strict=False)
            if scope != b"command" and value
        ]
        if values:
            configured = Path(os.path.abspath(self.root / values[-1]))
            if configured != self.root and self.root not in configured.parents:
                folders.append(configured)
        return folders

    def hooks_snapshot(self) -> HooksSnapshot:
        """Record the hooks folders (:meth:`hooks_folders`; :func:`relay.githooks.take_hooks`)."""
        return take_hooks(self.hooks_folders())

    def restore_hooks(self, snapshot: HooksSnapshot) -> list[str]:
        """Put the hooks folders back as ``snapshot`` recorded them (entries added since are
        removed, changed or deleted ones written again, modes set back). No git process.

        Returns:
            One line per folder that had changed, e.g. ``".git/hooks: added pre-commit"``.

        Raises:
            RepoStateError: an entry could not be put back (with the reason).
        """
        try:
            return restore_hooks(snapshot, name=self._display)
        except OSError as exc:
            raise RepoStateError(f"cannot restore the git hooks: {exc}") from None

    def _flagged(self) -> tuple[list[bytes], list[bytes]]:
        status, out, err = self._run(["ls-files", "-v", "-z"])
        if status != 0:
            raise RepoStateError(f"cannot list the index: {err or status}")
        assumed: list[bytes] = []
        skipped: list[bytes] = []
        for entry in out.split(b"\0"):
            if len(entry) > 2 and entry[:1].islower():
                assumed.append(entry[2:])
            if len(entry) > 2 and entry[:1] in (b"S", b"s"):
                skipped.append(entry[2:])
        return assumed, skipped

    def index_flags(self) -> frozenset[str]:
        """Paths whose index entry is marked ``assume-unchanged`` or ``skip-worktree`` now
        (a sparse checkout's files outside its cone, files the user told git to ignore)."""
        assumed, skipped = self._flagged()
        return frozenset(os.fsdecode(p) for p in (*assumed, *skipped))

    def clear_index_flags(self, keep: frozenset[str] = frozenset()) -> list[str]:
        """Clear the ``assume-unchanged`` and ``skip-worktree`` bits of every index entry but
        those of ``keep`` (the user's own, from :meth:`index_flags` before the model acted).

        With them set (``git update-index --assume-unchanged tests/test_a.py``) git stops
        looking at a file: its changes would escape relay's commits and the audit's comparison
        with the base commit while the test runner still runs the changed file. One git
        process, plus one per kind of flag cleared.

        Returns:
            The repo-relative paths whose bits were cleared (``[]`` when none).
        """
        assumed, skipped = self._flagged()
        assumed = [p for p in assumed if os.fsdecode(p) not in keep]
        skipped = [p for p in skipped if os.fsdecode(p) not in keep]
        # one flag per process: git applies only one of these two options per call
        for option, paths in (("--no-assume-unchanged", assumed), ("--no-skip-worktree", skipped)):
            if paths:
                self._check(
                    ["update-index", option, "-z", "--stdin"],
                    "cannot clear the index flags",
                    read_only=False,
                    stdin_bytes=b"".join(path + b"\0" for path in paths),
                )
        return [os.fsdecode(path) for path in dict.fromkeys([*assumed, *skipped])]

    # ------------------------------------------------------------------ history

    def is_ancestor(self, ancestor: str, descendant: str = "HEAD") -> bool:
        """True when commit ``ancestor`` is reachable from ``descendant`` (or is it).

        One git process, none when ``descendant`` is ``HEAD`` and HEAD is ``ancestor`` itself
        (a round in which nothing committed). Raises ``RepoStateError`` when either is not a
        commit of this repository (e.g. the object was removed).
        """
        for rev in (ancestor, descendant):
            if not rev or rev.startswith("-"):
                raise RepoStateError(f"{rev!r} is not a commit of this repository")
        if descendant == "HEAD" and FULL_SHA.match(ancestor) and self.head_sha() == ancestor:
            return True
        status, _, err = self._run(
            ["merge-base", "--is-ancestor", "--end-of-options", ancestor, descendant]
        )
        if status in (0, 1):
            return status == 0
        raise RepoStateError(
            f"cannot tell whether {ancestor} is an ancestor of {descendant}: {err or status}"
        )

    def reachable_commits(self, branch: str, shas: Iterable[str]) -> set[str]:
        """Which of ``shas`` (full hexadecimal names) are on the local ``branch``.

        One ``git rev-list`` process, stopped as soon as every sha was seen (so a branch whose
        recent commits are all wanted costs little whatever its length). Names that are not
        full shas never match; a missing branch gives ``set()``.

        Returns:
            The subset of ``shas`` (lowercased) reachable from ``refs/heads/<branch>``.
        """
        wanted = {s.strip().lower() for s in shas if FULL_SHA.match(s.strip().lower())}
        if not wanted or not branch or branch.startswith("-"):
            return set()
        found: set[str] = set()
        with self._git.lines(["rev-list", f"refs/heads/{branch}", "--"]) as lines:
            for line in lines:
                sha = line.decode("ascii", "replace")
                if sha in wanted:
                    found.add(sha)
                    if found == wanted:
                        break
        return found

    # ------------------------------------------------------------------ reading commits

    def commit_trailers(self, since: str) -> list[tuple[str, dict[str, str]]]:
        """``(sha, trailers)`` of each commit in ``since..HEAD``, newest first (all of HEAD's
        history when ``since`` is not in it); a key given twice keeps its last value. One git
        process (two when ``since`` is gone).

        Raises:
            RepoStateError: git cannot read the history.
        """
        args = ["log", "--no-show-signature", "--format=%x00%H%n%(trailers:only,unfold)"]
        status, out, _ = self._run([*args, f"{since}..HEAD", "--"])
        if status != 0:  # the base commit is gone from this history: look at all of it
            out = self._check([*args, "HEAD", "--"], "git log failed")
        commits = []
        for record in out.decode("utf-8", "replace").split("\0"):
            sha, _, text = record.strip().partition("\n")
            if sha:
                pairs = (line.partition(":") for line in text.splitlines())
                commits.append((sha, {k.strip(): v.strip() for k, sep, v in pairs if sep}))
        return commits

    def path_commits(self, ref: str, path: str, limit: int) -> list[str]:
        """The newest ``limit`` commits of ``ref``'s history that changed ``path`` (a
        repo-relative POSIX path), newest first; ``[]`` when ``ref`` is not a commit. One git
        process."""
        if not ref or ref.startswith("-") or limit < 1:
            return []
        args = ["log", "--no-show-signature", "--format=%H", f"-n{limit}", "--end-of-options"]
        status, out, _ = self._run([*args, ref, "--", path.lstrip("/")])
        if status != 0:
            return []
        return [s for s in out.decode("ascii", "replace").split() if FULL_SHA.match(s)]

    def archive(self, commit: str) -> bytes:
        """The tree of ``commit`` as a tar archive (``git archive``: no filter or attribute
        program runs, :mod:`relay.gitsafe`). Raises ``RepoStateError`` when git refuses."""
        return self._check(["archive", "--format=tar", commit], f"git archive {commit} failed")

    def grep_commit(self, commit: str, pattern: str, pathspec: str) -> bool:
        """Whether an extended regular expression ``pattern`` matches a line of a file of
        ``commit`` that ``pathspec`` names (``git grep -q -E``)."""
        status, _, _ = self._run(["grep", "-q", "-E", pattern, commit, "--", pathspec])
        return status == 0

    def _head_ref(self) -> str | None:
        """What HEAD points at, e.g. ``"refs/heads/main"``; None when detached."""
        try:
            text = (self._git_dir / "HEAD").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        return text[len("ref:") :].strip() if text.startswith("ref:") else None

    def _quit_operations(self) -> None:
        """End a half-done rebase, ``am``, merge, cherry-pick, revert or bisect, leaving HEAD,
        the index and the files as they are."""
        d = self._git_dir
        quits = [
            ("rebase-merge", ["rebase", "--quit"]),
            (
                "rebase-apply",
                ["am" if (d / "rebase-apply" / "applying").exists() else "rebase", "--quit"],
            ),
            ("MERGE_HEAD", ["merge", "--quit"]),
            ("CHERRY_PICK_HEAD", ["cherry-pick", "--quit"]),
            ("REVERT_HEAD", ["revert", "--quit"]),
            ("sequencer", ["cherry-pick", "--quit"]),
        ]
        for marker, args in quits:
            if os.path.lexists(d / marker):
                self._check(args, f"cannot end the git {args[0]} in progress", read_only=False)
        if os.path.lexists(d / "BISECT_LOG") or os.path.lexists(d / "BISECT_START"):
            self._end_bisect()

    def _end_bisect(self) -> None:
        """What ``git bisect reset`` cleans up, without its checkout (which would look inside
        submodules): the ``refs/bisect/*`` refs and the ``BISECT_*`` files."""
        out = self._check(
            ["for-each-ref", "--format=%(refname)", "refs/bisect/"], "git for-each-ref failed"
        )
        refs = [ref for ref in out.split(b"\n") if ref]
        if refs:
            self._check(
                ["update-ref", "--stdin"],
                "cannot end the git bisect in progress",
                read_only=False,
                stdin_bytes=b"".join(b"delete " + ref + b"\n" for ref in refs),
            )
        for path in self._git_dir.glob("BISECT_*"):
            try:
                path.unlink()
            except OSError as exc:
                raise RepoStateError(f"cannot end the git bisect in progress: {exc}") from None

    def restore_branch(self, branch: str, expected_sha: str) -> None:
        """Put ``refs/heads/<branch>`` back at ``expected_sha`` after the model rewrote history.

        For a ``git reset --hard HEAD~2``, a rebase, a ``commit --amend`` of relay's commits or
        a switch to another branch: ends a half-done rebase/``am``/merge/cherry-pick/revert/bisect,
        points HEAD at ``branch`` again and moves the branch and the index (a mixed reset) to
        ``expected_sha``. The working tree's files are never touched, so everything the model
        changed shows as uncommitted changes that relay's next commit records on top of the
        restored history. The reflog says ``relay: restore …``. Nothing happens when the
        branch is checked out at ``expected_sha`` already.

        Args:
            branch: the short name, e.g. ``"relay/fix-login"``.
            expected_sha: the full sha the branch must point at (relay's last commit).

        Raises:
            RepoStateError: the name or sha is invalid, the commit no longer exists, or git
                refused (e.g. a stale ``index.lock``); the message says which.
        """
        self.validate_branch_name(branch)
        sha = expected_sha.strip().lower()
        if not FULL_SHA.match(sha):
            raise RepoStateError(f"cannot restore {branch}: {expected_sha!r} is not a full sha")
        what = f"cannot restore the branch {branch} to {sha[:12]}"
        status, _, _ = self._run(["cat-file", "-e", f"{sha}^{{commit}}"])
        if status != 0:
            raise RepoStateError(f"{what}: that commit no longer exists in the repository")
        ref = f"refs/heads/{branch}"
        if self._head_ref() == ref and self._resolves_to(ref, sha):
            return
        self._quit_operations()
        if self._head_ref() != ref:
            self._check(["symbolic-ref", "-m", _RESTORE_REFLOG, "HEAD", ref], what, read_only=False)
        self._check(
            ["reset", "-q", "--mixed", "--no-refresh", sha, "--"],
            what,
            read_only=False,
            env={"GIT_REFLOG_ACTION": _RESTORE_REFLOG},
        )
        self._forget_log()
        if self._head_ref() != ref or not self._resolves_to(ref, sha):
            raise RepoStateError(f"{what}: the branch still points elsewhere")

    def _resolves_to(self, ref: str, sha: str) -> bool:
        status, out, _ = self._run(["rev-parse", "--verify", "-q", ref])
        return status == 0 and out.decode("ascii", "replace").strip() == sha
