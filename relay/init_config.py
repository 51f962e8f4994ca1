"""What ``relay init`` writes (SPEC §12): a commented ``relay.yaml`` for one repository, from
what is found there, and the CI workflow of ``examples/ci/`` with ``--ci``.

Pure: the facts (the repository's files, the detected test command, the sandbox found on this
machine) come in as arguments and the text goes out; :mod:`relay.cli.init` reads and writes.

* the deliverable is the project's test command, found by the audit's own discovery
  (:func:`relay.testcmd.discover_test_command`), so that ``complete`` needs the tests to pass;
* the protected paths are the test files and the CI configuration that exist in the
  repository (:func:`suggest_protected`), so that the model cannot make the tests pass by
  editing them;
* ``sandbox.mode`` is ``required`` when bubblewrap works on this machine, else ``auto``
  with the reason it does not (docs/sandbox.md); the ``--ci`` workflow installs bubblewrap
  on the runner and runs relay with ``--sandbox required`` whatever the file says.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from relay.globs import glob_match
from relay.testcmd import SKIPPED_FOLDERS, TestCommand

__all__ = [
    "CI_FILES",
    "TEST_PATTERNS",
    "InitFacts",
    "render_relay_yaml",
    "suggest_protected",
]

CiKind = Literal["github", "gitlab"]

CI_FILES: dict[str, tuple[str, str]] = {
    "github": ("github-workflow.yml", ".github/workflows/relay.yml"),
    "gitlab": ("gitlab-ci.yml", ".gitlab-ci.yml"),
}
"""``--ci`` kind → (the file of ``examples/ci/``, where it goes in the repository)."""

TEST_PATTERNS: tuple[str, ...] = (
    "tests",
    "test",
    "spec",
    "__tests__",
    "**/tests/**",
    "**/test_*.py",
    "**/*_test.py",
    "**/conftest.py",
    "pytest.ini",
    "**/*_test.go",
    "**/*.test.js",
    "**/*.test.ts",
    "**/*.test.jsx",
    "**/*.test.tsx",
    "**/*.spec.js",
    "**/*.spec.ts",
    "**/__tests__/**",
    "**/testdata/**",
)
"""Test files and folders, most general first: a plain name is the root's folder (or file)."""

CI_PATTERNS: tuple[str, ...] = (
    ".github/workflows",
    ".gitlab-ci.yml",
    ".circleci",
    ".travis.yml",
    "Jenkinsfile",
    "azure-pipelines.yml",
    ".buildkite",
)
"""CI configuration files and folders (plain paths from the root)."""


@dataclass(frozen=True)
class InitFacts:
    """What ``relay init`` found.

    Attributes:
        test_command: the discovered test command, or None.
        protected: the suggested ``tools.protected_paths`` entries.
        sandbox_works: whether bubblewrap ran a trial command on this machine.
        sandbox_problem: why it did not (bubblewrap's message), or None.
        ci: the ``--ci`` kind, or None.
    """

    test_command: TestCommand | None
    protected: tuple[str, ...]
    sandbox_works: bool
    sandbox_problem: str | None
    ci: CiKind | None = None


def suggest_protected(files: Iterable[str], ci: CiKind | None = None) -> list[str]:
    """The entries of ``tools.protected_paths`` suggested for a repository with ``files``
    (repo-relative POSIX paths): each pattern of :data:`TEST_PATTERNS` and
    :data:`CI_PATTERNS` that matches a file no earlier entry covers, in that order, plus the
    workflow ``--ci`` writes. Files in dependency, cache and build folders
    (:data:`relay.testcmd.SKIPPED_FOLDERS`) are left out. Glob semantics are
    :mod:`relay.globs`."""
    paths = sorted(p for p in set(files) if not SKIPPED_FOLDERS & set(p.split("/")[:-1]))
    chosen: list[str] = []
    for pattern in (*TEST_PATTERNS, *CI_PATTERNS):
        uncovered = [p for p in paths if not any(glob_match(p, e) for e in chosen)]
        if any(glob_match(p, pattern) for p in uncovered):
            chosen.append(pattern)
    if ci is not None:
        target = CI_FILES[ci][1]
        if not any(glob_match(target, e) for e in chosen):
            chosen.append(target)
    return chosen


def _yaml_text(value: str) -> str:
    """``value`` as a double-quoted YAML scalar (JSON escaping is valid YAML)."""
    import json

    return json.dumps(value, ensure_ascii=False)


def _deliverables(found: TestCommand | None) -> list[str]:
    if found is None:
        return [
            "# No test command was found (no pytest configuration or test files, package.json",
            "# test script, go.mod, Cargo.toml or Makefile test target). Name what must hold",
            "# before relay accepts `complete`, e.g.:",
            "#   - command: ./run-tests.sh",
            "#   - file: docs/feature.md",
            "deliverables: []",
        ]
    return [
        "# What the audit checks before it accepts `complete` (docs/audit.md): the project's",
        f"# test command, found because {found.reason}.",
        "deliverables:",
        f"  - command: {_yaml_text(found.command)}",
    ]


def _protected(protected: Sequence[str]) -> list[str]:
    head = [
        "  # Paths the model's file tools and commands may not change (.gitignore globs;",
        "  # relay.yaml and the progress file are always protected). Suggested: the tests and",
        "  # the CI configuration, so that the goal cannot be met by editing them. Remove an",
        "  # entry if the goal is to change it.",
    ]
    if not protected:
        return [*head, "  protected_paths: []"]
    return [*head, "  protected_paths:", *(f"    - {_yaml_text(p)}" for p in protected)]


def _sandbox(works: bool, problem: str | None, ci: CiKind | None) -> list[str]:
    if works:
        why = [
            "  # bubblewrap works on this machine: `required` refuses to start a run without",
            "  # it. Use `auto` where it may be missing (it then runs unconfined, loudly).",
        ]
        mode = "required"
    else:
        why = [
            f"  # bubblewrap does not work on this machine ({problem or 'not found'}):",
            "  # `auto` runs the model's commands unconfined, with a warning. Install it",
            "  # (sudo apt-get install bubblewrap) and set `required`.",
        ]
        mode = "auto"
    if ci is not None:
        why += [
            f"  # The CI workflow ({CI_FILES[ci][1]}) installs bubblewrap and runs relay",
            "  # with --sandbox required, whatever this file says.",
        ]
    return [
        "# Where the model's commands run (docs/sandbox.md).",
        "sandbox:",
        *why,
        f"  mode: {mode}",
        "  # deny: no network for the model's commands (only a private loopback).",
        "  network: deny",
    ]


def render_relay_yaml(facts: InitFacts) -> str:
    """The text of the ``relay.yaml`` that ``relay init`` writes for ``facts``: valid
    configuration (:func:`relay.config.load_config` reads it) with a comment on every key."""
    lines = [
        "# goal-relay configuration, written by `relay init` (review it, then commit it).",
        "# Every key is optional: a key left out keeps its default (the README's Configuration",
        "# section lists every key). It overrides your user file; --config, a goal file's",
        "# front matter, RELAY_* variables and command-line flags override this file",
        "# (`relay config show` shows where each setting comes from).",
        "",
        "# The model: anthropic:<model>, openai:<model> or scripted:<file.yaml>; none here",
        "# means the one of your user file (~/.config/relay/config.yaml) or RELAY_MODEL,",
        "# else `--model` on every run.",
        "# model: anthropic:claude-sonnet-4-6",
        "",
        *_deliverables(facts.test_command),
        "",
        "tools:",
        *_protected(facts.protected),
        "",
        *_sandbox(facts.sandbox_works, facts.sandbox_problem, facts.ci),
        "",
        "# Budgets for one goal (none by default), e.g.:",
        "# limits:",
        "#   max_rounds_total: 50",
        "#   time_budget: 2h",
        "#   cost_budget: 5.0",
        "",
    ]
    return "\n".join(lines)
