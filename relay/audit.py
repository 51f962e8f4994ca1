"""The completion audit: ``complete`` is accepted only after the orchestrator has checked the
deliverables against real files and real test output (SPEC §9).

This module runs steps 1–3 and the basic form of step 5: every deliverable is checked against
the working tree (never the model's word), every ``command`` is re-run here, and every path that
the model's checklist names as evidence must exist. With no deliverables at all, at least one
change since the goal's base commit is required.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from relay.config import Deliverable


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
    """One audit check: ``kind`` (``file``, ``command``, ``changed``, ``evidence``), its target,
    whether it passed, and the evidence (exit code, output tail, path)."""

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


_NO_TESTS = re.compile(r"\bno tests ran\b|\bcollected 0 items\b", re.IGNORECASE)


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


def check_command(command: str, timeout_s: float, run: CommandRunner, tail_chars: int) -> Check:
    """A ``command`` deliverable, run by the orchestrator: exit 0 required; a pytest run that
    collected no test fails; a timeout fails with ``timed out after N s``."""
    outcome = run(command, timeout_s)
    tail = outcome.output[-tail_chars:].strip()
    if outcome.timed_out:
        return Check("command", command, False, f"timed out after {timeout_s:g} s\n{tail}")
    if tail.startswith("exit code"):  # the runner's own first line; say it once
        tail = tail.partition("\n")[2].strip()
    evidence = f"exit code {outcome.exit_code}\n{tail}".strip()
    if "pytest" in command and (outcome.exit_code == 5 or _NO_TESTS.search(outcome.output)):
        return Check("command", command, False, f"pytest collected no test\n{evidence}")
    return Check("command", command, outcome.exit_code == 0, evidence)


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


def check_checklist(
    root: Path,
    checklist: Iterable[dict[str, Any]],
    repo_files: Callable[[], Sequence[str]] = list,
) -> list[Check]:
    """SPEC §9 step 3: each checklist evidence item that names a path must exist.

    A whole evidence text that is an existing path passes as it is (``my file.txt``). A bare
    file name (no ``/``) also passes when a file of that name exists anywhere in the
    repository (``repo_files`` lists tracked and untracked paths, called at most once).
    """
    checks: list[Check] = []
    names: set[str] | None = None
    for item in checklist:
        evidence = str(item.get("evidence") or "")
        requirement = str(item.get("requirement") or "")[:80]
        whole = evidence.strip().strip("`'\" ")
        whole_path = _inside(root, whole) if whole and "\n" not in whole else None
        if whole_path is not None and whole_path != root and whole_path.exists():
            checks.append(Check("evidence", whole, True, f"{whole} exists"))
            continue
        for rel in evidence_paths(evidence):
            path = _inside(root, rel)
            if path is not None and path.exists():
                checks.append(Check("evidence", rel, True, f"{rel} exists"))
                continue
            if "/" not in rel:
                if names is None:
                    names = {p.rsplit("/", 1)[-1] for p in repo_files()}
                if rel in names:
                    checks.append(Check("evidence", rel, True, f"a file named {rel} exists"))
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


def run_audit(
    root: Path,
    deliverables: Sequence[Deliverable],
    *,
    changed_paths: Callable[[], list[str]],
    run_command: CommandRunner,
    checklist: Iterable[dict[str, Any]] = (),
    repo_files: Callable[[], Sequence[str]] = list,
    default_timeout_s: float = 600.0,
    evidence_chars: int = 2000,
) -> AuditResult:
    """Run the audit (SPEC §9 steps 1–3, and step 5's change requirement).

    Args:
        root: the repository root (absolute).
        deliverables: the goal's frozen deliverables.
        changed_paths: returns repo-relative paths changed since the goal's base commit
            (committed, uncommitted and untracked).
        run_command: runs a command deliverable (see :data:`CommandRunner`).
        checklist: the model's ``[{requirement, evidence}]``, if it gave one.
        repo_files: lists the repository's tracked and untracked files (relative paths).
        default_timeout_s: timeout of command deliverables without ``timeout_s``, seconds.
        evidence_chars: characters of command output kept as evidence.

    Returns:
        The result; with no deliverables it holds one ``changed`` check on ``**``.
    """
    checks: list[Check] = []
    changed: list[str] | None = None
    for d in deliverables:
        if d.kind == "file":
            checks.append(check_file(root, d))
        elif d.kind == "command":
            assert d.command is not None
            timeout = d.timeout_s or default_timeout_s
            checks.append(check_command(d.command, timeout, run_command, evidence_chars))
        else:
            assert d.changed is not None
            if changed is None:
                changed = changed_paths()
            checks.append(check_changed(d.changed, changed))
    if not deliverables:
        checks.append(check_changed("**", changed_paths() if changed is None else changed))
    checks += check_checklist(root, checklist, repo_files)
    return AuditResult(tuple(checks))
