"""Starting and resuming goals: everything between the command line and the round loop.

Order matters (SPEC §11, §10): configuration and model are validated, the repository is checked,
and only then is anything created or changed: the state directory, the branch, the goal.
:func:`run` reads top to bottom in that order; the goal's creation and resumption are in
:mod:`relay.goal_start`, the goal a branch carries in :mod:`relay.branch_goal`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from relay import preflight, recovery
from relay.branch_goal import (
    check_store_against_branch,
    fetch_goal_branch,
    goal_state_on_branch,
    import_goal_state,
    record_from_goal_state,
    refuse_other_goal,
)
from relay.config import Config, deep_merge, load_config, resolve_model_spec, settings_carried
from relay.context import Prompts
from relay.errors import ConfigError, GoalStateError, RelayError
from relay.gitrepo import GitRepo
from relay.goal import GoalStatus, exit_code_for
from relay.goal_file import parse_goal_file
from relay.goal_size import start_prompts
from relay.goal_start import create_goal, limits_line, refuse_uncommitted_goal_file, resume_goal
from relay.interrupts import Interrupts
from relay.json_output import goal_json
from relay.loop import Display, LoopSetup
from relay.models.base import Model
from relay.protected import goal_state_path, protected_paths, rel_inside
from relay.run_failure import stopped_at_once, stopped_run
from relay.run_model import run_model
from relay.run_sandbox import sandbox_for, sandbox_line
from relay.runlock import lock_holder, refuse_live_run, working_tree_lock
from relay.sandbox import Sandbox, become_subreaper, protect_process
from relay.statedir import (
    Migration,
    exclude_state_dir,
    inbox_dir,
    processed_dir,
    ready_state_dir,
    state_dir_and_move,
    store_path,
)
from relay.store import GoalRecord, Store
from relay.supervisor import Counters, Stop
from relay.watch import SupplementWatcher, goal_file_to_watch
from relay.watchdog import watched_run
from relay.workers import goal_loop, worker_of
from relay.writable import check_repository

__all__ = [
    "RelayError",
    "RunOutcome",
    "RunRequest",
    "check_store_against_branch",
    "goal_json",
    "goal_state_on_branch",
    "goal_state_path",
    "limits_line",
    "lock_holder",
    "open_store",
    "parse_goal_file",
    "record_from_goal_state",
    "rel_inside",
    "resolve_model_spec",
    "run",
    "sandbox_for",
    "sandbox_line",
    "working_tree_lock",
]


@dataclass
class RunRequest:
    """What the user asked for with ``relay run``/``relay resume`` (SPEC §12).

    ``overrides`` are configuration values from flags, as nested dicts
    (:func:`relay.config.flag_overrides`). ``allow_dirty`` (``--allow-dirty``) lets a run
    start, or a goal resume, with uncommitted changes, which are committed as the user's.
    """

    repo: Path
    goal: str | None = None
    goal_file: Path | None = None
    config_path: Path | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    branch: str | None = None
    in_place: bool = False
    allow_dirty: bool = False
    resume: bool = False
    debug: bool = False


@dataclass(frozen=True)
class RunOutcome:
    """How a run ended: the goal, its final stop and the process exit code."""

    goal_id: str
    stop: Stop
    exit_code: int
    run_dir: Path
    repo_root: Path
    store_path: Path


@dataclass
class _Start:
    """What a run found and built before it changes anything (see :func:`run`)."""

    git: GitRepo
    config: Config
    state_dir: Path
    moved: Migration | None
    store: Store | None
    open_goal: GoalRecord | None
    branch_state: dict[str, Any] | None
    goal_text: str | None
    front: dict[str, Any]
    model: Model | None = None
    prompts: Prompts | None = None
    sandbox: Sandbox | None = None
    interrupted: bool = False


def open_store(git: GitRepo, config: Config, *, create: bool) -> Store | None:
    """The working tree's store (in :func:`relay.statedir.state_dir`, after the one-time move
    of an older relay's state); None when it does not exist and ``create`` is false."""
    path = store_path(ready_state_dir(git, config))
    if not path.exists() and not create:
        return None
    return Store(path)


def run(request: RunRequest, display: Display | None = None) -> RunOutcome:
    """Start a new goal or resume the open one, run it to a stop, and return the outcome.
    A second Ctrl+C/SIGTERM ends the run at once with the goal paused (reason
    ``interrupted``, resumable; exit 130/143), and its outcome is returned all the same.

    Raises:
        ConfigError, RepoStateError, GoalStateError, StoreError: before any change to the
            repository (exit code 1).
        RunStoppedError: relay's own files failed mid-run (:mod:`relay.run_failure`).
    """
    start = _find_goal(request)
    try:
        return _run_found(start, request, display)
    finally:  # a process that runs many goals (batch, compare, tests) keeps no file open
        if start.store is not None:
            start.store.close()


def _run_found(start: _Start, request: RunRequest, display: Display | None) -> RunOutcome:
    """:func:`run` once the goal is found; the store it opens is left in ``start.store``."""
    if start.store is not None:  # a file that cannot be written is refused before any change
        start.store.check_writable()
    _prepare_model(start, request)
    preflight.check_start(start.git.root, start.config, start.open_goal, start.sandbox)
    _check_repository(start, request)
    store = start.store = start.store or open_store(start.git, start.config, create=True)
    assert store is not None
    if start.branch_state is not None:
        start.open_goal = import_goal_state(start.git, store, start.branch_state)
    with working_tree_lock(start.state_dir) as lock_warning:
        goal, counters = _goal_to_run(start, store, request)
        setup = _loop_setup(start, store, goal, counters, request, display, lock_warning)
        return _drive(setup, goal)


def _find_goal(request: RunRequest) -> _Start:
    """Read the request's goal and configuration, refuse a live run, and find the open goal
    (in the store, or carried by the branch). Changes nothing but the state folder's move."""
    git = GitRepo(request.repo)
    if request.goal and request.goal_file is not None:
        raise ConfigError("give the goal either as text or with --goal-file, not both")
    goal_text = request.goal
    front: dict[str, Any] = {}
    if request.goal_file is not None:
        goal_text, front = parse_goal_file(request.goal_file)
    config = load_config(git.root, request.config_path, front, request.overrides)
    check_repository(git, config, "run")  # read-only: refused before any change
    state_dir, moved = state_dir_and_move(git, config)
    refuse_live_run(state_dir, "resume" if request.resume else "run")
    store = open_store(git, config, create=False)
    try:  # an error closes the store it opened (a process may run many goals)
        if store is not None:
            check_store_against_branch(git, store, config)
        open_goal = store.latest_goal(open_only=True) if store else None
        branch_state: dict[str, Any] | None = None
        if open_goal is None:  # the goal state a branch carries (a CI job on a fresh machine)
            fetch_goal_branch(git, request.branch, config)
            branch = request.branch or git.current_branch()
            branch_state = goal_state_on_branch(git, branch, config, store)
            if branch_state is not None:
                open_goal = record_from_goal_state(branch_state)
        if goal_text and not request.resume and open_goal is not None:
            refuse_other_goal(open_goal, goal_text, request.branch)
            goal_text = None  # the same goal again (a retried task, a second CI job): continued
        if (request.resume or not goal_text) and open_goal is None:
            raise GoalStateError(
                'no open goal to resume here; start one with relay run "GOAL" or --goal-file FILE'
            )
        if open_goal is not None:
            config = _open_goal_config(git, config, open_goal, request)
    except BaseException:
        if store is not None:
            store.close()
        raise
    return _Start(git, config, state_dir, moved, store, open_goal, branch_state, goal_text, front)


def _open_goal_config(
    git: GitRepo, config: Config, goal: GoalRecord, request: RunRequest
) -> Config:
    """The open goal's configuration: the settings it was started with but the sandbox (each
    run's configuration chooses it, SPEC §14), then today's flags; the state folder stays
    where its store is, and the goal's model applies when none is configured now."""
    carried = settings_carried(goal.overrides)
    resumed = load_config(git.root, request.config_path, carried, request.overrides)
    resumed = resumed.model_copy(update={"state_dir": config.state_dir})
    if resumed.model is None:
        resumed = resumed.model_copy(update={"model": goal.model})
    return worker_of(resumed, goal, request.overrides)


def _prepare_model(start: _Start, request: RunRequest) -> None:
    """Create the model and check the settings that need it (:func:`relay.run_model.run_model`),
    the prompts, a new goal's size and the sandbox. Raises ``ConfigError`` before any change."""
    git = start.git
    base_dir = (  # where a relative scripted: path was written
        Path.cwd()
        if "model" in request.overrides
        else (request.config_path.resolve().parent if request.config_path else git.root)
    )
    position = 0
    if start.open_goal is not None:  # where a scripted model's script goes on
        position = recovery.script_position(start.store, start.open_goal)
    start.config, start.model = run_model(
        start.config,
        start.open_goal,
        base_dir=base_dir,
        debug=request.debug,
        script_position=position,
    )
    config = start.config
    start.prompts = start_prompts(config, start.goal_text)  # a goal too large: refused
    start.sandbox = sandbox_for(git, config, start.state_dir)  # `required` without bwrap: refused


def _check_repository(start: _Start, request: RunRequest) -> None:
    """Refuse a repository relay must not touch (SPEC §11) and exclude the state folder from
    git. A crash (still active) or a second Ctrl+C (paused, reason interrupted) can leave the
    interrupted round's changes in the tree: resume commits them instead of refusing. A goal
    carried by its branch was interrupted on another machine, if at all: nothing of that is in
    this tree, so only this store's open round counts."""
    git, open_goal, store = start.git, start.open_goal, start.store
    start.interrupted = recovery.interrupted(store, open_goal, start.branch_state)
    exclude_state_dir(git, start.state_dir)
    allow_dirty = request.allow_dirty or start.interrupted
    if not allow_dirty and open_goal is not None and open_goal.goal_file:
        dirty = git.is_dirty_paths()  # the user edited the goal file while it was stopped
        allow_dirty = bool(dirty) and set(dirty) <= {open_goal.goal_file}
    if not allow_dirty and open_goal is None:
        refuse_uncommitted_goal_file(git, request.goal_file)
    git.preflight(allow_dirty=allow_dirty, in_place=request.in_place)
    if request.branch and open_goal is None:
        git.validate_branch_name(request.branch)


def _goal_to_run(start: _Start, store: Store, request: RunRequest) -> tuple[GoalRecord, Counters]:
    """Create the requested goal, or make the open one active again (under the run lock)."""
    if start.open_goal is not None:
        return resume_goal(
            start.git,
            store,
            start.open_goal,
            start.config,
            interrupted=start.interrupted,
            allow_dirty=request.allow_dirty,
        )
    assert start.goal_text is not None
    started_with = deep_merge(start.front, request.overrides)
    if "model" in started_with:
        started_with["model"] = start.config.model
    goal = create_goal(
        start.git,
        store,
        start.config,
        start.goal_text,
        goal_file=request.goal_file,
        branch=request.branch,
        in_place=request.in_place,
        started_with=started_with,
    )
    return goal, Counters()


def _loop_setup(
    start: _Start,
    store: Store,
    goal: GoalRecord,
    counters: Counters,
    request: RunRequest,
    display: Display | None,
    lock_warning: str | None,
) -> LoopSetup:
    """Open a run of ``goal`` (its row, run folder and transcript; the process protected;
    the run lock's and the sandbox's warnings recorded) and build what its loop needs."""
    git, config, sandbox = start.git, start.config, start.sandbox
    assert sandbox is not None and start.model is not None and start.prompts is not None
    protect_process()  # no other process of the user reads relay's keys through /proc
    if not sandbox.active:
        become_subreaper()  # a model process that escapes its reaper stays relay's child
    store.save_goal(goal.id, None, sandbox=sandbox.mode)
    run_id = store.start_run(goal.id, os.getpid())
    run_dir = start.state_dir / "runs" / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "transcript.jsonl").touch()
    if lock_warning:
        store.add_event(goal.id, "warning", lock_warning, run_id=run_id)
    if sandbox.warning():
        store.add_event(goal.id, "sandbox_off", sandbox.warning() or "", run_id=run_id)
    if start.moved is not None:  # the one-time move of an older relay's state
        store.add_event(goal.id, "state_moved", start.moved.notice, run_id=run_id)
    return LoopSetup(
        store=store,
        git=git,
        model=start.model,
        config=config,
        prompts=start.prompts,
        goal_id=goal.id,
        run_id=run_id,
        run_dir=run_dir,
        progress_rel=Path(config.progress.path).as_posix(),
        protected_paths=protected_paths(
            git.root,
            config,
            files=(request.config_path, request.goal_file),
            goal_file=goal.goal_file,
        ),
        counters=counters,
        base_elapsed_s=goal.elapsed_s,
        display=display or Display(),
        interrupts=Interrupts(),
        watcher=SupplementWatcher(
            inbox_dir(start.state_dir),
            processed_dir(start.state_dir),
            goal_file_to_watch(git.root, goal.goal_file, request.goal_file),
            goal.goal_file_digest,
        ),
        sandbox=sandbox,
        pending_claim=recovery.pending_claim(store, goal.id),
    )


def _drive(setup: LoopSetup, goal: GoalRecord) -> RunOutcome:
    """Run the goal's loop to a stop with the signal handlers and the supplement watcher on;
    record the run's end. A second Ctrl+C/SIGTERM leaves at once, the goal paused."""
    store, run_id, interrupts = setup.store, setup.run_id, setup.interrupts
    store.add_event(goal.id, "run_started", f"run {run_id} (pid {os.getpid()})", run_id=run_id)
    setup.display.run_started(goal.id, goal.branch, limits_line(setup.config))
    setup.display.event("sandbox", sandbox_line(setup.sandbox))
    assert setup.watcher is not None
    stop: Stop | None = None
    with interrupts.installed(), watched_run(setup):  # the watchdog: docs/sandbox.md
        setup.watcher.start()
        try:
            loop = goal_loop(setup)
            store.on_written_back = loop.events.tamper  # a deleted database (SPEC §14)
            stop = loop.run()
            interrupts.loop_ended()  # a second signal from here on is let go: outputs follow
        except KeyboardInterrupt:  # a second Ctrl+C/SIGTERM in the loop: out at once, resumable
            stop = stop or stopped_at_once(setup, goal.id)
        except (RelayError, OSError) as exc:  # relay's own files failed: paused, work kept
            raise stopped_run(setup, goal.id, exc) from None
        finally:
            setup.watcher.stop()
    code = exit_code_for(stop.status)
    if stop.status == GoalStatus.PAUSED:  # by Ctrl+C, SIGTERM (143) or relay pause
        code = interrupts.exit_code
    store.end_run(run_id, str(stop.status), code)
    return RunOutcome(goal.id, stop, code, setup.run_dir, setup.git.root, store.path)
