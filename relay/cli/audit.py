"""``relay audit``: the completion audit now (SPEC §9, §12; :mod:`relay.audit_cli`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from relay.cli.app import app
from relay.cli.options import ConfigOpt, NoColorOpt, RepoOpt
from relay.terminal import printable

__all__ = ["audit"]


@app.command("audit")
def audit(
    repo: RepoOpt = Path("."),
    config: ConfigOpt = None,
    deliverables: Annotated[
        Path | None,
        typer.Option(
            "--deliverables",
            help="YAML file: a list of deliverables, a mapping with a deliverables key, or a "
            "goal file whose front matter has one (default: the current goal's, else "
            "relay.yaml's).",
        ),
    ] = None,
    base: Annotated[
        str | None,
        typer.Option(
            "--base",
            help="Commit to compare with for changes and tamper checks (default: the goal's "
            "base commit, else HEAD).",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print {passed, checks: [...]} as JSON.")
    ] = False,
    no_color: NoColorOpt = False,
) -> None:
    """Run the completion audit now: the current goal's deliverables and base commit, or
    --deliverables and --base; exit 0 only when every check passes.

    \b
    Example: relay audit --json
    """
    from relay.audit_cli import audit_now, format_report

    run = audit_now(repo, config_path=config, deliverables_file=deliverables, base=base)
    if as_json:
        print(json.dumps(run.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(printable(format_report(run)))
    raise typer.Exit(0 if run.result.passed else 1)
