"""Provider settings for real servers (issue 14, items 1 and 4): the output cap sent to every
provider, the request and connect timeouts of the SDK clients, a time budget that ends a goal
whose model calls keep timing out, clear errors for bad values, and a forced ``tool_choice``
refused with 400, 422 or 500 recognised as such (SPEC §7.4–§7.6, §12). Real SDK clients
against loopback servers (pytest-httpserver, :class:`relay.testing.FakeProvider`)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from conftest import call, complete, flat, read_transcript, respond
from werkzeug import Request as WireRequest
from werkzeug import Response as WireResponse

from relay.errors import ForcedToolChoiceRejected, ModelError
from relay.models.base import Message, ModelSettings, Request, Response, ToolCall
from relay.models.registry import create_model
from relay.testing import FakeProvider, anthropic_body, openai_body
from relay.tools import WORKER_TOOLS

GOAL = "Create notes.txt saying hello."
NOTES = {"deliverables": [{"file": "notes.txt", "contains": "hello"}]}
PROVIDERS = ["anthropic", "openai"]
ENDPOINT = {"anthropic": "/v1/messages", "openai": "/v1/chat/completions"}
FORCED = Request("You are a worker.", (Message("user", "Begin."),), WORKER_TOOLS, "required")


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-secret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")


def base_url(httpserver: Any, provider: str) -> str:
    url = httpserver.url_for("/") if provider == "anthropic" else httpserver.url_for("/v1")
    return url.rstrip("/")


def run_json(run_relay: Any, *args: Any) -> tuple[int, dict[str, Any], str]:
    code, out, err = run_relay(["run", *args, "--json"])
    assert "Traceback" not in err, err
    return code, json.loads(out), err


# --- the output cap -----------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_output_cap_is_sent_on_every_call(provider, make_repo, run_relay) -> None:
    repo = make_repo(config=NOTES)
    script = {"responses": [respond(call("write_file", path="notes.txt", content="hello\n"))]}
    script["responses"].append(complete())
    with FakeProvider(script) as fake:
        url = fake.anthropic_url if provider == "anthropic" else fake.openai_url
        model = f"{provider}:test-model"
        args = [GOAL, "--repo", repo, "--model", model, "--base-url", url]
        code, data, _ = run_json(run_relay, *args, "--max-output-tokens", "321")
    assert (code, data["status"]) == (0, "complete")
    assert len(fake.requests) == 2
    for request in fake.requests:
        assert request.body["max_tokens"] == 321  # OpenAI-compatible servers read max_tokens
        assert "max_completion_tokens" not in request.body


def test_the_output_cap_has_a_default_for_every_provider(make_repo, run_relay) -> None:
    repo = make_repo(config=NOTES)
    script = {"responses": [respond(call("write_file", path="notes.txt", content="hello\n"))]}
    script["responses"].append(complete())
    with FakeProvider(script) as fake:
        args = [GOAL, "--repo", repo, "--model", "openai:m", "--base-url", fake.openai_url]
        code, _data, _ = run_json(run_relay, *args)
    assert code == 0
    assert [r.body["max_tokens"] for r in fake.requests] == [16000, 16000]


def test_openai_s_own_api_gets_max_completion_tokens() -> None:
    own = create_model("openai:gpt-x", settings=ModelSettings(max_output_tokens=900))
    params = own.params(FORCED)  # type: ignore[attr-defined]
    assert params["max_completion_tokens"] == 900 and "max_tokens" not in params
    same = create_model("openai:gpt-x", base_url="https://api.openai.com/v1")
    assert "max_completion_tokens" in same.params(FORCED)  # type: ignore[attr-defined]
    local = create_model("openai:q", base_url="http://127.0.0.1:8080/v1")
    assert local.params(FORCED)["max_tokens"] == 16000  # type: ignore[attr-defined]


# --- the timeouts -------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_timeouts_reach_the_sdk_client(provider) -> None:
    settings = ModelSettings(
        "http://127.0.0.1:9/v1", 50, request_timeout_s=7.5, connect_timeout_s=2
    )
    model = create_model(f"{provider}:m", settings=settings)
    timeout = model._client.timeout  # type: ignore[attr-defined]
    assert (timeout.connect, timeout.read, timeout.write, timeout.pool) == (2, 7.5, 7.5, 7.5)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_server_slower_than_the_request_timeout_is_a_timeout(provider, httpserver) -> None:
    release = threading.Event()

    def slow(request: WireRequest) -> WireResponse:
        release.wait(5)
        return WireResponse("{}", 500)

    httpserver.expect_request(ENDPOINT[provider]).respond_with_handler(slow)
    settings = ModelSettings(base_url(httpserver, provider), request_timeout_s=0.3)
    model = create_model(f"{provider}:m", settings=settings)
    started = time.monotonic()
    try:
        with pytest.raises(ModelError) as info:
            model.complete(FORCED)
    finally:
        release.set()
    assert info.value.kind == "timeout" and info.value.transient
    assert time.monotonic() - started < 3


def test_a_closed_port_fails_within_the_connect_timeout() -> None:
    settings = ModelSettings("http://127.0.0.1:9/v1", connect_timeout_s=1)
    model = create_model("openai:m", settings=settings)
    started = time.monotonic()
    with pytest.raises(ModelError) as info:
        model.complete(FORCED)
    assert info.value.kind in ("connection", "timeout")
    assert time.monotonic() - started < 3


def test_the_time_budget_ends_a_goal_whose_model_calls_keep_timing_out(
    httpserver, make_repo, run_relay
) -> None:
    """Issue 14: a server that never answers in time held a step for 5 retries of 600 s. The
    timeouts are retried, and the time budget ends the goal as ``budget_limited``."""
    release = threading.Event()

    def slow(request: WireRequest) -> WireResponse:
        release.wait(5)
        return WireResponse("{}", 500)

    httpserver.expect_request("/v1/chat/completions").respond_with_handler(slow)
    config = {**NOTES, "limits": {"api_retries": 50, "api_backoff_s": 0.05, "time_budget": 2}}
    repo = make_repo(config=config)
    url = base_url(httpserver, "openai")
    started = time.monotonic()
    try:
        code, data, _err = run_json(
            run_relay, GOAL, "--repo", repo, "--model", "openai:m", "--base-url", url,
            "--request-timeout", "0.4",
        )  # fmt: skip
    finally:
        release.set()
    took = time.monotonic() - started
    assert (code, data["status"], data["reason"]) == (5, "budget_limited", "time_budget")
    timeouts = [e for e in data["events"] if e["kind"] == "api_errors"]
    assert timeouts and all(e["detail"].startswith("timeout:") for e in timeouts)
    assert 2 <= len(timeouts) < 20  # retried, then stopped by the budget, not by the retries
    lines = read_transcript(repo)
    assert lines and all("error" in line for line in lines)
    assert lines[-1]["request"]["tool_choice"] == "none"  # the wrap-up step was tried once
    assert took < 12, f"the budget of 2 s took {took:.1f} s to end the goal"


# --- bad values ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flag", "value", "key"),
    [
        ("--max-output-tokens", "0", "max_output_tokens"),
        ("--request-timeout", "-1", "request_timeout_s"),
        ("--connect-timeout", "0", "connect_timeout_s"),
    ],
)
def test_a_bad_flag_value_is_a_clear_config_error(flag, value, key, make_repo, run_relay):
    repo = make_repo()
    code, _out, err = run_relay(["run", GOAL, "--repo", repo, "--model", "openai:m", flag, value])
    assert code == 1 and "Traceback" not in err
    assert key in err and value in err and "greater than 0" in flat(err)


@pytest.mark.parametrize(
    ("yaml_value", "shown"),
    [("request_timeout_s: '60'", "'60'"), ("max_output_tokens: 1.5", "1.5")],
)
def test_a_bad_value_in_relay_yaml_is_a_clear_config_error(yaml_value, shown, make_repo, run_relay):
    repo = make_repo()
    (repo / "relay.yaml").write_text(yaml_value + "\n", encoding="utf-8")
    code, _out, err = run_relay(
        ["run", GOAL, "--repo", repo, "--model", "openai:m", "--allow-dirty"]
    )
    assert code == 1 and "Traceback" not in err
    assert yaml_value.split(":")[0] in err and shown in err


# --- a forced tool_choice refused ---------------------------------------------------------


def error_body(provider: str, **error: Any) -> dict[str, Any]:
    """An error answer of ``provider``'s shape with ``error``'s fields."""
    if provider == "anthropic":
        return {"type": "error", "error": {"type": "invalid_request_error", **error}}
    return {"error": {"type": "invalid_request_error", "param": None, "code": None, **error}}


NAMED_BY = {
    "param": {"param": "tool_choice", "message": "Invalid value."},
    "code": {"code": "unsupported_tool_choice", "message": "Invalid value."},
    "type": {"type": "tool_choice_error", "message": "Not supported."},
    "message": {"message": "tool_choice 'required' is not supported by this template"},
}


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("status", [400, 422, 500])
@pytest.mark.parametrize("named_by", sorted(NAMED_BY))
def test_a_refused_forced_tool_choice_is_recognised(provider, status, named_by, httpserver):
    body = error_body(provider, **NAMED_BY[named_by])
    httpserver.expect_request(ENDPOINT[provider]).respond_with_json(body, status=status)
    model = create_model(f"{provider}:m", base_url=base_url(httpserver, provider))
    with pytest.raises(ForcedToolChoiceRejected) as info:
        model.complete(FORCED)
    assert not info.value.transient  # never retried as transient
    assert str(status) in info.value.message


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_500_that_names_no_tool_choice_stays_transient(provider, httpserver) -> None:
    body = error_body(provider, type="server_error", message="out of memory")
    httpserver.expect_request(ENDPOINT[provider]).respond_with_json(body, status=500)
    model = create_model(f"{provider}:m", base_url=base_url(httpserver, provider))
    with pytest.raises(ModelError) as info:
        model.complete(FORCED)
    assert not isinstance(info.value, ForcedToolChoiceRejected)
    assert info.value.kind == "server" and info.value.transient


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_unforced_request_is_never_a_forcing_refusal(provider, httpserver) -> None:
    body = error_body(provider, message="tool_choice is broken")
    httpserver.expect_request(ENDPOINT[provider]).respond_with_json(body, status=500)
    model = create_model(f"{provider}:m", base_url=base_url(httpserver, provider))
    unforced = Request(FORCED.system, FORCED.messages, FORCED.tools, "auto")
    with pytest.raises(ModelError) as info:
        model.complete(unforced)
    assert not isinstance(info.value, ForcedToolChoiceRejected) and info.value.transient


def test_a_plain_text_500_naming_tool_choice_is_recognised(httpserver) -> None:
    httpserver.expect_request(ENDPOINT["openai"]).respond_with_data(
        "tool_choice required is not supported", status=500
    )
    model = create_model("openai:m", base_url=base_url(httpserver, "openai"))
    with pytest.raises(ForcedToolChoiceRejected):
        model.complete(FORCED)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_server_that_answers_forcing_with_500_is_used_without_forcing(
    provider, httpserver, make_repo, run_relay
) -> None:
    """Issue 14: llama-cpp-python's chatml-function-calling answers a forced tool_choice with
    HTTP 500; relay retried it as a server error until the retries ran out."""
    answers = [
        Response(tool_calls=(ToolCall("c1", "write_file", {"path": "notes.txt", "content": "hello\n"}),)),
        Response(tool_calls=(ToolCall("c2", "update_goal", {"status": "complete", "summary": "done"}),)),
    ]  # fmt: skip
    seen: list[Any] = []

    def server(request: WireRequest) -> WireResponse:
        body = request.get_json()
        seen.append(body.get("tool_choice"))
        if body.get("tool_choice") in ("required", {"type": "any"}):
            error = error_body(provider, message="tool_choice: forcing is not supported")
            return WireResponse(json.dumps(error), 500, content_type="application/json")
        answer = answers.pop(0)
        wire = anthropic_body(answer, "m") if provider == "anthropic" else openai_body(answer, "m")
        return WireResponse(json.dumps(wire), 200, content_type="application/json")

    httpserver.expect_request(ENDPOINT[provider]).respond_with_handler(server)
    repo = make_repo(config={**NOTES, "force_tool_choice": True})
    code, data, _ = run_json(
        run_relay, GOAL, "--repo", repo, "--model", f"{provider}:m",
        "--base-url", base_url(httpserver, provider),
    )  # fmt: skip
    assert (code, data["status"]) == (0, "complete")
    assert len(seen) == 3  # one refused forced request, then two without forcing
    assert not [e for e in data["events"] if e["kind"] == "api_errors"]
    warnings = [e["detail"] for e in data["events"] if e["kind"] == "warning"]
    assert any("forced tool choice" in w and "500" in w for w in warnings)
