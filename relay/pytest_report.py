"""relay's own pytest report: what the pytest sessions of an audit command really ran
(SPEC §9 step 2, §14 "an orchestrator-owned test report").

For a pytest command (:func:`relay.testcmd.is_pytest_command`) the audit adds
:func:`pytest_environment` to the command's environment: ``PYTEST_ADDOPTS`` gets ``-p
relay_audit_pytest``, ``PYTHONPATH`` starts with the folder that holds only that plugin
(``relay/audit_plugin/``) and a variable names an inherited pipe. The plugin takes all three
out of the environment at import, so the code under test never sees them, and streams each
session's report into the pipe (:mod:`relay.pytest_channel`), which relay writes as
``session-*.json`` files for :func:`load_report`; :func:`report_problems` says why the
report proves nothing or shows failures.

How a test's outcome is counted (:func:`counted_outcome`): the outcome the innermost
``pytest_runtest_makereport`` wrapper saw (pytest's own report) and the exception the phase
raised (seen by the outermost wrapper) decide; a report that another plugin rewrote later
(``failed`` → ``passed``) still counts as failed. Only pytest's own expected-failure handling
may turn a failed phase into ``xfailed``: the test carries an ``xfail`` marker or called
``pytest.xfail()``.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from relay.fsread import read_regular_text

__all__ = [
    "NO_REPORT",
    "PLUGIN_DIR",
    "PLUGIN_FILE",
    "PLUGIN_MODULE",
    "PytestReport",
    "SessionReport",
    "TestRun",
    "counted_outcome",
    "load_report",
    "pytest_command",
    "pytest_environment",
    "report_problems",
]

PLUGIN_MODULE = "relay_audit_pytest"
PLUGIN_DIR = Path(__file__).resolve().parent / "audit_plugin"
PLUGIN_FILE = PLUGIN_DIR / f"{PLUGIN_MODULE}.py"
FORMAT = 1
RUNNER_MODULES = ("pytest", "_pytest", "pluggy", "py", PLUGIN_MODULE)
"""Modules a pytest run must import from an installed location, never from the tree."""

NO_REPORT = (
    "the command did not run relay's pytest plugin: pytest was not the runner that ran, or "
    "the test process ended early"
)
_FAILED = ("failed", "error")


def pytest_environment(
    channel: Mapping[str, str],
    *,
    collect_only: bool = False,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The variables to add to a pytest command's environment so that every session it starts
    loads relay's plugin and streams its report through ``channel``.

    Args:
        channel: the report channel's variable (:meth:`relay.pytest_channel.ReportChannel.env`).
        collect_only: add ``--co`` (the base commit's collection, :mod:`relay.audit_base`).
        environ: the environment the command inherits (default ``os.environ``): an existing
            ``PYTEST_ADDOPTS``/``PYTHONPATH`` is kept, relay's entries where they win.
    """
    source = os.environ if environ is None else environ
    options = f"-p {PLUGIN_MODULE}" + (" --co" if collect_only else "")
    before = source.get("PYTEST_ADDOPTS", "").strip()
    path = source.get("PYTHONPATH", "")
    return {
        "PYTEST_ADDOPTS": f"{before} {options}".strip(),
        "PYTHONPATH": str(PLUGIN_DIR) + (os.pathsep + path if path else ""),
        **channel,
    }


_ASSIGNMENT = re.compile(r"(^|[\s;&|()`'\"])(PYTHONPATH|PYTEST_ADDOPTS)=")


def _escaped(text: str) -> str:
    return re.sub(r"([^\w./:-])", r"\\\1", text)


def pytest_command(command: str, *, collect_only: bool = False) -> str:
    """``command`` with relay's entries kept where the command sets ``PYTHONPATH`` or
    ``PYTEST_ADDOPTS`` itself (``PYTHONPATH=src pytest``): the plugin folder is put first in
    the assigned value, and ``-p relay_audit_pytest`` (and ``--co``) before the options."""

    def keep(m: re.Match[str]) -> str:
        if m.group(2) == "PYTHONPATH":
            return f"{m.group(0)}{_escaped(str(PLUGIN_DIR))}:"
        options = f"-p {PLUGIN_MODULE} " + ("--co " if collect_only else "")
        return m.group(0) + _escaped(options)

    return _ASSIGNMENT.sub(keep, command)


@dataclass(frozen=True)
class TestRun:
    """One test that relay's plugin saw run: its pytest node id, the counted ``outcome``
    (``passed``, ``failed``, ``error``, ``skipped``, ``xfailed``, ``xpassed``), when a
    plugin's report said otherwise than pytest's own, what it said (``rewritten``), and for a
    test skipped or xfailed by an exception, the ``(absolute file, line)`` frames of that
    exception, outermost first (``origin``: which code decided it)."""

    __test__ = False  # not a pytest test class

    nodeid: str
    outcome: str
    rewritten: str | None = None
    origin: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class SessionReport:
    """One pytest session's report (see ``relay/audit_plugin/relay_audit_pytest.py``)."""

    file: str
    session: str
    parent: str | None
    worker: str | None
    plugin: str
    finished: bool
    collect_only: bool
    exitstatus: int | None
    stopped: str | None
    rootdir: str
    collected: tuple[str, ...]
    deselected: tuple[str, ...]
    selected: tuple[str, ...] | None
    collection_errors: tuple[tuple[str, str], ...]
    tests: tuple[TestRun, ...]
    module_files: dict[str, str] = field(default_factory=dict)
    plugin_files: dict[str, str] = field(default_factory=dict)
    shadowing: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PytestReport:
    """The reports of one command's pytest sessions: the ``sessions`` that count (started by
    the command itself, and their pytest-xdist workers), how many ``nested`` sessions (started
    by a test) were left out, and the report files that could not be read (``unreadable``,
    ``(file, reason)``)."""

    sessions: tuple[SessionReport, ...]
    nested: int = 0
    unreadable: tuple[tuple[str, str], ...] = ()

    @property
    def tests(self) -> list[TestRun]:
        """Every test that ran, over all sessions."""
        return [t for s in self.sessions for t in s.tests]

    def executed_ids(self) -> set[str]:
        """The node ids of the tests that ran."""
        return {t.nodeid for t in self.tests}

    def counts(self) -> Counter[str]:
        """Tests per counted outcome."""
        return Counter(t.outcome for t in self.tests)

    def summary(self) -> str:
        """``12 passed, 1 skipped (relay's report)``."""
        order = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
        counts = self.counts()
        parts = [f"{counts[k]} {k}" for k in order if counts[k]]
        deselected = sum(len(s.deselected) for s in self.sessions)
        if deselected:
            parts.append(f"{deselected} deselected")
        return f"{', '.join(parts) or 'no test ran'} (relay's report)"


def counted_outcome(phases: Mapping[str, Mapping[str, Any]]) -> TestRun | None:
    """The counted outcome of one test from its phase records (``{when: {raw, exc, final,
    wasxfail, xfail_marked}}``), or None when relay's wrappers never saw it run (a report
    only some plugin produced counts for nothing).

    A phase failed when pytest's report (``raw``) or the phase's exception (``exc`` =
    ``error``/``xfail``) or the final report says so; it is ``xfailed`` instead only when the
    final report carries ``wasxfail`` and the test has an ``xfail`` marker or raised
    ``pytest.xfail``. A failed setup or teardown is an ``error``.
    """
    seen = [w for w in ("setup", "call", "teardown") if "raw" in (phases.get(w) or {})]
    if not seen:
        return None
    outcome, rewritten, origin = "passed", None, ()
    for when in seen:
        phase = phases[when]
        raw, exc, final = phase.get("raw"), phase.get("exc"), phase.get("final")
        wasxfail = bool(phase.get("wasxfail"))
        justified = wasxfail and (exc == "xfail" or bool(phase.get("xfail_marked")))
        if raw == "failed" or exc in ("error", "xfail") or final == "failed":
            if final == "skipped" and justified:
                outcome, origin = "xfailed", origin or _frames(phase.get("origin"))
                continue
            if final not in (None, "failed"):
                rewritten = f"{final} (pytest's own report: failed)"
            return TestRun("", "failed" if when == "call" else "error", rewritten)
        if raw == "skipped" or exc == "skip" or final == "skipped":
            outcome = "skipped" if outcome == "passed" else outcome
            origin = origin or _frames(phase.get("origin"))
        elif when == "call" and wasxfail and final == "passed":
            outcome = "xpassed"
    if outcome == "passed" and "call" not in seen:  # the session ended inside the test
        return TestRun("", "error", rewritten)
    return TestRun("", outcome, rewritten, origin if outcome in ("skipped", "xfailed") else ())


def _frames(value: Any) -> tuple[tuple[str, int], ...]:
    """The ``[[file, line], ...]`` of a phase's ``origin`` (entries of another shape dropped)."""
    ok = lambda f: isinstance(f, list) and len(f) == 2 and isinstance(f[0], str)  # noqa: E731
    frames = value if isinstance(value, list) else []
    return tuple((f[0], f[1]) for f in frames if ok(f) and type(f[1]) is int)


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ValueError("expected a list of test ids")
    return tuple(str(v) for v in value)


def _session(path: Path, data: Any) -> SessionReport:
    """One report file's content; ValueError when it is not a report of this format."""
    if not isinstance(data, dict) or data.get("relay_audit_report") != FORMAT:
        raise ValueError("not a relay pytest report")
    tests = []
    raw_tests = data.get("tests") or {}
    if not isinstance(raw_tests, dict):
        raise ValueError("tests is not a mapping")
    for nodeid, phases in raw_tests.items():
        if not isinstance(phases, dict):
            raise ValueError(f"the phases of {nodeid} are not a mapping")
        run = counted_outcome({k: v for k, v in phases.items() if isinstance(v, dict)})
        if run is not None:
            tests.append(TestRun(str(nodeid), run.outcome, run.rewritten, run.origin))
    errors = data.get("collection_errors") or []
    selected = data.get("selected")
    exitstatus = data.get("exitstatus")
    return SessionReport(
        file=path.name,
        session=str(data.get("session") or path.stem),
        parent=data.get("parent") or None,
        worker=data.get("worker") or None,
        plugin=str(data.get("plugin") or ""),
        finished=data.get("finished") is True,
        collect_only=bool(data.get("collect_only")),
        exitstatus=exitstatus if isinstance(exitstatus, int) else None,
        stopped=str(data["stopped"]) if data.get("stopped") else None,
        rootdir=str(data.get("rootdir") or ""),
        collected=_strings(data.get("collected") or []),
        deselected=_strings(data.get("deselected") or []),
        selected=None if selected is None else _strings(selected),
        collection_errors=tuple(
            (str(e.get("nodeid", "")), str(e.get("message", "")))
            for e in errors
            if isinstance(e, dict)
        ),
        tests=tuple(tests),
        module_files=_files(data.get("module_files")),
        plugin_files=_files(data.get("plugin_files")),
        shadowing=_files(data.get("shadowing")),
    )


def _files(value: Any) -> dict[str, str]:
    """A report's ``{name: file}`` mapping; entries of another shape are dropped."""
    if not isinstance(value, dict):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, str)}


def load_report(folder: Path) -> PytestReport:
    """The report of the sessions that wrote into ``folder`` (``session-*.json``).

    The sessions that count are those without a parent (started by the command) and the
    pytest-xdist workers of those; a session a test started (``pytester``, a subprocess
    running pytest) is only counted in ``nested``. A missing folder is an empty report.
    """
    sessions: list[SessionReport] = []
    unreadable: list[tuple[str, str]] = []
    files = sorted(folder.glob("session-*.json")) if folder.is_dir() else []
    for path in files:
        try:
            text = read_regular_text(path)  # the test process could have planted a FIFO
            if text is None:
                raise ValueError("not a regular file")
            sessions.append(_session(path, json.loads(text)))
        except (OSError, ValueError, AttributeError, TypeError, RecursionError) as exc:
            unreadable.append((path.name, str(exc) or type(exc).__name__))
    top = {s.session for s in sessions if s.parent is None}
    counted = [s for s in sessions if s.parent is None or (s.worker and s.parent in top)]
    return PytestReport(tuple(counted), len(sessions) - len(counted), tuple(unreadable))


def _shown(ids: list[str], limit: int = 10) -> str:
    more = f" and {len(ids) - limit} more" if len(ids) > limit else ""
    return ", ".join(ids[:limit]) + more


def _outside_installation(file: str) -> bool:
    parts = Path(file).parts
    return not any(p in ("site-packages", "dist-packages") for p in parts)


def report_problems(report: PytestReport, *, collect_only: bool = False) -> list[str]:
    """Why a command's pytest report does not show a passing test run (empty: it does).

    Args:
        report: from :func:`load_report`.
        collect_only: the run was the base commit's collection (``--co``): then executed
            tests are not expected, and a collect-only session is fine.

    Returns:
        One sentence per problem, most important first: no report, a session that did not
        finish, relay's plugin or the test runner loaded from somewhere else, collection
        errors, a collect-only session, no test ran, failed tests (also when the exit status
        was 0), no test passed, a non-zero session exit status.
    """
    problems = [f"relay's report file {f} cannot be read: {why}" for f, why in report.unreadable]
    if not report.sessions:
        return [*problems, NO_REPORT]
    for s in report.sessions:
        if os.path.realpath(s.plugin) != os.path.realpath(PLUGIN_FILE):
            problems.append(
                f"the pytest plugin that wrote relay's report was loaded from {s.plugin or '?'}, "
                "not from relay: a module in the working tree shadows it"
            )
        for name, file in sorted(s.module_files.items()):
            if name.split(".", 1)[0] in RUNNER_MODULES and _outside_installation(file):
                problems.append(
                    f"the test run imported {name} from {file}, inside the working tree: a "
                    "module there shadows the test runner"
                )
        if not s.finished:
            problems.append(
                "a pytest session ended before it finished (the test process exited early or "
                f"crashed); relay's plugin saw {len(s.tests)} tests run in it"
            )
    errors = [
        f"{nodeid or '(session)'}" for s in report.sessions for nodeid, _ in s.collection_errors
    ]
    if errors:
        first = next(m for s in report.sessions for _, m in s.collection_errors)
        tail = first.strip().splitlines()[-1][:200] if first.strip() else ""
        problems.append(
            f"{len(errors)} collection errors: {_shown(errors, 5)}" + (f" ({tail})" if tail else "")
        )
    if collect_only:
        return problems
    if any(s.collect_only for s in report.sessions):
        problems.append("pytest only collected the tests (--collect-only/--co): none ran")
    problems += _outcome_problems(report)
    return problems


def _outcome_problems(report: PytestReport) -> list[str]:
    """Failed tests, rewritten reports, no test run or passed, a non-zero exit status."""
    problems, tests = [], report.tests
    if not tests:
        collected = sum(len(s.collected) for s in report.sessions)
        deselected = sum(len(s.deselected) for s in report.sessions)
        return [f"no test ran (relay's report: {collected} collected, {deselected} deselected)"]
    failed = [t.nodeid for t in tests if t.outcome in _FAILED]
    if failed:
        plural = "tests" if len(failed) != 1 else "test"
        problems.append(
            f"{len(failed)} {plural} failed or errored (relay's report): {_shown(failed)}"
        )
    rewritten = [f"{t.nodeid} reported as {t.rewritten}" for t in tests if t.rewritten]
    if rewritten:
        problems.append(
            "a plugin or conftest rewrote test reports (relay counts pytest's own outcome): "
            + _shown(rewritten, 5)
        )
    counts = report.counts()
    if not failed and not (counts["passed"] or counts["xpassed"]):
        problems.append(f"no test passed ({report.summary()}): every test was skipped")
    statuses = sorted({s.exitstatus for s in report.sessions if s.exitstatus not in (0, None)})
    if statuses and not failed:
        problems.append(
            f"pytest's exit status was {', '.join(map(str, statuses))} (relay's report)"
        )
    stopped = [s.stopped for s in report.sessions if s.stopped]
    if stopped and not failed:
        problems.append(f"the session stopped early: {stopped[0]}")
    return problems
