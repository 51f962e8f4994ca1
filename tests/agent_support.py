"""Running the real agent CLIs (Claude Code, Codex) against relay's gateway in tests.

The pinned npm packages live in ``.agents/`` of the checkout (``.ci/run`` installs them; see
docs/workers.md). Without them the agent tests skip on a developer machine; in CI
(``CI=true``) a missing agent is a test failure, never a skip, because CI installs them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from relay.gateway import Gateway
from relay.gateway.mcp_server import TOKEN_VARIABLE, URL_VARIABLE

AGENTS_DIR = Path(os.environ.get("RELAY_AGENTS_DIR") or Path(__file__).parents[1] / ".agents")
BINARIES = {"claude-code": "claude", "codex": "codex"}


def agent_binary(worker: str) -> Path:
    """The agent's executable; skips (fails with ``CI=true``) when it is not installed."""
    path = AGENTS_DIR / "node_modules" / ".bin" / BINARIES[worker]
    if path.exists():
        return path
    problem = f"{worker} is not installed in {AGENTS_DIR} (run the npm install of .ci/run)"
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"CI must run the agent tests, but {problem}")
    pytest.skip(problem)


def _mcp_env(gateway: Gateway) -> dict[str, str]:
    return {URL_VARIABLE: gateway.url, TOKEN_VARIABLE: gateway.token}


def claude_command(
    binary: Path, gateway: Gateway, base: Path, prompt: str
) -> tuple[list[str], dict[str, str]]:
    """Command and environment of one ``claude -p`` round against ``gateway`` (issue 16)."""
    home = base / "home"
    home.mkdir(exist_ok=True)
    config = base / "mcp.json"
    server = {"command": sys.executable, "args": ["-m", "relay", "mcp"], "env": _mcp_env(gateway)}
    config.write_text(json.dumps({"mcpServers": {"relay": server}}))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "ANTHROPIC_BASE_URL": gateway.url,
        "ANTHROPIC_API_KEY": gateway.token,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_RETRIES": "0",
        "MCP_CONNECTION_NONBLOCKING": "false",  # the first request already offers relay's tools
        "ENABLE_TOOL_SEARCH": "false",  # MCP tools offered directly, not behind ToolSearch
    }
    if os.geteuid() == 0:
        env["IS_SANDBOX"] = "1"
    command = [
        str(binary),
        "-p",
        prompt,
        "--output-format",
        "stream-json",
        "--verbose",
        "--mcp-config",
        str(config),
        "--strict-mcp-config",
        "--permission-mode",
        "bypassPermissions",
        "--no-session-persistence",
    ]
    return command, env


def codex_command(
    binary: Path, gateway: Gateway, base: Path, repo: Path, prompt: str
) -> tuple[list[str], dict[str, str]]:
    """Command and environment of one ``codex exec`` round against ``gateway`` (issue 16)."""
    home = base / "codex-home"
    home.mkdir(exist_ok=True)
    mcp_env = ", ".join(f"{k} = {json.dumps(v)}" for k, v in _mcp_env(gateway).items())
    (home / "config.toml").write_text(
        'model = "relay-scripted"\nmodel_provider = "relay"\napproval_policy = "never"\n'
        'sandbox_mode = "danger-full-access"\n\n'
        '[model_providers.relay]\nname = "relay"\n'
        f'base_url = {json.dumps(gateway.openai_url)}\nwire_api = "responses"\n'
        'env_key = "RELAY_AGENT_KEY"\nrequest_max_retries = 0\nstream_max_retries = 0\n'
        "stream_idle_timeout_ms = 900000\n\n"
        "[features]\nplugins = false\n\n"
        "[mcp_servers.relay]\n"
        f'command = {json.dumps(sys.executable)}\nargs = ["-m", "relay", "mcp"]\n'
        f"required = true\ntool_timeout_sec = 3600\nenv = {{ {mcp_env} }}\n"
    )
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(base / "home"),
        "CODEX_HOME": str(home),
        "RELAY_AGENT_KEY": gateway.token,
    }
    command = [str(binary), "exec", "--json", "--skip-git-repo-check", "-C", str(repo), prompt]
    return command, env


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
