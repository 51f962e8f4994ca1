"""One mapping from command-line options to configuration keys (SPEC §12): every command
and a batch file's entries name a setting the same way and set the same key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer

from relay import cli
from relay.batch import BatchGoal
from relay.cli import app
from relay.config import FLAGS, flag_overrides, load_config
from relay.config_flags import MODEL_FLAGS
from relay.errors import ConfigError


def test_only_the_options_given_override_the_file() -> None:
    assert flag_overrides({}) == {}
    assert flag_overrides({"max_rounds": None, "push": False, "repo": Path("."), "x": 1}) == {}
    assert flag_overrides(
        {"max_rounds": 3, "max_no_progress": 0, "unattended": True, "push": True}
    ) == {
        "limits": {"max_rounds_total": 3, "max_no_progress": 0},  # 0 is given: refused later
        "on_needs_user_input": "auto_reply",
        "git": {"push": True},
    }


def test_values_are_converted_as_the_configuration_expects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    out = flag_overrides({"time_budget": "1h30m", "model": "scripted:s.yaml", "sandbox": "off"})
    assert out == {
        "limits": {"time_budget": 5400.0},
        "model": f"scripted:{(tmp_path / 's.yaml').resolve()}",  # relative to where it was typed
        "sandbox": {"mode": "off"},
    }
    assert flag_overrides({"model": "openai:gpt-x"}) == {"model": "openai:gpt-x"}
    config = load_config(tmp_path, overrides=flag_overrides({"max_no_progress": 4}))
    assert config.limits.max_no_progress == 4


def test_a_bad_time_budget_names_the_option() -> None:
    with pytest.raises(ConfigError) as info:
        flag_overrides({"time_budget": "8x"})
    assert "--time-budget '8x'" in str(info.value)


@pytest.mark.parametrize("command", ["run", "resume", "compare"])
def test_every_command_spells_each_setting_like_the_mapping(command: str) -> None:
    group = typer.main.get_command(app)
    params = {p.name: p for p in group.commands[command].params}  # type: ignore[attr-defined]
    shared = [name for name in params if name in FLAGS]
    assert {"model", "max_rounds", "token_budget", "time_budget", "unattended"} <= set(shared)
    for name in shared:
        assert params[name].opts == [FLAGS[name].option], name


def test_a_batch_entry_maps_like_the_flags() -> None:
    entry = BatchGoal(goal="x", max_rounds=2, token_budget=10, time_budget="90m", unattended=True)
    assert flag_overrides(entry.model_dump()) == {
        "limits": {"max_rounds_total": 2, "token_budget": 10, "time_budget": 5400.0},
        "on_needs_user_input": "auto_reply",
    }


def _model_flags_of_run() -> list[Any]:
    """The options of ``relay run`` that set a setting of the model (from run's own options)."""
    group = typer.main.get_command(app)
    run = group.commands["run"]  # type: ignore[attr-defined]
    return [p for p in run.params if p.name in FLAGS and FLAGS[p.name].model]


def _typed(param: Any) -> list[str]:
    """The option as typed with a value of its type."""
    option = param.opts[0]
    if param.is_flag:
        return [option]
    text = "http://127.0.0.1:8080/v1" if option == "--base-url" else "openai:m"  # a URL
    return [option, {"int": "7", "float": "2.5"}.get(param.bare_type(), text)]


def _overrides_of(command: str, argv: list[str], monkeypatch: pytest.MonkeyPatch) -> dict:
    """The configuration overrides ``relay COMMAND argv`` hands on (the run is not started)."""
    seen: dict[str, Any] = {}

    def capture(request: Any, *args: Any, **kwargs: Any) -> None:
        seen.update(request.overrides)
        raise ConfigError("captured")

    import relay.compare
    import relay.runner

    monkeypatch.setattr(relay.runner, "run", capture)
    monkeypatch.setattr(relay.compare, "run_compare", capture)
    assert cli.main([command, "do it", *argv]) == 1
    return seen


def test_compare_takes_every_model_flag_of_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 14: ``relay compare`` had no ``--force-tool-choice``. Every model flag of ``run``
    (derived from run's options, so that a new one cannot be forgotten) is taken by
    ``compare`` and sets the same configuration."""
    flags = _model_flags_of_run()
    assert {p.name for p in flags} == set(MODEL_FLAGS)
    assert {"model", "base_url", "force_tool_choice", "max_output_tokens"} <= set(MODEL_FLAGS)
    argv = [word for p in flags for word in _typed(p)]
    from_run = _overrides_of("run", argv, monkeypatch)
    from_compare = _overrides_of("compare", argv, monkeypatch)
    assert from_compare == from_run
    assert {FLAGS[p.name].key[0] for p in flags} <= set(from_compare)
    assert from_compare["force_tool_choice"] is True
    resume = typer.main.get_command(app).commands["resume"]  # type: ignore[attr-defined]
    assert set(MODEL_FLAGS) <= {p.name for p in resume.params}


def test_config_show_takes_every_model_flag_of_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``relay config show`` shows what a run with the same flags would use: it takes every
    model flag of ``run`` (it once had only --model and --base-url) and names the flag as the
    source of each value."""
    import json

    flags = _model_flags_of_run()
    argv = [word for p in flags for word in _typed(p)]
    assert cli.main(["config", "show", "--repo", str(tmp_path), "--json", *argv]) == 0
    settings = json.loads(capsys.readouterr().out)["settings"]
    for p in flags:
        key = ".".join(FLAGS[p.name].key)
        assert settings[key]["source"] == "flag", (key, settings[key])
        assert settings[key]["from"] == FLAGS[p.name].option
