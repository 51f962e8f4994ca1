"""Committing and reading history (a part of :class:`relay.gitrepo.GitRepo`; SPEC §11):
relay's commits (every change staged, trailers, no hooks), the recent log, a file as of a
commit, HEAD's trailers.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from relay import treewrites
from relay.errors import RepoStateError
from relay.gitstage import GitStaging

__all__ = ["CommitSummary", "GitCommits"]

_TRAILER_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*$")
_TRAILER_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9-]*)\s*:\s?(.*)$")

_SHORTSTAT = re.compile(r"^\s*\d+ files? changed")
_LOG_CACHE_MAX = 100


@dataclass(frozen=True)
class CommitSummary:
    """One commit as shown in ``relay status`` / the round message.

    Attributes:
        sha: full hexadecimal object name (40 characters, 64 in SHA-256 repositories).
        short: the first 7 characters of ``sha``.
        subject: the first line of the commit message.
        shortstat: git's ``--shortstat`` line, e.g. ``"2 files changed, 10 insertions(+),
            1 deletion(-)"``; ``""`` for an empty commit or a merge.
    """

    sha: str
    short: str
    subject: str
    shortstat: str


class GitCommits(GitStaging):
    """Commits and history (see the module docstring)."""

    _identities: dict[tuple[str, str], dict[str, str]] | None = None
    # (head sha, newest-first summaries, whether they are the whole history): lets the
    # round message reuse the log after relay's own commits without a git process.
    _log_cache: tuple[str, list[CommitSummary], bool] | None = None

    def _forget_log(self) -> None:
        """Drop the cached log (the branch moved in a way relay did not record)."""
        self._log_cache = None

    def _identity_env(self, author_name: str, author_email: str) -> dict[str, str]:
        """GIT_AUTHOR_*/GIT_COMMITTER_* for the parts of the identity nobody configured
        (looked up once per repository object: one git process saved per commit)."""
        if self._identities is None:
            self._identities = {}
        key = (author_name, author_email)
        cached = self._identities.get(key)
        if cached is None:
            cached = self._identities[key] = self._lookup_identity(author_name, author_email)
        return cached

    def _lookup_identity(self, author_name: str, author_email: str) -> dict[str, str]:
        status, out, _ = self._run(
            ["config", "--get-regexp", r"^(user|author|committer)\.(name|email)$"]
        )
        configured: set[str] = set()
        if status == 0:
            for line in out.decode("utf-8", "replace").splitlines():
                key, _, value = line.partition(" ")
                if value.strip():
                    configured.add(key.lower())
        env: dict[str, str] = {}
        for role in ("author", "committer"):
            for field, default in (("name", author_name), ("email", author_email)):
                var = f"GIT_{role.upper()}_{field.upper()}"
                if os.environ.get(var):
                    continue
                if f"{role}.{field}" in configured or f"user.{field}" in configured:
                    continue
                if field == "email" and os.environ.get("EMAIL"):
                    continue
                env[var] = default
        return env

    @staticmethod
    def _message(subject: str, body: str, trailers: Mapping[str, str] | None) -> str:
        subject_line = " ".join(subject.split()) or "relay: commit"
        paragraphs = [subject_line]
        if body.strip():
            paragraphs.append(body.strip("\n").rstrip())
        if trailers:
            lines = []
            for key, value in trailers.items():
                if not _TRAILER_KEY.match(key):
                    raise ValueError(f"invalid git trailer key {key!r}")
                lines.append(f"{key}: {' '.join(str(value).split())}")
            paragraphs.append("\n".join(lines))
        return "\n\n".join(paragraphs).replace("\0", "\\0") + "\n"  # git refuses NUL bytes

    def commit_all(
        self,
        subject: str,
        *,
        body: str = "",
        trailers: dict[str, str] | None = None,
        author_name: str = "goal-relay",
        author_email: str = "relay@localhost",
    ) -> str:
        """Stage every change (``git add -A``) and commit it; return the new commit's full sha.

        New, modified and deleted files are committed; ignored files are not. While the last
        scan of the tree holds (:mod:`relay.gitscan`: no command ran since), only the paths it
        found and the files relay wrote since are staged, so the tree is not scanned twice;
        after the commit the tree is known to be clean until something writes it. The message is
        ``subject``, a blank line, ``body`` (if any), a blank line and the trailers, one
        ``Key: value`` line each, as the final paragraph (readable by ``git interpret-trailers
        --parse`` and :meth:`head_trailers`). Lines of ``body`` starting with ``#`` are kept.
        An empty commit is made when nothing changed. Hooks do not run (``--no-verify`` and no
        hooks path). At most three git processes (config once, add, commit; two more when
        the index has submodules, which are staged without looking inside them); no add when
        the scan found nothing and nothing was written, or when every path to stage is
        tracked (``git commit --include`` stages them: :meth:`_tracked_specs`); the sha is
        read in-process. When relay holds a secret, everything is staged first and the staged
        blobs and the message are scanned for it (two more processes,
        :meth:`refuse_staged_secrets`; issue 27): nothing is committed when one holds it.

        Args:
            subject: the first line; internal whitespace and newlines are collapsed to spaces.
            body: free text, may span paragraphs.
            trailers: e.g. ``{"Relay-Goal": "12", "Relay-Round": "3"}``; keys are letters,
                digits and hyphens, values are put on one line.
            author_name: used for author and committer only when git has no configured name
                (``user.name``/``author.name``/``committer.name`` or ``GIT_*_NAME``).
            author_email: likewise for the e-mail address.

        Raises:
            RepoStateError: git refused to stage or commit (its message is included).
            SecretInCommitError: the commit would hold a secret relay holds (plain or
                encoded); the changes stay staged and in the tree.
            ValueError: a trailer key is not a valid trailer token.
        """
        message = self._message(subject, body, trailers)
        env = self._identity_env(author_name, author_email)
        parent = self.head_sha() if self._log_cache is not None else None
        mark = treewrites.mark()  # writes after this may escape the staging below
        remembered = self._remembered()
        include: list[str] = []
        scanner = self.secret_scanner()  # false when relay holds no secret
        if remembered is None:
            self._stage(None)
        else:
            scan, written, new = remembered
            paths = scan.paths_to_stage(self.root) | written
            include = [] if scanner else self._tracked_specs(scan, paths, new)
            if paths and not include:
                self._stage(paths)
        self.refuse_staged_secrets(scanner, message)  # what is staged is what is committed
        out = self._check(
            [
                "commit",
                "--no-status",
                "--no-verify",
                "--allow-empty",
                "--cleanup=whitespace",
                "--no-edit",
                "-F",
                "-",
                *(["--include", "--", *include] if include else []),
            ],
            "git commit failed",
            read_only=False,
            env=env,
            stdin_bytes=message.encode("utf-8"),
        )
        sha = self.head_sha()
        self._remember_clean(mark, sha)
        self._remember_commit(parent, sha, message, out.decode("utf-8", "replace"))
        return sha

    def _remember_commit(self, parent: str | None, sha: str, message: str, output: str) -> None:
        """Put relay's new commit ``sha`` (made on ``parent``) on top of the cached log, from
        the commit's ``message`` and git's ``output`` (its shortstat line)."""
        cache = self._log_cache
        if cache is None or cache[0] != parent:
            self._log_cache = None
            return
        stat = next((ln.strip() for ln in output.splitlines() if _SHORTSTAT.match(ln)), "")
        summary = message.split("\n", 1)[0]
        entry = CommitSummary(sha=sha, short=sha[:7], subject=summary, shortstat=stat)
        self._log_cache = (sha, [entry, *cache[1][:_LOG_CACHE_MAX]], cache[2])

    def recent_commits(self, n: int) -> list[CommitSummary]:
        """The last ``n`` commits reachable from HEAD, newest first, with their shortstat.

        One ``git log`` process whatever the history's length. Empty when ``n <= 0`` or the
        repository has no commits.
        """
        if n <= 0:
            return []
        cache = self._log_cache
        if cache is not None and cache[0] == self.head_sha() and (cache[2] or len(cache[1]) >= n):
            return list(cache[1][:n])
        commits = self._log(n)
        if commits:
            self._log_cache = (commits[0].sha, commits, len(commits) < n)
        return commits

    def _log(self, n: int) -> list[CommitSummary]:
        status, out, err = self._run(
            [
                "log",
                f"--max-count={n}",
                "--shortstat",
                "--no-color",
                "--no-show-signature",
                "--no-ext-diff",
                "--no-textconv",
                "--format=%x00%H%x1f%s",
                "HEAD",
                "--",
            ]
        )
        if status != 0:
            if not self._has_commits():
                return []
            raise RepoStateError(f"git log failed: {err}")
        commits: list[CommitSummary] = []
        for record in out.decode("utf-8", "replace").split("\0"):
            if not record.strip():
                continue
            header, _, rest = record.partition("\n")
            sha, _, subject = header.partition("\x1f")
            shortstat = " ".join(line.strip() for line in rest.splitlines() if line.strip())
            commits.append(
                CommitSummary(sha=sha, short=sha[:7], subject=subject, shortstat=shortstat)
            )
        return commits

    def file_at(self, commit: str, path: str) -> str | None:
        """The text of ``path`` as of ``commit``; None if absent there (or not a file).

        Args:
            commit: a commit-ish (sha, branch, ``HEAD``…).
            path: repo-relative POSIX path, e.g. ``".relay/progress.md"``.

        Returns:
            The content decoded as UTF-8 (invalid bytes replaced), or None when the commit or
            the file does not exist. One git process.
        """
        if not commit or commit.startswith("-"):
            return None
        status, out, _ = self._run(["cat-file", "blob", f"{commit}:{path.lstrip('/')}"])
        if status != 0:
            return None
        return out.decode("utf-8", "replace")

    def head_trailers(self) -> dict[str, str]:
        """The trailers of HEAD's commit message, e.g. ``{"Relay-Goal": "12", "Relay-Round": "3"}``.

        Keys keep their case; a key given twice keeps its last value. Empty when HEAD has no
        trailers or there are no commits. One git process.
        """
        status, out, _ = self._run(
            ["log", "-1", "--no-show-signature", "--format=%(trailers:only,unfold)", "HEAD", "--"]
        )
        if status != 0:
            return {}
        trailers: dict[str, str] = {}
        for line in out.decode("utf-8", "replace").splitlines():
            match = _TRAILER_LINE.match(line)
            if match:
                trailers[match.group(1)] = match.group(2).strip()
        return trailers
