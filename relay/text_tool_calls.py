"""Tool calls written as text (issue 14): find, in an answer's text, a tool call for one of the
tools the step offered. Pure functions, no I/O.

A model served without a tool-call parser (llama.cpp without ``--jinja``, vLLM without
``--tool-call-parser``, a chat template without tools) answers with text that holds the call
instead of a real tool call. The shapes recognised, as the common templates and servers'
parsers write them:

* JSON objects: ``{"name": N, "arguments": {...}}`` (``arguments`` may also be a JSON string),
  ``{"name": N, "parameters": {...}}`` (Llama 3), ``{"function": N, "parameters": {...}}``,
  ``{"tool_name": N, "parameters": {...}}`` (Cohere), ``{"type": "function", "function":
  {"name": N, "arguments": ...}}`` and ``{"tool_calls": [...]}`` (OpenAI's wire shape), or a
  list of such objects;
* bare in the text, or in a fenced block (````` ```json `````, ````` ``` `````, ````` ```tool_call `````);
* inside tags: ``<tool_call>…</tool_call>`` (Hermes, Qwen; also unclosed at the end),
  ``<function=N>{...}</function>`` (Llama 3.1's custom format), ``<function=N><parameter=K>V
  </parameter></function>`` (Qwen3-Coder), ``[TOOL_CALLS][...]`` (Mistral) and
  ``<|python_tag|>{...}`` (Llama 3).

What is not a call: a tool's name mentioned in prose, JSON whose name is not an offered tool,
JSON with other keys than a call's (an object in a config file, a ``package.json``), a bare or
fenced object without an arguments key, and anything in a fenced block of another language
(Python, shell, YAML: code that merely contains such a dictionary). Outside tags, the arguments
key is required; inside a tag, which already says "this is a call", ``{"name": N}`` alone is a
call without arguments.

Pythonic calls (``[shell(command="ls")]``) are not recognised: too much ordinary code looks the
same. :func:`find_text_tool_calls` never raises, whatever the text (property-tested).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from relay.models.base import ToolSpec

__all__ = ["MAX_CALLS", "MAX_TEXT_CHARS", "TextToolCall", "find_text_tool_calls"]

MAX_TEXT_CHARS = 200_000
"""Characters of an answer examined; the rest is ignored (bounds the work on any text)."""

MAX_CALLS = 20
"""Most calls taken from one answer."""

MAX_DECODES = 400
"""Most places a bare JSON value is tried at, in one answer (bounds the work on any text)."""

NAME_KEYS = ("name", "function", "tool_name", "tool")
ARGUMENT_KEYS = ("arguments", "parameters", "args", "input")
OTHER_KEYS = frozenset({"type", "id", "call_id"})
"""Keys a call object may carry besides one name key and one arguments key."""

_FENCE = re.compile(r"```[ \t]*([\w.+-]*)[^\n]*\n(.*?)```", re.DOTALL)
_FENCE_LANGUAGES = frozenset({"", "json", "jsonc", "json5", "tool_call", "tool_code", "tool"})
_TOOL_CALL_TAG = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
_FUNCTION_TAG = re.compile(r"<function=([\w.-]+)>(.*?)(?:</function>|\Z)", re.DOTALL)
_PARAMETER_TAG = re.compile(
    r"<parameter=([\w.-]+)>(.*?)(?:</parameter>|(?=<parameter=)|\Z)", re.DOTALL
)
_PREFIXES = re.compile(r"\[TOOL_CALLS\]|<\|python_tag\|>")
_JSON_START = re.compile(r"[\[{]\s*[\"{\[]")
_SCHEMA_TYPES = frozenset({"integer", "number", "boolean", "array", "object"})


@dataclass(frozen=True)
class TextToolCall:
    """A tool call found in an answer's text.

    ``name`` is one of the offered tools; ``arguments`` its decoded JSON object (``{}`` when the
    call named none); ``shape`` says how it was written (``<tool_call> tag``, ``fenced JSON``,
    ``JSON``, ``<function=…> tag``, ``[TOOL_CALLS]``, ``<|python_tag|>``) for the event and the
    message to the model.
    """

    name: str
    arguments: dict[str, Any]
    shape: str


def find_text_tool_calls(text: object, tools: Sequence[ToolSpec]) -> tuple[TextToolCall, ...]:
    """The tool calls for one of ``tools`` written in ``text``, in their order in the text.

    Args:
        text: the answer's text (anything else, e.g. None, holds no call).
        tools: the tools offered in the step (only calls naming one of them count).

    Returns:
        At most :data:`MAX_CALLS` calls; empty when the text holds none. Never raises.
    """
    if not isinstance(text, str) or not tools:
        return ()
    text = text[:MAX_TEXT_CHARS]
    specs = {t.name: t for t in tools}
    if not any(name in text for name in specs):
        return ()  # the common case: no offered tool is even named
    found: list[tuple[int, TextToolCall]] = []
    rest = _tagged(text, specs, found)
    rest = _fenced(rest, specs, found)
    found += [(at, call) for at, call in _bare(rest, specs, "JSON", tagged=False)]
    found.sort(key=lambda item: item[0])
    return tuple(call for _, call in found[:MAX_CALLS])


def _blank(text: str, start: int, end: int) -> str:
    """``text`` with ``[start, end)`` replaced by spaces (positions kept)."""
    return text[:start] + " " * (end - start) + text[end:]


def _tagged(text: str, specs: dict[str, ToolSpec], found: list[tuple[int, TextToolCall]]) -> str:
    """Calls inside ``<tool_call>``, ``<function=…>`` and after ``[TOOL_CALLS]`` or
    ``<|python_tag|>`` go to ``found``; returns ``text`` with those spans blanked."""
    for match in list(_TOOL_CALL_TAG.finditer(text)):
        body = match.group(1)
        calls = _function_tags(body, specs) or [
            c for _, c in _bare(_unfenced(body), specs, "<tool_call> tag", tagged=True)
        ]
        found += [(match.start(), c) for c in calls]
        text = _blank(text, match.start(), match.end())
    for match in list(_FUNCTION_TAG.finditer(text)):
        found += [(match.start(), c) for c in _function_tags(match.group(0), specs)]
        text = _blank(text, match.start(), match.end())
    for match in list(_PREFIXES.finditer(text)):
        shape = match.group(0).replace("<|", "<").replace("|>", ">")
        end = _decoded_end(text, match.end())
        if end is None:
            continue
        segment = text[match.end() : end]
        found += [(match.start(), c) for _, c in _bare(segment, specs, shape, tagged=True)]
        text = _blank(text, match.start(), end)
    return text


def _decoded_end(text: str, start: int) -> int | None:
    """The end of the JSON value that starts (after blanks) at ``start``; None if none."""
    at = len(text) - len(text[start:].lstrip())
    try:
        _, end = json.JSONDecoder().raw_decode(text, at)
    except (ValueError, RecursionError):
        return None
    return end


def _function_tags(body: str, specs: dict[str, ToolSpec]) -> list[TextToolCall]:
    """``<function=N>`` calls in ``body``: a JSON object, or ``<parameter=K>V</parameter>``
    pairs whose values are typed by the tool's schema."""
    calls = []
    for match in _FUNCTION_TAG.finditer(body):
        spec = specs.get(match.group(1))
        if spec is None:
            continue
        inner = match.group(2)
        params = list(_PARAMETER_TAG.finditer(inner))
        if params:
            args = {p.group(1): _typed(spec, p.group(1), p.group(2)) for p in params}
        else:
            value = _loads(_unfenced(inner).strip() or "{}")
            if not isinstance(value, dict):
                continue
            args = value
        calls.append(TextToolCall(spec.name, args, "<function=…> tag"))
    return calls


def _typed(spec: ToolSpec, key: str, raw: str) -> Any:
    """A ``<parameter=…>`` value: the text without the newlines around it, decoded from JSON
    when the schema gives the property a non-string type."""
    value = raw[1:] if raw.startswith("\n") else raw
    value = value[:-1] if value.endswith("\n") else value
    props = spec.parameters.get("properties") if isinstance(spec.parameters, dict) else None
    prop = props.get(key) if isinstance(props, dict) else None
    kind = prop.get("type") if isinstance(prop, dict) else None
    if kind in _SCHEMA_TYPES:
        decoded = _loads(value.strip())
        return value if decoded is _INVALID else decoded
    return value


def _unfenced(body: str) -> str:
    """``body`` without a fence around it (a tag's content may be fenced too)."""
    match = _FENCE.search(body)
    return match.group(2) if match and not body[: match.start()].strip() else body


def _fenced(text: str, specs: dict[str, ToolSpec], found: list[tuple[int, TextToolCall]]) -> str:
    """Calls in fenced blocks of JSON (or of no language) go to ``found``; every fenced block
    is blanked, so that code of other languages is never read as a call."""
    for match in list(_FENCE.finditer(text)):
        if match.group(1).lower() in _FENCE_LANGUAGES:
            body_at = match.start(2)
            for at, call in _bare(match.group(2), specs, "fenced JSON", tagged=False):
                found.append((body_at + at, call))
        text = _blank(text, match.start(), match.end())
    return text


def _bare(
    text: str, specs: dict[str, ToolSpec], shape: str, *, tagged: bool
) -> Iterator[tuple[int, TextToolCall]]:
    """Calls in the JSON values that start in ``text`` (position, call); a value that is not
    a call is skipped whole."""
    decoder = json.JSONDecoder()
    pos, tries = 0, 0
    while tries < MAX_DECODES:
        match = _JSON_START.search(text, pos)
        if match is None:
            return
        tries += 1
        try:
            value, end = decoder.raw_decode(text, match.start())
        except (ValueError, RecursionError):
            pos = match.start() + 1
            continue
        for call in _calls(value, specs, shape, tagged=tagged):
            yield match.start(), call
        pos = end


def _calls(
    value: Any, specs: dict[str, ToolSpec], shape: str, *, tagged: bool
) -> list[TextToolCall]:
    """The calls a decoded JSON value holds: one call object, ``{"tool_calls": [...]}``, or a
    list whose every item is a call (a list with anything else holds none)."""
    if isinstance(value, dict) and set(value) == {"tool_calls"}:
        value = value["tool_calls"]
    if isinstance(value, list):
        calls = [_call(item, specs, shape, tagged=tagged) for item in value]
        if not value or any(c is None for c in calls):
            return []
        return [c for c in calls if c is not None]
    call = _call(value, specs, shape, tagged=tagged)
    return [call] if call is not None else []


def _call(
    value: Any, specs: dict[str, ToolSpec], shape: str, *, tagged: bool
) -> TextToolCall | None:
    """The call one JSON object is, or None (see the module's rules)."""
    if not isinstance(value, dict):
        return None
    inner = value.get("function")
    if isinstance(inner, dict) and set(value) <= {"function", *OTHER_KEYS}:
        value = inner  # {"type": "function", "function": {"name": …, "arguments": …}}
    names = [k for k in NAME_KEYS if k in value]
    arg_keys = [k for k in ARGUMENT_KEYS if k in value]
    if len(names) != 1 or len(arg_keys) > 1 or not set(value) <= {*names, *arg_keys, *OTHER_KEYS}:
        return None
    name = value[names[0]]
    if not isinstance(name, str) or name not in specs:
        return None
    if not arg_keys:
        return TextToolCall(name, {}, shape) if tagged else None
    args = value[arg_keys[0]]
    if isinstance(args, str):
        args = _loads(args)
    if args is None and tagged:
        args = {}
    if not isinstance(args, dict):
        return None
    return TextToolCall(name, args, shape)


_INVALID = object()


def _loads(text: str) -> Any:
    """``text`` decoded from JSON, or :data:`_INVALID`."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _INVALID
