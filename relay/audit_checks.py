"""The audit's result types (SPEC §9): one check, the whole result, and what counts as no work.

Shared by :mod:`relay.audit` and the modules of its rules (:mod:`relay.tamper`,
:mod:`relay.test_infra`, :mod:`relay.audit_commands`, :mod:`relay.audit_base`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from relay import globs

__all__ = ["GENERATED", "AuditResult", "Check", "glob_match", "indent", "work_paths"]


@dataclass(frozen=True)
class Check:
    """One audit check: ``kind`` (``file``, ``command``, ``changed``, ``tests`` (the discovered
    test command), ``tamper``, ``suspicious``, ``evidence``), its target, whether it passed,
    and the evidence (exit code, output tail, path, file and line)."""

    kind: str
    target: str
    passed: bool
    evidence: str

    def to_dict(self) -> dict[str, Any]:
        """``{kind, target, passed, evidence}`` (stored, and in ``--json``)."""
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
        """At least one check, and every check passed."""
        return bool(self.checks) and all(c.passed for c in self.checks)

    def failures_text(self) -> str:
        """The failing checks with their evidence, as the model sees them on rejection."""
        lines = []
        for c in self.checks:
            if not c.passed:
                lines.append(f"- {c.kind} {c.target}: FAILED\n{indent(c.evidence)}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """``{passed, checks: [...]}``."""
        return {"passed": self.passed, "checks": [c.to_dict() for c in self.checks]}


def indent(text: str) -> str:
    """Every line of ``text`` (stripped) indented by four spaces."""
    return "\n".join("    " + ln for ln in text.strip().splitlines())


GENERATED = re.compile(
    r"(^|/)(__pycache__|\.pytest_cache|\.mypy_cache|\.ruff_cache|\.hypothesis|\.tox|\.nox|"
    r"node_modules)(/|$)|\.py[co]$|(^|/)\.coverage$|(^|/)\.DS_Store$"
)
"""Paths that running code or tests creates (caches, byte code, dependencies): they are no
change of the goal's work (SPEC §9 step 5)."""


def work_paths(paths: Iterable[str]) -> list[str]:
    """``paths`` without generated files (:data:`GENERATED`)."""
    return [p for p in paths if not GENERATED.search(p)]


def glob_match(path: str, pattern: str) -> bool:
    """Whether the repo-relative ``path`` matches a deliverable's ``changed:`` glob: gitignore's
    wildmatch rules, the same as the protected paths' (:mod:`relay.globs`)."""
    return globs.glob_match(path, pattern)
