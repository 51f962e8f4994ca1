"""The suspicious-code scan of the audit (SPEC §9 step 4, §14; issue 27; docs/audit.md
"Suspicious code"): the lines a change added to files that are not test files, read for
constructs that forge or detect a test run.

relay judges a pytest run from its own plugin's report and runs it a second time plainly, but
the code under test runs inside that process: it can end it before pytest does (``os._exit``
at import time, in an ``atexit`` handler), rewrite the report afterwards, or behave only while
it is audited (reading ``PYTEST_*``/``RELAY_*`` variables, ``"pytest" in sys.modules``, the
call stack, inherited file descriptors, ``/proc/self/fd``). Such constructs are findings with
their file and line; ``audit.suspicious`` (``reject``, the default, or ``warn``) says whether
they reject ``complete``.

Python files are read as a syntax tree (:mod:`relay.suspicious_py`,
:mod:`relay.suspicious_probes`; a file that does not parse is read line by line with a few
patterns); JavaScript and TypeScript files line by line. Only the lines the change added or
changed count: what the base commit already had is the project's. Test files (the tamper
rules' notion, :func:`relay.testfiles.is_test_file`) are not read: the other rules judge them.
Pure: no I/O.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from relay.audit_checks import Check
from relay.suspicious_py import python_hits
from relay.testfiles import ext, ignored, is_test_file

__all__ = ["MODES", "Suspicion", "added_lines", "scan_changes", "scan_file", "suspicious_check"]

MODES = ("reject", "warn")
"""The values of ``audit.suspicious``."""

_JS_EXTENSIONS = frozenset({"js", "jsx", "mjs", "cjs", "ts", "tsx", "mts", "cts"})
_SHOWN = 20


@dataclass(frozen=True)
class Suspicion:
    """One finding: the repo-relative ``path``, the 1-based ``line`` (of the new text) and
    the ``reason`` a person reads."""

    path: str
    line: int
    reason: str

    @property
    def text(self) -> str:
        """``path:line: reason``."""
        return f"{self.path}:{self.line}: {self.reason}"


def added_lines(old: str | None, new: str) -> set[int]:
    """The 1-based lines of ``new`` that the change from ``old`` added or changed (every line
    when ``old`` is None: a new file)."""
    lines = new.splitlines()
    if old is None:
        return set(range(1, len(lines) + 1))
    matcher = difflib.SequenceMatcher(None, old.splitlines(), lines, autojunk=False)
    out: set[int] = set()
    for tag, _, _, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            out.update(range(j1 + 1, j2 + 1))
    return out


_PY_LINES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), why)
    for p, why in (
        (r"\bos\s*\.\s*_exit\s*\(", "ends the process at once (os._exit)"),
        (r"\batexit\s*\.\s*register\b", "registers an exit handler (atexit)"),
        (r"\b(?:sys|threading)\s*\.\s*set(?:trace|profile)\b", "installs a tracing hook"),
        (r"\bsys\s*\.\s*modules\s*\[[^\]]*\]\s*=(?!=)", "changes sys.modules"),
        (r"/proc/(?:self|\d+|\{)|/dev/fd\b", "looks at the process's open files"),
        (r"\bgc\s*\.\s*get_(?:objects|referrers|referents)\b", "searches live objects"),
    )
)

_JS_LINES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), why)
    for p, why in (
        (
            r"\bprocess\s*\.\s*env\b.*(?i:jest|vitest|mocha|relay|audit|report|\bci\b|pytest)",
            "looks for the test run in process.env",
        ),
        (
            r"\bprocess\s*\.\s*on\s*\(\s*['\"`](?:exit|beforeExit)['\"`]",
            "registers an exit handler (process.on('exit'))",
        ),
        (r"\bprocess\s*\.\s*reallyExit\b", "ends the process at once (process.reallyExit)"),
        (
            r"\brequire\s*\.\s*cache\s*\[[^\]]*\]\s*=(?!=)|\bdelete\s+require\s*\.\s*cache\b",
            "changes require.cache: replaces modules the tests load",
        ),
        (r"/proc/(?:self|\d+|\$\{)|/dev/fd\b", "looks at the process's open files"),
        (
            r"\bglobalThis\s*\.\s*(?:expect|it|test|describe)\s*=(?!=)",
            "replaces the runner's globals (expect, it, test, describe)",
        ),
    )
)


def _line_hits(
    new: str, added: set[int], patterns: tuple[tuple[re.Pattern[str], str], ...], comment: str
) -> list[tuple[int, str]]:
    """``(line, reason)`` of added lines (comments aside) that a pattern matches."""
    out = []
    for n, line in enumerate(new.splitlines(), 1):
        if n not in added or line.lstrip().startswith(comment):
            continue
        out += [(n, why) for pattern, why in patterns if pattern.search(line)]
    return out


def scan_file(path: str, old: str | None, new: str | None) -> list[Suspicion]:
    """The findings of one changed file, on the lines the change added.

    Args:
        path: repo-relative POSIX path.
        old: its text at the base commit (None: added since).
        new: its text now (None: deleted, binary or unreadable: nothing to read).

    Returns:
        The findings in line order, one per line and reason; none for a test file, a file
        under an ignored folder (``.venv``, ``node_modules``…) or another language.
    """
    if new is None or ignored(path) or is_test_file(path, new):
        return []
    added = added_lines(old, new)
    if not added:
        return []
    kind = ext(path)
    found: list[tuple[int, str]] = []
    if kind == "py":
        try:
            hits = python_hits(path, new)
        except (SyntaxError, ValueError):
            found = _line_hits(new, added, _PY_LINES, "#")
        else:
            found = [(h.line, h.reason) for h in hits if h.lines & added]
    elif kind in _JS_EXTENSIONS:
        found = _line_hits(new, added, _JS_LINES, "//")
    unique = sorted(dict.fromkeys(found))
    return [Suspicion(path, line, reason) for line, reason in unique]


def scan_changes(changes: Iterable[tuple[str, str | None, str | None]]) -> list[Suspicion]:
    """The findings of every changed file: ``(path, base text, text now)`` each."""
    out: list[Suspicion] = []
    for path, old, new in changes:
        out += scan_file(path, old, new)
    return out


_WHY = (
    "code that is not a test must not end, outlive, trace or detect the test run, nor touch "
    "the runner's files or inherited descriptors: relay cannot tell such code from code that "
    'forges the audit (docs/audit.md "Suspicious code")'
)


def suspicious_check(findings: list[Suspicion], mode: str) -> Check | None:
    """The audit's ``suspicious`` check of the findings; None when there are none.

    Args:
        findings: the scan's findings (:func:`scan_changes`).
        mode: ``audit.suspicious``: ``reject`` (a failing check: ``complete`` is rejected)
            or ``warn`` (a passing check whose evidence starts with ``warning:``).

    Raises:
        ValueError: ``mode`` is not one of :data:`MODES`.
    """
    if mode not in MODES:
        raise ValueError(f"audit.suspicious must be one of {', '.join(MODES)}, not {mode!r}")
    if not findings:
        return None
    files = list(dict.fromkeys(f.path for f in findings))
    target = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
    lines = [f.text for f in findings[:_SHOWN]]
    if len(findings) > _SHOWN:
        lines.append(f"… and {len(findings) - _SHOWN} more")
    if mode == "warn":
        head = (
            f"warning: {len(findings)} suspicious construct(s) in code that is not a test, "
            "accepted because audit.suspicious is warn"
        )
        return Check("suspicious", target, True, "\n".join([head, *lines]))
    advice = (
        "remove them; if the goal really needs them, say so with update_goal "
        "needs_user_input (the user can set audit.suspicious: warn)"
    )
    return Check("suspicious", target, False, "\n".join([*lines, f"{_WHY}: {advice}"]))
