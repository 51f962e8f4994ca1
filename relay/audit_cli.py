"""``relay audit``: run the completion audit now (SPEC §9, §12); the command is
:mod:`relay.cli.audit`.

Without options it audits the current goal (the open one, else the latest one that was not
cleared) exactly as ``update_goal complete`` would: its frozen deliverables, its base commit,
its protected paths. ``--deliverables FILE`` and ``--base REF`` audit something else, which
also works in a repository where relay never ran (a CI job: no goal, no model, no store).
Exit code 0 only when every check passed; 1 otherwise, and for usage errors.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from relay.audit import AuditResult, audit_commit, shell_runner
from relay.baseline import Baseline
from relay.config import Config, Deliverable, load_config, settings_carried
from relay.controls import asked_from_goal_shell
from relay.errors import ConfigError, RepoStateError
from relay.gitrepo import GitRepo
from relay.goal_file import parse_goal_file
from relay.protected import protected_paths
from relay.run_sandbox import sandbox_for
from relay.runlock import lock_holder
from relay.runner import open_store
from relay.sandbox import Redactor
from relay.statedir import ready_state_dir
from relay.store import GoalRecord, Store
from relay.tamper import goal_baseline
from relay.text import counted
from relay.tools import ToolContext
from relay.writable import check_repository
from relay.yaml_load import load_yaml

__all__ = ["AuditRun", "audit_now", "format_report", "load_deliverables"]


@dataclass(frozen=True)
class AuditRun:
    """One ``relay audit``: the result, the base it compared with, the goal it belongs to
    (None without one), where the deliverables came from, and whether it was stored."""

    result: AuditResult
    base: str
    goal_id: str | None
    source: str
    stored: bool
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{passed, checks, base, goal_id, deliverables, stored}`` (``--json``)."""
        return {
            **self.result.to_dict(),
            "base": self.base,
            "goal_id": self.goal_id,
            "deliverables": self.source,
            "stored": self.stored,
        }


def load_deliverables(path: Path) -> list[Deliverable]:
    """Deliverables from ``path``: a YAML list, a mapping with a ``deliverables`` key (a
    ``relay.yaml``), or a goal file whose front matter has one (SPEC §5). Raises
    ``ConfigError`` naming the file and the entry that is wrong."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--deliverables {path}: cannot read it ({exc})") from None
    if text.lstrip("\ufeff").startswith("---"):  # a goal file: its front matter holds them
        data: Any = parse_goal_file(path)[1]
    else:
        data = load_yaml(text, f"--deliverables {path}")
    if isinstance(data, dict):
        if "deliverables" not in data:
            raise ConfigError(f"--deliverables {path}: the mapping has no deliverables key")
        data = data["deliverables"]
    if data is None:
        data = []
    if not isinstance(data, list):
        raise ConfigError(
            f"--deliverables {path}: expected a list of deliverables (or a deliverables: key)"
        )
    out = []
    for i, item in enumerate(data):
        try:
            out.append(Deliverable.model_validate(item))
        except ValidationError as exc:
            msg = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
            raise ConfigError(f"--deliverables {path}: entry {i + 1} ({item!r}): {msg}") from None
    return out


@dataclass(frozen=True)
class _Target:
    """What ``relay audit`` audits: the configuration, and the store and goal (if any)."""

    config: Config
    store: Store | None
    goal: GoalRecord | None


def _current_goal(git: GitRepo, config_path: Path | None) -> _Target:
    """The configuration, store and current goal (the open one, else the latest one not
    cleared) of the repository; with a goal, its configuration is the one it started with."""
    config = load_config(git.root, config_path)
    check_repository(git, config, "audit")  # read-only: refused before any change
    store = open_store(git, config, create=False)
    goal = None
    if store is not None:
        goal = store.latest_goal(open_only=True) or store.latest_goal()
        if goal is not None and goal.status == "cleared":
            goal = None
    if goal is not None:
        config = load_config(git.root, config_path, settings_carried(goal.overrides))
    return _Target(config, store, goal)


def _deliverables(target: _Target, deliverables_file: Path | None) -> tuple[list[Deliverable], str]:
    """The deliverables to check and where they came from: ``--deliverables``, else the
    goal's frozen ones, else the configuration's."""
    if deliverables_file is not None:
        return load_deliverables(deliverables_file), str(deliverables_file)
    if target.goal is not None:
        goal = target.goal
        return [Deliverable.model_validate(d) for d in goal.deliverables], f"goal {goal.id}"
    return list(target.config.deliverables), "configuration"


def _baseline(
    git: GitRepo, target: _Target, commit: str, protected: tuple[str, ...], base_given: bool
) -> Baseline:
    """The baseline to compare with (SPEC §9 step 4). Raises ``ConfigError`` when ``commit``
    is not a commit of the repository."""
    goal = target.goal
    try:
        return goal_baseline(
            git,
            commit,
            protected=protected,
            progress_rel=Path(target.config.progress.path).as_posix(),
            goal_file=goal.goal_file if goal is not None else None,
            goal_file_digest=goal.goal_file_digest if goal is not None else None,
            started_at=goal.created_at if goal is not None else None,
        )
    except RepoStateError:
        raise ConfigError(
            f"--base {commit!r} is not a commit of this repository"
            if base_given
            else f"cannot compare with {commit!r} (a repository without commits?)"
        ) from None


def _run_checks(
    git: GitRepo,
    target: _Target,
    deliverables: list[Deliverable],
    protected: tuple[str, ...],
    baseline: Baseline,
    state: Path,
) -> AuditResult:
    """Run the audit in the sandbox (the project's tests run model-written code), with a
    run folder of its own in ``state`` (relay's state folder): ``runs/audit-<time>``, kept only
    when a command's full output was saved there (the evidence names that file)."""
    config = target.config
    sandbox = sandbox_for(git, config, state)
    runs = state / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix=time.strftime("audit-%Y%m%d-%H%M%S-"), dir=runs))
    try:
        ctx = ToolContext(
            repo_root=git.root,
            state_dir=state,
            run_dir=run_dir,
            shell_timeout_s=config.tools.shell_timeout_s,
            kept_output_bytes=config.tools.kept_output_bytes,
            protected_paths=protected,
            sandbox=sandbox,
            redact=Redactor.from_environ(),
        )
        return audit_commit(
            git.root,
            deliverables,
            shell=shell_runner(ctx, config.audit.evidence_chars),
            repo_files=git.files,
            default_timeout_s=config.audit.command_timeout_s,
            evidence_chars=config.audit.evidence_chars,
            suspicious=config.audit.suspicious,
            baseline=baseline,
            # with a goal, the base commit's tests are cached in its state folder
            tool_ctx=ctx if target.goal is not None else None,
        )
    finally:
        if not any((run_dir / "outputs").glob("*")):
            shutil.rmtree(run_dir, ignore_errors=True)
            with contextlib.suppress(OSError):
                runs.rmdir()  # looking leaves nothing behind (unless runs were there)


def _store_result(target: _Target, result: AuditResult) -> None:
    """Store the audit with the goal, and an ``audit`` event saying how it went."""
    assert target.store is not None and target.goal is not None
    goal_id = target.goal.id
    target.store.add_audit(goal_id, None, result.passed, [c.to_dict() for c in result.checks])
    failed = sum(1 for c in result.checks if not c.passed)
    target.store.add_event(
        goal_id,
        "audit",
        f"relay audit: {'passed' if result.passed else 'failed'} "
        f"({failed} of {counted(len(result.checks), 'check')} failed)",
    )


def audit_now(
    repo: Path,
    *,
    config_path: Path | None = None,
    deliverables_file: Path | None = None,
    base: str | None = None,
) -> AuditRun:
    """Run the audit of SPEC §9 now, as ``relay audit`` does.

    Args:
        repo: a folder inside the repository.
        config_path: ``--config``, read above the repository's ``relay.yaml``
            (:mod:`relay.config_layers`).
        deliverables_file: ``--deliverables``; default the goal's frozen deliverables, or
            ``deliverables`` of the configuration when there is no goal.
        base: ``--base`` commit-ish; default the goal's base commit, or ``HEAD`` without one.

    Returns:
        The audit; it is stored with the goal only when it audited the goal itself (its
        deliverables and its base commit).

    Raises:
        ConfigError, RepoStateError: usage errors (exit code 1).
    """
    git = GitRepo(repo)
    target = _current_goal(git, config_path)
    try:
        return _audit(git, target, config_path, deliverables_file, base)
    finally:  # an in-process caller keeps no file open
        if target.store is not None:
            target.store.close()


def _audit(
    git: GitRepo,
    target: _Target,
    config_path: Path | None,
    deliverables_file: Path | None,
    base: str | None,
) -> AuditRun:
    """:func:`audit_now` once the goal and the store are found."""
    goal = target.goal
    deliverables, source = _deliverables(target, deliverables_file)
    commit = base or (goal.base_commit if goal is not None else "HEAD")
    protected = protected_paths(
        git.root,
        target.config,
        files=(config_path,),
        goal_file=goal.goal_file if goal is not None else None,
    )
    baseline = _baseline(git, target, commit, protected, base is not None)
    notes = []
    if goal is not None and goal.branch and git.current_branch() != goal.branch:
        notes.append(
            f"note: goal {goal.id} works on branch {goal.branch}, but {git.current_branch()} "
            "is checked out; this audits the working tree as it is"
        )
    state = ready_state_dir(git, target.config)
    result = _run_checks(git, target, deliverables, protected, baseline, state)
    own = (
        goal is not None
        and deliverables_file is None
        and base in (None, goal.base_commit)
        and git.current_branch() == goal.branch  # another branch's tree is not the goal's
    )
    holder = lock_holder(state)
    if own and holder is not None and asked_from_goal_shell(state / "run.lock", holder):
        own = False
        notes.append(
            "note: run from the goal's own tool calls: the result is not stored with the goal"
        )
    if own and target.store is not None:
        _store_result(target, result)
    note = "\n".join(notes) or None
    return AuditRun(result, commit, goal.id if goal else None, source, own, note)


def format_report(run: AuditRun) -> str:
    """The human-readable report: a header, each check with ✓/✗ and its evidence, a verdict."""
    where = f"goal {run.goal_id}" if run.goal_id else "no goal"
    lines = [f"audit ({where}; deliverables: {run.source}; base: {run.base})"]
    if run.note:
        lines.append(run.note)
    for c in run.result.checks:
        lines.append(f"{'✓' if c.passed else '✗'} {c.kind} {c.target}")
        lines += ["    " + ln for ln in c.evidence.strip().splitlines()]
    failed = sum(1 for c in run.result.checks if not c.passed)
    total = len(run.result.checks)
    if run.result.passed:
        lines.append(f"audit passed: {total} check{'s' if total != 1 else ''}")
    else:
        lines.append(f"audit FAILED: {failed} of {counted(total, 'check')} failed")
    return "\n".join(lines)
