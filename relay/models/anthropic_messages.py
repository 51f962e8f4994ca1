"""``anthropic:<model>`` on the Messages API (SPEC §12), with the official ``anthropic`` SDK.

The SDK client is built with ``max_retries=0``: relay's loop owns every retry (SPEC §7.6), so
that a spend cap is never retried and a ``Retry-After`` is capped. Prompt caching marks the
system prompt and the tool list, which every round of a goal shares, so fresh rounds re-read the
cached prefix. Forced tool choice is ``{"type": "any"}`` with thinking disabled (SPEC §7.5).
"""

from __future__ import annotations

from typing import Any

import anthropic

from relay.errors import ConfigError, ForcedToolChoiceRejected, ModelError
from relay.models.answers import (
    AnthropicAnswer,
    AnthropicText,
    AnthropicToolUse,
    AnthropicUsage,
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

STOP_REASONS = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "pause_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "refusal": "refusal",
    "model_context_window_exceeded": "context_window",
}
"""Anthropic ``stop_reason`` → relay's provider-neutral stop reason."""

KEY_VARIABLES = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")


def _blocks_for(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """Provider-neutral messages → Messages API turns. Tool results become ``tool_result``
    blocks of a user turn; consecutive user content is merged (the API alternates roles)."""
    turns: list[dict[str, Any]] = []

    def add(role: str, block: dict[str, Any]) -> None:
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].append(block)
        else:
            turns.append({"role": role, "content": [block]})

    for m in messages:
        if m.role == "assistant":
            if m.content or not m.tool_calls:  # a turn may not be empty
                add("assistant", {"type": "text", "text": m.content or "(no answer)"})
            for call in m.tool_calls:
                add(
                    "assistant",
                    {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments},
                )
        elif m.role == "tool":
            add(
                "user",
                {
                    "type": "tool_result",
                    "tool_use_id": m.tool_call_id,
                    "content": m.content or "(no output)",
                    "is_error": m.is_error,
                },
            )
        else:
            add("user", {"type": "text", "text": m.content or "(empty)"})
    return turns


class AnthropicModel:
    """A Claude model through the Messages API.

    Args:
        model_id: e.g. ``claude-sonnet-5``.
        base_url: an API base URL without ``/v1`` (proxies, local fakes); None for
            ``settings.base_url`` (else Anthropic's).
        settings: output cap (``max_tokens``) and timeouts (:class:`ModelSettings`; default:
            the defaults).
        debug: keep the raw wire request and response of the last call in :attr:`last_wire`.

    Raises:
        ConfigError: no API key in ``ANTHROPIC_API_KEY`` (or ``ANTHROPIC_AUTH_TOKEN``).
    """

    def __init__(
        self,
        model_id: str,
        *,
        base_url: str | None = None,
        settings: ModelSettings | None = None,
        debug: bool = False,
    ) -> None:
        self.name = f"anthropic:{model_id}"
        self.model_id = model_id
        self.settings = settings or ModelSettings()
        self.max_tokens = self.settings.max_output_tokens
        self.debug = debug
        self.last_wire: dict[str, Any] | None = None
        api_key = provider_key("ANTHROPIC_API_KEY")
        auth_token = None if api_key else provider_key("ANTHROPIC_AUTH_TOKEN")
        if not api_key and not auth_token:
            raise ConfigError(
                f"model {self.name} needs an API key: set ANTHROPIC_API_KEY in the environment"
            )
        # given with every call, so the SDK never swaps in its own non-streaming timeout
        self.timeout = anthropic.Timeout(
            self.settings.request_timeout_s, connect=self.settings.connect_timeout_s
        )
        self._client = anthropic.Anthropic(
            api_key=api_key,
            auth_token=auth_token,
            base_url=base_url or self.settings.base_url,
            max_retries=0,
            timeout=self.timeout,
        )
        self.api_base = str(self._client.base_url)
        """The API's base URL the calls go to (checked at start: :mod:`relay.provider_url`)."""

    def params(self, request: Request) -> dict[str, Any]:
        """The Messages API request body for ``request`` (what goes on the wire)."""
        params: dict[str, Any] = {
            "model": self.model_id,
            "max_tokens": self.max_tokens,
            "system": [
                {"type": "text", "text": request.system, "cache_control": {"type": "ephemeral"}}
            ],
            "messages": _blocks_for(request.messages),
        }
        if request.tools and request.tool_choice != "none":
            tools = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
            tools[-1]["cache_control"] = {"type": "ephemeral"}
            params["tools"] = tools
            if request.tool_choice == "required":
                params["tool_choice"] = {"type": "any"}
                params["thinking"] = {"type": "disabled"}  # thinking rejects forced tool use
            else:
                params["tool_choice"] = {"type": "auto"}
        return params

    def complete(self, request: Request) -> Response:
        """Send one request; return the neutral response or raise a classified ``ModelError``
        (an answer relay cannot read is a transient one, :mod:`relay.models.answers`)."""
        params = self.params(request)
        try:
            raw = self._client.messages.with_raw_response.create(**params, timeout=self.timeout)
            body = raw.http_response.read()
        except anthropic.APIStatusError as exc:
            raise self._error(exc, request) from None
        except anthropic.APITimeoutError as exc:
            raise ModelError(
                "timeout", f"the Anthropic API did not answer in time: {exc}"
            ) from None
        except anthropic.APIConnectionError as exc:
            raise ModelError("connection", f"cannot reach the Anthropic API: {exc}") from None
        answer, data = read_answer(AnthropicAnswer, body, "the Anthropic API")
        response = _response(answer, request)
        if self.debug:
            self.last_wire = wire_exchange(raw, params, data)
        return response

    def _error(self, exc: anthropic.APIStatusError, request: Request) -> ModelError:
        """The classified error of an error answer; a refusal of forced tool use (by status and
        error fields, :func:`rejects_forced_choice`) is :class:`ForcedToolChoiceRejected`."""
        body = exc.body if isinstance(exc.body, dict) else {}
        error = body.get("error") if isinstance(body.get("error"), dict) else body
        if isinstance(exc.body, str):
            error = {"message": exc.body}
        error_type = field_text(error.get("type") or getattr(exc, "type", None))
        details = error.get("details") if isinstance(error.get("details"), dict) else {}
        code = field_text(getattr(exc, "error_code", None) or details.get("error_code"))
        message = error.get("message") or str(exc)
        if request.tool_choice == "required" and rejects_forced_choice(exc.status_code, error):
            return ForcedToolChoiceRejected(f"Anthropic API error {exc.status_code}: {message}")
        kind = classify(exc.status_code, error_type, code)
        headers = dict(exc.response.headers) if exc.response is not None else {}
        return ModelError(
            kind,
            f"Anthropic API error {exc.status_code} ({error_type}"
            + (f", {code}" if code else "")
            + f"): {message}",
            retry_after_s=retry_after_s(headers),
            code=code or error_type,
        )


def _response(answer: AnthropicAnswer, request: Request) -> Response:
    """The neutral response of a checked Messages API answer."""
    text = "".join(b.text for b in answer.content if isinstance(b, AnthropicText))
    calls = tuple(
        ToolCall(tool_call_id(b.id), b.name, tool_arguments(b.input))
        for b in answer.content
        if isinstance(b, AnthropicToolUse)
    )
    usage = _usage(answer.usage) or estimated_usage(request, text, calls)
    stop = STOP_REASONS.get(answer.stop_reason or "end_turn", str(answer.stop_reason))
    return Response(text=text, tool_calls=calls, usage=usage, stop_reason=stop)


def _usage(u: AnthropicUsage | None) -> Usage | None:
    """The reported usage; None when the answer reported none."""
    if u is None or (u.input_tokens is None and u.output_tokens is None):
        return None
    return Usage(
        uncached_input=u.input_tokens or 0,
        cache_write=u.cache_creation_input_tokens or 0,
        cached_input=u.cache_read_input_tokens or 0,
        output=u.output_tokens or 0,
    )
