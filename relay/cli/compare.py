"""``relay compare``: the same goal in relay mode and in session mode, side by side (SPEC §3;
:mod:`relay.compare`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from relay.cli.app import app, err
from relay.cli.options import (
    ConfigOpt,
    GoalArg,
    GoalFileOpt,
    MaxNoProgressOpt,
    MaxRoundsOpt,
    NoColorOpt,
    QuietOpt,
    RepoOpt,
    TimeBudgetOpt,
    TokenBudgetOpt,
    UnattendedOpt,
    model_options,
)
from relay.config_flags import flag_overrides
from relay.errors import ConfigError
from relay.terminal import SafeConsole, write_stdout

if TYPE_CHECKING:
    from rich.console import Console

    from relay.compare import CompareResult

__all__ = ["compare", "print_compare_table"]


def print_compare_table(result: CompareResult, console: Console) -> None:
    """Print the side-by-side table of a comparison to ``console``."""
    from rich.table import Table

    from relay.compare import table

    header, rows = table(result)
    out = Table(title=f"relay compare {result.compare_id}", title_justify="left")
    for i, h in enumerate(header):
        out.add_column(h, justify="left" if i == 0 else "right")
    for row in rows:
        out.add_row(*row)
    console.print(out)


@app.command("compare")
@model_options
def compare(
    ctx: typer.Context,
    goal: GoalArg = None,
    goal_file: GoalFileOpt = None,
    repo: RepoOpt = Path("."),
    config: ConfigOpt = None,
    max_rounds: MaxRoundsOpt = None,
    max_no_progress: MaxNoProgressOpt = None,
    token_budget: TokenBudgetOpt = None,
    time_budget: TimeBudgetOpt = None,
    unattended: UnattendedOpt = False,
    workers: Annotated[
        list[str] | None,
        typer.Option(
            "--worker",
            help="Compare these workers instead of the modes (twice or more: builtin, "
            "claude-code, codex).",
        ),
    ] = None,
    parallel: Annotated[
        bool, typer.Option("--parallel", help="Run the runs at the same time (processes).")
    ] = False,
    repeat: Annotated[int, typer.Option("--repeat", help="Runs per mode or worker.")] = 1,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Folder for compare.json/.md (default: compare/<id> in relay's state "
            "folder, .git/relay/; see relay status).",
        ),
    ] = None,
    as_html: Annotated[
        bool, typer.Option("--html", help="Also write report.html with charts.")
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the comparison as one JSON object on stdout (progress stays on stderr).",
        ),
    ] = False,
    quiet: QuietOpt = False,
    verbose: Annotated[
        bool,
        typer.Option("--verbose", "-v", help="Also a line per tool call of each run on stderr."),
    ] = False,
    no_color: NoColorOpt = False,
) -> None:
    """Run the same goal in relay mode and in session mode (or with the workers given by
    --worker), from the same commit, in git worktrees of their own, and compare them side by
    side (the same model, model options and budgets for all). With --worker twice or more
    (builtin, claude-code, codex), the workers are compared, each in the configured mode.

    Progress: a line per round of each run on stderr (--verbose: also per tool call), also
    with --json; at the end the table (--json: the JSON object) on stdout. --quiet: nothing
    but errors (the files are written all the same).

    \b
    Example: relay compare "Add a --json option to the CLI" --model anthropic:claude-sonnet-4-6
    """
    from relay.cli.report import compare_html, write_report
    from relay.compare import COMPARE_HTML, CompareRequest, OutputsNotWritten, run_compare

    if goal is not None and not goal.strip():
        raise ConfigError("the goal is empty; say what should be done")
    if quiet and verbose:
        raise ConfigError("--quiet and --verbose exclude each other; give one")
    request = CompareRequest(
        repo=repo,
        goal=goal,
        goal_file=goal_file,
        config_path=config,
        overrides=flag_overrides(ctx.params),
        workers=tuple(workers or ()),
        repeat=repeat,
        parallel=parallel,
        out_dir=out,
    )
    problem: str | None = None
    try:
        result = run_compare(request, show_progress=not quiet, verbose=verbose)
    except OutputsNotWritten as exc:  # the results are shown all the same, then the error
        result, problem = exc.result, str(exc)
    out_dir = Path(result.out_dir)
    if as_html and problem is None:
        write_report(out_dir / COMPARE_HTML, compare_html(result, repo, config))
    if as_json:
        write_stdout(json.dumps(result.to_dict(), indent=2, ensure_ascii=False), "--json")
    elif not quiet:
        print_compare_table(result, SafeConsole(highlight=False))
    if problem is not None:
        raise ConfigError(problem)
    if not quiet:
        written = ["compare.json", "compare.md"] + ([COMPARE_HTML] if as_html else [])
        err.print(f"written to {out_dir}: {', '.join(written)}", markup=False)
        for row in result.runs:
            err.print(f"  {row.label}: branch {row.branch}, worktree {row.worktree}", markup=False)
    failed = [r for r in result.runs if r.error]
    raise typer.Exit(1 if failed and len(failed) == len(result.runs) else 0)
