"""Tamper checks against the goal's base commit (SPEC §9 step 4, §8 ``tamper``).

The audit compares the working tree with the commit the goal started from, whatever tool made
the change (file tools or ``shell``), and fails on:

* **deleted test modules**: a test module of the base commit is gone and its assertions and
  test names are not found in the test modules that were added or changed (a test *moved* or
  *split* with its assertions passes); when its content went to a file the test runner does
  not collect, the finding says it was **renamed** there;
* **new skip markers**: a line with a skip/xfail/only marker in a test file that was not at the
  base commit (counted over all changed test files, so a marker that was already there, also
  in a test that moved, is not new);
* **tests excluded from the run**: a new line in conftest.py or a test runner's configuration
  that ignores or deselects tests, or lets a test script pass whatever happens;
* **test infrastructure** changed (:mod:`relay.test_infra`): conftest.py, the test runners'
  configuration, start-up hooks, shadowing modules, code reaching into pytest's internals,
  unless a ``changed:`` deliverable allows the path;
* **protected paths** (``relay.yaml``, the goal file, ``tools.protected_paths``; the progress
  file is the orchestrator's and is left out): any change. In a protected test file, every
  assertion of the base commit that is gone is a **weakened assertion** finding.

Every finding names the file and the line. What a test file, a marker and an assertion are is
in :mod:`relay.testfiles`; docs/audit.md lists the rules for users.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from relay.audit_checks import Check
from relay.baseline import Baseline, FileTexts, Finding, goal_baseline, relay_owned
from relay.test_infra import infra_findings
from relay.testfiles import (
    ASSERTION,
    SKIP_MARKER,
    ext,
    ignored,
    is_test_file,
    is_test_module,
    marked,
    names_of_tests,
    norm,
    parts,
)
from relay.text import counted, shorten
from relay.tools.base import ToolContext
from relay.tools.paths import protected_entry

__all__ = [
    "ASSERTION",
    "SKIP_MARKER",
    "Baseline",
    "Finding",
    "goal_baseline",
    "is_test_file",
    "is_test_module",
    "relay_owned",
    "tamper_checks",
    "tamper_findings",
]

_EXCLUDING = re.compile(
    r"collect_ignore|--ignore(?:-glob)?(?=[=\s'\"]|$)|--deselect\b|testPathIgnorePatterns"
    r"|--passWithNoTests|(?:^|[\s'\"])-k\s*['\"]?\s*not\b"
)
_NEUTRALISED = re.compile(r"\|\|\s*(?:true|exit\s+0)\b")
TEST_CONFIG_FILES = frozenset(
    {"pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini", "package.json", "conftest.py"}
)
_JS_TEST_CONFIG = re.compile(r"^(?:jest|vitest|mocha|karma)\.config\.\w+$|^\.mocharc\.\w+$")


def _first_difference(before: str | None, after: str | None) -> int | None:
    if before is None or after is None:
        return None
    a, b = before.splitlines(), after.splitlines()
    for i, (x, y) in enumerate(zip(a, b, strict=False), 1):
        if x != y:
            return i
    return min(len(a), len(b)) + 1 if len(a) != len(b) else None


def _quote(line: str, limit: int = 100) -> str:
    return f"`{shorten(line, limit)}`"


def _is_test_config(path: str) -> bool:
    name = parts(path)[-1] if path else ""
    if ignored(path):
        return False
    return name in TEST_CONFIG_FILES or bool(_JS_TEST_CONFIG.match(name))


def _new_lines(before: str | None, after: str | None) -> list[tuple[int, str]]:
    """Lines of ``after`` that ``before`` does not hold (as a multiset of normalised lines)."""
    if after is None:
        return []
    pool = Counter(norm(ln) for ln in (before or "").splitlines())
    out = []
    for i, line in enumerate(after.splitlines(), 1):
        key = norm(line)
        if pool[key] > 0:
            pool[key] -= 1
        else:
            out.append((i, line))
    return out


class _Rules:
    """The changed files of one comparison and the test-file predicates over them."""

    def __init__(self, root: Path, baseline: Baseline) -> None:
        self.root = root
        self.baseline = baseline
        self.files = FileTexts(root, baseline)
        self.changed = baseline.changed()
        self.label = baseline.label

    # File texts are read only where a rule needs them (Rust files are test files by content).
    def test_file(self, path: str) -> bool:
        if is_test_file(path) or ext(path) != "rs":
            return is_test_file(path)
        files = self.files
        return is_test_file(path, files.base(path)) or is_test_file(path, files.now(path))

    def test_module(self, path: str, text: Callable[[str], str | None]) -> bool:
        if is_test_module(path) or ext(path) != "rs":
            return is_test_module(path)
        return is_test_module(path, text(path))


def _protected(r: _Rules) -> tuple[list[Finding], set[str]]:
    """Protected paths changed, and weakened assertions in protected test files; also the set
    of protected changed files (the other rules leave them out)."""
    ctx = ToolContext(  # for protected_entry, which reads only repo_root and protected_paths
        repo_root=r.root,
        state_dir=r.root / ".git",
        run_dir=r.root,
        protected_paths=tuple(r.baseline.protected),
    )
    findings: list[Finding] = []
    protected_files: set[str] = set()
    for letter, path in r.changed:
        entry = protected_entry(ctx, path) if r.baseline.protected else None
        if entry is None:
            continue
        protected_files.add(path)
        if letter in ("A", "D"):
            what = "deleted" if letter == "D" else "created"
            findings.append(
                Finding("protected_path", path, None, f"protected ({entry}) and {what}")
            )
            continue
        before, after = r.files.base(path), r.files.now(path)
        weakened = _weakened(path, entry, before, after, r.label) if r.test_file(path) else []
        findings += weakened
        if not weakened:
            line_n = _first_difference(before, after)
            at = f" (first difference at line {line_n})" if line_n else ""
            findings.append(
                Finding("protected_path", path, line_n, f"protected ({entry}) and changed{at}")
            )
    return findings, protected_files


def _weakened(
    path: str, entry: str, before: str | None, after: str | None, label: str
) -> list[Finding]:
    """Assertions of the base commit gone from a protected test file."""
    now_asserts = Counter(line for _, line in marked(after, ASSERTION))
    out = []
    for n, line in marked(before, ASSERTION):
        if now_asserts[line] > 0:
            now_asserts[line] -= 1
            continue
        out.append(
            Finding(
                "weakened_assertion",
                path,
                n,
                f"assertion removed or changed in a protected test file ({entry}): "
                f"line {n} at {label} was {_quote(line)}",
            )
        )
    return out


def _pools(r: _Rules, protected: set[str]) -> tuple[Counter[str], Counter[str]]:
    """The assertions and test names of the added and changed test modules, without those a
    modified module had at the base commit (it keeps its own only once)."""
    files = r.files
    now_modules = [p for letter, p in r.changed if letter != "D" and r.test_module(p, files.now)]
    asserts = Counter(line for p in now_modules for _, line in marked(files.now(p), ASSERTION))
    names = Counter(name for p in now_modules for name in names_of_tests(files.now(p)))
    for letter, path in r.changed:
        if letter == "D" or path in protected or not r.test_module(path, files.now):
            continue
        for _, line in marked(files.base(path), ASSERTION):
            if asserts[line] > 0:
                asserts[line] -= 1
        for name in names_of_tests(files.base(path)):
            if names[name] > 0:
                names[name] -= 1
    return asserts, names


def _take(pool: Counter[str], items: Iterable[tuple[int, str] | str]) -> list:
    lost = []
    for item in items:
        key = item[1] if isinstance(item, tuple) else item
        if pool[key] > 0:
            pool[key] -= 1
        else:
            lost.append(item)
    return lost


def _deleted(r: _Rules, protected: set[str]) -> list[Finding]:
    """Deleted test modules whose assertions and names are in no test module now, and those
    renamed to a file the runner does not collect."""
    files = r.files
    asserts, names = _pools(r, protected)
    added_other = [
        p
        for letter, p in r.changed
        if letter == "A" and not r.test_module(p, files.now) and p not in protected
    ]
    findings = []
    for letter, path in r.changed:
        if letter != "D" or path in protected or not r.test_module(path, files.base):
            continue
        before = files.base(path)
        lost_asserts = _take(asserts, marked(before, ASSERTION))
        lost_names = _take(names, names_of_tests(before))
        if not lost_asserts and not lost_names:
            continue  # moved or split with its assertions
        target = _renamed_to(before or "", added_other, files)
        what = f"{len(lost_asserts)} assertion{'s' if len(lost_asserts) != 1 else ''}" + (
            f" and tests {', '.join(lost_names[:5])}" if lost_names else ""
        )
        first = lost_asserts[0][0] if lost_asserts else None
        if target is not None:
            detail = (
                f"test file renamed to {target}, which the test runner does not collect "
                f"({what} no longer run)"
            )
            findings.append(Finding("renamed_test", path, first, detail))
        else:
            shown = f"; e.g. line {first}: {_quote(lost_asserts[0][1])}" if lost_asserts else ""
            detail = f"test file deleted since {r.label}; {what} are in no test file now{shown}"
            findings.append(Finding("deleted_test", path, first, detail))
    return findings


def _skip_markers(r: _Rules) -> list[Finding]:
    """Skip/xfail/only markers in changed test files that they did not have at the base."""
    base_markers: Counter[str] = Counter()
    for letter, path in r.changed:
        if letter != "A" and r.test_file(path):
            base_markers.update(line for _, line in marked(r.files.base(path), SKIP_MARKER))
    findings = []
    for letter, path in r.changed:
        if letter == "D" or not r.test_file(path):
            continue
        for n, line in marked(r.files.now(path), SKIP_MARKER):
            if base_markers[line] > 0:
                base_markers[line] -= 1
                continue
            detail = f"new skip/xfail marker (not at {r.label}): {_quote(line)}"
            findings.append(Finding("skip_marker", path, n, detail))
    return findings


def _excluded(r: _Rules) -> list[Finding]:
    """New configuration lines that ignore or deselect tests or neutralise a test script."""
    findings = []
    for letter, path in r.changed:
        if letter == "D" or not _is_test_config(path):
            continue
        name = parts(path)[-1]
        for n, line in _new_lines(r.files.base(path), r.files.now(path)):
            if name == "package.json" and "test" not in line.lower():
                continue  # other scripts (lint, build) may ignore what they like
            neutral = name == "package.json" and _NEUTRALISED.search(line)
            if _EXCLUDING.search(line) or neutral:
                detail = (
                    "new line that excludes tests from the run or makes the test command "
                    f"pass regardless: {_quote(norm(line))}"
                )
                findings.append(Finding("tests_excluded", path, n, detail))
    return findings


def tamper_findings(root: Path, baseline: Baseline, allowed: Sequence[str] = ()) -> list[Finding]:
    """Every tamper finding of the working tree at ``root`` against ``baseline`` (SPEC §9
    step 4), in a stable order: protected paths, deleted/renamed tests, skip markers,
    excluded tests, test infrastructure.

    Args:
        root: the repository root (absolute).
        baseline: the base commit, the changes since it and the protected entries.
        allowed: globs of the goal's ``changed:`` deliverables: test infrastructure changes
            there are the goal's work (:func:`relay.test_infra.infra_findings`).
    """
    rules = _Rules(root, baseline)
    findings, protected = _protected(rules)
    findings += _deleted(rules, protected)
    findings += _skip_markers(rules)
    findings += _excluded(rules)
    findings += [
        f for f in infra_findings(root, baseline, rules.files, allowed) if f.path not in protected
    ]
    # a protected file with a more specific finding needs no generic "changed" one
    detailed = {f.path for f in findings if f.rule != "protected_path"}
    return [
        f
        for f in findings
        if not (f.rule == "protected_path" and f.path in detailed and "changed" in f.detail)
    ]


def _renamed_to(before: str, candidates: Iterable[str], files: FileTexts) -> str | None:
    """The added non-test file whose text is most like ``before`` (ratio ≥ 0.6), if any."""
    best, best_ratio = None, 0.6
    for path in candidates:
        after = files.now(path)
        if after is None:
            continue
        matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
        if matcher.real_quick_ratio() < best_ratio or matcher.quick_ratio() < best_ratio:
            continue
        ratio = matcher.ratio()
        if ratio >= best_ratio:
            best, best_ratio = path, ratio
    return best


def tamper_checks(root: Path, baseline: Baseline, allowed: Sequence[str] = ()) -> list[Check]:
    """The audit's ``tamper`` checks (SPEC §9 step 4): one failing check per finding, or one
    passing check that says what was compared.

    Args:
        root: the repository root (absolute).
        baseline: see :class:`Baseline`.
        allowed: globs of the goal's ``changed:`` deliverables (see :func:`tamper_findings`).
    """
    findings = tamper_findings(root, baseline, allowed)
    if findings:
        return [f.to_check() for f in findings]
    tests = sum(1 for _, p in baseline.changed() if is_test_file(p) or is_test_module(p, None))
    protected = ", no protected path changed" if baseline.protected else ""
    ignored_note = (
        ""
        if baseline.started_at is not None
        else "; files git ignores were not checked for start-up hooks (goal start unknown)"
    )
    return [
        Check(
            "tamper",
            f"since {baseline.label}",
            True,
            "no test deleted or renamed, no skip marker added, no test excluded, no test "
            f"infrastructure changed{protected} since {baseline.label} "
            f"({counted(len(baseline.changed()), 'path')} changed, {tests} of them test files)"
            f"{ignored_note}",
        )
    ]
