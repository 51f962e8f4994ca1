"""``relay schema [NAME] [--markdown]``: the JSON Schema of relay's outputs (SPEC §12;
:mod:`relay.outputs`), or docs/outputs.md."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from relay.cli.app import app
from relay.errors import ConfigError

__all__ = ["schema"]

NAMES = ("result", "status", "transcript", "batch", "events")
"""The outputs, as :data:`relay.outputs.SCHEMAS` names them (kept here for a fast --help)."""


@app.command()
def schema(
    name: Annotated[
        str | None,
        typer.Argument(
            metavar="NAME",
            help="result, status, transcript, batch or events (default: all, by name).",
        ),
    ] = None,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print docs/outputs.md (every output's fields).")
    ] = False,
) -> None:
    """Print the JSON Schema of relay's outputs: the --json object of run and resume (result),
    status --json, a transcript line, batch --json, a line of log --json (events).

    \b
    Example: relay schema result
    """
    from relay.outputs_docs import output_schema, outputs_markdown

    if name is not None and name not in NAMES:
        raise ConfigError(f"relay schema {name!r}: expected one of {', '.join(NAMES)}")
    if markdown:
        if name is not None:
            raise ConfigError("relay schema --markdown documents every output: give no NAME")
        print(outputs_markdown(), end="")
        raise typer.Exit(0)
    data = output_schema(name) if name else {n: output_schema(n) for n in NAMES}
    print(json.dumps(data, indent=2, ensure_ascii=False))
    raise typer.Exit(0)
