"""The completion audit (SPEC §9) against real files and real commands: deliverables are
checked by the orchestrator itself, commands are re-run, a pytest run without tests fails, and
every path the model's checklist names as evidence must exist."""

from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from relay.audit import (
    AuditResult,
    Check,
    CommandOutcome,
    CommandRunner,
    check_changed,
    check_checklist,
    evidence_paths,
    run_audit,
    run_check,
    shell_runner,
)
from relay.config import Deliverable
from relay.tools import ToolContext

# plugin autoload off: the venv's plugins would triple the start-up time
PYTEST = f"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {shlex.quote(sys.executable)} -m pytest -q -p no:cacheprovider"


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    root = (tmp_path / "repo").resolve()
    (root / "src").mkdir(parents=True)
    (root / "src" / "pool.py").write_text(
        '"""A pool."""\n\nPOOL_SIZE = 4\n\ndef acquire():\n    return 1\n', encoding="utf-8"
    )
    (root / "README.md").write_text("# Pool\n\nSet pool_size to tune it.\n", encoding="utf-8")
    return root


def loop_runner(root: Path, run_dir: Path, evidence_chars: int = 2000) -> CommandRunner:
    """The command runner the goal loop gives the audit (``relay.goal_tools.GoalTools.audit``):
    the ``shell`` tool in the repository root, output bounded by ``audit.evidence_chars``."""
    base = ToolContext(repo_root=root, state_dir=root / ".relay" / "state", run_dir=run_dir)
    return shell_runner(base, evidence_chars)


@pytest.fixture()
def runner(repo: Path, tmp_path: Path) -> CommandRunner:
    return loop_runner(repo, tmp_path / "run")


def no_changes() -> list[str]:
    return []


def audit(
    root: Path,
    deliverables: list[dict[str, Any]],
    run: CommandRunner | None = None,
    changed: Callable[[], list[str]] = no_changes,
    **kw: Any,
) -> AuditResult:
    def refuse(command: str, timeout_s: float) -> CommandOutcome:
        raise AssertionError(f"no command should run, got {command!r}")

    return run_audit(
        root,
        [Deliverable.model_validate(d) for d in deliverables],
        changed_paths=changed,
        run_command=run or refuse,
        **kw,
    )


def only(result: AuditResult) -> Check:
    assert len(result.checks) == 1, result.checks
    return result.checks[0]


# --- file deliverables --------------------------------------------------------------------


def test_file_exists_passes(repo: Path) -> None:
    result = audit(repo, [{"file": "src/pool.py"}])
    check = only(result)
    assert (check.kind, check.target, check.passed) == ("file", "src/pool.py", True)
    assert "src/pool.py" in check.evidence
    assert result.passed


def test_missing_file_fails(repo: Path) -> None:
    result = audit(repo, [{"file": "src/missing.py"}, {"file": "src/pool.py"}])
    assert [c.passed for c in result.checks] == [False, True]
    assert "src/missing.py does not exist" in result.checks[0].evidence
    assert not result.passed


def test_a_directory_is_not_a_file(repo: Path) -> None:
    assert not only(audit(repo, [{"file": "src"}])).passed


def test_path_outside_the_repository_fails_even_if_it_exists(repo: Path) -> None:
    (repo.parent / "x").write_text("outside\n", encoding="utf-8")
    check = only(audit(repo, [{"file": "../x"}]))
    assert not check.passed
    assert "outside the repository" in check.evidence


def test_symlink_leading_outside_the_repository_fails(repo: Path) -> None:
    (repo.parent / "secret.py").write_text("x = 1\n", encoding="utf-8")
    (repo / "src" / "link.py").symlink_to(repo.parent / "secret.py")
    check = only(audit(repo, [{"file": "src/link.py"}]))
    assert not check.passed
    assert "outside the repository" in check.evidence


def test_contains_passes_and_fails(repo: Path) -> None:
    ok = only(audit(repo, [{"file": "README.md", "contains": "pool_size"}]))
    assert ok.passed
    bad = only(audit(repo, [{"file": "README.md", "contains": "max_overflow"}]))
    assert not bad.passed
    assert "README.md" in bad.evidence and "max_overflow" in bad.evidence


def test_matches_passes_and_fails(repo: Path) -> None:
    # a multi-line file: ^ anchors at each line
    ok = only(audit(repo, [{"file": "src/pool.py", "matches": r"^def acquire\(\):"}]))
    assert ok.passed
    bad = only(audit(repo, [{"file": "src/pool.py", "matches": r"^def release\("}]))
    assert not bad.passed
    assert "src/pool.py" in bad.evidence and "release" in bad.evidence


# --- command deliverables (real processes) ----------------------------------------------


def test_command_exit_zero_passes(repo: Path, runner: CommandRunner) -> None:
    check = only(audit(repo, [{"command": "test -f src/pool.py && echo found-it"}], runner))
    assert (check.kind, check.passed) == ("command", True)
    assert "exit code 0" in check.evidence
    assert "found-it" in check.evidence


def test_command_exit_one_fails_with_code_and_output_tail(
    repo: Path, runner: CommandRunner
) -> None:
    command = "echo 'AssertionError: pool is empty' >&2; exit 1"
    result = audit(repo, [{"command": command}], runner)
    check = only(result)
    assert check.target == command
    assert not check.passed
    assert "exit code 1" in check.evidence
    assert "AssertionError: pool is empty" in check.evidence
    assert not result.passed


def test_long_output_keeps_the_tail_within_evidence_chars(repo: Path, tmp_path: Path) -> None:
    run = loop_runner(repo, tmp_path / "run", evidence_chars=600)
    command = "for i in $(seq 1 3000); do echo noise line $i; done; echo FINAL-ERROR; exit 3"
    check = only(audit(repo, [{"command": command}], run, evidence_chars=600))
    assert not check.passed
    assert "exit code 3" in check.evidence
    assert "FINAL-ERROR" in check.evidence
    assert "noise line 1500\n" not in check.evidence
    assert len(check.evidence) <= 600 + 40


def test_pytest_that_collected_no_test_fails(repo: Path, runner: CommandRunner) -> None:
    (repo / "setup.cfg").write_text("[tool:pytest]\n", encoding="utf-8")  # no tests anywhere
    check = only(audit(repo, [{"command": PYTEST}], runner))
    assert not check.passed
    assert "no test" in check.evidence


def test_pytest_that_collected_no_test_fails_even_with_exit_zero(repo: Path) -> None:
    def fake(command: str, timeout_s: float) -> CommandOutcome:
        return CommandOutcome(0, "\nno tests ran in 0.01s\n")

    assert not only(audit(repo, [{"command": "pytest -q || true"}], fake)).passed


def test_pytest_with_every_test_skipped_fails(repo: Path, runner: CommandRunner) -> None:
    (repo / "test_skip.py").write_text(
        "import pytest\n\n@pytest.mark.skip\ndef test_a():\n    assert 0\n", encoding="utf-8"
    )
    check = only(audit(repo, [{"command": PYTEST}], runner))
    assert not check.passed
    assert "no test passed" in check.evidence and "1 skipped" in check.evidence


@pytest.mark.parametrize(
    ("command", "output", "code"),
    [
        ("go test ./...", "?   \texample.com/m\t[no test files]\n", 0),
        ("npm test --silent", "No tests found, exiting with code 1\n", 1),
        ("npx vitest run", "No test files found, exiting with code 1\n", 1),
        ("cargo test", "running 0 tests\n\ntest result: ok. 0 passed\nrunning 0 tests\n", 0),
        ("node --test", "# tests 0\n# pass 0\n", 0),
    ],
)
def test_other_runners_without_tests_fail(command: str, output: str, code: int) -> None:
    def fake(cmd: str, timeout_s: float) -> CommandOutcome:
        return CommandOutcome(code, output)

    check = run_check(command, 10, fake, 2000)[0]
    assert not check.passed
    assert "no test" in check.evidence or "0 tests" in check.evidence


@pytest.mark.parametrize(
    ("command", "output"),
    [
        ("go test ./...", "ok  \texample.com/m\t0.01s\n?   \texample.com/m/x\t[no test files]\n"),
        ("cargo test", "running 2 tests\ntest a ... ok\nrunning 0 tests\n"),
        ("./check.sh", "No tests found\n"),  # not a test run
    ],
)
def test_runs_with_tests_pass(command: str, output: str) -> None:
    def fake(cmd: str, timeout_s: float) -> CommandOutcome:
        return CommandOutcome(0, output)

    assert run_check(command, 10, fake, 2000)[0].passed


def test_pytest_with_a_passing_test_passes(repo: Path, runner: CommandRunner) -> None:
    (repo / "tests").mkdir()
    (repo / "tests" / "test_pool.py").write_text(
        "import sys\nsys.path.insert(0, 'src')\nfrom pool import acquire\n\n"
        "def test_acquire():\n    assert acquire() == 1\n",
        encoding="utf-8",
    )
    check = only(audit(repo, [{"command": PYTEST}], runner))
    assert check.passed, check.evidence
    assert "1 passed" in check.evidence


def test_pytest_with_a_failing_test_fails(repo: Path, runner: CommandRunner) -> None:
    (repo / "test_bad.py").write_text("def test_bad():\n    assert 1 == 2\n", encoding="utf-8")
    check = only(audit(repo, [{"command": PYTEST}], runner))
    assert not check.passed
    assert "exit code 1" in check.evidence
    assert "1 failed" in check.evidence


def test_timed_out_command_fails(repo: Path, runner: CommandRunner) -> None:
    started = time.monotonic()
    check = only(audit(repo, [{"command": "echo started; sleep 30", "timeout_s": 1}], runner))
    assert time.monotonic() - started < 10
    assert not check.passed
    assert "timed out after 1 s" in check.evidence


def test_command_without_timeout_uses_the_default(repo: Path, runner: CommandRunner) -> None:
    check = only(audit(repo, [{"command": "sleep 30"}], runner, default_timeout_s=1))
    assert not check.passed
    assert "timed out after 1 s" in check.evidence


def test_run_check_uses_the_runner_outcome() -> None:
    seen: list[tuple[str, float]] = []

    def fake(command: str, timeout_s: float) -> CommandOutcome:
        seen.append((command, timeout_s))
        return CommandOutcome(2, "x" * 5000 + "END")

    check = run_check("make test", 42.0, fake, 100)[0]
    assert seen == [("make test", 42.0)]
    assert not check.passed
    assert check.evidence.startswith("exit code 2")
    assert check.evidence.endswith("END")
    assert len(check.evidence) <= 100 + len("exit code 2\n")


# --- changed deliverables and "no deliverables" ----------------------------------------


@pytest.mark.parametrize(
    ("pattern", "paths", "passed"),
    [
        ("src/**", ["src/pool.py"], True),
        ("src/**", ["README.md", "src/sub/deep/x.py"], True),
        ("src/**", ["README.md", "tests/test_pool.py"], False),
        ("src/**", ["srcfoo/x.py", "other/src/x.py"], False),
        ("src/**", [], False),
        ("*.py", ["setup.py"], True),
        ("*.py", ["README.md", "docs/guide.rst"], False),
        ("src/**/test_*.py", ["src/test_a.py"], True),
        ("src/**/test_*.py", ["src/a/b/test_c.py"], True),
        ("src/**/test_*.py", ["src/a/b/c.py"], False),
        ("README.md", ["README.md"], True),
    ],
)
def test_changed_glob(pattern: str, paths: list[str], passed: bool) -> None:
    check = check_changed(pattern, paths)
    assert (check.kind, check.target, check.passed) == ("changed", pattern, passed)
    if passed:
        assert any(p in check.evidence for p in paths)
    else:
        assert pattern in check.evidence


def test_changed_deliverable_in_an_audit(repo: Path) -> None:
    calls = []

    def changed() -> list[str]:
        calls.append(1)
        return ["src/pool.py", "README.md"]

    result = audit(repo, [{"changed": "src/**"}, {"changed": "docs/**"}], changed=changed)
    assert [c.passed for c in result.checks] == [True, False]
    assert "src/pool.py" in result.checks[0].evidence
    assert len(calls) == 1  # one git query per audit


def test_no_deliverables_requires_a_change(repo: Path) -> None:
    unchanged = audit(repo, [])
    check, tests = unchanged.checks
    assert check.kind == "changed"
    assert not check.passed
    assert not unchanged.passed
    assert (tests.kind, tests.target, tests.passed) == ("tests", "none detected", True)
    assert "no test command detected" in tests.evidence
    changed = audit(repo, [], changed=lambda: ["src/pool.py"])
    assert changed.passed
    assert "src/pool.py" in changed.checks[0].evidence


def test_generated_files_are_no_change(repo: Path) -> None:
    # running the tests leaves byte code and caches behind: that is not the goal's work
    junk = ["__pycache__/x.cpython-311.pyc", "tests/__pycache__/t.pyc", ".pytest_cache/v/x"]
    result = audit(repo, [], changed=lambda: [*junk, "node_modules/a/index.js", ".coverage"])
    assert not result.checks[0].passed
    assert audit(repo, [], changed=lambda: [*junk, "src/pool.py"]).passed


def test_no_deliverables_runs_the_discovered_test_command(
    repo: Path, runner: CommandRunner
) -> None:
    (repo / "tests").mkdir()
    (repo / "tests" / "test_pool.py").write_text(
        "def test_fails():\n    assert 1 == 2\n", encoding="utf-8"
    )
    files = lambda: ["README.md", "src/pool.py", "tests/test_pool.py"]  # noqa: E731
    result = audit(repo, [], runner, changed=lambda: ["src/pool.py"], repo_files=files)
    change, tests = result.checks
    assert change.passed
    assert (tests.kind, tests.target) == ("tests", "python -m pytest -q")
    assert tests.evidence.startswith("discovered: Python test files: tests/test_pool.py")
    assert "1 failed" in tests.evidence and not tests.passed
    assert not result.passed
    (repo / "tests" / "test_pool.py").write_text(
        "def test_passes():\n    assert 1 == 1\n", encoding="utf-8"
    )
    result = audit(repo, [], runner, changed=lambda: ["src/pool.py"], repo_files=files)
    assert result.passed, result.failures_text()
    assert "1 passed" in result.checks[1].evidence


def test_discovered_command_is_not_run_without_a_change(repo: Path) -> None:
    (repo / "test_x.py").write_text("def test_x():\n    pass\n", encoding="utf-8")
    result = audit(repo, [], repo_files=lambda: ["test_x.py"])  # the refusing runner
    change, tests = result.checks
    assert not change.passed and not tests.passed
    assert "not run: nothing changed" in tests.evidence


def test_discovered_command_runs_with_ci_set_and_times_out(
    repo: Path, runner: CommandRunner
) -> None:
    # a watch-mode runner never exits: CI=1 is set for it, and the timeout stops it anyway
    from relay.testcmd import TestCommand

    command = TestCommand('test "$CI" = 1 && echo ci-is-set && sleep 30', "a fake watch mode")
    started = time.monotonic()
    result = audit(
        repo,
        [],
        runner,
        changed=lambda: ["src/pool.py"],
        test_command=lambda: command,
        default_timeout_s=1,
    )
    assert time.monotonic() - started < 10
    tests = result.checks[1]
    assert not tests.passed
    assert "timed out after 1 s" in tests.evidence
    assert "ci-is-set" in tests.evidence
    assert "discovered: a fake watch mode" in tests.evidence


def test_file_deliverables_do_not_ask_git(repo: Path) -> None:
    def boom() -> list[str]:
        raise AssertionError("changed_paths called without a changed deliverable")

    assert audit(repo, [{"file": "README.md"}], changed=boom).passed


# --- the model's checklist ----------------------------------------------------------------


def checklist_audit(repo: Path, evidence: str) -> AuditResult:
    items = [{"requirement": "pool implemented", "evidence": evidence}]
    return audit(repo, [{"file": "src/pool.py"}], checklist=items)


def test_checklist_naming_a_missing_path_fails(repo: Path) -> None:
    result = checklist_audit(repo, "see src/pool.py and tests/test_pool.py")
    evidence = [c for c in result.checks if c.kind == "evidence"]
    assert [(c.target, c.passed) for c in evidence] == [
        ("src/pool.py", True),
        ("tests/test_pool.py", False),
    ]
    assert "tests/test_pool.py" in evidence[1].evidence
    assert "pool implemented" in evidence[1].evidence
    assert not result.passed
    assert "tests/test_pool.py" in result.failures_text()


def test_checklist_naming_existing_paths_passes(repo: Path) -> None:
    result = checklist_audit(repo, "`src/pool.py:5` defines acquire(); documented in README.md")
    targets = [(c.target, c.passed) for c in result.checks if c.kind == "evidence"]
    assert targets == [("src/pool.py", True), ("README.md", True)]
    assert result.passed


def test_checklist_path_outside_the_repository_fails(repo: Path) -> None:
    (repo.parent / "notes.md").write_text("x\n", encoding="utf-8")
    result = checklist_audit(repo, "written to ../notes.md")
    (check,) = [c for c in result.checks if c.kind == "evidence"]
    assert (check.target, check.passed) == ("../notes.md", False)


@pytest.mark.parametrize(
    "evidence",
    [
        "I ran them",
        "e.g. the tests",
        "version 3.11",
        "all green, i.e. done",
        "works with python3.11 etc.",
        "https://docs.python.org/3/library/asyncio.html",
        "",
    ],
)
def test_checklist_prose_without_paths_creates_no_check(repo: Path, evidence: str) -> None:
    assert check_checklist(repo, [{"requirement": "tests", "evidence": evidence}]) == []
    result = checklist_audit(repo, evidence)
    assert [c.kind for c in result.checks] == ["file"]
    assert result.passed


@pytest.mark.parametrize(
    "evidence",
    ["pytest: 12/12 passed", "read/write access is covered", "docs: N/A", "sync and/or async"],
)
def test_checklist_prose_with_slashes_is_not_a_path(repo: Path, evidence: str) -> None:
    # Counts and words joined by "/" are not paths: they must not fail a real completion.
    assert check_checklist(repo, [{"requirement": "tests", "evidence": evidence}]) == []


def test_checklist_evidence_says_whether_the_path_changed(repo: Path) -> None:
    items = [
        {"requirement": "pool", "evidence": "src/pool.py"},
        {"requirement": "docs", "evidence": "see README.md and src/"},
    ]
    checks = check_checklist(repo, items, list, lambda: ["src/pool.py"])
    assert [(c.target, c.passed) for c in checks] == [
        ("src/pool.py", True),
        ("README.md", True),
        ("src/", True),
    ]
    assert checks[0].evidence.endswith("changed since the goal started")
    assert checks[1].evidence.endswith("unchanged since the goal started")
    assert checks[2].evidence.endswith("; changed since the goal started")
    # without a base commit nothing is said about changes
    assert check_checklist(repo, items[:1])[0].evidence == "src/pool.py exists"


def test_checklist_tolerates_missing_fields(repo: Path) -> None:
    assert check_checklist(repo, [{}, {"requirement": "x"}, {"evidence": None}]) == []
    checks = check_checklist(repo, [{"evidence": "src/pool.py"}])
    assert [(c.target, c.passed) for c in checks] == [("src/pool.py", True)]


@pytest.mark.parametrize(
    ("evidence", "paths"),
    [
        ("src/pool.py:12", ["src/pool.py"]),
        ("src/pool.py:12:5", ["src/pool.py"]),
        ("`src/pool.py`", ["src/pool.py"]),
        ("'src/a.py' and \"src/b.py\"", ["src/a.py", "src/b.py"]),
        (
            "docs/guide.md, src/x.py; pyproject.toml",
            ["docs/guide.md", "src/x.py", "pyproject.toml"],
        ),
        ("see README.md", ["README.md"]),
        ("https://example.com/docs/x.md", []),
        ("http://localhost:8000/src/app.py and src/app.py", ["src/app.py"]),
        ("pytest -q: 5 passed", []),
        ("I ran them", []),
        ("e.g. the tests", []),
        ("version 3.11", []),
        ("-q --maxfail=1", []),
    ],
)
def test_evidence_paths(evidence: str, paths: list[str]) -> None:
    assert evidence_paths(evidence) == paths


@pytest.mark.parametrize(
    ("evidence", "paths"),
    [
        # a path at the end of a sentence, with or without a line number
        ("implemented in src/pool.py:12.", ["src/pool.py"]),
        ("documented (see README.md).", ["README.md"]),
        # a pytest node id names its file
        ("tests/test_pool.py::test_acquire passed", ["tests/test_pool.py"]),
    ],
)
def test_evidence_paths_in_sentences_and_node_ids(evidence: str, paths: list[str]) -> None:
    # Otherwise a checklist citing a file that does not exist slips through the audit.
    assert evidence_paths(evidence) == paths


# --- the result -------------------------------------------------------------------------


def test_zero_checks_is_not_a_pass() -> None:
    empty = AuditResult(())
    assert empty.passed is False
    assert empty.to_dict() == {"passed": False, "checks": []}


def test_failures_text_lists_each_failing_check_with_evidence(repo: Path) -> None:
    result = AuditResult(
        (
            Check("file", "src/pool.py", True, "src/pool.py exists"),
            Check("command", "pytest -q", False, "exit code 1\nFAILED test_size\n1 failed"),
            Check("file", "docs/pool.md", False, "docs/pool.md does not exist"),
        )
    )
    text = result.failures_text()
    assert "src/pool.py" not in text
    assert "command pytest -q" in text and "FAILED test_size" in text and "1 failed" in text
    assert "file docs/pool.md" in text and "docs/pool.md does not exist" in text
    assert text.index("pytest -q") < text.index("docs/pool.md")
    assert text.count("FAILED") >= 2
    assert result.to_dict()["checks"][1] == {
        "kind": "command",
        "target": "pytest -q",
        "passed": False,
        "evidence": "exit code 1\nFAILED test_size\n1 failed",
    }
    assert AuditResult((Check("file", "a", True, "ok"),)).failures_text() == ""


def test_a_whole_audit_mixes_every_kind(repo: Path, runner: CommandRunner) -> None:
    result = audit(
        repo,
        [
            {"file": "src/pool.py", "contains": "POOL_SIZE"},
            {"command": "grep -q acquire src/pool.py"},
            {"changed": "src/**"},
        ],
        runner,
        changed=lambda: ["src/pool.py"],
        checklist=[{"requirement": "docs", "evidence": "README.md updated"}],
    )
    assert [(c.kind, c.passed) for c in result.checks] == [
        ("file", True),
        ("command", True),
        ("changed", True),
        ("evidence", True),
    ]
    assert result.passed
    assert result.failures_text() == ""
