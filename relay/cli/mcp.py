"""``relay mcp``: the stdio MCP server of relay's goal tools for an agent worker (SPEC §15;
:mod:`relay.gateway.mcp_server`). The agent starts it; it is not for people to run."""

from __future__ import annotations

from relay.cli.app import app

__all__ = ["mcp"]


@app.command("mcp")
def mcp() -> None:
    """Serve update_goal, handoff and get_goal over MCP on stdin/stdout for an agent worker
    (Claude Code, Codex) that relay runs. Needs RELAY_GATEWAY_URL and RELAY_GATEWAY_TOKEN,
    which relay sets in the agent's MCP configuration; see docs/workers.md.

    \b
    Example: relay mcp
    """
    from relay.gateway.mcp_server import serve

    serve()
