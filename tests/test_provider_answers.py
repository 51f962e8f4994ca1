"""Provider answers relay cannot read (issue 13, item 16): an answer from a provider, a proxy or
an OpenAI-compatible server whose fields have the wrong shape (``content: 12345``, no choice, a
usage count that is text, ...) is a transient model error naming what was wrong: retried by the
retry policy (SPEC §7.6), then the goal ends ``failed`` with that message. Never an exception in
the provider, the model-call path or the display. What is readable but unusual (no usage, tool
call arguments that are not a JSON object, a tool call without an id) is taken as it is."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import flat

from relay.errors import ModelError
from relay.models.base import Message, Request, Response, ToolCall, Usage
from relay.tools import WORKER_TOOLS
from relay.tools.specs import INVALID_JSON

GOAL = "Create notes.txt saying hello."
NOTES = {"deliverables": [{"file": "notes.txt", "contains": "hello"}]}
ENDPOINT = {"anthropic": "/v1/messages", "openai": "/v1/chat/completions"}
REQUEST = Request("You are a worker.", (Message("user", "Begin."),), WORKER_TOOLS)


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-secret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")


def base_url(httpserver: Any, provider: str) -> str:
    url = httpserver.url_for("/") if provider == "anthropic" else httpserver.url_for("/v1")
    return url.rstrip("/")


def model_for(provider: str, httpserver: Any) -> Any:
    if provider == "anthropic":
        from relay.models.anthropic_messages import AnthropicModel

        return AnthropicModel("m", base_url=base_url(httpserver, provider))
    from relay.models.openai_chat import OpenAIChatModel

    return OpenAIChatModel("m", base_url=base_url(httpserver, provider))


def openai_answer(**message: Any) -> dict[str, Any]:
    """A Chat Completions answer whose message has ``message``'s fields."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", **message}}
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
    }


def anthropic_answer(content: Any, **extra: Any) -> dict[str, Any]:
    """A Messages API answer with ``content`` (and ``extra`` top-level fields)."""
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": content,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 10},
        **extra,
    }


def fn_call(name: Any = "write_file", arguments: Any = '{"path": "a"}') -> Any:
    return {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}


def _openai_without(key: str) -> dict[str, Any]:
    answer = openai_answer(content="hi")
    del answer[key]
    return answer


def _openai_usage(usage: Any) -> dict[str, Any]:
    return {**openai_answer(content="hi"), "usage": usage}


UNREADABLE_OPENAI = {
    "content is a number": (openai_answer(content=12345), "content"),
    "content is an object": (openai_answer(content={"text": "hi"}), "content"),
    "no choice": ({**openai_answer(content="hi"), "choices": []}, "choices"),
    "choices missing": (_openai_without("choices"), "choices"),
    "choices is text": ({**openai_answer(content="hi"), "choices": "hi"}, "choices"),
    "a choice is text": ({**openai_answer(content="hi"), "choices": ["hi"]}, "choices.0"),
    "no message": (
        {**openai_answer(content="hi"), "choices": [{"index": 0, "finish_reason": "stop"}]},
        "message",
    ),
    "tool_calls is text": (openai_answer(content=None, tool_calls="x"), "tool_calls"),
    "a tool call without function": (
        openai_answer(content=None, tool_calls=[{"id": "c1", "type": "function"}]),
        "function",
    ),
    "a tool name that is a number": (
        openai_answer(content=None, tool_calls=[fn_call(name=5)]),
        "name",
    ),
    "usage is text": (_openai_usage("many"), "usage"),
    "a token count that is text": (
        _openai_usage({"prompt_tokens": "lots", "completion_tokens": 1}),
        "prompt_tokens",
    ),
    "a negative token count": (
        _openai_usage({"prompt_tokens": 10, "completion_tokens": -4}),
        "completion_tokens",
    ),
    "the answer is a list": ([], "answer"),
    "the answer is null": (None, "answer"),
}

UNREADABLE_ANTHROPIC = {
    "content is a number": (anthropic_answer(12345), "content"),
    "content is text": (anthropic_answer("hello"), "content"),
    "a text block's text is a number": (
        anthropic_answer([{"type": "text", "text": 12345}]),
        "text",
    ),
    "a block without type": (anthropic_answer([{"text": "hi"}]), "type"),
    "a block that is a number": (anthropic_answer([5]), "content.0"),
    "a tool_use without name": (
        anthropic_answer([{"type": "tool_use", "id": "t1", "input": {}}]),
        "name",
    ),
    "usage missing its counts": (anthropic_answer([], usage={"output_tokens": "x"}), "usage"),
    "a negative token count": (
        anthropic_answer([], usage={"input_tokens": -1, "output_tokens": 1}),
        "input_tokens",
    ),
    "stop_reason is a list": (anthropic_answer([], stop_reason=["end_turn"]), "stop_reason"),
    "the answer is a list": ([], "answer"),
}


def _expect_unreadable(provider: str, answer: Any, field: str, httpserver: Any) -> ModelError:
    httpserver.expect_request(ENDPOINT[provider]).respond_with_json(answer)
    with pytest.raises(ModelError) as caught:
        model_for(provider, httpserver).complete(REQUEST)
    exc = caught.value
    assert exc.transient, exc.kind
    assert "cannot read" in exc.message, exc.message
    assert field in exc.message, exc.message
    return exc


@pytest.mark.parametrize("case", list(UNREADABLE_OPENAI))
def test_an_unreadable_openai_answer_is_a_transient_error_naming_the_field(case, httpserver):
    answer, field = UNREADABLE_OPENAI[case]
    _expect_unreadable("openai", answer, field, httpserver)


@pytest.mark.parametrize("case", list(UNREADABLE_ANTHROPIC))
def test_an_unreadable_anthropic_answer_is_a_transient_error_naming_the_field(case, httpserver):
    answer, field = UNREADABLE_ANTHROPIC[case]
    _expect_unreadable("anthropic", answer, field, httpserver)


def test_the_message_shows_the_bad_value(httpserver):
    exc = _expect_unreadable("openai", openai_answer(content=12345), "content", httpserver)
    assert "12345" in exc.message


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_an_answer_without_usage_is_estimated(provider, httpserver):
    if provider == "openai":
        answer = _openai_without("usage")
    else:
        answer = anthropic_answer([{"type": "text", "text": "hi"}])
        del answer["usage"]
    httpserver.expect_request(ENDPOINT[provider]).respond_with_json(answer)
    response = model_for(provider, httpserver).complete(REQUEST)
    assert response.text == "hi"
    assert response.usage.estimated
    assert response.usage.uncached_input > 0 and response.usage.output > 0


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ("{path: a", "not valid JSON"),
        ("[1, 2]", "not a JSON object"),
        (123, "not a JSON object"),
        ('"text"', "not a JSON object"),
    ],
)
def test_openai_arguments_that_are_not_an_object_are_named_to_the_model(
    arguments, said, httpserver
):
    answer = openai_answer(content=None, tool_calls=[fn_call(arguments=arguments)])
    httpserver.expect_request(ENDPOINT["openai"]).respond_with_json(answer)
    response = model_for("openai", httpserver).complete(REQUEST)
    (only,) = response.tool_calls
    assert said in only.arguments[INVALID_JSON]


def test_openai_arguments_sent_as_an_object_are_taken(httpserver):
    answer = openai_answer(content=None, tool_calls=[fn_call(arguments={"path": "a.txt"})])
    httpserver.expect_request(ENDPOINT["openai"]).respond_with_json(answer)
    response = model_for("openai", httpserver).complete(REQUEST)
    assert response.tool_calls[0].arguments == {"path": "a.txt"}


def test_openai_content_as_text_parts_is_joined(httpserver):
    parts = [{"type": "text", "text": "Looking "}, {"type": "text", "text": "around."}]
    httpserver.expect_request(ENDPOINT["openai"]).respond_with_json(openai_answer(content=parts))
    assert model_for("openai", httpserver).complete(REQUEST).text == "Looking around."


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_tool_call_without_an_id_gets_one(provider, httpserver):
    if provider == "openai":
        call = fn_call()
        del call["id"]
        answer = openai_answer(content=None, tool_calls=[call, fn_call()])
    else:
        blocks = [{"type": "tool_use", "name": "read_file", "input": {"path": "a"}}] * 2
        answer = anthropic_answer(blocks, stop_reason="tool_use")
    httpserver.expect_request(ENDPOINT[provider]).respond_with_json(answer)
    calls = model_for(provider, httpserver).complete(REQUEST).tool_calls
    ids = [c.id for c in calls]
    assert all(isinstance(i, str) and i for i in ids) and len(set(ids)) == 2, ids


def test_anthropic_input_that_is_not_an_object_is_named_to_the_model(httpserver):
    block = {"type": "tool_use", "id": "t1", "name": "write_file", "input": "path=a"}
    answer = anthropic_answer([block], stop_reason="tool_use")
    httpserver.expect_request(ENDPOINT["anthropic"]).respond_with_json(answer)
    (only,) = model_for("anthropic", httpserver).complete(REQUEST).tool_calls
    assert "'path=a'" in only.arguments[INVALID_JSON]


def test_anthropic_blocks_relay_does_not_use_are_skipped(httpserver):
    blocks = [
        {"type": "thinking", "thinking": "hm", "signature": "s"},
        {"type": "text", "text": "ok"},
    ]
    httpserver.expect_request(ENDPOINT["anthropic"]).respond_with_json(anthropic_answer(blocks))
    assert model_for("anthropic", httpserver).complete(REQUEST).text == "ok"


# the whole run ----------------------------------------------------------------------------------


def _run(run_relay: Any, repo: Path, provider: str, httpserver: Any, *extra: str) -> Any:
    return run_relay(
        [
            "run",
            GOAL,
            "--repo",
            repo,
            "--model",
            f"{provider}:m",
            "--base-url",
            base_url(httpserver, provider),
            *extra,
        ]
    )


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_provider_that_keeps_answering_content_12345_fails_the_goal_with_a_message(
    provider, make_repo, run_relay, httpserver
):
    repo = make_repo(config={**NOTES, "limits": {"api_backoff_s": 0.01, "api_retries": 2}})
    bad = openai_answer(content=12345) if provider == "openai" else anthropic_answer(12345)
    httpserver.expect_request(ENDPOINT[provider]).respond_with_json(bad)
    code, out, err = _run(run_relay, repo, provider, httpserver)  # the live display, not --json
    assert "Traceback" not in err and "AttributeError" not in err, err
    assert code == 7, err
    assert len(httpserver.log) == 3  # the first call and its two retries
    code, out, _ = run_relay(["status", "--repo", repo, "--json"])
    data = json.loads(out)
    assert (data["status"], data["reason"]) == ("failed", "api_unavailable")
    assert "cannot read" in data["message"] and "content" in data["message"], data["message"]
    assert "cannot read" in flat(err)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_one_unreadable_answer_is_retried_and_the_goal_completes(
    provider, make_repo, run_relay, httpserver
):
    from relay.testing import anthropic_body, openai_body

    repo = make_repo(config={**NOTES, "limits": {"api_backoff_s": 0.01}})
    body = anthropic_body if provider == "anthropic" else openai_body
    write = Response(
        tool_calls=(ToolCall("c1", "write_file", {"path": "notes.txt", "content": "hello\n"}),)
    )
    claim = Response(
        tool_calls=(ToolCall("c2", "update_goal", {"status": "complete", "summary": "ok"}),)
    )
    bad = openai_answer(content=12345) if provider == "openai" else anthropic_answer(12345)
    for answer in (bad, body(write, "m"), body(claim, "m")):
        httpserver.expect_ordered_request(ENDPOINT[provider]).respond_with_json(answer)
    code, _, err = _run(run_relay, repo, provider, httpserver)
    assert "Traceback" not in err, err
    assert code == 0, err
    assert (repo / "notes.txt").read_text() == "hello\n"


# the layers behind the providers ----------------------------------------------------------------


class _OddModel:
    """A model (a plug-in, a future provider) that returns what ``answers`` hold, in order."""

    name = "odd:m"

    def __init__(self, *answers: Response) -> None:
        self.answers = list(answers)
        self.calls = 0

    def complete(self, request: Request) -> Response:
        self.calls += 1
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


@pytest.mark.parametrize(
    ("odd", "named"),
    [
        (Response(text=12345), "text"),  # type: ignore[arg-type]
        (Response(tool_calls=[ToolCall("c", "shell", {})]), "tool_calls"),  # type: ignore[arg-type]
        (Response(tool_calls=(ToolCall("c", None, {}),)), "name"),  # type: ignore[arg-type]
        (Response(tool_calls=(ToolCall("c", "shell", "ls"),)), "arguments"),  # type: ignore[arg-type]
        (Response(usage=Usage(output="12")), "usage"),  # type: ignore[arg-type]
        (Response(usage=None), "usage"),  # type: ignore[arg-type]
        (Response(stop_reason=None), "stop_reason"),  # type: ignore[arg-type]
        ("just text", "Response"),
    ],
)
def test_the_model_call_path_treats_a_malformed_response_as_a_transient_error(odd, named):
    from relay.goal import GoalStatus
    from relay.loop_state import GoalEnded
    from relay.model_call import ModelCaller
    from relay.retry import RetryPolicy

    events: list[tuple[str, str]] = []

    class Goal:
        def count_model_call(self) -> None: ...

        def add_usage(self, usage: Usage, cost: float) -> None:
            raise AssertionError("a malformed response is not accounted")

    class Events:
        def add(self, kind: str, round_n: int | None, detail: str) -> None:
            events.append((kind, detail))

    class Transcript:
        def write(self, *args: Any, **kwargs: Any) -> None: ...

    model = _OddModel(odd)
    caller = ModelCaller(
        model,
        Goal(),  # type: ignore[arg-type]
        Events(),  # type: ignore[arg-type]
        Transcript(),  # type: ignore[arg-type]
        policy=RetryPolicy(retries=2, backoff_s=0.0),
        prices={},
        force_tool_choice=False,
        sleep=lambda s: None,
        rng=random.Random(1),
    )
    with pytest.raises(GoalEnded) as ended:
        caller.call(REQUEST, SimpleNamespace(n=1, api_errors=[]), 1)  # type: ignore[arg-type]
    stop = ended.value.stop
    assert (stop.status, stop.reason) == (GoalStatus.FAILED, "api_unavailable")
    assert model.calls == 3
    assert named in stop.message and "cannot read" in stop.message, stop.message
    assert [k for k, _ in events] == ["api_errors"] * 3


def test_the_display_shows_any_response_and_tool_call_without_an_exception():
    from rich.console import Console

    from relay.display import RichDisplay

    out = io.StringIO()
    display = RichDisplay(Console(file=out, width=200))
    display.round_started(1, 1, 50)
    display.step(1, 1, Response(text=12345))  # type: ignore[arg-type]
    display.step(1, 2, Response(text=None))  # type: ignore[arg-type]
    for call in (
        ToolCall("c1", "handoff", {"note": "   "}),
        ToolCall("c2", "handoff", {"note": 7}),
        ToolCall("c3", "shell", {"command": ["ls", "-l"]}),
        ToolCall("c4", "update_goal", {"status": None}),
        ToolCall("c5", 5, "x"),  # type: ignore[arg-type]
    ):
        display.tool_called(call, "result\nsecond line", False)
    display.tool_called(ToolCall("c6", "update_goal", {}), None, True)  # type: ignore[arg-type]
    shown = out.getvalue()
    assert "12345" in shown and "handoff 7" in shown and "shell ['ls', '-l']" in shown


# Error bodies with fields of another type (issue 14: llama.cpp's server sends a numeric code) --

LLAMA_CPP_ERROR = {
    "error": {"code": 500, "message": "tools param requires --jinja flag", "type": "server_error"}
}
"""llama.cpp's answer to a request with tools when it runs without ``--jinja`` (HTTP 500)."""


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (500, LLAMA_CPP_ERROR, "server"),
        (400, {"error": {"code": 400, "message": "bad", "type": 7}}, "bad_request"),
        (429, {"error": {"code": 1.5, "message": "slow down", "type": None}}, "rate_limit"),
        (
            400,
            {"error": {"type": "x", "details": {"error_code": 12}, "message": "m"}},
            "bad_request",
        ),
    ],
)
def test_an_error_body_whose_code_or_type_is_a_number_is_classified(
    provider, status, body, kind, httpserver
):
    httpserver.expect_request(ENDPOINT[provider]).respond_with_json(body, status=status)
    with pytest.raises(ModelError) as caught:
        model_for(provider, httpserver).complete(REQUEST)
    exc = caught.value
    assert exc.kind == kind, exc.message
    assert body["error"]["message"] in exc.message
    assert exc.code is None or isinstance(exc.code, str), exc.code
