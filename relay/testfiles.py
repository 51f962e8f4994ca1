"""What a test file, a test marker and an assertion are, for the tamper rules (SPEC §9 step 4).

docs/audit.md ("What is a test file", "The rules") lists these rules for users.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

__all__ = [
    "ASSERTION",
    "IGNORED_FOLDERS",
    "SKIP_MARKER",
    "SOURCE_EXTENSIONS",
    "TEST_FOLDERS",
    "TEST_NAME",
    "ext",
    "ignored",
    "is_test_file",
    "is_test_module",
    "marked",
    "names_of_tests",
    "norm",
    "parts",
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

TEST_NAME = re.compile(
    r"^\s*(?:async\s+)?def\s+(test\w*)\s*\(|^\s*func\s+(Test\w+)\s*\("
    r"|\b(?:it|test)\s*\(\s*['\"`]([^'\"`]+)['\"`]"
)


def parts(path: str) -> tuple[str, ...]:
    """The components of a repo-relative POSIX path."""
    return PurePosixPath(path).parts


def ext(path: str) -> str:
    """The lower-case extension of the path's last component (``""`` without one)."""
    name = parts(path)[-1] if path else ""
    return name.rsplit(".", 1)[-1].lower() if "." in name else ""


def ignored(path: str) -> bool:
    """Whether the path lies under a dependency or cache folder (:data:`IGNORED_FOLDERS`)."""
    return any(p in IGNORED_FOLDERS for p in parts(path)[:-1])


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
    if ignored(path) or ext(path) not in SOURCE_EXTENSIONS:
        return False
    pieces = parts(path)
    if _MODULE_NAME.match(pieces[-1]):
        return True
    if re.fullmatch(_JS, ext(path)) and "__tests__" in pieces[:-1]:
        return True
    if ext(path) == "rs":
        return pieces[0] == "tests" or (text is not None and "#[test]" in text)
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
    if ignored(path) or ext(path) not in SOURCE_EXTENSIONS:
        return False
    pieces = parts(path)
    if pieces[-1] == "conftest.py" or any(p in TEST_FOLDERS for p in pieces[:-1]):
        return True
    return ext(path) == "rs" and text is not None and "#[cfg(test)]" in text


def norm(line: str) -> str:
    """The line with whitespace runs collapsed to one space and no leading/trailing space."""
    return " ".join(line.split())


def marked(text: str | None, pattern: re.Pattern[str]) -> list[tuple[int, str]]:
    """``(line number, normalised line)`` of the lines matching ``pattern``."""
    if not text:
        return []
    return [(i, norm(line)) for i, line in enumerate(text.splitlines(), 1) if pattern.search(line)]


def names_of_tests(text: str | None) -> list[str]:
    """The test names a text defines (:data:`TEST_NAME`), in order."""
    if not text:
        return []
    names = []
    for line in text.splitlines():
        m = TEST_NAME.search(line)
        if m:
            names.append(next(g for g in m.groups() if g))
    return names
