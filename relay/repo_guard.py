"""What the model's commands did to git's own state is undone (SPEC §11, §14).

Inside the sandbox ``.git`` is read-only, so none of this can happen there; without it a
``shell`` command can change git's configuration (an fsmonitor command, a filter driver, a
signing program), switch branches, or rewrite history (``git reset --hard HEAD~2``, a rebase,
``commit --amend`` of relay's commits). relay's own git calls are hardened against the
configuration whatever it says (:mod:`relay.gitsafe`); this module puts the repository back:

* after every ``shell`` call and at every round's end: changed configuration files
  (``.git/config``, ``config.worktree``, ``info/attributes``) are restored, the hooks folders
  are put back as they were when the round started (:mod:`relay.githooks`: a hook the model
  planted would run on the user's next ``git commit``), and index entries marked
  ``assume-unchanged`` or ``skip-worktree`` (which hide a file's changes from relay's commit
  and from the audit's comparison) are unmarked;
* at the round's end: a branch switch is switched back, history that no longer contains relay's
  last commit is restored (the working tree's files stay, and relay's round commit records them
  on top), and lines the round added to a ``.gitattributes`` file that select a filter, diff or
  merge driver are removed.

Each repair is a finding the loop records as ``tamper``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass

from relay.errors import RelayError
from relay.fswrite import replace_file
from relay.githooks import HooksSnapshot
from relay.gitrepo import GitRepo
from relay.gitsnapshot import ConfigSnapshot, new_driver_attributes

__all__ = ["RepoGuard", "RepoRepair"]


@dataclass(frozen=True)
class RepoRepair:
    """The repairs of one check: ``findings`` (one line each, for ``tamper`` events) and
    ``problem``: set when relay could not put the repository back (the goal must stop)."""

    findings: tuple[str, ...] = ()
    problem: str | None = None


class RepoGuard:
    """Keeps the goal's repository as relay left it (see the module docstring).

    Args:
        git: the repository.
        branch: the goal's branch (None with ``--in-place`` on a detached HEAD: no branch
            checks then).
        sandboxed: the model's commands run in the sandbox, where ``.git`` is read-only: the
            configuration and the index need no check (history is still checked).
    """

    def __init__(self, git: GitRepo, branch: str | None, *, sandboxed: bool = False) -> None:
        self.git = git
        self.branch = branch
        self.sandboxed = sandboxed
        self.start_sha = ""
        self.snapshot: ConfigSnapshot | None = None
        self.hooks: HooksSnapshot | None = None
        self.users_flags: frozenset[str] | None = None

    def start_round(self, start_sha: str) -> None:
        """Remember the round's starting commit (relay's last one), git's configuration and
        its hooks folders (the user's hooks as they are now are kept)."""
        self.start_sha = start_sha
        if not self.sandboxed:
            self.snapshot = self.git.config_snapshot()
            self.hooks = self.git.hooks_snapshot()
            if self.users_flags is None:  # before the model's first command of this run
                self.users_flags = self.git.index_flags()

    def after_command(self) -> RepoRepair:
        """Restore git's configuration files and hooks folders a command changed, and clear
        index flags that hide files from git (``assume-unchanged``, ``skip-worktree``)."""
        if self.snapshot is None or self.sandboxed:
            return RepoRepair()
        try:
            restored = self.git.restore_config(self.snapshot)
            hooks = self.git.restore_hooks(self.hooks) if self.hooks is not None else []
            hidden = self.git.clear_index_flags(keep=self.users_flags or frozenset())
        except RelayError as exc:
            return RepoRepair(problem=str(exc))
        findings = [
            f"a shell command changed the git configuration {p}; restored" for p in restored
        ]
        findings += [f"a shell command changed git's hooks ({line}); undone" for line in hooks]
        if hidden:
            shown = ", ".join(hidden[:5]) + (
                f" and {len(hidden) - 5} more" if len(hidden) > 5 else ""
            )
            findings.append(f"a shell command hid files from git ({shown}); unhidden")
        return RepoRepair(tuple(findings))

    def end_round(self, changed: Iterable[str]) -> RepoRepair:
        """All repairs at a round's end, before relay commits: configuration, branch, history,
        ``.gitattributes`` drivers. ``changed`` are the round's changed repo-relative paths."""
        config = self.after_command()
        findings = list(config.findings)
        problem = config.problem
        checks = [self._branch_and_history]
        if not self.sandboxed:  # inside the sandbox the model cannot configure a driver at all
            checks.append(lambda: self._attributes(changed))
        for check in checks:
            try:
                findings += check()
            except (RelayError, OSError) as exc:
                problem = problem or str(exc)
        return RepoRepair(tuple(findings), problem)

    def _branch_and_history(self) -> list[str]:
        if not self.branch or not self.start_sha:
            return []
        current = self.git.current_branch()
        if current == self.branch and self.git.is_ancestor(self.start_sha, "HEAD"):
            return []
        what = (
            f"a shell command rewrote the history of {self.branch} (relay's commit "
            f"{self.start_sha[:7]} was no longer on it)"
        )
        if current != self.branch:
            what = (
                f"a shell command switched from branch {self.branch} to "
                f"{current or 'a detached HEAD'}"
            )
            with contextlib.suppress(RelayError):
                self.git.checkout(self.branch)  # carries the changes along
            on_branch = self.git.current_branch() == self.branch
            if on_branch and self.git.is_ancestor(self.start_sha, "HEAD"):
                return [f"{what}; switched back"]
        self.git.restore_branch(self.branch, self.start_sha)
        return [f"{what}; the branch was restored, the files are kept as the round's changes"]

    def _attributes(self, changed: Iterable[str]) -> list[str]:
        found = []
        for rel in changed:
            if os.path.basename(rel) != ".gitattributes":
                continue
            path = self.git.root / rel
            if path.is_symlink() or not path.is_file():
                continue
            after = path.read_text(encoding="utf-8", errors="surrogateescape")
            before = self.git.file_at(self.start_sha, rel) if self.start_sha else None
            lines = new_driver_attributes(before, after)
            if not lines:
                continue
            drop = {n for n, _ in lines}
            kept = [ln for i, ln in enumerate(after.split("\n"), 1) if i not in drop]
            replace_file(path, "\n".join(kept).encode("utf-8", errors="surrogateescape"))
            shown = ", ".join(f"line {n}: {text.strip()[:60]}" for n, text in lines[:3])
            found.append(f"{rel} gained git driver attributes ({shown}); those lines removed")
        return found
