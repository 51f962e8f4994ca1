"""The OpenAI Responses API on relay's gateway (SPEC §15): an agent's ``POST /v1/responses``
body in, relay's provider-neutral :class:`Request` out; a neutral :class:`Response` back out
as a ``response`` object or as the server-sent events the openai SDK and Codex CLI read.

Pure: no I/O. Tools inside a ``namespace`` (Codex offers MCP tools as the namespace
``mcp__relay``) reach the model as ``<namespace>__<tool>``; a call of such a name goes back as
a ``function_call`` with ``namespace`` set. Freeform ``custom`` tools (Codex's
``apply_patch``) reach the model as a function of one string argument ``input``.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from relay.gateway.responses_events import response_events
from relay.gateway.wire import WireError, WireRequest, text_of
from relay.models.base import Message, Request, Response, ToolCall, ToolSpec

__all__ = ["parse_request", "response_body", "response_events"]

CUSTOM_INPUT = "input"
"""The one argument of a freeform tool as the neutral model sees it."""


def parse_request(body: Any) -> WireRequest:
    """The neutral request of a ``POST /v1/responses`` body.

    Args:
        body: ``{model, input: str | [items], instructions?, tools?, tool_choice?, stream?}``.
            Items read: ``message`` (``developer``/``system`` text joins the system prompt),
            ``function_call``, ``function_call_output``, ``custom_tool_call``,
            ``custom_tool_call_output``; ``reasoning`` and other items are dropped. Hosted
            tools (``web_search``, …) are not offered: relay's model cannot run them.

    Raises:
        WireError: the body is not an object, ``input`` is neither a string nor a list, or an
            item lacks a field (named with its index).
    """
    if not isinstance(body, dict):
        raise WireError(f"the request body must be a JSON object, got {type(body).__name__}")
    system = [str(body["instructions"])] if body.get("instructions") else []
    raw = body.get("input")
    if isinstance(raw, str):
        raw = [{"type": "message", "role": "user", "content": raw}]
    if not isinstance(raw, list):
        raise WireError("input: must be a string or a list of items")
    messages: list[Message] = []
    for index, item in enumerate(raw):
        _item(item, f"input[{index}]", system, messages)
    tools, namespaces, custom = _tools(body.get("tools") or [])
    request = Request(
        system="\n\n".join(system),
        messages=tuple(messages),
        tools=tools,
        tool_choice=_tool_choice(body.get("tool_choice"), bool(tools)),
    )
    return WireRequest(
        request,
        str(body.get("model") or ""),
        bool(body.get("stream")),
        namespaces=namespaces,
        custom_tools=custom,
    )


def _item(item: Any, where: str, system: list[str], messages: list[Message]) -> None:
    if not isinstance(item, dict):
        raise WireError(f"{where}: must be an object")
    kind = item.get("type", "message")
    if kind == "message":
        role, text = item.get("role"), _content(item.get("content"))
        if role in ("developer", "system"):
            system.append(text)
        elif role in ("user", "assistant"):
            messages.append(Message(role, text))
        else:
            raise WireError(f"{where}.role: must be user, assistant, developer or system")
    elif kind in ("function_call", "custom_tool_call"):
        call = _call(item, where)
        last = messages[-1] if messages else None
        if last is not None and last.role == "assistant":
            messages[-1] = Message("assistant", last.content, tool_calls=(*last.tool_calls, call))
        else:
            messages.append(Message("assistant", "", tool_calls=(call,)))
    elif kind in ("function_call_output", "custom_tool_call_output"):
        if not isinstance(item.get("call_id"), str):
            raise WireError(f"{where}: a {kind} needs a call_id")
        output = item.get("output")
        text = output if isinstance(output, str) else _content(output)
        messages.append(Message("tool", text, tool_call_id=item["call_id"]))


def _call(item: dict[str, Any], where: str) -> ToolCall:
    if not isinstance(item.get("call_id"), str) or not isinstance(item.get("name"), str):
        raise WireError(f"{where}: a {item['type']} needs a call_id and a name")
    name = item["name"]
    if item.get("namespace"):
        name = f"{item['namespace']}__{name}"
    if item["type"] == "custom_tool_call":
        return ToolCall(item["call_id"], name, {CUSTOM_INPUT: str(item.get("input") or "")})
    try:
        arguments = json.loads(item.get("arguments") or "{}")
    except json.JSONDecodeError:
        arguments = {}
    return ToolCall(item["call_id"], name, arguments if isinstance(arguments, dict) else {})


def _content(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(text_of(p) or f"[{p.get('type')} not forwarded by relay]" for p in content)


def _tools(raw: list[Any]) -> tuple[tuple[ToolSpec, ...], tuple[str, ...], tuple[str, ...]]:
    tools: list[ToolSpec] = []
    namespaces: list[str] = []
    custom: list[str] = []
    for tool in raw:
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind == "function" and isinstance(tool.get("name"), str):
            tools.append(_function(tool, ""))
        elif kind == "namespace" and isinstance(tool.get("name"), str):
            namespaces.append(tool["name"])
            for inner in tool.get("tools") or []:
                if isinstance(inner, dict) and isinstance(inner.get("name"), str):
                    tools.append(_function(inner, tool["name"]))
        elif kind == "custom" and isinstance(tool.get("name"), str):
            custom.append(tool["name"])
            schema = {
                "type": "object",
                "properties": {CUSTOM_INPUT: {"type": "string", "description": "Freeform input."}},
                "required": [CUSTOM_INPUT],
            }
            tools.append(ToolSpec(tool["name"], str(tool.get("description") or ""), schema))
    return tuple(tools), tuple(namespaces), tuple(custom)


def _function(tool: dict[str, Any], namespace: str) -> ToolSpec:
    name = f"{namespace}__{tool['name']}" if namespace else tool["name"]
    schema = tool.get("parameters")
    if not isinstance(schema, dict):
        schema = {"type": "object", "properties": {}}
    return ToolSpec(name, str(tool.get("description") or ""), schema)


def _tool_choice(choice: Any, has_tools: bool) -> str:
    if choice == "none" or not has_tools:
        return "none"
    if choice == "required" or (isinstance(choice, dict) and choice.get("type") == "function"):
        return "required"
    return "auto"


def output_items(response: Response, wire: WireRequest) -> list[dict[str, Any]]:
    """The ``output`` items of an answer: one ``message`` with the text, then one
    ``function_call`` (or ``custom_tool_call``) per tool call, each complete."""
    items: list[dict[str, Any]] = []
    if response.text:
        part = {"type": "output_text", "text": response.text, "annotations": []}
        items.append(
            {
                "id": f"msg_{uuid.uuid4().hex[:24]}",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [part],
            }
        )
    for call in response.tool_calls:
        items.append(_call_item(call, wire))
    return items


def _call_item(call: ToolCall, wire: WireRequest) -> dict[str, Any]:
    if call.name in wire.custom_tools:
        return {
            "id": f"ctc_{uuid.uuid4().hex[:24]}",
            "type": "custom_tool_call",
            "status": "completed",
            "call_id": call.id,
            "name": call.name,
            "input": str(call.arguments.get(CUSTOM_INPUT, "")),
        }
    item: dict[str, Any] = {
        "id": f"fc_{uuid.uuid4().hex[:24]}",
        "type": "function_call",
        "status": "completed",
        "call_id": call.id,
        "name": call.name,
        "arguments": json.dumps(call.arguments),
    }
    for namespace in sorted(wire.namespaces, key=len, reverse=True):
        if call.name.startswith(f"{namespace}__"):
            item["name"] = call.name.removeprefix(f"{namespace}__")
            item["namespace"] = namespace
            break
    return item


def usage_body(response: Response) -> dict[str, Any]:
    """The Responses ``usage`` object: ``input_tokens`` includes cache reads and writes."""
    u = response.usage
    total_input = u.uncached_input + u.cached_input + u.cache_write
    return {
        "input_tokens": total_input,
        "input_tokens_details": {
            "cached_tokens": u.cached_input,
            "cache_write_tokens": u.cache_write,
        },
        "output_tokens": u.output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": total_input + u.output,
    }


def response_body(response: Response, wire: WireRequest) -> dict[str, Any]:
    """The complete ``response`` object of an answer (``status`` ``incomplete`` when the
    model stopped at its output limit)."""
    cut = response.stop_reason in ("max_tokens", "context_window")
    return {
        "id": f"resp_{uuid.uuid4().hex[:24]}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "incomplete" if cut else "completed",
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "instructions": None,
        "model": wire.model,
        "output": output_items(response, wire),
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "metadata": {},
        "temperature": None,
        "top_p": None,
        "usage": usage_body(response),
    }
