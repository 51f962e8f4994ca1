"""``relay config show``: the effective configuration and where each value comes from
(issue 15; the layers: :mod:`relay.config_layers`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import urlsplit, urlunsplit

import typer

from relay.cli.app import app
from relay.cli.options import (
    ConfigOpt,
    GoalFileOpt,
    MaxNoProgressOpt,
    MaxRoundsOpt,
    NoColorOpt,
    PushOpt,
    RepoOpt,
    SandboxOpt,
    TimeBudgetOpt,
    TokenBudgetOpt,
    UnattendedOpt,
    WorkerOpt,
    model_options,
)
from relay.config_flags import FLAGS, flag_overrides

if TYPE_CHECKING:
    from relay.config_layers import Effective, Layer

__all__ = ["config_app", "show", "shown_settings"]

config_app = typer.Typer(
    help="The configuration: its layers and the value each setting takes.\n\n"
    "\b\nExample: relay config show",
    no_args_is_help=True,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(config_app, name="config")

_OPTION_OF = {flag.key: flag.option for flag in FLAGS.values()}


@config_app.command()
@model_options
def show(
    ctx: typer.Context,
    repo: RepoOpt = Path("."),
    config: ConfigOpt = None,
    goal_file: GoalFileOpt = None,
    mode: Annotated[
        str | None, typer.Option("--mode", help="relay (fresh context per round) or session.")
    ] = None,
    worker: WorkerOpt = None,
    max_rounds: MaxRoundsOpt = None,
    max_no_progress: MaxNoProgressOpt = None,
    token_budget: TokenBudgetOpt = None,
    time_budget: TimeBudgetOpt = None,
    sandbox: SandboxOpt = None,
    unattended: UnattendedOpt = False,
    push: PushOpt = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="Print the layers and every setting as one JSON object on stdout."
        ),
    ] = False,
    no_color: NoColorOpt = False,
) -> None:
    """Print the effective configuration of a new goal here, each value with its source:
    default, user (the user file), repo (relay.yaml), config file (--config), front matter
    (--goal-file), env (RELAY_* variables) or flag (the options given here, as to relay run).
    Provider keys are never shown (they are read from the environment only). Outside a
    repository, the folder's relay.yaml stands for the repository's.

    \b
    Example: relay config show --json
    """
    from relay.config_layers import effective_config
    from relay.errors import RepoStateError
    from relay.gitrepo import GitRepo
    from relay.goal_file import parse_goal_file

    try:
        root = GitRepo(repo).root
    except RepoStateError:  # outside a repository: the user file, env and flags still apply
        root = repo.resolve()
    front = parse_goal_file(goal_file)[1] if goal_file is not None else None
    found = effective_config(root, config, front, flag_overrides(ctx.params))
    for layer in found.layers:
        if layer.source == "front matter" and goal_file is not None:
            layer.path = goal_file
    settings = shown_settings(found)
    if as_json:
        layers = [_layer_json(layer) for layer in found.layers]
        data = {
            "layers": [{"source": "default", "from": None, "found": True}, *layers],
            "settings": settings,
        }
        print(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        _print_table(found, settings)
    raise typer.Exit(0)


def shown_settings(found: Effective) -> dict[str, dict[str, Any]]:
    """``{dotted key: {"value", "source", "from"}}`` of every setting of ``found``: ``from``
    is the file, variable or option that set it (None for a default)."""
    values = found.config.model_dump(mode="json")
    out: dict[str, dict[str, Any]] = {}
    for key, layer in found.sources().items():
        value: Any = values
        for part in key.split("."):
            value = value[part]
        if key == "base_url" and isinstance(value, str):
            value = _without_password(value)
        out[key] = {
            "value": value,
            "source": layer.source if layer else "default",
            "from": _origin(layer, tuple(key.split("."))) if layer else None,
        }
    return out


def _origin(layer: Layer, path: tuple[str, ...]) -> str:
    """The file, variable or option of ``layer`` that set the key ``path``."""
    if layer.source == "env":
        for size in range(len(path), 0, -1):
            if path[:size] in layer.variables:
                return layer.variables[path[:size]]
    if layer.source == "flag":
        return _OPTION_OF.get(path, "a flag")
    return str(layer.path) if layer.path is not None else layer.where


def _layer_json(layer: Layer) -> dict[str, Any]:
    """A layer for ``--json``: its source, where it was read from, whether it set anything."""
    where: str | None = str(layer.path) if layer.path is not None else layer.where
    if layer.source == "env":
        where = ", ".join(sorted(layer.variables.values())) or None
    elif layer.source == "flag":
        given = sorted(_OPTION_OF.get(path, "") for path in _paths(layer.data or {}))
        where = ", ".join(given) or None
    elif layer.source in ("config file", "front matter") and layer.data is None:
        where = None
    return {"source": layer.source, "from": where, "found": layer.data is not None}


def _paths(data: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The key paths of the leaves of the nested mapping ``data``."""
    out: list[tuple[str, ...]] = []
    for key, value in data.items():
        if isinstance(value, dict):
            out.extend(_paths(value, (*prefix, key)))
        else:
            out.append((*prefix, key))
    return out


def _without_password(url: str) -> str:
    """``url`` with the password of its user part, if any, shown as ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _value_text(value: Any) -> str:
    """A value as ``relay.yaml`` would hold it: text as is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _print_table(found: Effective, settings: dict[str, dict[str, Any]]) -> None:
    """The layers (lowest first), then one row per setting: key, value, source, from where."""
    from rich.table import Table

    from relay.terminal import SafeConsole

    out = SafeConsole(highlight=False, soft_wrap=True)
    out.print("layers, lowest first (a later layer overrides an earlier one):", markup=False)
    out.print("  default: built-in", markup=False)
    for layer in found.layers:
        info = _layer_json(layer)
        state = ""
        if layer.data is None:
            state = " (no such file)" if layer.path is not None else " (not set)"
        out.print(f"  {layer.source}: {info['from'] or '-'}{state}", markup=False)
    table = Table(box=None, pad_edge=False, show_edge=False)
    for column in ("setting", "value", "source", "from"):
        table.add_column(column)
    for key, row in settings.items():
        table.add_row(key, _value_text(row["value"]), row["source"], row["from"] or "")
    out.print(table)
