"""``relay batch goals.yaml``: several goals at once, each in its own git worktree and branch.

The goals run through any :class:`concurrent.futures.Executor`: by default a local
``ProcessPoolExecutor`` with ``--workers`` processes. A distributed engine replaces it by
passing another executor to :func:`run_batch` — anything with ``submit(fn, *args) -> Future``
(e.g. a ``dask.distributed.Client``'s executor interface or a Ray-backed executor), as long
as the workers see the same repository on a shared disk. Each task is the picklable function
:func:`run_one` with plain arguments, so no state is shared between goals.

``goals.yaml`` is a list (or ``{goals: [...]}``) of entries with ``goal`` or ``goal_file``,
and optional ``name``, ``branch``, ``model``, ``max_rounds``, ``token_budget``,
``time_budget``, ``mode``, ``unattended``. Relative paths in an entry (``goal_file``, a
``scripted:`` model's script) are taken from the batch file's folder.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

from relay.config import flag_overrides, load_config, parse_duration
from relay.config_errors import format_validation_error
from relay.errors import ConfigError, RelayError, RepoStateError
from relay.gitrepo import GitRepo, goal_slug
from relay.statedir import exclude_state_dir, ready_state_dir


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


@dataclasses.dataclass(frozen=True)
class BatchResult:
    """How one goal of a batch ended (``status`` ``error`` when it could not run)."""

    name: str
    branch: str
    worktree: str
    exit_code: int
    status: str
    reason: str | None
    rounds: int
    tokens: int
    cost_usd: float
    message: str


def load_batch(path: Path) -> list[BatchGoal]:
    """Read and validate a batch file; raises ``ConfigError`` naming the entry and key."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read the batch file {path}: {exc}") from None
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


def worst_exit_code(codes: list[int]) -> int:
    """One exit code for the batch: 0 when every goal completed, else the worst one (usage and
    repository errors, 1, are worst; then failed 7, terminated 6, … needs_user_input 2)."""
    if not codes or all(c == 0 for c in codes):
        return 0
    if 1 in codes:
        return 1
    return max(c for c in codes if c != 0)


def run_one(
    repo_root: str,
    worktree: str,
    entry: dict[str, Any],
    base_dir: str,
    model: str | None,
    config_path: str | None,
    verbose: bool = False,
) -> BatchResult:
    """Run one goal in ``worktree`` (a task for the executor; arguments are plain values).

    ``verbose``: a line per round of the goal on stderr, prefixed with its name.
    Never raises: an error becomes a result with exit code 1 and status ``error``.
    """
    from relay import runner
    from relay.compare_run import LineDisplay
    from relay.store import Store

    goal = BatchGoal.model_validate(entry)
    name, branch = goal.name or "goal", goal.branch or "relay/batch-goal"
    goal_file = (Path(base_dir) / goal.goal_file) if goal.goal_file else None
    entry_model = resolve_model_path(goal.model, Path(base_dir))
    try:  # the entry's settings have the names of the command-line options
        overrides = flag_overrides({**goal.model_dump(), "model": entry_model or model})
        outcome = runner.run(
            runner.RunRequest(
                repo=Path(worktree),
                goal=goal.goal,
                goal_file=goal_file,
                config_path=Path(config_path) if config_path else None,
                overrides=overrides,
                branch=branch,
            ),
            LineDisplay(name) if verbose else None,
        )
        data = runner.goal_json(Store(outcome.store_path), outcome.goal_id)
    except RelayError as exc:
        return BatchResult(name, branch, worktree, 1, "error", None, 0, 0, 0.0, str(exc))
    t = data["tokens"]
    return BatchResult(
        name,
        branch,
        worktree,
        outcome.exit_code,
        data["status"],
        data["reason"],
        data["rounds"],
        t["uncached_input"] + t["cache_write"] + t["output"],
        data["cost_usd"],
        (data["message"] or "").strip().splitlines()[0] if data["message"] else "",
    )


def resolve_model_path(spec: str | None, base_dir: Path) -> str | None:
    """A batch entry's ``model``: a scripted model's relative script path is taken from the
    batch file's folder ``base_dir``, like ``goal_file`` (SPEC §13); other models as they are."""
    if spec is None or not spec.startswith("scripted:"):
        return spec
    path = Path(spec.removeprefix("scripted:")).expanduser()
    return spec if path.is_absolute() else f"scripted:{base_dir / path}"


def make_worktrees(git: GitRepo, folder: Path, count: int) -> list[Path]:
    """One detached worktree per goal at HEAD, in ``folder`` (``batch/<id>`` in the state
    folder of the main worktree, :mod:`relay.statedir`)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = folder / f"goal-{i + 1}"
        try:
            git.add_worktree(path, "HEAD")
        except RepoStateError as exc:
            raise RelayError(f"cannot create a worktree for goal {i + 1}: {exc}") from None
        paths.append(path)
    return paths


def _collect(
    futures: list[concurrent.futures.Future[BatchResult]],
    on_done: Callable[[BatchResult], None] | None,
) -> list[BatchResult]:
    """The goals' results in the batch file's order; ``on_done`` sees each as it ends."""
    for future in concurrent.futures.as_completed(futures):
        if on_done is not None:
            on_done(future.result())
    return [f.result() for f in futures]


def run_batch(
    batch_file: Path,
    repo: Path,
    *,
    workers: int = 2,
    model: str | None = None,
    config_path: Path | None = None,
    executor: concurrent.futures.Executor | None = None,
    verbose: bool = False,
    on_done: Callable[[BatchResult], None] | None = None,
) -> list[BatchResult]:
    """Run every goal of ``batch_file`` concurrently, each in its own worktree and branch.

    Args:
        batch_file: the goals (see the module docstring).
        repo: the repository; it must be clean (goals start from its HEAD).
        workers: processes of the default local pool.
        model: the default model for goals that name none.
        config_path: a configuration file for every goal (read above each worktree's
            relay.yaml, :mod:`relay.config_layers`).
        executor: another executor (e.g. a distributed one); the caller shuts it down.
        verbose: a line per round of each goal on stderr (``relay batch --verbose``).
        on_done: called with each goal's result as soon as that goal ends (progress).

    Raises:
        ConfigError: a bad batch file or duplicate branch names. RepoStateError: not a
            repository, or it is dirty.
    """
    goals = load_batch(batch_file)
    git = GitRepo(repo)
    state = ready_state_dir(git, load_config(git.root, config_path))
    exclude_state_dir(git, state)
    git.preflight(offer_allow_dirty=False)  # batch has no --allow-dirty
    names = [goal_slug(g.name or g.goal or Path(g.goal_file or "goal").stem) for g in goals]
    branches = [g.branch or f"relay/batch-{n}" for g, n in zip(goals, names, strict=True)]
    duplicates = {b for b in branches if branches.count(b) > 1}
    if duplicates:
        raise ConfigError(
            f"two goals of {batch_file} would share the branch {sorted(duplicates)[0]}: "
            "give them different names or branches"
        )
    for branch in branches:
        if git.branch_exists(branch):
            raise ConfigError(
                f"the branch {branch} exists already: name the goal differently, or delete"
                f" the branch (git branch -D {branch})"
            )
    batch_id = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:4]
    trees = make_worktrees(git, state / "batch" / batch_id, len(goals))
    own = executor is None
    pool = executor or concurrent.futures.ProcessPoolExecutor(max_workers=max(1, workers))
    try:
        futures = [
            pool.submit(
                run_one,
                str(git.root),
                str(tree),
                goal.model_copy(update={"name": name, "branch": branch}).model_dump(),
                str(batch_file.resolve().parent),
                model,
                str(config_path.resolve()) if config_path else None,
                verbose,
            )
            for goal, tree, name, branch in zip(goals, trees, names, branches, strict=True)
        ]
        results = _collect(futures, on_done)
    finally:
        if own:
            pool.shutdown()
        for tree in trees:  # free each branch for a checkout elsewhere; keep the run folders
            with contextlib.suppress(RepoStateError):
                worktree = GitRepo(tree)
                try:
                    worktree.detach_head()
                finally:
                    worktree.close()
    for result in results:  # a goal that never started (no branch) leaves nothing to keep
        if result.status == "error" and not git.branch_exists(result.branch):
            with contextlib.suppress(RepoStateError):
                git.remove_worktree(Path(result.worktree))
    return results
