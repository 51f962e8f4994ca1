"""Error classification from structured fields only (SPEC §7.6)."""

from __future__ import annotations

import email.utils
import time

import pytest

from relay.models.http_errors import classify, redact_headers, retry_after_s


@pytest.mark.parametrize(
    ("status", "error_type", "code", "kind"),
    [
        (429, "insufficient_quota", "insufficient_quota", "insufficient_quota"),
        (429, "insufficient_quota", "credit_balance_exhausted", "insufficient_quota"),
        (429, "requests", "organization_spend_limit_exceeded", "insufficient_quota"),
        (429, "rate_limit_error", "enforced_spend_limit_reached", "insufficient_quota"),
        (429, "rate_limit_error", "contract_spend_limit_reached", "insufficient_quota"),
        (402, "billing_error", None, "insufficient_quota"),
        (429, "rate_limit_error", None, "rate_limit"),
        (429, "requests", "rate_limit_exceeded", "rate_limit"),
        (429, "rate_limit_error", "ramp_limit_exceeded", "rate_limit"),
        (529, "overloaded_error", None, "overloaded"),
        (503, "server_error", None, "overloaded"),
        (500, "api_error", None, "server"),
        (502, None, None, "server"),
        (504, "timeout_error", None, "timeout"),
        (408, None, None, "timeout"),
        (401, "authentication_error", None, "auth"),
        (403, "permission_error", None, "permission"),
        (404, "not_found_error", "model_not_found", "not_found"),
        (400, "invalid_request_error", None, "bad_request"),
        (413, "request_too_large", None, "bad_request"),
        (None, None, None, "connection"),
    ],
)
def test_classification_uses_status_type_and_code(status, error_type, code, kind) -> None:
    assert classify(status, error_type, code) == kind


def test_a_message_that_mentions_quota_is_not_a_quota_error() -> None:
    # only the structured fields count: a rate limit whose text says "usage limit" stays one
    assert classify(429, "rate_limit_error", None) == "rate_limit"


def test_retry_after_headers() -> None:
    assert retry_after_s({"Retry-After": "7"}) == 7.0
    assert retry_after_s({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= (retry_after_s({"retry-after": future}) or 0) <= 31
    assert retry_after_s({}) is None and retry_after_s({"retry-after": "soon"}) is None


def test_credentials_are_redacted() -> None:
    shown = redact_headers({"Authorization": "Bearer sk-1", "X-Api-Key": "k", "Accept": "json"})
    assert shown == {"Authorization": "[redacted]", "X-Api-Key": "[redacted]", "Accept": "json"}
