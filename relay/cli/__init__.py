"""The ``relay`` command line (SPEC §12): one small module per command group over one typer
app (:mod:`relay.cli.app`) and one flag→configuration mapping
(:func:`relay.config_flags.flag_overrides`).

Errors become a message on stderr and an exit code here, at the boundary, never a traceback:
1 for usage, configuration and repository errors and for what the system refused (an
``OSError``: a file name too long, an unwritable output), and the status codes of
:data:`relay.goal.EXIT_CODES` for finished runs.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import signal
import sys

import typer

from relay.cli.app import app, err
from relay.errors import RelayError
from relay.goal import exit_code_for
from relay.terminal import reset_output_lost, set_no_color

__all__ = ["COMMAND_MODULES", "app", "err", "exit_code_for", "main"]

COMMAND_MODULES = (
    "run",
    "status",
    "controls",
    "log",
    "init",
    "schema",
    "batch",
    "demo",
    "compare",
    "report",
    "audit",
    "mcp",
    "config",
)
"""The modules of :mod:`relay.cli` that add commands to :data:`app`, in the order of
``relay --help``."""

for _name in COMMAND_MODULES:
    importlib.import_module(f"relay.cli.{_name}")

COMMAND_NAMES = frozenset(
    c.name or c.callback.__name__ for c in app.registered_commands if c.callback
)
"""The names of relay's commands (``run``, ``status``, …)."""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``relay`` console script; returns the exit code (SPEC §12).

    The objects left when the command ends are frozen out of the garbage collector (and
    unfrozen when ``main`` is called again in the same process): the interpreter's final
    collections then take milliseconds instead of seconds once a provider SDK has answered
    (its many type objects), so that a run stopped by Ctrl+C or SIGTERM exits at once.

    Called as the process's own entry point (``argv`` None: the ``relay`` script, ``python -m
    relay``), relay first re-executes itself without its secrets in the process's environment
    block (:func:`relay.secrets.reexec_without_secrets`, SPEC §14); called by another program
    (tests, with ``argv``), never.

    Args:
        argv: the arguments after ``relay`` (default: ``sys.argv[1:]``).
    """
    if argv is None:
        from relay.secrets import reexec_without_secrets

        reexec_without_secrets()  # returns when there is nothing to hide, or it cannot
    gc.unfreeze()
    try:
        return _command(argv)
    finally:
        gc.freeze()
        if argv is None:  # the process's own command line: the process ends next
            _settle()


def _settle() -> None:
    """The command of this process has ended: Ctrl+C, SIGTERM and SIGHUP are ignored from now on and
    the output is flushed. Python's shutdown puts the default action back on signals with a
    handler of its own, so a late Ctrl+C (the user's second) could kill the process before
    the ``--json`` object buffered for a pipe reached stdout, and change its exit code."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(KeyboardInterrupt, ValueError):
            signal.signal(sig, signal.SIG_IGN)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(KeyboardInterrupt, OSError, ValueError, AttributeError):
            stream.flush()


def _command(argv: list[str] | None) -> int:
    """The command of ``argv``, its errors turned into a message and an exit code."""
    set_no_color(False)  # this invocation's --no-color only (main may run more than once)
    err.follow_colour_setting()
    err.quiet = False  # an earlier invocation's lost stderr (in the same process) is not this one's
    reset_output_lost()
    try:
        result = app(args=argv, prog_name="relay", standalone_mode=False)
    except typer.TyperException as exc:  # usage errors: exit 1, not click's 2 (SPEC §12)
        if type(exc).__name__ == "NoArgsIsHelpError":
            err.print(exc.format_message(), markup=False)
            return 0
        ctx = getattr(exc, "ctx", None)
        words = sys.argv[1:] if argv is None else argv
        command = next((w for w in words[:1] if w in COMMAND_NAMES), None)
        hint = (
            f"{ctx.command_path} --help"
            if ctx is not None
            else f"relay {command} --help"
            if command
            else "relay --help"
        )
        err.print(f"error: {_usage_message(exc)}\n(see {hint})", markup=False)
        return 1
    except typer.Abort:
        err.print("aborted")
        return 130
    except RelayError as exc:
        err.print(f"error: {exc}", markup=False)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # a closed output: nothing to tell it to (issue 28 item 6)
        raise
    except OSError as exc:  # what the system refused (a name too long, a full disk …)
        err.print(f"error: {_os_message(exc)}", markup=False)
        return 1
    return result if isinstance(result, int) else 0


def _os_message(exc: OSError) -> str:
    """An OSError in words: what the system said and the file it said it of."""
    what = exc.strerror or str(exc) or type(exc).__name__
    name = exc.filename
    if name is None:
        return what
    shown = str(name) if len(str(name)) <= 200 else f"{str(name)[:200]}…"
    return f"{shown}: {what}"


def _usage_message(exc: typer.TyperException) -> str:
    """A usage error's message; a flag value that did not convert is said in relay's words
    (the flag, the value, what is allowed), not pydantic's."""
    from pydantic import ValidationError

    from relay.config_errors import flag_problem

    param = getattr(exc, "param", None)
    if isinstance(exc.__cause__, ValidationError) and param is not None:
        flag = max(getattr(param, "opts", None) or [str(param.name)], key=len)
        return flag_problem(exc.__cause__, flag)
    return exc.format_message()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
