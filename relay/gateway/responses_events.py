"""The server-sent events of a streamed Responses API answer (SPEC §15). Pure.

The sequence is the real API's: ``response.created``, ``response.in_progress``; per output
item ``response.output_item.added``, its deltas (``response.content_part.added`` /
``response.output_text.delta`` / ``response.output_text.done`` / ``response.content_part.done``
for a message, ``response.function_call_arguments.delta`` / ``.done`` for a function call,
``response.custom_tool_call_input.delta`` / ``.done`` for a freeform call) and
``response.output_item.done``; then ``response.completed`` (or ``response.incomplete``) with
the whole response and its usage. Every event carries a ``sequence_number`` from 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from relay.gateway.wire import WireRequest
    from relay.models.base import Response

_CHUNK = 256
"""Characters per delta event of tool-call arguments."""


def response_events(response: Response, wire: WireRequest) -> list[tuple[str, dict[str, Any]]]:
    """The events of a streamed answer as ``(event type, data)`` pairs, in order."""
    from relay.gateway.responses_wire import response_body

    final = response_body(response, wire)
    opened = {**final, "status": "in_progress", "output": [], "usage": None}
    opened["incomplete_details"] = None
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": opened},
        {"type": "response.in_progress", "response": opened},
    ]
    for index, item in enumerate(final["output"]):
        events.extend(_item_events(index, item))
    closing = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
    events.append({"type": closing, "response": final})
    return [(e["type"], {**e, "sequence_number": n}) for n, e in enumerate(events)]


def _pieces(text: str) -> list[str]:
    return [text[i : i + _CHUNK] for i in range(0, len(text), _CHUNK)] or [""]


def _item_events(index: int, item: dict[str, Any]) -> list[dict[str, Any]]:
    where = {"item_id": item["id"], "output_index": index}
    if item["type"] == "message":
        return _message_events(index, item, where)
    if item["type"] == "custom_tool_call":
        field, prefix = "input", "response.custom_tool_call_input"
    else:
        field, prefix = "arguments", "response.function_call_arguments"
    added = {**item, "status": "in_progress", field: ""}
    done: dict[str, Any] = {"type": f"{prefix}.done", **where, field: item[field]}
    if field == "arguments":
        done["name"] = item["name"]
    return [
        {"type": "response.output_item.added", "output_index": index, "item": added},
        *[{"type": f"{prefix}.delta", **where, "delta": p} for p in _pieces(item[field])],
        done,
        {"type": "response.output_item.done", "output_index": index, "item": item},
    ]


def _message_events(
    index: int, item: dict[str, Any], where: dict[str, Any]
) -> list[dict[str, Any]]:
    part = item["content"][0]
    at = {**where, "content_index": 0}
    return [
        {
            "type": "response.output_item.added",
            "output_index": index,
            "item": {**item, "status": "in_progress", "content": []},
        },
        {"type": "response.content_part.added", **at, "part": {**part, "text": ""}},
        {"type": "response.output_text.delta", **at, "delta": part["text"], "logprobs": []},
        {"type": "response.output_text.done", **at, "text": part["text"], "logprobs": []},
        {"type": "response.content_part.done", **at, "part": part},
        {"type": "response.output_item.done", "output_index": index, "item": item},
    ]
