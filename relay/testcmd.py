"""Test-command discovery for the audit's no-deliverables fallback (SPEC §9 step 5).

When a goal declares no deliverables, the audit still refuses to take ``complete`` on the
model's word: it looks for the project's own test command and runs it. Discovery reads files
only (nothing is executed) and picks **one** command, in this order of preference:

1. an explicit pytest configuration: ``pytest.ini``, ``pyproject.toml`` with
   ``[tool.pytest.ini_options]``, ``setup.cfg`` with ``[tool:pytest]``, ``tox.ini`` with
   ``[pytest]`` → ``python -m pytest -q``;
2. ``package.json`` with a ``scripts.test`` that is not npm's placeholder
   (``echo "Error: no test specified" && exit 1``) → ``npm test --silent``;
3. ``go.mod`` → ``go test ./...``;
4. ``Cargo.toml`` → ``cargo test``;
5. Python test files pytest collects without configuration: a ``test_*.py`` or
   ``*_test.py`` file anywhere → ``python -m pytest -q``;
6. a Makefile (``Makefile``, ``makefile``, ``GNUmakefile``) with a ``test:`` target →
   ``make test``;
7. other ``.py`` files under a ``tests/`` or ``test/`` folder → ``python -m pytest -q``;
8. ``tox.ini`` → ``tox``; ``noxfile.py`` → ``nox``.

Explicit configuration of one runner wins over declared project scripts, which win over bare
conventions. Python test files beat a Makefile's ``test:`` target (in a Python project it
mostly wraps pytest, and the audit reads a pytest run per test, a ``make test`` only by its
exit code), unless pytest would not collect them (a C project's ``tests/gen_data.py``). tox
and nox come last because they build environments (slow, and often offline impossible) around
a test run that rules 5 and 7 already find. Folders of dependencies, caches and virtual
environments (``node_modules``, ``.venv``, ``__pycache__`` …) are never looked into.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = [
    "PYTEST_COMMAND",
    "Reader",
    "TestCommand",
    "discover_test_command",
    "is_pytest_command",
    "no_tests_reason",
]

PYTEST_COMMAND = "python -m pytest -q"
"""The command run for Python projects (``python`` is the first one on ``PATH``)."""

Reader = Callable[[str], str | None]
"""Returns the text of a repo-relative POSIX path, or None when there is no such file."""

SKIPPED_FOLDERS = frozenset(
    {
        "node_modules",
        ".venv",
        "venv",
        "env",
        ".env",
        "__pycache__",
        ".tox",
        ".nox",
        ".git",
        ".relay",
        "site-packages",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        "target",
        "dist",
        "build",
        "vendor",
    }
)
"""Folders whose files never make a project "have tests" (dependencies, caches, builds)."""

_NPM_PLACEHOLDER = re.compile(r"no test specified", re.IGNORECASE)
_MAKE_TEST = re.compile(r"^test\s*:(?!=)", re.MULTILINE)
_SECTION = {
    "pyproject.toml": "[tool.pytest.ini_options]",
    "setup.cfg": "[tool:pytest]",
    "tox.ini": "[pytest]",
}


@dataclass(frozen=True)
class TestCommand:
    """A discovered test command: the shell ``command`` and the ``reason`` it was chosen
    (``"pyproject.toml has [tool.pytest.ini_options]"``)."""

    __test__ = False  # not a pytest test class

    command: str
    reason: str


def _python_test_file(path: str) -> str | None:
    """``"named"`` for a file pytest collects by default (``test_*.py``, ``*_test.py``),
    ``"other"`` for another ``.py`` file under a ``tests/`` or ``test/`` folder, else None."""
    parts = path.split("/")
    if any(p in SKIPPED_FOLDERS for p in parts[:-1]) or not path.endswith(".py"):
        return None
    name = parts[-1]
    if name.startswith("test_") or name.endswith("_test.py"):
        return "named"
    if any(p in ("tests", "test") for p in parts[:-1]) and name != "__init__.py":
        return "other"
    return None


def _python_tests(files: list[str], kind: str) -> TestCommand | None:
    """pytest for the Python test files of ``kind`` (:func:`_python_test_file`), if any."""
    tests = sorted(p for p in files if _python_test_file(p) == kind)
    if not tests:
        return None
    more = f" and {len(tests) - 1} more" if len(tests) > 1 else ""
    what = "Python test files" if kind == "named" else "Python files under a tests/ folder"
    return TestCommand(PYTEST_COMMAND, f"{what}: {tests[0]}{more}")


def discover_test_command(read: Reader, files: Iterable[str]) -> TestCommand | None:
    """The project's test command, by the order of preference of this module's docstring.

    Args:
        read: reads a repo-relative file (e.g. ``GitRepo.file_at(base, path)`` for the base
            commit, or the working tree).
        files: every repo-relative POSIX file path of the same state of the repository.

    Returns:
        The command and why it was chosen, or None when the repository has no detectable
        test command.
    """
    all_files = list(files)
    present = set(all_files)

    def text(path: str) -> str | None:
        return read(path) if path in present else None

    if "pytest.ini" in present:
        return TestCommand(PYTEST_COMMAND, "pytest.ini exists")
    for name, section in _SECTION.items():
        content = text(name)
        if content is not None and any(ln.strip() == section for ln in content.splitlines()):
            return TestCommand(PYTEST_COMMAND, f"{name} has {section}")
    package = text("package.json")
    if package is not None:
        try:
            scripts = json.loads(package).get("scripts") or {}
        except (ValueError, AttributeError, RecursionError):
            scripts = {}
        script = scripts.get("test") if isinstance(scripts, dict) else None
        if isinstance(script, str) and script.strip() and not _NPM_PLACEHOLDER.search(script):
            return TestCommand("npm test --silent", f"package.json has scripts.test ({script!r})")
    if "go.mod" in present:
        return TestCommand("go test ./...", "go.mod exists")
    if "Cargo.toml" in present:
        return TestCommand("cargo test", "Cargo.toml exists")
    found = _python_tests(all_files, "named")
    if found is not None:
        return found
    for name in ("GNUmakefile", "makefile", "Makefile"):
        content = text(name)
        if content is not None and _MAKE_TEST.search(content):
            return TestCommand("make test", f"{name} has a test: target")
    found = _python_tests(all_files, "other")
    if found is not None:
        return found
    if "tox.ini" in present:
        return TestCommand("tox", "tox.ini exists")
    if "noxfile.py" in present:
        return TestCommand("nox", "noxfile.py exists")
    return None


_TEST_RUN = re.compile(
    r"\b(pytest|py\.test|unittest|test|tests|jest|vitest|mocha|tox|nox)\b", re.IGNORECASE
)
_PYTEST_NONE = re.compile(r"\bno tests ran\b|\bcollected 0 items\b", re.IGNORECASE)
_PYTEST_SUMMARY = re.compile(
    r"^[=\s]*((?:\d+ \w+(?:, )?)+) in [\d.]+s\b.*$", re.MULTILINE | re.IGNORECASE
)
_NODE_NONE = re.compile(
    r"No tests found|No test files found|Error: No test files? found|^# tests 0\b|"
    r"\b0 passing\b",
    re.IGNORECASE | re.MULTILINE,
)
_GO_NONE = re.compile(r"\[no test files\]|matched no packages|no packages to test", re.I)
_GO_RAN = re.compile(r"^(ok|FAIL|---|PASS)\b", re.MULTILINE)
_CARGO_RUNNING = re.compile(r"^running (\d+) tests?$", re.MULTILINE)


_WORDS = re.compile(r"[\s;&|()<>`'\"]+")
_PYTEST_PROGRAMS = frozenset({"pytest", "py.test", "pytest-3", "-mpytest", "pytest.main"})


def is_pytest_command(command: str) -> bool:
    """Whether ``command`` is a pytest run for the audit: one of its words (split at blanks,
    quotes and shell operators) is ``pytest``, ``py.test`` or ``pytest-3``, also as the last
    part of a path (``.venv/bin/pytest``), or ``-mpytest``; ``pytest.main(`` counts too
    (``python -c "import pytest; pytest.main()"``). ``python -m pytest -q``, ``cd sub &&
    pytest`` and ``PYTHONPATH=src py.test`` are; a path that merely contains the word
    (``/tmp/pytest-of-root/x``) is not. relay then loads its own pytest plugin into every
    session the command starts and decides from its report (:mod:`relay.pytest_report`),
    never from the printed output."""
    for word in _WORDS.split(command):
        last = word.rsplit("/", 1)[-1]
        if last in _PYTEST_PROGRAMS or last.startswith("pytest.main"):
            return True
    return False


def no_tests_reason(command: str, output: str, exit_code: int | None) -> str | None:
    """Why a test run proved nothing, or None (SPEC §9 step 2: "a pytest run that collected
    no test fails").

    Recognised, for commands that look like a test run (they name pytest, unittest, test,
    jest, vitest, mocha, tox or nox):

    * pytest: exit code 5, ``collected 0 items``, ``no tests ran``, or a final summary with
      no passed test (everything skipped, deselected or xfailed);
    * npm/node runners: ``No tests found``, ``No test files found``, ``# tests 0``,
      ``0 passing``;
    * ``go test``: ``[no test files]`` or no package matched, with no ``ok``/``FAIL`` line;
    * ``cargo test``: every ``running N tests`` line says 0.

    Args:
        command: the shell command that ran.
        output: its output (the tail is enough: the summaries are at the end).
        exit_code: its exit code (None when it timed out).
    """
    if not _TEST_RUN.search(command):
        return None
    if is_pytest_command(command):
        if exit_code == 5 or _PYTEST_NONE.search(output):
            return "pytest collected no test"
        summaries = _PYTEST_SUMMARY.findall(output)
        if summaries and exit_code == 0:
            counts = dict(
                (kind.rstrip("s") if kind != "passed" else kind, int(n))
                for n, kind in re.findall(r"(\d+) (\w+)", summaries[-1])
            )
            if not counts.get("passed") and (
                counts.get("skipped") or counts.get("deselected") or counts.get("xfailed")
            ):
                return f"no test passed ({summaries[-1].strip()}): every test was skipped"
        return None
    if _NODE_NONE.search(output):
        return "the test runner found no test"
    go = re.search(r"\bgo\s+test\b", command)
    if go and _GO_NONE.search(output) and not _GO_RAN.search(output):
        return "go test found no test files"
    if re.search(r"\bcargo\s+test\b", command):
        counts = [int(n) for n in _CARGO_RUNNING.findall(output)]
        if counts and not any(counts) and exit_code == 0:
            return "cargo test ran 0 tests"
    return None
