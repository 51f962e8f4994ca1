"""The real SDKs (anthropic, openai) against relay.testing.FakeProvider over loopback HTTP:
whole goal runs from the CLI, every error kind with its status, exit code and request count
(SPEC §7.5, §7.6, §12)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import call, complete, git, read_transcript, respond

from relay.data import data_dir
from relay.testing import FakeProvider

GOAL = "Create notes.txt saying hello."
NOTES = {"deliverables": [{"file": "notes.txt", "contains": "hello"}]}
WRITE = respond(call("write_file", path="notes.txt", content="hello\n"))
PROVIDERS = ["anthropic", "openai"]
ENDPOINT = {"anthropic": "/v1/messages", "openai": "/v1/chat/completions"}


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_PROFILE",
        "ANTHROPIC_CONFIG_DIR",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-secret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")


@pytest.fixture()
def relay_model(run_relay):
    def runner(repo: Path, fake: FakeProvider, provider: str, *extra: str, goal: str = GOAL):
        url = fake.anthropic_url if provider == "anthropic" else fake.openai_url
        code, out, err = run_relay(
            [
                "run",
                goal,
                "--repo",
                repo,
                "--model",
                f"{provider}:test-model",
                "--base-url",
                url,
                "--json",
                *extra,
            ]
        )
        assert "Traceback" not in err, err
        return code, json.loads(out), err

    return runner


@pytest.mark.parametrize("provider", PROVIDERS)
def test_fizzbuzz_example_completes_over_real_http(provider, tmp_path, relay_model):
    example = data_dir("examples") / "fizzbuzz"
    repo = tmp_path / "fizz"
    shutil.copytree(example / "repo", repo)
    shutil.copy(example / "goal.md", repo / "GOAL.md")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.invalid")
    git(repo, "config", "user.name", "t")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    with FakeProvider(example / "script.yaml") as fake:
        url = fake.anthropic_url if provider == "anthropic" else fake.openai_url
        from relay import cli

        code = cli.main(
            [
                "run",
                "--goal-file",
                str(repo / "GOAL.md"),
                "--repo",
                str(repo),
                "--model",
                f"{provider}:test-model",
                "--base-url",
                url,
                "--json",
            ]
        )
    assert code == 0
    assert (repo / "fizzbuzz.py").exists()
    assert fake.paths() == [ENDPOINT[provider]] * 9
    first = fake.requests[0]
    # the key goes in a header, never the body; tools are offered in the provider's format
    assert "sk-" not in json.dumps(first.body)
    if provider == "anthropic":
        assert first.headers["authorization"] == "Bearer sk-ant-test-secret"
        assert first.body["tools"][0]["input_schema"]["type"] == "object"
        assert first.body["system"][0]["cache_control"] == {"type": "ephemeral"}
        assert first.body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    else:
        assert first.headers["authorization"] == "Bearer sk-test-secret"
        assert first.body["tools"][0]["type"] == "function"
        assert first.body["messages"][0]["role"] == "system"
    # tool results go back as the provider expects
    later = fake.requests[2].body["messages"]
    if provider == "anthropic":
        assert any(
            b.get("type") == "tool_result"
            for m in later
            for b in m["content"]
            if isinstance(m["content"], list)
        )
    else:
        assert any(m["role"] == "tool" for m in later)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_quota_is_fatal_after_one_request(provider, make_repo, relay_model):
    repo = make_repo(config=NOTES)
    with FakeProvider({"responses": [{"error": "insufficient_quota"}, WRITE, complete()]}) as fake:
        code, data, _ = relay_model(repo, fake, provider)
    assert (code, data["status"]) == (7, "failed")
    assert "quota" in data["message"].lower() or "spend" in data["message"].lower()
    assert len(fake.requests) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_rate_limit_with_retry_after_is_waited_then_the_goal_completes(
    provider, make_repo, relay_model
):
    repo = make_repo(config=NOTES)
    script = {"responses": [{"error": "rate_limit", "retry_after_s": 0.2}, WRITE, complete()]}
    with FakeProvider(script) as fake:
        code, data, _ = relay_model(repo, fake, provider)
    assert (code, data["status"]) == (0, "complete")
    assert len(fake.requests) == 3
    gap = [e for e in data["events"] if e["kind"] == "api_errors"]
    assert len(gap) == 1 and "rate_limit" in gap[0]["detail"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_retry_after_beyond_the_cap_stops_without_waiting(provider, make_repo, relay_model):
    repo = make_repo(config=NOTES)
    script = {"responses": [{"error": "rate_limit", "retry_after_s": 3600}, WRITE, complete()]}
    with FakeProvider(script) as fake:
        code, data, _ = relay_model(repo, fake, provider)
    assert (code, data["status"], data["reason"]) == (7, "failed", "rate_limited")
    assert len(fake.requests) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_overload_is_retried(provider, make_repo, relay_model):
    repo = make_repo(config={**NOTES, "limits": {"api_backoff_s": 0.01}})
    script = {"responses": [{"error": "overloaded"}, {"error": "overloaded"}, WRITE, complete()]}
    with FakeProvider(script) as fake:
        code, data, _ = relay_model(repo, fake, provider)
    assert (code, data["status"]) == (0, "complete")
    assert len(fake.requests) == 4


@pytest.mark.parametrize("provider", PROVIDERS)
def test_overload_that_does_not_end_stops_after_the_retries(provider, make_repo, relay_model):
    repo = make_repo(config={**NOTES, "limits": {"api_backoff_s": 0.01, "api_retries": 2}})
    script = {"responses": [{"repeat": 10, "response": {"error": "overloaded"}}]}
    with FakeProvider(script) as fake:
        code, data, _ = relay_model(repo, fake, provider)
    assert (code, data["status"], data["reason"]) == (7, "failed", "api_unavailable")
    assert len(fake.requests) == 3


@pytest.mark.parametrize("provider", PROVIDERS)
def test_auth_error_is_fatal_at_once(provider, make_repo, relay_model):
    repo = make_repo(config=NOTES)
    with FakeProvider({"responses": [{"error": "auth"}, WRITE, complete()]}) as fake:
        code, data, _ = relay_model(repo, fake, provider)
    assert (code, data["status"], data["reason"]) == (7, "failed", "auth")
    assert len(fake.requests) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_connection_drop_is_transient(provider, make_repo, relay_model):
    repo = make_repo(config={**NOTES, "limits": {"api_backoff_s": 0.01}})
    with FakeProvider({"responses": [{"error": "connection"}, WRITE, complete()]}) as fake:
        code, data, _ = relay_model(repo, fake, provider)
    assert (code, data["status"]) == (0, "complete")
    assert len(fake.requests) == 3


@pytest.mark.parametrize("provider", PROVIDERS)
def test_forced_tool_choice_rejection_falls_back_once(provider, make_repo, relay_model):
    repo = make_repo(config={**NOTES, "force_tool_choice": True})
    script = {"rejects_forced_tool_choice": True, "responses": [WRITE, complete()]}
    with FakeProvider(script) as fake:
        code, data, _ = relay_model(repo, fake, provider)
    assert (code, data["status"]) == (0, "complete")
    assert len(fake.requests) == 3  # rejected, repeated without forcing, then the claim
    forced = fake.requests[0].body["tool_choice"]
    if provider == "anthropic":
        assert forced == {"type": "any"}
        assert fake.requests[0].body["thinking"] == {"type": "disabled"}
        assert fake.requests[1].body["tool_choice"] == {"type": "auto"}
    else:
        assert forced == "required" and fake.requests[1].body["tool_choice"] == "auto"
    assert any("tool_choice" in e["detail"] for e in data["events"] if e["kind"] == "warning")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_prompt_caching_usage_is_accounted_and_cache_reads_are_not_budgeted(
    provider, make_repo, relay_model
):
    repo = make_repo(config={**NOTES, "limits": {"token_budget": 10_000}})
    usage = {"input": 300, "cached": 5000, "cache_write": 200, "output": 50}
    script = {"responses": [{**WRITE, "usage": usage}, {**complete(), "usage": usage}]}
    with FakeProvider(script) as fake:
        code, data, _ = relay_model(repo, fake, provider)
    assert code == 0
    tokens = data["tokens"]
    assert tokens["cached_input"] == 10_000
    assert tokens["output"] == 100
    if provider == "anthropic":
        assert (tokens["uncached_input"], tokens["cache_write"]) == (600, 400)
    else:  # Chat Completions reports cache reads only: prompt = uncached + cached
        assert tokens["uncached_input"] + tokens["cache_write"] == 1000


@pytest.mark.parametrize("provider", PROVIDERS)
def test_debug_transcripts_hold_the_wire_exchange_without_the_key(provider, make_repo, relay_model):
    repo = make_repo(config=NOTES)
    with FakeProvider({"responses": [WRITE, complete()]}) as fake:
        code, _, _ = relay_model(repo, fake, provider, "--debug")
    assert code == 0
    rows = read_transcript(repo)
    assert all("wire" in r for r in rows)
    text = json.dumps(rows)
    assert "secret" not in text and "[redacted]" in text
    assert rows[0]["wire"]["response"]["status"] == 200


@pytest.mark.parametrize(
    ("provider", "variable"), [("anthropic", "ANTHROPIC_API_KEY"), ("openai", "OPENAI_API_KEY")]
)
def test_a_missing_key_is_a_clear_error_before_any_work(
    provider, variable, make_repo, run_relay, monkeypatch
):
    monkeypatch.delenv(variable)
    repo = make_repo(config=NOTES)
    code, _, err = run_relay(["run", GOAL, "--repo", repo, "--model", f"{provider}:m"])
    assert code == 1 and variable in err
    assert not (repo / ".relay").exists()


def test_a_local_openai_compatible_server_needs_no_key(make_repo, relay_model, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    repo = make_repo(config=NOTES)
    with FakeProvider({"responses": [WRITE, complete()]}) as fake:
        code, _, _ = relay_model(repo, fake, "openai")
    assert code == 0
    assert fake.requests[0].headers["authorization"] == "Bearer not-needed"


def test_unknown_provider_is_refused(make_repo, run_relay):
    repo = make_repo(config=NOTES)
    code, _, err = run_relay(["run", GOAL, "--repo", repo, "--model", "gemini:pro"])
    assert code == 1 and "unknown provider 'gemini'" in err


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("bad_body", ["", "<html>bad gateway</html>", "{}"])
def test_an_unreadable_answer_is_a_transient_error_not_a_crash(
    provider, bad_body, make_repo, run_relay, httpserver
):
    from relay.models.base import Response, ToolCall
    from relay.testing import anthropic_body, openai_body

    repo = make_repo(config={**NOTES, "limits": {"api_backoff_s": 0.01}})
    path = ENDPOINT[provider]
    write = Response(
        tool_calls=(ToolCall("c1", "write_file", {"path": "notes.txt", "content": "hello\n"}),)
    )
    claim = Response(
        tool_calls=(ToolCall("c2", "update_goal", {"status": "complete", "summary": "ok"}),)
    )
    body = anthropic_body if provider == "anthropic" else openai_body
    httpserver.expect_ordered_request(path).respond_with_data(
        bad_body, status=200, content_type="application/json"
    )
    httpserver.expect_ordered_request(path).respond_with_json(body(write, "m"))
    httpserver.expect_ordered_request(path).respond_with_json(body(claim, "m"))
    url = httpserver.url_for("/") if provider == "anthropic" else httpserver.url_for("/v1")
    code, out, err = run_relay(
        [
            "run",
            GOAL,
            "--repo",
            repo,
            "--model",
            f"{provider}:m",
            "--base-url",
            url.rstrip("/"),
            "--json",
        ]
    )
    assert "Traceback" not in err
    data = json.loads(out)
    assert (code, data["status"]) == (0, "complete"), data["message"]
    assert any("cannot read" in e["detail"] for e in data["events"] if e["kind"] == "api_errors")


def test_tool_call_arguments_that_are_not_json_are_named_to_the_model(
    make_repo, run_relay, httpserver
):
    repo = make_repo(config=NOTES)
    broken = {
        "id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None,
            "tool_calls": [{"id": "c1", "type": "function",
                            "function": {"name": "write_file", "arguments": "{path: notes"}}]}}],
    }  # fmt: skip
    from relay.models.base import Response, ToolCall
    from relay.testing import openai_body

    write = Response(
        tool_calls=(ToolCall("c2", "write_file", {"path": "notes.txt", "content": "hello\n"}),)
    )
    claim = Response(
        tool_calls=(ToolCall("c3", "update_goal", {"status": "complete", "summary": "ok"}),)
    )
    for answer in (broken, openai_body(write, "m"), openai_body(claim, "m")):
        httpserver.expect_ordered_request("/v1/chat/completions").respond_with_json(answer)
    code, _, _ = run_relay(
        ["run", GOAL, "--repo", repo, "--model", "openai:m", "--base-url",
         httpserver.url_for("/v1"), "--json"]
    )  # fmt: skip
    assert code == 0
    second = json.loads(httpserver.log[1][0].get_data())
    tool_message = next(m for m in second["messages"] if m["role"] == "tool")
    assert "not valid JSON" in tool_message["content"]
