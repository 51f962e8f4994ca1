"""Helpers for the tests that need bubblewrap (SPEC §14).

Without bubblewrap these tests skip on a developer machine; in CI (``CI=true``) a missing or
broken bubblewrap is a test failure, never a skip, because CI installs it.
"""

from __future__ import annotations

import os
import shutil

import pytest

from relay.sandbox import probe


def bwrap_problem() -> str | None:
    """Why bubblewrap cannot be used here, or None when it works."""
    found = shutil.which("bwrap")
    if found is None:
        return "bubblewrap (bwrap) is not installed"
    return probe(found, "deny")


def require_bwrap() -> None:
    """Skip (fail in CI) when bubblewrap does not work on this machine."""
    problem = bwrap_problem()
    if problem is None:
        return
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"CI must run the sandbox tests, but {problem}")
    pytest.skip(problem)
