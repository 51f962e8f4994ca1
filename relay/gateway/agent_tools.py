"""The scripted model's tool names in an agent's tools (SPEC §13, §15). Pure.

A script (``--model scripted:FILE``) names relay's worker tools: ``shell``, ``write_file``,
``edit_file``, ``read_file``, ``update_goal``, ``handoff``, ``get_goal``. When the gateway
serves the script to an agent, each call becomes a call of a tool the agent offered in its
request, with the arguments that tool takes:

============  ====================================  ==========================================
script        Claude Code                           Codex CLI
============  ====================================  ==========================================
shell         ``Bash`` {command, timeout ms}        ``exec_command`` {cmd} (or ``shell``
                                                    {command: [bash, -lc, …]})
write_file    ``Write`` {file_path (absolute),      the shell tool, with a ``printf`` command
              content}
edit_file     ``Edit`` {file_path, old_string,      the shell tool, with a ``python3`` command
              new_string}                           that replaces exactly one occurrence
read_file     ``Read`` {file_path, offset, limit}   the shell tool, with ``sed`` / ``cat``
goal tools    ``mcp__relay__<name>``                ``mcp__relay__<name>`` (namespace
                                                    ``mcp__relay``, never Codex's own
                                                    ``update_goal`` / ``get_goal``)
============  ====================================  ==========================================

Any other name in a script is passed on unchanged when the agent offers it (a script may name
``Bash`` itself). A name the agent does not offer is a ``bad_request`` :class:`ModelError`
naming it and what the agent offers.
"""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import PurePosixPath
from typing import Any

from relay.errors import ModelError
from relay.models.base import Request, Response, ToolCall, ToolSpec

SCRIPT_TOOLS = (
    "shell",
    "write_file",
    "edit_file",
    "read_file",
    "update_goal",
    "handoff",
    "get_goal",
)
"""The tool names a script uses (SPEC §5)."""

MCP_PREFIX = "mcp__relay__"
"""The goal tools of ``relay mcp`` as both agents name them (server name ``relay``)."""

_EDIT_SCRIPT = (
    "import sys, pathlib\n"
    "p = pathlib.Path(sys.argv[1]); t = p.read_text(); n = t.count(sys.argv[2])\n"
    "if n != 1: sys.exit(f'edit_file: the old text occurs {n} times in {p} (exactly 1 needed)')\n"
    "p.write_text(t.replace(sys.argv[2], sys.argv[3], 1))"
)


def translate_response(response: Response, request: Request, workdir: str) -> Response:
    """``response`` with every tool call renamed into the tools ``request`` offers.

    Args:
        response: the scripted model's answer (script tool names).
        request: the agent's request, read (its ``tools`` are what the agent offers).
        workdir: the agent's working directory (absolute; Claude Code's file tools take
            absolute paths).

    Raises:
        ModelError: ``bad_request`` when a call names a tool the agent does not offer.
    """
    offered = {spec.name: spec for spec in request.tools}
    calls = tuple(translate_call(call, offered, workdir) for call in response.tool_calls)
    return replace(response, tool_calls=calls)


def translate_call(call: ToolCall, offered: dict[str, ToolSpec], workdir: str) -> ToolCall:
    """One call in the agent's tools (see the module's table); raises like
    :func:`translate_response`."""
    args = call.arguments
    if call.name in ("update_goal", "handoff", "get_goal"):
        name = MCP_PREFIX + call.name
        if name not in offered:
            raise _missing(call.name, name, offered, "is relay's MCP server (relay mcp) connected?")
        return replace(call, name=name)
    if call.name == "shell":
        return _shell(call, str(args.get("command", "")), offered, args.get("timeout_s"))
    if call.name == "write_file":
        if "Write" in offered:
            file = _absolute(workdir, args.get("path", ""))
            return replace(
                call,
                name="Write",
                arguments={"file_path": file, "content": args.get("content", "")},
            )
        return _shell(
            call, _write_command(str(args.get("path", "")), str(args.get("content", ""))), offered
        )
    if call.name == "edit_file":
        return _edit(call, offered, workdir)
    if call.name == "read_file":
        return _read(call, offered, workdir)
    if call.name in offered:
        return call
    raise _missing(call.name, call.name, offered, "name a tool the agent offers")


def _shell(
    call: ToolCall, command: str, offered: dict[str, ToolSpec], timeout_s: Any = None
) -> ToolCall:
    if "Bash" in offered:
        arguments: dict[str, Any] = {"command": command}
        if isinstance(timeout_s, int) and not isinstance(timeout_s, bool):
            arguments["timeout"] = timeout_s * 1000
        return replace(call, name="Bash", arguments=arguments)
    if "exec_command" in offered:
        return replace(call, name="exec_command", arguments={"cmd": command})
    if "shell" in offered:
        kind = offered["shell"].parameters.get("properties", {}).get("command", {}).get("type")
        value: Any = ["bash", "-lc", command] if kind == "array" else command
        return replace(call, name="shell", arguments={"command": value})
    raise _missing(call.name, "Bash, exec_command or shell", offered, "the agent has no shell tool")


def _edit(call: ToolCall, offered: dict[str, ToolSpec], workdir: str) -> ToolCall:
    path, old, new = (str(call.arguments.get(k, "")) for k in ("path", "old", "new"))
    if "Edit" in offered:
        arguments = {"file_path": _absolute(workdir, path), "old_string": old, "new_string": new}
        return replace(call, name="Edit", arguments=arguments)
    command = shlex.join(["python3", "-c", _EDIT_SCRIPT, path, old, new])
    return _shell(call, command, offered)


def _read(call: ToolCall, offered: dict[str, ToolSpec], workdir: str) -> ToolCall:
    path = str(call.arguments.get("path", ""))
    offset, limit = call.arguments.get("offset"), call.arguments.get("limit")
    if "Read" in offered:
        arguments: dict[str, Any] = {"file_path": _absolute(workdir, path)}
        if isinstance(offset, int):
            arguments["offset"] = offset
        if isinstance(limit, int):
            arguments["limit"] = limit
        return replace(call, name="Read", arguments=arguments)
    if isinstance(offset, int) or isinstance(limit, int):
        first = offset if isinstance(offset, int) else 1
        last = str(first + limit - 1) if isinstance(limit, int) else "$"
        command = f"sed -n {shlex.quote(f'{first},{last}p')} -- {shlex.quote(path)}"
    else:
        command = f"cat -- {shlex.quote(path)}"
    return _shell(call, command, offered)


def _write_command(path: str, content: str) -> str:
    parent = str(PurePosixPath(path).parent)
    write = f"printf '%s' {shlex.quote(content)} > {shlex.quote(path)}"
    return write if parent in ("", ".") else f"mkdir -p -- {shlex.quote(parent)} && {write}"


def _absolute(workdir: str, path: object) -> str:
    text = str(path)
    return text if text.startswith("/") else str(PurePosixPath(workdir) / text)


def _missing(script_name: str, wanted: str, offered: dict[str, ToolSpec], hint: str) -> ModelError:
    names = sorted(offered)
    shown = ", ".join(names[:30]) + (f" and {len(names) - 30} more" if len(names) > 30 else "")
    return ModelError(
        "bad_request",
        f"scripted model: the script calls {script_name!r} but the agent offers no tool "
        f"{wanted} ({hint}); the agent offers: {shown or 'no tools'}",
    )
