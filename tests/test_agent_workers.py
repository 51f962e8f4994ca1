"""The real agent CLIs (Claude Code, Codex) run one round against relay's gateway serving a
scripted model (SPEC §13, §15): the script's ``shell``, ``write_file``, ``edit_file`` and
``update_goal`` become the agent's own tools and relay's MCP tool, the agent executes them,
and the goal-tool call reaches relay. Skips without the agents; fails with ``CI=true``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from agent_support import agent_binary, round_command, run_agent

from relay.gateway import Exchange, Forwarder, Gateway, GoalToolAnswer, Refusal, translator_for
from relay.models.scripted import ScriptedModel

SCRIPT = {
    "responses": [
        {
            "text": "Working.",
            "tool_calls": [{"name": "shell", "arguments": {"command": "echo hello > out.txt"}}],
            "usage": {"input": 1000, "output": 10},
        },
        {
            "tool_calls": [
                {
                    "name": "write_file",
                    "arguments": {"path": "sub/notes.txt", "content": 'it\'s "quoted"\n'},
                }
            ],
            "usage": {"input": 1100, "output": 20},
        },
        {
            "tool_calls": [
                {
                    "name": "edit_file",
                    "arguments": {"path": "sub/notes.txt", "old": "quoted", "new": "edited"},
                }
            ],
            "usage": {"input": 1200, "output": 30},
        },
        {
            "tool_calls": [
                {
                    "name": "update_goal",
                    "arguments": {"status": "complete", "summary": "out.txt written"},
                }
            ],
            "usage": {"input": 1300, "output": 40},
        },
        {"text": "Done.", "usage": {"input": 1400, "output": 50}},
    ]
}


def _round(
    tmp_path: Path, worker: str
) -> tuple[Path, list[dict], list[Exchange], list[tuple[str, dict]]]:
    binary = agent_binary(worker)
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    model = ScriptedModel.from_dict(SCRIPT)
    exchanges: list[Exchange] = []
    decided: list[tuple[str, dict]] = []

    def decide(name: str, arguments: dict) -> GoalToolAnswer:
        decided.append((name, arguments))
        return GoalToolAnswer("update_goal accepted: the goal is complete")

    forwarder = Forwarder(
        model, on_exchange=exchanges.append, translate=translator_for(model, str(repo))
    )
    with Gateway(forwarder, goal_tools=decide) as gateway:
        command, env = round_command(worker, binary, gateway, tmp_path, repo, "Work on the goal.")
        code, events, stderr = run_agent(command, env, repo)
    assert code == 0, (events[-3:], stderr[-2000:])
    assert model.exhausted, [e.error for e in exchanges if e.error]
    return repo, events, exchanges, decided


def _assert_round(repo: Path, exchanges: list[Exchange], decided: list[tuple[str, dict]]) -> None:
    assert (repo / "out.txt").read_text() == "hello\n"
    assert (repo / "sub" / "notes.txt").read_text() == 'it\'s "edited"\n'
    assert decided == [("update_goal", {"status": "complete", "summary": "out.txt written"})]
    assert [e.attempt for e in exchanges] == [1, 1, 1, 1, 1]
    assert all(e.error is None and e.refusal is None for e in exchanges)


def test_claude_code_runs_the_scripted_round_through_the_gateway(tmp_path: Path) -> None:
    repo, events, exchanges, decided = _round(tmp_path, "claude-code")
    _assert_round(repo, exchanges, decided)
    init = next(e for e in events if e.get("subtype") == "init")
    assert {"name": "relay", "status": "connected"}.items() <= init["mcp_servers"][0].items()
    used = [
        b["name"]
        for e in events
        if e.get("type") == "assistant"
        for b in e["message"]["content"]
        if b.get("type") == "tool_use"
    ]
    assert used == ["Bash", "Write", "Edit", "mcp__relay__update_goal"]
    result = events[-1]
    assert (
        result["type"] == "result" and result["is_error"] is False and result["result"] == "Done."
    )
    assert result["usage"]["output_tokens"] == 10 + 20 + 30 + 40 + 50


def test_codex_runs_the_scripted_round_through_the_gateway(tmp_path: Path) -> None:
    repo, events, exchanges, decided = _round(tmp_path, "codex")
    _assert_round(repo, exchanges, decided)
    items = [e["item"] for e in events if e.get("type") == "item.completed"]
    commands = [i for i in items if i["type"] == "command_execution"]
    assert len(commands) == 3 and all(i["exit_code"] == 0 for i in commands)
    [mcp_call] = [i for i in items if i["type"] == "mcp_tool_call"]
    assert (mcp_call["server"], mcp_call["tool"], mcp_call["status"]) == (
        "relay",
        "update_goal",
        "completed",
    )
    assert mcp_call["result"]["content"][0]["text"] == "update_goal accepted: the goal is complete"
    assert [i["text"] for i in items if i["type"] == "agent_message"] == ["Working.", "Done."]
    completed = next(e for e in events if e.get("type") == "turn.completed")
    assert completed["usage"]["output_tokens"] == 10 + 20 + 30 + 40 + 50
    assert completed["usage"]["input_tokens"] == 1000 + 1100 + 1200 + 1300 + 1400


def _one_request(
    tmp_path: Path, worker: str, script: dict, admit=None
) -> tuple[list[Exchange], list[dict]]:
    binary = agent_binary(worker)
    repo = tmp_path / "repo"
    repo.mkdir()
    model = ScriptedModel.from_dict(script)
    exchanges: list[Exchange] = []
    extra = {"admit": admit} if admit else {}
    forwarder = Forwarder(model, on_exchange=exchanges.append, sleep=lambda s: None, **extra)
    with Gateway(forwarder) as gateway:
        command, env = round_command(worker, binary, gateway, tmp_path, repo, "Work on the goal.")
        _, events, _ = run_agent(command, env, repo)
    return exchanges, events


@pytest.mark.parametrize("worker", ["claude-code", "codex"])
def test_a_quota_error_stops_the_agent_after_one_upstream_request(
    tmp_path: Path, worker: str
) -> None:
    script = {"responses": [{"repeat": 20, "response": {"error": "insufficient_quota"}}]}
    exchanges, events = _one_request(tmp_path, worker, script)
    assert [(e.attempt, e.error.kind) for e in exchanges] == [(1, "insufficient_quota")]
    assert exchanges[0].stop.reason == "quota"
    _assert_agent_failed(worker, events)


@pytest.mark.parametrize("worker", ["claude-code", "codex"])
def test_a_refused_request_stops_the_agent_with_relays_message(tmp_path: Path, worker: str) -> None:
    refusal = Refusal("relay: the token budget of the goal is used up")
    exchanges, events = _one_request(tmp_path, worker, SCRIPT, admit=lambda request, wire: refusal)
    assert [(e.attempt, e.refusal) for e in exchanges] == [(0, refusal)]
    _assert_agent_failed(worker, events)
    assert "token budget of the goal is used up" in json.dumps(events)


def _assert_agent_failed(worker: str, events: list[dict]) -> None:
    if worker == "claude-code":
        assert events[-1]["type"] == "result" and events[-1]["is_error"] is True
    else:
        assert any(e.get("type") == "turn.failed" for e in events)


def test_claude_code_resending_after_a_bad_request_costs_no_second_upstream_request(
    tmp_path: Path,
) -> None:
    script = {"responses": [{"repeat": 9, "response": {"error": "bad_request"}}]}
    exchanges, events = _one_request(tmp_path, "claude-code", script)
    # Claude Code re-sends a 400 once; relay refuses it without calling the model
    assert [e.error.kind if e.error else e.refusal.kind for e in exchanges] == [
        "bad_request",
        "stopped",
    ]
    _assert_agent_failed("claude-code", events)
