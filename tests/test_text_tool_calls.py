"""The detector of tool calls written as text (issue 14): the shapes small local models and
their chat templates write, what is not a call, and that it never raises on any text."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relay.models.base import ToolSpec
from relay.text_tool_calls import MAX_CALLS, TextToolCall, find_text_tool_calls
from relay.tools import WORKER_TOOLS

COMPLETE = {"status": "complete", "summary": "hello.txt written"}
LS = {"command": "ls -la"}


def found(text: str, tools: tuple[ToolSpec, ...] = WORKER_TOOLS) -> list[tuple[str, dict]]:
    return [(c.name, c.arguments) for c in find_text_tool_calls(text, tools)]


@pytest.mark.parametrize(
    "text",
    [
        # what Qwen2.5-Coder answered through llama.cpp without --jinja (issue 14)
        'I am done.\n```json\n{"name": "update_goal", "arguments": '
        '{"status": "complete", "summary": "hello.txt written"}}\n```',
        '```\n{"name": "update_goal", "arguments": {"status": "complete", '
        '"summary": "hello.txt written"}}\n```',
        '{"name": "update_goal", "arguments": {"status": "complete", '
        '"summary": "hello.txt written"}}',
        'Now: {"name": "update_goal", "parameters": {"status": "complete", '
        '"summary": "hello.txt written"}} and that is all.',
        '<tool_call>\n{"name": "update_goal", "arguments": {"status": "complete", '
        '"summary": "hello.txt written"}}\n</tool_call>',
        '<tool_call>{"name": "update_goal", "arguments": {"status": "complete", '
        '"summary": "hello.txt written"}}',  # unclosed at the end of the answer
        '{"function": "update_goal", "parameters": {"status": "complete", '
        '"summary": "hello.txt written"}}',
        '{"tool_name": "update_goal", "parameters": {"status": "complete", '
        '"summary": "hello.txt written"}}',
        '{"type": "function", "function": {"name": "update_goal", "arguments": '
        + json.dumps(json.dumps(COMPLETE))
        + "}}",
        '[TOOL_CALLS][{"name": "update_goal", "arguments": {"status": "complete", '
        '"summary": "hello.txt written"}}]',
        '<|python_tag|>{"name": "update_goal", "parameters": {"status": "complete", '
        '"summary": "hello.txt written"}}<|eom_id|>',
        '<function=update_goal>{"status": "complete", "summary": "hello.txt written"}</function>',
        "<tool_call>\n<function=update_goal>\n<parameter=status>\ncomplete\n</parameter>\n"
        "<parameter=summary>\nhello.txt written\n</parameter>\n</function>\n</tool_call>",
        '<tool_call>\n```json\n{"name": "update_goal", "arguments": {"status": "complete", '
        '"summary": "hello.txt written"}}\n```\n</tool_call>',
    ],
)
def test_each_common_shape_is_one_call_with_its_arguments(text: str) -> None:
    assert found(text) == [("update_goal", COMPLETE)]


def test_a_list_and_several_blocks_give_every_call_in_order() -> None:
    listed = (
        '[{"name": "shell", "arguments": {"command": "ls -la"}}, '
        '{"name": "read_file", "arguments": {"path": "a.py"}}]'
    )
    assert found(listed) == [("shell", LS), ("read_file", {"path": "a.py"})]
    blocks = (
        'First:\n```json\n{"name": "shell", "arguments": {"command": "ls -la"}}\n```\nThen '
        '<tool_call>{"name": "get_goal"}</tool_call>\nand\n'
        '```json\n{"name": "read_file", "arguments": {"path": "a.py"}}\n'
        '{"name": "read_file", "arguments": {"path": "b.py"}}\n```'
    )
    assert found(blocks) == [
        ("shell", LS),
        ("get_goal", {}),
        ("read_file", {"path": "a.py"}),
        ("read_file", {"path": "b.py"}),
    ]
    openai_wire = {
        "tool_calls": [{"type": "function", "function": {"name": "shell", "arguments": LS}}]
    }
    assert found(json.dumps(openai_wire)) == [("shell", LS)]


def test_a_call_names_how_it_was_written() -> None:
    calls = find_text_tool_calls(
        '<tool_call>{"name": "shell", "arguments": {"command": "ls -la"}}</tool_call>',
        WORKER_TOOLS,
    )
    assert calls == (TextToolCall("shell", LS, "<tool_call> tag"),)
    fenced = find_text_tool_calls(
        '```json\n{"name": "shell", "arguments": {"command": "ls -la"}}\n```', WORKER_TOOLS
    )
    assert fenced[0].shape == "fenced JSON"


def test_parameter_tags_are_typed_by_the_tool_schema() -> None:
    text = (
        "<function=shell>\n<parameter=command>\npytest -q\n</parameter>\n"
        "<parameter=timeout_s>\n30\n</parameter>\n</function>"
    )
    assert found(text) == [("shell", {"command": "pytest -q", "timeout_s": 30})]
    content = "<function=write_file><parameter=path>n.txt</parameter><parameter=content>42</parameter></function>"
    assert found(content) == [("write_file", {"path": "n.txt", "content": "42"})]  # a string


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I will call update_goal with status complete once the tests pass.",
        "Use the `shell` tool: shell(command='ls').",  # pythonic calls are not recognised
        '{"name": "deploy", "arguments": {"env": "prod"}}',  # not an offered tool
        '{"name": "shell"}',  # no arguments key outside a tag
        '{"name": "shell", "version": "1.0.0", "arguments": {}}',  # package.json-like
        '{"name": "shell", "arguments": "not json"}',
        '{"name": "shell", "arguments": [1, 2]}',
        '{"name": 3, "arguments": {}}',
        '[{"name": "shell", "arguments": {"command": "ls"}}, {"unrelated": true}]',
        "```python\ncall = {'name': 'shell', 'arguments': {'command': 'rm -rf /'}}\n"
        'CALL = {"name": "shell", "arguments": {"command": "rm -rf /"}}\n```',
        '```yaml\n{"name": "shell", "arguments": {"command": "ls"}}\n```',
        '{"config": {"name": "shell", "arguments": {"command": "ls"}}}',  # nested in other JSON
        '<tool_call>{"name": "not_offered", "arguments": {}}</tool_call>',
        '<function=deploy>{"env": "prod"}</function>',
        "[TOOL_CALLS] nothing after it",
    ],
)
def test_mentions_code_and_unrelated_json_are_not_calls(text: str) -> None:
    assert found(text) == []


def test_only_the_tools_offered_in_the_step_count() -> None:
    text = '{"name": "shell", "arguments": {"command": "ls -la"}}'
    only_goal = tuple(t for t in WORKER_TOOLS if t.name == "update_goal")
    assert found(text, only_goal) == []
    assert found(text, ()) == []
    assert find_text_tool_calls(None, WORKER_TOOLS) == ()


def test_the_number_of_calls_taken_from_one_answer_is_bounded() -> None:
    one = '{"name": "get_goal", "arguments": {}}'
    assert len(find_text_tool_calls(" ".join([one] * 100), WORKER_TOOLS)) == MAX_CALLS


_JSONISH = st.text(
    alphabet='{}[]"\\:,` \n<>/=|_-abcdefghilmnoprstuwxyz0123456789TOLCAS', max_size=300
)
_FRAGMENTS = st.sampled_from(
    [
        "```json\n",
        "```\n",
        "```",
        "<tool_call>",
        "</tool_call>",
        "<function=shell>",
        "</function>",
        "<parameter=command>",
        "<parameter=timeout_s>",
        "</parameter>",
        "[TOOL_CALLS]",
        "<|python_tag|>",
        '{"name": "shell", "arguments": ',
        '{"name": "update_goal", "parameters": {',
        '{"type": "function", "function": ',
        '{"tool_calls": [',
        '"arguments": "{\\"command\\": ',
        "{",
        "}",
        "[",
        "]",
        '"',
        "\\",
        "null",
        "1e999999",
        "NaN",
        "\udcff",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(_FRAGMENTS, _JSONISH, st.text(max_size=40)), max_size=30))
def test_any_text_gives_calls_or_nothing_and_never_raises(parts: list[str]) -> None:
    calls = find_text_tool_calls("".join(parts), WORKER_TOOLS)
    offered = {t.name for t in WORKER_TOOLS}
    assert len(calls) <= MAX_CALLS
    for c in calls:
        assert c.name in offered and isinstance(c.arguments, dict)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=2000))
def test_arbitrary_unicode_never_raises(text: str) -> None:
    find_text_tool_calls(text, WORKER_TOOLS)


def test_deep_nesting_and_long_text_stay_bounded() -> None:
    deep = '{"name": "shell", "arguments": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert find_text_tool_calls(deep, WORKER_TOOLS) == ()
    noise = ('{"name": "shell", "arguments": {"command": "' + "x" * 50) * 4000
    assert find_text_tool_calls(noise, WORKER_TOOLS) == ()


# the supervisor's notices (pure policy) -----------------------------------------------------


def test_a_no_progress_stop_names_text_calls_as_its_cause() -> None:
    from relay.supervisor import Counters, LimitPolicy, after_real_tool_call, end_of_round

    limits = LimitPolicy(max_no_progress=2)
    counters, stop = end_of_round(Counters(), called_tools=False, limits=limits, text_calls=True)
    assert stop is None and counters.text_call_rounds == 1
    counters, stop = end_of_round(counters, called_tools=False, limits=limits)
    assert stop is not None and stop.reason == "no_progress"
    assert stop.message.startswith("Goal stopped: no step was taken in 2 rounds in a row.")
    assert "Cause: in 1 round the model wrote its tool calls as text" in stop.message
    assert "--jinja" in stop.message and stop.message.endswith("Say how to continue.")
    plain = end_of_round(Counters(no_progress_streak=1), called_tools=False, limits=limits)[1]
    assert plain is not None and "as text" not in plain.message
    assert after_real_tool_call(counters).text_call_rounds == 0
    assert counters.restarted().text_call_rounds == 0


def test_a_total_rounds_stop_names_text_calls_too() -> None:
    from relay.supervisor import Counters, LimitPolicy, end_of_round

    limits = LimitPolicy(max_rounds_total=1, max_no_progress=5)
    stop = end_of_round(Counters(), called_tools=False, limits=limits, text_calls=True)[1]
    assert stop is not None and stop.reason == "total_rounds"
    assert "wrote its tool calls as text" in stop.message


def test_the_summary_says_why_no_audit_ran() -> None:
    from relay.text_call_texts import no_audit_line

    assert no_audit_line({"text_tool_calls": None}) == (
        "No audit ran (the model did not claim completion)."
    )
    line = no_audit_line({"text_tool_calls": {"rounds": [1, 2], "warning": None}})
    assert "wrote its tool calls as text in 2 rounds" in line
