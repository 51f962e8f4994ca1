"""``relay mcp`` (SPEC §5, §15): the stdio MCP server an agent starts, driven by the official
``mcp`` client SDK, forwarding goal-tool calls to a running relay gateway."""

from __future__ import annotations

import os
import subprocess
import sys

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from relay.gateway import Forwarder, Gateway, GoalToolAnswer
from relay.gateway.mcp_server import TOKEN_VARIABLE, URL_VARIABLE, call_relay
from relay.models.scripted import ScriptedModel
from relay.tools.specs import GET_GOAL, HANDOFF, UPDATE_GOAL


def _gateway(decide) -> Gateway:
    return Gateway(
        Forwarder(ScriptedModel.from_dict({"responses": [{"text": "x"}]})), goal_tools=decide
    )


async def _session_calls(env: dict[str, str], calls: list[tuple[str, dict]]) -> tuple[list, list]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "relay", "mcp"], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = (await session.list_tools()).tools
        results = [await session.call_tool(name, arguments) for name, arguments in calls]
    return tools, results


def test_relay_mcp_serves_the_goal_tools_and_forwards_calls_to_relay() -> None:
    decided: list[tuple[str, dict]] = []

    def decide(name: str, arguments: dict) -> GoalToolAnswer:
        decided.append((name, arguments))
        if name == "update_goal":
            return GoalToolAnswer("rejected: tests/test_fizz.py fails", is_error=True)
        return GoalToolAnswer(f"{name}: ok")

    calls = [
        ("update_goal", {"status": "complete", "summary": "done"}),
        ("handoff", {"note": "next: the docs"}),
        ("get_goal", {}),
        ("handoff", {}),
    ]
    with _gateway(decide) as g:
        env = {**os.environ, URL_VARIABLE: g.url, TOKEN_VARIABLE: g.token}
        tools, results = anyio.run(_session_calls, env, calls)
    by_name = {t.name: t for t in tools}
    assert list(by_name) == ["update_goal", "handoff", "get_goal"]
    for spec in (UPDATE_GOAL, HANDOFF, GET_GOAL):
        assert by_name[spec.name].input_schema == spec.parameters
        assert by_name[spec.name].description == spec.description
    texts = [(r.content[0].text, r.is_error) for r in results]
    assert texts == [
        ("rejected: tests/test_fizz.py fails", True),
        ("handoff: ok", False),
        ("get_goal: ok", False),
        ("handoff: missing required argument 'note'", True),  # relay's schema check
    ]
    assert decided == calls[:3]


def test_an_unreachable_relay_is_an_error_result_not_a_crash() -> None:
    text, is_error = call_relay("http://127.0.0.1:9", "t", "get_goal", {})
    assert is_error and "relay is not reachable at http://127.0.0.1:9" in text


def test_a_wrong_token_is_an_error_result() -> None:
    with _gateway(lambda n, a: GoalToolAnswer("never")) as g:
        text, is_error = call_relay(g.url, "guess", "get_goal", {})
    assert is_error and "only the agent relay started" in text


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "RELAY_GATEWAY_URL and RELAY_GATEWAY_TOKEN not set"),
        (
            {URL_VARIABLE: "http://evil.example:80", TOKEN_VARIABLE: "t"},
            "not a loopback gateway URL",
        ),
    ],
)
def test_relay_mcp_without_a_gateway_says_what_is_missing(
    env: dict[str, str], message: str
) -> None:
    clean = {k: v for k, v in os.environ.items() if k not in (URL_VARIABLE, TOKEN_VARIABLE)}
    done = subprocess.run(
        [sys.executable, "-m", "relay", "mcp"],
        env={**clean, **env},
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert done.returncode == 1
    assert message in done.stderr and "Traceback" not in done.stderr
