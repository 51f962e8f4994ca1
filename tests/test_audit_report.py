"""relay's own pytest report (SPEC §9 step 2, §14): a pytest command is judged from the report
of relay's plugin, never from what the command printed. Real pytest runs through the audit's
runner; the decisions on report data are tested on the data."""

from __future__ import annotations

import ast
import json
import shlex
import sys
from pathlib import Path

import pytest
from conftest import audit_shell, write_files

from relay.audit_commands import AuditShell, CommandOutcome, judge_command, run_check
from relay.pytest_report import (
    NO_REPORT,
    PLUGIN_DIR,
    PLUGIN_FILE,
    PytestReport,
    SessionReport,
    TestRun,
    counted_outcome,
    load_report,
    pytest_command,
    pytest_environment,
    report_problems,
)

PYTEST = f"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {shlex.quote(sys.executable)} -m pytest -q -p no:cacheprovider"

CALC_TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    root = (tmp_path / "repo").resolve()
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n", encoding="utf-8")
    (root / "tests" / "test_calc.py").write_text(CALC_TEST, encoding="utf-8")
    return root


@pytest.fixture()
def shell(repo: Path, tmp_path: Path) -> AuditShell:
    return audit_shell(repo, tmp_path)


# --- real pytest runs -----------------------------------------------------------------------


def test_a_passing_run_shows_the_counts_of_relays_report(repo: Path, shell: AuditShell) -> None:
    write_files(repo, {"calc.py": "def add(a, b):\n    return a + b\n"})
    write_files(
        repo,
        {"tests/test_skip.py": "import pytest\n\n\n@pytest.mark.skip\ndef test_s():\n    pass\n"},
    )
    check = run_check(PYTEST, 60, shell, 2000)[0]
    assert check.passed, check.evidence
    assert "1 passed, 1 skipped (relay's report)" in check.evidence
    # the report folder is a new one under the run folder, outside the working tree
    assert list((shell.ctx.run_dir / "audit").iterdir())
    assert not (repo / ".relay").exists()


def test_a_conftest_that_rewrites_failures_is_seen_through(repo: Path, shell: AuditShell) -> None:
    write_files(
        repo,
        {
            "conftest.py": "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True, trylast=True)\n"
            "def pytest_runtest_makereport(item, call):\n    outcome = yield\n"
            "    outcome.get_result().outcome = 'passed'\n"
        },
    )
    outcome = shell(PYTEST, 60)
    assert outcome.exit_code == 0 and "1 passed" in outcome.output  # what pytest printed
    check = judge_command(PYTEST, outcome, 2000)
    assert not check.passed
    assert (
        "1 test failed or errored (relay's report): tests/test_calc.py::test_add" in check.evidence
    )
    assert "reported as passed (pytest's own report: failed)" in check.evidence


def test_a_report_replaced_by_a_plain_implementation_is_seen_through(
    repo: Path, shell: AuditShell
) -> None:
    write_files(
        repo,
        {
            "conftest.py": "import pytest\nfrom _pytest.reports import TestReport\n\n\n"
            "@pytest.hookimpl(tryfirst=True)\ndef pytest_runtest_makereport(item, call):\n"
            "    return TestReport(item.nodeid, item.location, {}, 'passed', None, call.when)\n"
        },
    )
    check = run_check(PYTEST, 60, shell, 2000)[0]
    assert not check.passed
    assert "tests/test_calc.py::test_add" in check.evidence


def test_a_package_shadowing_pytest_leaves_no_report(repo: Path, shell: AuditShell) -> None:
    write_files(
        repo, {"pytest/__init__.py": "", "pytest/__main__.py": "print('5 passed in 0.01s')\n"}
    )
    check = run_check("python -m pytest -q", 60, shell, 2000)[0]
    assert not check.passed
    assert NO_REPORT in check.evidence


def test_a_process_that_exits_early_is_caught(repo: Path, shell: AuditShell) -> None:
    write_files(
        repo, {"tests/test_calc.py": "import os\nprint('3 passed')\nos._exit(0)\n" + CALC_TEST}
    )
    outcome = shell(PYTEST, 60)
    assert outcome.exit_code == 0
    check = judge_command(PYTEST, outcome, 2000)
    assert not check.passed
    assert "a pytest session ended before it finished" in check.evidence


def test_collect_only_runs_no_test(repo: Path, shell: AuditShell) -> None:
    write_files(repo, {"pytest.ini": "[pytest]\naddopts = --co\n"})
    check = run_check(PYTEST, 60, shell, 2000)[0]
    assert not check.passed
    assert "pytest only collected the tests" in check.evidence


def test_the_plugin_cannot_be_disabled_from_the_configuration(
    repo: Path, shell: AuditShell
) -> None:
    write_files(repo, {"pytest.ini": "[pytest]\naddopts = -p no:relay_audit_pytest\n"})
    check = run_check(PYTEST, 60, shell, 2000)[0]
    assert "1 failed (relay's report)" in check.evidence and not check.passed


def test_nested_pytest_sessions_do_not_count(repo: Path, shell: AuditShell) -> None:
    write_files(
        repo,
        {
            "calc.py": "def add(a, b):\n    return a + b\n",
            "tests/test_nested.py": "import subprocess, sys\n\n\ndef test_nested(tmp_path):\n"
            "    (tmp_path / 'test_x.py').write_text('def test_x():\\n    assert 0\\n')\n"
            "    done = subprocess.run([sys.executable, '-m', 'pytest', '-q', "
            "'-p', 'no:cacheprovider', str(tmp_path)])\n"
            "    assert done.returncode == 1\n",
        },
    )
    outcome = shell(PYTEST, 60)
    # the plugin took relay's variables out of the environment: a nested session never loads it
    assert outcome.pytest is not None and outcome.pytest.nested == 0
    check = judge_command(PYTEST, outcome, 2000)
    assert check.passed, check.evidence
    assert "2 passed (relay's report)" in check.evidence


def test_a_command_that_sets_pythonpath_keeps_the_plugin(repo: Path, shell: AuditShell) -> None:
    write_files(repo, {"calc.py": "def add(a, b):\n    return a + b\n"})
    check = run_check(f"PYTHONPATH=. PYTEST_ADDOPTS=-q {PYTEST}", 60, shell, 2000)[0]
    assert check.passed, check.evidence
    assert "1 passed (relay's report)" in check.evidence


def test_a_fake_runner_without_relays_report_fails() -> None:
    def fake(command: str, timeout_s: float) -> CommandOutcome:
        return CommandOutcome(0, "3 passed in 0.01s\n")

    check = run_check("pytest -q", 10, fake, 2000)[0]
    assert not check.passed and NO_REPORT in check.evidence


def test_the_plugin_imports_only_the_standard_library_and_pytest() -> None:
    tree = ast.parse(PLUGIN_FILE.read_text(encoding="utf-8"))
    names = {
        a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    names |= {
        n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
    }
    assert names <= set(sys.stdlib_module_names) | {"pytest"}
    assert [p.name for p in PLUGIN_DIR.iterdir() if p.suffix == ".py"] == [PLUGIN_FILE.name]


# --- the environment and the command ------------------------------------------------------


def test_the_environment_adds_relays_plugin_and_keeps_the_users(tmp_path: Path) -> None:
    channel = {"RELAY_AUDIT_CHANNEL": "7"}
    env = pytest_environment(channel, environ={"PYTEST_ADDOPTS": "-x", "PYTHONPATH": "/a"})
    assert env["PYTEST_ADDOPTS"] == "-x -p relay_audit_pytest"
    assert env["PYTHONPATH"].split(":") == [str(PLUGIN_DIR), "/a"]
    assert env["RELAY_AUDIT_CHANNEL"] == "7"
    assert pytest_environment(channel, collect_only=True, environ={})["PYTEST_ADDOPTS"] == (
        "-p relay_audit_pytest --co"
    )


def test_assignments_in_the_command_keep_relays_entries() -> None:
    assert pytest_command("PYTHONPATH=src pytest") == f"PYTHONPATH={PLUGIN_DIR}:src pytest"
    assert pytest_command("cd a && PYTEST_ADDOPTS='-x' pytest", collect_only=True) == (
        "cd a && PYTEST_ADDOPTS=-p\\ relay_audit_pytest\\ --co\\ '-x' pytest"
    )
    assert pytest_command("python -m pytest -q") == "python -m pytest -q"


# --- counting outcomes ----------------------------------------------------------------------


def phases(**calls: dict[str, object]) -> dict[str, dict[str, object]]:
    ok = {"raw": "passed", "exc": None, "final": "passed", "wasxfail": False}
    return {"setup": ok, "call": ok, "teardown": ok, **calls}


@pytest.mark.parametrize(
    ("record", "outcome"),
    [
        (phases(), "passed"),
        (phases(call={"raw": "failed", "exc": "error", "final": "failed"}), "failed"),
        (phases(setup={"raw": "failed", "exc": "error", "final": "failed"}), "error"),
        (phases(call={"raw": "skipped", "exc": "skip", "final": "skipped"}), "skipped"),
        (
            phases(
                call={
                    "raw": "failed",
                    "exc": "error",
                    "final": "skipped",
                    "wasxfail": True,
                    "xfail_marked": True,
                }
            ),
            "xfailed",
        ),
        (
            phases(call={"raw": "failed", "exc": "xfail", "final": "skipped", "wasxfail": True}),
            "xfailed",
        ),
        (phases(call={"raw": "passed", "final": "passed", "wasxfail": True}), "xpassed"),
    ],
)
def test_outcomes_are_counted_from_pytests_own_report(record, outcome: str) -> None:
    run = counted_outcome(record)
    assert run is not None and run.outcome == outcome


def test_a_failure_rewritten_to_a_pass_or_an_unmarked_xfail_still_fails() -> None:
    passed = counted_outcome(phases(call={"raw": "failed", "exc": "error", "final": "passed"}))
    assert passed is not None and passed.outcome == "failed" and passed.rewritten
    fake_xfail = phases(
        call={"raw": "failed", "exc": "error", "final": "skipped", "wasxfail": True}
    )
    run = counted_outcome(fake_xfail)
    assert run is not None and run.outcome == "failed"
    # an exception the outer wrapper saw counts even if the report was replaced inside it
    hidden = counted_outcome(phases(call={"raw": "passed", "exc": "error", "final": "passed"}))
    assert hidden is not None and hidden.outcome == "failed"


def test_a_test_relays_wrappers_never_saw_run_counts_for_nothing() -> None:
    assert counted_outcome({"call": {"final": "passed"}}) is None


# --- reading and judging reports --------------------------------------------------------------


def session(**fields: object) -> SessionReport:
    base: dict[str, object] = dict(
        file="session-x.json", session="x", parent=None, worker=None, plugin=str(PLUGIN_FILE),
        finished=True, collect_only=False, exitstatus=0, stopped=None, rootdir="/r",
        collected=("t.py::a",), deselected=(), selected=("t.py::a",), collection_errors=(),
        tests=(TestRun("t.py::a", "passed"),),
    )  # fmt: skip
    base.update(fields)
    return SessionReport(**base)  # type: ignore[arg-type]


def test_load_report_counts_top_level_sessions_and_their_workers(tmp_path: Path) -> None:
    def dump(name: str, **fields: object) -> None:
        data = {"relay_audit_report": 1, "plugin": str(PLUGIN_FILE), "finished": True, **fields}
        (tmp_path / f"session-{name}.json").write_text(json.dumps(data), encoding="utf-8")

    ran = {"t.py::a": {"call": {"raw": "passed", "final": "passed"}}}
    dump("top", session="top", tests={})
    dump("gw0", session="gw0", parent="top", worker="gw0", tests=ran)
    dump("nested", session="nested", parent="gw0", tests={"t.py::b": {"call": {"raw": "failed"}}})
    (tmp_path / "session-bad.json").write_text("{", encoding="utf-8")
    report = load_report(tmp_path)
    assert [s.session for s in report.sessions] == ["gw0", "top"]
    assert report.nested == 1 and [t.nodeid for t in report.tests] == ["t.py::a"]
    assert report.unreadable and report.unreadable[0][0] == "session-bad.json"
    assert "cannot be read" in report_problems(report)[0]


@pytest.mark.parametrize(
    ("report", "problem"),
    [
        (PytestReport(()), NO_REPORT),
        (PytestReport((session(finished=False),)), "ended before it finished"),
        (PytestReport((session(plugin="/repo/relay_audit_pytest.py"),)), "not from relay"),
        (
            PytestReport((session(module_files={"_pytest.runner": "/repo/_pytest/runner.py"}),)),
            "imported _pytest.runner from /repo/_pytest/runner.py",
        ),
        (
            PytestReport((session(collection_errors=(("t.py", "E   ImportError: x"),)),)),
            "1 collection errors: t.py",
        ),
        (PytestReport((session(tests=(), collected=()),)), "no test ran"),
        (
            PytestReport((session(tests=(TestRun("t.py::a", "failed"),)),)),
            "1 test failed or errored",
        ),
        (
            PytestReport((session(tests=(TestRun("t.py::a", "skipped"),)),)),
            "every test was skipped",
        ),
        (PytestReport((session(exitstatus=3),)), "exit status was 3"),
    ],
)
def test_report_problems(report: PytestReport, problem: str) -> None:
    assert any(problem in p for p in report_problems(report)), report_problems(report)


def test_a_passing_report_has_no_problem_and_a_summary() -> None:
    report = PytestReport((session(deselected=("t.py::b",)),))
    assert report_problems(report) == []
    assert report.summary() == "1 passed, 1 deselected (relay's report)"
    installed = session(
        module_files={"pytest": "/repo/.venv/lib/python3.11/site-packages/pytest/__init__.py"}
    )
    assert report_problems(PytestReport((installed,))) == []
