"""The batch file and the goal tasks made from it (SPEC §16; issue 17, item 1).

``goals.yaml`` is a list (or ``{goals: [...]}``) of entries with ``goal`` or ``goal_file``, and
optional ``name``, ``branch``, ``model``, ``mode``, ``max_rounds``, ``token_budget``,
``time_budget``, ``unattended``. Relative paths of an entry (``goal_file``, a ``scripted:``
model's script) are taken from the batch file's folder. :func:`make_tasks` reads every file an
entry names on the submitting machine and puts its *content* into the task: a task holds no path
of this machine.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

from relay.batch.task import GoalTask, Link
from relay.config import parse_duration
from relay.config_errors import format_validation_error
from relay.errors import ConfigError
from relay.gitrepo import goal_slug
from relay.goal_file import parse_goal_file
from relay.yaml_load import load_yaml

__all__ = ["BatchGoal", "goal_names", "load_batch", "make_tasks", "resolve_model_path"]


class BatchGoal(BaseModel):
    """One goal of a batch file."""

    model_config = ConfigDict(extra="forbid")

    goal: str | None = None
    """The goal text."""
    goal_file: str | None = None
    """Or a goal file (relative to the batch file), front matter allowed."""
    name: str | None = None
    """A short name for the table and the branch (default: from the goal)."""
    branch: str | None = None
    """The branch to work on (default: relay/batch-<name>)."""
    model: str | None = None
    """PROVIDER:MODEL (default: the command's --model or relay.yaml)."""
    mode: str | None = None
    """relay or session."""
    max_rounds: PositiveInt | None = None
    """limits.max_rounds_total for this goal."""
    token_budget: PositiveInt | None = None
    """limits.token_budget for this goal."""
    time_budget: str | float | None = None
    """limits.time_budget for this goal (seconds, 90m, 8h)."""
    unattended: bool = False
    """Answer needs_user_input automatically."""

    @field_validator("time_budget")
    @classmethod
    def _duration(cls, value: str | float | None) -> str | float | None:
        parse_duration(value)  # raises ValueError with what is allowed
        return value

    @model_validator(mode="after")
    def _one_goal(self) -> BatchGoal:
        if bool(self.goal) == bool(self.goal_file):
            raise ValueError("give exactly one of goal and goal_file")
        return self


class BatchFile(BaseModel):
    """The whole batch file."""

    model_config = ConfigDict(extra="forbid")
    goals: list[BatchGoal] = Field(min_length=1)


def load_batch(path: Path) -> list[BatchGoal]:
    """Read and validate a batch file; raises ``ConfigError`` naming the entry and key."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the batch file {path}: {exc}") from None
    data = load_yaml(text, f"the batch file {path}")
    if isinstance(data, list):
        data = {"goals": data}
    entries = data.get("goals") if isinstance(data, dict) else None
    for i, entry in enumerate(entries if isinstance(entries, list) else [], 1):
        try:  # each entry on its own, so that a message names it by its number
            BatchGoal.model_validate(entry)
        except ValidationError as exc:
            where = f"goal {i} of the batch file {path}"
            raise ConfigError(format_validation_error(exc, where, BatchGoal)) from None
    try:
        return BatchFile.model_validate(data).goals
    except ValidationError as exc:
        where = f"the batch file {path}"
        raise ConfigError(format_validation_error(exc, where, BatchFile)) from None


def goal_names(goals: list[BatchGoal], batch_file: Path) -> list[tuple[str, str]]:
    """``(name, branch)`` of every goal: the entry's ``name`` (else one made from the goal)
    as a slug, and its ``branch`` (else ``relay/batch-<name>``). Raises ``ConfigError`` when two
    goals would share a branch."""
    names = [goal_slug(g.name or g.goal or Path(g.goal_file or "goal").stem) for g in goals]
    branches = [g.branch or f"relay/batch-{n}" for g, n in zip(goals, names, strict=True)]
    duplicates = sorted({b for b in branches if branches.count(b) > 1})
    if duplicates:
        raise ConfigError(
            f"two goals of {batch_file} would share the branch {duplicates[0]}: "
            "give them different names or branches"
        )
    return list(zip(names, branches, strict=True))


def resolve_model_path(spec: str | None, base_dir: Path) -> str | None:
    """A batch entry's ``model``: a scripted model's relative script path is taken from the
    batch file's folder ``base_dir``, like ``goal_file`` (SPEC §13); other models as they are."""
    if spec is None or not spec.startswith("scripted:"):
        return spec
    path = Path(spec.removeprefix("scripted:")).expanduser()
    return spec if path.is_absolute() else f"scripted:{base_dir / path}"


def make_tasks(
    batch_file: Path,
    *,
    remote: str,
    base: str,
    model: str | None,
    config_text: str | None,
    link_for: Callable[[str], Link],
    verbose: bool = False,
) -> list[GoalTask]:
    """The self-contained task of every goal of ``batch_file`` (see the module docstring).

    Args:
        remote: the git remote URL every worker clones and pushes to.
        base: the commit a goal's branch starts from when the remote does not have it yet.
        model: ``--model`` for goals that name none (a relative script path is taken from
            the working directory, as on the command line).
        config_text: the text of ``--config``, if given.
        link_for: the engine's cancel and attempt link of a goal, by name.
        verbose: each goal's progress on its worker's stderr.

    Raises:
        ConfigError: a bad batch file, a goal file or script that cannot be read, two goals
            on one branch.
    """
    goals = load_batch(batch_file)
    folder = batch_file.resolve().parent
    tasks = []
    for entry, (name, branch) in zip(goals, goal_names(goals, batch_file), strict=True):
        text, front = entry.goal or "", {}
        if entry.goal_file:
            text, front = parse_goal_file(folder / entry.goal_file)
        spec = resolve_model_path(entry.model, folder) or resolve_model_path(model, Path.cwd())
        spec, script = _model_as_data(spec)
        tasks.append(
            GoalTask(
                name=name,
                branch=branch,
                remote=remote,
                base=base,
                goal=text,
                front=front,
                config=config_text,
                model=spec,
                script=script,
                flags=entry_flags(entry),
                link=link_for(name),
                verbose=verbose,
            )
        )
    return tasks


def _model_as_data(spec: str | None) -> tuple[str | None, str | None]:
    """``(model, script text)``: a scripted model's script travels as its text."""
    if spec is None or not spec.startswith("scripted:"):
        return spec, None
    path = Path(spec.removeprefix("scripted:")).expanduser()
    try:
        return "scripted", path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the scripted model's script {path}: {exc}") from None


def entry_flags(entry: BatchGoal) -> tuple[str, ...]:
    """The ``relay run`` options that carry an entry's settings."""
    flags: list[str] = []
    options: dict[str, Any] = {
        "--mode": entry.mode,
        "--max-rounds": entry.max_rounds,
        "--token-budget": entry.token_budget,
        "--time-budget": entry.time_budget,
    }
    for option, value in options.items():
        if value is not None:
            flags += [option, str(value)]
    if entry.unattended:
        flags.append("--unattended")
    return tuple(flags)
