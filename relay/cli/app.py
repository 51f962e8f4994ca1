"""The ``relay`` typer app, its stderr console, and what several commands share.

Start-up stays small: this module and the command modules import typer and relay's light
modules only; the heavy ones (gitpython, pydantic models, the provider SDKs) are imported
inside the commands that need them, so that ``relay --version`` and ``relay --help`` are fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from relay.cli.completion import SHELLS, CompletionGroup, install_completion, show_completion
from relay.errors import GoalStateError
from relay.terminal import SafeConsole

if TYPE_CHECKING:
    from relay.store import GoalRecord, Store

__all__ = ["app", "err", "note", "open_goal_store", "the_open_goal", "use_no_color"]

app = typer.Typer(
    cls=CompletionGroup,
    help="Keep an LLM coding agent working on a goal in a git repository until it is verifiably "
    'done.\n\n\b\nExample: relay run "Make the tests pass" --model anthropic:claude-sonnet-4-6',
    add_completion=False,  # relay's own pair, which honours a shell name
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
err = SafeConsole(stderr=True, highlight=False, soft_wrap=True)
"""Messages, warnings and the human-readable summaries go to stderr; stdout is for data."""


def _version(value: bool) -> None:
    if value:
        from relay import __version__

        print(f"goal-relay {__version__}")
        raise typer.Exit(0)


def use_no_color(value: bool) -> None:
    """The callback of ``--no-color``: no colours or styles from now on (SafeConsole)."""
    if value:
        from relay.terminal import set_no_color

        set_no_color(True)
        err.follow_colour_setting()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
    no_color: Annotated[
        bool,
        typer.Option(
            "--no-color",
            callback=use_no_color,
            is_eager=True,
            expose_value=False,
            help="No colours or styles in any output (also when NO_COLOR is set).",
        ),
    ] = False,
    install: Annotated[
        str | None,
        typer.Option(
            "--install-completion",
            metavar="[SHELL]",
            callback=install_completion,
            is_eager=True,
            expose_value=False,
            help=f"Install tab completion for SHELL ({', '.join(SHELLS)}; default: the "
            "shell relay runs from).",
        ),
    ] = None,
    show: Annotated[
        str | None,
        typer.Option(
            "--show-completion",
            metavar="[SHELL]",
            callback=show_completion,
            is_eager=True,
            expose_value=False,
            help="Print the completion script for SHELL (default: the shell relay runs "
            "from), to copy it or customize the installation.",
        ),
    ] = None,
) -> None:
    """Keep an LLM coding agent working on a goal in a git repository until it is verifiably
    done. Start with `relay demo`, then `relay run "GOAL" --model PROVIDER:MODEL`.

    \b
    Example: relay run "Make the tests pass" --model anthropic:claude-sonnet-4-6
    """


def note(text: str) -> None:
    """A one-time notice (the move of an older relay's state) on stderr."""
    err.print(f"note: {text}", markup=False)


def open_goal_store(
    repo: Path, config: Path | None, control: str | None = None
) -> tuple[Store, Path]:
    """The store of the working tree at ``repo`` and the state directory; GoalStateError when
    relay never ran there. With ``control`` (the command's name), a process started by the
    running goal's tool calls is refused before anything is read or changed (SPEC §14)."""
    from relay.config import load_config
    from relay.controls import refuse_from_goal_shell
    from relay.gitrepo import GitRepo
    from relay.runlock import lock_holder
    from relay.runner import open_store
    from relay.statedir import ready_state_dir

    git = GitRepo(repo)
    cfg = load_config(git.root, config)
    state_dir = ready_state_dir(git, cfg, note)
    if control is not None:
        refuse_from_goal_shell(state_dir / "run.lock", lock_holder(state_dir), control)
    store = open_store(git, cfg, create=False)
    if store is None:
        raise GoalStateError(f'no relay goal in {git.root} yet: start one with relay run "GOAL"')
    return store, state_dir


def the_open_goal(store: Store) -> GoalRecord:
    """The open goal of ``store``; GoalStateError when there is none."""
    goal = store.latest_goal(open_only=True)
    if goal is None:
        raise GoalStateError('no open goal here: start one with relay run "GOAL"')
    return goal
