"""Behaviour of the scripted model (SPEC §13) and the model registry (SPEC §12)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from relay.errors import ConfigError, ForcedToolChoiceRejected, ModelError
from relay.models import (
    Message,
    Request,
    Response,
    ScriptedModel,
    ToolSpec,
    Usage,
    create_model,
)
from relay.models.base import ModelSettings
from relay.models.registry import PROVIDERS
from relay.models.scripted import ERROR_KINDS

SHELL = ToolSpec("shell", "Run a command", {"type": "object", "properties": {}})


def req(tool_choice: str = "auto", content: str = "Do the goal.") -> Request:
    """A small request; ``tool_choice`` as in the Request type."""
    return Request(
        system="You are a worker.",
        messages=(Message("user", content),),
        tools=(SHELL,) if tool_choice != "none" else (),
        tool_choice=tool_choice,  # type: ignore[arg-type]
    )


def model(*entries: Any, **top: Any) -> ScriptedModel:
    return ScriptedModel.from_dict({"responses": list(entries), **top})


def texts(m: ScriptedModel, n: int) -> list[str]:
    return [m.complete(req()).text for _ in range(n)]


def config_error(data: Any) -> str:
    with pytest.raises(ConfigError) as info:
        ScriptedModel.from_dict(data)
    return str(info.value)


# ---------------------------------------------------------------------------------------------
# Order, repeats, nesting
# ---------------------------------------------------------------------------------------------


def test_responses_are_consumed_in_order_one_per_call() -> None:
    m = model({"text": "a"}, {"text": "b"}, {"text": "c"})
    assert m.position == 0
    assert m.length == 3
    assert texts(m, 3) == ["a", "b", "c"]
    assert m.position == 3
    assert m.exhausted


def test_plain_response_with_text_and_tool_calls() -> None:
    m = model(
        {
            "text": "Looking around.",
            "tool_calls": [
                {"name": "shell", "arguments": {"command": "ls"}},
                {"name": "read_file", "arguments": {"path": "a.py"}, "id": "toolu_x"},
            ],
        }
    )
    r = m.complete(req())
    assert isinstance(r, Response)
    assert r.text == "Looking around."
    assert [c.name for c in r.tool_calls] == ["shell", "read_file"]
    assert r.tool_calls[0].arguments == {"command": "ls"}
    assert r.tool_calls[0].id == "call_1"
    assert r.tool_calls[1].id == "toolu_x"
    assert r.stop_reason == "tool_use"


def test_empty_response_is_allowed() -> None:
    r = model({}).complete(req())
    assert r.text == ""
    assert r.tool_calls == ()
    assert r.stop_reason == "end_turn"


def test_null_text_tool_calls_and_arguments_mean_empty() -> None:
    m = model(
        {"text": None, "tool_calls": None}, {"tool_calls": [{"name": "x", "arguments": None}]}
    )
    assert m.complete(req()).text == ""
    assert m.complete(req()).tool_calls[0].arguments == {}


def test_tool_call_without_arguments_gets_empty_mapping() -> None:
    r = model({"tool_calls": [{"name": "get_goal"}]}).complete(req())
    assert r.tool_calls[0].arguments == {}
    assert r.stop_reason == "tool_use"


def test_repeat_single_response() -> None:
    m = model({"text": "first"}, {"repeat": 3, "response": {"text": "again"}}, {"text": "last"})
    assert m.length == 5
    assert texts(m, 5) == ["first", "again", "again", "again", "last"]


def test_repeat_block_keeps_order_within_each_repetition() -> None:
    m = model({"repeat": 3, "responses": [{"text": "x"}, {"text": "y"}]}, {"text": "end"})
    assert texts(m, 7) == ["x", "y", "x", "y", "x", "y", "end"]


def test_nested_repeats_and_errors_in_blocks() -> None:
    m = model(
        {
            "repeat": 2,
            "responses": [
                {"text": "a"},
                {"repeat": 2, "response": {"text": "b"}},
                {"error": "overloaded"},
                {"repeat": 2, "responses": [{"text": "c"}, {"text": "d"}]},
            ],
        }
    )
    assert m.length == 16
    seen: list[str] = []
    for _ in range(16):
        try:
            seen.append(m.complete(req()).text)
        except ModelError as exc:
            seen.append(f"!{exc.kind}")
    one = ["a", "b", "b", "!overloaded", "c", "d", "c", "d"]
    assert seen == one + one
    assert m.exhausted


def test_repeat_of_error_entry() -> None:
    m = model({"repeat": 2, "response": {"error": "rate_limit"}}, {"text": "ok"})
    for _ in range(2):
        with pytest.raises(ModelError) as info:
            m.complete(req())
        assert info.value.kind == "rate_limit"
    assert m.complete(req()).text == "ok"


def test_repeated_responses_are_independent_copies() -> None:
    m = model({"repeat": 2, "response": {"tool_calls": [{"name": "t", "arguments": {"k": [1]}}]}})
    first = m.complete(req())
    first.tool_calls[0].arguments["k"].append(2)
    assert m.complete(req()).tool_calls[0].arguments == {"k": [1]}


def test_tool_call_ids_are_unique_across_calls_and_repeats() -> None:
    m = model(
        {"tool_calls": [{"name": "a"}, {"name": "b"}]},
        {"repeat": 3, "response": {"tool_calls": [{"name": "c"}]}},
    )
    ids = [c.id for _ in range(4) for c in m.complete(req()).tool_calls]
    assert ids == ["call_1", "call_2", "call_3", "call_4", "call_5"]
    assert len(set(ids)) == len(ids)


def test_tool_choice_none_returns_response_as_scripted() -> None:
    m = model({"text": "summary", "tool_calls": [{"name": "shell"}]})
    r = m.complete(req("none"))
    assert r.text == "summary"
    assert len(r.tool_calls) == 1


# ---------------------------------------------------------------------------------------------
# Usage
# ---------------------------------------------------------------------------------------------


def test_scripted_usage_is_mapped_to_usage_fields() -> None:
    m = model(
        {"text": "x", "usage": {"input": 1200, "cached": 300, "cache_write": 40, "output": 5}}
    )
    u = m.complete(req()).usage
    assert u == Usage(uncached_input=1200, cache_write=40, cached_input=300, output=5)
    assert u.estimated is False
    assert u.budget_tokens == 1245


def test_partial_usage_defaults_missing_keys_to_zero() -> None:
    u = model({"usage": {"output": 7}}).complete(req()).usage
    assert u == Usage(output=7)
    assert not u.estimated


def test_usage_is_estimated_without_usage() -> None:
    long_text = "y" * 400
    m = model({"text": long_text}, {"tool_calls": [{"name": "shell", "arguments": {"c": "ls"}}]})
    request = req(content="z" * 4000)
    u = m.complete(request).usage
    assert u.estimated is True
    assert u.uncached_input == request.char_count() // 4
    assert u.uncached_input > 0
    assert u.output == 100
    assert u.cached_input == 0 and u.cache_write == 0
    u2 = m.complete(request).usage
    assert u2.estimated and u2.output > 0


def test_estimated_usage_of_empty_response_is_positive() -> None:
    u = model({}).complete(Request(system="", messages=())).usage
    assert u.estimated
    assert u.uncached_input >= 1 and u.output >= 1


# ---------------------------------------------------------------------------------------------
# Error entries
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "transient"),
    [
        ("rate_limit", True),
        ("overloaded", True),
        ("timeout", True),
        ("connection", True),
        ("server", True),
        ("insufficient_quota", False),
        ("auth", False),
        ("bad_request", False),
        ("permission", False),
        ("not_found", False),
    ],
)
def test_error_entry_raises_classified_error_and_is_consumed(kind: str, transient: bool) -> None:
    m = model({"error": kind}, {"text": "after"})
    with pytest.raises(ModelError) as info:
        m.complete(req())
    exc = info.value
    assert exc.kind == kind
    assert exc.transient is transient
    assert exc.message and str(exc) == exc.message
    assert "script" not in exc.message.lower()
    assert m.position == 1
    assert m.complete(req()).text == "after"


def test_every_error_kind_is_covered() -> None:
    assert set(ERROR_KINDS) == {
        "rate_limit",
        "overloaded",
        "insufficient_quota",
        "auth",
        "bad_request",
        "timeout",
        "connection",
        "server",
        "permission",
        "not_found",
    }


def test_provider_like_messages_and_codes() -> None:
    m = model({"error": "insufficient_quota"}, {"error": "rate_limit"}, {"error": "overloaded"})
    with pytest.raises(ModelError) as info:
        m.complete(req())
    assert info.value.code == "insufficient_quota"
    assert info.value.message == (
        "You exceeded your current quota, please check your plan and billing details."
    )
    with pytest.raises(ModelError) as info:
        m.complete(req())
    assert info.value.code == "rate_limit_exceeded"
    assert info.value.message.startswith("Rate limit reached")
    assert info.value.retry_after_s is None
    with pytest.raises(ModelError) as info:
        m.complete(req())
    assert info.value.message == "Overloaded"


def test_error_entry_message_code_and_retry_after() -> None:
    m = model(
        {"error": "rate_limit", "retry_after_s": 20},
        {"error": "auth", "message": "invalid x-api-key", "code": "authentication_error"},
    )
    with pytest.raises(ModelError) as info:
        m.complete(req())
    assert info.value.retry_after_s == 20
    assert "20s" in info.value.message
    with pytest.raises(ModelError) as info:
        m.complete(req())
    assert info.value.message == "invalid x-api-key"
    assert info.value.code == "authentication_error"
    assert info.value.retry_after_s is None


# ---------------------------------------------------------------------------------------------
# Forced tool choice, exhaustion
# ---------------------------------------------------------------------------------------------


def test_rejects_forced_tool_choice_does_not_consume() -> None:
    m = model({"text": "a"}, {"text": "b"}, rejects_forced_tool_choice=True)
    for _ in range(3):
        with pytest.raises(ForcedToolChoiceRejected) as info:
            m.complete(req("required"))
        assert info.value.kind == "bad_request"
        assert not info.value.transient
        assert "tool_choice forcing tool use is not supported" in info.value.message
        assert m.position == 0
    assert m.complete(req("auto")).text == "a"
    assert m.complete(req("none")).text == "b"


def test_forced_tool_choice_accepted_by_default() -> None:
    assert model({"text": "a"}).complete(req("required")).text == "a"


def test_rejects_forced_tool_choice_even_when_exhausted() -> None:
    m = model({"text": "a"}, rejects_forced_tool_choice=True)
    m.complete(req())
    with pytest.raises(ForcedToolChoiceRejected):
        m.complete(req("required"))


def test_exhausted_script_raises_fatal_error_by_default() -> None:
    m = ScriptedModel.from_dict({"responses": [{"repeat": 2, "response": {"text": "a"}}]})
    texts(m, 2)
    for _ in range(2):
        with pytest.raises(ModelError) as info:
            m.complete(req())
        exc = info.value
        assert exc.kind == "script_exhausted"
        assert not exc.transient
        assert exc.message == "scripted model: script exhausted after 2 responses (inline)"
    assert m.position == 2


def test_exhausted_message_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("responses:\n  - text: hi\n", encoding="utf-8")
    m = ScriptedModel.from_file(path)
    assert m.name == f"scripted:{path}"
    m.complete(req())
    with pytest.raises(ModelError, match=r"exhausted after 1 response \(.*s\.yaml\)"):
        m.complete(req())


def test_repeat_last_repeats_the_last_response() -> None:
    m = model(
        {"text": "a"}, {"text": "b", "tool_calls": [{"name": "t"}]}, when_exhausted="repeat_last"
    )
    assert m.complete(req()).text == "a"
    ids = [m.complete(req()).tool_calls[0].id for _ in range(4)]
    assert ids == ["call_1", "call_2", "call_3", "call_4"]
    assert m.position == 2


def test_repeat_last_uses_last_entry_of_a_trailing_block() -> None:
    m = model(
        {"repeat": 2, "responses": [{"text": "x"}, {"text": "y"}]}, when_exhausted="repeat_last"
    )
    assert texts(m, 6) == ["x", "y", "x", "y", "y", "y"]


def test_repeat_last_after_an_error_entry_repeats_the_error() -> None:
    m = model({"text": "a"}, {"error": "insufficient_quota"}, when_exhausted="repeat_last")
    m.complete(req())
    for _ in range(3):
        with pytest.raises(ModelError) as info:
            m.complete(req())
        assert info.value.kind == "insufficient_quota"


# ---------------------------------------------------------------------------------------------
# Huge repeats
# ---------------------------------------------------------------------------------------------


def test_huge_repeat_uses_constant_memory() -> None:
    tracemalloc.start()
    try:
        m = model(
            {"text": "start"},
            {"repeat": 10**9, "responses": [{"text": "x"}, {"repeat": 10**9, "response": {}}]},
            {"text": "end"},
        )
        got = texts(m, 3)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got == ["start", "x", ""]
    assert peak < 2_000_000
    assert m.length == 2 + 10**9 * (1 + 10**9)
    assert m.position == 3
    assert not m.exhausted


def test_position_jumps_are_o1_through_the_cursor() -> None:
    m = model({"repeat": 10**9, "responses": [{"text": "a"}, {"text": "b"}]}, {"text": "z"})
    m._position = 2 * 10**9 - 1  # debugging aid: the cursor is a plain index
    assert texts(m, 2) == ["b", "z"]
    assert m.exhausted


# ---------------------------------------------------------------------------------------------
# Validation errors
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ([{"text": "a"}], ["expected a mapping", "list"]),
        ({}, ["responses", "missing"]),
        ({"responses": []}, ["responses = []", "at least one entry"]),
        ({"responses": None}, ["responses = None", "list"]),
        ({"responses": [{"text": "a"}], "extra": 1}, ["'extra'", "allowed keys", "when_exhausted"]),
        ({"responses": [{"text": "a"}], "when_exhausted": "loop"}, ["'loop'", "repeat_last"]),
        (
            {"responses": [{"text": "a"}], "rejects_forced_tool_choice": "maybe"},
            ["rejects_forced_tool_choice = 'maybe'", "boolean"],
        ),
        ({"responses": [5]}, ["responses[0] = 5", "expected a mapping"]),
        ({"responses": [{"txt": "a"}]}, ["responses[0].txt", "unknown key 'txt'", "text"]),
        ({"responses": [{"text": 1}]}, ["responses[0].text = 1", "string"]),
        ({"responses": [{"repeat": 0, "response": {}}]}, ["repeat = 0", "positive whole number"]),
        ({"responses": [{"repeat": -2, "response": {}}]}, ["repeat = -2", "positive"]),
        ({"responses": [{"repeat": 1.5, "response": {}}]}, ["repeat = 1.5", "positive"]),
        ({"responses": [{"repeat": "3", "response": {}}]}, ["repeat = '3'", "positive"]),
        ({"responses": [{"repeat": True, "response": {}}]}, ["repeat = True", "positive"]),
        ({"responses": [{"repeat": 3}]}, ["responses[0]", "repeat = 3", "'response'"]),
        ({"responses": [{"response": {}}]}, ["responses[0].repeat", "missing"]),
        (
            {"responses": [{"repeat": 2, "response": {}, "responses": [{}]}]},
            ["responses[0]", "both 'response' and 'responses'"],
        ),
        ({"responses": [{"repeat": 2, "responses": []}]}, ["responses[0].responses = []"]),
        ({"responses": [{"repeat": 2, "responses": {}}]}, ["responses[0].responses = {}", "list"]),
        ({"responses": [{"repeat": 2, "text": "a", "response": {}}]}, ["unknown key 'text'"]),
        (
            {"responses": [{"repeat": 2, "responses": [{"text": "a"}, {"bad": 1}]}]},
            ["responses[0].responses[1].bad", "unknown key 'bad'"],
        ),
        (
            {"responses": [{"repeat": 2, "response": {"repeat": 0, "response": {}}}]},
            ["responses[0].response.repeat = 0"],
        ),
        (
            {"responses": [{"tool_calls": [{"arguments": {}}]}]},
            ["responses[0].tool_calls[0].name", "missing"],
        ),
        ({"responses": [{"tool_calls": [{"name": ""}]}]}, ["tool_calls[0].name = ''"]),
        (
            {"responses": [{"tool_calls": [{"name": "a", "arguments": [1]}]}]},
            ["tool_calls[0].arguments = [1]", "mapping"],
        ),
        (
            {"responses": [{"tool_calls": [{"name": "a", "arguments": "ls"}]}]},
            ["tool_calls[0].arguments = 'ls'", "mapping"],
        ),
        ({"responses": [{"tool_calls": ["shell"]}]}, ["tool_calls[0] = 'shell'", "name"]),
        ({"responses": [{"tool_calls": {"name": "a"}}]}, ["tool_calls = {'name': 'a'}", "list"]),
        (
            {"responses": [{"tool_calls": [{"name": "a", "args": {}}]}]},
            ["tool_calls[0].args", "allowed keys: name, arguments, id"],
        ),
        ({"responses": [{"error": "quota"}]}, ["error = 'quota'", "insufficient_quota", "auth"]),
        ({"responses": [{"error": "script_exhausted"}]}, ["'script_exhausted'", "unknown"]),
        ({"responses": [{"error": "auth", "text": "x"}]}, ["unknown key 'text'", "message"]),
        (
            {"responses": [{"error": "rate_limit", "retry_after_s": -1}]},
            ["retry_after_s = -1"],
        ),
        (
            {"responses": [{"usage": {"input": -1}}]},
            ["usage.input = -1", "0 or more"],
        ),
        (
            {"responses": [{"usage": {"input": 1, "tokens": 3}}]},
            ["usage.tokens", "unknown key 'tokens'", "cache_write"],
        ),
        ({"responses": [{"usage": {"output": "many"}}]}, ["usage.output = 'many'"]),
        ({"responses": [{"usage": 100}]}, ["usage = 100", "input, cached, cache_write, output"]),
    ],
)
def test_validation_errors_name_key_and_value(data: Any, expected: list[str]) -> None:
    message = config_error(data)
    assert message.startswith("invalid scripted model script inline")
    for part in expected:
        assert part in message, f"{part!r} not in {message!r}"


def test_validation_reports_every_problem() -> None:
    message = config_error(
        {
            "responses": [{"txt": 1}, {"error": "nope"}, {"repeat": 0, "response": {}}],
            "when_exhausted": "x",
        }
    )
    for part in ["responses[0].txt", "responses[1].error", "responses[2].repeat", "when_exhausted"]:
        assert part in message


def test_from_file_reads_yaml(tmp_path: Path) -> None:
    path = tmp_path / "dir with space ü" / "script.yaml"
    path.parent.mkdir()
    path.write_text(
        """
responses:
  - text: "Looking around."
    tool_calls:
      - {name: shell, arguments: {command: "ls"}}
    usage: {input: 1200, cached: 0, cache_write: 0, output: 150}
  - repeat: 3
    response: {tool_calls: [{name: shell, arguments: {command: "pytest -q"}}]}
  - repeat: 10
    responses:
      - {tool_calls: [{name: shell, arguments: {command: "pytest -q"}}]}
      - {text: "Tests still fail."}
  - error: insufficient_quota
rejects_forced_tool_choice: false
when_exhausted: error
""",
        encoding="utf-8",
    )
    m = ScriptedModel.from_file(path)
    assert m.length == 1 + 3 + 20 + 1
    assert m.complete(req()).usage.uncached_input == 1200


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("responses: [unclosed", "not valid YAML"),
        ("- text: a\n", "expected a mapping"),
        ("", "expected a mapping"),
        ("responses:\n  - {text: a, bogus: 1}\n", "responses[0].bogus"),
    ],
)
def test_from_file_errors_name_the_file(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        ScriptedModel.from_file(path)
    assert str(path) in str(info.value)
    assert expected in str(info.value)


def test_from_file_unreadable(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match=r"cannot read scripted model script .*nope\.yaml"):
        ScriptedModel.from_file(missing)
    with pytest.raises(ConfigError, match="cannot read scripted model script"):
        ScriptedModel.from_file(tmp_path)
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ConfigError, match=r"bin\.yaml"):
        ScriptedModel.from_file(binary)


# ---------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------


def _write_script(path: Path) -> Path:
    path.write_text("responses:\n  - text: from file\n", encoding="utf-8")
    return path


def test_registry_scripted_relative_to_base_dir(tmp_path: Path) -> None:
    _write_script(tmp_path / "s.yaml")
    m = create_model("scripted:s.yaml", base_dir=tmp_path)
    assert isinstance(m, ScriptedModel)
    assert m.name == "scripted:s.yaml"
    assert m.complete(req()).text == "from file"


def test_registry_scripted_relative_to_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write_script(tmp_path / "s.yaml")
    monkeypatch.chdir(tmp_path)
    assert create_model("scripted:s.yaml").complete(req()).text == "from file"


def test_registry_scripted_absolute_path_ignores_base_dir(tmp_path: Path) -> None:
    path = _write_script(tmp_path / "abs.yaml")
    m = create_model(f"scripted:{path}", base_dir=tmp_path / "elsewhere", base_url="http://x")
    assert m.complete(req()).text == "from file"


def test_registry_scripted_missing_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing\.yaml"):
        create_model("scripted:missing.yaml", base_dir=tmp_path)


@pytest.mark.parametrize(
    ("provider", "variable"), [("anthropic", "ANTHROPIC_API_KEY"), ("openai", "OPENAI_API_KEY")]
)
def test_registry_real_providers_need_their_key(
    provider: str, variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigError, match=variable):
        create_model(f"{provider}:some-model")


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("gpt-4", "'gpt-4'"),
        ("", "PROVIDER:MODEL"),
        ("scripted:", "'scripted:'"),
        (":model", "':model'"),
        ("gemini:pro", "unknown provider 'gemini'"),
    ],
)
def test_registry_bad_specs(spec: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        create_model(spec)
    message = str(info.value)
    assert expected in message
    assert "anthropic:" in message and "openai:" in message and "scripted:" in message


def test_registry_is_a_pluggable_dict(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def factory(
        model_id: str,
        *,
        settings: ModelSettings,
        base_dir: Path | None = None,
        debug: bool = False,
    ):
        seen.update(model_id=model_id, settings=settings, base_dir=base_dir)
        return model({"text": "plugged"})

    monkeypatch.setitem(PROVIDERS, "fake", factory)
    m = create_model(
        "fake:m:1",
        base_url="http://localhost:11434/v1",
        settings=ModelSettings(max_output_tokens=5),
    )
    assert m.complete(req()).text == "plugged"
    assert seen == {
        "model_id": "m:1",
        "settings": ModelSettings("http://localhost:11434/v1", max_output_tokens=5),
        "base_dir": None,
    }
