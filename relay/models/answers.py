"""What relay reads of a provider's answer, checked before it is used (SPEC §7.6; issue 13).

The SDKs build their answer objects without validation, so a proxy, an OpenAI-compatible server
or a provider's bug can hand relay ``content: 12345``, no choice at all or a token count that is
text. The decoded JSON body is checked here against the few fields relay reads (pydantic models:
:class:`OpenAIAnswer`, :class:`AnthropicAnswer`; every other field is ignored). An answer that
does not fit is a transient :class:`relay.errors.ModelError` (kind ``server``) naming the field,
the problem and the value: the loop retries it and, when it keeps coming, ends the goal
``failed`` with that message.

What is readable but unusual is taken: an answer without usage is estimated (characters / 4,
``estimated``), tool-call arguments that are not a JSON object reach the tool check (the model is
told), and a tool call without an id gets one.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Annotated, Any, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    NonNegativeInt,
    StrictStr,
    Tag,
    ValidationError,
)

from relay.errors import ModelError
from relay.models.base import Request, ToolCall, Usage, estimate_tokens
from relay.tools.specs import INVALID_JSON


class _Part(BaseModel):
    model_config = ConfigDict(extra="ignore")


# Chat Completions ------------------------------------------------------------------------------


class OpenAIFunction(_Part):
    name: StrictStr = Field(min_length=1)
    arguments: Any = None
    """Any JSON: text that is not a JSON object is the model's mistake, told to it."""


class OpenAIToolCall(_Part):
    id: Any = None
    type: StrictStr = "function"
    function: OpenAIFunction


class OpenAITextPart(_Part):
    type: StrictStr
    text: StrictStr | None = None


class OpenAIMessage(_Part):
    content: StrictStr | list[OpenAITextPart] | None = None
    tool_calls: list[OpenAIToolCall] | None = None


class OpenAIChoice(_Part):
    message: OpenAIMessage
    finish_reason: StrictStr | None = None


class OpenAITokenDetails(_Part):
    cached_tokens: NonNegativeInt | None = None
    cache_write_tokens: NonNegativeInt | None = None


class OpenAIUsage(_Part):
    prompt_tokens: NonNegativeInt | None = None
    completion_tokens: NonNegativeInt | None = None
    prompt_tokens_details: OpenAITokenDetails | None = None


class OpenAIAnswer(_Part):
    """The fields of a Chat Completions answer relay reads."""

    choices: list[OpenAIChoice] = Field(min_length=1)
    usage: OpenAIUsage | None = None


# Messages API ---------------------------------------------------------------------------------


class AnthropicText(_Part):
    type: StrictStr
    text: StrictStr


class AnthropicToolUse(_Part):
    type: StrictStr
    id: Any = None
    name: StrictStr = Field(min_length=1)
    input: Any = None


class AnthropicOther(_Part):
    """A block relay does not use (thinking, server tools, ...): only its type is needed."""

    type: StrictStr


def _block_kind(value: Any) -> str | None:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    if not isinstance(kind, str):
        return None
    return kind if kind in ("text", "tool_use") else "other"


AnthropicBlock = Annotated[
    Annotated[AnthropicText, Tag("text")]
    | Annotated[AnthropicToolUse, Tag("tool_use")]
    | Annotated[AnthropicOther, Tag("other")],
    Discriminator(
        _block_kind,
        custom_error_type="block_type",
        custom_error_message="a content block needs a text type",
    ),
]


class AnthropicUsage(_Part):
    input_tokens: NonNegativeInt | None = None
    output_tokens: NonNegativeInt | None = None
    cache_creation_input_tokens: NonNegativeInt | None = None
    cache_read_input_tokens: NonNegativeInt | None = None


class AnthropicAnswer(_Part):
    """The fields of a Messages API answer relay reads."""

    content: list[AnthropicBlock]
    stop_reason: StrictStr | None = None
    usage: AnthropicUsage | None = None


# reading ---------------------------------------------------------------------------------------

AnswerT = TypeVar("AnswerT", bound=BaseModel)


def unreadable(api: str, problem: str) -> ModelError:
    """The transient error of an answer relay cannot read (``api``: who sent it)."""
    return ModelError("server", f"{api} sent an answer relay cannot read: {problem}")


def read_answer(schema: type[AnswerT], body: bytes, api: str) -> tuple[AnswerT, Any]:
    """The checked answer and the decoded JSON of ``body`` (an HTTP answer's bytes).

    Raises:
        ModelError: ``server`` (transient): not JSON, or a field relay reads has the wrong
            shape; the message names the field, the problem and the value.
    """
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        shown = body[:80].decode("utf-8", "replace")
        raise unreadable(api, f"not JSON ({exc}): {shown!r}") from None
    try:
        return schema.model_validate(data), data
    except ValidationError as exc:
        raise unreadable(api, describe(exc)) from None


def describe(exc: ValidationError) -> str:
    """The first problem of ``exc`` in words: ``choices.0.message.content: Input should be a
    valid string (got 12345)``; the union members pydantic tried are left out of the path."""
    first = exc.errors(include_url=False)[0]
    path = ".".join(str(p) for p in first["loc"] if _answer_field(p)) or "the answer"
    value = repr(first.get("input"))
    if len(value) > 80:
        value = value[:79] + "…"
    said = re.sub(r" or instance of \w+", "", first["msg"])
    return f"{path}: {said} (got {value})"


def _answer_field(part: int | str) -> bool:
    """Whether a pydantic location part is a field or an index (not a union member's tag)."""
    return isinstance(part, int) or (part.isidentifier() and part not in {"str", "list"})


def tool_call_id(value: Any) -> str:
    """The provider's tool-call id, or a fresh one when it sent none (or not text)."""
    return value if isinstance(value, str) and value else f"call_{uuid.uuid4().hex[:16]}"


def tool_arguments(value: Any) -> dict[str, Any]:
    """Decoded tool-call arguments: an object as it is, JSON text decoded; anything else
    becomes an argument the tool check rejects with a message naming the problem (the model
    sees it, SPEC §5)."""
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value or "{}")
        except json.JSONDecodeError as exc:
            return {INVALID_JSON: f"the arguments are not valid JSON ({exc.msg}): {value!r}"[:500]}
    if isinstance(value, dict):
        return value
    return {INVALID_JSON: f"the arguments are not a JSON object: {value!r}"[:500]}


def estimated_usage(request: Request, text: str, calls: tuple[ToolCall, ...]) -> Usage:
    """The usage of an answer that reported none: characters / 4 (``estimated``)."""
    call_chars = len(json.dumps([c.to_dict() for c in calls])) if calls else 0
    return Usage(
        uncached_input=estimate_tokens(request.char_count()),
        output=estimate_tokens(len(text) + call_chars),
        estimated=True,
    )
