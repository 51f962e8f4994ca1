"""relay's API gateway (SPEC §15) seen through the real anthropic and openai SDK clients,
streaming, serving relay's scripted model: text, tool calls, usage, the per-run token, the
admit hook, relay's own retries and the classified provider errors."""

from __future__ import annotations

import json
import threading
import urllib.request

import anthropic
import openai
import pytest

from relay.gateway import Exchange, Forwarder, Gateway, GoalToolAnswer, Refusal, translator_for
from relay.models.scripted import ScriptedModel
from relay.retry import RetryPolicy

TOOL = {
    "name": "Bash",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
}
FUNCTION = {
    "type": "function",
    "name": "exec_command",
    "strict": False,
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
}


def _gateway(script: dict, exchanges: list[Exchange] | None = None, **kwargs) -> Gateway:
    model = ScriptedModel.from_dict(script)
    forwarder = Forwarder(
        model,
        on_exchange=exchanges.append if exchanges is not None else None,
        translate=translator_for(model, "/work/repo"),
        sleep=lambda s: None,
        **kwargs,
    )
    return Gateway(forwarder)


def _anthropic(g: Gateway, key: str | None = None) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=key or g.token, base_url=g.url, max_retries=0)


def _openai(g: Gateway, key: str | None = None) -> openai.OpenAI:
    return openai.OpenAI(api_key=key or g.token, base_url=g.openai_url, max_retries=0)


REPLY = {
    "text": "Running it.",
    "tool_calls": [{"name": "shell", "arguments": {"command": "pytest -q"}}],
    "usage": {"input": 1200, "cached": 300, "cache_write": 40, "output": 150},
}


def test_anthropic_stream_gives_text_tool_call_and_usage() -> None:
    exchanges: list[Exchange] = []
    with (
        _gateway({"responses": [REPLY]}, exchanges) as g,
        _anthropic(g).messages.stream(
            model="claude-x",
            max_tokens=1000,
            tools=[TOOL],
            system=[{"type": "text", "text": "You are an agent."}],
            messages=[{"role": "user", "content": "Fix the tests."}],
        ) as stream,
    ):
        kinds = [event.type for event in stream]
        message = stream.get_final_message()
    assert message.content[0].text == "Running it."
    call = message.content[1]
    assert (call.name, call.input) == ("Bash", {"command": "pytest -q"})
    assert message.stop_reason == "tool_use" and message.model == "claude-x"
    u = message.usage
    assert (
        u.input_tokens,
        u.cache_read_input_tokens,
        u.cache_creation_input_tokens,
        u.output_tokens,
    ) == (1200, 300, 40, 150)
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert "input_json" in kinds and "text" in kinds
    [exchange] = exchanges
    assert exchange.wire == "messages" and exchange.attempt == 1
    assert exchange.request.system == "You are an agent."
    assert exchange.request.messages[0].content == "Fix the tests."
    assert exchange.response.usage.budget_tokens == 1200 + 40 + 150


def test_anthropic_beta_path_and_plain_json_answer() -> None:
    with _gateway({"responses": [{"text": "Hello."}]}) as g:
        message = _anthropic(g).beta.messages.create(
            model="m", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
        )
    assert message.content[0].text == "Hello." and message.stop_reason == "end_turn"


def test_openai_responses_stream_gives_text_function_call_and_usage() -> None:
    exchanges: list[Exchange] = []
    with (
        _gateway({"responses": [REPLY]}, exchanges) as g,
        _openai(g).responses.stream(
            model="gpt-x", instructions="Be brief.", input="Fix the tests.", tools=[FUNCTION]
        ) as stream,
    ):
        kinds = [event.type for event in stream]
        response = stream.get_final_response()
    assert response.output_text == "Running it."
    call = response.output[1]
    assert (call.type, call.name, json.loads(call.arguments)) == (
        "function_call",
        "exec_command",
        {"cmd": "pytest -q"},
    )
    u = response.usage
    assert (u.input_tokens, u.input_tokens_details.cached_tokens, u.output_tokens) == (
        1540,
        300,
        150,
    )
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert (
        "response.function_call_arguments.delta" in kinds and "response.output_text.delta" in kinds
    )
    assert exchanges[0].wire == "responses" and exchanges[0].request.system == "Be brief."


def test_openai_namespaced_tool_call_goes_back_with_its_namespace() -> None:
    namespace = {
        "type": "namespace",
        "name": "mcp__relay",
        "description": "relay",
        "tools": [
            {
                "type": "function",
                "name": "update_goal",
                "strict": False,
                "parameters": {"type": "object", "properties": {}},
            }
        ],
    }
    script = {
        "responses": [
            {
                "tool_calls": [
                    {"name": "update_goal", "arguments": {"status": "complete", "summary": "s"}}
                ]
            }
        ]
    }
    with _gateway(script) as g:
        events = list(
            _openai(g).responses.create(model="m", input="go", tools=[namespace], stream=True)
        )
    call = events[-1].response.output[0]
    assert (call.name, call.namespace) == ("update_goal", "mcp__relay")


def test_a_wrong_token_is_refused_and_never_forwarded() -> None:
    exchanges: list[Exchange] = []
    with _gateway({"responses": [REPLY]}, exchanges) as g:
        with pytest.raises(anthropic.AuthenticationError):
            _anthropic(g, key="sk-ant-guess").messages.create(
                model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}]
            )
        with pytest.raises(openai.AuthenticationError):
            _openai(g, key="sk-guess").responses.create(model="m", input="x")
    assert exchanges == []


def test_the_admit_hook_refuses_with_an_error_the_agent_does_not_retry() -> None:
    exchanges: list[Exchange] = []
    refusal = Refusal("relay: the token budget of the goal is used up")
    with _gateway({"responses": [REPLY]}, exchanges, admit=lambda request, wire: refusal) as g:
        client = anthropic.Anthropic(api_key=g.token, base_url=g.url, max_retries=3)
        with pytest.raises(anthropic.PermissionDeniedError) as caught:
            client.messages.create(
                model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}]
            )
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert "token budget" in caught.value.message
    assert [(e.attempt, e.refusal) for e in exchanges] == [(0, refusal)]  # one request, no retry


def test_transient_errors_are_retried_by_relay_before_answering() -> None:
    exchanges: list[Exchange] = []
    script = {"responses": [{"error": "overloaded"}, {"error": "rate_limit"}, {"text": "Back."}]}
    with _gateway(script, exchanges) as g:
        response = _openai(g).responses.create(model="m", input="x")
    assert response.output_text == "Back."
    assert [(e.attempt, e.error.kind if e.error else None) for e in exchanges] == [
        (1, "overloaded"),
        (2, "rate_limit"),
        (3, None),
    ]


def test_quota_stops_after_one_upstream_request() -> None:
    script = {"responses": [{"error": "insufficient_quota"}, {"text": "never"}]}
    exchanges: list[Exchange] = []
    with _gateway(script, exchanges) as g:
        client = openai.OpenAI(api_key=g.token, base_url=g.openai_url, max_retries=5)
        with pytest.raises(openai.RateLimitError) as caught:
            client.responses.create(model="m", input="x")
    exchanges_a: list[Exchange] = []
    with _gateway(script, exchanges_a) as g:
        client_a = anthropic.Anthropic(api_key=g.token, base_url=g.url, max_retries=5)
        with pytest.raises(anthropic.RateLimitError) as caught_a:
            client_a.messages.create(
                model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}]
            )
    assert caught.value.code == "insufficient_quota"
    assert caught_a.value.response.headers["x-should-retry"] == "false"
    for log in (exchanges, exchanges_a):  # the SDKs' own retries never fired
        assert [e.attempt for e in log] == [1]
        assert log[0].stop is not None and log[0].stop.reason == "quota"


def test_used_up_retries_answer_with_the_error_and_the_stop() -> None:
    exchanges: list[Exchange] = []
    script = {"responses": [{"repeat": 5, "response": {"error": "server"}}]}
    gateway = _gateway(script, exchanges, policy=RetryPolicy(retries=2))
    with gateway as g, pytest.raises(anthropic.InternalServerError):
        _anthropic(g).messages.create(
            model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    assert [e.attempt for e in exchanges] == [1, 2, 3]
    assert exchanges[-1].stop.reason == "api_unavailable"


def test_a_script_tool_the_agent_does_not_offer_is_an_error_naming_it() -> None:
    script = {
        "responses": [
            {
                "tool_calls": [
                    {"name": "update_goal", "arguments": {"status": "complete", "summary": "s"}}
                ]
            }
        ]
    }
    with _gateway(script) as g, pytest.raises(anthropic.BadRequestError) as caught:
        _anthropic(g).messages.create(
            model="m", max_tokens=10, tools=[TOOL], messages=[{"role": "user", "content": "x"}]
        )
    assert "mcp__relay__update_goal" in caught.value.message and "Bash" in caught.value.message


def _post(g: Gateway, path: str, body: object, token: str | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(
        g.url + path,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"authorization": f"Bearer {token or g.token}", "content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_goal_tool_calls_reach_the_handler_checked_against_relays_schemas() -> None:
    calls: list[tuple[str, dict]] = []

    def decide(name: str, arguments: dict) -> GoalToolAnswer:
        calls.append((name, arguments))
        return GoalToolAnswer("rejected: the audit failed", is_error=True)

    model = ScriptedModel.from_dict({"responses": [{"text": "unused"}]})
    with Gateway(Forwarder(model), goal_tools=decide) as g:
        ok = _post(
            g,
            "/relay/goal-tools/update_goal",
            {"arguments": {"status": "complete", "summary": "s"}},
        )
        bad = _post(g, "/relay/goal-tools/update_goal", {"arguments": {"status": "complete"}})
        unknown = _post(g, "/relay/goal-tools/shell", {"arguments": {}})
        stranger = _post(g, "/relay/goal-tools/get_goal", {"arguments": {}}, token="guess")
    assert ok == (200, {"text": "rejected: the audit failed", "is_error": True})
    assert bad == (
        200,
        {"text": "update_goal: missing required argument 'summary'", "is_error": True},
    )
    assert unknown[0] == 404 and stranger[0] == 401
    assert calls == [("update_goal", {"status": "complete", "summary": "s"})]


def test_head_is_answered_and_a_body_that_is_not_json_is_a_400() -> None:
    with _gateway({"responses": [{"text": "unused"}]}) as g:
        head = urllib.request.urlopen(urllib.request.Request(g.url + "/", method="HEAD"))
        request = urllib.request.Request(
            g.url + "/v1/messages?beta=true",
            data=b"{nope",
            method="POST",
            headers={"x-api-key": g.token},
        )
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request)
    assert head.status == 200
    assert caught.value.code == 400 and caught.value.headers["x-should-retry"] == "false"
    assert "not JSON" in json.loads(caught.value.read())["error"]["message"]


def test_after_a_fatal_error_every_request_is_refused_without_reaching_the_model() -> None:
    exchanges: list[Exchange] = []
    script = {"responses": [{"error": "bad_request"}, {"text": "never sent"}]}
    with _gateway(script, exchanges) as g:
        client = _anthropic(g)
        with pytest.raises(anthropic.BadRequestError):
            client.messages.create(
                model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}]
            )
        with pytest.raises(anthropic.PermissionDeniedError) as caught:
            client.messages.create(
                model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}]
            )
    assert "relay: the goal stopped: Model call failed (bad_request)" in caught.value.message
    assert [(e.attempt, e.refusal.kind if e.refusal else None) for e in exchanges] == [
        (1, None),
        (0, "stopped"),
    ]


@pytest.mark.parametrize("length", ["lots", "\xb2", "-5"])
def test_a_content_length_that_is_not_a_number_is_a_400_not_a_dead_handler(length: str) -> None:
    """A malformed request from whatever reaches the loopback port gets relay's 400, and the
    gateway goes on serving (``\xb2``, a superscript two, is a digit to ``str.isdigit`` but
    not to ``int``)."""
    import http.client

    with _gateway({"responses": [{"text": "unused"}]}) as g:
        conn = http.client.HTTPConnection("127.0.0.1", g.port, timeout=10)
        conn.putrequest("POST", "/v1/messages")
        conn.putheader("x-api-key", g.token)
        conn.putheader("content-length", length)
        conn.endheaders()
        answer = conn.getresponse()
        body = json.loads(answer.read())
        conn.close()
        head = urllib.request.urlopen(urllib.request.Request(g.url + "/", method="HEAD"))
    assert answer.status == 400
    assert f"content-length {length!r}" in body["error"]["message"]
    assert head.status == 200


def test_connections_that_send_nothing_hold_a_bounded_number_of_threads_for_a_bounded_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whatever reaches the loopback port (the agent is untrusted, SPEC §14) can open
    connections and send nothing: at most MAX_CONNECTIONS of them get a thread, each is closed
    after IDLE_TIMEOUT_S, and then the gateway serves again."""
    import socket
    import time

    from relay.gateway import server

    if hasattr(server, "IDLE_TIMEOUT_S"):  # relay's idle timeout, shortened for the test
        monkeypatch.setattr(server._Handler, "timeout", 1.0)
    with _gateway({"responses": [{"text": "unused"}]}) as g:
        before = threading.active_count()
        most = getattr(server, "MAX_CONNECTIONS", 32)
        idle = [socket.create_connection(("127.0.0.1", g.port)) for _ in range(most + 8)]
        time.sleep(0.3)
        assert threading.active_count() - before <= most
        for sock in idle:  # each is closed by the gateway: unanswered, or after the timeout
            sock.settimeout(10)
            assert sock.recv(1) == b""
            sock.close()
        deadline = time.monotonic() + 10
        while threading.active_count() > before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert threading.active_count() <= before
        head = urllib.request.urlopen(urllib.request.Request(g.url + "/", method="HEAD"))
    assert head.status == 200
