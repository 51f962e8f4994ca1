"""``relay mcp``: the stdio MCP server that gives an agent worker relay's goal tools
(SPEC §5, §15).

The agent starts it (Claude Code ``--mcp-config``, Codex ``[mcp_servers.relay]``) with two
environment variables: :data:`URL_VARIABLE` (the gateway's URL) and :data:`TOKEN_VARIABLE`
(the run's token). It offers ``update_goal``, ``handoff`` and ``get_goal`` with exactly the
argument schemas of relay's built-in goal tools (:mod:`relay.tools.specs`) and forwards each
call to the running relay (``POST <url>/relay/goal-tools/<name>``), whose supervisor decides;
the decision comes back as a plain-text tool result (``isError`` for a rejected call).
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from typing import Any

from relay.errors import ConfigError
from relay.gateway.server import GOAL_TOOL_PATH
from relay.tools.specs import GET_GOAL, HANDOFF, UPDATE_GOAL

URL_VARIABLE = "RELAY_GATEWAY_URL"
"""The environment variable holding the gateway's URL (``http://127.0.0.1:PORT``)."""

TOKEN_VARIABLE = "RELAY_GATEWAY_TOKEN"
"""The environment variable holding the run's token."""

GOAL_TOOL_SPECS = (UPDATE_GOAL, HANDOFF, GET_GOAL)
"""The tools served, in the order listed."""

CALL_TIMEOUT_S = 6 * 3600
"""How long a call may wait for relay's decision (a ``complete`` runs the whole audit)."""


def gateway_address(environ: dict[str, str] | None = None) -> tuple[str, str]:
    """``(url, token)`` from the environment.

    Raises:
        ConfigError: a variable is missing or empty, or the URL is not ``http://127.0.0.1:…``
            / ``http://localhost:…`` (the gateway is loopback only).
    """
    env = os.environ if environ is None else environ
    url, token = env.get(URL_VARIABLE, "").rstrip("/"), env.get(TOKEN_VARIABLE, "")
    missing = [name for name, value in ((URL_VARIABLE, url), (TOKEN_VARIABLE, token)) if not value]
    if missing:
        raise ConfigError(
            f"relay mcp: {' and '.join(missing)} not set; relay mcp is started by an agent "
            "worker that relay runs, with the gateway's URL and the run's token"
        )
    if not url.startswith(("http://127.0.0.1:", "http://localhost:")):
        raise ConfigError(
            f"relay mcp: {URL_VARIABLE} = {url!r} is not a loopback gateway URL "
            "(allowed: http://127.0.0.1:PORT or http://localhost:PORT)"
        )
    return url, token


def call_relay(url: str, token: str, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
    """Forward one goal-tool call; ``(text, is_error)``. An unreachable or failing relay is an
    error result naming the problem (the agent sees it; never a crash of the server)."""
    data = json.dumps({"arguments": arguments}).encode()
    request = urllib.request.Request(
        f"{url}{GOAL_TOOL_PATH}{name}",
        data=data,
        headers={"content-type": "application/json", "authorization": f"Bearer {token}"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=CALL_TIMEOUT_S) as answer:
            payload = json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        try:
            payload = json.loads(exc.read())
        except (json.JSONDecodeError, OSError):
            return f"relay answered {name} with HTTP {exc.code}", True
    except (OSError, json.JSONDecodeError) as exc:
        return f"relay is not reachable at {url}: {exc}", True
    if not isinstance(payload, dict) or not isinstance(payload.get("text"), str):
        return f"relay answered {name} with something that is not a tool result", True
    return payload["text"], bool(payload.get("is_error"))


def build_server(url: str, token: str) -> Any:
    """The MCP server (the ``mcp`` SDK's low-level ``Server``) for a gateway."""
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel import Server

    tools = [
        types.Tool(name=s.name, description=s.description, input_schema=s.parameters)
        for s in GOAL_TOOL_SPECS
    ]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        text, is_error = await anyio.to_thread.run_sync(
            call_relay, url, token, params.name, arguments
        )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], is_error=is_error
        )

    from relay import __version__

    return Server("relay", version=__version__, on_list_tools=list_tools, on_call_tool=call_tool)


def serve(environ: dict[str, str] | None = None) -> int:
    """Run the stdio server until the agent closes stdin; returns the exit code.

    Raises:
        ConfigError: see :func:`gateway_address` (before anything is served).
    """
    import anyio
    from mcp.server.stdio import stdio_server

    url, token = gateway_address(environ)
    server = build_server(url, token)

    async def run() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(run)
    return 0


if __name__ == "__main__":  # pragma: no cover
    try:
        raise SystemExit(serve())
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
