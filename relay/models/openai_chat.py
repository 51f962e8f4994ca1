"""``openai:<model>`` on Chat Completions (SPEC §12), with the official ``openai`` SDK; also any
OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio) through ``base_url``.

The SDK client is built with ``max_retries=0``: relay's loop owns every retry (SPEC §7.6).
Forced tool choice is ``tool_choice: "required"`` (SPEC §7.5); the output cap
(``max_output_tokens``) goes in the field the endpoint reads (:func:`output_cap_field`), and the
client's timeouts are ``request_timeout_s`` and ``connect_timeout_s``. Usage maps
``prompt_tokens_details.cached_tokens`` to cache reads; ``prompt_tokens`` includes them.
"""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import urlsplit

import openai

from relay.errors import ConfigError, ForcedToolChoiceRejected, ModelError
from relay.models.answers import (
    OpenAIAnswer,
    OpenAIMessage,
    OpenAIUsage,
    estimated_usage,
    read_answer,
    tool_arguments,
    tool_call_id,
)
from relay.models.base import Message, ModelSettings, Request, Response, ToolCall, Usage
from relay.models.http_errors import (
    classify,
    field_text,
    rejects_forced_choice,
    retry_after_s,
    wire_exchange,
)
from relay.secrets import provider_key

FINISH_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}
"""Chat Completions ``finish_reason`` → relay's provider-neutral stop reason."""

LOCAL_SERVER_KEY = "not-needed"
"""The key sent to an OpenAI-compatible server when ``OPENAI_API_KEY`` is unset (the SDK needs
a non-empty one; local servers ignore it)."""


def _wire_messages(system: str, messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for m in messages:
        if m.role == "assistant":
            turn: dict[str, Any] = {"role": "assistant", "content": m.content or None}
            if m.tool_calls:
                turn["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                    }
                    for c in m.tool_calls
                ]
            elif not m.content:
                turn["content"] = "(no answer)"
            out.append(turn)
        elif m.role == "tool":  # Chat Completions has no error flag: say it in the content
            content = f"ERROR: {m.content}" if m.is_error else m.content
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": content})
        else:
            out.append({"role": "user", "content": m.content})
    return out


class OpenAIChatModel:
    """A model behind the Chat Completions API.

    Args:
        model_id: e.g. ``gpt-5`` (for local servers: whatever they serve).
        base_url: the API base URL, including ``/v1`` (e.g. ``http://localhost:11434/v1``);
            None for ``settings.base_url`` (else ``OPENAI_BASE_URL``, else OpenAI's).
        settings: output cap and timeouts (:class:`ModelSettings`; default: the defaults).
        debug: keep the raw wire request and response of the last call in :attr:`last_wire`.

    Raises:
        ConfigError: no ``OPENAI_API_KEY`` for OpenAI's own endpoint.
    """

    def __init__(
        self,
        model_id: str,
        *,
        base_url: str | None = None,
        settings: ModelSettings | None = None,
        debug: bool = False,
    ) -> None:
        self.name = f"openai:{model_id}"
        self.model_id = model_id
        self.debug = debug
        self.last_wire: dict[str, Any] | None = None
        self.settings = settings or ModelSettings()
        key = provider_key("OPENAI_API_KEY")
        base = base_url or self.settings.base_url or os.environ.get("OPENAI_BASE_URL")
        if not key:
            if not base:
                raise ConfigError(
                    f"model {self.name} needs an API key: set OPENAI_API_KEY in the environment "
                    "(or give --base-url for a local OpenAI-compatible server)"
                )
            key = LOCAL_SERVER_KEY
        self.cap_field = output_cap_field(base)
        self.timeout = openai.Timeout(
            self.settings.request_timeout_s, connect=self.settings.connect_timeout_s
        )
        self._client = openai.OpenAI(
            api_key=key, base_url=base, max_retries=0, timeout=self.timeout
        )
        self.api_base = str(self._client.base_url)
        """The API's base URL the calls go to (checked at start: :mod:`relay.provider_url`)."""

    def params(self, request: Request) -> dict[str, Any]:
        """The Chat Completions request body for ``request`` (what goes on the wire)."""
        params: dict[str, Any] = {
            "model": self.model_id,
            "messages": _wire_messages(request.system, request.messages),
            self.cap_field: self.settings.max_output_tokens,
        }
        if request.tools and request.tool_choice != "none":
            params["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in request.tools
            ]
            params["tool_choice"] = request.tool_choice
        return params

    def complete(self, request: Request) -> Response:
        """Send one request; return the neutral response or raise a classified ``ModelError``
        (an answer relay cannot read is a transient one, :mod:`relay.models.answers`)."""
        params = self.params(request)
        try:
            raw = self._client.chat.completions.with_raw_response.create(
                **params, timeout=self.timeout
            )
            body = raw.http_response.read()
        except openai.APIStatusError as exc:
            raise self._error(exc, request) from None
        except openai.APITimeoutError as exc:
            raise ModelError("timeout", f"the API did not answer in time: {exc}") from None
        except openai.APIConnectionError as exc:
            raise ModelError("connection", f"cannot reach the API: {exc}") from None
        answer, data = read_answer(OpenAIAnswer, body, "the API")
        response = _response(answer, request)
        if self.debug:
            self.last_wire = wire_exchange(raw, params, data)
        return response

    def _error(self, exc: openai.APIStatusError, request: Request) -> ModelError:
        """The classified error of an error answer; a refusal of forced tool use (by status and
        error fields, :func:`rejects_forced_choice`) is :class:`ForcedToolChoiceRejected`."""
        # the SDK puts the body's ``error`` object (or the whole body) in ``exc.body``
        body = exc.body if isinstance(exc.body, dict) else {}
        if isinstance(exc.body, str):
            body = {"message": exc.body}
        error_type = field_text(body.get("type") or getattr(exc, "type", None))
        code = field_text(body.get("code") or getattr(exc, "code", None))
        message = body.get("message") or str(exc)
        if request.tool_choice == "required" and rejects_forced_choice(exc.status_code, body):
            return ForcedToolChoiceRejected(f"API error {exc.status_code}: {message}")
        kind = classify(exc.status_code, error_type, code)
        headers = dict(exc.response.headers) if exc.response is not None else {}
        return ModelError(
            kind,
            f"API error {exc.status_code} ({error_type}" + (f", {code}" if code else "") + f"): "
            f"{message}",
            retry_after_s=retry_after_s(headers),
            code=code or error_type,
        )


def output_cap_field(base_url: str | None) -> str:
    """The request field of the output cap: ``max_completion_tokens`` on OpenAI's own API
    (its newer models refuse ``max_tokens``), ``max_tokens`` on any other base URL: Ollama
    and LM Studio read only ``max_tokens``, llama.cpp's server read only it before 2026 and
    vLLM reads both (docs/models.md)."""
    if base_url is None:
        return "max_completion_tokens"
    host = urlsplit(base_url).hostname or ""
    return "max_completion_tokens" if host == "api.openai.com" else "max_tokens"


def _response(answer: OpenAIAnswer, request: Request) -> Response:
    """The neutral response of a checked Chat Completions answer (its first choice)."""
    choice = answer.choices[0]
    text = _text(choice.message)
    calls = tuple(
        ToolCall(tool_call_id(c.id), c.function.name, tool_arguments(c.function.arguments))
        for c in (choice.message.tool_calls or [])
        if c.type == "function"
    )
    usage = _usage(answer.usage) or estimated_usage(request, text, calls)
    stop = FINISH_REASONS.get(choice.finish_reason or "stop", str(choice.finish_reason))
    return Response(text=text, tool_calls=calls, usage=usage, stop_reason=stop)


def _text(message: OpenAIMessage) -> str:
    """The message's text: a string, or the text parts some servers send, joined."""
    if isinstance(message.content, list):
        return "".join(p.text or "" for p in message.content if p.type == "text")
    return message.content or ""


def _usage(u: OpenAIUsage | None) -> Usage | None:
    """The reported usage (``prompt_tokens`` includes cache reads and writes); None when the
    answer reported none."""
    if u is None or (u.prompt_tokens is None and u.completion_tokens is None):
        return None
    details = u.prompt_tokens_details
    cached = (details.cached_tokens or 0) if details else 0
    written = (details.cache_write_tokens or 0) if details else 0
    return Usage(
        uncached_input=max(0, (u.prompt_tokens or 0) - cached - written),
        cache_write=written,
        cached_input=cached,
        output=u.completion_tokens or 0,
    )
