"""The retry decision after a failed model call (SPEC §7.5–§7.6), as a pure function."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from relay.errors import TRANSIENT_KINDS, ModelError
from relay.goal import GoalStatus
from relay.retry import BACKOFF_CAP_S, RetryPolicy, failed_stop, retry_wait
from relay.supervisor import Stop

SETTINGS = settings(max_examples=80, deadline=None, database=None)
FATAL = ["insufficient_quota", "auth", "permission", "not_found", "bad_request"]
policies = st.builds(
    RetryPolicy,
    retries=st.integers(0, 8),
    backoff_s=st.floats(0.001, 30),
    max_wait_s=st.floats(1, 600),
)


@SETTINGS
@given(kind=st.sampled_from(FATAL), attempt=st.integers(1, 20), policy=policies)
def test_a_fatal_error_stops_at_once_whatever_the_attempt(
    kind: str, attempt: int, policy: RetryPolicy
) -> None:
    stop = retry_wait(ModelError(kind, "no"), attempt, random.Random(0), policy)
    assert stop == failed_stop(ModelError(kind, "no"))
    assert isinstance(stop, Stop) and stop.status is GoalStatus.FAILED
    assert stop.reason == ("quota" if kind == "insufficient_quota" else kind)


@SETTINGS
@given(
    kind=st.sampled_from(sorted(TRANSIENT_KINDS)),
    attempt=st.integers(1, 12),
    policy=policies,
    seed=st.integers(0, 10**6),
)
def test_a_transient_error_waits_with_exponential_backoff_until_the_retries_run_out(
    kind: str, attempt: int, policy: RetryPolicy, seed: int
) -> None:
    wait = retry_wait(ModelError(kind, "busy"), attempt, random.Random(seed), policy)
    if attempt > policy.retries:
        assert isinstance(wait, Stop)
        assert (wait.status, wait.reason) == (GoalStatus.FAILED, "api_unavailable")
        assert f"failed {attempt} times in a row" in wait.message
        return
    assert isinstance(wait, float)
    base = policy.backoff_s * 2 ** (attempt - 1)
    assert min(BACKOFF_CAP_S, base * 0.5) <= wait <= min(BACKOFF_CAP_S, base)
    again = retry_wait(ModelError(kind, "busy"), attempt, random.Random(seed), policy)
    assert again == wait  # the random source is the only randomness


@SETTINGS
@given(after=st.floats(0, 1000), attempt=st.integers(1, 5), policy=policies)
def test_retry_after_is_honoured_up_to_the_longest_wait(
    after: float, attempt: int, policy: RetryPolicy
) -> None:
    error = ModelError("rate_limit", "slow down", retry_after_s=after)
    wait = retry_wait(error, attempt, random.Random(1), policy)
    if after > policy.max_wait_s:
        assert isinstance(wait, Stop) and wait.reason == "rate_limited"
    elif attempt > policy.retries:
        assert isinstance(wait, Stop) and wait.reason == "api_unavailable"
    else:
        assert wait == after
