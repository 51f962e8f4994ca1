"""The audit's commands: how relay runs them and how it judges what they did (SPEC §9 step 2).

Every command (``command`` deliverables, the discovered test command) runs through the
``shell`` tool's code (:class:`AuditShell`). A pytest command (:func:`is_pytest_command`) runs
with relay's pytest plugin loaded into each session and is judged from that plugin's report
(:mod:`relay.pytest_report`), never from what the command printed; other commands are judged by
their exit code and the output rules of :func:`relay.testcmd.no_tests_reason`.
"""

from __future__ import annotations

import contextlib
import itertools
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from relay.audit_checks import Check
from relay.audit_export import AuditTree, bytecode_environment
from relay.errors import RelayError
from relay.pytest_channel import ReportChannel
from relay.pytest_plain import plain_problems
from relay.pytest_report import (
    NO_REPORT,
    PytestReport,
    load_report,
    pytest_command,
    pytest_environment,
    report_problems,
)
from relay.testcmd import is_pytest_command, no_tests_reason
from relay.tools import ToolContext, ToolResult, run_shell

__all__ = [
    "AuditShell",
    "CommandOutcome",
    "CommandRunner",
    "PlainRun",
    "judge_command",
    "run_check",
    "shell_runner",
]


@dataclass(frozen=True)
class PlainRun:
    """The plain run of a pytest command (:mod:`relay.pytest_plain`): its exit status (None
    when stopped), whether it timed out, and its output tail (text)."""

    exit_code: int | None
    timed_out: bool
    output: str


@dataclass(frozen=True)
class CommandOutcome:
    """What running an audit command gave: ``exit_code`` (None when it timed out), the
    combined output tail (text), whether it timed out after ``timeout_s`` seconds, and for a
    pytest command the report of relay's plugin (``pytest``; None when the runner did not
    load the plugin, which fails a pytest command) and the ``plain`` run's result (None when
    it did not run: the run with the plugin already failed, or a collection)."""

    exit_code: int | None
    output: str
    timed_out: bool = False
    timeout_s: float = 0.0
    pytest: PytestReport | None = None
    plain: PlainRun | None = None


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
    """The audit's command runner (a :data:`CommandRunner`): the ``shell`` tool (SPEC §5), with
    stdin closed, the credential-free environment plus ``CI=1`` (so that watch-mode test
    runners run once) and byte-code caches off, its whole process group killed at the timeout,
    and output bounded to about ``evidence_chars`` characters (the whole output goes to
    ``ctx.run_dir``). Every command runs in a sandbox of its own, never in the run's kept one.

    Where: with ``tree`` (the judged export, :mod:`relay.audit_export`), each command runs in
    a fresh copy of it; else in ``ctx.repo_root``.

    A pytest command runs with relay's plugin, its report streamed through a channel only
    relay reads (:mod:`relay.pytest_channel`) and written into a new ``ctx.run_dir/audit/<n>/``
    that no command writes; when that run passes, the command runs once more plainly, as the
    user would run it (:mod:`relay.pytest_plain`: no plugin, no variable naming relay).

    Args:
        ctx: the tool context (repository root, run folder, limits).
        evidence_chars: characters of output kept (``audit.evidence_chars``).
        tree: the judged export, if any.
    """

    def __init__(self, ctx: ToolContext, evidence_chars: int, tree: AuditTree | None = None):
        self.ctx = replace(ctx, session=None)
        self.evidence_chars = evidence_chars
        self.tree = tree

    def __call__(self, command: str, timeout_s: float) -> CommandOutcome:
        return self.run(command, timeout_s)

    def in_folder(self, folder: Path) -> AuditShell:
        """The same runner with commands run in ``folder`` (the base commit's export)."""
        return AuditShell(replace(self.ctx, repo_root=folder), self.evidence_chars)

    def in_tree(self, tree: AuditTree) -> AuditShell:
        """The same runner with each command run in a fresh copy of ``tree``."""
        return AuditShell(self.ctx, self.evidence_chars, tree)

    @contextlib.contextmanager
    def _place(self) -> Iterator[ToolContext]:
        """The context of one command: in a fresh copy of the tree, or the repository."""
        if self.tree is None:
            yield self.ctx
            return
        with self.tree.fresh() as copy:
            yield replace(self.ctx, repo_root=copy)

    def _shell(
        self, ctx: ToolContext, command: str, timeout_s: float, env: dict[str, str], **how: Any
    ) -> ToolResult:
        bounded = replace(
            ctx, output_limit_bytes=self.evidence_chars, max_shell_timeout_s=timeout_s
        )
        with tempfile.TemporaryDirectory(prefix="relay-nocache-") as scratch:
            env = {"CI": "1", **env, **bytecode_environment(Path(scratch))}
            return run_shell(bounded, command, max(1, round(timeout_s)), env=env, **how)

    def run(self, command: str, timeout_s: float, *, collect_only: bool = False) -> CommandOutcome:
        """Run ``command`` (seconds of ``timeout_s``); ``collect_only`` adds ``--co`` to the
        pytest sessions (only for pytest commands).

        Raises:
            RelayError: a fresh copy of the judged export could not be made.
        """
        try:
            if not is_pytest_command(command):
                return self._plain(command, timeout_s)
            outcome = self._instrumented(command, timeout_s, collect_only)
        except RelayError as exc:
            return CommandOutcome(None, f"relay could not run the command: {exc}", False, timeout_s)
        report = outcome.pytest
        if collect_only or outcome.exit_code != 0 or report is None or report_problems(report):
            return outcome
        try:
            plain = self._plain(command, timeout_s)
        except RelayError as exc:
            plain = CommandOutcome(None, f"relay could not run the command: {exc}")
        return replace(outcome, plain=PlainRun(plain.exit_code, plain.timed_out, plain.output))

    def _plain(self, command: str, timeout_s: float) -> CommandOutcome:
        with self._place() as ctx:
            result = self._shell(ctx, command, timeout_s, {}, plain=True)
        output = self.ctx.redact(result.content)  # evidence never carries a secret (SPEC §14)
        return CommandOutcome(result.exit_code, output, result.timed_out, timeout_s)

    def _instrumented(self, command: str, timeout_s: float, collect_only: bool) -> CommandOutcome:
        try:
            folder = _report_folder(self.ctx.run_dir)
            channel = ReportChannel()
        except OSError as exc:
            why = f"relay cannot make the folder or channel of its pytest report: {exc}"
            return CommandOutcome(None, why, False, timeout_s, None)
        try:
            with self._place() as ctx:
                env = pytest_environment(channel.env(), collect_only=collect_only)
                command = pytest_command(command, collect_only=collect_only)
                result = self._shell(ctx, command, timeout_s, env, pass_fds=channel.pass_fds)
                moved = (str(ctx.repo_root), str(self.tree.folder)) if self.tree else None
                problems = channel.write_reports(folder, moved)
        finally:
            channel.close(0)
        report = load_report(folder)
        if problems:
            unreadable = tuple(("(channel)", p) for p in problems)
            report = replace(report, unreadable=report.unreadable + unreadable)
        output = self.ctx.redact(result.content)
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
        plain = outcome.plain
        if plain is not None and report is not None:
            disagree = plain_problems(
                plain.exit_code, plain.timed_out, plain.output, report.counts(), outcome.output
            )
            if disagree:
                problems += disagree
                tail = "output without relay's plugin:\n" + plain.output[-tail_chars:].strip()
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
