"""What the audit compares the working tree with: the goal's base commit (SPEC §9 step 4).

:class:`Baseline` (the commit, the changes since, the protected and exempt paths),
:class:`Finding` (one tamper finding) and :class:`FileTexts` (the base and current texts of
changed files, read once) are shared by the tamper rules (:mod:`relay.tamper`,
:mod:`relay.test_infra`) and the base-commit test comparison (:mod:`relay.audit_base`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from relay.audit_checks import GENERATED, Check
from relay.fsread import read_regular_bytes

if TYPE_CHECKING:
    from relay.gitrepo import GitRepo

__all__ = ["Baseline", "FileTexts", "Finding", "goal_baseline", "relay_owned"]


@dataclass(frozen=True)
class Finding:
    """One tamper finding: the ``rule`` (``deleted_test``, ``renamed_test``, ``skip_marker``,
    ``tests_excluded``, ``weakened_assertion``, ``protected_path``, ``test_infra``,
    ``tests_not_run``), the repo-relative ``path``, the 1-based ``line`` (in the working tree;
    in the base commit for what was removed; None for a whole file), and the ``detail`` a
    person reads."""

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
        sha: the commit's full sha (None when unknown: then the base commit's tests are not
            collected).
        repo_root: the repository whose commit it is (for ``git archive``), if known.
        listed: lists every file git sees in the working tree (tracked, and untracked files it
            does not ignore), if known: a recently changed file missing from it is ignored.
        started_at: when the goal started (UNIX seconds), if known: files git does not see
            (ignored folders such as ``.venv``) that changed since then are checked for
            start-up hooks (:mod:`relay.test_infra`).
    """

    commit: str
    changes: Sequence[tuple[str, str]]
    read_base: Callable[[str], str | None]
    protected: tuple[str, ...] = ()
    exempt: frozenset[str] = field(default_factory=frozenset)
    sha: str | None = None
    repo_root: Path | None = None
    started_at: float | None = None
    listed: Callable[[], Sequence[str]] | None = None

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

    def all_changed(self) -> list[tuple[str, str]]:
        """The changes without the exempt paths, generated files included (a ``.pyc`` in a
        source folder is importable code)."""
        return [(letter, p) for letter, p in self.changes if p not in self.exempt]


class FileTexts:
    """The base and current texts of the changed files, read once (binary files: None).

    Args:
        root: the repository root (absolute).
        baseline: the changes and the reader of base texts.
    """

    def __init__(self, root: Path, baseline: Baseline) -> None:
        self.root = root
        self.baseline = baseline
        self.letters = dict((p, letter) for letter, p in baseline.all_changed())
        self._base: dict[str, str | None] = {}
        self._now: dict[str, str | None] = {}

    def base(self, path: str) -> str | None:
        """The text of ``path`` at the base commit (None: absent or added since)."""
        if path not in self._base:
            letter = self.letters.get(path)
            self._base[path] = None if letter == "A" else self.baseline.read_base(path)
        return self._base[path]

    def now(self, path: str) -> str | None:
        """The text of ``path`` in the working tree (None: deleted, unreadable or binary)."""
        if path not in self._now:
            text: str | None = None
            if self.letters.get(path) != "D":
                raw = read_regular_bytes(self.root / path)  # no FIFO, device or endless file
                if raw is not None and b"\0" not in raw[:8192]:
                    text = raw.decode("utf-8", "replace")
            self._now[path] = text
        return self._now[path]


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
    started_at: float | None = None,
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
        started_at: when the goal started (UNIX seconds, the store's ``created_at``); given,
            files git does not see (``.venv`` …) are checked for start-up hooks changed since.

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
        sha=git.resolve(commit),
        repo_root=git.root,
        started_at=started_at,
        listed=git.files,
    )
