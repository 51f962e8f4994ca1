"""What relay says about a bad ``relay.yaml`` or front matter (issue 13, the new-user check and
item 17; SPEC §12): values are read strictly by type, a key is named as the user wrote it, the
message is in relay's words (not pydantic's), and odd input (a BOM, deep nesting, huge values)
gives a clear error or the documented result."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from conftest import flat

from relay import config as config_module
from relay.config import Config, Limits, load_config, validate_config
from relay.errors import ConfigError
from relay.goal_file import parse_goal_file


def config_error(data: Any) -> str:
    with pytest.raises(ConfigError) as info:
        validate_config(data, "relay.yaml")
    return flat(str(info.value))


# ------------------------------------------------------------------------- strict types


@pytest.mark.parametrize(
    ("data", "shown", "expected"),
    [
        ({"limits": {"max_no_progress": "2"}}, "limits.max_no_progress = '2'", "a whole number"),
        ({"limits": {"max_rounds_total": "50"}}, "limits.max_rounds_total = '50'", "whole"),
        ({"limits": {"token_budget": "1000"}}, "limits.token_budget = '1000'", "whole number"),
        ({"limits": {"api_retries": 2.5}}, "limits.api_retries = 2.5", "a whole number"),
        ({"limits": {"cost_budget": "2.5"}}, "limits.cost_budget = '2.5'", "a number"),
        ({"limits": {"api_backoff_s": "1"}}, "limits.api_backoff_s = '1'", "a number"),
        ({"guard": {"threshold": "70"}}, "guard.threshold = '70'", "a whole number"),
        ({"guard": {"enabled": "yes"}}, "guard.enabled = 'yes'", "true or false"),
        ({"guard": {"enabled": 1}}, "guard.enabled = 1", "true or false"),
        ({"git": {"push": "false"}}, "git.push = 'false'", "true or false"),
        ({"git": {"branch_prefix": 5}}, "git.branch_prefix = 5", "text"),
        ({"prices": {"m": {"input": "3"}}}, "prices.m.input = '3'", "a number"),
    ],
)
def test_a_quoted_number_or_switch_is_not_taken_for_one(
    data: dict[str, Any], shown: str, expected: str
) -> None:
    msg = config_error(data)
    assert shown in msg
    assert expected in msg
    assert "Input should" not in msg


def test_yamls_own_numbers_and_switches_still_work(tmp_path: Path) -> None:
    (tmp_path / "relay.yaml").write_text(
        "limits:\n  max_no_progress: 2\n  api_backoff_s: 2\n  cost_budget: 1.5\n"
        "  time_budget: 90m\nguard:\n  enabled: no\n  loop_similarity: 1\n"
        "git:\n  push: yes\nprices:\n  m: {input: 3, output: 15.5}\n",
        encoding="utf-8",
    )
    config = load_config(tmp_path)
    assert config.limits.max_no_progress == 2
    assert config.limits.api_backoff_s == 2.0
    assert config.limits.cost_budget == 1.5
    assert config.limits.time_budget == 5400.0
    assert config.guard.enabled is False and config.guard.loop_similarity == 1.0
    assert config.git.push is True
    assert config.prices["m"].input == 3.0


def test_the_flags_and_the_stored_settings_still_validate(tmp_path: Path) -> None:
    overrides = {"limits": {"max_rounds_total": 6, "time_budget": 3000.0}, "git": {"push": True}}
    config = load_config(tmp_path, overrides=overrides)
    stored = Config.model_validate(config.model_dump())
    assert stored.limits.max_rounds_total == 6 and stored.limits.time_budget == 3000.0


# --------------------------------------------------------------------- renamed keys' values


def test_an_error_in_a_renamed_keys_value_names_the_key_written(tmp_path: Path) -> None:
    (tmp_path / "relay.yaml").write_text("limits:\n  max_rounds_without_progress: -1\n")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    msg = flat(str(info.value))
    assert "limits.max_rounds_without_progress = -1" in msg
    assert "limits.max_no_progress =" not in msg


def test_the_renamed_key_is_named_as_written_in_front_matter_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(config_module, "_warned", set())  # other tests expect their warning
    front = {"limits": {"max_rounds_without_progress": "3"}}
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, front_matter=front)
    msg = flat(str(info.value))
    assert "front matter" in msg
    assert "limits.max_rounds_without_progress = '3'" in msg


def test_validate_config_names_the_old_key_as_written() -> None:
    msg = config_error({"limits": {"max_rounds_without_progress": 0}})
    assert "limits.max_rounds_without_progress = 0" in msg


def test_the_old_key_still_works_on_the_section_model() -> None:
    assert Limits.model_validate({"max_rounds_without_progress": 3}).max_no_progress == 3


# ------------------------------------------------------------------------ relay's own words


@pytest.mark.parametrize(
    ("data", "key", "listed"),
    [
        ({"limits": 5}, "limits", ["max_rounds_total", "max_no_progress", "time_budget"]),
        ({"guard": "off"}, "guard", ["enabled", "threshold"]),
        ({"progress": []}, "progress", ["path", "keep_rounds"]),
        ({"deliverables": [5]}, "deliverables.0", ["file", "command", "changed"]),
        ({"prices": {"m": 3}}, "prices.m", ["input", "output"]),
    ],
)
def test_a_section_that_is_not_a_mapping_says_so_and_lists_its_keys(
    data: dict[str, Any], key: str, listed: list[str]
) -> None:
    msg = config_error(data)
    assert f"{key} = " in msg
    assert f"{key} must be a mapping of keys" in msg
    for name in listed:
        assert name in msg
    assert "dictionary" not in msg and "Input should" not in msg and "instance of" not in msg


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"deliverables": "pytest"}, "a list"),
        ({"prices": 3}, "a mapping"),
        ({"guard": {"weights": []}}, "a mapping"),
        ({"mode": "fresh"}, "one of 'relay' or 'session'"),
        ({"limits": {"max_rounds_total": 0}}, "greater than 0"),
        ({"guard": {"loop_similarity": 1.5}}, "at most 1"),
        ({"progress": {"max_chars": 100}}, "at least 2000"),
        ({"tools": {"protected_paths": [3]}}, "text"),
    ],
)
def test_other_type_errors_are_in_relays_words(data: dict[str, Any], words: str) -> None:
    msg = config_error(data)
    assert words in msg
    assert "Input should" not in msg and "dictionary" not in msg


# --------------------------------------------------------------------- odd input (item 17)


def test_a_bom_before_the_front_matter_is_not_goal_text(tmp_path: Path) -> None:
    path = tmp_path / "goal.md"
    path.write_bytes("\ufeff---\nlimits: {max_rounds_total: 2}\n---\nFix the bug.\n".encode())
    text, front = parse_goal_file(path)
    assert text == "Fix the bug.\n"
    assert front == {"limits": {"max_rounds_total": 2}}


def test_a_bom_in_relay_yaml_is_fine(tmp_path: Path) -> None:
    (tmp_path / "relay.yaml").write_bytes("\ufefflimits: {max_rounds_total: 2}\n".encode())
    assert load_config(tmp_path).limits.max_rounds_total == 2


def test_deeply_nested_front_matter_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "goal.md"
    path.write_text(f"---\nlimits: {'[' * 3000}{']' * 3000}\n---\nGoal.\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        parse_goal_file(path)
    assert str(path) in str(info.value) and "nested too deeply" in str(info.value)


def test_a_nested_value_in_front_matter_is_shown_shortened(tmp_path: Path) -> None:
    front = {"limits": [[[[[[[[[[1]]]]]]]]]]}
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, front_matter=front)
    assert "limits = [[[[...]]]]: limits must be a mapping of keys" in str(info.value)


def test_deeply_nested_relay_yaml_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "relay.yaml"
    path.write_text("guard: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert str(path) in str(info.value) and "nested too deeply" in str(info.value)


def test_a_huge_value_is_shown_shortened_and_at_once(tmp_path: Path) -> None:
    # YAML aliases make a value of 10**8 items out of a few lines ("billion laughs").
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(
            f"l{i}: &l{i} [" + ", ".join([f"*{'a' if i == 1 else f'l{i - 1}'}"] * 10) + "]"
        )
    (tmp_path / "relay.yaml").write_text(
        "\n".join(["x-anchors:", *("  " + line for line in lines)])
        + "\ntools: {protected_paths: [*l8]}\n"
    )
    started = time.monotonic()
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert time.monotonic() - started < 5
    assert len(str(info.value)) < 2000


def test_an_unquoted_exponent_is_a_number_and_a_quoted_one_is_text(tmp_path: Path) -> None:
    # PyYAML reads YAML 1.1, where `1e3` (no dot, no sign) is text; relay.yaml reads it as the
    # number the user wrote, while a quoted '1e3' stays text.
    (tmp_path / "relay.yaml").write_text(
        "limits: {api_backoff_s: 1e3, cost_budget: 2.5e-1, api_max_wait_s: 1E2}\n"
    )
    limits = load_config(tmp_path).limits
    assert (limits.api_backoff_s, limits.cost_budget, limits.api_max_wait_s) == (1e3, 0.25, 100.0)
    (tmp_path / "relay.yaml").write_text("limits: {api_backoff_s: '1e3'}\n")
    with pytest.raises(ConfigError, match=r"api_backoff_s = '1e3': expected a number"):
        load_config(tmp_path)


@pytest.mark.parametrize(
    "text",
    [
        "audit: {command_timeout_s: .inf}\n",
        "deliverables: [{command: 'true', timeout_s: .inf}]\n",
        "tools: {shell_timeout_s: .inf}\n",
        "limits: {time_budget: .inf}\n",
        "guard: {decay: .nan}\n",
    ],
)
def test_infinite_or_nan_numbers_are_refused(tmp_path: Path, text: str) -> None:
    # `command_timeout_s: .inf` ended the audit in OverflowError (round(inf)).
    (tmp_path / "relay.yaml").write_text(text)
    with pytest.raises(ConfigError, match="finite number"):
        load_config(tmp_path)
