"""Answers whose text holds a tool call while no tool was called (issue 14).

:class:`TextCallWatch` looks at every answer without a tool call: when its text holds a call
for an offered tool (:func:`relay.text_tool_calls.find_text_tool_calls`), it records a
``text_tool_call`` event and either hands the calls back to be run as real tool calls
(``tools.parse_text_calls: true``: the same dispatcher, sandbox and supervisor rules as a real
call) or gives the loop the message that tells the model, in the next step of the round, that
no tool was called and how to call one. Once the goal had such answers in
:data:`~relay.text_call_texts.WARN_AFTER_ROUNDS` rounds, the user is warned, once per goal.
"""

from __future__ import annotations

from dataclasses import dataclass

from relay.config import Config
from relay.loop_state import EventLog, RoundState
from relay.models.base import Request, Response, ToolCall
from relay.store import Store
from relay.text_call_texts import (
    EVENT_KIND,
    WARN_AFTER_ROUNDS,
    event_detail,
    nudge,
    text_call_rounds,
    warning,
    warning_given,
)
from relay.text_tool_calls import find_text_tool_calls

__all__ = ["TextCallStep", "TextCallWatch"]


@dataclass(frozen=True)
class TextCallStep:
    """What the loop does about one answer whose text held tool calls.

    ``calls``: the calls to run as real tool calls (``tools.parse_text_calls``), else empty;
    ``nudge``: when they were not run, the message for the model's next step in the round;
    None when the round ends instead (``text_tool_call``): the answer before this one held a
    text call too, so the message did not help, or the round has no step left.
    """

    calls: tuple[ToolCall, ...] = ()
    nudge: str | None = None


class TextCallWatch:
    """Finds tool calls written as text in the answers of one run.

    Args:
        store: the goal's store (the goal's earlier events decide the warning).
        goal_id: the goal.
        events: the event log (and the display).
        config: the run's configuration: ``tools.parse_text_calls`` (run such calls instead
            of telling the model) and ``limits.max_steps_per_round`` (a round's last step
            tells nothing).
    """

    def __init__(self, store: Store, goal_id: str, events: EventLog, config: Config) -> None:
        self.store = store
        self.goal_id = goal_id
        self.events = events
        self.execute = config.tools.parse_text_calls
        self.max_steps = config.limits.max_steps_per_round
        self.warned = False

    def examine(self, rnd: RoundState, request: Request, response: Response) -> TextCallStep | None:
        """Look at the answer of step ``rnd.steps`` to ``request``; None when it called a tool,
        when the step offered none (the budget wrap-up) or when its text holds no call."""
        if response.tool_calls or request.tool_choice == "none" or not request.tools:
            return None
        found = find_text_tool_calls(response.text, request.tools)
        if not found:
            return None
        step = rnd.steps
        again = step - 1 in rnd.text_call_steps
        told = not self.execute and not again and step < self.max_steps
        detail = event_detail(step, found, executed=self.execute, told=told)
        self.events.add(EVENT_KIND, rnd.n, detail)
        self._warn_once(rnd.n)
        if self.execute:
            calls = tuple(
                ToolCall(f"text-{rnd.n}-{step}-{i}", c.name, dict(c.arguments))
                for i, c in enumerate(found, 1)
            )
            return TextCallStep(calls=calls)
        rnd.text_call_steps.append(step)
        return TextCallStep(nudge=nudge(found) if told else None)

    def _warn_once(self, round_n: int) -> None:
        """The user's warning, once per goal, when the goal's answers held text tool calls in
        :data:`WARN_AFTER_ROUNDS` rounds (this run's and earlier runs')."""
        if self.warned:
            return
        events = self.store.events(self.goal_id)
        if warning_given(events) is not None:
            self.warned = True
            return
        rounds = text_call_rounds(events)
        if len(rounds) >= WARN_AFTER_ROUNDS:
            self.warned = True
            self.events.add("warning", round_n, warning(rounds, executed=self.execute))
