"""relay's gateway in front of relay's real providers (SPEC §15): the agent speaks its wire
format with the run's token, relay's provider speaks the upstream's with the real key (here
relay.testing.FakeProvider as the upstream), across wire formats."""

from __future__ import annotations

import json

import anthropic
import openai
import pytest

from relay.gateway import Exchange, Forwarder, Gateway
from relay.models.registry import create_model
from relay.testing import FakeProvider

KEYS = {"ANTHROPIC_API_KEY": "sk-ant-real-secret", "OPENAI_API_KEY": "sk-real-secret"}
ANSWER = {
    "text": "Looking.",
    "tool_calls": [{"name": "exec_command", "arguments": {"cmd": "ls"}}],
    "usage": {"input": 900, "cached": 100, "cache_write": 0, "output": 60},
}


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)


def _upstream_keys(fake: FakeProvider) -> set[str]:
    seen = set()
    for r in fake.requests:
        seen.add(r.headers.get("x-api-key", ""))
        seen.add(r.headers.get("authorization", "").removeprefix("Bearer "))
    return seen - {""}


def test_a_codex_style_request_served_by_relays_anthropic_provider() -> None:
    exchanges: list[Exchange] = []
    with FakeProvider({"responses": [ANSWER]}) as upstream:
        model = create_model("anthropic:claude-test", base_url=upstream.anthropic_url)
        with Gateway(Forwarder(model, on_exchange=exchanges.append)) as g:
            client = openai.OpenAI(api_key=g.token, base_url=g.openai_url, max_retries=0)
            tool = {"type": "function", "name": "exec_command", "parameters": {"type": "object"}}
            with client.responses.stream(
                model="agent-model", input="List files.", tools=[tool]
            ) as s:
                response = s.get_final_response()
            token = g.token
    call = response.output[1]
    assert (call.name, json.loads(call.arguments)) == ("exec_command", {"cmd": "ls"})
    assert response.usage.input_tokens == 1000 and response.usage.output_tokens == 60
    [sent] = upstream.requests
    assert sent.path == "/v1/messages" and sent.body["model"] == "claude-test"
    assert sent.body["tools"][0]["name"] == "exec_command"
    assert _upstream_keys(upstream) == {KEYS["ANTHROPIC_API_KEY"]}  # never the agent's token
    assert token not in json.dumps([r.headers for r in upstream.requests])
    assert exchanges[0].response.usage.budget_tokens == 900 + 60


def test_a_claude_style_request_served_by_relays_openai_provider() -> None:
    answer = {**ANSWER, "tool_calls": [{"name": "Bash", "arguments": {"command": "ls"}}]}
    with FakeProvider({"responses": [answer]}) as upstream:
        model = create_model("openai:gpt-test", base_url=upstream.openai_url)
        with Gateway(Forwarder(model)) as g:
            client = anthropic.Anthropic(api_key=g.token, base_url=g.url, max_retries=0)
            tool = {"name": "Bash", "input_schema": {"type": "object"}}
            with client.messages.stream(
                model="claude-agent",
                max_tokens=100,
                tools=[tool],
                messages=[{"role": "user", "content": "List files."}],
            ) as s:
                message = s.get_final_message()
    assert (message.content[1].name, message.content[1].input) == ("Bash", {"command": "ls"})
    assert upstream.paths() == ["/v1/chat/completions"]
    assert _upstream_keys(upstream) == {KEYS["OPENAI_API_KEY"]}


def test_an_upstream_quota_error_reaches_the_agent_after_one_upstream_request() -> None:
    script = {"responses": [{"repeat": 5, "response": {"error": "insufficient_quota"}}]}
    with FakeProvider(script) as upstream:
        model = create_model("anthropic:claude-test", base_url=upstream.anthropic_url)
        with Gateway(Forwarder(model, sleep=lambda s: None)) as g:
            client = openai.OpenAI(api_key=g.token, base_url=g.openai_url, max_retries=3)
            with pytest.raises(openai.RateLimitError) as caught:
                client.responses.create(model="m", input="x")
    assert caught.value.code == "insufficient_quota"
    assert len(upstream.requests) == 1


def test_upstream_transient_errors_are_retried_by_relay_not_the_agent() -> None:
    script = {"responses": [{"error": "overloaded"}, {"error": "server"}, {"text": "Fine."}]}
    waits: list[float] = []
    with FakeProvider(script) as upstream:
        model = create_model("openai:gpt-test", base_url=upstream.openai_url)
        with Gateway(Forwarder(model, sleep=waits.append)) as g:
            client = anthropic.Anthropic(api_key=g.token, base_url=g.url, max_retries=0)
            message = client.messages.create(
                model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}]
            )
    assert message.content[0].text == "Fine."
    assert len(upstream.requests) == 3 and len(waits) == 2
