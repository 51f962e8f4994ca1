"""Safe git processes for relay's own git calls (SPEC §11, §14).

Everything here exists because the model (whose ``shell`` may write ``.git/config``, include
files, ``.gitattributes`` and so on when there is no sandbox) must not be able to make relay's
own ``git status`` / ``git add`` / ``git commit`` / ``git push`` run its code, nor see relay's
environment. Three mechanisms, applied to every git process :class:`SafeGit` starts:

* **A scrubbed environment** (:func:`relay.gitenv.git_environment`): ``os.environ`` without
  credentials (:func:`relay.tools.shell.is_credential_name`: provider keys, ``*KEY*``,
  ``*TOKEN*``, ``*SECRET*``, ``SSH_AUTH_SOCK``, …) and without every ``GIT_*`` variable except
  identity and config-file selection (:data:`GIT_KEPT`) — so no ``GIT_DIR``, ``GIT_INDEX_FILE``,
  ``GIT_CONFIG_PARAMETERS``, ``GIT_EXEC_PATH``, ``GIT_SSH_COMMAND``, ``GIT_PAGER``,
  ``GIT_TRACE*``… A network call (``network=True``: ``git push``) also keeps what a push
  authenticates with (``SSH_AUTH_SOCK``, ``GH_TOKEN``, ``GIT_ASKPASS``, ``GIT_SSH_COMMAND``, …)
  but never a model provider's variable (:func:`is_provider_name`). ``GIT_TERMINAL_PROMPT=0``.
* **Configuration overrides** (:data:`relay.gitenv.HARDENING`): ``-c`` options that switch off
  everything in git's configuration that runs a program relay did not ask for: fsmonitor,
  hooks, signing, pagers, editors, external diff, ``ext::`` transports,
  ``core.alternateRefsCommand``, automatic gc/maintenance, submodule recursion, and (outside a
  push) ssh commands, askpass programs and credential helpers.
* **Neutralised drivers** (:mod:`relay.gitdrivers`): every ``filter.<driver>``,
  ``diff.<driver>`` and ``merge.<driver>`` configured anywhere (system, global, repository,
  worktree, and every file those include) *after* this repository object first looked (when
  relay opened it, before any model action: the user's own drivers such as Git LFS or
  git-crypt keep working for relay's commits) is overridden through ``GIT_CONFIG_COUNT`` so
  that it runs nothing. The enumeration is cached and redone when the ``stat`` of any file it
  depends on changes (the config files, each include target, ``HEAD`` for
  ``includeIf.onbranch``).

Processes are started with :mod:`subprocess` directly (gitpython's ``execute`` always merges
the whole ``os.environ``), in their own session so that a Ctrl+C in the terminal cannot kill
git mid-commit; a timeout kills the whole process group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TypedDict

from relay.errors import RepoStateError
from relay.fsread import read_regular_bytes
from relay.gitdrivers import LISTING_REGEX, DriverWatch, driver_overrides, parse_driver_listing
from relay.gitenv import GIT_KEPT, HARDENING, LOCAL_ONLY, git_environment, is_provider_name

__all__ = [
    "GIT_KEPT",
    "HARDENING",
    "GitOptions",
    "SafeGit",
    "driver_overrides",
    "git_environment",
    "is_provider_name",
    "parse_driver_listing",
]

#: Seconds to wait for output after a timed-out process group was killed.
_DRAIN_S = 5.0

PRELOAD_MIN_ENTRIES = 4000
"""Index entries from which git's threads that ``lstat`` the tracked files in parallel
(``core.preloadIndex``, one thread per 500 entries) are left on: below it starting them costs
more than they save (bench/overhead.py: 1,000 files, about 0.4 ms per ``git status`` and per
``git commit`` on two cores; at 20,000 files they save about 5 ms each)."""


def index_entries(index: Path) -> int | None:
    """The number of entries the git index file ``index`` says it holds (its header), or
    None when there is no readable index (a FIFO planted there is not waited on)."""
    header = read_regular_bytes(index, limit=12) or b""
    if len(header) < 12 or header[:4] != b"DIRC":
        return None
    return int.from_bytes(header[8:12], "big")


class GitOptions(TypedDict, total=False):
    """The options of one git command, as :meth:`SafeGit.run` takes them."""

    read_only: bool
    network: bool
    env: Mapping[str, str] | None
    stdin_bytes: bytes | None
    timeout_s: float | None


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _spawn(
    command: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    stdin: int,
    stderr: int = subprocess.PIPE,
) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(
            list(command),
            cwd=cwd,
            env=dict(env),
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=stderr,
            close_fds=True,
            # its own session: a Ctrl+C in the terminal must not kill git mid-commit
            start_new_session=True,
        )
    except FileNotFoundError:
        raise RepoStateError("the git program was not found; install git") from None
    except OSError as exc:
        raise RepoStateError(f"cannot start git: {exc}") from None


class SafeGit:
    """Starts hardened git processes for one repository (see the module docstring).

    Args:
        root: the working tree's top directory (the processes' current directory).
        git_dir: the repository's git directory (a linked worktree's own one).
        common_dir: the common git directory (``git_dir`` itself outside linked worktrees).
    """

    def __init__(self, root: Path, git_dir: Path, common_dir: Path) -> None:
        self.root = root
        self.git_dir = git_dir
        self.common_dir = common_dir
        self.drivers = DriverWatch(git_dir, common_dir)
        self._index_seen: tuple[tuple[int, ...], bool] | None = None  # (stat, preload)

    # ------------------------------------------------------------------ commands

    def command(self, args: Sequence[str], *, read_only: bool, network: bool) -> list[str]:
        """The full argument list: ``git``, the repository, the overrides, then ``args``."""
        command = [
            "git",
            "--no-pager",
            f"--git-dir={self.git_dir}",
            f"--work-tree={self.root}",
        ]
        for key, value in HARDENING if network else HARDENING + LOCAL_ONLY:
            command += ["-c", f"{key}={value}"]
        if not self._preload():
            command += ["-c", "core.preloadIndex=false"]
        if read_only:
            command.append("--no-optional-locks")
        command.extend(args)
        return command

    def _preload(self) -> bool:
        """Whether git's parallel ``lstat`` of the index is worth its threads here (at least
        :data:`PRELOAD_MIN_ENTRIES` entries, or an index that cannot be read); the header is
        read again only when the index file changed."""
        index = self.git_dir / "index"
        try:
            st = os.stat(index)
        except OSError:
            return True
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        if self._index_seen is None or self._index_seen[0] != key:
            entries = index_entries(index)
            self._index_seen = (key, entries is None or entries >= PRELOAD_MIN_ENTRIES)
        return self._index_seen[1]

    def environment(
        self, extra: Mapping[str, str] | None = None, *, network: bool = False
    ) -> dict[str, str]:
        """:func:`git_environment` plus the driver overrides plus ``extra``."""
        env = git_environment(network=network)
        env.update(self.drivers.overrides(self._enumerate))
        if extra:
            env.update(extra)
        return env

    def run(
        self,
        args: Sequence[str],
        *,
        read_only: bool = True,
        network: bool = False,
        env: Mapping[str, str] | None = None,
        stdin_bytes: bytes | None = None,
        timeout_s: float | None = None,
    ) -> tuple[int, bytes, str]:
        """Run one git command; return ``(exit status, stdout bytes, stderr text stripped)``.

        Args:
            args: git's arguments after the global options, e.g. ``["status", "-z"]``.
            read_only: add ``--no-optional-locks`` (looking never writes the index).
            network: the command talks to a remote (see :func:`git_environment`).
            env: extra variables, e.g. the commit identity.
            stdin_bytes: written to git's standard input (else it reads nothing).
            timeout_s: seconds after which git's whole process group is killed; the status is
                then ``-9`` and the error text says so.

        Raises:
            RepoStateError: git is not installed or cannot be started.
        """
        command = self.command(args, read_only=read_only, network=network)
        environment = self.environment(env, network=network)
        stdin = subprocess.PIPE if stdin_bytes is not None else subprocess.DEVNULL
        proc = _spawn(command, self.root, environment, stdin)
        try:
            out, err = proc.communicate(stdin_bytes, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            try:
                out, err = proc.communicate(timeout=_DRAIN_S)
            except subprocess.TimeoutExpired:
                out, err = b"", b""
            message = err.decode("utf-8", "replace").strip()
            stopped = f"git was stopped after {timeout_s:g} s"
            return -9, out, f"{message}\n{stopped}" if message else stopped
        return proc.returncode, out, err.decode("utf-8", "replace").strip()

    @contextlib.contextmanager
    def lines(self, args: Sequence[str]) -> Iterator[Iterator[bytes]]:
        """Run a read-only git command and yield its output line by line (newline removed).

        Leaving the ``with`` block early kills the process group; a failing command just
        yields the lines it printed (its error text is discarded).
        """
        command = self.command(args, read_only=True, network=False)
        env = self.environment()
        proc = _spawn(command, self.root, env, subprocess.DEVNULL, subprocess.DEVNULL)
        assert proc.stdout is not None
        try:
            yield (line.rstrip(b"\n") for line in proc.stdout)
        finally:
            if proc.poll() is None:
                _kill_group(proc)
            proc.stdout.close()
            proc.wait()

    @contextlib.contextmanager
    def stream(self, args: Sequence[str], stdin_bytes: bytes) -> Iterator[IO[bytes]]:
        """Run a read-only git command fed ``stdin_bytes`` (from a temporary file: neither
        side waits on the other however much each holds) and yield its standard output to
        read as it comes (``git cat-file --batch``). Leaving the ``with`` block kills the
        process group if it still runs; its error text is discarded.

        Raises:
            RepoStateError: git cannot be started, or a temporary file cannot be written.
        """
        command = self.command(args, read_only=True, network=False)
        env = self.environment()
        try:
            with tempfile.TemporaryFile() as feed:
                feed.write(stdin_bytes)
                feed.seek(0)
                proc = _spawn(command, self.root, env, feed.fileno(), subprocess.DEVNULL)
        except OSError as exc:
            raise RepoStateError(f"cannot feed git its input: {exc}") from None
        assert proc.stdout is not None
        try:
            yield proc.stdout
        finally:
            if proc.poll() is None:
                _kill_group(proc)
            proc.stdout.close()
            proc.wait()

    def _enumerate(self) -> tuple[set[tuple[str, str]], set[Path]]:
        command = self.command(
            ["config", "-z", "--show-origin", "--get-regexp", LISTING_REGEX],
            read_only=True,
            network=False,
        )
        for _attempt in range(2):  # a git that ended without a word (a signal) is asked again
            proc = _spawn(command, self.root, git_environment(), subprocess.DEVNULL)
            out, err = proc.communicate()
            message = err.decode("utf-8", "replace").strip()
            if proc.returncode in (0, 1):  # 1: nothing matched
                return parse_driver_listing(out, self.root)
            if message:
                break
        why = message or f"git config ended with status {proc.returncode}"
        raise RepoStateError(f"cannot read the git configuration: {why}")
