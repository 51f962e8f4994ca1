"""Helpers for the tests of the CI examples (issue 28): where relay is installed from, the
shell scripts of GitHub workflows, GitHub's composite action and GitLab CI files, a check of
their quoting, GitHub's ``${{ … }}`` expressions in the simple form the examples use, and the
schema check through check-jsonschema's vendored schemas (offline)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).parents[1]
EXAMPLES = ROOT / "examples" / "ci"
ACTION = ROOT / "action.yml"

SCHEMAS: dict[str, str] = {
    "github-workflow.yml": "vendor.github-workflows",
    "github-nightly.yml": "vendor.github-workflows",
    "gitlab-ci.yml": "vendor.gitlab-ci",
    "gitlab-nightly.yml": "vendor.gitlab-ci",
    "gitlab-relay-goal.yml": "vendor.gitlab-ci",
}
"""Each file of ``examples/ci/`` → the builtin schema of check-jsonschema it must pass."""

GITLAB_SCRIPT_KEYS = ("before_script", "script", "after_script")


def in_ci() -> bool:
    """Whether the tests run in CI (``CI=true``), where a missing tool fails, never skips."""
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def validate(path: Path, schema: str) -> None:
    """Assert that ``path`` is valid against check-jsonschema's builtin ``schema``. Without
    check-jsonschema the test skips on a developer machine and fails in CI (the dev extra
    installs it)."""
    try:
        import check_jsonschema  # noqa: F401
    except ImportError:
        problem = "check-jsonschema is not installed (pip install -e '.[dev]')"
        if in_ci():
            pytest.fail(f"CI must validate the CI files, but {problem}")
        pytest.skip(problem)
    proc = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(path)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, f"{path.name} against {schema}:\n{proc.stdout}{proc.stderr}"


def project() -> dict[str, Any]:
    """The ``[project]`` table of pyproject.toml."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def repository() -> tuple[str, str]:
    """``(owner/name, ref)`` of relay's repository as the examples must name it: the
    ``Repository`` URL of pyproject.toml and the release tag ``v<version>``."""
    meta = project()
    url = meta["urls"]["Repository"]
    match = re.fullmatch(r"https://github\.com/([\w.-]+/[\w.-]+)", url)
    assert match, f"project.urls.Repository is not a GitHub repository's URL: {url}"
    return match.group(1), f"v{meta['version']}"


def load(path: Path) -> Any:
    """The parsed YAML of ``path``."""
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def github_steps(data: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(where, step)`` of every step of a GitHub workflow or composite action."""
    if "runs" in data:
        for i, step in enumerate(data["runs"].get("steps", [])):
            yield f"runs.steps[{i}]", step
    for job_name, job in (data.get("jobs") or {}).items():
        for i, step in enumerate(job.get("steps", [])):
            yield f"jobs.{job_name}.steps[{i}]", step


def gitlab_scripts(data: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """``(where, script)`` of every script line of every job (hidden ones too) of a GitLab CI
    file."""
    for job_name, job in data.items():
        if not isinstance(job, dict):
            continue
        for key in GITLAB_SCRIPT_KEYS:
            lines = job.get(key) or []
            for i, line in enumerate([lines] if isinstance(lines, str) else lines):
                yield f"{job_name}.{key}[{i}]", line


def shell_scripts(path: Path) -> list[tuple[str, str]]:
    """``(where, script)`` of every shell script in the CI file ``path``."""
    data = load(path)
    if path.name.startswith("gitlab"):
        return list(gitlab_scripts(data))
    return [(where, step["run"]) for where, step in github_steps(data) if "run" in step]


_SAFE_SPECIALS = set("?#$!0123456789-")
"""Special parameters that expand to one word without quotes (numbers, flags)."""


def _command_substitution_end(script: str, start: int) -> int:
    """The index just past the ``)`` closing the ``$(`` whose ``(`` is at ``start``."""
    depth, i = 0, start
    while i < len(script):
        char = script[i]
        if char == "\\":
            i += 2
            continue
        if char == "'" and depth:
            i = script.index("'", i + 1) + 1
            continue
        depth += {"(": 1, ")": -1}.get(char, 0)
        i += 1
        if depth == 0:
            return i
    raise ValueError(f"unclosed $( in {script!r}")


def unquoted_expansions(script: str) -> list[str]:
    """The parameter expansions (``$NAME``, ``${NAME}``, ``$@``) of ``script`` outside double
    quotes: word splitting and globbing apply to them. Single quotes, comments and command
    substitutions (checked on their own) are understood; enough for the CI examples."""
    found: list[str] = []
    quoted, i, word_start = False, 0, True
    while i < len(script):
        char = script[i]
        if char == "\\":
            i, word_start = i + 2, False
            continue
        if char == "'" and not quoted:
            i, word_start = script.index("'", i + 1) + 1, False
            continue
        if char == "#" and not quoted and word_start:
            i = script.find("\n", i)
            i = len(script) if i < 0 else i
            continue
        if char == '"':
            quoted = not quoted
        elif char == "$" and script[i + 1 : i + 2] == "(":
            end = _command_substitution_end(script, i + 1)
            found += unquoted_expansions(script[i + 2 : end - 1])
            i, word_start = end, False
            continue
        elif char == "$" and not quoted:
            match = re.match(r"\$(\{[^}]*\}|[A-Za-z_]\w*|.)", script[i:])
            name = match.group(1) if match else ""
            if name and name not in _SAFE_SPECIALS:
                found.append("$" + name)
        word_start = char in " \t\n;|&()"
        i += 1
    return found


_EXPRESSION = re.compile(r"\$\{\{\s*([\w.-]+)\s*\}\}")


def expand(text: str, context: Mapping[str, Mapping[str, Any]]) -> str:
    """``text`` with each ``${{ ctx.key }}`` replaced from ``context`` (a missing key is
    empty, as in GitHub). Any other expression is an error: the tests only need these."""

    def value(match: re.Match[str]) -> str:
        head, _, key = match.group(1).partition(".")
        if head not in context:
            raise ValueError(f"no context {head!r} for {match.group(0)}")
        return str(context[head].get(key, ""))

    rest = _EXPRESSION.sub(value, text)
    if "${{" in rest:
        raise ValueError(f"an expression the tests cannot evaluate: {text!r}")
    return rest


def action_inputs(given: Mapping[str, Any]) -> dict[str, str]:
    """The inputs of action.yml as GitHub gives them to its steps: ``given`` over the
    defaults. An input the action does not declare is an error (GitHub warns)."""
    declared = load(ACTION)["inputs"]
    unknown = set(given) - set(declared)
    assert not unknown, f"inputs action.yml does not declare: {sorted(unknown)}"
    return {name: str(given.get(name, spec.get("default", ""))) for name, spec in declared.items()}


def action_step(name: str) -> dict[str, Any]:
    """The step of action.yml whose ``id`` or ``name`` is ``name``."""
    steps = [s for _, s in github_steps(load(ACTION)) if name in (s.get("id"), s.get("name"))]
    assert len(steps) == 1, f"action.yml has {len(steps)} steps named {name!r}"
    return steps[0]


def run_action_step(
    name: str, inputs: Mapping[str, str], cwd: Path, env: Mapping[str, str]
) -> subprocess.CompletedProcess[str]:
    """Run the shell script of action.yml's step ``name`` as GitHub would: ``bash -e`` in
    ``cwd``, its ``env:`` evaluated against ``inputs``, over ``env``."""
    step = action_step(name)
    assert step.get("shell") == "bash"
    step_env = {k: expand(str(v), {"inputs": inputs}) for k, v in step.get("env", {}).items()}
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
        cwd=cwd,
        env={**env, **step_env},
        capture_output=True,
        text=True,
        timeout=300,
    )
