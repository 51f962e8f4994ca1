"""A sandbox kept for a run's ``shell`` calls (SPEC §14; docs/sandbox.md).

Starting bubblewrap costs several milliseconds a call (namespaces, ``/dev``, the mounts), more
than the command itself for most of what a model runs. A :class:`SandboxSession` keeps one
sandbox and starts each command inside it through a small server that is the init of the
sandbox's PID namespace (:mod:`relay.sandbox.session_server`); every call still ends as a
call in a sandbox of its own did:

* no process the command started outlives the call: the server kills every other process of
  the namespace and reaps them before it answers;
* a call that left anything in the sandbox's private folders (``/tmp``, ``/run``, ``/dev``,
  the hidden folders), System V IPC objects, or a change to the server that later commands
  would inherit (``prlimit --pid 1``, ``renice``, ``taskset``) ends its sandbox: the next call
  gets a fresh one; no command can reach the kernel's keyrings (the server's seccomp filter);
* the sandbox shows what a new one would: before each call relay compares the identity of
  every path the mounts were planned from (the mounts, the hidden paths, git's configuration
  files, relay's own files) with what it saw, when the kernel told of an event on one of
  them or on a folder on the way (:mod:`relay.pathalarm`); when one changed, it plans the
  mounts again
  and starts a new sandbox if they differ or the change hit a mount (a protected file
  replaced on the host: the kernel then removes its read-only mount from the sandbox; a
  credential file created; a new file matching a protected glob, looked for when relay's
  progress file is rewritten at a round's end, if a protected entry is a glob);
* a timeout or a stop kills the whole sandbox (bubblewrap's process group and the init), as
  it killed a call's own.

The audit's commands and calls with extra writable folders never use it: they run in a
sandbox of their own (:meth:`relay.sandbox.Sandbox.command`). When the kept sandbox cannot
start twice in a row, the run goes on with one sandbox per call.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from relay.fsread import fixed_real_path, real_path
from relay.globs import literal_path
from relay.sandbox.gitconfig import git_config_candidates
from relay.sandbox.kept import (
    KeptSandbox,
    SessionProcess,
    look,
    stop_group,
    wait_ready,
)
from relay.sandbox.launcher import Sandbox
from relay.sandbox.mounts import Mount, bwrap_argv
from relay.sandbox.session_server import MAX_REQUEST

__all__ = ["SandboxSession"]

SERVER_SOURCE = Path(__file__).with_name("session_server.py").read_text(encoding="utf-8")
"""The server's source, read when relay starts (before any command of the model ran): the
server never runs a file a model could have changed since."""
PRIVATE_ROOTS = ("/tmp", "/run", "/dev")
"""The sandbox's private, writable folders besides the hidden ones (``bwrap_argv``)."""
MAX_FAILED_STARTS = 2
GONE = (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN)
"""The errors of a send to a server that ended (a new sandbox is tried, at most twice)."""


class SandboxSession:
    """One kept sandbox for the ``shell`` calls of a run in the working tree ``root``.

    Args:
        sandbox: the run's sandbox (nothing is kept when it is off).
        root: the working tree.
        protected: the protected entries (``tools.protected_paths`` syntax).
        own_files: relay's own files in the tree (repo-relative: the progress file and the
            goal state): when their folder holds nothing else, the whole folder is mounted
            read-only, so that relay's rewrite of them at each round's end is seen inside
            without a new sandbox (a file mount keeps showing the file it was made over).
    """

    def __init__(
        self,
        sandbox: Sandbox,
        root: Path,
        protected: Sequence[str] = (),
        own_files: Sequence[str] = (),
    ) -> None:
        self.sandbox = sandbox
        self.root = Path(real_path(root))
        self.protected = tuple(protected)
        self.own_files = tuple(own_files)
        self.starts = 0
        """How many sandboxes it started (tests and ``bench/overhead.py`` read it)."""
        self._kept: KeptSandbox | None = None
        self._failed = 0
        self._venvs: list[Path] = []

    def serves(self, root: Path, sandbox: Sandbox) -> bool:
        """Whether commands of ``sandbox`` in the working tree ``root`` may run in this kept
        sandbox (its own tree and sandbox settings only)."""
        return sandbox == self.sandbox and Path(fixed_real_path(root)) == self.root

    def process(self, argv: Sequence[str], env: Mapping[str, str]) -> SessionProcess | None:
        """Start ``argv`` (with the environment ``env``, in ``root``) in the kept sandbox; None
        when it cannot run there (sandbox off, a call already running, a request too large for
        the server's socket, a sandbox that does not start): the caller then runs it in a
        sandbox of its own."""
        if not self.sandbox.active or self._failed >= MAX_FAILED_STARTS:
            return None
        request = {"argv": list(argv), "env": dict(env), "cwd": str(self.root)}
        payload = json.dumps(request).encode("utf-8", "surrogateescape")
        if len(payload) > MAX_REQUEST or (self._kept is not None and self._kept.busy):
            return None
        for _attempt in range(MAX_FAILED_STARTS):
            kept = self._current() if self._failed < MAX_FAILED_STARTS else None
            if kept is None:
                return None
            if not kept.ready and not wait_ready(kept):
                self._stop(kept)  # it did not start: nothing of the call ran in it
                self._failed += 1
                continue
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            try:
                socket.send_fds(kept.conn, [payload], [out_w, err_w])
            except OSError as exc:  # nothing of the call ran: a new sandbox, or one of its own
                for fd in (out_r, err_r):
                    os.close(fd)
                self._stop(kept)
                if exc.errno not in GONE:
                    return None  # the request itself cannot go (too large for the socket)
                continue
            finally:
                os.close(out_w)
                os.close(err_w)
            kept.busy = True
            return SessionProcess(kept, out_r, err_r, list(argv), self._renew)
        return None

    def __enter__(self) -> SandboxSession:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the kept sandbox (at the run's end; again is harmless)."""
        if self._kept is not None:
            self._stop(self._kept)
            self._kept = None

    def _current(self) -> KeptSandbox | None:
        """The kept sandbox as a new one would be, started when needed."""
        kept = self._kept
        if kept is not None and (kept.ended or kept.monitor.poll() is not None):
            self._stop(kept)
            kept = None
        changed = kept.changed() if kept is not None else set()
        if kept is not None and changed:
            mounts, paths = self._plan()
            if mounts != kept.mounts or kept.remounts(changed):
                self._stop(kept)
                kept = None
            else:
                kept.alarm.close()
                kept.paths = paths
                kept.alarm, kept.watched, kept.seen = look(paths)
        if kept is None:
            kept = self._start()
        self._kept = kept
        return kept

    def _plan(self, fresh: bool = False) -> tuple[list[Mount], tuple[str, ...]]:
        """The mounts of a sandbox started now, and the paths they were planned from. The
        tree's virtual environments are looked for when a sandbox starts (``fresh``): one the
        model makes later is its own, written by it from the start, and read-only from the
        next sandbox on."""
        if fresh:
            self._venvs = self.sandbox.installed_tools(self.root)
        mounts = self.sandbox.plan(self.root, self._protected_entries(), venvs=self._venvs)
        git_dirs = (self.root / ".git", *self.sandbox.git_dirs)
        watched = [str(m.path) for m in mounts] + [str(m.source) for m in mounts if m.source]
        watched += [str(p) for p in (*self.sandbox.hidden, *git_config_candidates(git_dirs))]
        if any(literal_path(entry) is None for entry in self.protected):
            # a glob may match files made later: relay's rewrite of its own files at each
            # round's end makes the next call plan again (once a round)
            watched += [str(self.root / rel) for rel in self.own_files]
        return mounts, tuple(watched)

    def _protected_entries(self) -> tuple[str, ...]:
        """The protected entries, with relay's own files replaced by their folder when it
        holds nothing else (and is not the root)."""
        own = [Path(rel) for rel in self.own_files]
        folders = {p.parent for p in own}
        if len(folders) != 1 or Path(".") in folders:
            return self.protected
        folder = folders.pop()
        where = self.root / folder
        try:
            names = set(os.listdir(where)) if not where.is_symlink() else {""}
        except OSError:
            return self.protected
        if names - {p.name for p in own}:
            return self.protected
        mine = {p.as_posix() for p in own}
        return (*(e for e in self.protected if e not in mine), folder.as_posix())

    def _start(self) -> KeptSandbox | None:
        assert self.sandbox.bwrap is not None
        mounts, paths = self._plan(fresh=True)
        alarm, watched, seen = look(paths)
        private = [*PRIVATE_ROOTS, *(str(m.path) for m in mounts if _hidden_folder(m))]
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with contextlib.suppress(OSError):  # a request up to MAX_REQUEST bytes fits in one
            ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, MAX_REQUEST + 4096)
        server = [sys.executable, "-I", "-S", "-c", SERVER_SOURCE]
        argv = bwrap_argv(
            self.sandbox.bwrap,
            mounts,
            network=self.sandbox.network,
            cwd=self.root,
            argv=[*server, str(theirs.fileno()), json.dumps(private)],
            as_pid_1=True,
        )
        try:
            monitor = subprocess.Popen(
                argv,
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=self.sandbox.environment(),
                start_new_session=True,
            )
        except OSError:
            ours.close()
            alarm.close()
            self._failed += 1
            return None
        finally:
            theirs.close()
        self.starts += 1
        return KeptSandbox(monitor, ours, mounts, paths, alarm, watched, seen)

    def _renew(self, kept: KeptSandbox) -> None:
        """After a call that used the sandbox: start the next one now, so that it is ready
        when the next call comes (a model's turn takes longer than its start)."""
        if self._kept is kept:
            self._stop(kept)
            self._kept = self._start()

    def _stop(self, kept: KeptSandbox) -> None:
        """End ``kept``: close the socket (the server exits), then kill what is left."""
        kept.ended = True
        kept.alarm.close()
        with contextlib.suppress(OSError):
            kept.conn.close()
        stop_group(kept.monitor)
        if self._kept is kept:
            self._kept = None


def _hidden_folder(mount: Mount) -> bool:
    return mount.kind == "hide" and mount.path.is_dir()
