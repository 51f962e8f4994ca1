"""Error answers of relay's gateway in each wire format (SPEC §7.6, §15). Pure.

Every error the gateway gives an agent carries ``x-should-retry: false``: relay owns retries,
so a transient provider error reaches the agent only after relay's own retries are used up,
and a quota or authentication error must stop the agent after one request. The status and
error type follow the provider the agent expects, so that the agent shows the error as it
would show the provider's.
"""

from __future__ import annotations

from typing import Any

from relay.errors import ForcedToolChoiceRejected, ModelError

ANTHROPIC_ERRORS: dict[str, tuple[int, str, str | None]] = {
    "rate_limit": (429, "rate_limit_error", None),
    "overloaded": (529, "overloaded_error", None),
    "insufficient_quota": (429, "rate_limit_error", "enforced_spend_limit_reached"),
    "auth": (401, "authentication_error", None),
    "permission": (403, "permission_error", None),
    "not_found": (404, "not_found_error", None),
    "bad_request": (400, "invalid_request_error", None),
    "timeout": (504, "timeout_error", None),
    "server": (500, "api_error", None),
    "connection": (502, "api_error", None),
    "script_exhausted": (500, "api_error", "script_exhausted"),
}
"""Error kind → (status, error.type, error.details.error_code) on the Anthropic wire."""

OPENAI_ERRORS: dict[str, tuple[int, str, str | None]] = {
    "rate_limit": (429, "requests", "rate_limit_exceeded"),
    "overloaded": (503, "server_error", "overloaded"),
    "insufficient_quota": (429, "insufficient_quota", "insufficient_quota"),
    "auth": (401, "invalid_request_error", "invalid_api_key"),
    "permission": (403, "invalid_request_error", "unsupported_country_region_territory"),
    "not_found": (404, "invalid_request_error", "model_not_found"),
    "bad_request": (400, "invalid_request_error", None),
    "timeout": (504, "server_error", "timeout"),
    "server": (500, "server_error", None),
    "connection": (502, "server_error", "connection"),
    "script_exhausted": (500, "server_error", "script_exhausted"),
}
"""Error kind → (status, error.type, error.code) on the OpenAI wire."""

NO_RETRY = {"x-should-retry": "false"}
"""The header that tells the anthropic and openai SDKs (and Claude Code) not to retry."""


def error_answer(
    wire: str, kind: str, message: str, *, code: str | None = None
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """``(status, body, headers)`` of an error of ``kind`` (a :class:`ModelError` kind).

    Args:
        wire: ``messages`` (Anthropic envelope) or ``responses`` (OpenAI envelope; ``openai``
            is accepted as the same).
        kind: the error kind; an unknown kind is answered as ``server``.
        message: shown to the agent (and by the agent to its user).
        code: the error code to send instead of the table's.
    """
    table = ANTHROPIC_ERRORS if wire in ("messages", "anthropic") else OPENAI_ERRORS
    status, error_type, default_code = table.get(kind, table["server"])
    code = code or default_code
    if table is ANTHROPIC_ERRORS:
        error: dict[str, Any] = {"type": error_type, "message": message}
        if code:
            error["details"] = {"error_code": code}
        body: dict[str, Any] = {"type": "error", "error": error, "request_id": "req_relay"}
    else:
        body = {"error": {"message": message, "type": error_type, "param": None, "code": code}}
    return status, body, dict(NO_RETRY)


def model_error_answer(wire: str, exc: ModelError) -> tuple[int, dict[str, Any], dict[str, str]]:
    """The answer to a provider error relay gives up on (fatal, or retries used up): the
    status, type and code the agent's wire uses for the error's kind, the provider's message,
    and its ``Retry-After`` when it sent one."""
    if isinstance(exc, ForcedToolChoiceRejected):
        return error_answer(wire, "bad_request", exc.message, code="tool_choice_unsupported")
    headers: dict[str, str] = {}
    if exc.retry_after_s is not None:
        headers["retry-after"] = f"{exc.retry_after_s:g}"
    # the agent's wire's own code for the kind (a Codex agent served by Anthropic must see
    # ``insufficient_quota``, not ``enforced_spend_limit_reached``); relay keeps exc.code
    status, body, base = error_answer(wire, exc.kind, exc.message)
    return status, body, {**base, **headers}
