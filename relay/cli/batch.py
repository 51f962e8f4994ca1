"""``relay batch goals.yaml``: several goals at once (SPEC §16; :mod:`relay.batch`)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from relay.cli.app import app, err
from relay.cli.options import ConfigOpt, JsonOpt, NoColorOpt, QuietOpt, RepoOpt
from relay.errors import ConfigError
from relay.terminal import SafeConsole, printable
from relay.text import counted, shorten

if TYPE_CHECKING:
    from relay.batch import BatchResult

__all__ = ["batch"]


@app.command()
def batch(
    goals_file: Annotated[
        Path,
        typer.Argument(
            metavar="GOALS_FILE",
            help="A YAML list of goals: {goal | goal_file, name, branch, model, mode, "
            "max_rounds, token_budget, time_budget, unattended} (README: Many goals).",
        ),
    ],
    repo: RepoOpt = Path("."),
    workers: Annotated[int, typer.Option("--workers", min=1, help="Goals run at once.")] = 2,
    model: Annotated[
        str | None, typer.Option("--model", help="PROVIDER:MODEL for goals naming none.")
    ] = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
    verbose: Annotated[
        bool,
        typer.Option("--verbose", "-v", help="A line per round of each goal on stderr."),
    ] = False,
    no_color: NoColorOpt = False,
) -> None:
    """Run several goals concurrently, each in its own git worktree and branch; exits with the
    worst exit code of the goals.

    Shows a line on stderr as each goal ends and the table of the goals at the end on stdout;
    --verbose: also a line per round of each goal on stderr while they run; --quiet: nothing
    but errors (the exit code tells).

    \b
    Example: relay batch goals.yaml --workers 3
    """
    from relay.batch import run_batch, worst_exit_code

    if not goals_file.is_file():
        raise ConfigError(f"the batch file {goals_file} does not exist")
    if quiet and verbose:
        raise ConfigError("--quiet and --verbose exclude each other; give one")
    results = run_batch(
        goals_file,
        repo,
        workers=workers,
        model=model,
        config_path=config,
        verbose=verbose,
        on_done=None if quiet else _ended,
    )
    code = worst_exit_code([r.exit_code for r in results])
    if as_json:
        from relay.outputs import BatchOutput

        output = BatchOutput(exit_code=code, goals=[dataclasses.asdict(r) for r in results])
        print(json.dumps(output.model_dump(mode="json"), indent=2, ensure_ascii=False))
    elif not quiet:
        _print_table(goals_file, results)
    raise typer.Exit(code)


def _ended(result: BatchResult) -> None:
    """Progress on stderr: one line per goal as it ends (the table follows at the end)."""
    if result.status == "error":
        line = f"goal {result.name} could not run (exit 1): {result.message}"
    else:
        rounds = counted(result.rounds, "round")
        line = f"goal {result.name} ended: {result.status} after {rounds} (exit {result.exit_code})"
    err.print(f"{line} · branch {result.branch}", markup=False)


def _print_table(goals_file: Path, results: list[BatchResult]) -> None:
    """One row per goal: branch, status, rounds, tokens, cost, exit code, message."""
    from rich.table import Table

    table = Table(title=f"relay batch: {goals_file.name}")
    for column in ("goal", "branch", "status", "rounds", "tokens", "cost", "exit", "note"):
        table.add_column(column)
    for r in results:
        status = r.status + (f" ({r.reason})" if r.reason and r.reason != r.status else "")
        table.add_row(
            r.name,
            r.branch,
            status,
            str(r.rounds),
            f"{r.tokens:,}",
            f"${r.cost_usd:.4f}",
            str(r.exit_code),
            printable(_note(r)),  # the goal's message can hold the model's words
        )
    console = SafeConsole(highlight=False)
    console.print(table)
    kept = [r for r in results if Path(r.worktree).is_dir()]
    if kept:  # where to look: each worktree keeps its run folder (HEAD detached)
        console.print(f"worktrees (run folders inside): {Path(kept[0].worktree).parent}")


def _note(result: BatchResult) -> str:
    """The table's note: why a goal could not run, in full; else the first line of its
    message, cut to 100 characters."""
    if result.status == "error":
        return result.message
    return shorten(next(iter(result.message.splitlines()), ""), 100)
