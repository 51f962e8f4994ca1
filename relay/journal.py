"""Closes a round, once (SPEC §4, §6, §8, §11): the round limits, the repository's repair, the
guard, the stop by the supervisor's order, the progress file and the goal state, the commit,
the store's round record and the goal's fields (one write each), the push, the events.
"""

from __future__ import annotations

import time
from typing import Any

from relay import goal_state
from relay.branch_trust import sealed_text
from relay.branch_watch import BranchWatch
from relay.config import Config
from relay.context import Prompts
from relay.current_goal import CurrentGoal
from relay.dispatch import step_actions
from relay.gitrepo import GitRepo
from relay.guard_watch import GuardWatch
from relay.loop_state import EventLog, RoundState
from relay.loop_texts import auto_handoff, commit_message, shown_paths
from relay.models.base import Message, Response
from relay.own_files import OwnFiles
from relay.progress import render_progress, shown_rounds
from relay.repairs import Repairs
from relay.state_seal import sealing_key
from relay.supervisor import Counters, LimitPolicy, Stop, end_of_round, round_end_stop
from relay.text import counted, first_line


class Journal:
    """Records one run's rounds.

    Args:
        git: the repository.
        config: the run's configuration (progress file, git author, push).
        prompts: the templates (the automatic handoff).
        goal: the goal.
        events: the event log (and the display).
        own: relay's own files in the tree.
        repairs: the repairs at a round's end.
        guard: the guard.
        limits: the supervisor's round limits.
    """

    def __init__(
        self,
        git: GitRepo,
        config: Config,
        prompts: Prompts,
        goal: CurrentGoal,
        events: EventLog,
        own: OwnFiles,
        repairs: Repairs,
        guard: GuardWatch,
        limits: LimitPolicy,
    ) -> None:
        self.git = git
        self.config = config
        self.prompts = prompts
        self.goal = goal
        self.store = goal.store
        self.events = events
        self.own = own
        self.repairs = repairs
        self.guard = guard
        self.limits = limits
        self._stored: Stop | None = None
        self.key = sealing_key()  # checked before the run changed anything (relay.runner)
        self.branch = BranchWatch(git, goal.value.branch, enabled=config.git.push)

    def record_step(
        self, rnd: RoundState, response: Response, results: list[Message], *, from_text: bool
    ) -> None:
        """The store's record of the step just run: the answer's text, its tool calls with their
        results (``from_text``: calls taken from the answer's text, issue 14) and its usage."""
        self.store.add_step(
            self.goal.goal_id,
            self.events.run_id,
            rnd.n,
            rnd.steps,
            text=response.text,
            actions=step_actions(response, results, from_text=from_text),
            usage=response.usage.to_dict(),
        )

    def open_run(self, counters: Counters) -> None:
        """At a run's start: the progress file and the goal state as the goal stands."""
        self.write_progress(None, None, self._fields(counters))

    def close_round(self, rnd: RoundState) -> Stop | None:
        """Close round ``rnd`` (its steps are over; ``rnd.stop`` is the stop they decided).
        ``rnd.counters`` become the counters after the round. Returns the stop that ends the
        goal (already stored), or None."""
        self.goal.refresh()  # the row is checked at every round's end (SPEC §14)
        rnd.counters, limit_stop = end_of_round(
            rnd.counters,
            called_tools=rnd.called_tools,
            limits=self.limits,
            text_calls=bool(rnd.text_call_steps),
        )
        # listed and staged by one git process where only relay writes the git directories
        changed = (
            self.git.stage_changes(rnd.start_sha)
            if self.repairs.sandboxed
            else self.git.changed_paths(rnd.start_sha)
        )
        repo_stop = self.repairs.end_of_round(changed)
        files = [f for f in changed if f not in self.own.paths]
        self.repairs.restore_progress()
        guard_stop, guard_fields = self.guard.close(rnd, files, self.goal.value, self.goal.text)
        stop = round_end_stop(
            steps=rnd.stop, limits=limit_stop, repository=repo_stop, guard=guard_stop
        )
        reason = stop.reason if stop else rnd.end_reason
        note = rnd.handoff if rnd.handoff is not None else auto_handoff(self.prompts, rnd, files)
        record: dict[str, Any] = {
            "n": rnd.n,
            "ended_at": time.time(),
            "steps": rnd.steps,
            "tool_calls": rnd.tool_calls,
            "real_tool_calls": rnd.real_tool_calls,
            "files_changed": files,
            "handoff": note,
            "handoff_auto": int(rnd.handoff is None),
            "end_reason": reason,
        }
        fields = {**self._fields(rnd.counters), **guard_fields}
        self.write_progress(stop, record, fields, wrap_up=rnd.wrap_up)
        sha = self._commit(rnd.n, note, stop)
        moved = self._push(rnd.n)
        if moved is not None:  # the push was rejected: a second commit of the round says so
            stop, record["end_reason"], reason = moved, moved.reason, moved.reason
            self.write_progress(stop, record, fields, wrap_up=rnd.wrap_up)
            sha = self._commit(rnd.n, note, stop)
        record.update(commit_sha=sha)
        del record["n"], record["ended_at"]
        with self.store.batch():  # the round's record, the goal's fields, the event: all or none
            self.store.end_round(self.goal.goal_id, rnd.n, **record)
            self.goal.save_final(stop, **fields, progress_text=self.own.progress_text)
            self.events.add(
                "round_ended",
                rnd.n,
                f"{reason}; {counted(rnd.steps, 'step')}, "
                f"{counted(rnd.tool_calls, 'tool call')}; "
                f"changed: {shown_paths(files) or 'nothing'}; commit {sha[:7]}",
            )
        self._stored = stop
        self.events.display.round_ended(rnd.n, reason, sha)
        return stop

    def end_goal(self, stop: Stop, round_n: int | None) -> Stop:
        """The goal ends with ``stop`` (after round ``round_n``, or before any round): its
        status is stored if no round's end stored it, and a ``goal_ended`` event is recorded.
        Nothing is written to the tree. Returns ``stop``."""
        if stop is not self._stored:
            self.goal.save_final(stop)
        detail = f"{stop.status} ({stop.reason}): {first_line(stop.message)}"
        self.events.add("goal_ended", round_n, detail)
        return stop

    def write_progress(
        self,
        stop: Stop | None,
        closing: dict[str, Any] | None,
        fields: dict[str, Any],
        *,
        wrap_up: str | None = None,
    ) -> None:
        """Write the progress file and the goal state, sealed with this machine's key (SPEC
        §6, §11, §14). ``closing`` holds the closing round's record and ``fields`` the goal's
        fields, both not stored yet."""
        goal = self.goal.value
        keep = self.config.progress.keep_rounds
        shown = shown_rounds(self.store, self.goal.goal_id, keep, closing)
        audit = self.store.latest_audit(self.goal.goal_id)
        text = render_progress(
            goal=goal.text,
            supplements=goal.supplements,
            deliverables=goal.deliverables,
            audit=audit,
            rounds=shown[0],
            earlier=shown[1],
            keep_rounds=keep,
            max_chars=self.config.progress.max_chars,
            wrap_up=wrap_up,
            status=f"{stop.status} ({stop.reason})" if stop else "active",
            goal_id=self.goal.goal_id,
        )
        self.own.write_progress(text)
        final = dict(fields)
        if stop is not None:
            final.update(status=str(stop.status), reason=stop.reason, message=stop.message)
        state = goal_state.goal_state(
            self.store, self.goal.goal_id, shown=shown, audit=audit, **final
        )
        self.own.write_goal_state(sealed_text(state, self.key))

    def _fields(self, counters: Counters) -> dict[str, Any]:
        """The goal's counters and active time, as the round leaves them."""
        return {
            "rounds": counters.rounds,
            "counted_rounds": counters.counted_rounds,
            "no_progress_streak": counters.no_progress_streak,
            "blocked_reports": counters.blocked_reports,
            "auto_replies": counters.auto_replies,
            "elapsed_s": self.goal.elapsed_s,
        }

    def _commit(self, round_n: int, note: str, stop: Stop | None) -> str:
        subject, body = commit_message(round_n, note, stop)
        return self.git.commit_all(
            subject,
            body=body,
            trailers={"Relay-Goal": self.goal.goal_id, "Relay-Round": str(round_n)},
            author_name=self.config.git.author_name,
            author_email=self.config.git.author_email,
        )

    def branch_moved(self) -> Stop | None:
        """Before a round: the ``branch_moved`` stop when, with ``git.push`` on, the goal's
        branch on the remote is not where this run left it (:mod:`relay.branch_watch`)."""
        return self.branch.moved()

    def _push(self, round_n: int) -> Stop | None:
        """Push the round's commit (``git.push``; never forced). A failure is recorded as
        ``push_failed`` and the work stays committed; returns the ``branch_moved`` stop when
        the push was rejected because the branch moved on the remote."""
        moved, failure = self.branch.push()
        if failure is not None:
            self.events.add("push_failed", round_n, failure)
        if moved is not None:
            self.events.add("push_failed", round_n, moved.message)
        return moved
