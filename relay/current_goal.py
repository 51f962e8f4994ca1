"""The goal's row as a running loop knows it (SPEC §10, §14).

:class:`CurrentGoal` holds one current value of the goal's row. It is read again from the store
only where the row can change behind the loop's back — at each step boundary (``relay pause``,
``relay clear``, ``relay say``, a model's command without the sandbox), at a round's end, and
when a write finds the status changed — and only when another connection wrote the database
since the last read (SQLite's ``data_version``). Each read is checked against the loop's own writes
(:class:`relay.integrity.GoalSeal`); the loop's writes update the value in place.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import replace
from typing import Any

from relay.errors import GoalStateError, UnreadableGoalError
from relay.goal import GoalStatus
from relay.integrity import GoalSeal, foreign_status
from relay.loop_state import EventLog, GoalEnded
from relay.models.base import Usage
from relay.store import GoalRecord, Store
from relay.supervisor import Stop

WRITE_ATTEMPTS = 5
"""Writes retried when another process changes the goal's status meanwhile."""


class CurrentGoal:
    """The goal ``goal_id`` of ``store`` while this run works on it.

    Args:
        store: the store.
        goal_id: the goal's id.
        events: where tamper findings are recorded.
        base_elapsed_s: the goal's active time before this run, in seconds.
    """

    def __init__(
        self, store: Store, goal_id: str, events: EventLog, base_elapsed_s: float = 0.0
    ) -> None:
        self.store = store
        self.goal_id = goal_id
        self.events = events
        self.base_elapsed_s = base_elapsed_s
        self.started = time.monotonic()
        self._seen = store.data_version()
        self.value: GoalRecord = store.goal(goal_id)
        self.seal = GoalSeal.of(self.value)
        self.ended = False
        """The loop has stored the goal's final status."""

    @property
    def elapsed_s(self) -> float:
        """The goal's active time in seconds, this run included."""
        return self.base_elapsed_s + (time.monotonic() - self.started)

    @property
    def usage(self) -> Usage:
        """The goal's token usage so far."""
        g = self.value
        return Usage(g.uncached_input, g.cache_write, g.cached_input, g.output)

    @property
    def tokens_used(self) -> int:
        """Tokens that count against ``limits.token_budget`` (SPEC §7.4)."""
        return self.usage.budget_tokens

    @property
    def text(self) -> str:
        """The goal with its supplements, one text (what the guard compares activity with)."""
        return "\n".join([self.value.text, *(s["text"] for s in self.value.supplements)])

    def refresh(self, *, force: bool = False) -> GoalRecord:
        """Read the goal's row again, checked against what this loop wrote (SPEC §14): a guarded
        field or a status that no relay command set is restored and recorded as ``tamper``.
        Returns (and keeps) the record with relay's values.

        Nothing is read while no other connection wrote the database since the last read
        (:meth:`relay.store.Store.data_version`): this loop's own writes keep :attr:`value`
        current. ``force``: read all the same (after a write of this process that bypassed
        this object, such as a supplement from the inbox)."""
        version = self.store.data_version()
        if not force and version == self._seen:
            return self.value
        self._seen = version
        findings: list[str] = []
        try:
            goal = self.store.goal(self.goal_id)
        except UnreadableGoalError as exc:
            frozen = ("deliverables", "limits", "overrides")
            self.store.restore_goal(
                self.goal_id, None, **{k: self.seal.expected[k] for k in frozen}
            )
            findings.append(f"{exc}; restored")
            goal = self.store.goal(self.goal_id)
        restore, changed = self.seal.check(goal)
        findings += changed
        if not self.ended and foreign_status(goal.status):
            restore.update(status="active", reason=None, message=None, question=None)
            findings.append(
                f"the goal's status was set to {goal.status} in relay's store behind its back "
                "(only relay's audit completes a goal); restored to active"
            )
        if findings:
            with contextlib.suppress(GoalStateError):
                self.store.restore_goal(self.goal_id, goal.status, **restore)
            for detail in findings:
                self.events.tamper(detail)
            goal = replace(goal, **restore)
        self.value = goal
        return goal

    def save(self, **fields: Any) -> None:
        """Write goal fields while the goal is still active; a user's pause or clear from
        another process ends this run instead of being overwritten (SPEC §10).

        Raises:
            GoalEnded: the goal is no longer active (its stop is the user's).
        """
        for _ in range(WRITE_ATTEMPTS):
            try:
                self._write("active", fields)
                return
            except GoalStateError:
                current = self.refresh()
                if current.status != GoalStatus.ACTIVE:
                    stop = Stop(
                        GoalStatus(current.status), current.reason or "user", current.message or ""
                    )
                    raise GoalEnded(stop) from None
        raise GoalStateError(f"goal {self.goal_id} keeps changing; its progress is not saved")

    def save_final(self, stop: Stop | None, **fields: Any) -> None:
        """Write bookkeeping fields and, if the goal ends, its status. The user's word wins:
        when a pause or clear from another process changed the status, it is kept (the write
        names the status it saw, and is retried after a read if it changed; SPEC §10)."""
        for attempt in range(WRITE_ATTEMPTS):
            current = (self.refresh() if attempt else self.value).status
            write = dict(fields)
            if stop is not None and current == GoalStatus.ACTIVE:
                write.update(
                    status=str(stop.status),
                    reason=stop.reason,
                    message=stop.message,
                    question=stop.message if stop.status == GoalStatus.NEEDS_USER_INPUT else None,
                )
            if not write:  # the user's status stands, and nothing else is to be written
                return
            try:
                self._write(current, write)
            except GoalStateError:
                continue
            self.ended = self.ended or "status" in write
            return
        raise GoalStateError(f"goal {self.goal_id} keeps changing; its last round is not saved")

    def _write(self, expected_status: str, fields: dict[str, Any]) -> None:
        self.store.save_goal(self.goal_id, expected_status, **fields)
        self.seal.wrote(fields)
        self.value = replace(self.value, **fields)

    def add_usage(self, usage: Usage, cost_usd: float, *, counted: bool = False) -> None:
        """Add one model call's usage and cost (USD) to the goal (SPEC §7.4); ``counted``:
        count the call too (:meth:`count_model_call`), in the same write."""
        tokens = usage.to_dict()
        calls = 1 if counted else 0
        self.store.add_usage(self.goal_id, tokens, cost_usd, model_calls=calls)
        self.seal.added_usage(tokens, cost_usd)
        total = self.usage + usage
        self.value = replace(
            self.value,
            uncached_input=total.uncached_input,
            cache_write=total.cache_write,
            cached_input=total.cached_input,
            output=total.output,
            cost_usd=self.value.cost_usd + cost_usd,
            model_calls=self.value.model_calls + calls,
        )

    def add_claim(self, round_n: int, claim: dict[str, Any]) -> None:
        """Store a ``complete`` claim before its audit runs, so that a run killed during the
        audit leaves it to be audited again on resume (:func:`relay.recovery.pending_claim`)."""
        self.store.add_claim(self.goal_id, round_n, claim)

    def count_model_call(self) -> None:
        """Count one model call that reached the provider."""
        self.store.count_model_call(self.goal_id)
        self.value = replace(self.value, model_calls=self.value.model_calls + 1)
