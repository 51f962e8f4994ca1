"""The scripted model's tool names in an agent's tools (relay.gateway.agent_tools), and the
two wire formats read into relay's neutral request (SPEC §13, §15). Pure."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from relay.errors import ModelError
from relay.gateway import messages_wire, responses_wire
from relay.gateway.agent_tools import translate_call
from relay.gateway.wire import WireError
from relay.models.base import Response, ToolCall, ToolSpec

OBJ = {"type": "object", "properties": {}}
CLAUDE = {
    n: ToolSpec(n, "", OBJ)
    for n in (
        "Bash",
        "Write",
        "Edit",
        "Read",
        "mcp__relay__update_goal",
        "mcp__relay__handoff",
        "mcp__relay__get_goal",
    )
}
CODEX = {
    n: ToolSpec(n, "", OBJ)
    for n in (
        "exec_command",
        "update_goal",
        "get_goal",
        "mcp__relay__update_goal",
        "mcp__relay__handoff",
    )
}


def _call(name: str, **arguments: object) -> ToolCall:
    return ToolCall("call_1", name, dict(arguments))


@pytest.mark.parametrize(
    ("call", "name", "arguments"),
    [
        (
            _call("shell", command="ls -la", timeout_s=30),
            "Bash",
            {"command": "ls -la", "timeout": 30000},
        ),
        (
            _call("write_file", path="a/b.py", content="x"),
            "Write",
            {"file_path": "/w/repo/a/b.py", "content": "x"},
        ),
        (
            _call("edit_file", path="b.py", old="1", new="2"),
            "Edit",
            {"file_path": "/w/repo/b.py", "old_string": "1", "new_string": "2"},
        ),
        (
            _call("read_file", path="/abs/c.txt", offset=3, limit=2),
            "Read",
            {"file_path": "/abs/c.txt", "offset": 3, "limit": 2},
        ),
        (
            _call("update_goal", status="complete", summary="s"),
            "mcp__relay__update_goal",
            {"status": "complete", "summary": "s"},
        ),
        (_call("handoff", note="n"), "mcp__relay__handoff", {"note": "n"}),
        (_call("Bash", command="pwd"), "Bash", {"command": "pwd"}),  # a tool the agent offers
    ],
)
def test_claude_code_gets_its_own_tools(call: ToolCall, name: str, arguments: dict) -> None:
    out = translate_call(call, CLAUDE, "/w/repo")
    assert (out.id, out.name, out.arguments) == ("call_1", name, arguments)


def test_codex_gets_relays_goal_tools_never_its_own() -> None:
    out = translate_call(_call("update_goal", status="blocked", summary="s"), CODEX, "/w")
    assert out.name == "mcp__relay__update_goal"
    assert translate_call(_call("shell", command="ls"), CODEX, "/w").arguments == {"cmd": "ls"}


def test_a_legacy_array_shell_tool_gets_bash_lc() -> None:
    shell = {
        "shell": ToolSpec(
            "shell", "", {"type": "object", "properties": {"command": {"type": "array"}}}
        )
    }
    assert translate_call(_call("shell", command="ls"), shell, "/w").arguments == {
        "command": ["bash", "-lc", "ls"]
    }


def _run(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True)


def test_file_tools_without_native_ones_become_shell_commands_that_work(tmp_path: Path) -> None:
    content = "line 'one'\n\"two\" $HOME `x`\nthree\n"
    write = translate_call(
        _call("write_file", path="d/e.txt", content=content), CODEX, str(tmp_path)
    )
    assert _run(write.arguments["cmd"], tmp_path).returncode == 0
    assert (tmp_path / "d/e.txt").read_text() == content
    edit = translate_call(
        _call("edit_file", path="d/e.txt", old="three", new="3"), CODEX, str(tmp_path)
    )
    assert _run(edit.arguments["cmd"], tmp_path).returncode == 0
    assert (tmp_path / "d/e.txt").read_text().endswith("\n3\n")
    twice = translate_call(
        _call("edit_file", path="d/e.txt", old="o", new="0"), CODEX, str(tmp_path)
    )
    failed = _run(twice.arguments["cmd"], tmp_path)
    assert failed.returncode == 1 and "occurs 2 times" in failed.stderr
    read = translate_call(
        _call("read_file", path="d/e.txt", offset=2, limit=1), CODEX, str(tmp_path)
    )
    assert _run(read.arguments["cmd"], tmp_path).stdout == '"two" $HOME `x`\n'


def test_a_tool_the_agent_does_not_offer_is_a_bad_request_naming_both() -> None:
    with pytest.raises(ModelError) as caught:
        translate_call(_call("handoff", note="n"), {"Bash": CLAUDE["Bash"]}, "/w")
    assert caught.value.kind == "bad_request"
    assert "mcp__relay__handoff" in caught.value.message and "offers: Bash" in caught.value.message
    with pytest.raises(ModelError, match="'Frobnicate'"):
        translate_call(_call("Frobnicate"), CLAUDE, "/w")


def test_a_messages_request_becomes_the_neutral_request() -> None:
    body = {
        "model": "m",
        "system": [{"type": "text", "text": "Sys."}],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "Go."}, {"type": "image", "source": {}}],
            },
            {"role": "system", "content": [{"type": "text", "text": "Env."}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "t"},
                    {"type": "text", "text": "Ok."},
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [{"type": "text", "text": "a.py"}],
                        "is_error": True,
                    }
                ],
            },
        ],
        "tools": [
            {"name": "Bash", "description": "d", "input_schema": OBJ},
            {"type": "web_search_20250305", "name": "web_search"},
        ],
        "tool_choice": {"type": "any"},
        "stream": True,
    }
    parsed = messages_wire.parse_request(body)
    r = parsed.request
    assert parsed.stream and parsed.model == "m"
    assert r.system == "Sys.\n\nEnv."
    assert [m.to_dict() for m in r.messages] == [
        {"role": "user", "content": "Go.\n[image not forwarded by relay]"},
        {
            "role": "assistant",
            "content": "Ok.",
            "tool_calls": [{"id": "t1", "name": "Bash", "arguments": {"command": "ls"}}],
        },
        {"role": "tool", "content": "a.py", "tool_call_id": "t1", "is_error": True},
    ]
    assert [t.name for t in r.tools] == ["Bash", "web_search"] and r.tool_choice == "required"


def test_a_responses_request_becomes_the_neutral_request() -> None:
    body = {
        "model": "m",
        "input": [
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "Dev."}],
            },
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Go."}]},
            {"type": "reasoning", "summary": []},
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "exec_command",
                "arguments": '{"cmd": "ls"}',
            },
            {
                "type": "function_call",
                "call_id": "c2",
                "name": "update_goal",
                "namespace": "mcp__relay",
                "arguments": "{}",
            },
            {"type": "function_call_output", "call_id": "c1", "output": "a.py"},
        ],
        "tools": [
            {"type": "function", "name": "exec_command", "parameters": OBJ},
            {
                "type": "namespace",
                "name": "mcp__relay",
                "tools": [{"type": "function", "name": "update_goal", "parameters": OBJ}],
            },
            {"type": "custom", "name": "apply_patch", "format": {}},
            {"type": "web_search"},
        ],
    }
    parsed = responses_wire.parse_request(body)
    r = parsed.request
    assert (
        r.system == "Dev."
        and parsed.namespaces == ("mcp__relay",)
        and parsed.custom_tools == ("apply_patch",)
    )
    assert [t.name for t in r.tools] == ["exec_command", "mcp__relay__update_goal", "apply_patch"]
    assert [m.to_dict() for m in r.messages] == [
        {"role": "user", "content": "Go."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "name": "exec_command", "arguments": {"cmd": "ls"}},
                {"id": "c2", "name": "mcp__relay__update_goal", "arguments": {}},
            ],
        },
        {"role": "tool", "content": "a.py", "tool_call_id": "c1", "is_error": False},
    ]
    answer = Response(tool_calls=(ToolCall("c3", "apply_patch", {"input": "*** Begin Patch"}),))
    [item] = responses_wire.response_body(answer, parsed)["output"]
    assert (item["type"], item["input"]) == ("custom_tool_call", "*** Begin Patch")


@pytest.mark.parametrize(
    ("module", "body", "message"),
    [
        (messages_wire, [], "must be a JSON object"),
        (messages_wire, {"messages": "hi"}, "messages: must be a list"),
        (
            messages_wire,
            {"messages": [{"role": "tool", "content": "x"}]},
            "messages[0]: must be an object with role",
        ),
        (responses_wire, {"input": 3}, "input: must be a string or a list"),
        (
            responses_wire,
            {"input": [{"type": "function_call_output", "output": "x"}]},
            "input[0]: a function_call_output needs a call_id",
        ),
    ],
)
def test_unreadable_bodies_name_the_field(module, body, message: str) -> None:
    with pytest.raises(WireError, match=message.replace("[", r"\[").replace("]", r"\]")):
        module.parse_request(body)


def test_long_tool_arguments_stream_in_pieces_that_join_to_the_json() -> None:
    call = ToolCall("c", "Write", {"file_path": "/a", "content": "x" * 1000})
    events = messages_wire.response_events(
        Response(tool_calls=(call,), stop_reason="tool_use"), "m"
    )
    pieces = [d["delta"]["partial_json"] for n, d in events if n == "content_block_delta"]
    assert len(pieces) > 1 and json.loads("".join(pieces)) == call.arguments
    assert [n for n, _ in events][-2:] == ["message_delta", "message_stop"]


def test_only_the_scripted_model_gets_its_tool_names_translated() -> None:
    from relay.gateway import translator_for
    from relay.models.scripted import ScriptedModel

    class Provider:
        name = "anthropic:claude"

    assert translator_for(Provider(), "/w") is None  # a real model already calls the agent's tools
    translate = translator_for(ScriptedModel.from_dict({"responses": [{"text": "x"}]}), "/w")
    request = messages_wire.parse_request(
        {"messages": [], "tools": [{"name": "Bash", "input_schema": OBJ}]}
    ).request
    out = translate(Response(tool_calls=(_call("shell", command="ls"),)), request)
    assert out.tool_calls[0].name == "Bash"
