"""The layers of the configuration and their one precedence (issue 15), as a user meets them:
``relay config show`` with files, ``RELAY_*`` variables and flags, and the messages of a bad
value in each layer.

Precedence, lowest first: default < user file < relay.yaml < --config < front matter < env <
flag (relay/config_layers.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from conftest import call, respond

from relay.cli import app
from relay.config_flags import FLAGS


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Warnings are said once per process: each test here expects its own."""
    import relay.config
    import relay.config_layers

    monkeypatch.setattr(relay.config, "_warned", set())
    monkeypatch.setattr(relay.config_layers, "_warned", set())


LAYERS = ["user", "repo", "config file", "front matter", "env", "flag"]

# key path → (option, a distinct value per layer of LAYERS, as typed)
KEYS: dict[tuple[str, ...], tuple[str, list[Any]]] = {
    ("model",): ("--model", [f"openai:model-{n}" for n in LAYERS]),
    ("mode",): ("--mode", ["session", "relay", "session", "relay", "session", "relay"]),
    ("limits", "max_rounds_total"): ("--max-rounds", [11, 12, 13, 14, 15, 16]),
    ("limits", "max_no_progress"): ("--max-no-progress", [2, 3, 4, 5, 6, 7]),
}
"""(``sandbox`` and ``base_url`` are the machine's: a goal file's front matter may not set
them, ``test_attacks_goal_state.py``; their other layers are tested key by key below.)"""


def nested(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out: Any = value
    for part in reversed(path):
        out = {part: out}
    return out


def user_file(home: Path) -> Path:
    return home / ".config" / "relay" / "config.yaml"


def write_yaml(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def show(run_relay, repo: Path, *args: str | Path) -> dict[str, Any]:
    code, out, err = run_relay(["config", "show", "--repo", repo, "--json", *args])
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("key", list(KEYS), ids=[".".join(k) for k in KEYS])
@pytest.mark.parametrize("top", range(len(LAYERS)), ids=LAYERS)
def test_each_layer_overrides_the_ones_below(
    key, top, make_repo, run_relay, clean_env, monkeypatch, tmp_path
) -> None:
    """Layers up to ``top`` each set ``key`` to their own value: the highest one wins, and
    relay config show names it as the source."""
    option, values = KEYS[key]
    repo = make_repo()
    extra: list[str | Path] = []
    for layer, value in list(zip(LAYERS, values, strict=True))[: top + 1]:
        data = nested(key, value)
        if layer == "user":
            write_yaml(user_file(clean_env), data)
        elif layer == "repo":
            write_yaml(repo / "relay.yaml", data)
        elif layer == "config file":
            extra += ["--config", write_yaml(tmp_path / "ci.yaml", data)]
        elif layer == "front matter":
            goal = tmp_path / "goal.md"
            goal.write_text(f"---\n{yaml.safe_dump(data)}---\nDo it.\n", encoding="utf-8")
            extra += ["--goal-file", goal]
        elif layer == "env":
            monkeypatch.setenv("RELAY_" + "__".join(key).upper(), str(value))
        else:
            extra += [option, str(value)]
    setting = show(run_relay, repo, *extra)["settings"][".".join(key)]
    assert setting["value"] == values[top]
    assert setting["source"] == LAYERS[top]


def test_config_show_names_the_file_variable_and_option_of_each_value(
    make_repo, run_relay, clean_env, monkeypatch
) -> None:
    repo = make_repo(config={"guard": {"threshold": 60}})
    user = write_yaml(user_file(clean_env), {"model": "anthropic:claude-sonnet-4-6"})
    monkeypatch.setenv("RELAY_LIMITS__TOKEN_BUDGET", "50000")
    data = show(run_relay, repo, "--max-no-progress", "4")
    settings = data["settings"]
    assert settings["model"] == {
        "value": "anthropic:claude-sonnet-4-6",
        "source": "user",
        "from": str(user),
    }
    assert settings["guard.threshold"]["source"] == "repo"
    assert settings["guard.threshold"]["from"] == str(repo / "relay.yaml")
    assert settings["limits.token_budget"] == {
        "value": 50000,
        "source": "env",
        "from": "RELAY_LIMITS__TOKEN_BUDGET",
    }
    assert settings["limits.max_no_progress"]["from"] == "--max-no-progress"
    assert settings["limits.max_steps_per_round"] == {
        "value": 40,
        "source": "default",
        "from": None,
    }
    assert [layer["source"] for layer in data["layers"]] == ["default", *LAYERS]
    code, out, _ = run_relay(["config", "show", "--repo", repo])
    assert code == 0
    row = next(line for line in out.splitlines() if line.startswith("limits.token_budget"))
    assert row.split()[1:] == ["50000", "env", "RELAY_LIMITS__TOKEN_BUDGET"]
    assert f"user: {user}" in out


def test_provider_keys_never_appear_and_a_file_cannot_hold_one(
    make_repo, run_relay, clean_env, monkeypatch
) -> None:
    secret = "sk-ant-0123456789secret"
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    monkeypatch.setenv("RELAY_API_KEY", secret)
    monkeypatch.setenv("RELAY_BASE_URL", f"https://user:{secret}@proxy.example/v1")
    repo = make_repo()
    code, out, err = run_relay(["config", "show", "--repo", repo, "--json"])
    assert code == 0 and secret not in out + err
    assert "RELAY_API_KEY" not in out + err  # an unknown credential-like name: ignored silently
    write_yaml(user_file(clean_env), {"anthropic_api_key": secret})
    code, out, err = run_relay(["config", "show", "--repo", repo])
    assert code == 1 and secret not in out + err
    assert "provider keys are read from the environment only" in err
    assert str(user_file(clean_env)) in err


def test_a_bad_environment_value_names_the_variable_the_value_and_what_is_allowed(
    make_repo, run_relay, monkeypatch
) -> None:
    repo = make_repo()
    monkeypatch.setenv("RELAY_LIMITS__MAX_ROUNDS_TOTAL", "abc")
    code, _, err = run_relay(["config", "show", "--repo", repo])
    assert code == 1 and "Traceback" not in err
    assert "invalid configuration in the environment" in err
    assert "RELAY_LIMITS__MAX_ROUNDS_TOTAL = 'abc': expected a whole number" in err
    monkeypatch.setenv("RELAY_LIMITS__MAX_ROUNDS_TOTAL", "0")
    code, _, err = run_relay(["config", "show", "--repo", repo])
    assert code == 1 and "RELAY_LIMITS__MAX_ROUNDS_TOTAL = 0: must be greater than 0" in err
    monkeypatch.setenv("RELAY_LIMITS__MAX_ROUNDS_TOTAL", "20")
    monkeypatch.setenv("RELAY_SANDBOX__MODE", "sometimes")
    code, _, err = run_relay(["config", "show", "--repo", repo])
    assert code == 1 and "RELAY_SANDBOX__MODE = 'sometimes': expected one of" in err


def test_an_unknown_key_in_a_section_is_an_error_and_an_unknown_name_a_warning(
    make_repo, run_relay, monkeypatch
) -> None:
    repo = make_repo()
    monkeypatch.setenv("RELAY_LIMITS__MAX_ROUND", "3")
    code, _, err = run_relay(["config", "show", "--repo", repo])
    assert code == 1
    assert "unknown key 'RELAY_LIMITS__MAX_ROUND' in limits" in err
    assert "max_rounds_total" in err  # the allowed keys
    monkeypatch.delenv("RELAY_LIMITS__MAX_ROUND")
    monkeypatch.setenv("RELAY_MAX_ROUNDS", "3")
    monkeypatch.setenv("RELAY_MODLE", "openai:x")
    monkeypatch.setenv("RELAY_HOST", "example.org")  # another program's: not a word
    code, _, err = run_relay(["config", "show", "--repo", repo])
    assert code == 0
    assert "RELAY_MAX_ROUNDS is not a relay setting (ignored)" in err
    assert "RELAY_LIMITS__MAX_ROUNDS_TOTAL" in err
    assert "RELAY_MODLE is not a relay setting (ignored); did you mean" in err
    assert "RELAY_MODEL" in err  # the letters swapped, not only the closest by difflib's ratio
    assert "RELAY_HOST" not in err


def test_old_names_nulls_lists_and_relays_own_variables(make_repo, run_relay, monkeypatch) -> None:
    repo = make_repo(config={"limits": {"token_budget": 1000}})
    monkeypatch.setenv("RELAY_LIMITS__MAX_ROUNDS_WITHOUT_PROGRESS", "4")
    monkeypatch.setenv("RELAY_LIMITS__TOKEN_BUDGET", "null")  # unsets relay.yaml's budget
    monkeypatch.setenv("RELAY_SANDBOX__ENV", "[MYAPP_HOME, 'DB_*']")
    monkeypatch.setenv("RELAY_AUTO_REPLY", "Yes: go on")  # text stays text
    monkeypatch.setenv("RELAY_SANDBOX", "bwrap")  # set by relay in the model's commands
    monkeypatch.setenv("RELAY_RUN", "abc")
    code, out, err = run_relay(["config", "show", "--repo", repo, "--json"])
    assert code == 0, err
    settings = json.loads(out)["settings"]
    assert settings["limits.max_no_progress"]["value"] == 4
    assert "limits.max_rounds_without_progress is deprecated" in err
    assert settings["limits.token_budget"] == {
        "value": None,
        "source": "env",
        "from": "RELAY_LIMITS__TOKEN_BUDGET",
    }
    assert settings["sandbox.env"]["value"] == ["MYAPP_HOME", "DB_*"]
    assert settings["auto_reply"]["value"] == "Yes: go on"
    assert settings["sandbox.mode"]["source"] == "default"


def test_a_bad_user_file_is_named(make_repo, run_relay, clean_env) -> None:
    repo = make_repo()
    path = write_yaml(user_file(clean_env), {"limits": {"max_rounds_total": "lots"}})
    code, _, err = run_relay(["config", "show", "--repo", repo])
    assert code == 1
    assert f"invalid configuration in {path}" in err
    assert "limits.max_rounds_total = 'lots': expected a whole number" in err


def test_the_user_file_sets_the_default_model_of_relay_run(
    make_repo, run_relay, clean_env, write_script
) -> None:
    """issue 15: once the user file names a model, relay run needs no --model (a relative
    scripted: path is relative to the user file's folder)."""
    repo = make_repo()
    script = write_script([respond(call("update_goal", status="complete", summary="done"))])
    folder = user_file(clean_env).parent
    folder.mkdir(parents=True)
    (folder / "script.yaml").write_text(script.read_text())
    write_yaml(user_file(clean_env), {"model": "scripted:script.yaml"})
    _, out, err = run_relay(["run", "Say done.", "--repo", repo, "--json"])
    assert "no model is configured" not in err
    assert json.loads(out)["model"] == f"scripted:{(folder / 'script.yaml').resolve()}", err


def test_without_a_model_the_error_says_how_to_set_one(make_repo, run_relay, clean_env) -> None:
    repo = make_repo()
    code, _, err = run_relay(["run", "Do it.", "--repo", repo])
    assert code == 1
    flat = " ".join(err.split())
    assert "--model PROVIDER:MODEL" in flat and "RELAY_MODEL" in flat
    assert str(user_file(clean_env)) in flat


def test_config_show_works_outside_a_repository(run_relay, clean_env, tmp_path) -> None:
    write_yaml(user_file(clean_env), {"model": "openai:gpt-5"})
    folder = tmp_path / "plain"
    folder.mkdir()
    settings = show(run_relay, folder)["settings"]
    assert settings["model"]["value"] == "openai:gpt-5"
    assert settings["model"]["source"] == "user"


# setting of a flag → (file value, env value, flag value): each differs from the one below it
THREE: dict[str, tuple[Any, Any, Any]] = {
    "mode": ("session", "relay", "session"),
    "worker": ("claude-code", "codex", "builtin"),
    "model": ("openai:from-file", "openai:from-env", "openai:from-flag"),
    "base_url": ("http://file.example/v1", "http://env.example/v1", "http://flag.example/v1"),
    "max_output_tokens": (1000, 2000, 3000),
    "request_timeout": (100.0, 200.0, 300.0),
    "connect_timeout": (1.0, 2.0, 3.0),
    "force_tool_choice": (True, False, True),
    "parse_text_calls": (True, False, True),
    "max_rounds": (11, 12, 13),
    "max_no_progress": (2, 3, 4),
    "token_budget": (1000, 2000, 3000),
    "time_budget": (5400.0, 7200.0, 10800.0),
    "unattended": ("auto_reply", "stop", "auto_reply"),
    "push": (True, False, True),
    "sandbox": ("off", "required", "auto"),
}


def _typed_flag(name: str, value: Any) -> list[str]:
    """Option ``name`` of relay run as a user types it to give ``value``."""
    flag = FLAGS[name]
    if flag.when_on is not None:
        assert value == flag.when_on
        return [flag.option]
    return [flag.option, str(value)]


def test_every_option_of_run_is_a_setting_config_show_takes() -> None:
    """README: relay config show takes "the same configuration flags as relay run"; each of
    them is in the table below (a new option cannot be left out of these tests)."""
    group = typer.main.get_command(app)
    of_run = {p.name for p in group.commands["run"].params if p.name in FLAGS}  # type: ignore[attr-defined]
    show = group.commands["config"].commands["show"]  # type: ignore[attr-defined]
    assert of_run == set(FLAGS) == set(THREE)
    assert of_run <= {p.name for p in show.params}


@pytest.mark.parametrize("name", sorted(THREE))
def test_each_setting_of_a_flag_through_file_env_and_flag(
    name, make_repo, run_relay, monkeypatch
) -> None:
    """Issue 15, "precedence tested key by key": every setting a flag of relay run sets is
    taken from relay.yaml, overridden by its RELAY_* variable, overridden by the flag."""
    flag = FLAGS[name]
    key = ".".join(flag.key)
    in_file, in_env, by_flag = THREE[name]
    repo = make_repo(config=nested(flag.key, in_file))
    setting = show(run_relay, repo)["settings"][key]
    assert (setting["value"], setting["source"]) == (in_file, "repo")
    variable = "RELAY_" + "__".join(flag.key).upper()
    monkeypatch.setenv(variable, json.dumps(in_env) if not isinstance(in_env, str) else in_env)
    setting = show(run_relay, repo)["settings"][key]
    assert setting == {"value": in_env, "source": "env", "from": variable}
    setting = show(run_relay, repo, *_typed_flag(name, by_flag))["settings"][key]
    assert setting == {"value": by_flag, "source": "flag", "from": flag.option}


def test_an_empty_variable_counts_as_unset(make_repo, run_relay, monkeypatch) -> None:
    """README: an empty RELAY_* variable counts as unset (not as an empty value, nor null)."""
    repo = make_repo(config={"model": "openai:gpt-5", "limits": {"token_budget": 1000}})
    monkeypatch.setenv("RELAY_MODEL", "")
    monkeypatch.setenv("RELAY_LIMITS__TOKEN_BUDGET", "")
    settings = show(run_relay, repo)["settings"]
    assert (settings["model"]["value"], settings["model"]["source"]) == ("openai:gpt-5", "repo")
    assert settings["limits.token_budget"]["value"] == 1000
    assert settings["limits.token_budget"]["source"] == "repo"
