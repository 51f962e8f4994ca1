"""The retry decision after a failed model call (SPEC §7.5–§7.6).

Pure: the error, the attempt number and a random source go in, a wait or a stop comes out. The
model-call path (:mod:`relay.model_call`) sleeps or ends the goal accordingly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from relay.errors import ModelError
from relay.goal import GoalStatus
from relay.supervisor import Stop

BACKOFF_CAP_S = 60.0
"""The longest wait relay chooses itself between two attempts, in seconds."""


@dataclass(frozen=True)
class RetryPolicy:
    """``retries``: transient failures in a row that are retried (``limits.api_retries``);
    ``backoff_s``: the first wait in seconds (``limits.api_backoff_s``), doubled per attempt;
    ``max_wait_s``: the longest ``Retry-After`` relay waits for (``limits.api_max_wait_s``)."""

    retries: int = 5
    backoff_s: float = 1.0
    max_wait_s: float = 120.0

    @classmethod
    def from_limits(cls, limits: Any) -> RetryPolicy:
        """Build from a :class:`relay.config.Limits` (or any object with the same attributes)."""
        return cls(limits.api_retries, limits.api_backoff_s, limits.api_max_wait_s)


def retry_wait(
    error: ModelError, attempt: int, rng: random.Random, policy: RetryPolicy
) -> float | Stop:
    """What to do after failed model call number ``attempt`` (1-based, in a row).

    Returns:
        Seconds to wait before the next attempt: the provider's ``Retry-After`` when given,
        else ``backoff_s * 2**(attempt-1)`` times a random factor in [0.5, 1), capped at
        :data:`BACKOFF_CAP_S`. Or the stop that ends the goal: a fatal error (``failed`` with
        the error's kind as reason, ``quota`` for ``insufficient_quota``), a ``Retry-After``
        longer than ``max_wait_s`` (``rate_limited``), or more than ``retries`` transient
        failures in a row (``api_unavailable``).
    """
    if not error.transient:
        return failed_stop(error)
    if error.retry_after_s is not None and error.retry_after_s > policy.max_wait_s:
        return Stop(
            GoalStatus.FAILED,
            "rate_limited",
            f"The provider asks to wait {error.retry_after_s:.0f} s (more than "
            f"api_max_wait_s = {policy.max_wait_s:.0f} s): {error.message}. "
            "Resume later with `relay resume`.",
        )
    if attempt > policy.retries:
        return Stop(
            GoalStatus.FAILED,
            "api_unavailable",
            f"The model API failed {attempt} times in a row ({error.kind}: "
            f"{error.message}). Resume later with `relay resume`.",
        )
    if error.retry_after_s is not None:
        return error.retry_after_s
    base = policy.backoff_s * 2 ** (attempt - 1)
    return min(BACKOFF_CAP_S, base * (0.5 + rng.random() / 2))


def failed_stop(error: ModelError) -> Stop:
    """The ``failed`` stop of a model error that is not retried (SPEC §7.6)."""
    reason = "quota" if error.kind == "insufficient_quota" else error.kind
    return Stop(GoalStatus.FAILED, reason, f"Model call failed ({error.kind}): {error.message}")
