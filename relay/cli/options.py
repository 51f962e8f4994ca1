"""Command-line options shared by several ``relay`` commands (one definition each).

Options that set a configuration key have the parameter names of
:data:`relay.config_flags.FLAGS`, so that a command's parsed values (``ctx.params``) become
configuration through the one mapping :func:`relay.config_flags.flag_overrides`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

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
    str | None,
    typer.Option(
        "--base-url",
        help="API base URL of the provider (a local OpenAI-compatible server, a proxy, an Anthropic-compatible endpoint).",
    ),
]
MaxOutputTokensOpt = Annotated[
    int | None,
    typer.Option("--max-output-tokens", help="max_output_tokens: output tokens per model call."),
]
RequestTimeoutOpt = Annotated[
    float | None,
    typer.Option("--request-timeout", help="request_timeout_s: seconds to wait for an answer."),
]
ConnectTimeoutOpt = Annotated[
    float | None,
    typer.Option("--connect-timeout", help="connect_timeout_s: seconds to connect to the API."),
]
ForceToolChoiceOpt = Annotated[
    bool, typer.Option("--force-tool-choice", help="Force a tool call on every step.")
]
ParseTextCallsOpt = Annotated[
    bool,
    typer.Option(
        "--parse-text-calls",
        help="Run tool calls the model wrote as text as real calls (tools.parse_text_calls).",
    ),
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
WorkerOpt = Annotated[
    str | None,
    typer.Option(
        "--worker",
        help="worker: builtin (relay's own tools), claude-code or codex (an agent CLI per round).",
    ),
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


MODEL_OPTIONS: dict[str, tuple[Any, Any]] = {
    "model": (ModelOpt, None),
    "base_url": (BaseUrlOpt, None),
    "max_output_tokens": (MaxOutputTokensOpt, None),
    "request_timeout": (RequestTimeoutOpt, None),
    "connect_timeout": (ConnectTimeoutOpt, None),
    "force_tool_choice": (ForceToolChoiceOpt, False),
    "parse_text_calls": (ParseTextCallsOpt, False),
}
"""The model's options (:data:`relay.config_flags.MODEL_FLAGS`): name → (annotated type,
default). Every command that runs a model takes all of them through :func:`model_options`."""


def model_options(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` (a typer command function) with the options of :data:`MODEL_OPTIONS` added
    after its ``repo`` parameter (else first). Their values reach the command only through
    ``ctx.params`` (:func:`relay.config_flags.flag_overrides`), the one mapping from options
    to configuration keys, so ``run``, ``resume`` and ``compare`` cannot differ in them.

    Raises:
        ValueError: ``command`` already has a parameter of that name, or the names of
            :data:`MODEL_OPTIONS` and :data:`relay.config_flags.MODEL_FLAGS` differ.
    """
    from relay.config_flags import MODEL_FLAGS

    if set(MODEL_OPTIONS) != set(MODEL_FLAGS):
        raise ValueError(f"model options {sorted(MODEL_OPTIONS)} != {sorted(MODEL_FLAGS)}")
    signature = inspect.signature(command, eval_str=True)
    own = list(signature.parameters.values())
    clash = set(MODEL_OPTIONS) & {p.name for p in own}
    if clash:
        raise ValueError(f"{command.__name__} declares model options itself: {sorted(clash)}")
    added = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=kind, default=default)
        for name, (kind, default) in MODEL_OPTIONS.items()
    ]
    at = next((i + 1 for i, p in enumerate(own) if p.name == "repo"), 0)
    params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]

    @functools.wraps(command)
    def with_model_options(*args: Any, **kwargs: Any) -> None:
        for name in MODEL_OPTIONS:
            kwargs.pop(name, None)
        command(*args, **kwargs)

    with_model_options.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=params[:at] + added + params[at:]
    )
    with_model_options.__annotations__ = {
        **{p.name: p.annotation for p in params},
        **{name: kind for name, (kind, _) in MODEL_OPTIONS.items()},
    }
    return with_model_options


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
