"""Start-up of the command line (issue 12): `relay --version` and `relay --help` load no heavy
module (gitpython, pydantic, yaml, the HTTP client, the provider SDKs), so that they stay
fast; the public API of `relay` is still there, imported on first use."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY_PACKAGES = {"git", "pydantic", "pydantic_core", "yaml", "httpx", "anthropic", "openai"}
HEAVY_PACKAGES |= {"watchdog", "matplotlib", "sqlite3"}
HEAVY_RELAY = {"relay.config", "relay.runner", "relay.gitrepo", "relay.loop", "relay.store"}

_PROBE = """
import json, sys
from relay.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _loaded_by(*argv: str) -> tuple[int, list[str]]:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=True,
    )
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    heavy = [m for m in data["modules"] if m.split(".")[0] in HEAVY_PACKAGES or m in HEAVY_RELAY]
    return data["code"], heavy


@pytest.mark.parametrize("argv", [["--version"], ["--help"]])
def test_version_and_help_load_no_heavy_module(argv: list[str]) -> None:
    code, heavy = _loaded_by(*argv)
    assert code == 0
    assert heavy == []


def test_a_commands_help_loads_no_heavy_module_of_relays() -> None:
    """typer itself coerces a subcommand's parameters through pydantic; nothing else."""
    code, heavy = _loaded_by("run", "--help")
    assert code == 0
    assert [m for m in heavy if not m.startswith("pydantic")] == []


@pytest.mark.parametrize("module", ["relay", "relay.cli"])
def test_python_dash_m_runs_the_command_line(module: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", module, "--version"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("goal-relay ")


def test_the_public_api_is_imported_on_first_use() -> None:
    import relay

    for name in relay.__all__:
        assert getattr(relay, name) is not None, name
    assert relay.run_goal is relay.runner.run
    assert relay.goal_json.__module__ == "relay.json_output"
    with pytest.raises(AttributeError):
        relay.no_such_name  # noqa: B018
    from relay import runner  # a submodule is still found

    assert runner.RunRequest is relay.RunRequest
