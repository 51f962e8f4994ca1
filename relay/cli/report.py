"""``relay report``: a goal, a run or a comparison as Markdown, or HTML with charts
(SPEC §12; :mod:`relay.report`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from relay.cli.app import app, err
from relay.cli.options import ConfigOpt, NoColorOpt, RepoOpt
from relay.errors import ConfigError, GoalStateError
from relay.terminal import printable

if TYPE_CHECKING:
    from relay.compare import CompareResult
    from relay.config import Price

__all__ = ["compare_html", "report", "write_report"]


def write_report(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (folders created; readable by others: a report
    is meant to be shared); ConfigError when impossible."""
    from relay.fswrite import replace_file

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(path, text.encode("utf-8"), 0o644)
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None


def _prices(repo: Path, config: Path | None) -> dict[str, Price]:
    """``prices`` of the repository's configuration (empty when it cannot be read)."""
    from relay.config import load_config
    from relay.errors import RelayError
    from relay.gitrepo import GitRepo

    try:
        return dict(load_config(GitRepo(repo).root, config).prices)
    except RelayError:
        return {}


def compare_html(result: CompareResult, repo: Path, config: Path | None) -> str:
    """The HTML report of a comparison, priced with the repository's ``prices``."""
    from relay import report

    reports = report.compare_reports(result, _prices(repo, config))
    return report.compare_html(result, reports)


def _compare_markdown(result: CompareResult, repo: Path, config: Path | None) -> str:
    from relay import report

    reports = report.compare_reports(result, _prices(repo, config))
    return report.compare_markdown_report(result, reports)


def _goal_report(
    repo: Path, config: Path | None, ident: str | None, as_html: bool
) -> tuple[str, Path]:
    """The report text of a goal or run, and the default path of its HTML file."""
    from relay import report
    from relay.config import load_config
    from relay.gitrepo import GitRepo
    from relay.runner import open_store
    from relay.statedir import state_dir

    git = GitRepo(repo)
    cfg = load_config(git.root, config)
    store = open_store(git, cfg, create=False)
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


def _compare_report(compare_dir: Path, config: Path | None, as_html: bool) -> tuple[str, Path]:
    """The report text of a comparison (its output folder), and the default HTML path."""
    from relay.compare import COMPARE_HTML, load_compare

    result = load_compare(compare_dir)
    repo = Path(result.repo)
    text = (
        compare_html(result, repo, config) if as_html else _compare_markdown(result, repo, config)
    )
    return text, Path(result.out_dir) / COMPARE_HTML


@app.command("report")
def report(
    ident: Annotated[
        str | None,
        typer.Argument(
            metavar="RUN_ID|GOAL_ID", help="A run or goal id (default: the current goal)."
        ),
    ] = None,
    repo: RepoOpt = Path("."),
    config: ConfigOpt = None,
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
    no_color: NoColorOpt = False,
) -> None:
    """Report on a goal, a run, or a comparison: Markdown, or HTML with charts.

    \b
    Example: relay report --html
    """
    if compare_dir is not None:
        if ident is not None:
            raise ConfigError("give either a run/goal id or --compare DIR, not both")
        text, default_html = _compare_report(compare_dir, config, as_html)
    else:
        text, default_html = _goal_report(repo, config, ident, as_html)
    target = out or (default_html if as_html else None)
    if target is None:
        print(printable(text), end="")
        return
    write_report(target, text)
    err.print(f"written {target}", markup=False)
