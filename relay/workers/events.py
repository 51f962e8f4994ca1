"""The agent's JSON events as relay's round record (SPEC §8, §15; docs/workers.md).

Claude Code (``--output-format stream-json``) reports each tool call as a ``tool_use`` block
of an ``assistant`` event and its outcome as a ``tool_result`` block of a ``user`` event;
Codex (``exec --json``) reports ``item.completed`` events of type ``command_execution``,
``file_change`` and ``mcp_tool_call``. :class:`AgentEvents` turns them into
:class:`AgentAction` records (relay's tool names where the tool is the same: ``Bash`` and
shell commands are ``shell``, ``Write`` ``write_file``, ``Edit`` ``edit_file``, ``Read``
``read_file``), so that the guard sees an agent's round as it sees the built-in worker's.
Goal tools (relay's MCP server) are not actions: relay decided them itself.

How the agent ended is read from its events, never from its exit code alone: Claude Code's
``result`` event with ``is_error``, Codex's ``turn.failed`` or ``error`` event, relay's MCP
server not connected, or no final event at all.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["AgentAction", "AgentEvents", "exited_nonzero"]

GOAL_TOOL_PREFIX = "mcp__relay__"

_CLAUDE_TOOLS = {
    "Bash": ("shell", "command"),
    "Write": ("write_file", "file_path"),
    "Edit": ("edit_file", "file_path"),
    "MultiEdit": ("edit_file", "file_path"),
    "Read": ("read_file", "file_path"),
}
"""Claude Code's tool → relay's tool name and the argument kept (``path`` for files)."""

_EXIT_CODE = re.compile(r"^Exit code (\d+)")
_CODEX_EXIT = re.compile(r"^Process exited with code (-?\d+)$", re.MULTILINE)


def exited_nonzero(result: str) -> bool:
    """Whether a tool result the agent sent back says its command failed: Codex's
    ``exec_command`` output (``Process exited with code N``, N ≠ 0); the Responses API has no
    error flag for a tool's output (Claude Code's ``is_error`` arrives as such)."""
    found = _CODEX_EXIT.search(result[:500])
    return found is not None and found.group(1) != "0"


@dataclass(frozen=True)
class AgentAction:
    """One finished tool call of the agent.

    Attributes:
        name: relay's tool name (``shell``, ``write_file``, …) or the agent's own.
        arguments: ``{"command": …}`` for ``shell``, ``{"path": …}`` for files, else the
            agent's arguments.
        result: the tool's output as the agent reported it.
        is_error: the call failed (non-zero exit, an error result).
        exit_code: a shell command's exit code, when known.
    """

    name: str
    arguments: dict[str, Any]
    result: str
    is_error: bool
    exit_code: int | None = None


@dataclass
class AgentEvents:
    """Reads one agent process's events, in order (:meth:`feed`).

    Attributes:
        worker: ``claude-code`` or ``codex``.
        failure: why the agent failed, from its events; None while it has not.
        finished: the agent reported the end of its turn (``result``, ``turn.completed``).
        text: the agent's last message text.
        unusable: relay's MCP server did not connect in the agent (every round would fail
            the same way: the goal fails at once).
    """

    worker: str
    failure: str | None = None
    unusable: bool = False
    finished: bool = False
    text: str = ""
    _pending: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)

    def feed(self, line: str) -> list[AgentAction]:
        """The actions one line of the agent's stdout finished (a line that is not a JSON
        object, such as a warning, finishes none)."""
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            return []
        if not isinstance(event, dict):
            return []
        if self.worker == "claude-code":
            return self._claude(event)
        return self._codex(event)

    def outcome(self, exit_code: int | None) -> str | None:
        """Why the agent failed, or None when its events show a normal end of turn; an agent
        that exited without a final event failed (named with its exit code)."""
        if self.failure is not None:
            return self.failure
        if not self.finished:
            return f"the agent exited (code {exit_code}) without finishing its turn"
        return None

    def _claude(self, event: dict[str, Any]) -> list[AgentAction]:
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == "init":
            for server in event.get("mcp_servers") or []:
                if server.get("name") == "relay" and server.get("status") != "connected":
                    self.failure = f"relay's MCP server is {server.get('status')} in the agent"
                    self.unusable = True
        elif kind == "result":
            self.finished = True
            if event.get("is_error"):
                status = event.get("api_error_status")
                why = str(event.get("result") or event.get("subtype") or "error")
                self.failure = f"{why} (API status {status})" if status else why
        message = event.get("message") if kind in ("assistant", "user") else None
        blocks = message.get("content") if isinstance(message, dict) else None
        actions: list[AgentAction] = []
        for block in blocks if isinstance(blocks, list) else []:
            if block.get("type") == "text" and kind == "assistant":
                self.text = str(block.get("text") or "") or self.text
            elif block.get("type") == "tool_use":
                self._pending[str(block.get("id"))] = (
                    str(block.get("name")),
                    dict(block.get("input") or {}),
                )
            elif block.get("type") == "tool_result":
                action = self._claude_result(block)
                if action is not None:
                    actions.append(action)
        return actions

    def _claude_result(self, block: dict[str, Any]) -> AgentAction | None:
        name, arguments = self._pending.pop(str(block.get("tool_use_id")), ("", {}))
        if not name or name.startswith(GOAL_TOOL_PREFIX):
            return None
        content = block.get("content")
        if isinstance(content, list):
            content = "\n".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
        result, is_error = str(content or ""), bool(block.get("is_error"))
        relay_name, key = _CLAUDE_TOOLS.get(name, (name, ""))
        exit_code = None
        if relay_name == "shell":
            found = _EXIT_CODE.match(result) if is_error else None
            exit_code = int(found.group(1)) if found else (1 if is_error else 0)
        if key:
            arguments = {"command" if key == "command" else "path": arguments.get(key)}
        return AgentAction(relay_name, arguments, result, is_error, exit_code)

    def _codex(self, event: dict[str, Any]) -> list[AgentAction]:
        kind = event.get("type")
        if kind == "turn.completed":
            self.finished = True
        elif kind == "turn.failed":
            error = event.get("error") or {}
            self.failure = str(error.get("message") if isinstance(error, dict) else error)
        elif kind == "error":
            self.failure = str(event.get("message") or "error")
        item = event.get("item") if kind == "item.completed" else None
        if not isinstance(item, dict):
            return []
        if item.get("type") == "agent_message":
            self.text = str(item.get("text") or "") or self.text
        action = _codex_action(item)
        return [action] if action is not None else []


def _codex_action(item: dict[str, Any]) -> AgentAction | None:
    kind, failed = item.get("type"), item.get("status") == "failed"
    if kind == "command_execution":
        code = item.get("exit_code")
        code = code if isinstance(code, int) else None
        output = str(item.get("aggregated_output") or "")
        command = str(item.get("command") or "")
        return AgentAction("shell", {"command": command}, output, failed or bool(code), code)
    if kind == "file_change":
        paths = [str(c.get("path")) for c in item.get("changes") or [] if isinstance(c, dict)]
        return AgentAction("file_change", {"paths": paths}, "", failed)
    if kind == "mcp_tool_call" and item.get("server") != "relay":
        result = json.dumps(item.get("result") or item.get("error"), sort_keys=True)
        name = f"mcp__{item.get('server')}__{item.get('tool')}"
        return AgentAction(name, dict(item.get("arguments") or {}), result, failed)
    return None
