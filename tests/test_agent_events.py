"""The agents' JSON events as the round's actions, and how an agent ended (SPEC §8, §15):
the shapes are those Claude Code 2.1.332 (stream-json) and Codex 0.171 (exec --json) wrote
in the agent tests. Also the hand-over of the gateway's calls to the loop's thread."""

from __future__ import annotations

import json
import threading

import pytest

from relay.workers.events import AgentAction, AgentEvents
from relay.workers.handover import Handover


def _lines(*events: dict) -> list[str]:
    return [json.dumps(e) for e in events]


def _feed(worker: str, *events: dict) -> tuple[AgentEvents, list[AgentAction]]:
    parsed = AgentEvents(worker)
    actions = [a for line in _lines(*events) for a in parsed.feed(line)]
    return parsed, actions


def _claude_call(call_id: str, name: str, arguments: dict) -> dict:
    block = {"type": "tool_use", "id": call_id, "name": name, "input": arguments}
    return {"type": "assistant", "message": {"content": [block]}}


def _claude_result(call_id: str, content: object, is_error: bool = False) -> dict:
    block = {"type": "tool_result", "tool_use_id": call_id, "content": content}
    return {"type": "user", "message": {"content": [{**block, "is_error": is_error}]}}


def test_claude_code_tool_calls_become_relays_actions() -> None:
    parsed, actions = _feed(
        "claude-code",
        {
            "type": "system",
            "subtype": "init",
            "mcp_servers": [{"name": "relay", "status": "connected"}],
        },
        _claude_call("c1", "Bash", {"command": "false", "timeout": 120000}),
        _claude_result("c1", "Exit code 1", is_error=True),
        _claude_call("c2", "Write", {"file_path": "/r/a.txt", "content": "x"}),
        _claude_result("c2", [{"type": "text", "text": "File created"}]),
        _claude_call("c3", "mcp__relay__update_goal", {"status": "complete"}),
        _claude_result("c3", "rejected", is_error=True),
        {"type": "result", "subtype": "success", "is_error": False, "result": "Done."},
    )
    assert actions == [
        AgentAction("shell", {"command": "false"}, "Exit code 1", True, 1),
        AgentAction("write_file", {"path": "/r/a.txt"}, "File created", False),
    ]  # relay's own goal tool is no action: relay decided it
    assert parsed.outcome(0) is None


def test_claude_code_failures_come_from_its_events_not_its_exit_code() -> None:
    failed = {
        "type": "result",
        "is_error": True,
        "result": "API Error: 403",
        "api_error_status": 403,
    }
    parsed, _ = _feed("claude-code", failed)
    assert parsed.outcome(0) == "API Error: 403 (API status 403)"
    parsed, _ = _feed(
        "claude-code",
        {
            "type": "system",
            "subtype": "init",
            "mcp_servers": [{"name": "relay", "status": "failed"}],
        },
        {"type": "result", "is_error": False, "result": "ok"},
    )
    assert parsed.unusable and parsed.outcome(0) == "relay's MCP server is failed in the agent"
    parsed, _ = _feed("claude-code", _claude_call("c1", "Bash", {"command": "ls"}))
    assert parsed.outcome(137) == "the agent exited (code 137) without finishing its turn"


def test_codex_items_become_relays_actions() -> None:
    command = {
        "id": "i2",
        "type": "command_execution",
        "command": "/bin/bash -c 'false'",
        "aggregated_output": "",
        "exit_code": 1,
        "status": "failed",
    }
    change = {"id": "i3", "type": "file_change", "changes": [{"path": "a.py", "kind": "add"}]}
    goal_tool = {"id": "i4", "type": "mcp_tool_call", "server": "relay", "tool": "handoff"}
    parsed, actions = _feed(
        "codex",
        {"type": "item.completed", "item": {"id": "i0", "type": "error", "message": "metadata"}},
        {"type": "item.started", "item": {**command, "exit_code": None, "status": "in_progress"}},
        {"type": "item.completed", "item": command},
        {"type": "item.completed", "item": {**change, "status": "completed"}},
        {"type": "item.completed", "item": {**goal_tool, "status": "completed"}},
        {"type": "item.completed", "item": {"id": "i5", "type": "agent_message", "text": "Done."}},
        {"type": "turn.completed", "usage": {"input_tokens": 10}},
    )
    assert actions == [
        AgentAction("shell", {"command": "/bin/bash -c 'false'"}, "", True, 1),
        AgentAction("file_change", {"paths": ["a.py"]}, "", False),
    ]
    assert (parsed.outcome(0), parsed.text) == (None, "Done.")


def test_a_failed_codex_turn_is_a_failure_whatever_its_exit_code() -> None:
    parsed, _ = _feed("codex", {"type": "turn.failed", "error": {"message": "Quota exceeded"}})
    assert parsed.outcome(0) == "Quota exceeded"
    parsed, _ = _feed("codex", {"type": "turn.started"})
    assert parsed.outcome(1) == "the agent exited (code 1) without finishing its turn"
    assert AgentEvents("codex").feed("WARNING: not json") == []


def test_hand_overs_run_on_the_owners_thread_one_at_a_time() -> None:
    handover = Handover()
    seen: list[tuple[str, int]] = []
    results: list[object] = []

    def caller(tag: str) -> None:
        results.append(
            handover.call(lambda: seen.append((tag, threading.get_ident())) or tag, "closed")
        )

    assert handover.call(lambda: "here", "closed") == "here"  # the owner's own call runs at once
    thread = threading.Thread(target=caller, args=("gateway",))
    assert handover.call(lambda: 1, "closed") == 1
    handover.open()
    thread.start()
    while not handover.serve(0.05):
        pass
    thread.join(5)
    assert seen == [("gateway", threading.get_ident())] and results == ["gateway"]
    handover.close()
    late = threading.Thread(target=caller, args=("late",))
    late.start()
    late.join(5)
    assert results == ["gateway", "closed"] and len(seen) == 1  # closed: not run


def test_a_failing_hand_over_raises_on_the_owners_thread() -> None:
    handover = Handover()
    handover.open()
    results: list[object] = []
    thread = threading.Thread(target=lambda: results.append(handover.call(lambda: 1 / 0, "closed")))
    thread.start()
    with pytest.raises(ZeroDivisionError):
        while not handover.serve(0.05):
            pass
    thread.join(5)
    assert results == ["closed"]


def test_a_codex_command_output_says_whether_it_failed() -> None:
    from relay.workers.events import exited_nonzero

    head = "Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code {}\nOutput:\n"
    assert exited_nonzero(head.format(2)) and exited_nonzero(head.format(-9))
    assert not exited_nonzero(head.format(0))
    assert not exited_nonzero("Output:\nProcess exited with code 1 is what the log said")
