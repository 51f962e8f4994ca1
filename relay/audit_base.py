"""The base commit's tests: did every test of the goal's base commit that still exists run?
(SPEC §9 step 4, §14 "the base commit's tests").

For each pytest command of an audit, relay exports the base commit (``git archive``) into a
temporary folder outside the working tree, runs the same command there with collection only
(``--co``) through its own plugin, and keeps the test ids that would have run at the base
commit (after the base configuration's own deselection). The result is cached per base commit
and command (in memory, and in ``cache_dir`` when one is given, sealed:
:mod:`relay.audit_base_cache`).

:func:`base_tests_not_run` then compares: a base test whose function (file + ``Class::name``,
parameters stripped) is still defined in the current file, but that did not run now, is a
``tests_not_run`` tamper finding, whatever left it out (``-k``, ``--deselect``, ``--co``, an
ignore hook, ``-x``, ``pytest.exit``). Tests moved, split, renamed or deleted are left to
:mod:`relay.tamper`'s assertion rules. A parametrized test whose parameters changed passes
when some instance of it ran and its old instances were not collected now.
"""

from __future__ import annotations

import ast
import re
import shutil
import tarfile
import tempfile
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from relay.audit_base_cache import cache_file, load_ids, save_ids
from relay.audit_checks import Check
from relay.audit_commands import AuditShell, CommandOutcome
from relay.audit_export import export_tree
from relay.baseline import Baseline, Finding
from relay.errors import RelayError
from relay.fsread import read_regular_text
from relay.pytest_report import PytestReport, SessionReport, report_problems
from relay.text import counted

__all__ = [
    "BaseCollection",
    "BaseTests",
    "base_test_checks",
    "base_tests_not_run",
    "defined_line",
    "repo_ids",
]

_cache: dict[tuple[str, str, str], BaseCollection] = {}


@dataclass(frozen=True)
class BaseCollection:
    """The base commit's tests for one command: ``ids`` (repo-relative pytest node ids that
    would run there) or the ``problem`` that kept relay from knowing them."""

    command: str
    commit: str
    ids: tuple[str, ...] | None
    problem: str | None = None


def repo_ids(session: SessionReport, folder: Path, ids: Iterable[str]) -> list[str]:
    """``ids`` of ``session`` made relative to ``folder`` (the repository or the export): a
    node id is relative to the session's rootdir, which may be a sub-folder."""
    try:
        prefix = Path(session.rootdir).resolve().relative_to(folder.resolve()).as_posix()
    except (ValueError, OSError):
        prefix = "."
    if prefix in ("", "."):
        return list(ids)
    return [f"{prefix}/{i}" for i in ids]


def _export(root: Path, commit: str, folder: Path) -> None:
    """The tree of ``commit`` written into ``folder`` (:func:`relay.audit_export.export_tree`);
    OSError/RelayError/TarError on failure."""
    export_tree(root, commit, folder)


class BaseTests:
    """Collects the base commit's tests for a command, once per base commit and command.

    Args:
        root: the repository root (absolute).
        commit: the base commit's full sha.
        shell: the audit's runner; base collections run with it in the export folder.
        timeout_s: the collection's timeout, seconds.
        cache_dir: where collections are kept across processes (e.g.
            ``<state_dir>/audit-base``); None: in memory only.
    """

    def __init__(
        self,
        root: Path,
        commit: str,
        shell: AuditShell,
        timeout_s: float,
        cache_dir: Path | None = None,
    ) -> None:
        self.root = root
        self.commit = commit
        self.shell = shell
        self.timeout_s = timeout_s
        self.cache_dir = cache_dir

    def collection(self, command: str) -> BaseCollection:
        """The base commit's tests for ``command`` (cached; failures are not cached). A file
        in ``cache_dir`` is used only with relay's seal (:mod:`relay.audit_base_cache`)."""
        key = (str(self.root), self.commit, command)
        if key in _cache:
            return _cache[key]
        file = cache_file(self.cache_dir, self.commit, command) if self.cache_dir else None
        ids = load_ids(file, command, self.commit) if file is not None else None
        if ids is not None:
            found = _cache[key] = BaseCollection(command, self.commit, ids)
            return found
        found = self._collect(command)
        if found.ids is not None:
            _cache[key] = found
            if file is not None:
                save_ids(file, command, self.commit, found.ids)
        return found

    def _collect(self, command: str) -> BaseCollection:
        try:
            folder = Path(tempfile.mkdtemp(prefix="relay-base-"))
        except OSError as exc:
            return BaseCollection(command, self.commit, None, f"no temporary folder: {exc}")
        try:
            try:
                _export(self.root, self.commit, folder)
            except (OSError, RelayError, tarfile.TarError) as exc:
                why = f"cannot export the base commit: {exc}"
                return BaseCollection(command, self.commit, None, why)
            outcome = self.shell.in_folder(folder).run(command, self.timeout_s, collect_only=True)
            report = outcome.pytest
            if outcome.timed_out:
                why = f"the collection timed out after {self.timeout_s:g} s"
                return BaseCollection(command, self.commit, None, why)
            problems = report_problems(report, collect_only=True) if report else ["no report"]
            if report is None or problems:
                return BaseCollection(command, self.commit, None, "; ".join(problems))
            ids: list[str] = []
            for s in report.sessions:
                ids += repo_ids(s, folder, s.selected if s.selected is not None else s.collected)
            return BaseCollection(command, self.commit, tuple(dict.fromkeys(ids)))
        finally:
            shutil.rmtree(folder, ignore_errors=True)


_PARAMS = re.compile(r"\[.*\]$", re.DOTALL)


def _function(nodeid: str) -> tuple[str, str]:
    """``(file, "Class::name")`` of a node id, parameters stripped."""
    path, _, rest = nodeid.partition("::")
    names = [n for n in rest.split("::") if n]
    if names:
        names[-1] = _PARAMS.sub("", names[-1])
    return path, "::".join(names)


def _definitions(body: list[ast.stmt], prefix: str, out: dict[str, int]) -> None:
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            out.setdefault(prefix + node.name, node.lineno)
        elif isinstance(node, ast.ClassDef):
            out.setdefault(prefix + node.name, node.lineno)
            _definitions(node.body, f"{prefix}{node.name}::", out)


_parsed: dict[tuple[str, int, int], dict[str, int] | None] = {}


def defined_line(root: Path, file: str, qualname: str) -> int | None:
    """The line where ``qualname`` (``name``, ``Class::name``) is defined in the Python file
    ``file`` (repo-relative) now, or None (not defined, not a Python file, or gone). A file
    that does not parse falls back to a ``def name`` text match."""
    path = root / file
    if not qualname or path.suffix != ".py":
        return None
    try:
        stat = path.stat()
    except OSError:
        return None
    text = read_regular_text(path)
    if text is None:
        return None
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    if len(_parsed) > 2000:
        _parsed.clear()
    if key not in _parsed:
        try:
            found: dict[str, int] | None = {}
            _definitions(ast.parse(text).body, "", found)
        except (SyntaxError, ValueError):
            found = None
        _parsed[key] = found
    names = _parsed[key]
    if names is None:
        last = re.escape(qualname.rsplit("::", 1)[-1])
        m = re.search(rf"^\s*(?:async\s+)?def\s+{last}\b", text, re.MULTILINE)
        return text.count("\n", 0, m.start()) + 1 if m else None
    return names.get(qualname)


def base_tests_not_run(
    root: Path, base: BaseCollection, report: PytestReport, label: str
) -> list[Finding]:
    """``tests_not_run`` findings, one per file: base tests still defined now that did not run.

    Args:
        root: the repository root (absolute).
        base: the base commit's collection for the command (with ``ids``).
        report: relay's report of the command's run now.
        label: the base commit as shown (short sha).
    """
    if base.ids is None:
        return []
    executed: set[str] = set()
    collected: set[str] = set()
    for s in report.sessions:
        executed.update(repo_ids(s, root, [t.nodeid for t in s.tests]))
        collected.update(repo_ids(s, root, s.collected))
    ran_functions = {_function(i) for i in executed}
    missing: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for nodeid in base.ids:
        if nodeid in executed:
            continue
        file, qualname = _function(nodeid)
        line = defined_line(root, file, qualname)
        if line is None:
            continue  # moved, renamed or deleted: the assertion rules judge it
        if (file, qualname) in ran_functions and nodeid not in collected:
            continue  # parameters changed: other instances of the test ran
        missing[file].append((line, nodeid))
    findings = []
    for file, items in sorted(missing.items()):
        ids = [i for _, i in items]
        shown = ", ".join(ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
        findings.append(
            Finding(
                "tests_not_run",
                file,
                min(n for n, _ in items),
                f"{len(ids)} test{'s' if len(ids) != 1 else ''} of the base commit {label} "
                f"still defined here did not run ({base.command}): {shown} — deselected, not "
                "collected, or the run stopped before them",
            )
        )
    return findings


def base_test_checks(
    root: Path,
    baseline: Baseline,
    runs: Sequence[tuple[str, CommandOutcome]],
    tests: BaseTests,
) -> list[Check]:
    """One ``tamper`` check per pytest command (or one failing check per file with base tests
    that did not run): the command's run now against its collection at the base commit. A
    base collection that failed is said in a passing check's evidence (that comparison only
    is skipped).

    Args:
        root: the repository root (absolute).
        baseline: the goal's base commit (for its label).
        runs: ``(command, outcome)`` of the pytest commands that produced a report.
        tests: collects the base commit's tests.
    """
    checks: list[Check] = []
    for command, outcome in runs:
        if outcome.pytest is None:
            continue
        target = f"base tests ({command})"
        base = tests.collection(command)
        if base.ids is None:
            evidence = (
                f"the tests of {baseline.label} were not compared with this run: collecting them "
                f"there failed ({base.problem})"
            )
            checks.append(Check("tamper", target, True, evidence))
            continue
        findings = base_tests_not_run(root, base, outcome.pytest, baseline.label)
        if findings:
            checks += [f.to_check() for f in findings]
            continue
        ran = len(set(base.ids) & set(_all_ids(root, outcome.pytest)))
        evidence = (
            f"{baseline.label} had no tests to compare with this run"
            if not base.ids
            else f"every test of {baseline.label} still defined ran: {ran} of its "
            f"{counted(len(base.ids), 'test')} ran now (the others were moved, renamed, "
            "re-parametrized or deleted)"
            if ran != len(base.ids)
            else f"every test of {baseline.label} ran ({counted(len(base.ids), 'test')})"
        )
        checks.append(Check("tamper", target, True, evidence))
    return checks


def _all_ids(root: Path, report: PytestReport) -> list[str]:
    return [i for s in report.sessions for i in repo_ids(s, root, [t.nodeid for t in s.tests])]
