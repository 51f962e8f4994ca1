"""``relay run`` and ``relay resume`` (SPEC §10, §12), and the outputs of a finished run."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from relay.cli.app import app, err
from relay.cli.options import (
    AllowDirtyOpt,
    ConfigOpt,
    DebugOpt,
    GoalArg,
    GoalFileOpt,
    JsonOpt,
    JunitOpt,
    MaxNoProgressOpt,
    MaxRoundsOpt,
    NoColorOpt,
    PushOpt,
    QuietOpt,
    RepoOpt,
    SandboxOpt,
    TimeBudgetOpt,
    TokenBudgetOpt,
    UnattendedOpt,
    VerboseOpt,
    WorkerOpt,
    model_options,
)
from relay.config_flags import flag_overrides
from relay.errors import ConfigError

if TYPE_CHECKING:
    from relay.runner import RunOutcome, RunRequest

__all__ = ["execute", "finish", "resume", "run", "run_shown"]


@app.command()
@model_options
def run(
    ctx: typer.Context,
    goal: GoalArg = None,
    goal_file: GoalFileOpt = None,
    repo: RepoOpt = Path("."),
    mode: Annotated[
        str | None, typer.Option("--mode", help="relay (fresh context per round) or session.")
    ] = None,
    worker: WorkerOpt = None,
    config: ConfigOpt = None,
    branch: Annotated[
        str | None, typer.Option("--branch", help="Work on this branch (created if missing).")
    ] = None,
    in_place: Annotated[
        bool, typer.Option("--in-place", help="Work on the current branch.")
    ] = False,
    allow_dirty: AllowDirtyOpt = False,
    max_rounds: MaxRoundsOpt = None,
    max_no_progress: MaxNoProgressOpt = None,
    token_budget: TokenBudgetOpt = None,
    time_budget: TimeBudgetOpt = None,
    sandbox: SandboxOpt = None,
    unattended: UnattendedOpt = False,
    debug: DebugOpt = False,
    push: PushOpt = False,
    junit: JunitOpt = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    no_color: NoColorOpt = False,
) -> None:
    """Run a goal until it is verifiably done or stops; without GOAL, resume the open goal
    (or the goal that the branch carries, on a fresh machine). Without --model, the model of
    the configuration (relay config show).

    \b
    Example: relay run "Make the failing tests in tests/ pass" --model anthropic:claude-sonnet-4-6
    """
    from relay.runner import RunRequest

    if branch and in_place:
        raise ConfigError("--branch and --in-place exclude each other; give one")
    if goal is not None and not goal.strip():
        raise ConfigError("the goal is empty; say what should be done")
    request = RunRequest(
        repo=repo,
        goal=goal,
        goal_file=goal_file,
        config_path=config,
        overrides=flag_overrides(ctx.params),
        branch=branch,
        in_place=in_place,
        allow_dirty=allow_dirty,
        debug=debug,
    )
    execute(request, as_json, junit, quiet=quiet, verbose=verbose)


@app.command()
@model_options
def resume(
    ctx: typer.Context,
    repo: RepoOpt = Path("."),
    config: ConfigOpt = None,
    allow_dirty: AllowDirtyOpt = False,
    unattended: UnattendedOpt = False,
    debug: DebugOpt = False,
    push: PushOpt = False,
    junit: JunitOpt = None,
    max_rounds: MaxRoundsOpt = None,
    max_no_progress: MaxNoProgressOpt = None,
    token_budget: TokenBudgetOpt = None,
    time_budget: TimeBudgetOpt = None,
    sandbox: SandboxOpt = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    no_color: NoColorOpt = False,
) -> None:
    """Continue the open goal (paused or stopped); the round counts restart. Budgets are for
    the whole goal: raise them to continue a budget-limited goal.

    \b
    Example: relay resume --max-rounds 10
    """
    from relay.runner import RunRequest

    request = RunRequest(
        repo=repo,
        config_path=config,
        overrides=flag_overrides(ctx.params),
        allow_dirty=allow_dirty,
        resume=True,
        debug=debug,
    )
    execute(request, as_json, junit, quiet=quiet, verbose=verbose)


def execute(
    request: RunRequest,
    as_json: bool,
    junit: Path | None = None,
    *,
    quiet: bool = False,
    verbose: bool = False,
) -> None:
    """Run ``request`` (:func:`run_shown`), then :func:`finish`; a Ctrl+C or SIGTERM that
    comes as the run ends does not keep its outputs from being written (issue 14). Raises
    ``ConfigError`` for ``quiet`` with ``verbose`` and for a ``junit`` path that cannot be
    written (:func:`relay.writable.check_output`)."""
    from relay.interrupts import handlers_kept, outputs_first
    from relay.writable import check_output

    if quiet and verbose:
        raise ConfigError("--quiet and --verbose exclude each other; give one")
    if junit is not None:  # refused before the run, not after it
        check_output(junit, "--junit")
    with handlers_kept():  # a paused run's handler lets one more signal go until here
        outcome = run_shown(request, quiet=quiet, verbose=verbose)
        with outputs_first():
            finish(outcome, as_json, junit, quiet=quiet)


def run_shown(request: RunRequest, *, quiet: bool = False, verbose: bool = False) -> RunOutcome:
    """Run ``request`` with its progress on stderr (a line per round, step and tool call; on a
    terminal also a status line; with ``verbose`` also the model's text and each tool call's
    output), also with ``--json``, whose object goes to stdout; none with ``--quiet``."""
    from relay import runner
    from relay.display import RichDisplay

    display = None if quiet else RichDisplay(verbose=verbose)
    try:
        return runner.run(request, display)
    finally:
        if display is not None:
            display.close()


def finish(
    outcome: RunOutcome, as_json: bool, junit: Path | None = None, *, quiet: bool = False
) -> None:
    """Outputs of a finished run: the morning summary in the run folder (and in
    ``$GITHUB_STEP_SUMMARY`` when set), JUnit XML of the audit, the summary on stderr (not
    with ``quiet``) and, with ``as_json``, the JSON object on stdout. Raises ``typer.Exit``
    with the run's exit code; an output that could not be written is an error on stderr and
    exit code 1 when the run's was 0."""
    from relay.gitrepo import GitRepo
    from relay.json_output import goal_result
    from relay.outputs import RunResult
    from relay.store import Store
    from relay.summary import junit_xml, run_summary_markdown
    from relay.terminal import OutputLostError, write_stdout

    store = Store(outcome.store_path)
    git = GitRepo(outcome.repo_root)
    try:
        result = goal_result(store, outcome.goal_id, git)
        data = RunResult(**dict(result), run_dir=str(outcome.run_dir)).model_dump(mode="json")
        summary = run_summary_markdown(data, store)
    finally:
        git.close()
        store.close()
    problems = _write_files(outcome.run_dir, summary, junit_xml(data), junit)
    if not quiet:
        _print_summary(data)
    if as_json:
        try:
            write_stdout(json.dumps(data, indent=2, ensure_ascii=False), "--json")
        except OutputLostError as exc:
            problems.append(f"{exc}; the run's summary is in {outcome.run_dir / 'summary.md'}")
    for problem in problems:
        err.print(f"error: {problem}", markup=False)
    raise typer.Exit(outcome.exit_code or (1 if problems else 0))


def _write_files(run_dir: Path, summary: str, xml: str, junit: Path | None) -> list[str]:
    """Write the summary into ``run_dir`` (and ``$GITHUB_STEP_SUMMARY``, when set, as far as it
    can) and the JUnit XML to ``junit``; returns what could not be written, in words naming
    the path (issue 28, item 9: an error, not a warning)."""
    problems: list[str] = []
    try:
        (run_dir / "summary.md").write_text(summary, encoding="utf-8")
    except OSError as exc:
        problems.append(f"cannot write {run_dir / 'summary.md'} ({exc.strerror or exc})")
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        with contextlib.suppress(OSError), open(step_summary, "a", encoding="utf-8") as fh:
            fh.write(summary + "\n")
    if junit is not None:
        try:
            junit.parent.mkdir(parents=True, exist_ok=True)
            junit.write_text(xml, encoding="utf-8")
        except OSError as exc:
            problems.append(
                f"cannot write --junit {junit} ({exc.strerror or exc}); the audit is in "
                f"{run_dir / 'summary.md'} and in `relay status`"
            )
    return problems


def _print_summary(data: dict[str, Any]) -> None:
    """The end of a run for a person: status and reason, message, next step, audit, usage."""
    from rich.markup import escape

    from relay.summary import next_step as next_step_for
    from relay.summary import not_pushed_line
    from relay.text_call_texts import warning_to_show

    status = data["status"]
    colour = "green" if status == "complete" else "yellow"
    reason = f" ({data['reason']})" if data["reason"] and data["reason"] != status else ""
    rounds = f"{data['rounds']} round{'s' if data['rounds'] != 1 else ''}"
    err.print(f"\n[bold {colour}]{status}[/]{reason} after {rounds}")
    if data.get("message"):
        err.print(data["message"], markup=False)
    for warning in (warning_to_show(data), not_pushed_line(data)):
        if warning is not None:
            err.print(f"[bold yellow]warning:[/] {escape(warning)}")
    next_step = next_step_for(status, data["reason"]) if status != "complete" else None
    if next_step and next_step not in (data.get("message") or ""):  # said once
        err.print(next_step, markup=False)
    audit = data.get("audit")
    if audit:
        err.print(f"audit: {'passed' if audit['passed'] else 'failed'}")
        for c in audit["checks"]:
            mark = "✓" if c["passed"] else "✗"
            lines = [ln.strip() for ln in c["evidence"].splitlines() if ln.strip()]
            lines = [ln for ln in lines if not ln.startswith("---")]
            shown = " · ".join(dict.fromkeys([lines[0], lines[-1]])) if lines else ""
            err.print(f"  {mark} {c['kind']} {c['target']}: {shown}", markup=False)
        if audit.get("note"):
            err.print(f"note: {audit['note']}", markup=False, style="yellow")
    from relay.summary import token_line

    err.print(
        f"{token_line(data['tokens'])} · branch {data['branch']} · run folder {data['run_dir']}",
        markup=False,
    )
    if data.get("cache_note"):
        err.print(f"note: {data['cache_note']}", markup=False)
