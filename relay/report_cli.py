"""The ``relay compare`` and ``relay report`` commands (SPEC §12), registered on the typer app
of :mod:`relay.cli` by :func:`register`.

Errors are :class:`relay.errors.RelayError` subclasses, turned into a message and exit code 1
by ``relay.cli.main`` like every other command's.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from relay.cli_options import (
    BaseUrlOpt,
    MaxNoProgressOpt,
    MaxRoundsOpt,
    TimeBudgetOpt,
    TokenBudgetOpt,
)
from relay.errors import ConfigError, GoalStateError
from relay.terminal import SafeConsole, printable

if TYPE_CHECKING:
    from relay.compare import CompareResult
    from relay.config import Price


def _write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (folders created); ConfigError when impossible."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a report is meant to be shared
        os.replace(tmp, path)
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None


def print_compare_table(result: CompareResult, console: Console) -> None:
    """Print the side-by-side table of a comparison to ``console``."""
    from relay.compare import table

    header, rows = table(result)
    out = Table(title=f"relay compare {result.compare_id}", title_justify="left")
    for i, h in enumerate(header):
        out.add_column(h, justify="left" if i == 0 else "right")
    for row in rows:
        out.add_row(*row)
    console.print(out)


def register(app: typer.Typer) -> None:
    """Add the ``compare`` and ``report`` commands to ``app``."""

    @app.command("compare")
    def compare_command(
        goal: Annotated[str | None, typer.Argument(help="The goal, in words.")] = None,
        goal_file: Annotated[
            Path | None,
            typer.Option("--goal-file", help="A Markdown goal file, optionally with front matter."),
        ] = None,
        repo: Annotated[
            Path, typer.Option("--repo", help="The repository (default: the current folder).")
        ] = Path("."),
        model: Annotated[
            str | None, typer.Option("--model", help="PROVIDER:MODEL, the same for both modes.")
        ] = None,
        base_url: BaseUrlOpt = None,
        config: Annotated[
            Path | None,
            typer.Option("--config", help="Configuration file (default: relay.yaml)."),
        ] = None,
        max_rounds: MaxRoundsOpt = None,
        max_no_progress: MaxNoProgressOpt = None,
        token_budget: TokenBudgetOpt = None,
        time_budget: TimeBudgetOpt = None,
        unattended: Annotated[
            bool, typer.Option("--unattended", help="Answer needs_user_input automatically.")
        ] = False,
        parallel: Annotated[
            bool, typer.Option("--parallel", help="Run the modes at the same time (processes).")
        ] = False,
        repeat: Annotated[int, typer.Option("--repeat", help="Runs per mode.")] = 1,
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
            bool, typer.Option("--json", help="Print the comparison as one JSON object.")
        ] = False,
    ) -> None:
        """Run the same goal in relay mode and in session mode, from the same commit, in two
        git worktrees, and compare them side by side."""
        from relay.compare import (
            COMPARE_HTML,
            CompareRequest,
            compare_overrides,
            run_compare,
        )

        if goal is not None and not goal.strip():
            raise ConfigError("the goal is empty; say what should be done")
        request = CompareRequest(
            repo=repo,
            goal=goal,
            goal_file=goal_file,
            config_path=config,
            overrides=compare_overrides(
                model=model,
                base_url=base_url,
                max_rounds=max_rounds,
                max_no_progress=max_no_progress,
                token_budget=token_budget,
                time_budget=time_budget,
                unattended=unattended,
            ),
            repeat=repeat,
            parallel=parallel,
            out_dir=out,
        )
        err = SafeConsole(stderr=True, highlight=False, soft_wrap=True)
        result = run_compare(request, show_progress=not as_json)
        out_dir = Path(result.out_dir)
        if as_html:
            _write(out_dir / COMPARE_HTML, _compare_html(result, repo, config))
        if as_json:
            print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
        else:
            print_compare_table(result, SafeConsole(highlight=False))
            written = ["compare.json", "compare.md"] + ([COMPARE_HTML] if as_html else [])
            err.print(f"written to {out_dir}: {', '.join(written)}", markup=False)
            for row in result.runs:
                err.print(
                    f"  {row.label}: branch {row.branch}, worktree {row.worktree}", markup=False
                )
        failed = [r for r in result.runs if r.error]
        raise typer.Exit(1 if failed and len(failed) == len(result.runs) else 0)

    @app.command("report")
    def report_command(
        ident: Annotated[
            str | None,
            typer.Argument(
                metavar="[RUN_ID|GOAL_ID]", help="A run or goal id (default: the current goal)."
            ),
        ] = None,
        repo: Annotated[
            Path, typer.Option("--repo", help="The repository (default: the current folder).")
        ] = Path("."),
        config: Annotated[
            Path | None,
            typer.Option("--config", help="Configuration file (default: relay.yaml)."),
        ] = None,
        as_html: Annotated[
            bool, typer.Option("--html", help="Self-contained HTML with charts.")
        ] = False,
        out: Annotated[
            Path | None,
            typer.Option(
                "--out",
                help="Write to this file (default: Markdown to stdout; HTML to "
                "reports/<id>.html in relay's state folder, .git/relay/).",
            ),
        ] = None,
        compare_dir: Annotated[
            Path | None,
            typer.Option("--compare", help="Report on a comparison: its output folder."),
        ] = None,
    ) -> None:
        """Report on a goal, a run, or a comparison: Markdown, or HTML with charts."""
        err = SafeConsole(stderr=True, highlight=False, soft_wrap=True)
        if compare_dir is not None:
            if ident is not None:
                raise ConfigError("give either a run/goal id or --compare DIR, not both")
            from relay.compare import COMPARE_HTML, load_compare

            result = load_compare(compare_dir)
            if as_html:
                target = out or Path(result.out_dir) / COMPARE_HTML
                _write(target, _compare_html(result, Path(result.repo), config))
                err.print(f"written {target}", markup=False)
                return
            text = _compare_markdown(result, Path(result.repo), config)
        else:
            text, default_html = _goal_report(repo, config, ident, as_html)
            if as_html:
                target = out or default_html
                _write(target, text)
                err.print(f"written {target}", markup=False)
                return
        if out is not None:
            _write(out, text)
            err.print(f"written {out}", markup=False)
        else:
            print(printable(text), end="")


def _prices(repo: Path, config: Path | None) -> dict[str, Price]:
    """``prices`` of the repository's configuration (empty when it cannot be read)."""
    from relay.config import load_config
    from relay.errors import RelayError
    from relay.gitrepo import GitRepo

    try:
        return dict(load_config(GitRepo(repo).root, config).prices)
    except RelayError:
        return {}


def _goal_report(
    repo: Path, config: Path | None, ident: str | None, as_html: bool
) -> tuple[str, Path]:
    """The report text of a goal or run, and the default path of its HTML file."""
    from relay import report, runner
    from relay.config import load_config
    from relay.gitrepo import GitRepo
    from relay.statedir import state_dir

    git = GitRepo(repo)
    cfg = load_config(git.root, config)
    store = runner.open_store(git, cfg, create=False)
    if store is None:
        raise GoalStateError(f'no relay goal in {git.root} yet: start one with relay run "GOAL"')
    try:
        goal_id, run_id = report.resolve_target(store, ident)
        data = report.load_goal_report(store, goal_id, run_id=run_id, prices=cfg.prices)
    finally:
        store.close()
    name = run_id or goal_id
    default_html = state_dir(git, cfg) / "reports" / f"{name}.html"
    text = report.html_report(data) if as_html else report.markdown_report(data)
    return text, default_html


def _compare_html(result: CompareResult, repo: Path, config: Path | None) -> str:
    from relay import report

    reports = report.compare_reports(result, _prices(repo, config))
    return report.compare_html(result, reports)


def _compare_markdown(result: CompareResult, repo: Path, config: Path | None) -> str:
    from relay import report

    reports = report.compare_reports(result, _prices(repo, config))
    return report.compare_markdown_report(result, reports)
