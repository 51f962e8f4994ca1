"""``relay init``: write a commented ``relay.yaml`` for this repository (and, with ``--ci``,
the CI workflow of ``examples/ci/``); SPEC §12. What goes in it is :mod:`relay.init_config`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from relay.cli.app import app, err
from relay.cli.options import RepoOpt
from relay.errors import ConfigError

if TYPE_CHECKING:
    from relay.init_config import InitFacts

__all__ = ["find_facts", "init", "planned_files"]


@app.command()
def init(
    repo: RepoOpt = Path("."),
    ci: Annotated[
        str | None,
        typer.Option(
            "--ci",
            metavar="github|gitlab",
            help="Also write the CI workflow (.github/workflows/relay.yml or .gitlab-ci.yml).",
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite files that exist and differ.")
    ] = False,
) -> None:
    """Write a commented relay.yaml for this repository: its test command as the deliverable,
    its tests and CI configuration as protected paths, the sandbox found on this machine.

    Example: relay init --ci github"""
    from relay.gitrepo import GitRepo

    if ci is not None and ci not in ("github", "gitlab"):
        raise ConfigError(f"--ci {ci!r}: expected github or gitlab")
    git = GitRepo(repo)
    try:
        facts = find_facts(git.root, git.files(), ci)  # type: ignore[arg-type]
    finally:
        git.close()
    files = planned_files(facts)
    existing = [p for p, text in files.items() if _differs(git.root / p, text)]
    if existing and not force:
        names = " and ".join(existing)
        verbs = "exist already and differ" if len(existing) > 1 else "exists already and differs"
        err.print(
            f"error: {names} {verbs} from what relay init writes; nothing was written "
            "(relay init --force overwrites)",
            markup=False,
        )
        raise typer.Exit(1)
    folders = [p for p in files if (git.root / p).is_dir() and not (git.root / p).is_symlink()]
    if folders:
        raise ConfigError(f"{folders[0]} is a folder: relay init writes a file there")
    for path, text in files.items():
        if _same(git.root / path, text):
            err.print(f"unchanged: {path}", markup=False)
            continue
        _write(git.root / path, text)
        err.print(f"{'overwritten' if path in existing else 'written'}: {path}", markup=False)
    _print_facts(facts)
    raise typer.Exit(0)


def _print_facts(facts: InitFacts) -> None:
    """What relay init found, for a person (stderr)."""
    found = facts.test_command
    if found is not None:
        err.print(f"deliverable: {found.command} ({found.reason})", markup=False)
    else:
        err.print("deliverable: none (no test command found; add one to relay.yaml)")
    err.print(f"protected: {', '.join(facts.protected) or 'none found'}", markup=False)
    if facts.sandbox_works:
        err.print("sandbox: bubblewrap works on this machine", markup=False)
    else:
        err.print(f"sandbox: off here ({facts.sandbox_problem})", markup=False)
    err.print("review relay.yaml, then commit it: relay reads it on every run", markup=False)


def find_facts(root: Path, files: list[str], ci: Literal["github", "gitlab"] | None) -> InitFacts:
    """What ``relay init`` finds in the working tree ``root`` with ``files`` (its tracked and
    untracked files) and on this machine (:class:`relay.init_config.InitFacts`)."""
    from relay.init_config import InitFacts, suggest_protected
    from relay.sandbox import resolve_sandbox
    from relay.testcmd import discover_test_command

    def read(path: str) -> str | None:
        try:
            return (root / path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    sandbox = resolve_sandbox("auto")
    return InitFacts(
        test_command=discover_test_command(read, files),
        protected=tuple(suggest_protected(files, ci)),
        sandbox_works=sandbox.mode == "bwrap",
        sandbox_problem=sandbox.reason,
        ci=ci,
    )


def planned_files(facts: InitFacts) -> dict[str, str]:
    """``{repo-relative path: text}`` that ``relay init`` writes for ``facts``: relay.yaml
    and the ``--ci`` workflow of ``examples/ci/``."""
    from relay.data import data_dir
    from relay.init_config import CI_FILES, render_relay_yaml

    out = {"relay.yaml": render_relay_yaml(facts)}
    if facts.ci is not None:
        source, target = CI_FILES[facts.ci]
        out[target] = (data_dir("examples") / "ci" / source).read_text(encoding="utf-8")
    return out


def _same(path: Path, text: str) -> bool:
    try:
        return path.read_text(encoding="utf-8") == text
    except (OSError, UnicodeDecodeError):
        return False


def _differs(path: Path, text: str) -> bool:
    """Whether ``path`` exists (as anything) with content other than ``text``."""
    return (path.exists() or path.is_symlink()) and not _same(path, text)


def _write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (its folders created; a symlink is replaced, not followed).
    Raises ``ConfigError`` naming the file when it cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():
            path.unlink()
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror}") from None
