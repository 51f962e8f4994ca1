"""Helpers for the tests that need bubblewrap (SPEC §14).

Without bubblewrap these tests skip on a developer machine; in CI (``CI=true``) a missing or
broken bubblewrap is a test failure, never a skip, because CI installs it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from relay.sandbox import Sandbox, SandboxSession, probe
from relay.tools import ToolContext, ToolResult


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


KEPT_OWN = (".relay/progress.md", ".relay/goal.json")
"""relay's own files in the kept sandbox's test trees."""
KEPT_PROTECTED = (*KEPT_OWN, "relay.yaml")


def kept_repo(tmp_path: Path) -> Path:
    """A committed tree with relay's folder and ``relay.yaml`` (the kept sandbox's tests)."""
    from conftest import git

    root = tmp_path / "repo"
    (root / ".relay").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "relay.yaml").write_text("mode: relay\n")
    (root / ".relay" / "progress.md").write_text("round 1\n")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "initial")
    return root.resolve()


def kept_context(
    repo: Path, tmp_path: Path, sandbox: Sandbox, session: SandboxSession | None
) -> ToolContext:
    """The tool context of ``repo`` whose shell calls run in ``session``."""
    return ToolContext(
        repo_root=repo,
        state_dir=repo / ".git" / "relay",
        run_dir=tmp_path / f"run-{tmp_path.name}",
        protected_paths=KEPT_PROTECTED,
        shell_timeout_s=20.0,
        sandbox=sandbox,
        session=session,
    )


def stdout(result: ToolResult) -> str:
    """The stdout section of a ``shell`` result."""
    return result.content.split("--- stdout ---\n", 1)[-1].split("\n--- stderr ---", 1)[0]
