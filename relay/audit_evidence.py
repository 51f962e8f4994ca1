"""The model's checklist evidence (SPEC §9 step 3): every path it names must exist.

docs/audit.md §5 states the rule for users.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

from relay.audit_checks import Check

__all__ = ["check_checklist", "evidence_paths", "inside"]


def inside(root: Path, rel: str) -> Path | None:
    """``root / rel`` resolved, or None when it leads outside ``root``."""
    path = (root / rel).resolve()
    try:
        path.relative_to(root)
    except ValueError:
        return None
    return path


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
        whole_path = inside(root, whole) if whole and "\n" not in whole else None
        if whole_path is not None and whole_path != root and whole_path.exists():
            checks.append(Check("evidence", whole, True, f"{whole} exists{note(whole)}"))
            continue
        for rel in evidence_paths(evidence):
            path = inside(root, rel)
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
