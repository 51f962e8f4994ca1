"""The goal's branch on the remote, watched while a run pushes (SPEC §11, §16; issue 17).

With ``git.push`` on, the remote's copy of the goal's branch belongs to this run: relay pushes
it after every round (never forced). Another writer — a retried batch task, an orphaned run on a
lost worker, a person — moves it. Then this run is a stale writer: its next rounds would be
rejected, its commits would never reach the remote, and the goal would be worked twice. So:

* before every round, :meth:`BranchWatch.moved` compares the remote's head with the commit this
  run last pushed (before its first push: the remote's head must be one of the run's own
  commits, i.e. an ancestor of HEAD); a difference stops the goal ``terminated`` with reason
  ``branch_moved`` before the model is called again;
* a push that fails while the remote's head is not an ancestor of HEAD (the rejection of a
  non-fast-forward push) stops the goal the same way, at once (:meth:`BranchWatch.push`).

A remote that cannot be reached is not a moved branch: the push's failure is recorded
(``push_failed``) as before, and the next round checks again.
"""

from __future__ import annotations

from relay.errors import RelayError, SecretInPushError
from relay.gitrepo import GitRepo
from relay.goal import GoalStatus
from relay.supervisor import Stop

__all__ = ["BRANCH_MOVED", "BranchWatch"]

BRANCH_MOVED = "branch_moved"
"""The reason of a goal stopped because its branch moved on the remote under the run."""


class BranchWatch:
    """Watches one branch on one remote for a run with ``git.push`` on.

    Args:
        git: the repository, on the goal's branch.
        branch: the goal's branch (None or ``enabled`` false: nothing is watched).
        enabled: ``git.push``.
        remote: the remote pushed to.
    """

    def __init__(
        self, git: GitRepo, branch: str | None, *, enabled: bool, remote: str = "origin"
    ) -> None:
        self.git = git
        self.branch = branch if enabled else None
        self.remote = remote
        self.pushed: str | None = None
        """The commit this run last pushed, once it pushed."""

    def moved(self) -> Stop | None:
        """The ``branch_moved`` stop when the remote's branch is not where this run left it;
        None when it is, when nothing is watched, or when the remote cannot be read."""
        if self.branch is None:
            return None
        try:
            remote = self.git.remote_head(self.branch, self.remote)
        except RelayError:
            return None  # unreachable: not a move; the push records its failure
        if self.pushed is not None:
            return None if remote == self.pushed else self._stop(remote)
        if remote is None or self._ours(remote, self.git.head_sha()):
            return None
        return self._stop(remote)

    def push(self) -> tuple[Stop | None, str | None]:
        """Push the branch. Returns ``(stop, failure)``: the ``branch_moved`` stop when the
        push was rejected because the remote's branch moved, else None; and git's message
        when the push failed for another reason (unreachable remote…), else None.

        Raises:
            SecretInPushError: the push would send a secret relay holds (nothing was pushed).
        """
        if self.branch is None:
            return None, None
        head = self.git.head_sha()
        try:
            self.git.push(self.branch, self.remote)
        except SecretInPushError:
            raise  # no failure to retry next round: the run stops, the goal paused
        except RelayError as exc:
            stop = self.moved() if self.pushed is not None else self._moved_before_push(head)
            return stop, None if stop is not None else str(exc)
        self.pushed = head
        return None, None

    def _moved_before_push(self, head: str) -> Stop | None:
        try:
            remote = self.git.remote_head(self.branch or "", self.remote)
        except RelayError:
            return None
        if remote is None or self._ours(remote, head):
            return None
        return self._stop(remote)

    def _ours(self, remote: str, head: str) -> bool:
        """Whether the remote's commit is ``head`` or one of its ancestors (False for a commit
        this clone does not have: it was made elsewhere)."""
        try:
            return self.git.is_ancestor(remote, head)
        except RelayError:
            return False

    def _stop(self, remote: str | None) -> Stop:
        where = f"is at {remote[:7]}" if remote else "was deleted"
        ours = f"; this run last pushed {self.pushed[:7]}" if self.pushed else ""
        return Stop(
            GoalStatus.TERMINATED,
            BRANCH_MOVED,
            f"The branch {self.branch} on {self.remote} {where}, not where this run left it"
            f"{ours}: another writer works on this goal. This run stopped; its commits since "
            "its last push are only in this clone.",
        )
