"""pytest plugins, and modules hiding installed ones, that the working tree supplied (SPEC §9
step 4, §14; docs/audit.md "test infrastructure").

relay's pytest plugin records every plugin registered in a session (when the test loop starts
and when the session finishes) whose module lies in the working folder. However it was
loaded — a ``pytest11`` entry point of a ``*.dist-info`` folder that ``python -m pytest`` finds
on ``sys.path``, ``-p`` in an ini file or ``PYTEST_ADDOPTS``, ``pytest_plugins`` — a plugin
decides how tests are collected, run and reported, like a ``conftest.py``. So a plugin module
that is new or changed since the base commit is a ``test_infra`` finding, unless a
``changed:`` deliverable's glob allows its path. This is a fact of the run, not a reading of
configuration files, so it holds for loading paths relay does not know of.

Not findings: ``conftest.py`` files (the conftest rule judges them), plugin modules the base
commit had unchanged, and modules in folders git ignores (an installed package in the tree's
``.venv``) whose inode did not change since the goal started (when the start is unknown,
``relay audit`` without a goal, such modules are left alone).

Likewise relay's plugin records each top-level module imported from the working folder that a
folder of ``sys.path`` outside it also provides: a ``numpy/`` package at the root that
``python -m pytest`` imports instead of the installed numpy whose ``assert_allclose`` the tests
use. Such a module that the base commit did not have is a ``test_infra`` finding (unless
allowed, or installed in an ignored folder before the goal started, as above); the code under
test that was already there and also installed elsewhere (``pip install .``) is not.

Both facts come from inside the test process, where the tree's code runs and could hide from
relay's plugin. :func:`metadata_findings` is read from the tree itself, outside it: a package
metadata folder at the root (``*.dist-info``, ``*.egg-info``; ``python -m pytest`` puts the root
on ``sys.path``, and its entry points load) that declares pytest plugins (``pytest11``) and is
new or changed since the base commit is a ``test_infra`` finding, ignored by git or not.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath

from relay.audit_checks import glob_match
from relay.baseline import Baseline, Finding
from relay.fsread import read_regular_text
from relay.pytest_report import PytestReport
from relay.testfiles import ignored

__all__ = ["metadata_findings", "plugin_findings", "shadow_findings"]


def _relative(root: Path, file: str) -> str | None:
    try:
        return Path(file).resolve().relative_to(root.resolve()).as_posix()
    except (ValueError, OSError):
        return None


def _installed_before(root: Path, rel: str, started_at: float | None) -> bool:
    """Whether ``rel`` lies in an ignored folder and was there before the goal started."""
    if not ignored(rel):
        return False
    if started_at is None:
        return True
    try:
        return os.stat(root / rel).st_ctime < started_at
    except OSError:
        return False


def _unchanged(root: Path, baseline: Baseline, rel: str) -> bool:
    before = baseline.read_base(rel)
    return before is not None and read_regular_text(root / rel) == before


def plugin_findings(
    root: Path, baseline: Baseline, reports: Iterable[PytestReport], allowed: Sequence[str] = ()
) -> list[Finding]:
    """``test_infra`` findings, one per plugin module of the working tree that is new or
    changed since the base commit.

    Args:
        root: the repository root (absolute).
        baseline: the goal's base commit (its files' text, label and start time).
        reports: relay's reports of the audit's pytest commands.
        allowed: globs of the goal's ``changed:`` deliverables: matching paths are free.
    """
    plugins: dict[str, list[str]] = {}
    for report in reports:
        for session in report.sessions:
            for name, file in session.plugin_files.items():
                rel = _relative(root, file)
                if rel is not None and PurePosixPath(rel).name != "conftest.py":
                    plugins.setdefault(rel, [])
                    if name not in plugins[rel]:
                        plugins[rel].append(name)
    findings = []
    for rel, names in sorted(plugins.items()):
        if any(glob_match(rel, g) for g in allowed) or _unchanged(root, baseline, rel):
            continue
        if _installed_before(root, rel, baseline.started_at):
            continue
        shown = ", ".join(f"`{n}`" for n in names[:3])
        findings.append(
            Finding(
                "test_infra",
                rel,
                None,
                f"loaded into pytest as a plugin ({shown}), new or changed since "
                f"{baseline.label}: a plugin decides how tests are collected, run and reported",
            )
        )
    return findings


def shadow_findings(
    root: Path, baseline: Baseline, reports: Iterable[PytestReport], allowed: Sequence[str] = ()
) -> list[Finding]:
    """``test_infra`` findings, one per module of the working tree, new since the base commit,
    that a test run imported instead of an installed module of the same name.

    Args:
        root: the repository root (absolute).
        baseline: the goal's base commit (its files' text, label and start time).
        reports: relay's reports of the audit's pytest commands.
        allowed: globs of the goal's ``changed:`` deliverables: matching paths are free.
    """
    hidden: dict[str, str] = {}
    for report in reports:
        for session in report.sessions:
            for name, file in session.shadowing.items():
                rel = _relative(root, file)
                if rel is not None:
                    hidden.setdefault(rel, name)
    findings = []
    for rel, name in sorted(hidden.items()):
        if any(glob_match(rel, g) for g in allowed) or baseline.read_base(rel) is not None:
            continue
        if _installed_before(root, rel, baseline.started_at):
            continue
        detail = (
            f"new since {baseline.label}, imported by the tests instead of the installed "
            f"`{name}`: it shadows it"
        )
        findings.append(Finding("test_infra", rel, None, detail))
    return findings


def metadata_findings(root: Path, baseline: Baseline, allowed: Sequence[str] = ()) -> list[Finding]:
    """``test_infra`` findings, one per package metadata folder at the root of the tree
    (``*.dist-info``, ``*.egg-info``) whose ``entry_points.txt`` declares pytest plugins
    (``[pytest11]``) and is new or changed since the base commit (unless a ``changed:`` glob
    allows it, or it is in an ignored folder and older than the goal: ``pip install -e .``).

    Args:
        root: the repository root (absolute).
        baseline: the goal's base commit (its files' text, label and start time).
        allowed: globs of the goal's ``changed:`` deliverables.
    """
    findings = []
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return findings
    for entry in entries:
        if not entry.name.endswith((".dist-info", ".egg-info")):
            continue
        rel = f"{entry.name}/entry_points.txt"
        text = read_regular_text(root / rel)
        if text is None or "pytest11" not in text.replace(" ", ""):
            continue
        if any(glob_match(rel, g) for g in allowed) or baseline.read_base(rel) == text:
            continue
        if _installed_before(root, rel, baseline.started_at):
            continue
        detail = (
            f"declares pytest plugins (pytest11), new or changed since {baseline.label}: "
            "python -m pytest loads the entry points of package metadata at the root"
        )
        findings.append(Finding("test_infra", rel, None, detail))
    return findings
