"""The tool calls of one response (SPEC §5, §7.1, §8): real tools and goal tools, in order.

Every call but ``update_goal`` runs first, in the response's order; ``update_goal`` is then
decided when it came alone, and deferred when other calls came with it. After each real tool
call: the repairs of :mod:`relay.repairs` (shell), relay's note when the model repeats itself,
and the guard's check inside the round. Once the user paused the goal or the guard's score
reached its threshold, the remaining calls are not run.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from relay import tools
from relay.current_goal import CurrentGoal
from relay.goal_tools import GoalTools
from relay.guard import Action, GuardSettings, result_fingerprint
from relay.guard_watch import GuardWatch
from relay.interrupts import Interrupts
from relay.loop_state import EventLog, RoundState
from relay.loop_texts import error_line
from relay.models.base import Message, Response, ToolCall
from relay.repairs import Repairs
from relay.supervisor import Stop, after_real_tool_call
from relay.tools import ToolContext, ToolResult

NUDGE_MARK = "\n\n[relay] "
"""Separates a tool result from relay's note that the model is repeating itself."""

RESULT_CHARS = 2000
"""Characters of a tool result kept in the store's step record."""


class ToolDispatcher:
    """Runs the tool calls of one run's responses.

    Args:
        tool_ctx: where and how real tools run.
        goal_tools: the answers of the goal tools.
        repairs: the repairs after a shell call.
        guard: the guard (its check inside a round).
        settings: the guard settings (whether repeat nudges are on).
        goal: the goal.
        events: the event log (and the display).
        interrupts: the user's pause request.
    """

    def __init__(
        self,
        tool_ctx: ToolContext,
        goal_tools: GoalTools,
        repairs: Repairs,
        guard: GuardWatch,
        settings: GuardSettings,
        goal: CurrentGoal,
        events: EventLog,
        interrupts: Interrupts,
    ) -> None:
        self.tool_ctx = tool_ctx
        self.goal_tools = goal_tools
        self.repairs = repairs
        self.guard = guard
        self.nudges = settings.enabled and "loop" in settings.detectors
        self.goal = goal
        self.events = events
        self.interrupts = interrupts

    def run(
        self, rnd: RoundState, calls: tuple[ToolCall, ...]
    ) -> tuple[list[Message], Stop | None]:
        """Run one response's tool calls; returns their results in the calls' order and the
        stop an ``update_goal`` decided."""
        results: dict[str, Message] = {}
        stop: Stop | None = None
        alone = len(calls) == 1
        for call in calls:
            refused = self._refusal(rnd)
            if refused is not None:
                results[call.id] = Message("tool", refused, tool_call_id=call.id, is_error=True)
            elif call.name != "update_goal":
                results[call.id] = self._run_call(rnd, call)
        for call in calls:
            if call.name == "update_goal" and call.id not in results:
                message, call_stop = self.goal_tools.update_goal(rnd, call, alone)
                results[call.id] = message
                stop = stop or call_stop
        rnd.tool_calls += len(calls)
        return [results[c.id] for c in calls], stop

    def _refusal(self, rnd: RoundState) -> str | None:
        if self.interrupts.requested is not None:
            return "not run: the user paused the goal"
        if self.interrupts.time_up:
            return "not run: the time budget is used up"
        if rnd.guard_crossed:
            return "not run: the guard ends the goal (the model repeats itself or keeps failing)"
        return None

    def _run_call(self, rnd: RoundState, call: ToolCall) -> Message:
        problem = tools.check_arguments(call.name, call.arguments)
        if problem is not None:
            result = ToolResult(problem, is_error=True)
        elif call.name == "handoff":
            result = self.goal_tools.handoff(rnd, call)
        elif call.name == "get_goal":
            result = self.goal_tools.get_goal(rnd)
        else:
            result = self._run_real(rnd, call)
        if result.is_error:
            rnd.last_error = error_line(call, result)
        self.events.display.tool_called(call, result.content, result.is_error)
        return Message("tool", result.content, tool_call_id=call.id, is_error=result.is_error)

    def _run_real(self, rnd: RoundState, call: ToolCall) -> ToolResult:
        """A real tool call, its repairs, the repeat nudge and the guard's check (SPEC §8)."""
        shell = call.name == "shell"
        before = self.repairs.before(self.goal.value.goal_file) if shell else None
        result = tools.execute(call, self.tool_ctx)
        rnd.real_tool_calls += 1
        rnd.called_tools = True
        rnd.counters = after_real_tool_call(rnd.counters)
        if before is not None:
            command = str(call.arguments.get("command", ""))
            rnd.commands.append((command, result.exit_code))
            undone = self.repairs.after_shell(before, command)
            if undone:
                result = replace(result, content=result.content + repaired_note(undone))
        action = Action(
            call.name, call.arguments, result_fingerprint(result.content), result.is_error
        )
        rnd.actions.append(action)
        nudge = rnd.repeats.observe(action)
        if nudge and self.nudges:
            rnd.repeat_events.append(rnd.repeats.finding())
            result = replace(result, content=f"{result.content}{NUDGE_MARK}{nudge}")
        if self.guard.crossed(rnd, self.goal.value):
            rnd.guard_crossed = True
        return result


def repaired_note(findings: list[str]) -> str:
    """What relay undid after a shell call, appended to its result (SPEC §14): the model
    learns that the change did not stay instead of building on it."""
    lines = "".join(f"\n- {finding}" for finding in findings)
    return f"{NUDGE_MARK}relay undid what this command changed outside your remit:{lines}"


def step_actions(
    response: Response, results: list[Message], *, from_text: bool = False
) -> list[dict[str, Any]]:
    """The store's record of a step's tool calls: name, arguments, whether it failed, the
    result (cut to :data:`RESULT_CHARS`) and the fingerprint the guard saw live (without relay's
    repeat nudge); ``from_text`` marks calls taken from the answer's text
    (``tools.parse_text_calls``, issue 14) with ``"from_text": true``."""
    by_id = {m.tool_call_id: m for m in results}
    actions = []
    for call in response.tool_calls:
        res = by_id.get(call.id)
        actions.append(
            {
                "name": call.name,
                "arguments": call.arguments,
                "is_error": bool(res and res.is_error),
                "result": (res.content[:RESULT_CHARS] if res else ""),
                "result_fp": result_fingerprint(res.content.split(NUDGE_MARK, 1)[0]) if res else "",
            }
        )
        if from_text and response.tool_calls:
            actions[-1]["from_text"] = True
    return actions
