"""``relay batch goals.yaml``: many goals, each carried by its branch (SPEC §16;
:mod:`relay.batch`, docs/batch.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from relay.cli.app import app, err
from relay.cli.options import ConfigOpt, NoColorOpt, QuietOpt, RepoOpt
from relay.errors import ConfigError
from relay.terminal import SafeConsole, printable
from relay.text import counted

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
            "max_rounds, token_budget, time_budget, unattended} (docs/batch.md).",
        ),
    ],
    repo: RepoOpt = Path("."),
    workers: Annotated[
        int, typer.Option("--workers", min=1, help="Goals run at once by the local pool.")
    ] = 2,
    scheduler: Annotated[
        str | None,
        typer.Option(
            "--scheduler",
            help="Run the goals on this Dask cluster (tcp://HOST:8786; needs the dask extra).",
        ),
    ] = None,
    remote: Annotated[
        str | None,
        typer.Option(
            "--remote",
            help="Git remote URL of the goals' branches (default: the repository itself for "
            "the local pool, its origin for --scheduler).",
        ),
    ] = None,
    timeout: Annotated[
        str | None,
        typer.Option("--timeout", help="Cancel the goals still running after this (90m, 8h)."),
    ] = None,
    emit_matrix: Annotated[
        bool,
        typer.Option("--emit-matrix", help="Print a CI matrix (one job per goal), run nothing."),
    ] = False,
    ci: Annotated[
        str, typer.Option("--ci", help="The matrix's CI system: github or gitlab.")
    ] = "github",
    model: Annotated[
        str | None, typer.Option("--model", help="PROVIDER:MODEL for goals naming none.")
    ] = None,
    config: ConfigOpt = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="A JSON line per goal as it ends, then the batch's object, on stdout "
            "(the lines on stderr stay).",
        ),
    ] = False,
    quiet: QuietOpt = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="Also each goal's progress on stderr, prefixed [NAME]."
        ),
    ] = False,
    no_color: NoColorOpt = False,
) -> None:
    """Run many goals, each carried by its branch: on a local process pool (--workers), on a
    Dask cluster (--scheduler), or as a CI matrix (--emit-matrix). A line per goal streams
    on stderr as goals end (--json: also a JSON line on stdout), then the table (--json: the
    batch's JSON object) prints on stdout; exits with the worst exit code of the goals.
    --verbose: also each goal's progress (a line per round and step), prefixed with its name
    (on a Dask cluster, in the worker's log); --quiet: nothing but errors (the exit code tells).

    \b
    Example: relay batch goals.yaml --workers 4
    \b
    On a Dask cluster: relay batch goals.yaml --scheduler tcp://SCHEDULER:8786
    As a CI matrix:    relay batch --emit-matrix goals.yaml > matrix.json
    (docs/batch.md: which to use, starting a Dask cluster, the nightly CI workflows)
    """
    from relay.batch import load_batch, run_batch, worst_exit_code
    from relay.config import parse_duration

    if not goals_file.is_file():
        raise ConfigError(f"the batch file {goals_file} does not exist")
    if quiet and verbose:
        raise ConfigError("--quiet and --verbose exclude each other; give one")
    if emit_matrix:
        _print_matrix(goals_file, repo, ci)
        return
    try:
        timeout_s = parse_duration(timeout)
    except ValueError as exc:
        raise ConfigError(f"--timeout {timeout!r}: {exc}") from None
    total = len(load_batch(goals_file))  # a bad file is refused before any engine starts
    engine = _engine(scheduler, workers)
    show = _Shown(as_json, total, quiet=quiet)
    try:
        results = run_batch(
            goals_file, repo, engine, remote=remote, model=model, config_path=config,
            timeout_s=timeout_s, on_result=show.row, verbose=verbose,
        )  # fmt: skip
    finally:
        show.close()
    code = worst_exit_code([r.exit_code for r in results])
    if as_json:
        from relay.outputs import BatchOutput

        output = BatchOutput(exit_code=code, goals=[r.row() for r in results])
        print(json.dumps(output.model_dump(mode="json"), ensure_ascii=False), flush=True)
    elif not quiet:
        _print_table(goals_file, results)
    raise typer.Exit(code)


def _engine(scheduler: str | None, workers: int):
    from relay.batch.engines import DaskEngine, LocalEngine

    if scheduler:
        return DaskEngine.connect(scheduler)
    return LocalEngine(workers)


def _print_matrix(goals_file: Path, repo: Path, ci: str) -> None:
    from relay.batch.matrix import emit_matrix
    from relay.gitrepo import GitRepo

    git = GitRepo(repo)
    try:
        print(emit_matrix(goals_file, git.root, ci))
    finally:
        git.close()


class _Shown:
    """Each row as its goal ends: a line on stderr (under a progress bar of the goals when
    stderr is a terminal) unless ``--quiet``, and with ``--json`` a JSON line on stdout."""

    def __init__(self, as_json: bool, total: int, *, quiet: bool = False) -> None:
        self.as_json, self.quiet = as_json, quiet
        self.progress = None
        if not quiet and err.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

            self.progress = Progress(
                "goals", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                transient=True,
            )  # fmt: skip
            self.bar = self.progress.add_task("goals", total=total)
            self.progress.start()

    def row(self, result: BatchResult) -> None:
        from rich.markup import escape

        if self.as_json:
            from relay.outputs import BatchGoal

            line = BatchGoal(**result.row()).model_dump(mode="json")
            print(json.dumps(line, ensure_ascii=False), flush=True)
        if self.quiet:
            return
        reason = result.reason if result.reason not in (None, "", result.status) else None
        status = result.status + (f" ({reason})" if reason else "")
        where = f" on {result.host}" if result.host else ""
        attempt = f", attempt {result.attempt}" if result.attempt > 1 else ""
        colour = "green" if result.status == "complete" else "yellow"
        err.print(
            f"[{colour}]{escape(printable(result.name))}[/]: {escape(printable(status))} after "
            f"{counted(result.rounds, 'round')}{escape(where)}{attempt}",
            highlight=False,
        )
        if self.progress is not None:
            self.progress.advance(self.bar)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()


def _print_table(goals_file: Path, results: list[BatchResult]) -> None:
    """One row per goal: branch, status, rounds, tokens, cost, pushed, exit code, note."""
    from rich.table import Table

    table = Table(title=f"relay batch: {goals_file.name}")
    columns = ("goal", "branch", "status", "rounds", "tokens", "cost", "pushed", "exit", "note")
    for column in columns:
        table.add_column(column)
    for r in results:
        status = r.status + (f" ({r.reason})" if r.reason and r.reason != r.status else "")
        table.add_row(
            printable(r.name),
            printable(r.branch),
            status,
            str(r.rounds),
            f"{r.tokens:,}",
            f"${r.cost_usd:.4f}",
            "yes" if r.pushed else "no",
            str(r.exit_code),
            printable(r.message[:60]),  # the goal's message can hold the model's words
        )
    SafeConsole(highlight=False).print(table)
