"""The completion audit: ``complete`` is accepted only after the orchestrator has checked the
deliverables against real files and real test runs (SPEC §9, §14).

The checks of a result come in this order:

* every deliverable, checked against the working tree, never the model's word (§9 step 1);
  every ``command`` deliverable is re-run here (:mod:`relay.audit_commands`); a pytest command
  runs with relay's own plugin and is judged from its report (:mod:`relay.pytest_report`),
  another test run that proved nothing (no test collected, every test skipped) fails (step 2);
* with no deliverables at all: a change since the goal's base commit, and a passing run of
  the project's test command (:mod:`relay.testcmd`) when one is detected (step 5);
* tamper checks against the base commit (:mod:`relay.tamper`, :mod:`relay.test_infra`,
  step 4), and for each pytest command, the base commit's tests that did not run now
  (:mod:`relay.audit_base`);
* every path the model's checklist names as evidence must exist, and its evidence says
  whether it changed since the goal started (step 3, :mod:`relay.audit_evidence`).

docs/audit.md states every rule for users.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from relay.audit_base import BaseTests, base_test_checks
from relay.audit_checks import GENERATED, AuditResult, Check, glob_match, work_paths
from relay.audit_commands import (
    AuditShell,
    CommandOutcome,
    CommandRunner,
    run_check,
    shell_runner,
)
from relay.audit_evidence import check_checklist, evidence_paths, inside
from relay.audit_export import judged_export
from relay.audit_plugins import metadata_findings, plugin_findings, shadow_findings
from relay.audit_skips import skip_findings
from relay.audit_suspicious import scan_changes, suspicious_check
from relay.baseline import Baseline, FileTexts
from relay.config import Deliverable
from relay.errors import RelayError
from relay.fsread import read_regular_text
from relay.testcmd import TestCommand, discover_test_command, is_pytest_command
from relay.tools import ToolContext

__all__ = [
    "GENERATED",
    "NO_TEST_COMMAND",
    "AuditResult",
    "AuditShell",
    "Check",
    "CommandOutcome",
    "CommandRunner",
    "audit_commit",
    "check_changed",
    "check_checklist",
    "check_file",
    "discover_for_audit",
    "evidence_paths",
    "run_audit",
    "run_check",
    "shell_runner",
    "work_paths",
]


def check_file(root: Path, d: Deliverable) -> Check:
    """A ``file`` deliverable: the path exists inside the repository, and contains/matches."""
    assert d.file is not None
    path = inside(root, d.file)
    if path is None:
        return Check("file", d.file, False, "the path is outside the repository")
    if not path.is_file():
        return Check("file", d.file, False, f"{d.file} does not exist")
    text = read_regular_text(path)
    if text is None:
        return Check("file", d.file, False, f"{d.file} is not a regular file that can be read")
    if d.contains is not None and d.contains not in text:
        return Check("file", d.file, False, f"{d.file} does not contain {d.contains!r}")
    if d.matches is not None and not re.search(d.matches, text, re.MULTILINE):
        return Check("file", d.file, False, f"{d.file} does not match /{d.matches}/")
    detail = f"{d.file} exists ({len(text.encode())} bytes)"
    if d.contains is not None:
        detail += f" and contains {d.contains!r}"
    if d.matches is not None:
        detail += f" and matches /{d.matches}/"
    return Check("file", d.file, True, detail)


def check_changed(pattern: str, changed: Sequence[str]) -> Check:
    """A ``changed`` deliverable: some path matching the glob changed since the base commit."""
    hits = [p for p in changed if glob_match(p, pattern)]
    if hits:
        shown = ", ".join(hits[:10]) + (f" and {len(hits) - 10} more" if len(hits) > 10 else "")
        return Check("changed", pattern, True, f"changed since the goal started: {shown}")
    return Check(
        "changed", pattern, False, f"nothing matching {pattern} changed since the goal started"
    )


def _base_files(files: Sequence[str], changes: Sequence[tuple[str, str]]) -> list[str]:
    """The files of the base commit, from the working tree's files and the changes since."""
    added = {p for letter, p in changes if letter == "A"}
    deleted = [p for letter, p in changes if letter == "D"]
    return sorted({p for p in files if p not in added} | set(deleted))


def discover_for_audit(
    root: Path, repo_files: Callable[[], Sequence[str]], baseline: Baseline | None
) -> TestCommand | None:
    """The test command of the no-deliverables fallback (SPEC §9 step 5): discovered in the
    base commit when there is one (so that the model cannot swap the project's test runner
    for an easier one), else in the working tree (tests the goal added).

    Args:
        root: the repository root.
        repo_files: lists the working tree's tracked and untracked files.
        baseline: the base commit and the changes since, if known.
    """
    files = list(repo_files())
    if baseline is not None:
        found = discover_test_command(baseline.read_base, _base_files(files, baseline.changes))
        if found is not None:
            return TestCommand(found.command, f"{found.reason} (at base commit {baseline.label})")

    def read_now(rel: str) -> str | None:
        return read_regular_text(root / rel)

    found = discover_test_command(read_now, files)
    if found is not None and baseline is not None:
        return TestCommand(found.command, f"{found.reason} (added since {baseline.label})")
    return found


NO_TEST_COMMAND = (
    "no test command detected (looked for: a pytest configuration, package.json "
    "scripts.test, go.mod, Cargo.toml, Python test files, a Makefile test: target, tox.ini, "
    "noxfile.py)"
)


PytestRuns = list[tuple[str, CommandOutcome]]
"""The pytest commands an audit ran, with their outcomes (for the base-commit comparison)."""


def _run(
    command: str,
    timeout_s: float,
    run_command: CommandRunner,
    evidence_chars: int,
    pytest_runs: PytestRuns,
    **how: str,
) -> Check:
    check, outcome = run_check(command, timeout_s, run_command, evidence_chars, **how)
    if is_pytest_command(command):
        pytest_runs.append((command, outcome))
    return check


def _fallback(
    root: Path,
    change: Check,
    found: TestCommand | None,
    run: Callable[..., Check],
    timeout_s: float,
) -> Check:
    """The no-deliverables ``tests`` check (SPEC §9 step 5)."""
    if found is None:
        return Check("tests", "none detected", True, NO_TEST_COMMAND)
    if not change.passed:
        return Check(
            "tests",
            found.command,
            False,
            f"discovered: {found.reason}\nnot run: nothing changed since the goal started",
        )
    return run(found.command, timeout_s, kind="tests", note=f"discovered: {found.reason}")


def _base_checks(
    root: Path,
    baseline: Baseline,
    pytest_runs: PytestRuns,
    run_command: CommandRunner,
    tool_ctx: ToolContext | None,
    timeout_s: float,
    evidence_chars: int,
) -> list[Check]:
    """The base commit's tests compared with each pytest command's run
    (:func:`relay.audit_base.base_test_checks`), collected with the audit's own runner: the
    one given (an :class:`AuditShell`), else one for ``tool_ctx``, else one in a temporary
    run folder."""
    runs = [(c, o) for c, o in pytest_runs if o.pytest is not None and o.pytest.sessions]
    if not runs or baseline.sha is None or baseline.repo_root is None:
        return []
    scratch: Path | None = None
    if isinstance(run_command, AuditShell):
        shell = run_command
    elif tool_ctx is not None:
        shell = AuditShell(tool_ctx, evidence_chars)
    else:
        scratch = Path(tempfile.mkdtemp(prefix="relay-audit-run-"))
        shell = AuditShell(
            ToolContext(repo_root=root, state_dir=scratch / "state", run_dir=scratch),
            evidence_chars,
        )
    cache = tool_ctx.state_dir / "audit-base" if tool_ctx is not None else None
    try:
        tests = BaseTests(baseline.repo_root, baseline.sha, shell, timeout_s, cache)
        return base_test_checks(root, baseline, runs, tests)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _new_text(root: Path, baseline: Baseline, letter: str, path: str) -> bool:
    """Whether a change since the base commit is a change of content (SPEC §9 step 1): a path
    added or deleted, or one whose text, read now (through a symlink), differs from the base
    commit's. A mode change (``chmod +x``) or a file replaced by a symlink to the same text is
    no work, though git reports the path as modified."""
    if letter != "M":
        return True
    before, now = baseline.read_base(path), read_regular_text(root / path)
    return before is None or now is None or before != now


def _suspicious(root: Path, baseline: Baseline, mode: str) -> list[Check]:
    """The ``suspicious`` check of the files changed since the base commit, read in ``root``
    (:mod:`relay.audit_suspicious`); none without findings."""
    files = FileTexts(root, baseline)
    changes = [(p, files.base(p), files.now(p)) for x, p in baseline.changed() if x != "D"]
    check = suspicious_check(scan_changes(changes), mode)
    return [check] if check is not None else []


def run_audit(
    root: Path,
    deliverables: Sequence[Deliverable],
    *,
    run_command: CommandRunner,
    changed_paths: Callable[[], list[str]] | None = None,
    checklist: Iterable[dict[str, Any]] = (),
    repo_files: Callable[[], Sequence[str]] = list,
    default_timeout_s: float = 600.0,
    evidence_chars: int = 2000,
    baseline: Baseline | None = None,
    test_command: Callable[[], TestCommand | None] | None = None,
    tool_ctx: ToolContext | None = None,
    work_tree: Path | None = None,
    suspicious: str = "reject",
) -> AuditResult:
    """Run the completion audit (SPEC §9, steps 1–5).

    Args:
        root: the repository root (absolute).
        deliverables: the goal's frozen deliverables.
        run_command: runs a command (see :data:`CommandRunner`; :func:`shell_runner`).
        changed_paths: returns repo-relative paths changed since the goal's base commit
            (committed, uncommitted and untracked); default: the paths of ``baseline``.
            Generated files (:data:`GENERATED`) never count.
        checklist: the model's ``[{requirement, evidence}]``, if it gave one.
        repo_files: lists the repository's tracked and untracked files (relative paths).
        default_timeout_s: timeout of command deliverables without ``timeout_s``, of the
            discovered test command and of the base commit's test collection, seconds.
        evidence_chars: characters of command output kept as evidence.
        baseline: the base commit, the changes since it and the protected paths; given, the
            tamper checks run (:func:`relay.tamper.tamper_checks`), the base commit's tests
            are compared with each pytest command's run (when its sha and repository are
            known), and checklist evidence says whether each path changed.
        test_command: discovers the fallback's test command; default
            :func:`discover_for_audit`.
        tool_ctx: the run's tool context, when ``run_command`` is not an
            :class:`AuditShell`: the base commit's tests are collected with it, and cached
            in ``tool_ctx.state_dir/audit-base/`` (default: a temporary run folder, and a
            cache in memory only).
        work_tree: the working tree when ``root`` is its judged export (:func:`audit_commit`):
            the tamper checks compare the working tree with the base commit (they also name
            files git ignores), everything else reads the export.
        suspicious: ``audit.suspicious``: with a baseline, what findings of the
            suspicious-code scan of the changed files do (``reject``: a failing
            ``suspicious`` check; ``warn``: a passing one that warns).

    Returns:
        The result. With no deliverables it holds a ``changed`` check on ``**`` and a
        ``tests`` check (the discovered command's run, or a note that none was detected).
    """
    if changed_paths is None:
        if baseline is None:
            raise ValueError("run_audit needs changed_paths or a baseline")
        source = baseline

        def changed_paths() -> list[str]:
            return [p for letter, p in source.changed() if _new_text(root, source, letter, p)]

    checks: list[Check] = []
    changed: list[str] | None = None
    pytest_runs: PytestRuns = []

    def changes() -> list[str]:
        nonlocal changed
        if changed is None:
            changed = work_paths(changed_paths())
        return changed

    def run(command: str, timeout_s: float, **how: str) -> Check:
        return _run(command, timeout_s, run_command, evidence_chars, pytest_runs, **how)

    for d in deliverables:
        if d.kind == "file":
            checks.append(check_file(root, d))
        elif d.kind == "command":
            assert d.command is not None
            checks.append(run(d.command, d.timeout_s or default_timeout_s))
        else:
            assert d.changed is not None
            checks.append(check_changed(d.changed, changes()))
    if not deliverables:
        change = check_changed("**", changes())
        discover = test_command or (lambda: discover_for_audit(root, repo_files, baseline))
        checks += [change, _fallback(root, change, discover(), run, default_timeout_s)]
    if baseline is not None:
        from relay.tamper import tamper_checks

        allowed = [d.changed for d in deliverables if d.kind == "changed" and d.changed]
        checks += tamper_checks(work_tree or root, baseline, allowed)
        checks += _base_checks(
            root, baseline, pytest_runs, run_command, tool_ctx, default_timeout_s, evidence_chars
        )
        reports = [o.pytest for _, o in pytest_runs if o.pytest is not None]
        found = skip_findings(root, baseline, reports)
        found += plugin_findings(root, baseline, reports, allowed)
        found += shadow_findings(root, baseline, reports, allowed)
        found += metadata_findings(root, baseline, allowed)
        checks += [f.to_check() for f in found]
        checks += _suspicious(root, baseline, suspicious)
    checks += check_checklist(
        root, checklist, repo_files, changes if baseline is not None else None
    )
    return AuditResult(tuple(checks))


def audit_commit(
    root: Path,
    deliverables: Sequence[Deliverable],
    *,
    shell: AuditShell,
    baseline: Baseline | None,
    **options: Any,
) -> AuditResult:
    """The completion audit of the commit relay would make now (issue 27): the tree of every
    change, exported into a fresh folder (:func:`relay.audit_export.judged_export`: nothing
    untracked or ignored, the protected paths as at the base commit) is what
    :func:`run_audit` judges, each command in a fresh copy of it.

    Args:
        root: the working tree (absolute).
        deliverables: the goal's frozen deliverables.
        shell: the audit's runner (:func:`shell_runner`).
        baseline: the base commit and changes (its ``sha`` and ``protected`` used here).
        options: the other arguments of :func:`run_audit`.

    Returns:
        The result; a failing ``export`` check when the tree could not be exported.
    """
    sha = baseline.sha if baseline is not None else None
    protected = baseline.protected if baseline is not None else ()
    try:
        with judged_export(root, sha, protected) as tree:
            return run_audit(
                tree.folder,
                deliverables,
                run_command=shell.in_tree(tree),
                baseline=baseline,
                work_tree=root,
                **options,
            )
    except RelayError as exc:
        return AuditResult((Check("export", "the commit to audit", False, str(exc)),))
