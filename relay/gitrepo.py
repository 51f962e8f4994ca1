"""The git side of goal-relay (SPEC §11): preflight refusals, the relay branch, round commits.

A thin wrapper over :mod:`git` (gitpython). Repository discovery and cheap look-ups (HEAD, the
current branch) are done by gitpython in-process, with an in-process object database so that
gitpython never starts a git process of its own (apart from the ``git version`` it runs once
when it is imported, which reads no repository configuration); everything else is one ``git``
subprocess per operation with NUL-separated (``-z``) output, so that paths with spaces,
newlines or non-ASCII characters round-trip exactly.

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

The parts of :class:`GitRepo`, one job each: :mod:`relay.gitbase` (opening, running git),
:mod:`relay.gitrefs` (refs, branches, worktrees, push), :mod:`relay.gitscan` (the working
tree's changes), :mod:`relay.gitcommit` (commits, the log). For the loop,
:class:`relay.gitround.RoundChecks` (part of :class:`GitRepo`) snapshots and
restores the model-writable configuration files (:meth:`GitRepo.config_snapshot`,
:meth:`GitRepo.restore_config`) and detects and repairs a rewritten history
(:meth:`GitRepo.is_ancestor`, :meth:`GitRepo.restore_branch`, :meth:`GitRepo.reachable_commits`);
:func:`new_driver_attributes` finds ``.gitattributes`` lines that newly select a driver.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from relay.errors import RepoStateError
from relay.gitcommit import CommitSummary, GitCommits
from relay.gitround import RoundChecks
from relay.gitsnapshot import ConfigSnapshot, new_driver_attributes

__all__ = ["CommitSummary", "ConfigSnapshot", "GitRepo", "goal_slug", "new_driver_attributes"]

#: At most this many uncommitted paths are listed in the dirty-tree refusal.
MAX_LISTED_PATHS = 20

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


def _listing(paths: Sequence[str], limit: int = MAX_LISTED_PATHS) -> str:
    lines = [f"  {p}" for p in paths[:limit]]
    if len(paths) > limit:
        lines.append(f"  … and {len(paths) - limit} more")
    return "\n".join(lines)


class GitRepo(GitCommits, RoundChecks):
    """A non-bare git repository relay works in: ``GitRepo(path)`` opens the repository that
    holds ``path`` (arguments, errors and attributes: :class:`relay.gitbase.GitBase`); the
    parts are listed in the module docstring."""

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

    def preflight(
        self, *, allow_dirty: bool = False, in_place: bool = False, offer_allow_dirty: bool = True
    ) -> None:
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
            offer_allow_dirty: the dirty-tree message names ``--allow-dirty`` (False for the
                commands that do not take it: ``compare``, ``batch``).

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
                + "\ncommit them (git add -A && git commit) or stash them (git stash -u)"
                + (", or pass --allow-dirty to let relay carry them along" * offer_allow_dirty)
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
        self._tree_may_change()  # what git ignores differs now
        exclude_file.parent.mkdir(parents=True, exist_ok=True)
        prefix = b"" if not existing or existing.endswith(b"\n") else b"\n"
        with exclude_file.open("ab") as fh:
            fh.write(prefix + wanted + b"\n")

    # ------------------------------------------------------------------ undoing a start

    def index_tree(self) -> str | None:
        """The tree object of the index as it is (``git write-tree``), to put it back with
        :meth:`undo_branch_start`; None when git cannot write one (unmerged paths)."""
        status, out, _ = self._run(["write-tree"], read_only=False)
        return out.decode().strip() if status == 0 else None

    def undo_branch_start(
        self,
        before: str | None,
        branch: str,
        base: str,
        *,
        created: bool,
        index: str | None = None,
    ) -> None:
        """Put the repository back as it was before a goal's start switched to ``branch``
        (issue 28, item 7): a commit of the user's uncommitted changes made there is undone
        (the changes stay in the tree; the index is ``index``, :meth:`index_tree` taken
        before the start, else unstaged), HEAD goes back to ``before`` (None: detached at
        ``base``), and ``branch`` is deleted when the start ``created`` it.

        Raises:
            RepoStateError: git refused one of the steps (the message names it).
        """
        if self.head_sha() != base:  # relay committed the user's changes (--allow-dirty)
            self._check(["reset", "-q", "--soft", base], "cannot undo the commit", read_only=False)
            staged = ["read-tree", index] if index else ["reset", "-q"]
            self._check(staged, "cannot put the staged changes back", read_only=False)
        target = ["--detach", base] if before is None else ["--no-guess", before]
        self._check(
            ["switch", "-q", *target], f"cannot switch back to {before or base}", read_only=False
        )
        if created and branch != before:
            self._check(
                ["branch", "-q", "-D", "--", branch], f"cannot delete {branch}", read_only=False
            )
