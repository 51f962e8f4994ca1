"""Tool calls written as text, end to end (issue 14): the scripted model (SPEC §13) and the real
openai SDK against a loopback OpenAI-compatible server. The model is told in the next step, the
user is warned once after 2 rounds (run output, ``relay status``, the JSON), the goal's end names
the cause, and ``tools.parse_text_calls`` runs such calls through the same rules as real ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import call, complete, flat, load_json, read_transcript, respond, state_dir

from relay.models.base import Response, ToolCall
from relay.testing import openai_body

GOAL = "Create hello.txt containing hello."
NOTES = {"deliverables": [{"file": "hello.txt", "contains": "hello"}]}
CLAIM = (
    '```json\n{"name": "update_goal", "arguments": {"status": "complete", "summary": "done"}}\n```'
)
WRITE_TAG = (
    '<tool_call>\n{"name": "write_file", "arguments": '
    '{"path": "hello.txt", "content": "hello\\n"}}\n</tool_call>'
)
NUDGE = "[relay] You called no tool."
WARNING_HEAD = "the model wrote tool calls as text"
FIXES = ("--jinja", "--tool-call-parser", "--force-tool-choice", "Ollama", "LM Studio")


def _user_texts(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


def _warnings(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["kind"] == "warning" and e["detail"].startswith(WARNING_HEAD)]


def test_text_calls_are_told_to_the_model_warned_once_and_named_at_the_end(
    make_repo, write_script, relay_run, run_relay
) -> None:
    repo = make_repo(config=NOTES)
    script = write_script(
        {"responses": [respond(text=f"I am done.\n{CLAIM}")], "when_exhausted": "repeat_last"}
    )
    code, data, err = relay_run(repo, script, GOAL)

    assert (code, data["status"], data["reason"]) == (4, "limit_reached", "no_progress")
    # the model is told, in the next step of the same round, that no tool was called
    rows = read_transcript(repo)
    first_round = [r for r in rows if r["round"] == 1]
    assert [r["step"] for r in first_round] == [1, 2]  # told once, then the round ends
    assert not any(NUDGE in t for t in _user_texts(first_round[0]["request"]))
    nudge = _user_texts(first_round[1]["request"])[-1]
    assert nudge.startswith(NUDGE) and "update_goal as fenced JSON" in nudge
    assert "tool-calling interface" in nudge
    # the user is warned once, in round 2, with what to change
    warnings = _warnings(data["events"])
    assert len(warnings) == 1 and warnings[0]["round"] == 2
    assert all(fix in warnings[0]["detail"] for fix in FIXES)
    assert flat(err).count(WARNING_HEAD) == 1
    assert data["text_tool_calls"] == {"rounds": [1, 2, 3, 4, 5], "warning": warnings[0]["detail"]}
    # the end names the cause, not only "no step was taken in 5 rounds"
    assert "no step was taken in 5 rounds" in data["message"]
    assert "wrote its tool calls as text" in data["message"] and "--jinja" in data["message"]
    assert "wrote its tool calls as text" in flat(err)
    summary = next((state_dir(repo) / "runs").glob("*/summary.md")).read_text()
    assert "No audit ran (the model did not claim completion)" not in summary
    assert "never called update_goal as a tool" in summary
    # relay status, as JSON and for a person
    code, out, _ = run_relay(["status", "--repo", repo, "--json"])
    assert load_json(out)["text_tool_calls"] == data["text_tool_calls"]
    code, shown, _ = run_relay(["status", "--repo", repo])
    assert "wrote its tool calls as text" in flat(shown)
    ended = [e["detail"] for e in data["events"] if e["kind"] == "round_ended"]
    assert ended[0].startswith("text_tool_call;")


def test_a_model_that_calls_after_being_told_goes_on_and_the_warning_stays_visible(
    make_repo, write_script, relay_run, run_relay
) -> None:
    repo = make_repo(config=NOTES)
    text = respond(text=f"Writing it.\n{WRITE_TAG}")
    write = respond(call("write_file", path="hello.txt", content="hello\n"))
    script = write_script([text, text, text, write, complete()])  # rounds 1 (told, again), 2
    code, data, err = relay_run(repo, script, GOAL)

    assert (code, data["status"]) == (0, "complete")
    assert data["rounds"] == 2 and (repo / "hello.txt").read_text() == "hello\n"
    round_two = [r for r in read_transcript(repo) if r["round"] == 2]
    assert _user_texts(round_two[1]["request"])[-1].startswith(NUDGE)  # told, then it called
    warnings = _warnings(data["events"])
    assert len(warnings) == 1 and data["text_tool_calls"]["rounds"] == [1, 2]
    assert "rounds 1, 2" in warnings[0]["detail"]
    assert f"warning: {WARNING_HEAD}" in flat(err)  # at the end of the run too
    _, shown, _ = run_relay(["status", "--repo", repo])
    assert f"warning: {WARNING_HEAD}" in flat(shown)


def test_one_round_of_text_calls_does_not_warn(make_repo, write_script, relay_run) -> None:
    repo = make_repo(config=NOTES)
    write = respond(call("write_file", path="hello.txt", content="hello\n"))
    script = write_script([respond(text=CLAIM), write, complete()])
    code, data, _ = relay_run(repo, script, GOAL)
    assert code == 0
    assert data["text_tool_calls"] == {"rounds": [1], "warning": None}
    assert _warnings(data["events"]) == []


def test_prose_that_names_a_tool_is_no_text_call(make_repo, write_script, relay_run) -> None:
    repo = make_repo(config=NOTES)
    script = write_script([respond(text="I will call update_goal when the shell tool is done.")])
    code, data, _ = relay_run(repo, script, GOAL, "--max-no-progress", "1")
    assert (code, data["reason"]) == (4, "no_progress")
    assert data["text_tool_calls"] is None
    assert "as text" not in data["message"]
    assert [r["step"] for r in read_transcript(repo)] == [1]  # not told: the round ended


@pytest.mark.parametrize("how", ["config", "flag"])
def test_parse_text_calls_runs_them_through_the_same_rules(
    how: str, make_repo, write_script, relay_run
) -> None:
    config: dict[str, Any] = dict(NOTES)
    extra: list[str] = []
    if how == "config":
        config["tools"] = {"parse_text_calls": True}
    else:
        extra.append("--parse-text-calls")
    repo = make_repo(config=config)
    protected = (
        '<tool_call>{"name": "write_file", "arguments": {"path": "relay.yaml", '
        '"content": "x: 1\\n"}}</tool_call>'
    )
    script = write_script([respond(text=protected), respond(text=WRITE_TAG), respond(text=CLAIM)])
    code, data, _ = relay_run(repo, script, GOAL, *extra)

    assert (code, data["status"]) == (0, "complete"), data["message"]
    assert (repo / "hello.txt").read_text() == "hello\n"
    assert "x: 1" not in (repo / "relay.yaml").read_text()  # the protected path was refused
    assert data["audit"]["passed"] is True  # the claim from text went through the audit
    rows = read_transcript(repo)
    second = rows[1]["request"]["messages"]
    assistant = next(m for m in second if m["role"] == "assistant")
    assert assistant["tool_calls"][0]["name"] == "write_file"
    result = next(m for m in second if m["role"] == "tool")
    assert result["is_error"] and "protected" in result["content"]
    details = [e["detail"] for e in data["events"] if e["kind"] == "text_tool_call"]
    assert len(details) == 3 and all("run as real tool calls" in d for d in details)
    assert not any(NUDGE in t for r in rows for t in _user_texts(r["request"]))


def test_the_store_marks_the_calls_taken_from_text(make_repo, write_script, relay_run) -> None:
    from relay.store import Store

    repo = make_repo(config={**NOTES, "tools": {"parse_text_calls": True}})
    script = write_script([respond(text=WRITE_TAG), complete()])
    code, data, _ = relay_run(repo, script, GOAL)
    assert code == 0
    store = Store(state_dir(repo) / "relay.db")
    steps = store.steps(data["goal_id"])
    assert steps[0]["actions"][0]["from_text"] is True
    assert "from_text" not in steps[1]["actions"][0]


# the real openai SDK against a loopback OpenAI-compatible server --------------------------------


def _text_answer(text: str) -> dict[str, Any]:
    return openai_body(Response(text=text), "qwen")


def _run_openai(run_relay, repo: Path, url: str, *extra: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = run_relay(
        ["run", GOAL, "--repo", repo, "--model", "openai:qwen", "--base-url", url, "--json", *extra]
    )
    assert "Traceback" not in err, err
    return code, load_json(out), err


@pytest.fixture()
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def test_a_local_server_without_a_tool_parser_is_named(
    make_repo, run_relay, httpserver, no_keys
) -> None:
    repo = make_repo(config={**NOTES, "limits": {"max_no_progress": 2}})
    answer = f"<tool_call>\n{json.dumps({'name': 'update_goal', 'arguments': {'status': 'complete', 'summary': 'ok'}})}\n</tool_call>"
    for _ in range(4):  # 2 rounds of 2 steps
        httpserver.expect_ordered_request("/v1/chat/completions").respond_with_json(
            _text_answer(answer)
        )
    code, data, err = _run_openai(run_relay, repo, httpserver.url_for("/v1"))

    assert (code, data["reason"]) == (4, "no_progress")
    assert len(httpserver.log) == 4
    second = json.loads(httpserver.log[1][0].get_data())
    assert second["messages"][-2] == {"role": "assistant", "content": answer}
    assert second["messages"][-1]["role"] == "user"
    assert second["messages"][-1]["content"].startswith(NUDGE)
    assert "update_goal as <tool_call> tag" in second["messages"][-1]["content"]
    assert len(_warnings(data["events"])) == 1 and flat(err).count(WARNING_HEAD) == 1
    assert data["text_tool_calls"]["rounds"] == [1, 2]
    assert "--jinja" in data["message"]


def test_parse_text_calls_over_a_local_server(make_repo, run_relay, httpserver, no_keys) -> None:
    repo = make_repo(config=NOTES)
    claim = Response(
        tool_calls=(ToolCall("c9", "update_goal", {"status": "complete", "summary": "ok"}),)
    )
    httpserver.expect_ordered_request("/v1/chat/completions").respond_with_json(
        _text_answer(WRITE_TAG)
    )
    httpserver.expect_ordered_request("/v1/chat/completions").respond_with_json(
        openai_body(claim, "qwen")
    )
    code, data, _ = _run_openai(run_relay, repo, httpserver.url_for("/v1"), "--parse-text-calls")

    assert (code, data["status"]) == (0, "complete"), data["message"]
    assert (repo / "hello.txt").read_text() == "hello\n"
    second = json.loads(httpserver.log[1][0].get_data())
    assistant, result = second["messages"][-2:]
    assert assistant["tool_calls"][0]["function"]["name"] == "write_file"
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"])["path"] == "hello.txt"
    assert result["role"] == "tool" and result["tool_call_id"] == assistant["tool_calls"][0]["id"]
    assert "wrote" in result["content"]


@pytest.mark.parametrize("parse", [False, True])
def test_the_anthropic_sdk_carries_the_message_and_the_calls_from_text(
    parse: bool, make_repo, run_relay, monkeypatch: pytest.MonkeyPatch
) -> None:
    from relay.testing import FakeProvider

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    repo = make_repo(config={**NOTES, "tools": {"parse_text_calls": parse}})
    write = respond(call("write_file", path="hello.txt", content="hello\n"))
    with FakeProvider({"responses": [respond(text=WRITE_TAG), write, complete()]}) as fake:
        code, out, err = run_relay(
            ["run", GOAL, "--repo", repo, "--model", "anthropic:m", "--base-url",
             fake.anthropic_url, "--json"]
        )  # fmt: skip
        second = fake.requests[1].body["messages"]
    assert "Traceback" not in err and code == 0, err
    assert load_json(out)["status"] == "complete"
    if parse:  # the call from text went out as a tool_use block, with its tool_result
        use = next(b for b in second[-2]["content"] if b["type"] == "tool_use")
        assert use["name"] == "write_file" and use["id"].startswith("text-")
        assert second[-1]["content"][0]["tool_use_id"] == use["id"]
    else:
        assert second[-1]["role"] == "user"
        assert NUDGE in json.dumps(second[-1]["content"])
