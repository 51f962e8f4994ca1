"""No secret relay holds reaches a commit or a push (a part of :class:`relay.gitrepo.GitRepo`;
SPEC §11, §14; issue 27).

A model that got hold of a provider key can write it into a file of the repository (plain,
reversed, base64-encoded inside a longer blob, hex, URL-encoded: :mod:`relay.secret_scan`)
for relay's round-end commit to record and its push to carry off, or commit it itself with
``git commit`` in its shell, out of relay's commit. So, whenever relay holds a secret
(:func:`relay.secrets.secret_values`):

* :meth:`GitSecrets.refuse_staged_secrets`, called by
  :meth:`relay.gitcommit.GitCommits.commit_all` between staging and committing, reads every
  blob the commit would add or change (the index against HEAD: ``git diff-index --cached``,
  then one ``git cat-file --batch``) and the commit message, and raises
  :class:`relay.errors.SecretInCommitError` naming the files and the variables: nothing is
  committed, the files stay in the working tree;
* :meth:`GitSecrets.refuse_unpushed_secrets`, called by :meth:`relay.gitrefs.GitRefs.push`
  before ``git push``, reads every object the push would send — commits (their messages),
  trees (file names) and blobs of the branch not reachable from the remote's refs (``git
  rev-list --objects <branch> --not --remotes=<remote>``) — and raises
  :class:`relay.errors.SecretInPushError`: nothing is pushed.

When relay holds no secret neither starts a git process. Objects are read piece by piece
(memory stays bounded for a big file). An object git cannot show is an error
(:class:`relay.errors.RepoStateError`): the commit or push does not happen unscanned.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

from relay.errors import RepoStateError, SecretInCommitError, SecretInPushError
from relay.gitbase import FULL_SHA, GitBase, decode_path
from relay.secret_scan import Finding, SecretScanner
from relay.secrets import secret_values

__all__ = ["GitSecrets", "secret_message"]

_CHUNK = 1 << 20
"""Bytes of an object read at a time."""

_MAX_PLACES = 10
"""At most this many places are named in a refusal (and how many more there are)."""

_SKIPPED_MODES = frozenset({"000000", "160000"})
"""Index entries that are no blob of this repository: a deletion, a submodule's commit."""


def secret_message(found: dict[str, list[Finding]], *, push: str | None = None) -> str:
    """The refusal's text: what was refused, where each secret is (by variable name and
    encoding, never the value) and what to do.

    Args:
        found: ``{place: findings}``, a place being a path or e.g. ``the commit message``.
        push: ``"<branch> to <remote>"`` for a refused push; None for a commit.
    """
    places = sorted(found)
    shown = [
        f"{place} ({', '.join(sorted({f'{f.name}, {f.encoding}' for f in found[place]}))})"
        for place in places[:_MAX_PLACES]
    ]
    more = len(places) - len(shown)
    where = "; ".join(shown) + (f"; and {more} more" if more > 0 else "")
    if push is None:
        return (
            "relay did not commit: the changes hold a secret relay holds (a provider key, "
            f"plain or encoded), in {where}. Nothing was committed; the files stay in the "
            "working tree. Take the secret out of them (or delete them), then run the command "
            "again (`relay resume` continues a paused goal)"
        )
    return (
        f"relay did not push {push}: the commits to push hold a secret relay holds (a "
        f"provider key, plain or encoded), in {where}. Nothing was pushed. Take the secret "
        "out of the branch's history (e.g. `git rebase -i` to edit or drop the commits that "
        "added it; `git log -p` shows them), then `relay resume`"
    )


class GitSecrets(GitBase):
    """The secret scans of commits and pushes (see the module docstring)."""

    _scanner: tuple[tuple[tuple[str, str], ...], SecretScanner] | None = None

    def secret_scanner(self) -> SecretScanner:
        """The scanner for the secrets relay holds now (made again only when they change);
        false when there is none."""
        values = tuple(secret_values())
        cached = self._scanner
        if cached is None or cached[0] != values:
            cached = self._scanner = (values, SecretScanner(values))
        return cached[1]

    def refuse_staged_secrets(self, scanner: SecretScanner, message: str) -> None:
        """Raise when what is staged (the index against HEAD) or the commit ``message`` holds
        a secret ``scanner`` looks for.

        Raises:
            SecretInCommitError: a secret was found; the message names where.
            RepoStateError: git cannot list or show the staged objects.
        """
        if not scanner:
            return
        found: dict[str, list[Finding]] = {}
        in_message = scanner.find(message.encode("utf-8", "surrogateescape"))
        if in_message:
            found["the commit message (the round's note; `relay resume` writes its own)"] = (
                in_message
            )
        found.update(self._scan_objects(scanner, self._staged_blobs()))
        if found:
            raise SecretInCommitError(
                secret_message(found),
                places=tuple(sorted(found)),
                names=_names(found),
            )

    def refuse_unpushed_secrets(self, branch: str, remote: str) -> None:
        """Raise when an object that pushing ``branch`` to ``remote`` would send (one not
        reachable from any of ``refs/remotes/<remote>/``) holds a secret relay holds. No git
        process when relay holds none.

        Raises:
            SecretInPushError: a secret was found; the message names where.
            RepoStateError: git cannot list or show the objects.
        """
        scanner = self.secret_scanner()
        if not scanner:
            return
        out = self._check(
            ["rev-list", "--objects", f"refs/heads/{branch}", "--not", f"--remotes={remote}"],
            f"cannot list the objects a push of {branch} would send",
        )
        objects: list[tuple[str, str]] = []
        for line in out.split(b"\n"):
            sha, _, path = line.partition(b" ")
            if sha:
                objects.append((sha.decode("ascii", "replace"), decode_path(path)))
        found = self._scan_objects(scanner, objects)
        if found:
            raise SecretInPushError(
                secret_message(found, push=f"{branch} to {remote}"),
                places=tuple(sorted(found)),
                names=_names(found),
            )

    def _staged_blobs(self) -> list[tuple[str, str]]:
        """``(object name, path)`` of every blob the index adds or changes against HEAD
        (every staged blob when there is no commit yet); submodules and deletions left out."""
        status, out, err = self._run(
            ["diff-index", "--cached", "--no-renames", "--raw", "--no-abbrev", "-z", "HEAD"]
        )
        if status == 0:
            fields = out.split(b"\0")
            pairs = zip(fields[0::2], fields[1::2], strict=False)
            entries = [(meta.split(b" "), path) for meta, path in pairs if meta.startswith(b":")]
            return [
                (meta[3].decode("ascii"), decode_path(path))
                for meta, path in entries
                if len(meta) >= 5 and meta[1].decode("ascii") not in _SKIPPED_MODES
            ]
        if self._run(["rev-parse", "--verify", "-q", "HEAD^{commit}"])[0] == 0:
            raise RepoStateError(f"cannot list the staged changes: {err}")
        out = self._check(["ls-files", "--stage", "-z"], "cannot list the staged files")
        blobs = []
        for entry in out.split(b"\0"):
            meta, _, path = entry.partition(b"\t")
            parts = meta.split(b" ")
            if len(parts) == 3 and parts[0].decode("ascii") not in _SKIPPED_MODES:
                blobs.append((parts[1].decode("ascii"), decode_path(path)))
        return blobs

    def _scan_objects(
        self, scanner: SecretScanner, objects: list[tuple[str, str]]
    ) -> dict[str, list[Finding]]:
        """``{place: findings}`` of the ``(object name, path)`` pairs holding a secret, read
        with one ``git cat-file --batch``; a commit's place is its message, a tree's its file
        names. Raises ``RepoStateError`` when git cannot show one of them."""
        wanted = [(sha, path) for sha, path in objects if FULL_SHA.match(sha)]
        if not wanted:
            return {}
        feed = b"".join(sha.encode("ascii") + b"\n" for sha, _ in wanted)
        found: dict[str, list[Finding]] = {}
        with self._git.stream(["cat-file", "--batch"], feed) as out:
            for sha, path in wanted:
                kind, size = _header(out, sha)
                findings = scanner.find_in_chunks(_body(out, size))
                if findings:
                    found.setdefault(_place(kind, sha, path), []).extend(findings)
        return found


def _header(out: IO[bytes], sha: str) -> tuple[str, int]:
    """The type and size ``git cat-file --batch`` announces for ``sha``."""
    line = out.readline().rstrip(b"\n").split(b" ")
    if len(line) != 3 or line[0].decode("ascii", "replace") != sha or not line[2].isdigit():
        raise RepoStateError(f"git cannot show the object {sha} to scan it for secrets")
    return line[1].decode("ascii", "replace"), int(line[2])


def _body(out: IO[bytes], size: int) -> Iterator[bytes]:
    """The object's ``size`` bytes, piece by piece, then the newline after them."""
    left = size
    while left > 0:
        block = out.read(min(left, _CHUNK))
        if not block:
            raise RepoStateError("git stopped while showing objects to scan for secrets")
        left -= len(block)
        yield block
    out.read(1)


def _place(kind: str, sha: str, path: str) -> str:
    """Where an object's secret is, in words."""
    if kind == "commit":
        return f"the message of commit {sha[:7]}"
    if kind == "tree":
        return f"the file names in {path or 'the top folder'}"
    if kind == "tag":
        return f"the tag {sha[:7]}"
    return path or f"the object {sha[:7]}"


def _names(found: dict[str, list[Finding]]) -> tuple[str, ...]:
    return tuple(sorted({f.name for findings in found.values() for f in findings}))
