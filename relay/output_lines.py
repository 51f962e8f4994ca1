"""The line outputs of relay (SPEC §12): a line of a run's ``transcript.jsonl``
(:class:`TranscriptLine`) and a line of ``relay log --json`` (:class:`LogLine`), and the base
of every output model (:class:`Output`). :mod:`relay.outputs` lists all outputs."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel

__all__ = [
    "LogEvent",
    "LogLine",
    "LogStep",
    "LogToolCall",
    "Output",
    "TranscriptError",
    "TranscriptLine",
    "TranscriptResponse",
]


class Output(BaseModel):
    """Base of the output models: strict types, no undeclared key, docstrings as descriptions."""

    model_config = ConfigDict(strict=True, extra="forbid", use_attribute_docstrings=True)


class ToolCall(Output):
    """A tool call of the model."""

    id: str
    """The call's id."""
    name: str
    """The tool."""
    arguments: dict[str, Any]
    """Its arguments."""


class Message(Output):
    """One message of a request."""

    role: Literal["user", "assistant", "tool"]
    """``user`` (round messages), ``assistant`` (earlier answers) or ``tool`` (a result)."""
    content: str
    """The text."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """An assistant message's tool calls (absent when none)."""
    tool_call_id: str | None = None
    """A tool result's call id (absent otherwise)."""
    is_error: bool = False
    """Whether a tool result is a failure (absent on other messages)."""


class ToolSpec(Output):
    """A tool offered to the model."""

    name: str
    """The tool."""
    description: str
    """What it does."""
    parameters: dict[str, Any]
    """Its JSON Schema."""


class TranscriptRequest(Output):
    """The provider-neutral request of one model call."""

    system: str
    """The system prompt."""
    messages: list[Message]
    """The messages."""
    tools: list[ToolSpec]
    """The tools offered."""
    tool_choice: Literal["auto", "required", "none"]
    """``auto``, ``required`` (forced tool use) or ``none`` (the budget wrap-up)."""


class Usage(Output):
    """Token usage of one model call."""

    uncached_input: int
    """Uncached input tokens."""
    cache_write: int
    """Tokens written to the prompt cache."""
    cached_input: int
    """Tokens read from the prompt cache."""
    output: int
    """Output tokens."""


class TranscriptResponse(Output):
    """The model's answer."""

    text: str
    """Its text."""
    tool_calls: list[ToolCall]
    """Its tool calls."""
    usage: Usage
    """Its token usage."""
    stop_reason: str
    """``end_turn``, ``tool_use``, ``max_tokens``, ``refusal`` or ``context_window``."""


class TranscriptError(Output):
    """A failed model call (README, "Statuses and limits": API errors)."""

    kind: str
    """``rate_limit``, ``overloaded``, ``server``, ``timeout``, ``auth``, ``quota``, …"""
    message: str
    """The provider's message."""
    code: int | str | None
    """The HTTP status or the provider's error code."""


class TranscriptLine(Output):
    """One line of ``transcript.jsonl``: one model call."""

    round: int
    """The round."""
    step: int
    """The step in the round."""
    mode: Literal["relay", "session"]
    """The context mode."""
    time: float
    """When the call ended (UNIX seconds)."""
    request: TranscriptRequest
    """The exact request the model saw."""
    wire: Any = None
    """With ``--debug``: the raw provider exchange, secrets redacted (absent otherwise)."""
    response: TranscriptResponse | None = None
    """The answer (absent when the call failed)."""
    error: TranscriptError | None = None
    """The failure (absent when the call succeeded)."""


class LogEvent(Output):
    """An event of the run (``relay log``)."""

    type: Literal["event"]
    """Always ``event``."""
    time: float
    """When it happened (UNIX seconds)."""
    round: int | None
    """The round (null: between rounds)."""
    kind: str
    """The event's kind (as in the result's ``events``)."""
    detail: str
    """What happened."""


class LogToolCall(Output):
    """A tool call as ``relay log`` shows it."""

    name: str
    """The tool."""
    is_error: bool
    """Whether it failed."""
    arguments: dict[str, str]
    """Only its ``command``, ``path`` and ``status`` arguments (the rest stays in the store)."""


class LogStep(Output):
    """A step of the run (one model call) as ``relay log`` shows it."""

    type: Literal["step"]
    """Always ``step``."""
    time: float
    """When it was recorded (UNIX seconds)."""
    round: int
    """The round."""
    step: int
    """The step in the round."""
    text: str | None
    """The answer of a step without tool calls (null otherwise)."""
    tool_calls: list[LogToolCall]
    """Its tool calls."""


class LogLine(RootModel[Annotated[LogEvent | LogStep, Field(discriminator="type")]]):
    """One line of ``relay log --json``: an event or a step, in time order."""
