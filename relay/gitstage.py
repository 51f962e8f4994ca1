"""Staging every change for a commit (a part of :class:`relay.gitrepo.GitRepo`; SPEC §11):
``git add -A`` (submodules updated without looking inside them), only the paths a remembered
scan found, or the round's changes staged and listed in one process (:meth:`stage_changes`).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

from relay import treewrites
from relay.errors import RepoStateError
from relay.gitbase import decode_path
from relay.gitscan import GitScan, TreeScan

__all__ = ["GitStaging", "parse_verbose_add"]

#: A submodule entry's mode (0o160000) as stored in the index (32-bit big-endian).
_GITLINK_MODE = (0o160000).to_bytes(4, "big")


_MAX_INCLUDED = 2000
_MAX_INCLUDED_BYTES = 64 * 1024
"""At most this many paths, and bytes of them, go on ``git commit``'s command line."""


def _excluding(gitlinks: list[bytes]) -> list[str]:
    """Pathspecs that leave out each submodule (raw index paths)."""
    return [f":(top,literal,exclude){os.fsdecode(p)}" for p in gitlinks]


_VERBOSE_ADD = re.compile(rb"(add|remove) '(.+)'")


def parse_verbose_add(out: bytes, root: Path, changed_from_ns: int = 0) -> list[str] | None:
    """The paths ``git add -A --verbose`` in ``root`` reports staging (``add 'path'`` for a
    new or changed file, ``remove 'path'`` for a deleted one; repo-relative, sorted), or None
    when its output cannot be read for certain: a line of another form, a path twice, a
    removed path that is there, or an added one that is not a file (or link) whose status
    changed at ``changed_from_ns`` (UNIX nanoseconds) or later. git prints paths raw, so a
    file name with a line break in it could read as two lines; the pieces must then each be
    files changed since, or relay scans instead."""
    paths: set[str] = set()
    for raw in out.split(b"\n"):
        if not raw:
            continue
        found = _VERBOSE_ADD.fullmatch(raw)
        if found is None:
            return None
        path = decode_path(found.group(2))
        if path in paths or not _as_listed(root / path, found.group(1), changed_from_ns):
            return None
        paths.add(path)
    return sorted(paths)


def _as_listed(path: Path, verb: bytes, changed_from_ns: int) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return verb == b"remove"
    return verb == b"add" and not stat.S_ISDIR(st.st_mode) and st.st_ctime_ns >= changed_from_ns


class GitStaging(GitScan):
    """Staging (see the module docstring)."""

    _committed: tuple[str, tuple[int, ...] | None] | None = None

    def _remember_clean(self, mark: int, head: str) -> None:
        """Remember that everything was committed at ``head``: the remembered scan, and that
        the index holds HEAD's tree while HEAD and the index file stay as they are now."""
        super()._remember_clean(mark, head)
        self._committed = (head, self._index_stat()) if self._remembering else None

    def _tree_may_change(self) -> None:
        super()._tree_may_change()
        self._committed = None

    def stage_changes(self, since: str) -> list[str]:
        """Stage every change of the working tree and return the paths that differ from commit
        ``since`` (:meth:`changed_paths`' answer).

        One ``git add -A --verbose`` when relay's own last commit is HEAD and ``since``, the
        index file is as that commit left it (so the index holds HEAD's tree: what ``git add``
        stages is exactly what changed) and there is no submodule; the next
        :meth:`relay.gitcommit.GitCommits.commit_all` then stages only the files relay writes
        meanwhile. Else, or when git's listing cannot be read for certain
        (:func:`parse_verbose_add`), the paths come from :meth:`changed_paths` (one ``git
        status``, or a diff when HEAD moved) and nothing more is staged here.

        Call it only where nobody but relay can write the index or move HEAD (the model's
        commands run in the sandbox, where the git directories are read-only): a listing
        taken before relay puts back what a command changed in git's configuration would
        follow the model's settings.

        Raises:
            RepoStateError: git refused to stage.
        """
        committed = self._committed
        head = self.head_sha()
        if (
            committed is None
            or committed != (head, self._index_stat())
            or since != head
            or self._gitlinks()
        ):
            return self.changed_paths(since)
        mark = treewrites.mark()
        out = self._check(["add", "-A", "--verbose"], "git add failed", read_only=False)
        index = committed[1]  # its modification time: when relay's commit wrote it
        paths = parse_verbose_add(out, self.root, index[3] if index else 0)
        if paths is None:
            return self.changed_paths(since)  # one git status: the staged changes count too
        if self._remembering:
            self._scan = TreeScan(mark, head, self._index_stat(), staged=True)
        return paths

    def _gitlinks(self) -> list[bytes]:
        """The index's submodule entries (raw paths); no git process when there are none."""
        try:
            index = (self._git_dir / "index").read_bytes()
        except FileNotFoundError:
            return []
        except OSError:
            index = _GITLINK_MODE
        split = any(self._git_dir.glob("sharedindex.*"))
        if _GITLINK_MODE not in index and not split:
            return []  # no entry can have the mode 160000
        out = self._check(["ls-files", "--stage", "-z"], "git ls-files failed")
        return [
            entry.partition(b"\t")[2] for entry in out.split(b"\0") if entry.startswith(b"160000 ")
        ]

    def _tracked_specs(self, scan: TreeScan, paths: set[str], new: set[str]) -> list[str]:
        """Literal pathspecs of ``paths`` when ``git commit --include`` can stage them all in
        the commit's own process (one git process less, one index write less): every path is
        tracked — none untracked in ``scan``, none that relay's writes since may have created
        (``new``) — the index has no submodule, and the list is short enough for a command
        line. Else ``[]`` (they are staged with ``git add`` first: ``--include`` would leave an
        untracked path out without a word)."""
        untracked = {path for xy, path in scan.entries if xy == "??"}
        if not paths or paths & (untracked | new) or len(paths) > _MAX_INCLUDED:
            return []
        specs = [f":(top,literal){p}" for p in sorted(paths)]
        if sum(len(s) + 1 for s in specs) > _MAX_INCLUDED_BYTES or self._gitlinks():
            return []
        return specs

    def _stage(self, paths: set[str] | None) -> None:
        """Stage every change, as ``git add -A`` does, or only ``paths`` (repo-relative) when
        they are known to hold every change (:meth:`_stage_paths`; everything is staged when
        git refuses them).

        Submodules are updated with ``git update-index`` instead: ``git add`` runs ``git
        status`` inside each submodule, with the submodule's own configuration (filters relay
        has not neutralised); ``update-index`` only reads the submodule's HEAD. At most one
        more process when the index has no submodule.
        """
        gitlinks = self._gitlinks()
        if paths is not None and self._stage_paths(paths, gitlinks):
            return
        args = ["add", "-A"]
        if gitlinks:
            args += ["--", ":/", *_excluding(gitlinks)]
        self._check(args, "git add failed", read_only=False)
        self._update_gitlinks(gitlinks)

    def _stage_paths(self, paths: set[str], gitlinks: list[bytes]) -> bool:
        """``git add -A`` of only ``paths``, literally (only the folders on their way are
        looked at). True when done: git also exits 1 when a named path is ignored (or outside
        a sparse checkout), after staging the others, and ``git add -A`` skips those too.
        False when git refused (a path that is nowhere, one inside a submodule…)."""
        links = {os.fsdecode(p) for p in gitlinks}
        specs = [f":(top,literal){p}" for p in sorted(paths) if p.rstrip("/") not in links]
        if specs:
            listing = [*specs, *_excluding(gitlinks)]
            status, _, _ = self._run(
                ["add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul"],
                read_only=False,
                stdin_bytes=b"".join(os.fsencode(spec) + b"\0" for spec in listing),
            )
            if status not in (0, 1):
                return False
        self._update_gitlinks([p for p in gitlinks if os.fsdecode(p) in paths])
        return True

    def _update_gitlinks(self, gitlinks: list[bytes]) -> None:
        if gitlinks:
            self._check(
                ["update-index", "--add", "--remove", "-z", "--stdin"],
                "git update-index failed",
                read_only=False,
                stdin_bytes=b"".join(p + b"\0" for p in gitlinks),
            )

    def tree_to_commit(self) -> str:
        """The tree relay would commit now (every change staged as :meth:`_stage` stages it,
        submodules left as the index holds them), written with a temporary copy of the index:
        the real index, HEAD and the files stay as they are. The audit judges this tree
        (:mod:`relay.audit_export`, issue 27), so that a file git ignores or an untracked
        folder git does not see cannot make a check pass.

        Returns:
            The tree's full object name.

        Raises:
            RepoStateError: git refused to stage or to write the tree.
        """
        with tempfile.TemporaryDirectory(prefix="relay-index-") as scratch:
            index = Path(scratch) / "index"
            try:
                shutil.copy2(self._git_dir / "index", index)  # its time: git's racy-file check
            except FileNotFoundError:
                pass  # no commit staged yet: git starts an empty index
            except OSError as exc:
                raise RepoStateError(f"cannot copy git's index: {exc}") from exc
            env = {"GIT_INDEX_FILE": str(index)}
            args = ["add", "-A", "--", ":/", *_excluding(self._gitlinks())]
            # read_only: only the temporary index is written, what relay remembers still holds
            self._check(args, "git add failed", env=env)
            out = self._check(["write-tree"], "git write-tree failed", env=env)
        return out.decode("ascii", "replace").strip()
