"""Which code skipped a test: a skip or an xfail decided by code that is not a test file
(SPEC §9 step 4, §14; docs/audit.md "skip marker").

relay's pytest plugin records, for every test skipped or xfailed by an exception
(``pytest.skip()``, ``pytest.xfail()``, ``raise pytest.skip.Exception``, however they were
imported or named), the frames of that exception. A frame in the working tree, in a file that
is not a test file (the code under test, a helper module beside it), on a line that the base
commit's version of that file does not have, is a ``skip_marker`` finding: the code under test
decided that its own test does not count. This is a fact of the run, not a reading of the
source, so it holds whatever spelling the code uses.

Not a finding: skips raised from test files (a test module, ``conftest.py``, a helper under
``tests/``: the skip-marker rule reads their lines), from installed packages (pytest's own
``skipif``/``xfail`` markers, a plugin, a library outside the tree or under an ignored folder
such as ``.venv``), and lines that the base commit had in that file.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from relay.baseline import Baseline, Finding
from relay.fsread import read_regular_text
from relay.pytest_report import PytestReport
from relay.testfiles import ignored, is_test_file

__all__ = ["skip_findings"]


def _key(line: str) -> str:
    return " ".join(line.split())


def _tree_frames(root: Path, origin: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
    """The frames of ``origin`` (absolute paths) that lie in the working tree, in files that
    are neither test files nor under an ignored folder, as ``(repo-relative path, line)``."""
    out = []
    for file, line in origin:
        try:
            rel = Path(file).resolve().relative_to(root.resolve()).as_posix()
        except (ValueError, OSError):
            continue
        if not ignored(rel) and not is_test_file(rel):
            out.append((rel, line))
    return out


class _Lines:
    """Reads and caches the lines of a file now and at the base commit."""

    def __init__(self, root: Path, baseline: Baseline) -> None:
        self.root = root
        self.baseline = baseline
        self.now: dict[str, list[str]] = {}
        self.base: dict[str, set[str]] = {}

    def text_now(self, rel: str, line: int) -> str:
        if rel not in self.now:
            self.now[rel] = (read_regular_text(self.root / rel) or "").splitlines()
        lines = self.now[rel]
        return lines[line - 1].strip() if 0 < line <= len(lines) else ""

    def at_base(self, rel: str, text: str) -> bool:
        if rel not in self.base:
            self.base[rel] = {_key(x) for x in (self.baseline.read_base(rel) or "").splitlines()}
        return bool(text) and _key(text) in self.base[rel]


def skip_findings(root: Path, baseline: Baseline, reports: Iterable[PytestReport]) -> list[Finding]:
    """``skip_marker`` findings, one per line of code: tests of the audit's pytest runs that
    were skipped or xfailed by a new line of code that is not a test file.

    Args:
        root: the repository root (absolute).
        baseline: the goal's base commit (its files' text and label).
        reports: relay's reports of the audit's pytest commands.
    """
    lines = _Lines(root, baseline)
    found: dict[tuple[str, int], list[str]] = defaultdict(list)
    texts: dict[tuple[str, int], str] = {}
    for report in reports:
        for test in report.tests:
            for rel, line in _tree_frames(root, test.origin):
                text = lines.text_now(rel, line)
                if lines.at_base(rel, text):
                    continue
                texts[(rel, line)] = text
                found[(rel, line)].append(f"{test.nodeid} ({test.outcome})")
    findings = []
    for (rel, line), ids in sorted(found.items()):
        shown = ", ".join(ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
        findings.append(
            Finding(
                "skip_marker",
                rel,
                line,
                f"code that is not a test file skipped or xfailed tests (not at "
                f"{baseline.label}): `{texts[(rel, line)]}` — {shown}",
            )
        )
    return findings
