"""Provider-neutral model types: the request the loop builds and the response a model returns.

Every model (scripted, Anthropic, OpenAI) implements :class:`Model`. What the transcript records
(SPEC §12) is :meth:`Request.to_dict` and :meth:`Response.to_dict`, so tests and users see the
exact provider-neutral request the model saw.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Role = Literal["user", "assistant", "tool"]
ToolChoice = Literal["auto", "required", "none"]


@dataclass(frozen=True)
class ToolCall:
    """One tool call of a response. ``arguments`` is the decoded JSON object the model sent."""

    id: str
    name: str
    arguments: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True)
class ToolSpec:
    """A tool offered to the model: ``parameters`` is a JSON schema object."""

    name: str
    description: str
    parameters: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


@dataclass(frozen=True)
class Message:
    """One message of a request.

    ``role`` is ``user`` (round messages), ``assistant`` (earlier responses, with their
    ``tool_calls``) or ``tool`` (a tool result for ``tool_call_id``; ``is_error`` marks failures).
    """

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    is_error: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
            out["is_error"] = self.is_error
        return out


@dataclass(frozen=True)
class Usage:
    """Token usage of one or more model calls, as the provider reported it (SPEC §7.4).

    All fields are token counts. ``uncached_input`` excludes cache reads and writes;
    ``cached_input`` are cache reads (reported, never counted in the token budget).
    ``estimated`` is true when a count was estimated (characters / 4) rather than reported.
    """

    uncached_input: int = 0
    cache_write: int = 0
    cached_input: int = 0
    output: int = 0
    estimated: bool = False

    @property
    def budget_tokens(self) -> int:
        """Tokens that count against ``limits.token_budget``: uncached input + cache writes + output."""
        return self.uncached_input + self.cache_write + self.output

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.uncached_input + other.uncached_input,
            self.cache_write + other.cache_write,
            self.cached_input + other.cached_input,
            self.output + other.output,
            self.estimated or other.estimated,
        )

    def to_dict(self) -> dict[str, int]:
        return {
            "uncached_input": self.uncached_input,
            "cache_write": self.cache_write,
            "cached_input": self.cached_input,
            "output": self.output,
        }


DEFAULT_MAX_OUTPUT_TOKENS = 16000
"""Output tokens per model call unless ``max_output_tokens`` says otherwise: room for a tool
call that writes a file of several hundred lines, below the Anthropic SDK's non-streaming
limit (about 21,333), and a cap on a local server that would otherwise generate until its
context is full (docs/models.md)."""

DEFAULT_REQUEST_TIMEOUT_S = 600.0
"""Seconds a model call may wait for the answer (``request_timeout_s``)."""

DEFAULT_CONNECT_TIMEOUT_S = 10.0
"""Seconds to open the connection to the API (``connect_timeout_s``)."""


@dataclass(frozen=True)
class ModelSettings:
    """The settings of a provider's model calls (``relay.yaml`` keys of the same names beside
    ``model``; flags ``--base-url``, ``--max-output-tokens``, ``--request-timeout``,
    ``--connect-timeout``).

    Attributes:
        base_url: the API base URL (OpenAI-compatible servers, proxies); None: the
            provider's own endpoint.
        max_output_tokens: output tokens per call (a positive count).
        request_timeout_s: seconds to wait for the answer: the read, write and pool timeout
            of the SDK's HTTP client (a wait between two bytes of the answer; a
            non-streaming answer sends nothing until it is complete).
        connect_timeout_s: seconds to open the connection.
    """

    base_url: str | None = None
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S


@dataclass(frozen=True)
class Request:
    """The provider-neutral request of one step.

    ``tool_choice`` is ``auto`` (model decides), ``required`` (forced tool use, SPEC §7.5) or
    ``none`` (no tools offered: the budget wrap-up step, SPEC §7.4).
    """

    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice = "auto"

    def to_dict(self) -> dict[str, Any]:
        return {
            "system": self.system,
            "messages": [m.to_dict() for m in self.messages],
            "tools": [t.to_dict() for t in self.tools],
            "tool_choice": self.tool_choice,
        }

    def char_count(self) -> int:
        """Characters of system prompt, messages and tool schemas (for token estimates)."""
        total = len(self.system)
        for m in self.messages:
            total += len(m.content) + sum(len(str(c.arguments)) + len(c.name) for c in m.tool_calls)
        for t in self.tools:
            total += len(t.name) + len(t.description) + len(str(t.parameters))
        return total


@dataclass(frozen=True)
class Response:
    """A model's answer to one request. ``stop_reason`` is provider-neutral:
    ``end_turn``, ``tool_use``, ``max_tokens``, ``refusal`` or ``context_window``."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    stop_reason: str = "end_turn"

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "tool_calls": [c.to_dict() for c in self.tool_calls],
            "usage": self.usage.to_dict(),
            "stop_reason": self.stop_reason,
        }


class Model(Protocol):
    """What the loop needs of a model. Implementations raise :class:`relay.errors.ModelError`
    (classified by kind, SPEC §7.6) and never retry by themselves: the loop owns retries."""

    name: str

    def complete(self, request: Request) -> Response:
        """Send one request; return the response or raise ``ModelError``."""
        ...


def estimate_tokens(chars: int) -> int:
    """Token estimate used when a provider reports no usage: characters / 4, at least 1."""
    return max(1, chars // 4)


def response_problem(value: object) -> str | None:
    """What makes ``value`` not a well-formed :class:`Response` (a model that is not one of
    relay's providers can return anything), in words naming the field; None when it is one."""
    if not isinstance(value, Response):
        return f"the answer is not a Response (got {_shown(value)})"
    if not isinstance(value.text, str):
        return f"text is not a string (got {_shown(value.text)})"
    if not isinstance(value.stop_reason, str):
        return f"stop_reason is not a string (got {_shown(value.stop_reason)})"
    if not isinstance(value.tool_calls, tuple):
        return f"tool_calls is not a tuple (got {_shown(value.tool_calls)})"
    for i, call in enumerate(value.tool_calls):
        if not isinstance(call, ToolCall):
            return f"tool_calls.{i} is not a ToolCall (got {_shown(call)})"
        for name, kind in (("id", str), ("name", str), ("arguments", dict)):
            if not isinstance(getattr(call, name), kind) or getattr(call, name) in ("", None):
                return f"tool_calls.{i}.{name} is not a {kind.__name__} (got {_shown(call)})"
    usage = value.usage
    if not isinstance(usage, Usage):
        return f"usage is not a Usage (got {_shown(usage)})"
    for name in ("uncached_input", "cache_write", "cached_input", "output"):
        count = getattr(usage, name)
        if type(count) is not int or count < 0:
            return f"usage.{name} is not a token count (got {_shown(count)})"
    return None


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"
