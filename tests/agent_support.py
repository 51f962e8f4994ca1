"""Running the real agent CLIs (Claude Code, Codex) against relay's gateway in tests.

The pinned npm packages live in ``.agents/`` of the checkout (``.ci/run`` installs them; see
docs/workers.md). Without them the agent tests skip on a developer machine; in CI
(``CI=true``) a missing agent is a test failure, never a skip, because CI installs them.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from relay.gateway import Gateway
from relay.workers.agents import AGENT_WORKERS, agent_command

AGENTS_DIR = Path(os.environ.get("RELAY_AGENTS_DIR") or Path(__file__).parents[1] / ".agents")


def agent_binary(worker: str) -> Path:
    """The agent's executable; skips (fails with ``CI=true``) when it is not installed."""
    path = AGENTS_DIR / "node_modules" / ".bin" / AGENT_WORKERS[worker]
    if path.exists():
        return path
    problem = f"{worker} is not installed in {AGENTS_DIR} (run the npm install of .ci/run)"
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"CI must run the agent tests, but {problem}")
    pytest.skip(problem)


def round_command(
    worker: str, binary: Path, gateway: Gateway, base: Path, repo: Path, prompt: str
) -> tuple[list[str], dict[str, str]]:
    """Command and environment of one round of ``worker`` against ``gateway``: relay's own
    :func:`relay.workers.agents.agent_command` (the settings under test are the product's)."""
    folder = base / "agent"
    return agent_command(worker, str(binary), (gateway.url, gateway.token), folder, repo, prompt)


def run_agent(command: list[str], env: dict[str, str], cwd: Path) -> tuple[int, list[dict], str]:
    """Run one agent process to its end; ``(exit code, JSON events of stdout, stderr)``."""
    done = subprocess.run(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    events = []
    for line in done.stdout.splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return done.returncode, events, done.stderr
