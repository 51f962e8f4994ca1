"""What the two wire formats of relay's gateway share (SPEC §15): the parsed request, the
error for a body relay cannot read, and the encoding of server-sent events. Pure."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from relay.errors import RelayError
from relay.models.base import Request

WIRES = ("messages", "responses")
"""The wire formats: the Anthropic Messages API and the OpenAI Responses API."""


class WireError(RelayError):
    """An agent's request body that relay cannot read; the message names the field and value.
    The gateway answers it with HTTP 400 (never forwarded, never retried)."""


@dataclass(frozen=True)
class WireRequest:
    """An agent's request, read.

    Attributes:
        request: the provider-neutral request relay's model gets.
        model: the model name the agent asked for (echoed back in the answer).
        stream: whether the agent asked for server-sent events.
        namespaces: tool namespaces of a Responses request (``mcp__relay``, …): their tools are
            offered to the model as ``<namespace>__<tool>`` and split back in the answer.
        custom_tools: names of a Responses request's freeform tools (answered as
            ``custom_tool_call``).
    """

    request: Request
    model: str
    stream: bool
    namespaces: tuple[str, ...] = field(default=())
    custom_tools: tuple[str, ...] = field(default=())


def text_of(block: Any) -> str:
    """The text of a content block (``text``, ``input_text``, ``output_text``); "" otherwise."""
    if isinstance(block, str):
        return block
    if isinstance(block, dict) and block.get("type") in ("text", "input_text", "output_text"):
        return str(block.get("text") or "")
    return ""


def sse(event: str, data: dict[str, Any]) -> bytes:
    """One server-sent event: ``event: NAME``, ``data: JSON`` and the blank line."""
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()
