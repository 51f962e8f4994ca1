"""``relay compare``: the same goal in relay mode and in session mode, side by side (SPEC §3).

Both modes start from the same base commit, each in a git worktree of its own on a branch of
its own (``relay/compare-<id>-relay``, ``relay/compare-<id>-session``; with ``--repeat N`` a
``-<k>`` suffix per repetition), with the same model, configuration and limits. Each run is an
ordinary goal run (:func:`relay.runner.run` with ``mode`` overridden) in its worktree, so it has
its own state directory, store, transcript and run lock; a scripted model's script is read
afresh by every run. Runs go one after another, or at the same time in processes of their own
with ``parallel``.

Every figure of the comparison is read back from the runs' stores afterwards (never from
what the runs printed), and written as ``compare.json`` and ``compare.md`` into the output
folder (default ``compare/<id>/`` in the state folder of the main worktree, beside the
worktrees: ``.git/relay/compare/<id>/``, see :mod:`relay.statedir`).
"""

from __future__ import annotations

import json
import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from relay import runner
from relay.baseline import relay_owned
from relay.compare_result import (
    COMPARE_HTML,
    COMPARE_JSON,
    COMPARE_MD,
    MODES,
    NUMERIC_FIELDS,
    CompareResult,
    RunRow,
    load_compare,
    mode_means,
)
from relay.compare_run import RunDone, RunSpec, diff_shortstat, mapped, read_row, run_one
from relay.compare_table import TABLE_ROWS, compare_markdown, format_cell, markdown_table, table
from relay.config import Config, load_config
from relay.errors import ConfigError, RelayError
from relay.gitrepo import GitRepo
from relay.goal_file import parse_goal_file
from relay.interrupts import INTERRUPTED_EXIT_CODES
from relay.statedir import exclude_state_dir, ready_state_dir, state_dir, store_path
from relay.store import new_id
from relay.writable import check_output, check_repository

__all__ = [
    "COMPARE_HTML",
    "COMPARE_JSON",
    "COMPARE_MD",
    "INTERRUPTED_EXIT_CODES",
    "MODES",
    "NUMERIC_FIELDS",
    "TABLE_ROWS",
    "CompareRequest",
    "CompareResult",
    "OutputsNotWritten",
    "RunRow",
    "compare_markdown",
    "diff_shortstat",
    "format_cell",
    "load_compare",
    "markdown_table",
    "mode_means",
    "read_row",
    "run_compare",
    "table",
    "write_outputs",
]


class OutputsNotWritten(RelayError):
    """The comparison ran, but ``compare.json``/``compare.md`` could not be written (a full
    disk): the message names the path; ``result`` holds the comparison, to be shown."""

    def __init__(self, message: str, result: CompareResult) -> None:
        super().__init__(message)
        self.result = result


LIMIT_KEYS = (
    "max_rounds_total",
    "max_no_progress",
    "max_steps_per_round",
    "token_budget",
    "time_budget",
    "cost_budget",
)
"""The limits a comparison reports (``compare.json``'s ``limits``)."""


@dataclass
class CompareRequest:
    """What ``relay compare`` was asked for.

    Attributes:
        repo: a folder inside the repository to compare in (its HEAD is the base commit).
        goal: the goal text, or None with ``goal_file``.
        goal_file: a Markdown goal file (front matter allowed), or None.
        config_path: ``--config``, read above the ``relay.yaml`` of each worktree.
        overrides: configuration from flags as nested dicts (model, limits, …); ``mode`` (or,
            with ``workers``, ``worker``) is set per run and must not be given.
        workers: ``--worker`` given two or more times: compare these workers (each in the
            configured mode) instead of the two modes (SPEC §15).
        repeat: runs per mode or worker (≥ 1).
        parallel: run all runs at the same time, each in a process of its own.
        out_dir: where ``compare.json``/``compare.md`` go; default beside the worktrees.
    """

    repo: Path
    goal: str | None = None
    goal_file: Path | None = None
    config_path: Path | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    workers: tuple[str, ...] = ()
    repeat: int = 1
    parallel: bool = False
    out_dir: Path | None = None


def _check_request(request: CompareRequest) -> None:
    """Usage errors of ``relay compare``, before anything is read. Raises ``ConfigError``."""
    if request.repeat < 1:
        raise ConfigError(f"--repeat {request.repeat}: give a positive number of runs per mode")
    if "mode" in request.overrides and not request.workers:
        raise ConfigError("relay compare runs both modes; do not give --mode")
    if request.workers and (len(request.workers) < 2 or len(set(request.workers)) < 2):
        given = " ".join(f"--worker {w}" for w in request.workers)
        raise ConfigError(f"{given}: give two or more different workers to compare them")
    if request.goal and request.goal_file is not None:
        raise ConfigError("give the goal either as text or with --goal-file, not both")
    if not (request.goal and request.goal.strip()) and request.goal_file is None:
        raise ConfigError('relay compare needs a goal: relay compare "GOAL" or --goal-file FILE')
    if request.out_dir is not None:  # refused now, not after running every goal
        check_output(request.out_dir, "--out")


@dataclass
class _Comparison:
    """One comparison being run: the repository, the base commit, where the worktrees go,
    and one spec and one row per run (in the order of the runs)."""

    git: GitRepo
    config: Config
    base: str
    state: Path
    folder: Path
    exclude: list[str]
    specs: list[RunSpec] = field(default_factory=list)
    rows: list[RunRow] = field(default_factory=list)
    on_run_done: Callable[[RunRow], None] | None = None

    def plan(
        self, request: CompareRequest, compare_id: str, show_progress: bool, verbose: bool = False
    ) -> None:
        """One run per mode (or worker) and repetition: its branch, worktree and request."""
        root = self.git.root
        key = "worker" if request.workers else "mode"
        for arm in request.workers or MODES:
            for k in range(1, request.repeat + 1):
                suffix = f"-{k}" if request.repeat > 1 else ""
                label = f"{arm} #{k}" if request.repeat > 1 else arm
                branch = f"relay/compare-{compare_id}-{arm}{suffix}"
                worktree = self.folder / f"{arm}{suffix}"
                run_request = runner.RunRequest(
                    repo=worktree,
                    goal=request.goal,
                    goal_file=mapped(root, worktree, request.goal_file),
                    config_path=mapped(root, worktree, request.config_path),
                    overrides={**request.overrides, key: arm},
                    in_place=True,
                )
                spec = RunSpec(arm, k, label, branch, worktree, run_request, show_progress, verbose)
                self.specs.append(spec)
                mode = self.config.mode if request.workers else arm
                row = RunRow(mode, k, label, branch, str(worktree), "", arm=arm)
                self.rows.append(row)

    def add_worktree(self, i: int) -> None:
        """The worktree and branch of run ``i``, from the base commit."""
        spec = self.specs[i]
        self.git.add_worktree(spec.worktree, self.base, branch=spec.branch)
        tree = GitRepo(spec.worktree)
        try:  # a linked worktree keeps its own store (in its own git directory)
            self.rows[i].store_path = str(store_path(state_dir(tree, self.config)))
        finally:
            tree.close()

    def finished(self, i: int, done: RunDone) -> None:
        """Read run ``i``'s figures back from its store and git."""
        read_row(self.rows[i], done, self.git.root, self.base, self.exclude)
        if self.on_run_done is not None:
            self.on_run_done(self.rows[i])

    def run_parallel(self) -> None:
        """Every run at once, each in a process of its own."""
        for i in range(len(self.specs)):
            self.add_worktree(i)
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=len(self.specs), mp_context=context) as pool:
            futures = [pool.submit(run_one, spec) for spec in self.specs]
            for i, future in enumerate(futures):
                while True:
                    try:
                        done = future.result()
                    except KeyboardInterrupt:  # the workers got it too: they pause; wait
                        continue
                    except Exception as exc:  # a worker that died (killed, out of memory)
                        done = RunDone(None, None, None, None, f"worker failed: {exc}")
                    break
                self.finished(i, done)

    def run_serial(self) -> None:
        """One run after another; after an interrupted run, no further run starts."""
        interrupted = False
        for i, spec in enumerate(self.specs):
            if interrupted:
                self.rows[i].error = "not run: the comparison was interrupted"
                continue
            self.add_worktree(i)
            done = run_one(spec)
            self.finished(i, done)
            interrupted = done.exit_code in INTERRUPTED_EXIT_CODES


def run_compare(
    request: CompareRequest,
    *,
    show_progress: bool = True,
    verbose: bool = False,
    on_run_done: Callable[[RunRow], None] | None = None,
) -> CompareResult:
    """Run the comparison and write ``compare.json`` and ``compare.md``.

    Checks the configuration and the repository (clean tree, a commit) before creating
    anything; then adds one worktree and branch per run from HEAD, runs the goal in each mode
    (``request.repeat`` times), reads every figure back from the stores and writes the outputs.

    Args:
        request: what to compare.
        show_progress: print a line per round of each run to stderr.
        verbose: with ``show_progress``, also a line per tool call of each run.
        on_run_done: called with each finished run's row, in the order of the runs.

    Returns:
        The result; its ``out_dir`` holds ``compare.json`` and ``compare.md``.

    Raises:
        ConfigError, RepoStateError: before anything was created (exit code 1).
        OutputsNotWritten: after the runs, when the files could not be written.
    """
    _check_request(request)
    git = GitRepo(request.repo)
    goal_text = request.goal
    front: dict[str, Any] = {}
    if request.goal_file is not None:
        goal_text, front = parse_goal_file(request.goal_file)
    config = load_config(git.root, request.config_path, front, request.overrides)
    for worker in request.workers:  # each worker's settings, before anything is created
        load_config(git.root, request.config_path, front, {**request.overrides, "worker": worker})
    if config.model is None:
        from relay.config_layers import no_model_message

        raise ConfigError(no_model_message())
    check_repository(git, config, "compare")
    git.preflight(offer_allow_dirty=False)  # compare has no --allow-dirty
    compare_id = new_id()[:8]
    state = ready_state_dir(git, config)
    exclude_state_dir(git, state)
    comparison = _Comparison(
        git,
        config,
        git.head_sha(),
        state,
        state / "compare" / compare_id,
        list(relay_owned(Path(config.progress.path).as_posix())),
        on_run_done=on_run_done,
    )
    comparison.plan(request, compare_id, show_progress, verbose)
    comparison.folder.mkdir(parents=True, exist_ok=True)
    if request.parallel and len(comparison.specs) > 1:
        comparison.run_parallel()
    else:
        comparison.run_serial()
    result = CompareResult(
        compare_id=compare_id,
        repo=str(git.root),
        base_commit=comparison.base,
        goal=(goal_text or "").strip(),
        model=config.model,
        limits={k: v for k, v in config.limits.model_dump().items() if k in LIMIT_KEYS},
        out_dir=str((request.out_dir or comparison.folder).resolve()),
        created_at=time.time(),
        parallel=request.parallel,
        repeat=request.repeat,
        runs=comparison.rows,
        compared="worker" if request.workers else "mode",
        arms=list(request.workers or MODES),
    )
    try:
        write_outputs(result)
    except OSError as exc:
        where = exc.filename or result.out_dir
        raise OutputsNotWritten(
            f"cannot write {where} ({exc.strerror or exc}); the comparison's runs are kept "
            "on their branches and in their worktrees",
            result,
        ) from None
    return result


def write_outputs(result: CompareResult) -> dict[str, Path]:
    """Write ``compare.json`` and ``compare.md`` into ``result.out_dir``; returns their paths
    by kind (``json``, ``markdown``)."""
    out = Path(result.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / COMPARE_JSON, "markdown": out / COMPARE_MD}
    paths["json"].write_text(
        json.dumps(result.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    paths["markdown"].write_text(compare_markdown(result), encoding="utf-8")
    return paths
