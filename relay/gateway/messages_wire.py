"""The Anthropic Messages API on relay's gateway (SPEC §15): an agent's request body in,
relay's provider-neutral :class:`Request` out; a neutral :class:`Response` back out as a
``message`` body or as the server-sent events the anthropic SDK and Claude Code read.

Pure: no I/O. The event sequence is the one of the real API: ``message_start``, per content
block ``content_block_start`` / ``content_block_delta`` (``text_delta`` or
``input_json_delta``) / ``content_block_stop``, ``message_delta`` (stop reason and usage),
``message_stop``.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from relay.gateway.wire import WireError, WireRequest, text_of
from relay.models.base import Message, Request, Response, ToolCall, ToolSpec

STOP_REASONS = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "refusal": "refusal",
    "context_window": "model_context_window_exceeded",
}
"""Neutral stop reason → Messages API ``stop_reason``."""

_ARGUMENT_CHUNK = 256
"""Characters of tool-call arguments per ``input_json_delta`` event."""


def parse_request(body: Any) -> WireRequest:
    """The neutral request of a ``POST /v1/messages`` body.

    Args:
        body: the decoded JSON body: ``{model, messages: [...], system?: str | [blocks],
            tools?: [{name, description?, input_schema}], tool_choice?, stream?, ...}``.
            A message of role ``system`` joins the system prompt. Thinking, images and
            documents are not carried over (a placeholder names them);
            cache markers and sampling settings are dropped (relay's provider sets its own).

    Raises:
        WireError: the body is not a mapping, ``messages`` is not a list of messages, or a
            block or tool lacks a field (the message names the field and the value).
    """
    if not isinstance(body, dict):
        raise WireError(f"the request body must be a JSON object, got {type(body).__name__}")
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list):
        raise WireError("messages: must be a list of messages")
    messages: list[Message] = []
    system = [_system(body.get("system"))]
    for index, item in enumerate(raw_messages):
        if isinstance(item, dict) and item.get("role") == "system":
            system.append(_system(item.get("content")))  # a system message joins the prompt
        else:
            messages.extend(_message(item, f"messages[{index}]"))
    request = Request(
        system="\n\n".join(part for part in system if part),
        messages=tuple(messages),
        tools=tuple(_tool(t, f"tools[{i}]") for i, t in enumerate(body.get("tools") or [])),
        tool_choice=_tool_choice(body.get("tool_choice"), bool(body.get("tools"))),
    )
    return WireRequest(request, str(body.get("model") or ""), bool(body.get("stream")))


def _system(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n\n".join(text_of(block) for block in value if text_of(block))
    raise WireError(f"system: must be a string or a list of text blocks, got {value!r:.80}")


def _message(item: Any, where: str) -> list[Message]:
    if not isinstance(item, dict) or item.get("role") not in ("user", "assistant"):
        raise WireError(f"{where}: must be an object with role user, assistant or system")
    content = item.get("content")
    if isinstance(content, str):
        return [Message(item["role"], content)]
    if not isinstance(content, list):
        raise WireError(f"{where}.content: must be a string or a list of blocks")
    if item["role"] == "assistant":
        return [_assistant(content, where)]
    return _user(content, where)


def _assistant(blocks: list[Any], where: str) -> Message:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for index, block in enumerate(blocks):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_use":
            arguments = block.get("input")
            if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                raise WireError(f"{where}.content[{index}]: a tool_use needs an id and a name")
            calls.append(
                ToolCall(
                    block["id"], block["name"], arguments if isinstance(arguments, dict) else {}
                )
            )
        elif kind == "text":
            texts.append(str(block.get("text", "")))
    return Message("assistant", "\n".join(t for t in texts if t), tool_calls=tuple(calls))


def _user(blocks: list[Any], where: str) -> list[Message]:
    out: list[Message] = []
    texts: list[str] = []
    for index, block in enumerate(blocks):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_result":
            if not isinstance(block.get("tool_use_id"), str):
                raise WireError(f"{where}.content[{index}]: a tool_result needs a tool_use_id")
            result = block.get("content")
            text = result if isinstance(result, str) else _joined(result)
            out.append(
                Message(
                    "tool",
                    text,
                    tool_call_id=block["tool_use_id"],
                    is_error=bool(block.get("is_error")),
                )
            )
        elif kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind is not None:
            texts.append(f"[{kind} not forwarded by relay]")
    if texts:
        out.append(Message("user", "\n".join(texts)))
    return out


def _joined(blocks: Any) -> str:
    if not isinstance(blocks, list):
        return ""
    return "\n".join(text_of(b) or f"[{b.get('type')} not forwarded by relay]" for b in blocks)


def _tool(tool: Any, where: str) -> ToolSpec:
    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
        raise WireError(f"{where}: a tool needs a name")
    schema = tool.get("input_schema")
    if not isinstance(schema, dict):
        # server tools (web search, …) have a type and no schema: offered as a plain object
        schema = {"type": "object", "properties": {}}
    return ToolSpec(tool["name"], str(tool.get("description") or ""), schema)


def _tool_choice(choice: Any, has_tools: bool) -> str:
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind in ("any", "tool"):
        return "required"
    if kind == "none" or not has_tools:
        return "none"
    return "auto"


def _usage(response: Response) -> dict[str, int]:
    u = response.usage
    return {
        "input_tokens": u.uncached_input,
        "cache_creation_input_tokens": u.cache_write,
        "cache_read_input_tokens": u.cached_input,
        "output_tokens": u.output,
    }


def _blocks(response: Response) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if response.text:
        blocks.append({"type": "text", "text": response.text})
    for call in response.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        )
    return blocks


def response_body(response: Response, model: str) -> dict[str, Any]:
    """The ``message`` body of a non-streaming answer (``model``: the name the agent asked
    for, echoed back)."""
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _blocks(response),
        "stop_reason": STOP_REASONS.get(response.stop_reason, "end_turn"),
        "stop_sequence": None,
        "usage": _usage(response),
    }


def response_events(response: Response, model: str) -> list[tuple[str, dict[str, Any]]]:
    """The server-sent events of a streaming answer, as ``(event name, data)`` pairs in order.

    Text comes as one ``text_delta``; tool-call arguments as ``input_json_delta`` pieces of
    at most 256 characters whose concatenation is the JSON object. ``message_start`` carries
    the input usage (output 0), ``message_delta`` the whole usage and the stop reason.
    """
    body = response_body(response, model)
    start = {**body, "content": [], "stop_reason": None}
    start["usage"] = {**body["usage"], "output_tokens": 0}
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"message": start})]
    for index, block in enumerate(body["content"]):
        events.extend(_block_events(index, block))
    events.append(
        (
            "message_delta",
            {
                "delta": {"stop_reason": body["stop_reason"], "stop_sequence": None},
                "usage": body["usage"],
            },
        )
    )
    events.append(("message_stop", {}))
    return [(name, {"type": name, **data}) for name, data in events]


def _block_events(index: int, block: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    if block["type"] == "text":
        opened = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": block["text"]}]
    else:
        opened = {**block, "input": {}}
        arguments = json.dumps(block["input"])
        deltas = [
            {"type": "input_json_delta", "partial_json": arguments[i : i + _ARGUMENT_CHUNK]}
            for i in range(0, len(arguments), _ARGUMENT_CHUNK)
        ]
    return [
        ("content_block_start", {"index": index, "content_block": opened}),
        *[("content_block_delta", {"index": index, "delta": d}) for d in deltas],
        ("content_block_stop", {"index": index}),
    ]
