"""The completion audit: ``complete`` is accepted only after the orchestrator has checked the
deliverables against real files and real test output (SPEC §9).

The checks of a result come in this order:

* every deliverable, checked against the working tree, never the model's word (§9 step 1);
  every ``command`` deliverable is re-run here (:func:`shell_runner`: the ``shell`` tool's
  process-group kill on timeout, closed stdin, bounded output, ``CI=1``), and a test run that
  proved nothing (no test collected, every test skipped) fails (step 2);
* with no deliverables at all: a change since the goal's base commit, and a passing run of
  the project's test command (:mod:`relay.testcmd`) when one is detected (step 5);
* tamper checks against the base commit (:mod:`relay.tamper`, step 4);
* every path the model's checklist names as evidence must exist, and its evidence says
  whether it changed since the goal started (step 3).

docs/audit.md states every rule for users.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from relay.config import Deliverable
from relay.testcmd import TestCommand, discover_test_command, no_tests_reason
from relay.tools import ToolContext, run_shell

if TYPE_CHECKING:
    from relay.tamper import Baseline


@dataclass(frozen=True)
class CommandOutcome:
    """What running an audit command gave: ``exit_code`` (None when it timed out), the
    combined output tail (text), and whether it timed out after ``timeout_s`` seconds."""

    exit_code: int | None
    output: str
    timed_out: bool = False
    timeout_s: float = 0.0


CommandRunner = Callable[[str, float], CommandOutcome]
"""Runs a shell command in the repository root with a timeout in seconds."""


@dataclass(frozen=True)
class Check:
    """One audit check: ``kind`` (``file``, ``command``, ``changed``, ``tests`` (the discovered
    test command), ``tamper``, ``evidence``), its target, whether it passed, and the evidence
    (exit code, output tail, path, file and line)."""

    kind: str
    target: str
    passed: bool
    evidence: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "target": self.target,
            "passed": self.passed,
            "evidence": self.evidence,
        }


@dataclass(frozen=True)
class AuditResult:
    """The checks of one audit; it passed when every check passed (and there was one)."""

    checks: tuple[Check, ...]

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)

    def failures_text(self) -> str:
        """The failing checks with their evidence, as the model sees them on rejection."""
        lines = []
        for c in self.checks:
            if not c.passed:
                lines.append(f"- {c.kind} {c.target}: FAILED\n{_indent(c.evidence)}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "checks": [c.to_dict() for c in self.checks]}


def _indent(text: str) -> str:
    return "\n".join("    " + ln for ln in text.strip().splitlines())


def _inside(root: Path, rel: str) -> Path | None:
    path = (root / rel).resolve()
    try:
        path.relative_to(root)
    except ValueError:
        return None
    return path


def check_file(root: Path, d: Deliverable) -> Check:
    """A ``file`` deliverable: the path exists inside the repository, and contains/matches."""
    assert d.file is not None
    path = _inside(root, d.file)
    if path is None:
        return Check("file", d.file, False, "the path is outside the repository")
    if not path.is_file():
        return Check("file", d.file, False, f"{d.file} does not exist")
    text = path.read_text(encoding="utf-8", errors="replace")
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


def check_command(
    command: str,
    timeout_s: float,
    run: CommandRunner,
    tail_chars: int,
    *,
    kind: str = "command",
    note: str = "",
) -> Check:
    """A command run by the orchestrator (SPEC §9 step 2): exit 0 required; a test run that
    proved nothing fails (:func:`relay.testcmd.no_tests_reason`: no test collected, every test
    skipped, ``[no test files]``…); a timeout fails with ``timed out after N s``.

    Args:
        command: the shell command.
        timeout_s: its timeout, seconds.
        run: runs it (see :data:`CommandRunner`).
        tail_chars: characters of output kept as evidence (the tail).
        kind: the check's kind (``command``, or ``tests`` for a discovered test command).
        note: a first line of evidence (why a discovered command was chosen).
    """
    outcome = run(command, timeout_s)
    tail = outcome.output[-tail_chars:].strip()
    head = f"{note}\n" if note else ""
    if outcome.timed_out:
        return Check(kind, command, False, f"{head}timed out after {timeout_s:g} s\n{tail}")
    if tail.startswith("exit code"):  # the runner's own first line; say it once
        tail = tail.partition("\n")[2].strip()
    evidence = f"{head}exit code {outcome.exit_code}\n{tail}".strip()
    empty = no_tests_reason(command, outcome.output, outcome.exit_code)
    if empty is not None:
        return Check(kind, command, False, f"{empty}\n{evidence}")
    return Check(kind, command, outcome.exit_code == 0, evidence)


def shell_runner(ctx: ToolContext, evidence_chars: int) -> CommandRunner:
    """The audit's command runner: the ``shell`` tool (SPEC §5) in the repository root, with
    stdin closed, the credential-free environment plus ``CI=1`` (so that watch-mode test
    runners run once), its whole process group killed at the timeout, and output bounded to
    about ``evidence_chars`` characters (the whole output goes to ``ctx.run_dir``).

    Args:
        ctx: the tool context of the run (repository root, run folder).
        evidence_chars: characters of output kept (``audit.evidence_chars``).
    """

    def run(command: str, timeout_s: float) -> CommandOutcome:
        bounded = replace(ctx, output_limit_bytes=evidence_chars, max_shell_timeout_s=timeout_s)
        result = run_shell(bounded, command, max(1, round(timeout_s)), env={"CI": "1"})
        return CommandOutcome(result.exit_code, result.content, result.timed_out, timeout_s)

    return run


GENERATED = re.compile(
    r"(^|/)(__pycache__|\.pytest_cache|\.mypy_cache|\.ruff_cache|\.hypothesis|\.tox|\.nox|"
    r"node_modules)(/|$)|\.py[co]$|(^|/)\.coverage$|(^|/)\.DS_Store$"
)
"""Paths that running code or tests creates (caches, byte code, dependencies): they are no
change of the goal's work (SPEC §9 step 5)."""


def work_paths(paths: Iterable[str]) -> list[str]:
    """``paths`` without generated files (:data:`GENERATED`)."""
    return [p for p in paths if not GENERATED.search(p)]


def check_changed(pattern: str, changed: Sequence[str]) -> Check:
    """A ``changed`` deliverable: some path matching the glob changed since the base commit."""
    hits = [p for p in changed if _glob_match(p, pattern)]
    if hits:
        shown = ", ".join(hits[:10]) + (f" and {len(hits) - 10} more" if len(hits) > 10 else "")
        return Check("changed", pattern, True, f"changed since the goal started: {shown}")
    return Check(
        "changed", pattern, False, f"nothing matching {pattern} changed since the goal started"
    )


def _glob_match(path: str, pattern: str) -> bool:
    if fnmatch.fnmatchcase(path, pattern):
        return True
    if pattern.endswith("/**"):
        return path.startswith(pattern[:-3] + "/")
    if "/**/" in pattern:
        return fnmatch.fnmatchcase(path, pattern.replace("/**/", "/"))
    return False


_PATH_EXTENSIONS = frozenset(
    "py pyi js jsx ts tsx mjs cjs json md rst txt yaml yml toml cfg ini go rs java kt c h cc "
    "cpp hpp rb php sh bash sql html css scss xml csv lock gradle swift cs ex exs erl hs ml "
    "scala lua pl r ipynb env conf tf proto".split()
)
_TOKEN = re.compile(r"[\w./\\-]+")


_STRIP = "()[]{}<>,;!?*\"'`"


def _clean_token(raw: str) -> str:
    """A token without surrounding punctuation, ``:line[:col]`` or a pytest ``::node`` part."""
    token = raw
    while True:
        before = token
        token = token.strip(_STRIP).rstrip(".:")
        token = token.split("::", 1)[0]
        token = re.sub(r":\d+(:\d+)?$", "", token)
        if token == before:
            return token


def evidence_paths(evidence: str) -> list[str]:
    """Paths named in a checklist evidence text (SPEC §9 step 3).

    A token names a path when its last component has a known source or document extension
    (``src/pool.py:12``, ``README.md``, ``tests/test_a.py::test_b``), or it is a folder path
    ending in ``/``. Prose with slashes (``12/12``, ``and/or``, ``N/A``) and URLs name none,
    and neither does a bare ``name.js`` outside backticks (library names such as node.js).
    """
    out: list[str] = []
    for raw in evidence.split():
        if "://" in raw:
            continue
        token = _clean_token(raw)
        if not token or not _TOKEN.fullmatch(token) or token.startswith(("-", "/")):
            continue
        last = token.rstrip("/").rsplit("/", 1)[-1]
        ext = last.rsplit(".", 1)[-1].lower() if "." in last else ""
        is_folder = token.endswith("/") and any(ch.isalpha() for ch in token)
        if ext == "js" and "/" not in token and "`" not in raw:
            continue
        if ext in _PATH_EXTENSIONS or is_folder:
            out.append(token)
    return out


def _change_note(rel: str, changed: Collection[str] | None, by_name: bool = False) -> str:
    if changed is None:
        return ""
    folder = rel.rstrip("/") + "/"
    hit = any(
        p == rel or p.startswith(folder) or (by_name and p.rsplit("/", 1)[-1] == rel)
        for p in changed
    )
    return "; changed since the goal started" if hit else "; unchanged since the goal started"


def check_checklist(
    root: Path,
    checklist: Iterable[dict[str, Any]],
    repo_files: Callable[[], Sequence[str]] = list,
    changed_paths: Callable[[], Collection[str]] | None = None,
) -> list[Check]:
    """SPEC §9 step 3: each checklist evidence item that names a path must exist.

    A whole evidence text that is an existing path passes as it is (``my file.txt``). A bare
    file name (no ``/``) also passes when a file of that name exists anywhere in the
    repository (``repo_files`` lists tracked and untracked paths, called at most once). When
    ``changed_paths`` is given (the goal has a base commit), the evidence of an existing path
    says whether it ``changed since the goal started`` or is ``unchanged since the goal
    started`` (a note, not a failure; called at most once).
    """
    checks: list[Check] = []
    names: set[str] | None = None
    changed: Collection[str] | None = None

    def note(rel: str, by_name: bool = False) -> str:
        nonlocal changed
        if changed_paths is None:
            return ""
        if changed is None:
            changed = set(changed_paths())
        return _change_note(rel, changed, by_name)

    for item in checklist:
        evidence = str(item.get("evidence") or "")
        requirement = str(item.get("requirement") or "")[:80]
        whole = evidence.strip().strip("`'\" ")
        whole_path = _inside(root, whole) if whole and "\n" not in whole else None
        if whole_path is not None and whole_path != root and whole_path.exists():
            checks.append(Check("evidence", whole, True, f"{whole} exists{note(whole)}"))
            continue
        for rel in evidence_paths(evidence):
            path = _inside(root, rel)
            if path is not None and path.exists():
                checks.append(Check("evidence", rel, True, f"{rel} exists{note(rel)}"))
                continue
            if "/" not in rel:
                if names is None:
                    names = {p.rsplit("/", 1)[-1] for p in repo_files()}
                if rel in names:
                    checks.append(
                        Check("evidence", rel, True, f"a file named {rel} exists{note(rel, True)}")
                    )
                    continue
            checks.append(
                Check(
                    "evidence",
                    rel,
                    False,
                    f"the checklist names {rel} as evidence for {requirement!r}, but it does "
                    "not exist (name only files that exist as evidence)",
                )
            )
    return checks


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
        try:
            return (root / rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    found = discover_test_command(read_now, files)
    if found is not None and baseline is not None:
        return TestCommand(found.command, f"{found.reason} (added since {baseline.label})")
    return found


NO_TEST_COMMAND = (
    "no test command detected (looked for: a pytest configuration, package.json "
    "scripts.test, go.mod, Cargo.toml, a Makefile test: target, Python test files, tox.ini, "
    "noxfile.py)"
)


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
        default_timeout_s: timeout of command deliverables without ``timeout_s``, and of the
            discovered test command, seconds.
        evidence_chars: characters of command output kept as evidence.
        baseline: the base commit, the changes since it and the protected paths; given, the
            tamper checks run (:func:`relay.tamper.tamper_checks`) and checklist evidence
            says whether each path changed.
        test_command: discovers the fallback's test command; default
            :func:`discover_for_audit`.

    Returns:
        The result. With no deliverables it holds a ``changed`` check on ``**`` and a
        ``tests`` check (the discovered command's run, or a note that none was detected).
    """
    if changed_paths is None:
        if baseline is None:
            raise ValueError("run_audit needs changed_paths or a baseline")
        source = baseline

        def changed_paths() -> list[str]:
            return [p for _, p in source.changed()]

    checks: list[Check] = []
    changed: list[str] | None = None

    def changes() -> list[str]:
        nonlocal changed
        if changed is None:
            changed = work_paths(changed_paths())
        return changed

    for d in deliverables:
        if d.kind == "file":
            checks.append(check_file(root, d))
        elif d.kind == "command":
            assert d.command is not None
            timeout = d.timeout_s or default_timeout_s
            checks.append(check_command(d.command, timeout, run_command, evidence_chars))
        else:
            assert d.changed is not None
            checks.append(check_changed(d.changed, changes()))
    if not deliverables:
        change = check_changed("**", changes())
        checks.append(change)
        discover = test_command or (lambda: discover_for_audit(root, repo_files, baseline))
        found = discover()
        if found is None:
            checks.append(Check("tests", "none detected", True, NO_TEST_COMMAND))
        elif not change.passed:
            checks.append(
                Check(
                    "tests",
                    found.command,
                    False,
                    f"discovered: {found.reason}\nnot run: nothing changed since the goal started",
                )
            )
        else:
            checks.append(
                check_command(
                    found.command,
                    default_timeout_s,
                    run_command,
                    evidence_chars,
                    kind="tests",
                    note=f"discovered: {found.reason}",
                )
            )
    if baseline is not None:
        from relay.tamper import tamper_checks  # relay.tamper builds on this module's Check

        checks += tamper_checks(root, baseline)
    checks += check_checklist(
        root, checklist, repo_files, changes if baseline is not None else None
    )
    return AuditResult(tuple(checks))
