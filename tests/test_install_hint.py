"""The install command relay's messages give for an optional extra (issue 28): no package index
has goal-relay, so it names this checkout or the repository, never a bare ``goal-relay[x]``."""

from __future__ import annotations

import builtins
import shlex
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from relay import install_hint
from relay.batch.engines import DaskEngine
from relay.errors import ConfigError
from relay.install_hint import extra_install_command

ROOT = Path(__file__).resolve().parent.parent


def test_from_a_checkout_the_command_installs_the_extra_into_that_checkout() -> None:
    words = shlex.split(extra_install_command("dask"))
    assert words == [sys.executable, "-m", "pip", "install", "-e", f"{ROOT}[dask]"]


def test_elsewhere_the_command_names_the_repository_of_pyproject(monkeypatch) -> None:
    monkeypatch.setattr(install_hint, "_checkout", lambda: None)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    repository = project["project"]["urls"]["Repository"]
    words = shlex.split(extra_install_command("embeddings"))
    assert words == [
        sys.executable,
        "-m",
        "pip",
        "install",
        f"goal-relay[embeddings] @ git+{repository}",
    ]


def test_without_dask_the_scheduler_error_gives_a_command_that_can_work(monkeypatch) -> None:
    real_import = builtins.__import__

    def no_distributed(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "distributed" or name.startswith("distributed."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_distributed)
    with pytest.raises(ConfigError) as caught:
        DaskEngine.connect("tcp://127.0.0.1:1")
    assert extra_install_command("dask") in str(caught.value)
    assert "pip install 'goal-relay[dask]'" not in str(caught.value)


def test_no_message_of_relay_tells_the_user_to_install_from_a_package_index() -> None:
    for path in (ROOT / "relay").rglob("*.py"):
        if path.name == "install_hint.py":  # the module that explains why not
            continue
        text = path.read_text(encoding="utf-8")
        for quote in "'\"":
            assert f"install {quote}goal-relay[" not in text.replace("``", ""), path
