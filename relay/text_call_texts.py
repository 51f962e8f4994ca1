"""What relay says about tool calls written as text (issue 14): to the model, to the user, at a
goal's end. Pure functions and constants, no I/O.

A text tool call is an answer's text that holds a tool call (:mod:`relay.text_tool_calls`)
while the answer called no tool: the model server did not turn the model's output into a tool
call. The model is told at once (in the next step of the same round); the user is warned once a
goal had it in :data:`WARN_AFTER_ROUNDS` rounds; a goal that ends without reaching its goal
names it as the cause.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from relay.text import counted
from relay.text_tool_calls import TextToolCall

__all__ = [
    "SERVER_FIXES",
    "WARNING_HEAD",
    "WARN_AFTER_ROUNDS",
    "cause_sentence",
    "event_detail",
    "no_audit_line",
    "nudge",
    "text_call_rounds",
    "text_tool_calls_json",
    "warning",
    "warning_given",
    "warning_to_show",
]

WARN_AFTER_ROUNDS = 2
"""Rounds of a goal with text tool calls after which the user is warned (once per goal)."""

EVENT_KIND = "text_tool_call"
"""The event of a step whose answer held a tool call as text (one per such step)."""

WARNING_HEAD = "the model wrote tool calls as text"
"""How the user's warning (a ``warning`` event) begins: how it is found again."""

SERVER_FIXES = (
    "Make the model server parse tool calls: start llama.cpp's server with --jinja; in vLLM "
    "pass --enable-auto-tool-choice --tool-call-parser NAME (hermes for Qwen and Hermes, "
    "llama3_json for Llama 3, mistral for Mistral); in Ollama use a model whose template "
    "supports tools (`ollama show MODEL` lists the capability `tools`); in LM Studio load a "
    "model marked for tool use; or run relay with --force-tool-choice (force_tool_choice: "
    "true). tools.parse_text_calls: true runs such calls instead (README, Local models)."
)
"""What the user can change, named in the warning and in a goal's end."""


def _names(calls: Sequence[TextToolCall]) -> str:
    names = list(dict.fromkeys(c.name for c in calls))
    shapes = list(dict.fromkeys(c.shape for c in calls))
    return f"{', '.join(names)} as {' and '.join(shapes)}"


def nudge(calls: Sequence[TextToolCall]) -> str:
    """The message the model gets in the next step when its answer held ``calls`` as text and
    no tool was called."""
    return (
        "[relay] You called no tool. Your answer holds a tool call written as text "
        f"({_names(calls)}); text is never run, so nothing of it happened. Call tools through "
        "the tool-calling interface of this conversation (a real function/tool call, as the "
        "tool definitions you were given describe), not as JSON, a code block or tags in your "
        "answer's text. Make the call now."
    )


def event_detail(step: int, calls: Sequence[TextToolCall], *, executed: bool, told: bool) -> str:
    """The ``text_tool_call`` event of step ``step``: the calls were run (``executed``), or the
    model is told in the next step (``told``), or the round ends."""
    held = (
        f"step {step}: the answer's text holds {counted(len(calls), 'tool call')} ({_names(calls)})"
    )
    if executed:
        return f"{held}; run as real tool calls (tools.parse_text_calls)"
    if told:
        return f"{held} but no tool was called; the model is told how to call tools"
    return f"{held} but no tool was called; the round ends"


def warning(rounds: Sequence[int], *, executed: bool) -> str:
    """The user's warning after text tool calls in ``rounds`` (round numbers) of a goal."""
    shown = ", ".join(str(n) for n in rounds)
    what = (
        "relay ran them because tools.parse_text_calls is on"
        if executed
        else "relay did not run them"
    )
    return (
        f"{WARNING_HEAD} instead of calling tools in {counted(len(rounds), 'round')} "
        f"(round{'s' if len(rounds) != 1 else ''} {shown}): the model server does not turn "
        f"them into tool calls, and {what}. {SERVER_FIXES}"
    )


def cause_sentence(rounds: int) -> str:
    """What a no-progress or round-limit notice adds when ``rounds`` of the rounds it counts
    had text tool calls that were not run."""
    return (
        f"Cause: in {counted(rounds, 'round')} the model wrote its tool calls as text, which "
        f"relay does not run: the model server does not parse tool calls. {SERVER_FIXES}"
    )


def text_call_rounds(events: Iterable[Mapping[str, Any]]) -> list[int]:
    """The rounds (sorted, once each) with a ``text_tool_call`` event among ``events`` (each
    with ``kind`` and ``round``)."""
    return sorted(
        {e["round"] for e in events if e["kind"] == EVENT_KIND and isinstance(e["round"], int)}
    )


def warning_given(events: Iterable[Mapping[str, Any]]) -> str | None:
    """The user's warning among ``events`` (each with ``kind`` and ``detail``), if given."""
    return next(
        (
            e["detail"]
            for e in events
            if e["kind"] == "warning" and str(e["detail"]).startswith(WARNING_HEAD)
        ),
        None,
    )


def text_tool_calls_json(events: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The ``text_tool_calls`` field of the ``--json`` object: the rounds whose answers held
    tool calls as text and the warning the user got (None before it), or None when no answer
    of the goal held one."""
    rounds = text_call_rounds(events)
    if not rounds:
        return None
    return {"rounds": rounds, "warning": warning_given(events)}


def warning_to_show(data: Mapping[str, Any]) -> str | None:
    """The warning of the ``--json`` object ``data`` to show a person at a run's end and in
    ``relay status``; None when there is none or when the goal's message already says it
    (a notice that named the cause with :data:`SERVER_FIXES`)."""
    warning = (data.get("text_tool_calls") or {}).get("warning")
    if not warning or SERVER_FIXES in (data.get("message") or ""):
        return None
    return str(warning)


def no_audit_line(data: Mapping[str, Any]) -> str:
    """The summary's line when no audit ran, for the ``--json`` object ``data``: it names tool
    calls written as text as the reason when the goal's answers held some."""
    found = data.get("text_tool_calls")
    if not found:
        return "No audit ran (the model did not claim completion)."
    return (
        "No audit ran: the model never called update_goal as a tool; it wrote its tool calls "
        f"as text in {counted(len(found['rounds']), 'round')}, and relay does not run text."
    )
