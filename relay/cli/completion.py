"""``relay --show-completion [SHELL]`` and ``relay --install-completion [SHELL]`` (issue 28).

typer's own pair of options takes no value whenever ``shellingham`` is installed (always, as
typer depends on it): they are plain flags that detect the shell from the parent processes,
and ``relay --show-completion zsh`` printed the script of the shell it ran from, the ``zsh``
left unread because the eager option ended the process first. relay's options take an
optional shell name instead: the name given wins, and without one (or with ``auto``) the
shell is detected as before. typer's parser has no options with an optional value, so
:class:`CompletionGroup` gives the value before parsing (:func:`with_shell_values`). The scripts, the installers and the answers to the scripts'
requests (``_RELAY_COMPLETE=complete_zsh`` …) stay typer's.
"""

from __future__ import annotations

import subprocess

import click
import typer
from typer import completion as typer_completion
from typer.core import TyperGroup

__all__ = [
    "AUTO",
    "SHELLS",
    "CompletionGroup",
    "install_completion",
    "show_completion",
    "with_shell_values",
]

SHELLS = ("bash", "zsh", "fish", "powershell", "pwsh")
"""The shells typer has completion scripts for."""

AUTO = "auto"
"""The value of either option given without a shell name: detect the shell."""

OPTIONS = frozenset({"--show-completion", "--install-completion"})
"""The two options whose value (a shell name) may be left out."""

typer_completion.completion_init()  # typer's answers to the requests of its scripts


def with_shell_values(args: list[str]) -> list[str]:
    """``args`` with a value for each of :data:`OPTIONS` among the options before the first
    command word: the next word when it is no option (``--show-completion zsh`` →
    ``--show-completion=zsh``), else :data:`AUTO`. relay's own options take no value, so a
    word there that is no option is the command, or the shell of one of these."""
    out: list[str] = []
    rest = list(args)
    while rest:
        word = rest.pop(0)
        if word == "--" or not word.startswith("-"):
            return [*out, word, *rest]
        if word in OPTIONS:
            given = rest[0] if rest and not rest[0].startswith("-") else None
            word = f"{word}={rest.pop(0) if given is not None else AUTO}"
        out.append(word)
    return out


class CompletionGroup(TyperGroup):
    """relay's root command: typer's group, with :func:`with_shell_values` before parsing."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Parse ``args`` after giving the completion options their optional value."""
        return super().parse_args(ctx, with_shell_values(args))


def _detected_shell() -> str | None:
    """The shell relay runs from (shellingham's look at the parent processes), or None."""
    try:
        import shellingham

        name, _ = shellingham.detect_shell()
    except (ImportError, RuntimeError, OSError):  # ShellDetectionFailure is a RuntimeError
        return None
    return str(name).lower()


def _shell(value: str, option: str) -> str:
    """The shell ``value`` names, or the detected one for :data:`AUTO`; BadParameter when
    it is none of :data:`SHELLS`."""
    name = value.strip().lower()
    if name == AUTO:
        detected = _detected_shell()
        if detected is None:
            raise typer.BadParameter(
                f"could not detect the shell; name it: {option} {'|'.join(SHELLS)}"
            )
        name = detected
    if name not in SHELLS:
        raise typer.BadParameter(f"{value!r} has no completion script; one of: {', '.join(SHELLS)}")
    return name


def _names(ctx: click.Context) -> tuple[str, str]:
    """The program name and the variable its completion scripts set (``_RELAY_COMPLETE``)."""
    prog = ctx.find_root().info_name or "relay"
    return prog, "_{}_COMPLETE".format(prog.replace("-", "_").upper())


def show_completion(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """The callback of ``--show-completion [SHELL]``: print the script on stdout, exit 0."""
    if value is None or ctx.resilient_parsing:
        return
    shell = _shell(value, "--show-completion")
    prog, var = _names(ctx)
    typer.echo(
        typer_completion.get_completion_script(prog_name=prog, complete_var=var, shell=shell)
    )
    raise typer.Exit(0)


def install_completion(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """The callback of ``--install-completion [SHELL]``: install the script where typer puts
    it (under ``HOME``: ``~/.bash_completions/``, ``~/.zfunc/``, ``~/.config/fish/``, or the
    PowerShell profile), say where on stderr, exit 0; exit 1 when it could not."""
    if value is None or ctx.resilient_parsing:
        return
    shell = _shell(value, "--install-completion")
    prog, var = _names(ctx)
    try:
        shell, path = typer_completion.install(shell=shell, prog_name=prog, complete_var=var)
    except (OSError, subprocess.SubprocessError) as exc:
        typer.echo(f"error: could not install the {shell} completion: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"{shell} completion installed in {path}; it works in a new {shell}", err=True)
    raise typer.Exit(0)
