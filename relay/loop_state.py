"""What the units of a running goal share (SPEC §3, §4): the round so far, the goal's end and
the event log.

:class:`RoundState` is filled by the steps of one round (:mod:`relay.loop`,
:mod:`relay.dispatch`) and read by the journal that closes the round (:mod:`relay.journal`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from relay.display import Display
from relay.guard import Action, GuardSettings, RepeatTracker
from relay.store import Store
from relay.supervisor import Counters, Stop


class GoalEnded(Exception):
    """Raised inside a round when the goal ends; carries the supervisor's :class:`Stop`."""

    def __init__(self, stop: Stop) -> None:
        super().__init__(stop.message)
        self.stop = stop


@dataclass
class RoundState:
    """What one round did so far (for the automatic handoff, the store and the guard).

    ``counters`` are the supervisor's counters as the round leaves them so far (the journal
    applies the round limits to them); ``stop`` is the stop decided during the round's steps;
    ``guard_crossed`` is set when the guard's score reached its threshold inside the round.
    """

    n: int
    start_sha: str
    counters: Counters
    repeats: RepeatTracker
    steps: int = 0
    tool_calls: int = 0
    real_tool_calls: int = 0
    called_tools: bool = False
    handoff: str | None = None
    commands: list[tuple[str, int | None]] = field(default_factory=list)
    last_error: str | None = None
    end_reason: str = "no_tool_call"
    actions: list[Action] = field(default_factory=list)
    api_errors: list[str] = field(default_factory=list)
    tamper: list[str] = field(default_factory=list)
    repeat_events: list[str] = field(default_factory=list)
    guard_crossed: bool = False
    stop: Stop | None = None
    wrap_up: str | None = None
    """The model's last word in the budget wrap-up step (SPEC §7.4), when it gave one."""
    text_call_steps: list[int] = field(default_factory=list)
    """The steps whose answer held a tool call as text that was not run (issue 14)."""


class EventLog:
    """Records the goal's events in the store and shows them (SPEC §8, §12).

    ``round`` is the round running now (None before the first): tamper findings are added to
    it, so that the guard scores them at the round's end.
    """

    def __init__(
        self, store: Store, goal_id: str, run_id: str, guard: GuardSettings, display: Display
    ) -> None:
        self.store = store
        self.goal_id = goal_id
        self.run_id = run_id
        self.guard = guard
        self.display = display
        self.round: RoundState | None = None

    def add(self, kind: str, round_n: int | None, detail: str) -> None:
        """Record an event; a guard event kind carries its weight when its detector is on."""
        weight = 0
        if self.guard.enabled and kind in self.guard.detectors:
            weight = self.guard.weights.get(kind, 0)
        self.store.add_event(
            self.goal_id, kind, detail, run_id=self.run_id, round_n=round_n, weight=weight
        )
        self.display.event(kind, detail)

    def tamper(self, detail: str) -> None:
        """Record a ``tamper`` finding (SPEC §8, §14) of the running round, if any."""
        rnd = self.round
        if rnd is not None:
            rnd.tamper.append(detail)
        self.add("tamper", rnd.n if rnd is not None else None, detail)
