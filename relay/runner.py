"""Starting and resuming goals: everything between the command line and the round loop.

Order matters (SPEC §11, §10): configuration and model are validated, the repository is checked,
and only then is anything created or changed: the state directory, the branch, the goal.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from relay import handover
from relay.config import Config, deep_merge, load_config
from relay.context import Prompts
from relay.controls import lock_pids, refuse_from_goal_shell
from relay.errors import (
    ConfigError,
    GoalStateError,
    RelayError,
    RepoStateError,
    UnreadableGoalError,
)
from relay.gitrepo import GitRepo, goal_slug
from relay.goal import CLOSED_STATUSES, RESUMABLE_STATUSES, GoalStatus, exit_code_for
from relay.integrity import branch_findings
from relay.interrupts import Interrupts
from relay.loop import Display, GoalLoop, LoopSetup
from relay.models.registry import create_model
from relay.models.scripted import ScriptedModel
from relay.prices import price_for
from relay.sandbox import Sandbox, become_subreaper, protect_process, resolve_sandbox
from relay.statedir import (
    Migration,
    exclude_state_dir,
    inbox_dir,
    migrate_legacy_state,
    processed_dir,
    ready_state_dir,
    store_path,
)
from relay.store import GoalRecord, Store
from relay.supervisor import Counters, Stop
from relay.watch import SupplementWatcher, file_digest


@dataclass
class RunRequest:
    """What the user asked for with ``relay run``/``relay resume`` (SPEC §12).

    ``overrides`` are configuration values from flags, as nested dicts.
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


def parse_goal_file(path: Path) -> tuple[str, dict[str, Any]]:
    """Read a goal file: optional YAML front matter between ``---`` lines, then the goal text.

    Returns ``(goal_text, front_matter)``. Raises ``ConfigError`` when the file is unreadable,
    the front matter is not a YAML mapping, or the goal text is empty.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the goal file {path}: {exc}") from None
    front: dict[str, Any] = {}
    lines = text.splitlines(keepends=True)
    if lines and lines[0].strip() == "---":
        end = next((i for i in range(1, len(lines)) if lines[i].strip() in {"---", "..."}), None)
        if end is None:
            raise ConfigError(f"{path}: the front matter starts with --- but never ends")
        try:
            loaded = yaml.safe_load("".join(lines[1:end]))
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: the front matter is not valid YAML: {exc}") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"{path}: the front matter must be a mapping of configuration keys")
        front = loaded or {}
        text = "".join(lines[end + 1 :])
    if not text.strip():
        raise ConfigError(f"{path}: the goal text (after the front matter) is empty")
    return text.strip() + "\n", front


def rel_inside(root: Path, path: Path | None) -> str | None:
    """``path`` relative to ``root`` (POSIX), or None when it is outside or None."""
    if path is None:
        return None
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return None


def lock_holder(state_dir: Path) -> int | None:
    """PID of the live process that holds the working tree's run lock, or None.

    The kernel's record (``/proc/locks``) wins over the PID written into the lock file, which
    anything that can write the file could change."""
    path = state_dir / "run.lock"
    if not path.exists():
        return None
    with path.open("a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held_by = lock_pids(path)
            if len(held_by) == 1:
                return held_by.pop()
            fh.seek(0)
            text = fh.read().strip()
            return int(text) if text.isdigit() else None
        fcntl.flock(fh, fcntl.LOCK_UN)
    return None


@contextlib.contextmanager
def working_tree_lock(state_dir: Path) -> Iterator[str | None]:
    """Hold the one-run-per-working-tree lock (SPEC §10).

    Yields a warning when the lock file named a process that died without releasing it (taken
    over). Raises ``GoalStateError`` naming the holder's PID when a live run holds it."""
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / "run.lock"
    fh = path.open("a+")
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "unknown"
            raise GoalStateError(
                f"another relay run (pid {holder}) is working in this tree; wait for it, "
                "or stop it with `relay pause`"
            ) from None
        fh.seek(0)
        previous = fh.read().strip()
        warning = None
        if previous.isdigit() and int(previous) != os.getpid():
            warning = f"took over the run lock of process {previous}, which is no longer running"
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        yield warning
    finally:
        with contextlib.suppress(OSError):
            fh.seek(0)
            fh.truncate()
        with contextlib.suppress(OSError):
            fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()


def open_store(git: GitRepo, config: Config, *, create: bool) -> Store | None:
    """The working tree's store (in :func:`relay.statedir.state_dir`, after the one-time move
    of an older relay's state); None when it does not exist and ``create`` is false."""
    path = store_path(ready_state_dir(git, config))
    if not path.exists() and not create:
        return None
    return Store(path)


def run(request: RunRequest, display: Display | None = None) -> RunOutcome:
    """Start a new goal or resume the open one, run it to a stop, and return the outcome.

    Raises:
        ConfigError, RepoStateError, GoalStateError, StoreError: before any change to the
            repository (exit code 1).
    """
    git = GitRepo(request.repo)
    if request.goal and request.goal_file is not None:
        raise ConfigError("give the goal either as text or with --goal-file, not both")
    goal_text = request.goal
    front: dict[str, Any] = {}
    if request.goal_file is not None:
        goal_text, front = parse_goal_file(request.goal_file)
    config = load_config(git.root, request.config_path, front, request.overrides)
    state_dir_setting = config.state_dir
    state_dir, moved = _state_folder(git, config)
    holder = lock_holder(state_dir)
    refuse_from_goal_shell(state_dir / "run.lock", holder, "resume" if request.resume else "run")
    if holder is not None:
        raise GoalStateError(
            f"another relay run (pid {holder}) is working in this tree; wait for it, "
            "follow it with `relay log -f`, or stop it with `relay pause`"
        )
    store = open_store(git, config, create=False)
    if store is not None:
        check_store_against_branch(git, store, config)
    open_goal = store.latest_goal(open_only=True) if store else None
    carried: dict[str, Any] | None = None
    if open_goal is None:  # a goal the branch carries (a CI job on a fresh machine)
        carried = carried_goal(git, request.branch or git.current_branch(), config, store)
        if carried is not None:
            open_goal = record_from_state(carried)
    if goal_text and not request.resume and open_goal is not None:
        raise GoalStateError(
            f"goal {open_goal.id} is still open ({open_goal.status}, branch "
            f"{open_goal.branch}): `relay resume` continues it, `relay clear` drops it"
        )
    if (request.resume or not goal_text) and open_goal is None:
        raise GoalStateError(
            'no open goal to resume here; start one with relay run "GOAL" or --goal-file FILE'
        )
    if open_goal is not None:  # the settings it was started with, then today's flags
        config = load_config(git.root, request.config_path, open_goal.overrides, request.overrides)
        config = config.model_copy(update={"state_dir": state_dir_setting})  # where its store is
        if config.model is None:
            config = config.model_copy(update={"model": open_goal.model})
    model_base = (
        Path.cwd()
        if "model" in request.overrides
        else (request.config_path.resolve().parent if request.config_path else git.root)
    )
    if config.model is None:
        raise ConfigError(
            "no model is configured: pass --model PROVIDER:MODEL (e.g. anthropic:claude-sonnet-5, "
            "or scripted:FILE.yaml to run offline) or set model in relay.yaml"
        )
    config = config.model_copy(update={"model": resolve_model_spec(config.model, model_base)})
    model = create_model(
        config.model, base_url=config.base_url, base_dir=model_base, debug=request.debug
    )
    if (
        isinstance(model, ScriptedModel)
        and open_goal is not None
        and config.model == open_goal.model
    ):
        model.resume_at(open_goal.model_calls)  # the script goes on where the goal left it
    if (
        config.guard.enabled
        and config.guard.drift == "embedding"
        and "drift" in config.guard.detectors
    ):
        from relay import guard_embedding

        guard_embedding.ensure_available()  # names pip install 'goal-relay[embeddings]'
    if config.limits.cost_budget is not None and price_for(model.name, config.prices) is None:
        raise ConfigError(
            f"limits.cost_budget = {config.limits.cost_budget} needs the price of model "
            f"{model.name!r}, which relay does not know: add it under prices, e.g. "
            f"prices: {{{model.name.partition(':')[2]}: {{input: 3.0, cache_write: 3.75, "
            "cached_input: 0.3, output: 15.0}} (USD per million tokens)"
        )
    prompts = Prompts(Path(config.prompts_dir) if config.prompts_dir else None)
    sandbox = sandbox_for(git, config, state_dir)  # `required` without bwrap: refused here
    # A crash (still active) or a second Ctrl+C (paused, reason interrupted) can leave the
    # interrupted round's changes in the tree: resume commits them instead of refusing.
    # A goal carried by its branch was interrupted on another machine, if at all: nothing
    # of that is in this tree, so only this store's open round counts.
    interrupted = open_goal is not None and (
        (open_goal.status == GoalStatus.ACTIVE and carried is None)
        or (store is not None and store.open_round(open_goal.id) is not None)
    )
    exclude_state_dir(git, state_dir)
    allow_dirty = request.allow_dirty or interrupted
    if not allow_dirty and open_goal is not None and open_goal.goal_file:
        dirty = git.is_dirty_paths()  # the user edited the goal file while it was stopped
        allow_dirty = bool(dirty) and set(dirty) <= {open_goal.goal_file}
    git.preflight(allow_dirty=allow_dirty, in_place=request.in_place)
    if request.branch and open_goal is None:
        git.validate_branch_name(request.branch)
    store = store or open_store(git, config, create=True)
    assert store is not None
    if carried is not None:
        branch = carried["goal"]["branch"]
        if branch and not git.branch_exists(branch):
            git.track_branch(branch)
        open_goal = handover.import_goal(store, carried)
    with working_tree_lock(state_dir) as lock_warning:
        if open_goal is None:
            assert goal_text is not None
            started_with = deep_merge(front, request.overrides)
            if "model" in started_with:
                started_with["model"] = config.model
            goal = _create_goal(git, store, config, goal_text, request, started_with)
            counters = Counters()
        else:
            goal, counters = _resume_goal(git, store, open_goal, interrupted, config)
        protect_process()  # no other process of the user reads relay's keys through /proc
        if not sandbox.active:
            become_subreaper()  # a model process that escapes its reaper stays relay's child
        store.update_goal(goal.id, None, sandbox=sandbox.mode)
        run_id = store.start_run(goal.id, os.getpid())
        run_dir = state_dir / "runs" / run_id
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "transcript.jsonl").touch()
        protected = [config.progress.path, goal_state_path(config), "relay.yaml"]
        for extra in (request.config_path, request.goal_file):
            rel = rel_inside(git.root, extra)
            if rel:
                protected.append(rel)
        if goal.goal_file:
            protected.append(goal.goal_file)
        protected += config.tools.protected_paths
        if lock_warning:
            store.add_event(goal.id, "warning", lock_warning, run_id=run_id)
        if sandbox.warning():
            store.add_event(goal.id, "sandbox_off", sandbox.warning() or "", run_id=run_id)
        _record_move(store, goal.id, run_id, moved)
        goal_file_path = git.root / goal.goal_file if goal.goal_file else None
        watcher = SupplementWatcher(
            inbox_dir(state_dir),
            processed_dir(state_dir),
            goal_file_path,
            goal.goal_file_digest,
        )
        interrupts = Interrupts()
        setup = LoopSetup(
            store=store,
            git=git,
            model=model,
            config=config,
            prompts=prompts,
            goal_id=goal.id,
            run_id=run_id,
            run_dir=run_dir,
            progress_rel=Path(config.progress.path).as_posix(),
            protected_paths=tuple(dict.fromkeys(protected)),
            counters=counters,
            base_elapsed_s=goal.elapsed_s,
            display=display or Display(),
            interrupts=interrupts,
            watcher=watcher,
            sandbox=sandbox,
        )
        store.add_event(goal.id, "run_started", f"run {run_id} (pid {os.getpid()})", run_id=run_id)
        setup.display.run_started(goal.id, goal.branch, limits_line(config))
        setup.display.event("sandbox", sandbox_line(sandbox))
        with interrupts.installed():
            watcher.start()
            try:
                stop = GoalLoop(setup).run()
            except KeyboardInterrupt:  # a second Ctrl+C/SIGTERM: out at once, resumable
                _mark_paused(store, goal.id, "interrupted twice; stopped at once")
                store.end_run(run_id, "paused", interrupts.exit_code)
                raise SystemExit(interrupts.exit_code) from None
            finally:
                watcher.stop()
        code = exit_code_for(stop.status)
        if stop.status in (GoalStatus.PAUSED, GoalStatus.CLEARED):  # stopped by the user
            code = interrupts.exit_code
        store.end_run(run_id, str(stop.status), code)
        return RunOutcome(goal.id, stop, code, run_dir, git.root, store.path)


def check_store_against_branch(git: GitRepo, store: Store, config: Config) -> list[str]:
    """Restore the latest goal's frozen fields and final status from the goal state relay
    committed on its branch when the store disagrees (a change no relay command made, SPEC
    §14); each finding is recorded as ``tamper``. Returns the findings."""
    try:
        latest = store.latest_goal()
    except UnreadableGoalError as exc:
        committed = _committed_goal(git, git.current_branch(), config)
        if committed is None or committed.get("id") != exc.goal_id:
            raise
        frozen = {k: committed[k] for k in ("deliverables", "limits", "overrides")}
        store.restore_goal(exc.goal_id, None, **frozen)
        store.add_event(exc.goal_id, "tamper", f"{exc}; restored from the branch")
        latest = store.latest_goal()
    if latest is None or not latest.branch:
        return []
    committed = _committed_goal(git, latest.branch, config)
    if committed is None or committed.get("id") != latest.id:
        return []
    restore, findings = branch_findings(latest, committed)
    if findings:
        store.restore_goal(latest.id, None, **restore)
        for detail in findings:
            store.add_event(latest.id, "tamper", detail, weight=0)
    return findings


def _committed_goal(git: GitRepo, branch: str | None, config: Config) -> dict[str, Any] | None:
    """The ``goal`` object of the goal state committed at ``branch``'s head, if readable."""
    ref = git.branch_ref(branch) if branch else None
    text = git.file_at(ref, goal_state_path(config)) if ref else None
    if text is None:
        return None
    try:
        goal = handover.loads(text, f"{goal_state_path(config)} on {branch}")["goal"]
    except (RelayError, KeyError, TypeError):
        return None
    return goal if isinstance(goal, dict) else None


def sandbox_for(git: GitRepo, config: Config, state_dir: Path) -> Sandbox:
    """The sandbox of this run (SPEC §14): relay's state folders hidden, the git directories
    read-only. Raises ``SandboxUnavailable`` (exit 1) for ``required`` without bubblewrap."""
    git_dir, common = git.git_dir, git.common_dir
    cfg = config.sandbox
    return resolve_sandbox(
        cfg.mode,
        network=cfg.network,
        writable_paths=cfg.writable_paths,
        hidden_paths=cfg.hidden_paths,
        env_names=cfg.env,
        state_dirs=dict.fromkeys([state_dir, git_dir / "relay", common / "relay"]),
        git_dirs=dict.fromkeys([git_dir, common]),
    )


def sandbox_line(sandbox: Sandbox) -> str:
    """How the model's commands run, as printed when a run starts."""
    if sandbox.active:
        return (
            f"bubblewrap ({sandbox.bwrap}); network {sandbox.network}; .git, relay's files "
            "and state out of the model's reach"
        )
    return f"OFF - {sandbox.warning()}"


def _state_folder(git: GitRepo, config: Config) -> tuple[Path, Migration | None]:
    """The state folder, after the one-time move of an older relay's state (noticed on
    stderr, and returned for the goal's events). Raises GoalStateError, StoreError."""
    moved = migrate_legacy_state(git, config)
    if moved is not None:
        print(f"note: {moved.notice}", file=sys.stderr, flush=True)
    return ready_state_dir(git, config), moved


def _record_move(store: Store, goal_id: str, run_id: str, moved: Migration | None) -> None:
    """The one-time move of an older relay's state, as an event of the goal it served."""
    if moved is not None:
        store.add_event(goal_id, "state_moved", moved.notice, run_id=run_id)


def goal_state_path(config: Config) -> str:
    """Repo-relative path of the committed goal state (beside the progress file)."""
    return (Path(config.progress.path).parent / "goal.json").as_posix()


def carried_goal(
    git: GitRepo, branch: str | None, config: Config, store: Store | None
) -> dict[str, Any] | None:
    """The open goal that ``branch`` (local, or the remote-tracking one) carries in its goal
    state file, when this machine's store does not know it; None otherwise (SPEC §6, §11)."""
    if not branch:
        return None
    ref = git.branch_ref(branch)
    if ref is None:
        return None
    path = goal_state_path(config)
    text = git.file_at(ref, path)
    if text is None:
        return None
    state = handover.loads(text, f"{path} on branch {branch}")
    goal = state["goal"]
    rounds = state.get("rounds") or []
    if rounds and not rounds[-1].get("commit_sha"):  # the commit that holds this very file
        rounds[-1]["commit_sha"] = git.resolve(ref)
    if goal.get("status") in {s.value for s in CLOSED_STATUSES}:
        return None
    if store is not None:
        try:
            store.goal(goal["id"])
            return None  # known here: the store is the authority
        except GoalStateError:
            pass
    return state


def record_from_state(state: dict[str, Any]) -> GoalRecord:
    """A goal record built from a carried state (before it is imported into the store)."""
    g = dict(state["goal"])
    g.setdefault("progress_text", None)
    g.setdefault("updated_at", g.get("created_at") or time.time())
    g.setdefault("sandbox", "off")
    fields = {f.name for f in dataclasses.fields(GoalRecord)} - {"supplements"}
    record = GoalRecord(**{name: g.get(name) for name in fields})
    record.supplements = list(state.get("supplements", []))
    return record


def resolve_model_spec(spec: str, base: Path) -> str:
    """``scripted:`` with a relative path becomes absolute (against ``base``), so that the
    goal's stored model works from any folder and on resume; other specs are unchanged."""
    provider, _, rest = spec.partition(":")
    if provider == "scripted" and rest and not Path(rest).is_absolute():
        return f"scripted:{(base / rest).resolve()}"
    return spec


def _mark_paused(store: Store, goal_id: str, message: str) -> None:
    with contextlib.suppress(GoalStateError):
        store.update_goal(goal_id, "active", status="paused", reason="interrupted", message=message)


def limits_line(config: Config) -> str:
    """The effective limits of a run, as printed when it starts (SPEC §7.2)."""
    lim = config.limits
    parts = [
        f"{lim.max_rounds_total} rounds in total",
        f"{lim.max_rounds_without_progress} without progress",
        f"blocked accepted at report {lim.blocked_accept_at}",
        f"{lim.max_steps_per_round} steps per round",
    ]
    if lim.token_budget:
        parts.append(f"token budget {lim.token_budget}")
    if lim.time_budget:
        parts.append(f"time budget {lim.time_budget:.0f} s")
    if lim.cost_budget:
        parts.append(f"cost budget ${lim.cost_budget:.2f}")
    return ", ".join(parts)


def _create_goal(
    git: GitRepo,
    store: Store,
    config: Config,
    goal_text: str,
    request: RunRequest,
    started_with: dict[str, Any],
) -> GoalRecord:
    base = git.head_sha()
    if request.in_place:
        branch = git.current_branch()
        if branch is None:
            raise RepoStateError("HEAD is detached; --in-place needs a branch")
    elif request.branch:
        branch = request.branch
        ref = git.branch_ref(branch)
        if ref is not None and ref != branch:  # only on the remote: build on it
            git.track_branch(branch)
        if ref is not None:
            git.checkout(branch)
            base = git.head_sha()
        else:
            git.create_branch(branch)
    else:
        branch = git.unique_branch(config.git.branch_prefix + goal_slug(goal_text))
        git.create_branch(branch)
    if git.is_dirty_paths():  # --allow-dirty: the user's work is not the agent's change
        base = git.commit_all(
            "relay: uncommitted changes carried into the goal",
            body="Committed by relay run --allow-dirty before the goal started.",
            author_name=config.git.author_name,
            author_email=config.git.author_email,
        )
    goal_file = rel_inside(git.root, request.goal_file) if request.goal_file else None
    goal = store.create_goal(
        text=goal_text,
        goal_file=goal_file,
        branch=branch,
        base_commit=base,
        mode=config.mode,
        model=config.model,
        deliverables=[d.model_dump(exclude_none=True) for d in config.deliverables],
        limits=config.limits.model_dump(),
        overrides=started_with,
        goal_file_digest=file_digest(git.root / goal_file) if goal_file else None,
    )
    store.add_event(
        goal.id,
        "goal_started",
        f"branch {branch}, base {base[:7]}, limits: {limits_line(config)}",
    )
    return goal


def _resume_goal(
    git: GitRepo, store: Store, goal: GoalRecord, interrupted: bool, config: Config
) -> tuple[GoalRecord, Counters]:
    """Make the open goal active again (SPEC §10). An interrupted round (a crash, a second
    Ctrl+C) is closed first: its leftovers are committed as ``round N (interrupted)`` and it
    counts as a round. A user's resume of a stopped goal restarts the round counts."""
    if goal.status not in RESUMABLE_STATUSES or goal.status in CLOSED_STATUSES:
        raise GoalStateError(f"goal {goal.id} is {goal.status} and cannot be resumed")
    if goal.branch and git.current_branch() != goal.branch:
        if not git.branch_exists(goal.branch):
            raise RepoStateError(
                f"the goal's branch {goal.branch} no longer exists; `relay clear` drops the goal"
            )
        git.checkout(goal.branch)
    counters = Counters(
        rounds=goal.rounds,
        counted_rounds=goal.counted_rounds,
        no_progress_streak=goal.no_progress_streak,
        blocked_reports=goal.blocked_reports,
        auto_replies=goal.auto_replies,
    )
    if interrupted:
        n = goal.rounds + 1
        sha = None
        if git.is_dirty_paths():
            sha = git.commit_all(
                f"relay: round {n} (interrupted)",
                body="The run stopped in this round; these are the changes it left.",
                trailers={"Relay-Goal": goal.id, "Relay-Round": str(n)},
                author_name=config.git.author_name,
                author_email=config.git.author_email,
            )
        if store.open_round(goal.id) == n:
            store.end_round(
                goal.id,
                n,
                commit_sha=sha,
                end_reason="interrupted",
                handoff="(interrupted: the run stopped during this round)",
                handoff_auto=1,
            )
            counters = replace(counters, rounds=n, counted_rounds=counters.counted_rounds + 1)
            store.update_goal(
                goal.id, goal.status, rounds=n, counted_rounds=counters.counted_rounds
            )
        store.add_event(goal.id, "recovered", f"round {n} was interrupted; continuing")
    fields: dict[str, Any] = {"status": "active", "reason": None, "message": None}
    if goal.status != GoalStatus.ACTIVE:  # the user resumes a stopped goal
        counters = counters.restarted()
        fields.update(
            question=None,
            counted_rounds=0,
            no_progress_streak=0,
            blocked_reports=0,
            risk_score=0.0,
            failure_streak=0,
            diagnosis=None,
        )
        store.add_event(goal.id, "resumed", f"resumed from {goal.status}; round counts restarted")
    store.update_goal(goal.id, goal.status, **fields)
    return store.goal(goal.id), counters


def goal_json(store: Store, goal_id: str, git: GitRepo | None = None) -> dict[str, Any]:
    """The ``--json`` object of SPEC §12 for a goal (also ``relay status --json``).

    With ``git``, ``commits`` lists only commits that are on the goal's branch: nothing relay
    reports names a commit that history rewriting removed (SPEC §14)."""
    goal = store.goal(goal_id)
    audit = store.latest_audit(goal_id)
    events = [
        {"kind": e["kind"], "round": e["round"], "detail": e["detail"]}
        for e in store.events(goal_id)
    ]
    commits = [
        {"round": r["n"], "sha": r["commit_sha"]} for r in store.rounds(goal_id) if r["commit_sha"]
    ]
    if git is not None and goal.branch and git.branch_exists(goal.branch):
        on_branch = git.reachable_commits(goal.branch, [c["sha"] for c in commits])
        commits = [c for c in commits if c["sha"] in on_branch]
    final = store.last_answer(goal_id)
    return {
        "goal_id": goal.id,
        "goal": goal.text,
        "status": goal.status,
        "reason": goal.reason,
        "message": goal.message,
        "question": goal.question,
        "rounds": goal.rounds,
        "no_progress_streak": goal.no_progress_streak,
        "blocked_reports": goal.blocked_reports,
        "tokens": {
            "uncached_input": goal.uncached_input,
            "cache_write": goal.cache_write,
            "cached_input": goal.cached_input,
            "output": goal.output,
        },
        "cost_usd": round(goal.cost_usd, 6),
        "elapsed_s": round(goal.elapsed_s, 3),
        "audit": audit
        and {"passed": audit["passed"], "round": audit["round"], "checks": audit["checks"]},
        "diagnosis": goal.diagnosis,
        "final_response": final,
        "events": events,
        "branch": goal.branch,
        "sandbox": goal.sandbox,
        "base_commit": goal.base_commit,
        "commits": commits,
        "supplements": [
            {"text": s["text"], "source": s["source"], "created_at": s["created_at"]}
            for s in goal.supplements
        ],
        "updated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(goal.updated_at)),
    }


__all__ = ["RelayError", "RunOutcome", "RunRequest", "goal_json", "parse_goal_file", "run"]
