"""Checks of a goal's deliverables before a run changes anything (SPEC §9; issue 13, item 11).

Deliverables are frozen with the goal (SPEC §9): a ``command:`` whose program does not exist
(``pytset -q``) could never pass the audit, and no model can fix it. :func:`check_start`
refuses such a goal - a new one, and a resumed one whose frozen command cannot run any more -
before the branch is made and before any model call, with the deliverable, the program and
how to fix it. It also refuses globs that :mod:`relay.globs` cannot use (``changed:``,
``tools.protected_paths``), and a run without a key to seal its goal state with.

The program of a command is its first word as bash would run it (:func:`program_word`, pure):
after ``VAR=x`` assignments, ``env`` and a leading ``cd dir &&``. The check is conservative: a
shell builtin or keyword, an expansion, a redirection first, a command that sets ``PATH``, or
anything that does not parse is accepted, and so is a path inside the repository (the goal may
create it). A name is looked up on the ``PATH`` the audit's commands get
(:meth:`relay.sandbox.Sandbox.environment`), a path from the repository root, and inside the
sandbox a program under its private ``/tmp`` or ``/run`` (or a hidden path) is not there.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from relay.errors import ConfigError
from relay.globs import check_glob
from relay.sandbox.launcher import PRIVATE_MOUNTS, Sandbox
from relay.state_seal import sealing_key

if TYPE_CHECKING:
    from relay.config import Config
    from relay.store import GoalRecord

__all__ = ["Program", "check_start", "missing_program", "program_word"]

SHELL_WORDS = frozenset(
    # bash's keywords
    "! [[ ]] { } case coproc do done elif else esac fi for function if in select then time "
    "until while "
    # bash's builtins
    ". : [ alias bg bind break builtin caller cd command compgen complete compopt continue "
    "declare dirs disown echo enable eval exec exit export false fc fg getopts hash help "
    "history jobs kill let local logout mapfile popd printf pushd pwd read readarray readonly "
    "return set shift shopt source suspend test times trap true type typeset ulimit umask "
    "unalias unset wait".split()
)
"""Words bash runs itself: a command starting with one is accepted as it is."""

_SEPARATORS = frozenset({"&&", "||", ";", "|", "&", "|&", ";;"})
_SKIPPED = frozenset({"cd", "set"})  # `cd dir && prog`, `set -e; prog`: prog is the program
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_UNSURE = frozenset("$`*?[]{}~<>|&;()\\=")
_DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""bash's own PATH when the environment has none."""


@dataclass(frozen=True)
class Program:
    """The program word of a command; ``after_cd`` when a ``cd`` ran before it (a relative
    path is then relative to a folder relay does not follow)."""

    word: str
    after_cd: bool = False


def _tokens(command: str) -> list[str] | None:
    """The command's words and operators (``shlex``, posix), or None when it does not parse."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:
        return None


def _skip_assignments(tokens: list[str], i: int) -> int | None:
    """The index after the ``VAR=x`` words from ``i``; None when one sets ``PATH``."""
    while i < len(tokens) and _ASSIGNMENT.match(tokens[i]):
        if tokens[i].startswith("PATH="):
            return None
        i += 1
    return i


def program_word(command: str) -> Program | None:
    """The program that ``bash -c command`` runs first, or None when there is none to judge
    (a builtin or keyword, an expansion, a redirection or subshell first, ``env`` with
    options, a ``PATH=`` assignment, a command that does not parse).

    Examples: ``pytset -q`` → ``pytset``; ``FOO=1 pytest`` → ``pytest``; ``cd sub && pytest``
    → ``pytest`` (after a cd); ``env X=1 prog`` → ``prog``; ``python -m pytest`` → ``python``.
    """
    tokens = _tokens(command)
    if tokens is None:
        return None
    i, after_cd = 0, False
    while True:
        j = _skip_assignments(tokens, i)
        if j is None or j >= len(tokens):
            return None
        word = tokens[j]
        if word in _SKIPPED:
            k = next((n for n in range(j, len(tokens)) if tokens[n] in _SEPARATORS), None)
            if k is None or tokens[k] not in ("&&", ";"):
                return None
            i, after_cd = k + 1, after_cd or word == "cd"
            continue
        if word == "env":
            j = _skip_assignments(tokens, j + 1)
            if j is None or j >= len(tokens) or tokens[j].startswith("-"):
                return None
            word = tokens[j]
        if word in SHELL_WORDS or word.isdigit() or not word or _UNSURE & set(word):
            return None
        if j + 1 < len(tokens) and tokens[j + 1].startswith("("):  # a function definition
            return None
        return Program(word, after_cd)


def _under(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _sandbox_view(sandbox: Sandbox, root: Path) -> Callable[[Path], str | None]:
    """For a resolved path: why a sandboxed command cannot see it, or None when it can."""
    hidden = [Path(os.path.realpath(p)) for p in sandbox.hidden]
    shown = [root, *(Path(os.path.realpath(p)) for p in (*sandbox.visible, *sandbox.writable))]

    def why(path: Path) -> str | None:
        if not sandbox.active:
            return None
        if any(_under(path, h) for h in hidden):
            return "is hidden inside the sandbox (sandbox.hidden_paths)"
        private = next((m for m in PRIVATE_MOUNTS if _under(path, m)), None)
        if private is not None and not any(_under(path, s) for s in shown):
            return (
                f"is under {private}, which the sandbox hides (/tmp and /run are private and "
                "empty inside it; only folders below them that are on PATH are shown)"
            )
        return None

    return why


NOT_FOUND_FIX = "install it, fix the spelling, or give its full path"
HIDDEN_FIX = "install it outside /tmp and /run, or put its folder on PATH"


def _missing_path(
    program: Program, root: Path, why: Callable[[Path], str | None]
) -> tuple[str, str] | None:
    """Why the program given as a path cannot run and the fix, or None."""
    given = Path(program.word)
    if not given.is_absolute() and program.after_cd:
        return None
    lexical = Path(os.path.normpath(given if given.is_absolute() else root / given))
    if _under(lexical, root):
        return None  # inside the repository: the goal may create it
    if not lexical.exists():
        return f"the program {lexical} does not exist", NOT_FOUND_FIX
    if lexical.is_dir():
        return f"the program {lexical} is a folder", NOT_FOUND_FIX
    if not os.access(lexical, os.X_OK):
        return f"the program {lexical} is not executable", "make it executable (chmod +x)"
    hidden = why(Path(os.path.realpath(lexical)))
    return (f"the program {lexical} {hidden}", HIDDEN_FIX) if hidden else None


def missing_program(
    program: Program, root: Path, path_value: str | None, sandbox: Sandbox
) -> tuple[str, str] | None:
    """Why ``program`` cannot run in a deliverable command, and how to fix it; None when it
    can (or when relay cannot tell).

    Args:
        program: the command's program word (:func:`program_word`).
        root: the repository root (resolved): the command's folder.
        path_value: the ``PATH`` of the command's environment (None: bash's default).
        sandbox: where the command runs; inside bubblewrap, paths under ``/tmp`` and ``/run``
            that are not tool folders, and hidden paths, do not exist.

    Returns:
        ``(reason, fix)``, e.g. ``("'pytset' is not on the PATH …", "install it, …")``.
    """
    why = _sandbox_view(sandbox, root)
    if "/" in program.word:
        return _missing_path(program, root, why)
    value = _DEFAULT_PATH if path_value is None else path_value
    hidden: list[str] = []
    for entry in value.split(os.pathsep):
        folder = root / entry if entry else root  # relative entries: from the command's cwd
        found = shutil.which(program.word, path=str(folder))
        if found is None:
            continue
        real = Path(os.path.realpath(found))
        reason = why(real)
        if reason is None:
            return None
        hidden.append(f"'{program.word}' is on the PATH only at {found}: {real} {reason}")
    if hidden:
        return hidden[0], "install it outside /tmp and /run"
    where = " inside the sandbox" if sandbox.active else ""
    shown = value if len(value) <= 300 else value[:300] + "…"
    return f"'{program.word}' is not on the PATH the command runs with{where} ({shown})", (
        NOT_FOUND_FIX
    )


def _field(deliverable: Any, name: str) -> str | None:
    """A deliverable's ``name`` (a :class:`relay.config.Deliverable` or a frozen dict)."""
    value = deliverable.get(name) if isinstance(deliverable, dict) else getattr(deliverable, name)
    return value if isinstance(value, str) and value else None


def _problems(deliverables: Sequence[Any], root: Path, sandbox: Sandbox) -> list[str]:
    """One line per deliverable that can never pass: ``deliverable N (kind: target): why``."""
    path_value = sandbox.environment().get("PATH")
    out = []
    for n, d in enumerate(deliverables, 1):
        command, changed = _field(d, "command"), _field(d, "changed")
        program = program_word(command) if command is not None else None
        missing = missing_program(program, root, path_value, sandbox) if program else None
        if program is not None and missing is not None:
            reason, fix = missing
            out.append(f"deliverable {n} (command: {command}): {reason}; {fix}")
        if changed is not None:
            try:
                check_glob(changed, f"deliverable {n} (changed: {changed})")
            except ConfigError as exc:
                out.append(str(exc))
    return out


def check_start(
    root: Path, config: Config, goal: GoalRecord | None, sandbox: Sandbox | None
) -> None:
    """Refuse a run whose deliverables can never pass, before anything changes.

    Args:
        root: the repository root (resolved).
        config: the run's configuration (``deliverables`` of a new goal,
            ``tools.protected_paths``).
        goal: the open goal being resumed (its frozen ``deliverables``), or None for a new one.
        sandbox: where the audit's commands run (None: off).

    Raises:
        ConfigError: naming each bad deliverable, its program and the fix (exit 1); or a key
            to seal the goal state with cannot be had (:func:`relay.state_seal.sealing_key`).
    """
    sealing_key()  # made now if it is the first run here: the round's end needs it (SPEC §14)
    sandbox = sandbox or Sandbox()
    if config.worker != "builtin":  # the agent's executable, before anything changes
        from relay.workers.agents import agent_binary

        agent_binary(config.worker)
    for entry in config.tools.protected_paths:
        check_glob(entry, "tools.protected_paths")
    deliverables = goal.deliverables if goal is not None else config.deliverables
    problems = _problems(deliverables, Path(os.path.realpath(root)), sandbox)
    if not problems:
        return
    listed = "".join(f"\n  - {p}" for p in problems)
    if goal is None:
        raise ConfigError(
            f"the goal could never pass its audit:{listed}\nFix the deliverables in relay.yaml "
            "or the goal file's front matter."
        )
    raise ConfigError(
        f"goal {goal.id} cannot complete: its deliverables were frozen when it started, and "
        f"they can never pass the audit:{listed}\nThey cannot be changed now: `relay clear` "
        "drops the goal, then `relay run` starts it again with fixed deliverables."
    )
