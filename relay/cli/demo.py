"""``relay demo``: the shipped fizzbuzz example, offline (scripted model, real audit)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from relay.cli.app import app, err
from relay.cli.options import JsonOpt, NoColorOpt
from relay.errors import ConfigError
from relay.install_hint import extra_install_command

__all__ = ["demo"]


def _demo_repository(keep: Path | None) -> tuple[Path, Path]:
    """A fresh git repository with the fizzbuzz example in a temporary folder (inside
    ``keep`` when given); returns the repository and the scripted model's file."""
    if keep is not None:
        try:
            keep.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"--dir {keep}: cannot create the folder ({exc.strerror})") from None
    from relay.data import data_dir

    base = Path(tempfile.mkdtemp(prefix="relay-demo-", dir=keep))
    src = data_dir("examples") / "fizzbuzz"
    repo = base / "repo"
    shutil.copytree(src / "repo", repo)
    shutil.copy(src / "script.yaml", base / "script.yaml")
    shutil.copy(src / "goal.md", repo / "GOAL.md")
    env = {**os.environ, "GIT_AUTHOR_NAME": "demo", "GIT_AUTHOR_EMAIL": "demo@example.invalid"}
    env |= {"GIT_COMMITTER_NAME": "demo", "GIT_COMMITTER_EMAIL": "demo@example.invalid"}
    for cmd in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "add", "-A"],
        ["git", "commit", "-q", "-m", "fizzbuzz example: initial"],
    ):
        subprocess.run(cmd, cwd=repo, check=True, env=env, capture_output=True)
    return repo, base / "script.yaml"


@app.command()
def demo(
    keep: Annotated[
        Path | None, typer.Option("--dir", help="Folder to create the demo repository in.")
    ] = None,
    as_json: JsonOpt = False,
    no_color: NoColorOpt = False,
) -> None:
    """Run the shipped fizzbuzz example offline: a fresh git repository in a temporary folder,
    the scripted model, the real audit (pytest).

    \b
    Example: relay demo --dir /tmp/relay-demo
    """
    try:
        import pytest  # noqa: F401
    except ImportError:
        raise ConfigError(
            "the demo's audit runs pytest, which is not installed: " + extra_install_command("dev")
        ) from None
    from relay.cli.run import finish, run_shown
    from relay.runner import RunRequest

    repo, script = _demo_repository(keep)
    # `python` in the goal's commands is the interpreter relay runs in.
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
    err.print(f"demo repository: {repo}")
    request = RunRequest(
        repo=repo, goal_file=repo / "GOAL.md", overrides={"model": f"scripted:{script}"}
    )
    outcome = run_shown(request)
    if not as_json:
        err.print(f"\nrepository: {repo}\nrun folder: {outcome.run_dir}")
        err.print(f"see the commits:  git -C {repo} log --stat")
    finish(outcome, as_json)
