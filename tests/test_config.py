"""Configuration (SPEC §12, §7.2, §9): the documented defaults in ``relay.yaml``, validation
messages that name the key, the value and what is allowed, and the precedence of the layers."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from relay.config import (
    Config,
    Deliverable,
    GuardConfig,
    deep_merge,
    load_config,
    parse_duration,
    validate_config,
)
from relay.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parents[1]
RELAY_YAML = REPO_ROOT / "relay.yaml"

ROUND_LIMITS = (
    "max_rounds_total",
    "max_no_progress",
    "blocked_accept_at",
    "max_steps_per_round",
    "auto_replies",
)


def config_error(data: Any, source: str = "relay.yaml") -> str:
    with pytest.raises(ConfigError) as info:
        validate_config(data, source)
    assert info.value.exit_code == 1
    return str(info.value)


# --- relay.yaml: the documented defaults -------------------------------------------------


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model of a field annotation (``Model``, ``list[Model]``), if any."""
    candidates = [annotation, *getattr(annotation, "__args__", ())]
    for c in candidates:
        if isinstance(c, type) and issubclass(c, BaseModel):
            return c
    return None


def _section_fields(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str]]:
    """Every (dotted key, docstring) of the sections of ``model``, recursively; list-of-model
    fields (deliverables) are not sections: their items are documented by example."""
    out = []
    for name, field in model.model_fields.items():
        key = prefix + name
        out.append((key, field.description or ""))
        sub = _model_of(field.annotation)
        if sub is not None and field.annotation is sub:
            out += _section_fields(sub, key + ".")
    return out


_KEY_LINE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_]\w*):")


def _key_lines(lines: list[str]) -> dict[str, int]:
    """Dotted key path -> line index, for the uncommented mapping keys of a YAML file."""
    found: dict[str, int] = {}
    stack: list[tuple[int, str]] = []
    for i, line in enumerate(lines):
        m = _KEY_LINE.match(line)
        if not m:
            continue
        indent = len(m["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, m["key"]))
        found[".".join(k for _, k in stack)] = i
    return found


def _comment_above(lines: list[str], index: int) -> str:
    """The comment block directly above line ``index``, as one whitespace-normalised text."""
    block = []
    i = index - 1
    while i >= 0 and lines[i].strip().startswith("#"):
        block.insert(0, lines[i].strip().lstrip("#").strip())
        i -= 1
    return " ".join(" ".join(block).split())


def _normalise_doc(doc: str) -> str:
    return " ".join(doc.replace("``", "`").split())


def _commented_example(lines: list[str], key: str) -> dict[str, Any]:
    """The commented-out ``# key:`` example block of relay.yaml, uncommented and parsed."""
    start = next(i for i, ln in enumerate(lines) if ln.rstrip() == f"# {key}:")
    body = []
    for ln in lines[start:]:
        if not ln.startswith("#"):
            break
        body.append(ln[2:] if ln.startswith("# ") else ln[1:])
    data = yaml.safe_load("\n".join(body))
    assert isinstance(data, dict)
    return data


def test_relay_yaml_is_the_default_configuration() -> None:
    assert load_config(REPO_ROOT) == Config()
    assert load_config(Path("/nonexistent"), config_path=RELAY_YAML) == Config()
    # every top-level key is spelled out, not left to the defaults
    data = yaml.safe_load(RELAY_YAML.read_text(encoding="utf-8"))
    assert set(data) == set(Config.model_fields)


def test_every_config_field_is_in_relay_yaml_with_its_docstring_above() -> None:
    lines = RELAY_YAML.read_text(encoding="utf-8").splitlines()
    keys = _key_lines(lines)
    fields = _section_fields(Config)
    assert len(fields) > 40  # the walk reached the nested sections
    missing, undocumented = [], []
    for key, doc in fields:
        if key not in keys:
            missing.append(key)
            continue
        index = keys[key]
        if index == 0 or not lines[index - 1].strip().startswith("#"):
            undocumented.append(f"{key}: no comment line directly above")
            continue
        comment = _comment_above(lines, index)
        assert doc, f"{key} has no docstring in relay/config.py"
        if _normalise_doc(doc) not in comment:
            undocumented.append(f"{key}: comment does not carry the docstring {doc!r}")
    assert not missing and not undocumented, (
        f"keys missing from relay.yaml: {missing}\n" + "\n".join(undocumented)
    )


def test_every_key_in_relay_yaml_is_a_config_field() -> None:
    lines = RELAY_YAML.read_text(encoding="utf-8").splitlines()
    known = {key for key, _ in _section_fields(Config)}
    extra = [
        k
        for k in _key_lines(lines)
        if k not in known and not k.startswith("guard.weights.")  # weights are a mapping
    ]
    assert extra == []


def test_relay_yaml_shows_a_valid_example_of_each_deliverable_kind() -> None:
    lines = RELAY_YAML.read_text(encoding="utf-8").splitlines()
    example = _commented_example(lines, "deliverables")
    config = validate_config(example, "the deliverables example in relay.yaml")
    assert {d.kind for d in config.deliverables} == {"file", "command", "changed"}
    used = {k for d in example["deliverables"] for k in d}
    assert used == set(Deliverable.model_fields), "every deliverable field has an example"


def test_relay_yaml_prices_example_is_valid() -> None:
    lines = RELAY_YAML.read_text(encoding="utf-8").splitlines()
    example = _commented_example(lines, "prices")
    prices = validate_config(example, "the prices example in relay.yaml").prices
    assert prices
    for table in prices.values():
        assert table.model_fields_set == {"input", "cache_write", "cached_input", "output"}


def test_relay_yaml_lists_every_guard_weight() -> None:
    data = yaml.safe_load(RELAY_YAML.read_text(encoding="utf-8"))
    assert data["guard"]["weights"] == GuardConfig().weights
    assert set(data["guard"]["detectors"]) == set(GuardConfig().weights)


# --- validation messages ----------------------------------------------------------------


def test_unknown_top_level_key_lists_the_allowed_keys() -> None:
    msg = config_error({"modle": "openai:x"})
    assert "relay.yaml" in msg
    assert "'modle'" in msg
    for key in Config.model_fields:
        assert key in msg


@pytest.mark.parametrize(
    ("data", "key", "allowed"),
    [
        ({"limits": {"max_round": 3}}, "limits.max_round", ["max_rounds_total", "time_budget"]),
        ({"guard": {"treshold": 50}}, "guard.treshold", ["threshold", "weights", "decay"]),
        ({"progress": {"keep": 2}}, "progress.keep", ["keep_rounds", "max_chars", "path"]),
        (
            {"deliverables": [{"file": "a.py", "contain": "x"}]},
            "deliverables.0.contain",
            ["contains", "matches", "timeout_s", "changed"],
        ),
    ],
)
def test_unknown_nested_key_lists_the_allowed_keys(
    data: dict[str, Any], key: str, allowed: list[str]
) -> None:
    msg = config_error(data)
    assert f"unknown key '{key}'" in msg
    assert "allowed keys" in msg
    for name in allowed:
        assert name in msg


@pytest.mark.parametrize("key", ROUND_LIMITS)
@pytest.mark.parametrize(
    ("value", "allowed"),
    [
        (0, "greater than 0"),
        (-1, "greater than 0"),
        (None, "no unlimited"),
        ("x", "expected a whole number"),
        (2.5, "expected a whole number"),
    ],
)
def test_round_limits_reject_zero_negative_null_and_text(
    key: str, value: Any, allowed: str
) -> None:
    msg = config_error({"limits": {key: value}})
    assert f"limits.{key} = {value!r}" in msg
    assert allowed in msg


def test_round_limits_reject_booleans() -> None:
    # `max_rounds_total: yes` is a typo, not "1 round": a bad value must be an error (§12),
    # as it already is for `time_budget`.
    accepted = []
    for key in ROUND_LIMITS:
        try:
            validate_config({"limits": {key: True}}, "relay.yaml")
        except ConfigError as exc:
            assert f"limits.{key} = True" in str(exc)
        else:
            accepted.append(key)
    assert accepted == [], f"round limits that accept `true` (as 1): {accepted}"


def test_round_limits_accept_positive_whole_numbers() -> None:
    config = validate_config({"limits": dict.fromkeys(ROUND_LIMITS, 1)}, "relay.yaml")
    assert all(getattr(config.limits, k) == 1 for k in ROUND_LIMITS)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (90, 90.0),
        ("90", 90.0),
        ("90s", 90.0),
        ("90m", 5400.0),
        ("8h", 28800.0),
        ("1h30m", 5400.0),
        ("1.5h", 5400.0),
        (None, None),
    ],
)
def test_time_budget_parsing(value: Any, seconds: float | None) -> None:
    assert validate_config({"limits": {"time_budget": value}}, "x").limits.time_budget == seconds
    assert parse_duration(value) == seconds


@pytest.mark.parametrize("value", ["8x", "", True, "h", "-5", "90 minutes"])
def test_time_budget_rejects_bad_durations(value: Any) -> None:
    msg = config_error({"limits": {"time_budget": value}})
    assert f"limits.time_budget = {value!r}" in msg
    assert "90m" in msg and "8h" in msg


@pytest.mark.parametrize("value", [0, "0m", -5])
def test_time_budget_must_be_positive(value: Any) -> None:
    msg = config_error({"limits": {"time_budget": value}})
    assert "limits.time_budget" in msg
    assert "greater than 0" in msg


def test_parse_duration_raises_value_error() -> None:
    with pytest.raises(ValueError, match="90m"):
        parse_duration("8x")


def test_optional_budgets_accept_null_and_positive_numbers() -> None:
    limits = validate_config(
        {"limits": {"token_budget": 1000, "cost_budget": 2.5, "time_budget": "2h"}}, "x"
    ).limits
    assert (limits.token_budget, limits.cost_budget, limits.time_budget) == (1000, 2.5, 7200.0)
    limits = validate_config({"limits": {"token_budget": None, "cost_budget": None}}, "x").limits
    assert limits.token_budget is None and limits.cost_budget is None
    assert "limits.token_budget = 0" in config_error({"limits": {"token_budget": 0}})


@pytest.mark.parametrize(
    ("deliverable", "allowed"),
    [
        ({}, "exactly one of file, command, changed"),
        ({"file": "a.py", "command": "make"}, "exactly one of file, command, changed"),
        ({"file": "a.py", "changed": "src/**"}, "exactly one of file, command, changed"),
        ({"contains": "x"}, "exactly one of file, command, changed"),
        ({"command": "make", "contains": "x"}, "contains/matches go with file"),
        ({"changed": "src/**", "matches": "x"}, "contains/matches go with file"),
        ({"file": "a.py", "timeout_s": 5}, "timeout_s goes with command"),
        ({"changed": "src/**", "timeout_s": 5}, "timeout_s goes with command"),
        ({"file": "a.py", "matches": "(unclosed"}, "not a valid regular expression"),
    ],
)
def test_deliverable_rules(deliverable: dict[str, Any], allowed: str) -> None:
    msg = config_error({"deliverables": [{"file": "ok.py"}, deliverable]})
    assert "deliverables.1" in msg
    assert repr(deliverable) in msg
    assert allowed in msg


def test_valid_deliverables_of_each_kind() -> None:
    config = validate_config(
        {
            "deliverables": [
                {"file": "src/pool.py"},
                {"file": "README.md", "contains": "pool_size"},
                {"file": "src/pool.py", "matches": r"def \w+\("},
                {"command": "pytest -q", "timeout_s": 600},
                {"changed": "src/**"},
            ]
        },
        "x",
    )
    assert [(d.kind, d.target) for d in config.deliverables] == [
        ("file", "src/pool.py"),
        ("file", "README.md"),
        ("file", "src/pool.py"),
        ("command", "pytest -q"),
        ("changed", "src/**"),
    ]
    assert config.deliverables[3].timeout_s == 600


def test_guard_weights_reject_unknown_kind_and_keep_defaults_for_the_rest() -> None:
    msg = config_error({"guard": {"weights": {"loops": 5}}})
    assert "guard.weights" in msg and "'loops'" in msg
    for kind in ("loop", "drift", "tool_failures", "api_errors", "tamper"):
        assert kind in msg
    weights = validate_config({"guard": {"weights": {"loop": 50}}}, "x").guard.weights
    assert weights == {**GuardConfig().weights, "loop": 50}


def test_guard_detectors_reject_unknown_names() -> None:
    msg = config_error({"guard": {"detectors": ["loop", "loops"]}})
    assert "guard.detectors.1 = 'loops'" in msg
    assert "'tool_failures'" in msg


@pytest.mark.parametrize("value", ["gpt-4", "openai:", "claude"])
def test_model_needs_provider_and_name(value: str) -> None:
    msg = config_error({"model": value})
    assert f"model = {value!r}" in msg
    assert "PROVIDER:MODEL" in msg


@pytest.mark.parametrize(
    ("data", "shown", "allowed"),
    [
        ({"mode": "fresh"}, "mode = 'fresh'", "'relay' or 'session'"),
        ({"on_needs_user_input": "ask"}, "on_needs_user_input = 'ask'", "'stop' or 'auto_reply'"),
        ({"guard": {"drift": "fuzzy"}}, "guard.drift = 'fuzzy'", "'embedding'"),
        ({"audit": {"suspicious": "allow"}}, "audit.suspicious = 'allow'", "'reject' or 'warn'"),
        ({"guard": {"loop_similarity": 1.5}}, "guard.loop_similarity = 1.5", "at most 1"),
        ({"progress": {"max_chars": 100}}, "progress.max_chars = 100", "2000"),
        ({"tools": {"output_limit_bytes": 10}}, "tools.output_limit_bytes = 10", "256"),
        ({"limits": "many"}, "limits = 'many'", "a mapping of keys"),
        ({"deliverables": "pytest"}, "deliverables = 'pytest'", "list"),
        ({"prices": {"m": {"input": -1}}}, "prices.m.input = -1", "at least 0"),
    ],
)
def test_bad_values_name_key_value_and_what_is_allowed(
    data: dict[str, Any], shown: str, allowed: str
) -> None:
    msg = config_error(data)
    assert shown in msg
    assert allowed in msg


def test_audit_suspicious_is_reject_by_default_and_takes_warn() -> None:
    assert Config().audit.suspicious == "reject"
    config = validate_config({"audit": {"suspicious": "warn"}}, "relay.yaml")
    assert config.audit.suspicious == "warn"
    msg = config_error({"audit": {"suspicious": True}})
    assert "audit.suspicious = True" in msg and "'reject' or 'warn'" in msg


def test_unknown_price_key_is_an_error() -> None:
    # A typo such as `inptu` would otherwise price input tokens at 0 and weaken cost_budget.
    msg = config_error({"prices": {"m": {"inptu": 3.0}}})
    assert "inptu" in msg
    assert "input" in msg and "output" in msg


def test_validate_config_rejects_a_non_mapping() -> None:
    msg = config_error(["model"], "flags")
    assert "flags" in msg and "mapping" in msg


# --- load_config ------------------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_precedence_defaults_file_front_matter_overrides(tmp_path: Path) -> None:
    write(
        tmp_path / "relay.yaml",
        "mode: session\n"
        "limits:\n  max_rounds_total: 10\n  max_steps_per_round: 7\n  auto_replies: 4\n"
        "deliverables:\n  - file: a.py\n",
    )
    front = {
        "limits": {"max_rounds_total": 20, "auto_replies": 3},
        "deliverables": [{"command": "make test"}],
    }
    overrides = {"limits": {"max_rounds_total": 30}}

    only_file = load_config(tmp_path)
    assert only_file.mode == "session"
    assert only_file.limits.max_rounds_total == 10
    assert only_file.limits.max_no_progress == 5  # default kept

    with_front = load_config(tmp_path, front_matter=front)
    assert with_front.limits.max_rounds_total == 20
    assert with_front.limits.auto_replies == 3
    assert with_front.limits.max_steps_per_round == 7  # the file's value survives the merge
    assert [d.target for d in with_front.deliverables] == ["make test"]  # lists replace

    everything = load_config(tmp_path, front_matter=front, overrides=overrides)
    assert everything.limits.max_rounds_total == 30
    assert everything.limits.auto_replies == 3
    assert everything.limits.max_steps_per_round == 7
    assert everything.mode == "session"
    assert everything.guard == GuardConfig()


def test_no_relay_yaml_gives_defaults(tmp_path: Path) -> None:
    assert load_config(tmp_path) == Config()
    assert load_config(tmp_path, overrides={"mode": "session"}) == Config(mode="session")


def test_config_path_layers_over_the_repository_file(tmp_path: Path) -> None:
    """issue 15: --config is a layer above relay.yaml (it no longer replaces it)."""
    write(tmp_path / "relay.yaml", "mode: session\nlimits:\n  max_rounds_total: 9\n")
    other = write(tmp_path / "ci.yaml", "limits:\n  max_rounds_total: 3\n")
    config = load_config(tmp_path, config_path=other)
    assert config.mode == "session"
    assert config.limits.max_rounds_total == 3


def test_missing_config_path_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, config_path=missing)
    assert str(missing) in str(info.value)
    assert "does not exist" in str(info.value)


def test_invalid_yaml_is_an_error_naming_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "relay.yaml", "limits: [unclosed\n  mode: : :\n")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert str(path) in str(info.value)
    assert "not valid YAML" in str(info.value)


def test_yaml_list_instead_of_mapping_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path / "relay.yaml", "- model: openai:x\n- mode: relay\n")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert str(path) in str(info.value)
    assert "mapping" in str(info.value)


@pytest.mark.parametrize("text", ["", "\n", "# only a comment\n", "---\n"])
def test_empty_file_gives_defaults(tmp_path: Path, text: str) -> None:
    write(tmp_path / "relay.yaml", text)
    assert load_config(tmp_path) == Config()


def test_bad_value_in_the_file_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "relay.yaml", "limits:\n  max_rounds_total: 0\n")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert str(path) in str(info.value)
    assert "limits.max_rounds_total = 0" in str(info.value)


def test_bad_value_in_front_matter_names_the_front_matter(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, front_matter={"limits": {"max_rounds_total": None}})
    assert "front matter" in str(info.value)
    assert "no unlimited" in str(info.value)


def test_bad_value_in_overrides_names_the_flags(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, overrides={"limits": {"time_budget": "8x"}})
    assert "command-line flags" in str(info.value)
    assert "limits.time_budget = '8x'" in str(info.value)


def test_an_override_cannot_remove_a_round_limit(tmp_path: Path) -> None:
    write(tmp_path / "relay.yaml", "limits:\n  max_rounds_total: 10\n")
    with pytest.raises(ConfigError, match="no unlimited"):
        load_config(tmp_path, overrides={"limits": {"max_rounds_total": None}})


# --- deep_merge -------------------------------------------------------------------------


def test_deep_merge_merges_nested_mappings_and_replaces_the_rest() -> None:
    base = {"a": 1, "limits": {"x": 1, "y": 2}, "list": [1, 2], "sub": {"k": {"deep": 1}}}
    override = {"limits": {"y": 3, "z": 4}, "list": [9], "new": {"n": 1}, "sub": {"k": {"o": 2}}}
    merged = deep_merge(base, override)
    assert merged == {
        "a": 1,
        "limits": {"x": 1, "y": 3, "z": 4},
        "list": [9],
        "new": {"n": 1},
        "sub": {"k": {"deep": 1, "o": 2}},
    }
    # the inputs are unchanged
    assert base == {"a": 1, "limits": {"x": 1, "y": 2}, "list": [1, 2], "sub": {"k": {"deep": 1}}}
    assert override["limits"] == {"y": 3, "z": 4}


def test_deep_merge_scalar_and_mapping_replace_each_other() -> None:
    assert deep_merge({"a": {"b": 1}}, {"a": None}) == {"a": None}
    assert deep_merge({"a": 1}, {"a": {"b": 2}}) == {"a": {"b": 2}}
    assert deep_merge({}, {}) == {}
    assert deep_merge({"a": 1}, {}) == {"a": 1}


# --- renamed keys -----------------------------------------------------------------------


def test_the_old_no_progress_key_still_works_with_a_deprecation_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "relay.yaml", "limits:\n  max_rounds_without_progress: 2\n")
    config = load_config(tmp_path)
    assert config.limits.max_no_progress == 2
    err = capsys.readouterr().err
    assert str(path) in err
    assert "limits.max_rounds_without_progress is deprecated" in err
    assert "limits.max_no_progress" in err


def test_the_new_no_progress_key_says_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "relay.yaml", "limits:\n  max_no_progress: 3\n")
    assert load_config(tmp_path).limits.max_no_progress == 3
    assert capsys.readouterr().err == ""


def test_a_flag_overrides_the_old_key_of_the_file(tmp_path: Path) -> None:
    write(tmp_path / "relay.yaml", "limits:\n  max_rounds_without_progress: 2\n")
    overrides = {"limits": {"max_no_progress": 7}}
    assert load_config(tmp_path, overrides=overrides).limits.max_no_progress == 7


def test_the_old_and_the_new_key_together_are_an_error(tmp_path: Path) -> None:
    write(
        tmp_path / "relay.yaml",
        "limits:\n  max_rounds_without_progress: 2\n  max_no_progress: 3\n",
    )
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert "max_rounds_without_progress" in str(info.value)
    assert "max_no_progress" in str(info.value)
    assert "max_rounds_without_progress" in config_error(
        {"limits": {"max_rounds_without_progress": 2, "max_no_progress": 3}}
    )


def test_the_old_key_in_front_matter_is_read_under_the_new_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    front = {"limits": {"max_rounds_without_progress": 4}}
    assert load_config(tmp_path, front_matter=front).limits.max_no_progress == 4
    assert "front matter" in capsys.readouterr().err
