"""The guard applied to a running goal (SPEC §8): inside a round after each real tool call, and
on the whole round at its end.

The guard itself (:mod:`relay.guard`) is pure; this unit builds its round records from the
loop's :class:`relay.loop_state.RoundState`, keeps the previous rounds, and records the events
of a finished round.
"""

from __future__ import annotations

from typing import Any

from relay import tools
from relay.goal import GoalStatus
from relay.guard import (
    Action,
    GuardEvent,
    GuardRound,
    GuardSettings,
    deliverable_paths,
    evaluate_round,
    evaluate_step,
)
from relay.loop_state import EventLog, RoundState
from relay.store import GoalRecord, Store
from relay.supervisor import Stop

RECORDED_AS_THEY_HAPPEN = frozenset({"tamper", "api_errors"})
"""Guard event kinds the loop stores when they happen; the guard only scores them."""


class GuardWatch:
    """The guard of one run.

    Args:
        store: the store (the previous rounds of a resumed goal, the event history).
        goal_id: the goal.
        settings: the guard settings.
        events: where a finished round's events are recorded.
    """

    def __init__(
        self, store: Store, goal_id: str, settings: GuardSettings, events: EventLog
    ) -> None:
        self.store = store
        self.goal_id = goal_id
        self.settings = settings
        self.events = events
        self.previous: list[GuardRound] = self._history()

    def crossed(self, rnd: RoundState, goal: GoalRecord) -> bool:
        """Whether the round so far already brings the score to the threshold (SPEC §8).

        Only events that the finished round is sure to bring too are counted
        (:func:`relay.guard.evaluate_step`); the score then only grows by the round's end, so
        the guard's verdict there is the same stop, with its diagnosis.
        """
        decision = evaluate_step(
            self.record(rnd),
            settings=self.settings,
            score=goal.risk_score,
            failure_streak=goal.failure_streak,
        )
        return decision.diagnosis is not None

    def close(
        self, rnd: RoundState, files: list[str], goal: GoalRecord, goal_text: str
    ) -> tuple[Stop | None, dict[str, Any]]:
        """Run the guard on the finished round (``files``: the paths it changed); store its
        events. The paths ``goal``'s deliverables name count as the goal's for ``drift``.
        Returns the ``terminated`` stop when the score reached the threshold, and the goal fields to save (``risk_score``, ``failure_streak``, ``diagnosis``)."""
        record = self.record(rnd, files)
        decision = evaluate_round(
            record,
            self.previous,
            goal_text=goal_text,
            settings=self.settings,
            score=goal.risk_score,
            failure_streak=goal.failure_streak,
            history=self._events,
            goal_paths=deliverable_paths(goal.deliverables),
        )
        self.previous = [*self.previous, record][-self.settings.loop_window :]
        for event in decision.events:
            if event.kind not in RECORDED_AS_THEY_HAPPEN:
                self.events.add(event.kind, event.round, event.detail)
        fields: dict[str, Any] = {
            "risk_score": decision.score,
            "failure_streak": decision.failure_streak,
        }
        if decision.diagnosis is None:
            return None, fields
        fields["diagnosis"] = decision.diagnosis
        return Stop(GoalStatus.TERMINATED, "guard", decision.diagnosis), fields

    @staticmethod
    def record(rnd: RoundState, files: list[str] | tuple[str, ...] = ()) -> GuardRound:
        """The guard's record of the round (so far)."""
        return GuardRound(
            n=rnd.n,
            actions=tuple(rnd.actions),
            handoff=rnd.handoff or "",
            files_changed=tuple(files),
            api_errors=tuple(rnd.api_errors),
            tamper=tuple(rnd.tamper),
            repeat_events=tuple(rnd.repeat_events),
        )

    def _events(self) -> list[GuardEvent]:
        """The goal's scored events so far (read only when a diagnosis is written)."""
        return [
            GuardEvent(e["kind"], e["round"] or 0, e["detail"])
            for e in self.store.events(self.goal_id)
            if e["weight"] > 0
        ]

    def _history(self) -> list[GuardRound]:
        """The last ``loop_window`` rounds of the goal, from the store (for a resumed run)."""
        records = []
        for r in self.store.rounds(self.goal_id, last=self.settings.loop_window):
            actions = tuple(
                Action(a["name"], a["arguments"], a.get("result_fp", ""), a["is_error"])
                for step in self.store.steps(self.goal_id, r.n)
                for a in step["actions"]
                if a["name"] in tools.REAL_TOOLS
            )
            records.append(
                GuardRound(
                    n=r.n,
                    actions=actions,
                    handoff=r.handoff or "",
                    files_changed=r.files_changed,
                )
            )
        return records
