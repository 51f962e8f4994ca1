"""Test infrastructure changed since the base commit: ``test_infra`` tamper findings
(SPEC §9 step 4, §14 "the base commit's … test configuration").

A change to what decides how tests are collected, run and reported is a finding unless the
goal's deliverables allow it: a ``changed:`` deliverable whose glob matches the path (the
user asked for it). The rules are in :mod:`relay.infra_config` (configuration files of pytest,
tox, nox, npm and the JS runners, Go, Cargo, make) and :mod:`relay.infra_code` (start-up
hooks, shadowing modules, code reaching into pytest's internals); docs/audit.md lists them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath

from relay.audit_checks import glob_match
from relay.baseline import Baseline, FileTexts, Finding
from relay.infra_code import (
    internals_hits,
    is_startup_file,
    recent_files,
    recent_startup_files,
    shadowed_module,
    startup_problem,
)
from relay.infra_config import WHOLE_FILES, config_changes
from relay.testfiles import ignored

__all__ = ["infra_findings"]

ALLOW = "allow it with a changed: deliverable"


def _finding(path: str, line: int | None, what: str, why: str) -> Finding:
    return Finding("test_infra", path, line, f"{what}: {why} ({ALLOW})")


def _path_findings(
    root: Path,
    letter: str,
    path: str,
    files: FileTexts,
    label: str,
    imported: Callable[[str], bool] | None = None,
) -> list[Finding]:
    """The findings of one changed path (``letter`` ``A``/``M``/``D``); ``imported(name)``
    tells whether the base commit's code imports the module ``name``."""
    name = PurePosixPath(path).name
    before, after = files.base(path), files.now(path)
    out = []
    if not ignored(path):
        for line, what in config_changes(path, before, after):
            out.append(
                _finding(
                    path,
                    line,
                    f"{what} since {label}",
                    "test configuration decides which tests run and how they are reported",
                )
            )
        for line, what in internals_hits(path, before, after):
            out.append(_finding(path, line, f"new code {what}", "it can change what tests report"))
    if is_startup_file(name) and letter != "D":
        problem = startup_problem(name, after)
        if problem is not None:
            out.append(
                _finding(
                    path,
                    None,
                    f"start-up file {'created' if letter == 'A' else 'changed'}",
                    problem,
                )
            )
    if letter == "A":
        module = shadowed_module(root, path, imported)
        if module is not None:
            out.append(
                _finding(
                    path,
                    None,
                    f"new module {module!r} in a folder that is not a package",
                    f"it shadows the {'test runner' if module in ('pytest', '_pytest', 'pluggy', 'py') else 'module'} "
                    f"{module} for code run from there",
                )
            )
    return out


def infra_findings(
    root: Path,
    baseline: Baseline,
    files: FileTexts,
    allowed: Sequence[str] = (),
) -> list[Finding]:
    """Every ``test_infra`` finding of the working tree against ``baseline``.

    Args:
        root: the repository root (absolute).
        baseline: the base commit, its changes; with ``started_at``, also the files git does
            not see are checked for start-up hooks.
        files: the base and current texts of the changed files.
        allowed: the globs of the goal's ``changed:`` deliverables; matching paths are free.
    """

    def free(path: str) -> bool:
        return any(glob_match(path, glob) for glob in allowed)

    findings: list[Finding] = []
    for letter, path in baseline.all_changed():
        if not free(path):
            findings += _path_findings(
                root, letter, path, files, baseline.label, _base_imports(baseline)
            )
    if baseline.started_at is not None:
        seen = {f.path for f in findings} | {p for _, p in baseline.changes}
        for rel, problem in recent_startup_files(root, baseline.started_at):
            if problem is not None and rel not in seen and not free(rel):
                findings.append(
                    _finding(rel, None, "start-up file changed since the goal started", problem)
                )
        findings += _ignored_test_files(root, baseline, seen | {f.path for f in findings}, free)
    return findings


def _base_imports(baseline: Baseline) -> Callable[[str], bool]:
    """``imported(name)``: whether a Python file of the base commit imports module ``name``
    (one ``git grep`` per name asked, cached)."""
    cache: dict[str, bool] = {}

    def imported(name: str) -> bool:
        if name not in cache:
            cache[name] = _grep_import(baseline, name)
        return cache[name]

    return imported


def _grep_import(baseline: Baseline, name: str) -> bool:
    if baseline.repo_root is None or not baseline.sha:
        return True  # unknown: count it (the rule errs on the side of the user)
    from relay.errors import RelayError
    from relay.gitrepo import GitRepo

    pattern = rf"^\s*(import|from)\s+{re.escape(name)}(\s|\.|,|$)"
    try:
        git = GitRepo(baseline.repo_root)
    except RelayError:
        return True
    try:
        return git.grep_commit(baseline.sha, pattern, "*.py")
    finally:
        git.close()


IGNORED_TEST_NAMES = WHOLE_FILES | {"pyproject.toml", "setup.cfg", "tox.ini"}
"""Configuration files the test runner reads, wherever git is told to ignore them. (Ignored
Python modules are left alone: build output, generated code and ``_version.py`` files are
ignored and new all the time; a module that shadows the code under test needs a
configuration change to be found first, which this rule or the others catch.)"""

BUILD_FOLDERS = frozenset({"build", "dist", "target", ".eggs", ".tox", ".nox"})
"""Top-level folders of build output, never test configuration of the project."""


def _ignored_test_files(
    root: Path, baseline: Baseline, seen: set[str], free: Callable[[str], bool]
) -> list[Finding]:
    """Test configuration or Python code that changed since the goal started while git ignores
    it (a ``.gitignore`` line hides a new ``conftest.py``): relay's commits and the comparison
    with the base commit never see it, but the test run uses it. Installed packages
    (``site-packages``) are left to the start-up hook rule and the sandbox."""
    if baseline.listed is None or baseline.started_at is None:
        return []
    listed = set(baseline.listed())
    venvs: dict[Path, bool] = {}

    def in_venv(rel: str) -> bool:  # a virtual environment's files are installed, not written
        for folder in (root / rel).parents:
            if folder == root:
                return False
            if folder not in venvs:
                venvs[folder] = (folder / "pyvenv.cfg").is_file()
            if venvs[folder]:
                return True
        return False

    out = []
    for rel, name in recent_files(root, baseline.started_at):
        if rel in listed or rel in seen or free(rel) or "site-packages" in rel.split("/"):
            continue
        if in_venv(rel):
            continue
        if rel.split("/", 1)[0] in BUILD_FOLDERS:
            continue
        if name in IGNORED_TEST_NAMES:
            out.append(
                _finding(
                    rel,
                    None,
                    "a file git ignores changed since the goal started",
                    "relay's commits and its comparison with the base commit cannot see it, "
                    "but the test run uses it; delete it, or stop ignoring it",
                )
            )
    return out
