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
* **protected paths** (``relay.yaml``, the goal file, ``tools.protected_paths``; the progress
  file is the orchestrator's and is left out): any change. In a protected test file, every
  assertion of the base commit that is gone is a **weakened assertion** finding.

Every finding names the file and the line. The rules that decide what a test file is and what
a marker or an assertion is are in :func:`is_test_file`, :func:`is_test_module`,
:data:`SKIP_MARKER` and :data:`ASSERTION`; docs/audit.md lists them for users.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from relay.audit import GENERATED, Check
from relay.tools.base import ToolContext
from relay.tools.paths import protected_entry

if TYPE_CHECKING:
    from relay.gitrepo import GitRepo

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

SOURCE_EXTENSIONS = frozenset(
    "py js jsx ts tsx mjs cjs go rs rb java kt kts scala cs php swift c cc cpp h hpp ex exs".split()
)
"""Extensions of files that can hold tests."""

TEST_FOLDERS = frozenset({"tests", "test", "__tests__", "spec", "specs"})
"""A source file under a folder of one of these names is a test file."""

IGNORED_FOLDERS = frozenset(
    {"node_modules", ".venv", "venv", "__pycache__", ".tox", ".nox", "site-packages", ".git"}
)
"""Files under these folders are never test files (dependencies, caches)."""

_JS = r"(?:js|jsx|ts|tsx|mjs|cjs)"
_MODULE_NAME = re.compile(
    rf"^(test_.*\.py|.*_test\.py|.*\.(?:test|spec)\.{_JS}|.*_test\.go|.*_(?:spec|test)\.rb|"
    r".*Tests?\.(?:java|kt|scala|cs)|.*Test\.php)$"
)

SKIP_MARKER = re.compile(
    r"pytest\.mark\.(?:skip|skipif|xfail)\b|\bpytest\.(?:skip|xfail|importorskip)\s*\("
    r"|\bunittest\.(?:skip\w*|expectedFailure)\b|@(?:skip|skipIf|skipUnless|expectedFailure)\b"
    r"|\.skipTest\s*\(|\braise\s+(?:unittest\.)?SkipTest\b"
    r"|\b(?:it|describe|test|context|suite)\.(?:skip|only|todo)\b"
    r"|(?<![\w.$])(?:xit|xdescribe|xtest|xcontext|fit|fdescribe)\s*\("
    r"|\bt\.Skip(?:f|Now)?\s*\(|#\[ignore\b|@(?:Ignore|Disabled)\b"
)
"""A line that skips, expects to fail, or singles out tests (``.only`` runs one test and
silently drops the others)."""

ASSERTION = re.compile(
    r"^\s*assert\b|\bself\.(?:assert\w*|fail\w*)\s*\(|\bpytest\.(?:raises|fail|approx)\s*\("
    r"|\bexpect\s*\(|\bassert(?:\.\w+)?\s*\(|\b(?:assert|require)\.\w+\s*\("
    r"|\bt\.(?:Error|Errorf|Fatal|Fatalf|Fail|FailNow)\s*\("
    r"|\b(?:debug_)?assert(?:_eq|_ne)?!\s*\("
    r"|\bassert(?:Equals?|True|False|Null|NotNull|That|Throws|Same|NotSame|ArrayEquals)\s*\("
)
"""A line that asserts something (Python, unittest, JS, Go, Rust, JUnit)."""

_TEST_NAME = re.compile(
    r"^\s*(?:async\s+)?def\s+(test\w*)\s*\(|^\s*func\s+(Test\w+)\s*\("
    r"|\b(?:it|test)\s*\(\s*['\"`]([^'\"`]+)['\"`]"
)

_EXCLUDING = re.compile(
    r"collect_ignore|--ignore(?:-glob)?(?=[=\s'\"]|$)|--deselect\b|testPathIgnorePatterns"
    r"|--passWithNoTests|(?:^|[\s'\"])-k\s*['\"]?\s*not\b"
)
_NEUTRALISED = re.compile(r"\|\|\s*(?:true|exit\s+0)\b")
TEST_CONFIG_FILES = frozenset(
    {"pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini", "package.json", "conftest.py"}
)
_JS_TEST_CONFIG = re.compile(r"^(?:jest|vitest|mocha|karma)\.config\.\w+$|^\.mocharc\.\w+$")


@dataclass(frozen=True)
class Finding:
    """One tamper finding: the ``rule`` (``deleted_test``, ``renamed_test``, ``skip_marker``,
    ``tests_excluded``, ``weakened_assertion``, ``protected_path``), the repo-relative
    ``path``, the 1-based ``line`` (in the working tree; in the base commit for what was
    removed; None for a whole file), and the ``detail`` a person reads."""

    rule: str
    path: str
    line: int | None
    detail: str

    @property
    def where(self) -> str:
        """``path:line`` (or the path alone)."""
        return f"{self.path}:{self.line}" if self.line else self.path

    def to_check(self) -> Check:
        """The failing audit check of kind ``tamper`` for this finding."""
        return Check("tamper", self.where, False, f"{self.where}: {self.detail}")


@dataclass(frozen=True)
class Baseline:
    """What the audit compares the working tree with (SPEC §9 step 4).

    Attributes:
        commit: the goal's base commit (a sha or any commit-ish).
        changes: ``[(letter, path)]`` from ``GitRepo.changes_since(commit)``: letter ``A``,
            ``M`` or ``D``, repo-relative POSIX paths (renames are a ``D`` and an ``A``).
        read_base: the text of a path at ``commit`` (``GitRepo.file_at``), None if absent.
        protected: protected entries (paths or globs, as ``tools.protected_paths``), without
            the progress file.
        exempt: paths whose changes are no finding and count as no change (the progress file;
            the goal file when its text is the one relay last took as the user's).
    """

    commit: str
    changes: Sequence[tuple[str, str]]
    read_base: Callable[[str], str | None]
    protected: tuple[str, ...] = ()
    exempt: frozenset[str] = field(default_factory=frozenset)

    @property
    def label(self) -> str:
        """The commit, shortened when it is a full sha."""
        return self.commit[:7] if re.fullmatch(r"[0-9a-f]{40}", self.commit) else self.commit

    def changed(self) -> list[tuple[str, str]]:
        """The changes without the exempt paths and generated files (caches, byte code)."""
        return [
            (letter, p)
            for letter, p in self.changes
            if p not in self.exempt and not GENERATED.search(p)
        ]


def _parts(path: str) -> tuple[str, ...]:
    return PurePosixPath(path).parts


def _ext(path: str) -> str:
    name = _parts(path)[-1] if path else ""
    return name.rsplit(".", 1)[-1].lower() if "." in name else ""


def _ignored(path: str) -> bool:
    return any(p in IGNORED_FOLDERS for p in _parts(path)[:-1])


def is_test_module(path: str, text: str | None = None) -> bool:
    """Whether a test runner collects ``path`` by its default conventions: ``test_*.py``,
    ``*_test.py``, ``*.test.<js|ts…>``, ``*.spec.<js|ts…>``, any JS/TS file under
    ``__tests__/``, ``*_test.go``, ``*_spec.rb``/``*_test.rb``, ``*Test.java`` (…Tests, also
    Kotlin, Scala, C#), ``*Test.php``, a Rust file under a top-level ``tests/`` folder or one
    holding ``#[test]``.

    Args:
        path: repo-relative POSIX path.
        text: the file's text, for the Rust content rule (None: path rules only).
    """
    if _ignored(path) or _ext(path) not in SOURCE_EXTENSIONS:
        return False
    parts = _parts(path)
    if _MODULE_NAME.match(parts[-1]):
        return True
    if re.fullmatch(_JS, _ext(path)) and "__tests__" in parts[:-1]:
        return True
    if _ext(path) == "rs":
        return parts[0] == "tests" or (text is not None and "#[test]" in text)
    return False


def is_test_file(path: str, text: str | None = None) -> bool:
    """Whether ``path`` is a test file for the tamper rules: a test module
    (:func:`is_test_module`), ``conftest.py``, or any source file under a folder named
    ``tests``, ``test``, ``__tests__``, ``spec`` or ``specs`` (helpers and fixtures), or a Rust
    file holding ``#[cfg(test)]``. Never under ``node_modules``, ``.venv``, ``venv``,
    ``__pycache__``, ``.tox``, ``.nox``, ``site-packages``.

    Args:
        path: repo-relative POSIX path.
        text: the file's text (at the base commit or now), for the Rust content rules.
    """
    if is_test_module(path, text):
        return True
    if _ignored(path) or _ext(path) not in SOURCE_EXTENSIONS:
        return False
    parts = _parts(path)
    if parts[-1] == "conftest.py" or any(p in TEST_FOLDERS for p in parts[:-1]):
        return True
    return _ext(path) == "rs" and text is not None and "#[cfg(test)]" in text


def _norm(line: str) -> str:
    return " ".join(line.split())


def _marked(text: str | None, pattern: re.Pattern[str]) -> list[tuple[int, str]]:
    """``(line number, normalised line)`` of the lines matching ``pattern``."""
    if not text:
        return []
    return [(i, _norm(line)) for i, line in enumerate(text.splitlines(), 1) if pattern.search(line)]


def _test_names(text: str | None) -> list[str]:
    if not text:
        return []
    names = []
    for line in text.splitlines():
        m = _TEST_NAME.search(line)
        if m:
            names.append(next(g for g in m.groups() if g))
    return names


def _first_difference(before: str | None, after: str | None) -> int | None:
    if before is None or after is None:
        return None
    a, b = before.splitlines(), after.splitlines()
    for i, (x, y) in enumerate(zip(a, b, strict=False), 1):
        if x != y:
            return i
    return min(len(a), len(b)) + 1 if len(a) != len(b) else None


def _quote(line: str, limit: int = 100) -> str:
    return "`" + (line if len(line) <= limit else line[: limit - 1] + "…") + "`"


def _is_test_config(path: str) -> bool:
    name = _parts(path)[-1] if path else ""
    if _ignored(path):
        return False
    return name in TEST_CONFIG_FILES or bool(_JS_TEST_CONFIG.match(name))


def _new_lines(before: str | None, after: str | None) -> list[tuple[int, str]]:
    """Lines of ``after`` that ``before`` does not hold (as a multiset of normalised lines)."""
    if after is None:
        return []
    pool = Counter(_norm(ln) for ln in (before or "").splitlines())
    out = []
    for i, line in enumerate(after.splitlines(), 1):
        key = _norm(line)
        if pool[key] > 0:
            pool[key] -= 1
        else:
            out.append((i, line))
    return out


class _Files:
    """The base and current texts of the changed files, read once."""

    def __init__(self, root: Path, baseline: Baseline) -> None:
        self.root = root
        self.baseline = baseline
        self.letters = dict((p, letter) for letter, p in baseline.changed())
        self._base: dict[str, str | None] = {}
        self._now: dict[str, str | None] = {}

    def base(self, path: str) -> str | None:
        if path not in self._base:
            letter = self.letters.get(path)
            self._base[path] = None if letter == "A" else self.baseline.read_base(path)
        return self._base[path]

    def now(self, path: str) -> str | None:
        if path not in self._now:
            text: str | None = None
            if self.letters.get(path) != "D":
                try:
                    raw = (self.root / path).read_bytes()
                    text = None if b"\0" in raw[:8192] else raw.decode("utf-8", "replace")
                except OSError:
                    text = None
            self._now[path] = text
        return self._now[path]


def tamper_findings(root: Path, baseline: Baseline) -> list[Finding]:
    """Every tamper finding of the working tree at ``root`` against ``baseline`` (SPEC §9
    step 4), in a stable order: protected paths, deleted/renamed tests, skip markers,
    excluded tests.

    Args:
        root: the repository root (absolute).
        baseline: the base commit, the changes since it and the protected entries.
    """
    files = _Files(root, baseline)
    ctx = ToolContext(  # for protected_entry, which reads only repo_root and protected_paths
        repo_root=root,
        state_dir=root / ".git",
        run_dir=root,
        protected_paths=tuple(baseline.protected),
    )
    findings: list[Finding] = []
    changed = baseline.changed()
    label = baseline.label

    # File texts are read only where a rule needs them (Rust files are test files by content).
    def test_file(path: str) -> bool:
        if is_test_file(path) or _ext(path) != "rs":
            return is_test_file(path)
        return is_test_file(path, files.base(path)) or is_test_file(path, files.now(path))

    def test_module(path: str, text: Callable[[str], str | None]) -> bool:
        if is_test_module(path) or _ext(path) != "rs":
            return is_test_module(path)
        return is_test_module(path, text(path))

    # protected paths ------------------------------------------------------------------
    protected_files: set[str] = set()
    for letter, path in changed:
        entry = protected_entry(ctx, path) if baseline.protected else None
        if entry is None:
            continue
        protected_files.add(path)
        before, after = files.base(path), files.now(path)
        if letter == "D":
            findings.append(
                Finding("protected_path", path, None, f"protected ({entry}) and deleted")
            )
            continue
        if letter == "A":
            findings.append(
                Finding("protected_path", path, None, f"protected ({entry}) and created")
            )
            continue
        specific = False
        if test_file(path):
            now_asserts = Counter(line for _, line in _marked(after, ASSERTION))
            for n, line in _marked(before, ASSERTION):
                if now_asserts[line] > 0:
                    now_asserts[line] -= 1
                    continue
                specific = True
                findings.append(
                    Finding(
                        "weakened_assertion",
                        path,
                        n,
                        f"assertion removed or changed in a protected test file ({entry}): "
                        f"line {n} at {label} was {_quote(line)}",
                    )
                )
        if not specific:
            line_n = _first_difference(before, after)
            at = f" (first difference at line {line_n})" if line_n else ""
            findings.append(
                Finding("protected_path", path, line_n, f"protected ({entry}) and changed{at}")
            )

    # deleted and renamed test modules -------------------------------------------------
    now_modules = [p for letter, p in changed if letter != "D" and test_module(p, files.now)]
    now_asserts = Counter(line for p in now_modules for _, line in _marked(files.now(p), ASSERTION))
    now_names = Counter(name for p in now_modules for name in _test_names(files.now(p)))
    for letter, path in changed:
        if letter == "D" or path in protected_files:
            continue
        # a modified module keeps its own assertions in the pool only once
        if test_module(path, files.now):
            for _, line in _marked(files.base(path), ASSERTION):
                if now_asserts[line] > 0:
                    now_asserts[line] -= 1
            for name in _test_names(files.base(path)):
                if now_names[name] > 0:
                    now_names[name] -= 1
    added_other = [
        p
        for letter, p in changed
        if letter == "A" and not test_module(p, files.now) and p not in protected_files
    ]
    for letter, path in changed:
        if letter != "D" or path in protected_files:
            continue
        if not test_module(path, files.base):
            continue
        before = files.base(path)
        lost_asserts = []
        for n, line in _marked(before, ASSERTION):
            if now_asserts[line] > 0:
                now_asserts[line] -= 1
            else:
                lost_asserts.append((n, line))
        lost_names = []
        for name in _test_names(before):
            if now_names[name] > 0:
                now_names[name] -= 1
            else:
                lost_names.append(name)
        if not lost_asserts and not lost_names:
            continue  # moved or split with its assertions
        target = _renamed_to(before or "", added_other, files)
        what = f"{len(lost_asserts)} assertion{'s' if len(lost_asserts) != 1 else ''}" + (
            f" and tests {', '.join(lost_names[:5])}" if lost_names else ""
        )
        first = lost_asserts[0][0] if lost_asserts else None
        if target is not None:
            findings.append(
                Finding(
                    "renamed_test",
                    path,
                    first,
                    f"test file renamed to {target}, which the test runner does not collect "
                    f"({what} no longer run)",
                )
            )
        else:
            shown = f"; e.g. line {first}: {_quote(lost_asserts[0][1])}" if lost_asserts else ""
            findings.append(
                Finding(
                    "deleted_test",
                    path,
                    first,
                    f"test file deleted since {label}; {what} are in no test file now{shown}",
                )
            )

    # new skip markers -----------------------------------------------------------------
    base_markers: Counter[str] = Counter()
    for letter, path in changed:
        if letter != "A" and test_file(path):
            base_markers.update(line for _, line in _marked(files.base(path), SKIP_MARKER))
    for letter, path in changed:
        if letter == "D" or not test_file(path):
            continue
        for n, line in _marked(files.now(path), SKIP_MARKER):
            if base_markers[line] > 0:
                base_markers[line] -= 1
                continue
            findings.append(
                Finding(
                    "skip_marker",
                    path,
                    n,
                    f"new skip/xfail marker (not at {label}): {_quote(line)}",
                )
            )

    # tests excluded from the run ------------------------------------------------------
    for letter, path in changed:
        if letter == "D" or not _is_test_config(path):
            continue
        for n, line in _new_lines(files.base(path), files.now(path)):
            name = _parts(path)[-1]
            if name == "package.json" and "test" not in line.lower():
                continue  # other scripts (lint, build) may ignore what they like
            excluding = _EXCLUDING.search(line)
            neutral = name == "package.json" and _NEUTRALISED.search(line)
            if excluding or neutral:
                findings.append(
                    Finding(
                        "tests_excluded",
                        path,
                        n,
                        "new line that excludes tests from the run or makes the test command "
                        f"pass regardless: {_quote(_norm(line))}",
                    )
                )
    # a protected file with a more specific finding needs no generic "changed" one
    detailed = {f.path for f in findings if f.rule != "protected_path"}
    return [
        f
        for f in findings
        if not (f.rule == "protected_path" and f.path in detailed and "changed" in f.detail)
    ]


def _renamed_to(before: str, candidates: Iterable[str], files: _Files) -> str | None:
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


def tamper_checks(root: Path, baseline: Baseline) -> list[Check]:
    """The audit's ``tamper`` checks (SPEC §9 step 4): one failing check per finding, or one
    passing check that says what was compared.

    Args:
        root: the repository root (absolute).
        baseline: see :class:`Baseline`.
    """
    findings = tamper_findings(root, baseline)
    if findings:
        return [f.to_check() for f in findings]
    tests = sum(1 for _, p in baseline.changed() if is_test_file(p) or is_test_module(p, None))
    protected = ", no protected path changed" if baseline.protected else ""
    return [
        Check(
            "tamper",
            f"since {baseline.label}",
            True,
            "no test deleted or renamed, no skip marker added, no test excluded"
            f"{protected} since {baseline.label} "
            f"({len(baseline.changed())} paths changed, {tests} of them test files)",
        )
    ]


def relay_owned(progress_rel: str) -> tuple[str, str]:
    """The files relay itself writes and commits every round, which are never the goal's work
    nor tampering: the progress file and the goal state file beside it (``goal.json``).

    Args:
        progress_rel: the progress file's repo-relative POSIX path (``progress.path``).
    """
    return progress_rel, (PurePosixPath(progress_rel).parent / "goal.json").as_posix()


def goal_baseline(
    git: GitRepo,
    commit: str,
    *,
    protected: Iterable[str],
    progress_rel: str,
    goal_file: str | None = None,
    goal_file_digest: str | None = None,
) -> Baseline:
    """The :class:`Baseline` of a goal (or of ``relay audit --base``), from git.

    Args:
        git: the repository.
        commit: the base commit (the goal's ``base_commit``, or any commit-ish).
        protected: the goal's protected entries (SPEC §5); the progress file is dropped.
        progress_rel: the progress file's repo-relative path: it and the goal state file beside
            it are relay's own (:func:`relay_owned`), always exempt.
        goal_file: the goal file's repo-relative path, if the goal has one inside the
            repository.
        goal_file_digest: SHA-256 of the goal file's text that relay last took as the
            user's (the store's ``goal_file_digest``): when the file still has it, the
            change is the user's (a supplement) and exempt.

    Raises:
        RepoStateError: ``commit`` is not a commit of the repository.
    """
    from relay.watch import file_digest

    exempt = set(relay_owned(progress_rel))
    if goal_file and goal_file_digest and file_digest(git.root / goal_file) == goal_file_digest:
        exempt.add(goal_file)
    return Baseline(
        commit=commit,
        changes=git.changes_since(commit),
        read_base=lambda path: git.file_at(commit, path),
        protected=tuple(p for p in dict.fromkeys(protected) if p != progress_rel),
        exempt=frozenset(exempt),
    )
