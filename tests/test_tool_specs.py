"""Tool specs offered to the model and argument checking (SPEC §5)."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay.models.base import ToolCall
from relay.tools import (
    GOAL_TOOLS,
    REAL_TOOLS,
    WORKER_TOOLS,
    ToolContext,
    check_arguments,
    execute,
)


def test_exactly_the_seven_worker_tools_are_offered() -> None:
    names = [spec.name for spec in WORKER_TOOLS]
    assert names == [
        "shell",
        "read_file",
        "write_file",
        "edit_file",
        "get_goal",
        "update_goal",
        "handoff",
    ]
    assert set(names) == REAL_TOOLS | GOAL_TOOLS
    assert not REAL_TOOLS & GOAL_TOOLS


@pytest.mark.parametrize("spec", WORKER_TOOLS, ids=lambda s: s.name)
def test_every_spec_is_a_closed_object_schema_with_descriptions(spec: object) -> None:
    params = spec.parameters  # type: ignore[attr-defined]
    assert params["type"] == "object"
    assert params["additionalProperties"] is False
    assert isinstance(params["required"], list)
    assert set(params["required"]) <= set(params["properties"])
    assert len(spec.description) > 40  # type: ignore[attr-defined]
    for prop in params["properties"].values():
        assert prop.get("description")


def test_spec_arguments_match_the_spec_table() -> None:
    by_name = {spec.name: spec.parameters for spec in WORKER_TOOLS}
    assert by_name["shell"]["required"] == ["command"]
    assert set(by_name["shell"]["properties"]) == {"command", "timeout_s"}
    assert set(by_name["read_file"]["properties"]) == {"path", "offset", "limit"}
    assert by_name["write_file"]["required"] == ["path", "content"]
    assert by_name["edit_file"]["required"] == ["path", "old", "new"]
    assert by_name["get_goal"]["properties"] == {}
    update = by_name["update_goal"]
    assert update["required"] == ["status", "summary"]
    assert set(update["properties"]) == {"status", "summary", "question", "reason", "checklist"}
    item = update["properties"]["checklist"]["items"]
    assert item["required"] == ["requirement", "evidence"]
    assert by_name["handoff"]["required"] == ["note"]


VALID = {
    "shell": {"command": "ls", "timeout_s": 5},
    "read_file": {"path": "a.py", "offset": 1, "limit": 10},
    "write_file": {"path": "a.py", "content": ""},
    "edit_file": {"path": "a.py", "old": "a", "new": ""},
    "get_goal": {},
    "update_goal": {
        "status": "complete",
        "summary": "done",
        "question": "q",
        "reason": "r",
        "checklist": [{"requirement": "tests pass", "evidence": "pytest: 3 passed"}],
    },
    "handoff": {"note": "next: docs"},
}


@pytest.mark.parametrize("name", list(VALID))
def test_valid_arguments_pass(name: str) -> None:
    assert check_arguments(name, VALID[name]) is None


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("shell", {}, "shell: missing required argument 'command'"),
        ("shell", {"command": 3}, "shell: argument 'command' must be a string, got integer"),
        ("shell", {"command": "ls", "timeout_s": "5"}, "'timeout_s' must be an integer"),
        ("shell", {"command": "ls", "timeout_s": True}, "got boolean"),
        ("shell", {"command": "ls", "timeout_s": 2.0}, "got number"),
        ("shell", {"command": "ls", "timeout_s": 0}, "'timeout_s' must be at least 1"),
        ("shell", {"command": "ls", "cwd": "/"}, "shell: unknown argument 'cwd'"),
        ("read_file", {"file": "a"}, "read_file: missing required argument 'path'"),
        ("read_file", {"path": "a", "offset": "3"}, "'offset' must be an integer"),
        ("read_file", {"path": "a", "limit": None}, "'limit' must be an integer, got null"),
        ("write_file", {"path": "a"}, "write_file: missing required argument 'content'"),
        ("write_file", {"path": ["a"], "content": ""}, "'path' must be a string, got array"),
        ("edit_file", {"path": "a", "old": "x"}, "edit_file: missing required argument 'new'"),
        ("edit_file", {"path": "a", "old": "x", "new": "y", "all": True}, "unknown argument"),
        ("get_goal", {"verbose": True}, "get_goal: unknown argument 'verbose'"),
        ("update_goal", {"summary": "s"}, "update_goal: missing required argument 'status'"),
        ("update_goal", {"status": 1, "summary": "s"}, "'status' must be a string"),
        (
            "update_goal",
            {"status": "complete", "summary": "s", "checklist": "all good"},
            "'checklist' must be an array, got string",
        ),
        (
            "update_goal",
            {"status": "complete", "summary": "s", "checklist": [{"requirement": "r"}]},
            "missing required argument 'checklist[0].evidence'",
        ),
        (
            "update_goal",
            {"status": "complete", "summary": "s", "checklist": ["r"]},
            "'checklist[0]' must be an object, got string",
        ),
        (
            "update_goal",
            {
                "status": "complete",
                "summary": "s",
                "checklist": [{"requirement": "r", "evidence": "e", "ok": True}],
            },
            "unknown argument 'checklist[0].ok'",
        ),
        ("handoff", {}, "handoff: missing required argument 'note'"),
        ("handoff", "just a note", "handoff: arguments must be an object, got string"),
        ("handoff", None, "handoff: arguments must be an object, got null"),
    ],
)
def test_bad_arguments_are_named(name: str, arguments: object, expected: str) -> None:
    problem = check_arguments(name, arguments)
    assert problem is not None
    assert expected in problem
    assert "\n" not in problem


def test_status_values_are_left_to_the_supervisor() -> None:
    assert check_arguments("update_goal", {"status": "paused", "summary": "s"}) is None


def test_unknown_tool_is_named_with_the_available_ones() -> None:
    problem = check_arguments("run_python", {"code": "1"})
    assert problem is not None
    assert "unknown tool 'run_python'" in problem and "shell" in problem


@pytest.fixture()
def ctx(tmp_path: Path) -> ToolContext:
    repo = tmp_path / "repo"
    repo.mkdir()
    return ToolContext(repo_root=repo.resolve(), state_dir=tmp_path / "state", run_dir=tmp_path)


def test_execute_turns_unknown_tools_into_error_results(ctx: ToolContext) -> None:
    result = execute(ToolCall(id="1", name="delete_repo", arguments={}), ctx)
    assert result.is_error and "unknown tool 'delete_repo'" in result.content


def test_execute_turns_bad_arguments_into_error_results(ctx: ToolContext) -> None:
    missing = execute(ToolCall(id="1", name="write_file", arguments={"path": "a"}), ctx)
    assert missing.is_error and "missing required argument 'content'" in missing.content
    wrong = execute(ToolCall(id="2", name="shell", arguments={"command": ["ls"]}), ctx)
    assert wrong.is_error and "'command' must be a string" in wrong.content
    extra = execute(
        ToolCall(id="3", name="read_file", arguments={"path": "a", "encoding": "latin1"}), ctx
    )
    assert extra.is_error and "unknown argument 'encoding'" in extra.content
    assert not (ctx.repo_root / "a").exists()


@pytest.mark.parametrize("name", sorted(GOAL_TOOLS))
def test_execute_does_not_run_goal_tools(ctx: ToolContext, name: str) -> None:
    result = execute(ToolCall(id="1", name=name, arguments=VALID[name]), ctx)
    assert result.is_error and "loop" in result.content
