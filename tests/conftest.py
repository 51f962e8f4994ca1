"""Shared fixtures for the end-to-end tests of the ``relay`` command line.

The tests drive the real CLI (``relay.cli.main`` in-process, or ``python -m relay.cli`` in a
subprocess) against real temporary git repositories, with the scripted model of SPEC §13
written to files outside the repository. Nothing here touches the repository the tests live in:
every test runs with its current directory in ``tmp_path``, ``HOME`` pointing to an empty
folder, and no system or global git configuration.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from relay import cli, transcript

GIT_NAME = "Relay Test"
GIT_EMAIL = "relay-test@example.invalid"

# Git variables that would redirect or reconfigure git in the test repositories.
_GIT_LEAKS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "EMAIL",
)


def git(repo: Path, *args: str, check: bool = True) -> str:
    """Run git in ``repo`` and return its stdout (text)."""
    proc = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc.stdout


def flat(text: str) -> str:
    """``text`` with every run of whitespace collapsed to one space (messages may be wrapped)."""
    return " ".join(text.split())


def write_files(root: Path, files: dict[str, str]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")


def audit_shell(repo: Path, tmp_path: Path) -> Any:
    """The audit's command runner in ``repo`` with a run folder of the test's own."""
    from relay.audit_commands import AuditShell
    from relay.tools import ToolContext

    ctx = ToolContext(
        repo_root=repo,
        state_dir=repo / ".relay" / "state",
        run_dir=tmp_path / f"run-{tmp_path.name}",
    )
    return AuditShell(ctx, 4000)


def load_json(stdout: str) -> dict[str, Any]:
    """The JSON object a ``--json`` run printed (the whole stdout, else the last object)."""
    text = stdout.strip()
    try:
        data = json.loads(text)
    except ValueError:
        data = None
        for start in (i for i, ch in enumerate(text) if ch == "{"):
            try:
                data = json.loads(text[start:])
                break
            except ValueError:
                continue
    assert isinstance(data, dict), f"no JSON object on stdout: {stdout[-2000:]!r}"
    return data


def state_dir(repo: Path) -> Path:
    """relay's state folder (store, run folders, inbox) of the test repository ``repo``: the
    default ``relay/`` in its git directory (``<repo>/.git/relay`` for a normal repository,
    ``<main>/.git/worktrees/<name>/relay`` for a linked worktree)."""
    dot_git = repo / ".git"
    if dot_git.is_dir():
        return dot_git / "relay"
    return Path(git(repo, "rev-parse", "--absolute-git-dir").strip()) / "relay"


def sealed_goal_state(state: dict[str, Any]) -> str:
    """The text of a goal state file holding ``state`` (its old seal dropped), sealed with
    this machine's key as relay seals it: what a writer who holds the key (a CI job that
    shares the secret) could commit. Its values are still checked."""
    from relay.branch_trust import sealed_text
    from relay.state_seal import sealing_key

    return sealed_text(state, sealing_key())


def read_transcript(repo: Path) -> list[dict[str, Any]]:
    """Every model call recorded in the run folders' ``transcript.jsonl``, oldest first."""
    rows: list[dict[str, Any]] = []
    for path in (state_dir(repo) / "runs").glob("*/transcript.jsonl"):
        rows += transcript.read_transcript(path)
    rows.sort(key=lambda r: r.get("time", 0))
    return rows


def tree_snapshot(repo: Path) -> dict[str, Any]:
    """What a refused run must leave unchanged: branches, HEAD, status, files of the tree
    (relay's own store is in ``.git/relay/``, out of the tree)."""
    files = {}
    for path in sorted(repo.rglob("*")):
        rel = path.relative_to(repo).as_posix()
        if rel == ".git" or rel.startswith(".git/"):
            continue
        if path.is_symlink():
            files[rel] = "-> " + os.readlink(path)
        elif path.is_file():
            files[rel] = path.read_bytes()
        else:
            files[rel] = "<dir>"
    return {
        "branches": git(repo, "for-each-ref", "--format=%(refname) %(objectname)"),
        "head": (repo / ".git" / "HEAD").read_text(),
        "status": git(repo, "status", "--porcelain=v1", "--untracked-files=all"),
        "files": files,
    }


@pytest.fixture(autouse=True)
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An isolated environment: empty HOME (no user configuration file), no ``RELAY_*``
    variables, no global/system git config, cwd in tmp_path,
    and the folder of this interpreter first on PATH (``python -m pytest`` deliverables)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_TERMINAL_PROMPT", "0")
    monkeypatch.setenv("COLUMNS", "4000")
    for name in _GIT_LEAKS:
        monkeypatch.delenv(name, raising=False)
    for name in list(os.environ):  # relay's settings variables and colour switches of the caller
        if name.upper().startswith("RELAY_") or name in ("NO_COLOR", "FORCE_COLOR"):
            monkeypatch.delenv(name, raising=False)
    bindir = str(Path(sys.executable).parent)
    monkeypatch.setenv("PATH", bindir + os.pathsep + os.environ.get("PATH", ""))
    # Messages are printed by a rich console made at import time: no wrapping at 80 columns.
    monkeypatch.setattr(cli.err, "width", 4000)
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    return home


@pytest.fixture()
def make_repo(tmp_path: Path) -> Callable[..., Path]:
    """``make_repo(files=None, config=None, *, name="repo", commit=True)`` → the repository.

    A real git repository on branch ``main`` with a local user, ``files`` (``{path: text}``)
    and ``config`` (written as ``relay.yaml``) committed as ``initial``. ``README.md`` is added
    when not given. ``commit=False`` leaves a repository without any commit.
    """

    def factory(
        files: dict[str, str] | None = None,
        config: dict[str, Any] | None = None,
        *,
        name: str = "repo",
        commit: bool = True,
    ) -> Path:
        repo = tmp_path / name
        repo.mkdir(parents=True)
        git(repo, "init", "-q", "-b", "main")
        git(repo, "config", "user.name", GIT_NAME)
        git(repo, "config", "user.email", GIT_EMAIL)
        git(repo, "config", "commit.gpgsign", "false")
        if not commit:
            return repo.resolve()
        content = dict(files or {})
        if config is not None:
            content["relay.yaml"] = yaml.safe_dump(config, sort_keys=False)
        content.setdefault("README.md", "test repository\n")
        write_files(repo, content)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "initial")
        return repo.resolve()

    return factory


@pytest.fixture()
def write_script(tmp_path: Path) -> Callable[..., Path]:
    """``write_script(data)`` → path of a scripted-model YAML file outside every repository.

    ``data`` is the script mapping (SPEC §13) or just the list of responses.
    """
    folder = tmp_path / "scripts"
    folder.mkdir()
    counter = iter(range(1, 1_000_000))

    def factory(data: dict[str, Any] | list[Any]) -> Path:
        if isinstance(data, list):
            data = {"responses": data}
        path = folder / f"script{next(counter)}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        return path

    return factory


@pytest.fixture()
def run_relay(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """``run_relay(args, *, subprocess=False, env=None)`` → ``(exit code, stdout, stderr)``.

    In-process through ``relay.cli.main`` by default; ``subprocess=True`` runs
    ``python -m relay.cli`` (stdout and stderr of a real process; ``env`` adds variables).
    """

    def runner(
        args: list[str | Path],
        *,
        subprocess: bool = False,
        env: dict[str, str] | None = None,
        timeout: float = 60,
    ) -> tuple[int, str, str]:
        argv = [str(a) for a in args]
        if subprocess:
            full_env = {**os.environ, **(env or {})}
            proc = _subprocess_run(argv, full_env, timeout)
            return proc.returncode, proc.stdout, proc.stderr
        assert not env, "pass env only with subprocess=True (use monkeypatch in-process)"
        capsys.readouterr()
        code = cli.main(argv)
        out, err = capsys.readouterr()
        return code, out, err

    return runner


def _subprocess_run(argv: list[str], env: dict[str, str], timeout: float) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "relay.cli", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture()
def relay_run(
    run_relay: Callable[..., tuple[int, str, str]],
) -> Callable[..., tuple[int, dict[str, Any], str]]:
    """``relay_run(repo, script, goal, *extra)`` → ``(exit code, JSON object, stderr)`` of
    ``relay run GOAL --repo REPO --model scripted:SCRIPT --json EXTRA...``."""

    def runner(
        repo: Path, script: Path, goal: str | None = "Do the task.", *extra: str | Path
    ) -> tuple[int, dict[str, Any], str]:
        args: list[str | Path] = ["run"]
        if goal is not None:
            args.append(goal)
        args += ["--repo", repo, "--model", f"scripted:{script}", "--json", *extra]
        code, out, err = run_relay(args)
        assert "Traceback" not in err, err
        assert out.strip(), f"exit {code}, nothing on stdout; stderr: {err[-3000:]}"
        return code, load_json(out), err

    return runner


# Scripted responses used in many tests -------------------------------------------------------


def call(name: str, **arguments: Any) -> dict[str, Any]:
    """One scripted tool call."""
    return {"name": name, "arguments": arguments}


def respond(
    *calls: dict[str, Any], text: str | None = None, usage: dict[str, int] | None = None
) -> dict[str, Any]:
    """One scripted response with ``calls`` (none: a text-only response)."""
    out: dict[str, Any] = {}
    if text is not None:
        out["text"] = text
    if calls:
        out["tool_calls"] = list(calls)
    if usage is not None:
        out["usage"] = usage
    return out


def complete(summary: str = "done") -> dict[str, Any]:
    """A response with ``update_goal(status=complete)`` alone."""
    return respond(call("update_goal", status="complete", summary=summary))
