"""Undo what model-written code did outside its remit (SPEC §5, §6, §8, §14).

After each shell call and after the audit's commands: the progress file, protected paths,
escaped processes, git's configuration and hooks, and inbox or goal-file changes that would pass
for the user's supplements. At a round's end: the repository's git state
(:mod:`relay.repo_guard`). Every repair is a ``tamper`` finding of the running round, and the
findings of a shell call are returned for its result (the model is told what was undone).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from relay import protect
from relay.goal import GoalStatus
from relay.loop_state import EventLog
from relay.own_files import OwnFiles
from relay.pathalarm import PathAlarm
from relay.repo_guard import RepoGuard
from relay.sandbox import stop_escaped
from relay.supervisor import Stop
from relay.watch import SupplementWatcher


@dataclass(frozen=True)
class Before:
    """What model-written code may change, as it was before the code ran."""

    protected: protect.Snapshot
    inbox: tuple[frozenset[str], str | None] | None = None


class Repairs:
    """The repairs of one run.

    Args:
        own: relay's own files in the tree.
        protected_paths: the protected entries (SPEC §5), relative to the root.
        repo_guard: the guard of the repository's git state.
        watcher: the supplement watcher (inbox and goal file), if any.
        sandboxed: whether commands run in the sandbox (then nothing outlives a call and
            ``.git`` is read-only to them).
        run_id: the run's id (its escaped processes carry it).
        events: where the findings are recorded.
    """

    def __init__(
        self,
        own: OwnFiles,
        protected_paths: tuple[str, ...],
        repo_guard: RepoGuard,
        watcher: SupplementWatcher | None,
        *,
        sandboxed: bool,
        run_id: str,
        events: EventLog,
    ) -> None:
        self.own = own
        self.protected_paths = protected_paths
        self.repo_guard = repo_guard
        self.watcher = watcher
        self.sandboxed = sandboxed
        self.run_id = run_id
        self.events = events
        self._kept: tuple[tuple[str | None, ...], protect.Snapshot, PathAlarm] | None = None
        """The last snapshot of the protected paths, what it skipped, and the alarm armed
        before it: while the alarm is silent the paths are as the snapshot says."""

    @property
    def root(self) -> Path:
        return self.own.root

    def before(self, goal_file: str | None, *, shell: bool = True) -> Before:
        """The state before a shell call (``shell``) or the audit's commands. The goal file
        is left out of the protected paths: an edit of it is a supplement question
        (:meth:`after_shell`), never undone, so no user edit is lost."""
        protected = self._snapshot((self.own.progress_rel, goal_file))
        watched = shell and self.watcher is not None and not self.sandboxed
        # inside the sandbox a command can reach neither the inbox nor the goal file, so a
        # change made meanwhile is the user's: nothing to compare with (watch.py)
        inbox = self.watcher.snapshot() if watched and self.watcher is not None else None
        return Before(protected, inbox)

    def _snapshot(self, skip: tuple[str | None, ...]) -> protect.Snapshot:
        """The protected paths as they are now (except ``skip``): without the sandbox every
        path a protected folder or glob holds (:func:`relay.protect.snapshot`). In the sandbox
        (existing protected paths are read-only mounts there) the paths named literally: the
        last snapshot while the kernel told of no change to them since it was taken
        (:mod:`relay.pathalarm`), else a new one, taken after the alarm is armed again."""
        kept = self._kept
        if not self.sandboxed:  # a command may write through mmap, which tells inotify nothing
            return protect.snapshot(self.root, self.protected_paths, skip)
        if kept is not None and kept[0] == skip:
            if not kept[2].rang():
                return kept[1]
            alarm = kept[2].rearmed()
        else:
            if kept is not None:
                kept[2].close()
            paths = protect.literal_paths(self.root, self.protected_paths, skip)
            alarm = PathAlarm([str(p) for p in paths], contents=True)
        snap = protect.snapshot_of(Path(p) for p in alarm.paths)
        self._kept = (skip, snap, alarm)
        return snap

    def after_shell(self, before: Before, command: str) -> list[str]:
        """Repairs after a shell call running ``command``; returns their findings (each also
        recorded as ``tamper``), for the call's result: the model is told what was undone."""
        found = self.after_code(before)
        found += self._reject_model_supplements(before, command)
        return found

    def after_code(self, before: Before) -> list[str]:
        """Repairs after model-written code ran: the progress file, protected paths and, without
        the sandbox, escaped processes, git's configuration and its hooks. Returns the
        findings, in the order recorded (each a ``tamper`` event)."""
        found: list[str] = []
        if not self.sandboxed:  # first, so that nothing of the command writes while relay undoes
            escaped = stop_escaped(self.run_id)
            if escaped:
                found += self._record(
                    [
                        f"{len(escaped)} process(es) of a shell command outlived it (they killed "
                        "relay's reaper); stopped"
                    ]
                )
        found += self.restore_progress()
        kept = self._kept
        if kept is None or kept[1] is not before.protected or kept[2].rang():
            found += self._record(protect.restore(self.root, before.protected))
        if self.sandboxed:
            return found  # .git is read-only inside the sandbox, and nothing outlives a call
        repair = self.repo_guard.after_command()
        found += self._record([*repair.findings, *([repair.problem] if repair.problem else [])])
        return found

    def _record(self, details: list[str]) -> list[str]:
        """Record each of ``details`` as a ``tamper`` finding; returns them."""
        for detail in details:
            self.events.tamper(detail)
        return list(details)

    def restore_progress(self) -> list[str]:
        """Restore the progress file when something changed it behind the orchestrator's back
        (SPEC §6, §8); returns the finding (``[]`` when nothing changed it)."""
        if self.own.restore_progress(watched=self.sandboxed):
            return self._record(
                [
                    f"the progress file {self.own.progress_rel} was changed behind the "
                    "orchestrator's back; restored"
                ]
            )
        return []

    def end_of_round(self, changed: list[str]) -> Stop | None:
        """Undo what the round's commands did to git's state (``changed``: the round's changed
        paths); a repository relay cannot put back ends the goal (``terminated``, ``tamper``)."""
        if not self.sandboxed and stop_escaped(self.run_id):
            self.events.tamper("processes of a shell command outlived the round; stopped")
        repair = self.repo_guard.end_round(changed)
        for detail in repair.findings:
            self.events.tamper(detail)
        if repair.problem is None:
            return None
        return Stop(
            GoalStatus.TERMINATED,
            "tamper",
            f"The model changed the repository's git state and relay could not put it back "
            f"({repair.problem}). Check the repository, then `relay resume`.",
        )

    def _reject_model_supplements(self, before: Before, command: str) -> list[str]:
        """Inbox files and goal-file edits made by a shell command that names them are the
        model's, not the user's: they never become supplements (which would restart the round
        limits). Nothing is deleted; it is set aside and reported as ``tamper`` (returned)."""
        if self.watcher is None or before.inbox is None:
            return []
        changes = self.watcher.disown_changes_since(before.inbox, command, sandboxed=self.sandboxed)
        return self._record(
            [
                f"{what} changed while a shell command ran; not taken as a supplement "
                "(if it was you, use relay say)"
                for what in changes
            ]
        )
