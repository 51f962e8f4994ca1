"""Classifying provider errors from their structured fields only (SPEC §7.6).

Never from model text or tool output: the HTTP status, the error ``type`` and ``code`` the
provider put in its error body, and the ``Retry-After`` headers decide. Quota and spend caps
are fatal (retrying them is the worst bug an unattended loop can have); rate limits, overloads,
5xx, timeouts and connection errors are transient.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from typing import Any

QUOTA_CODES = frozenset(
    {
        # OpenAI (error.type / error.code)
        "insufficient_quota",
        "credit_balance_exhausted",
        "organization_spend_limit_exceeded",
        "project_spend_limit_exceeded",
        "organization_usage_limit_exceeded",
        "billing_hard_limit_reached",
        # Anthropic (error.details.error_code, error.type)
        "billing_error",
        "enforced_spend_limit_reached",
        "contract_spend_limit_reached",
        "linked_organization_spend_limit_reached",
        "organization_on_hold",
    }
)
"""Error types/codes that mean the account cannot pay for more calls: fatal, never retried."""


def field_text(value: Any) -> str | None:
    """An error body's ``type`` or ``code`` as text: servers send numbers too (llama.cpp's
    ``{"error": {"code": 500, ...}}``); None, empty text and containers are None."""
    if value is None or isinstance(value, dict | list) or value == "":
        return None
    return str(value)


def classify(status: int | None, error_type: str | None, code: str | None) -> str:
    """The error kind of SPEC §7.6 for an HTTP error.

    Args:
        status: the HTTP status, or None when no response came.
        error_type: the provider's ``error.type`` (e.g. ``rate_limit_error``).
        code: the provider's error code (OpenAI ``error.code``; Anthropic
            ``error.details.error_code``). Either is ignored when it is not text (a server's
            error body can hold any JSON value).

    Returns:
        ``insufficient_quota``, ``auth``, ``permission``, ``not_found``, ``bad_request``
        (fatal) or ``rate_limit``, ``overloaded``, ``server``, ``timeout``, ``connection``.
    """
    # both come from the provider's error body, which can hold any JSON value there
    error_type = error_type if isinstance(error_type, str) else None
    code = code if isinstance(code, str) else None
    if (
        error_type in QUOTA_CODES
        or code in QUOTA_CODES
        or (code or "").endswith("spend_limit_reached")
    ):
        return "insufficient_quota"
    if status is None:
        return "connection"
    if status == 401:
        return "auth"
    if status == 402:
        return "insufficient_quota"
    if status == 403:
        return "permission"
    if status == 404:
        return "not_found"
    if status == 429:
        return "rate_limit"
    if status in (408, 504):
        return "timeout"
    if status in (503, 529) or error_type == "overloaded_error":
        return "overloaded"
    if status >= 500:
        return "server"
    return "bad_request"


def retry_after_s(headers: Mapping[str, str] | None) -> float | None:
    """Seconds the provider asks to wait: ``retry-after-ms``, else ``retry-after`` (seconds or
    an HTTP date); None when neither is present or readable."""
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    ms = lowered.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


FORCED_CHOICE_STATUSES = frozenset({400, 422, 500})
"""HTTP statuses with which servers refuse a forced ``tool_choice``: 400 (OpenAI, Anthropic,
vLLM), 422 (servers validating the request with a schema), 500 (llama-cpp-python's
``chatml-function-calling``, which fails on it)."""


def rejects_forced_choice(status: int | None, error: Mapping[str, Any]) -> bool:
    """Whether an error answer to a request that forced tool use refuses the forcing (SPEC
    §7.5), so that relay turns forcing off instead of retrying (a 500) or failing (a 400).

    Decided by the status (one of :data:`FORCED_CHOICE_STATUSES`), then the structured fields
    of the error (``param``, ``code``, ``type``: OpenAI and vLLM name the refused parameter
    in ``param``), and only then its ``message``. ``error`` is the error object of the body
    (OpenAI's ``error``, Anthropic's ``error``, or the whole body of a server that does not
    nest it); anything else in it is not read.
    """
    if status not in FORCED_CHOICE_STATUSES:
        return False
    for field in ("param", "code", "type"):
        value = error.get(field)
        if isinstance(value, str) and "tool_choice" in value.lower():
            return True
    message = error.get("message") or error.get("detail") or error.get("error")
    if not isinstance(message, str):
        return False
    text = message.lower()
    return "tool_choice" in text or "tool choice" in text or "forces tool use" in text


REDACTED_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "cookie", "set-cookie"})


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Headers with credentials replaced by ``[redacted]`` (for ``--debug`` transcripts)."""
    return {
        k: "[redacted]" if k.lower() in REDACTED_HEADERS or "key" in k.lower() else v
        for k, v in headers.items()
    }


def wire_exchange(raw: Any, body: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    """The raw exchange of one call for ``--debug`` transcripts: URL, redacted headers and
    bodies. ``raw`` is an SDK raw response (``with_raw_response``): it has ``http_request``,
    ``status_code`` and ``headers``."""
    return {
        "request": {
            "url": str(raw.http_request.url),
            "headers": redact_headers(dict(raw.http_request.headers)),
            "body": body,
        },
        "response": {
            "status": raw.status_code,
            "headers": redact_headers(dict(raw.headers)),
            "body": answer,
        },
    }
