"""Command-line options shared by several ``relay`` commands (one definition each).

Options that set a configuration key have the parameter names of
:data:`relay.config_flags.FLAGS`, so that a command's parsed values (``ctx.params``) become
configuration through the one mapping :func:`relay.config_flags.flag_overrides`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from relay.cli.app import use_no_color

RepoOpt = Annotated[
    Path, typer.Option("--repo", help="The repository to work in (default: the current folder).")
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="A configuration file read above relay.yaml and the user file "
        "(see relay config show).",
    ),
]
JsonOpt = Annotated[
    bool,
    typer.Option(
        "--json", help="Print one JSON object at the end on stdout (progress stays on stderr)."
    ),
]
QuietOpt = Annotated[
    bool,
    typer.Option("--quiet", "-q", help="No progress or summary on stderr (errors still show)."),
]
GoalArg = Annotated[str | None, typer.Argument(metavar="GOAL", help="The goal, in words.")]
GoalFileOpt = Annotated[
    Path | None,
    typer.Option("--goal-file", help="A Markdown goal file, optionally with YAML front matter."),
]
ModelOpt = Annotated[
    str | None,
    typer.Option("--model", help="PROVIDER:MODEL, e.g. anthropic:…, openai:…, scripted:FILE."),
]
BaseUrlOpt = Annotated[
    str | None, typer.Option("--base-url", help="API base URL (OpenAI-compatible servers).")
]
MaxRoundsOpt = Annotated[int | None, typer.Option("--max-rounds", help="limits.max_rounds_total.")]
MaxNoProgressOpt = Annotated[
    int | None, typer.Option("--max-no-progress", help="limits.max_no_progress.")
]
TokenBudgetOpt = Annotated[
    int | None, typer.Option("--token-budget", help="limits.token_budget (tokens).")
]
TimeBudgetOpt = Annotated[
    str | None, typer.Option("--time-budget", help="limits.time_budget: seconds, 90m, 8h.")
]
UnattendedOpt = Annotated[
    bool, typer.Option("--unattended", help="Answer needs_user_input automatically (limited).")
]
SandboxOpt = Annotated[
    str | None,
    typer.Option(
        "--sandbox",
        help="sandbox.mode: auto (bubblewrap when it works here), required, or off.",
    ),
]
AllowDirtyOpt = Annotated[
    bool,
    typer.Option(
        "--allow-dirty",
        help="Go on even with uncommitted changes (committed first, as yours).",
    ),
]
DebugOpt = Annotated[
    bool,
    typer.Option("--debug", help="Record each raw provider request/response (keys redacted)."),
]
PushOpt = Annotated[
    bool, typer.Option("--push", help="Push the branch after each round (never forced).")
]
JunitOpt = Annotated[
    Path | None, typer.Option("--junit", help="Write the audit checks as JUnit XML to this file.")
]
VerboseOpt = Annotated[
    bool,
    typer.Option(
        "--verbose",
        "-v",
        help="More progress on stderr: the model's text and each tool call's output (up to "
        "20 lines each).",
    ),
]


NoColorOpt = Annotated[
    bool,
    typer.Option(
        "--no-color",
        callback=use_no_color,
        is_eager=True,
        expose_value=False,
        help="No colours or styles (also when the NO_COLOR variable is set).",
    ),
]
"""``--no-color`` of the commands (the same as ``relay --no-color COMMAND``)."""
