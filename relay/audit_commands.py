"""The audit's commands: how relay runs them and how it judges what they did (SPEC §9 step 2).

Every command (``command`` deliverables, the discovered test command) runs through the
``shell`` tool's code (:class:`AuditShell`). A pytest command (:func:`is_pytest_command`) runs
with relay's pytest plugin loaded into each session and is judged from that plugin's report
(:mod:`relay.pytest_report`), never from what the command printed; other commands are judged by
their exit code and the output rules of :func:`relay.testcmd.no_tests_reason`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from relay.audit_checks import Check
from relay.pytest_report import (
    NO_REPORT,
    PytestReport,
    load_report,
    pytest_command,
    pytest_environment,
    report_problems,
)
from relay.testcmd import is_pytest_command, no_tests_reason
from relay.tools import ToolContext, run_shell

__all__ = [
    "AuditShell",
    "CommandOutcome",
    "CommandRunner",
    "judge_command",
    "run_check",
    "shell_runner",
]


@dataclass(frozen=True)
class CommandOutcome:
    """What running an audit command gave: ``exit_code`` (None when it timed out), the
    combined output tail (text), whether it timed out after ``timeout_s`` seconds, and for a
    pytest command the report of relay's plugin (``pytest``; None when the runner did not
    load the plugin, which fails a pytest command)."""

    exit_code: int | None
    output: str
    timed_out: bool = False
    timeout_s: float = 0.0
    pytest: PytestReport | None = None


CommandRunner = Callable[[str, float], CommandOutcome]
"""Runs a shell command in the repository root with a timeout in seconds."""


def _report_folder(run_dir: Path) -> Path:
    """A new, empty ``run_dir/audit/<n>/`` (n = 1, 2, …) for one command's pytest report."""
    parent = run_dir / "audit"
    parent.mkdir(parents=True, exist_ok=True)
    for n in itertools.count(1):
        folder = parent / str(n)
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        return folder
    raise AssertionError("unreachable")


class AuditShell:
    """The audit's command runner (a :data:`CommandRunner`): the ``shell`` tool (SPEC §5) in
    ``ctx.repo_root``, with stdin closed, the credential-free environment plus ``CI=1`` (so that
    watch-mode test runners run once), its whole process group killed at the timeout, and output
    bounded to about ``evidence_chars`` characters (the whole output goes to ``ctx.run_dir``).

    A pytest command also gets relay's plugin (:func:`relay.pytest_report.pytest_environment`),
    its report folder a new ``ctx.run_dir/audit/<n>/`` that the command may write. Every
    command runs in a sandbox of its own, never in the run's kept one (``ctx.session``).

    Args:
        ctx: the tool context (repository root, run folder, limits).
        evidence_chars: characters of output kept (``audit.evidence_chars``).
    """

    def __init__(self, ctx: ToolContext, evidence_chars: int) -> None:
        self.ctx = replace(ctx, session=None)
        self.evidence_chars = evidence_chars

    def __call__(self, command: str, timeout_s: float) -> CommandOutcome:
        return self.run(command, timeout_s)

    def in_folder(self, folder: Path) -> AuditShell:
        """The same runner with commands run in ``folder`` (the base commit's export)."""
        return AuditShell(replace(self.ctx, repo_root=folder), self.evidence_chars)

    def run(self, command: str, timeout_s: float, *, collect_only: bool = False) -> CommandOutcome:
        """Run ``command`` (seconds of ``timeout_s``); ``collect_only`` adds ``--co`` to the
        pytest sessions (only for pytest commands)."""
        bounded = replace(
            self.ctx, output_limit_bytes=self.evidence_chars, max_shell_timeout_s=timeout_s
        )
        env = {"CI": "1"}
        folder: Path | None = None
        if is_pytest_command(command):
            try:
                folder = _report_folder(self.ctx.run_dir)
            except OSError as exc:
                why = f"relay cannot create the folder of its pytest report: {exc}"
                return CommandOutcome(None, why, False, timeout_s, None)
            env.update(pytest_environment(folder, collect_only=collect_only))
            command = pytest_command(command, collect_only=collect_only)
        writable = (folder,) if folder is not None else ()
        result = run_shell(bounded, command, max(1, round(timeout_s)), env=env, writable=writable)
        report = load_report(folder) if folder is not None else None
        output = self.ctx.redact(result.content)  # evidence never carries a secret (SPEC §14)
        return CommandOutcome(result.exit_code, output, result.timed_out, timeout_s, report)


def shell_runner(ctx: ToolContext, evidence_chars: int) -> AuditShell:
    """The audit's command runner for ``ctx`` (see :class:`AuditShell`)."""
    return AuditShell(ctx, evidence_chars)


def judge_command(
    command: str,
    outcome: CommandOutcome,
    tail_chars: int,
    *,
    kind: str = "command",
    note: str = "",
) -> Check:
    """The check of a command that ran (SPEC §9 step 2): exit 0 required; a pytest command is
    judged by relay's report (:func:`relay.pytest_report.report_problems`: no report, an
    unfinished session, failed tests even with exit code 0, no test ran or passed…) and shows
    its counts; another test run that proved nothing fails
    (:func:`relay.testcmd.no_tests_reason`); a timeout fails with ``timed out after N s``.

    Args:
        command: the shell command.
        outcome: what running it gave.
        tail_chars: characters of output kept as evidence (the tail).
        kind: the check's kind (``command``, or ``tests`` for a discovered test command).
        note: a first line of evidence (why a discovered command was chosen).
    """
    tail = outcome.output[-tail_chars:].strip()
    head = f"{note}\n" if note else ""
    if outcome.timed_out:
        return Check(kind, command, False, f"{head}timed out after {outcome.timeout_s:g} s\n{tail}")
    if tail.startswith("exit code"):  # the runner's own first line; say it once
        tail = tail.partition("\n")[2].strip()
    if is_pytest_command(command):
        report = outcome.pytest
        problems = report_problems(report) if report is not None else [NO_REPORT]
        counts = f"\n{report.summary()}" if report is not None and report.sessions else ""
        found = "".join(f"{p}\n" for p in problems)
        evidence = f"{head}{found}exit code {outcome.exit_code}{counts}\n{tail}".strip()
        return Check(kind, command, not problems and outcome.exit_code == 0, evidence)
    evidence = f"{head}exit code {outcome.exit_code}\n{tail}".strip()
    empty = no_tests_reason(command, outcome.output, outcome.exit_code)
    if empty is not None:
        return Check(kind, command, False, f"{empty}\n{evidence}")
    return Check(kind, command, outcome.exit_code == 0, evidence)


def run_check(
    command: str,
    timeout_s: float,
    run: CommandRunner,
    tail_chars: int,
    *,
    kind: str = "command",
    note: str = "",
) -> tuple[Check, CommandOutcome]:
    """Run ``command`` with ``run`` (``timeout_s`` seconds) and judge it
    (:func:`judge_command`); returns the check and the outcome."""
    outcome = run(command, timeout_s)
    return judge_command(command, outcome, tail_chars, kind=kind, note=note), outcome
