"""The folder the completion audit judges: a clean export of the commit relay would make
(issue 27, SPEC §9, §14).

A stranger who clones the branch gets the committed files and nothing else. The audit judges
exactly that: :func:`judged_export` writes the tree relay would commit now
(:meth:`relay.gitstage.GitStaging.tree_to_commit`: every change staged as at the round's
end, in a temporary index) into a fresh folder outside the working tree with ``git archive``.
No untracked file git ignores, no byte-code cache, no build artifact and no file the model
left beside the tree is there; the protected paths (``tools.protected_paths``, ``relay.yaml``,
the goal file) hold the base commit's content, whatever the tree holds. Only the project's
environment folders (:data:`ENVIRONMENT_FOLDERS`), which git never holds, are linked in
from the working tree so that ``.venv/bin/python -m pytest`` still runs.

The audit's commands then run in the export, in their own sandbox, with byte-code caches
off (:func:`bytecode_environment`): a ``.pyc`` planted anywhere cannot stand in for the
source. What is not in the commit cannot make a check pass.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from relay.errors import RelayError
from relay.globs import first_match

__all__ = [
    "ENVIRONMENT_FOLDERS",
    "AuditTree",
    "bytecode_environment",
    "export_tree",
    "judged_export",
    "restore_protected",
]

ENVIRONMENT_FOLDERS = (".venv", "venv", "node_modules")
"""Folders of the working tree linked into an export: a project's own virtual environment
or installed packages, which git does not hold (read-only inside the sandbox)."""


def bytecode_environment(scratch: Path) -> dict[str, str]:
    """The variables that keep a Python command from reading or writing byte-code caches:
    ``PYTHONDONTWRITEBYTECODE=1`` and ``PYTHONPYCACHEPREFIX`` naming ``scratch/pycache``, a
    folder that does not exist (Python then looks for no ``__pycache__`` beside a source and
    finds no cache under the prefix: every module is compiled from its source)."""
    return {
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPYCACHEPREFIX": str(scratch / "pycache"),
    }


def export_tree(root: Path, tree: str, folder: Path, *, link_environment: bool = True) -> None:
    """Write the tree (or commit) ``tree`` of the repository at ``root`` into the empty
    ``folder`` (relay's hardened git: no filter, hook or provider key, :mod:`relay.gitsafe`),
    then (``link_environment``) link the :data:`ENVIRONMENT_FOLDERS` the working tree has.

    Raises:
        OSError, RelayError, tarfile.TarError: git or the extraction failed.
    """
    from relay.gitrepo import GitRepo

    git = GitRepo(root)
    try:
        data = git.archive(tree)
    finally:
        git.close()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        try:
            tar.extractall(folder, filter="tar")
        except TypeError:  # Python before 3.11.4 has no filter; the tree is git's own
            tar.extractall(folder)
    if not link_environment:
        return
    for name in ENVIRONMENT_FOLDERS:
        source = root / name
        if source.is_dir() and not os.path.lexists(folder / name):
            (folder / name).symlink_to(source, target_is_directory=True)


def _files(folder: Path) -> Iterator[str]:
    """The repo-relative paths of the files (and symlinks) below ``folder``, without going
    into a linked folder."""
    for dirpath, dirnames, filenames in os.walk(folder):
        here = Path(dirpath)
        links = [d for d in dirnames if (here / d).is_symlink()]
        dirnames[:] = [d for d in dirnames if d not in links]
        for name in [*filenames, *links]:
            yield (here / name).relative_to(folder).as_posix()


def restore_protected(folder: Path, base: Path, protected: Sequence[str]) -> list[str]:
    """Make every protected path of the export ``folder`` hold what the base commit's export
    ``base`` holds there: a protected file the base commit does not have is removed, one it
    has is copied back (content and mode).

    Args:
        folder: the export being judged (absolute).
        base: the base commit's export (absolute).
        protected: protected entries (``tools.protected_paths`` syntax, :mod:`relay.globs`).

    Returns:
        The repo-relative paths that were put back or removed, sorted.
    """
    if not protected:
        return []
    changed: set[str] = set()
    before = {rel for rel in _files(base) if first_match(rel, protected, base) is not None}
    for rel in list(_files(folder)):
        if rel not in before and first_match(rel, protected, folder) is not None:
            _remove(folder / rel)
            changed.add(rel)
    for rel in before:
        source, target = base / rel, folder / rel
        if _same(source, target):
            continue
        _remove(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, target)
        changed.add(rel)
    return sorted(changed)


def _same(a: Path, b: Path) -> bool:
    if a.is_symlink() or b.is_symlink():
        return a.is_symlink() and b.is_symlink() and os.readlink(a) == os.readlink(b)
    try:
        same_mode = (a.stat().st_mode & 0o111) == (b.stat().st_mode & 0o111)
        return same_mode and a.read_bytes() == b.read_bytes()
    except OSError:
        return False


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()


def _build(root: Path, scratch: Path, base_commit: str | None, protected: Sequence[str]) -> Path:
    """The export in ``scratch/tree`` (see :func:`judged_export`)."""
    from relay.gitrepo import GitRepo

    git = GitRepo(root)
    try:
        tree = git.tree_to_commit()
    finally:
        git.close()
    folder = scratch / "tree"
    folder.mkdir()
    export_tree(root, tree, folder)
    if base_commit is not None and protected:
        base = scratch / "base"
        base.mkdir()
        export_tree(root, base_commit, base, link_environment=False)
        restore_protected(folder, base, protected)
        shutil.rmtree(base, ignore_errors=True)
    return folder


class AuditTree:
    """The judged export (:func:`judged_export`): ``folder`` stays as exported (files and
    deliverables are read there), and each command runs in a copy of its own
    (:meth:`fresh`), so that no command leaves anything for the next one.

    Args:
        folder: the export (absolute).
        scratch: a private folder beside it, removed with it.
    """

    def __init__(self, folder: Path, scratch: Path) -> None:
        self.folder = folder
        self.scratch = scratch

    @contextmanager
    def fresh(self) -> Iterator[Path]:
        """A new copy of the export (symlinks copied as links), removed when the block ends.

        Raises:
            RelayError: the copy could not be made.
        """
        try:
            place = Path(tempfile.mkdtemp(prefix="run-", dir=self.scratch))
            copy = place / self.folder.name
            shutil.copytree(self.folder, copy, symlinks=True)
        except OSError as exc:
            raise RelayError(f"cannot copy the commit to audit: {exc}") from exc
        try:
            yield copy
        finally:
            shutil.rmtree(place, ignore_errors=True)


@contextmanager
def judged_export(
    root: Path, base_commit: str | None, protected: Sequence[str] = ()
) -> Iterator[AuditTree]:
    """The tree relay would commit now in ``root``, exported into a fresh folder outside it,
    with the protected paths as at ``base_commit`` (see the module docstring); removed when
    the block ends.

    Args:
        root: the repository root (absolute).
        base_commit: the goal's base commit (full sha), or None (nothing restored).
        protected: the protected entries (without the progress file).

    Raises:
        RelayError: git could not build or export the tree, or the folder could not be made
            (the message says which).
    """
    try:
        scratch = Path(tempfile.mkdtemp(prefix="relay-audit-"))
    except OSError as exc:
        raise RelayError(f"cannot make a folder for the commit to audit: {exc}") from exc
    try:
        try:
            folder = _build(root, scratch, base_commit, protected)
        except (OSError, tarfile.TarError) as exc:
            raise RelayError(f"cannot export the commit to audit: {exc}") from exc
        yield AuditTree(folder, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
