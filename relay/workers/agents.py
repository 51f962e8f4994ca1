"""How relay starts an agent CLI for one round (SPEC §15; docs/workers.md, "How the agents
are run").

:func:`agent_command` gives the command line and the whole environment of one round of
Claude Code (``claude -p``) or Codex (``codex exec``) against relay's gateway: the gateway's
URL, the run's token as the agent's only key, relay's MCP server for the goal tools, and a
private configuration folder per round (nothing of the user's agent settings, sessions or
keys is read, nothing is persisted). The agent's own retries and approval prompts are off.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from relay.errors import ConfigError
from relay.gateway.mcp_server import TOKEN_VARIABLE, URL_VARIABLE
from relay.sandbox import allowed_env

__all__ = ["AGENT_WORKERS", "PACKAGES", "agent_binary", "agent_command"]

AGENT_WORKERS = {"claude-code": "claude", "codex": "codex"}
"""``worker`` → the agent's executable, looked up on ``PATH``."""

PACKAGES = {"claude-code": "@anthropic-ai/claude-code@2.1.332", "codex": "@openai/codex@0.171.0"}
"""The npm package (and the version relay is tested with) of each agent."""

PRIVATE_NAMES = ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME")
"""Variables of the allow-list an agent does not get from relay: its home and settings are
the round's private folder (no setting, session or key of the user's agent is read)."""

CODEX_KEY_VARIABLE = "RELAY_AGENT_KEY"
"""The variable Codex reads its (dummy) key from: the run's gateway token."""

AGENT_TIMEOUT_MS = 900_000
"""The agents' wait for a model answer: above relay's provider timeout and retry waits."""


def agent_binary(worker: str) -> str:
    """The executable of ``worker`` on ``PATH``.

    Raises:
        ConfigError: it is not installed, naming the npm package that provides it.
    """
    name = AGENT_WORKERS[worker]
    found = shutil.which(name)
    if found is None:
        raise ConfigError(
            f"worker {worker} needs the `{name}` command on PATH, which is not found: "
            f"npm install -g {PACKAGES[worker]} (or choose worker builtin)"
        )
    return found


def agent_folders(binary: str) -> list[Path]:
    """The folders the agent's installation lives in, to be shown read-only inside relay's
    sandbox when they lie in its private ``/tmp`` or ``/run`` (a project-local ``npm install``
    in a checkout under ``/tmp``): the ``node_modules`` folder that holds the command (its
    ``.bin`` link and the package it points to), else the command's own folder."""
    from relay.sandbox.launcher import PRIVATE_MOUNTS

    found: list[Path] = []
    for path in (Path(os.path.abspath(binary)), Path(os.path.realpath(binary))):
        folder = next((p for p in path.parents if p.name == "node_modules"), path.parent)
        private = any(m in folder.parents for m in PRIVATE_MOUNTS)
        if private and folder not in found:
            found.append(folder)
    return found


def agent_command(
    worker: str,
    binary: str,
    gateway: tuple[str, str],
    folder: Path,
    repo: Path,
    prompt: str,
    *,
    env_names: tuple[str, ...] = (),
) -> tuple[list[str], dict[str, str]]:
    """Command and environment of one round of ``worker``.

    Args:
        worker: ``claude-code`` or ``codex``.
        binary: the agent's executable (:func:`agent_binary`).
        gateway: the gateway's base URL (``http://127.0.0.1:PORT``) and the run's token.
        folder: a new, empty folder of this round for the agent's private configuration.
        repo: the working tree (the agent's working directory).
        prompt: the round message.
        env_names: ``sandbox.env``: names the user allows on top of the allow-list of the
            model's commands (:func:`relay.sandbox.allowed_env`; a credential's name never
            passes). The agent's environment is that allow-list, without relay's keys and
            ``RELAY_*`` settings, plus its private home and the gateway's URL and token.
    """
    folder.mkdir(parents=True, exist_ok=True)
    home = folder / "home"
    home.mkdir(exist_ok=True)
    env = allowed_env(extra_names=env_names)
    for name in PRIVATE_NAMES:
        env.pop(name, None)
    env.setdefault("PATH", "/usr/bin:/bin")
    env["HOME"] = str(home)
    url, token = gateway
    if worker == "claude-code":
        return _claude(binary, url, token, folder, prompt), env | _claude_env(url, token, home)
    codex_home = folder / "codex-home"
    codex_home.mkdir(exist_ok=True)
    (codex_home / "config.toml").write_text(_codex_config(url, token))
    env |= {"CODEX_HOME": str(codex_home), CODEX_KEY_VARIABLE: token}
    command = [binary, "exec", "--json", "--skip-git-repo-check", "-C", str(repo), prompt]
    return command, env


def _mcp_server(url: str, token: str) -> dict[str, object]:
    """How the agent starts ``relay mcp``: this Python, relay's module, the gateway."""
    return {
        "command": sys.executable,
        "args": ["-m", "relay", "mcp"],
        "env": {URL_VARIABLE: url, TOKEN_VARIABLE: token},
    }


def _claude(binary: str, url: str, token: str, folder: Path, prompt: str) -> list[str]:
    config = folder / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"relay": _mcp_server(url, token)}}))
    return [
        binary,
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


def _claude_env(url: str, token: str, home: Path) -> dict[str, str]:
    env = {
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": token,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_RETRIES": "0",  # relay owns the retries
        "API_TIMEOUT_MS": str(AGENT_TIMEOUT_MS),
        "MCP_CONNECTION_NONBLOCKING": "false",  # the first request already offers relay's tools
        "ENABLE_TOOL_SEARCH": "false",  # MCP tools offered directly, not behind ToolSearch
    }
    if os.geteuid() == 0:
        env["IS_SANDBOX"] = "1"  # bypassPermissions is refused as root otherwise
    return env


def _codex_config(url: str, token: str) -> str:
    server = _mcp_server(url, token)
    mcp_env = ", ".join(f"{k} = {json.dumps(v)}" for k, v in server["env"].items())  # type: ignore[union-attr]
    return (
        'model = "relay-scripted"\nmodel_provider = "relay"\napproval_policy = "never"\n'
        'sandbox_mode = "danger-full-access"\n'
        "check_for_update_on_startup = false\n"
        "allow_login_shell = false\n\n"  # a login shell's profile would reset PATH
        '[model_providers.relay]\nname = "relay"\n'
        f'base_url = {json.dumps(url + "/v1")}\nwire_api = "responses"\n'
        f'env_key = "{CODEX_KEY_VARIABLE}"\nrequest_max_retries = 0\nstream_max_retries = 0\n'
        f"stream_idle_timeout_ms = {AGENT_TIMEOUT_MS}\n\n"
        "[features]\nplugins = false\ngoals = false\n\n"  # relay's goal tools only
        "[analytics]\nenabled = false\n\n"  # else it posts at exit: 5 s without network
        "[mcp_servers.relay]\n"
        f'command = {json.dumps(sys.executable)}\nargs = ["-m", "relay", "mcp"]\n'
        f"required = true\ntool_timeout_sec = 21600\nenv = {{ {mcp_env} }}\n"
    )
