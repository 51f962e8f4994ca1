"""Where goal tasks run: a local process pool or a Dask cluster (SPEC §16; issue 17, item 3).

An engine submits :func:`relay.batch.task.run_task` through a standard
:class:`concurrent.futures.Executor` and gives each task a :class:`~relay.batch.task.Link`
(cancel and attempt). :class:`LocalEngine` is a ``ProcessPoolExecutor`` whose processes ignore
the terminal's Ctrl+C (the batch passes it on); its link is a file. :class:`DaskEngine` is a
``dask.distributed`` client's executor with one goal per worker slot (the ``goal`` resource);
its link is a Dask ``Event`` and a ``Variable`` on the scheduler. Dask retries a task whose
worker was lost (``distributed.scheduler.allowed-failures``); the retry continues the goal
from its branch.

When the batch stops waiting (a second Ctrl+C or SIGTERM, or the grace after ``--timeout``),
``abandon`` lets go of the tasks still running: the local pool's processes get SIGTERM, which
ends their task at once (relay and whatever it started are killed, the attempt's folder is
removed) and SIGKILL after :data:`ABANDON_GRACE_S`; a Dask task cannot be stopped from outside
its worker's thread, so its future is cancelled and its relay, already told to pause, ends on
its own.

A pool process acts on its first SIGTERM only: later ones (Python's pool sends one to every
process when one of them ends, as the idle ones do on the batch's SIGTERM) would cut short the
clean-up the first one started. The local pool's attempts note their folders in the engine's
folder; :meth:`LocalEngine.close` removes those a pool process did not (killed before its
clean-up ended).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import multiprocessing
import os
import shutil
import signal
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from relay.batch.task import GoalTask, Link, run_task
from relay.errors import ConfigError
from relay.install_hint import extra_install_command

__all__ = ["GOAL_RESOURCE", "DaskEngine", "LocalEngine"]

GOAL_RESOURCE = "goal"
"""The Dask worker resource a goal task takes one of: ``dask worker … --resources goal=1``
makes a worker run one goal at a time."""

CONNECT_TIMEOUT_S = 30.0
"""Seconds to wait for a Dask scheduler and its first worker."""


ABANDON_GRACE_S = 10.0
"""Seconds an abandoned pool process has to end its task after SIGTERM, before SIGKILL."""


def _pool_process(pids: str) -> None:
    """Set up a local pool process: Ctrl+C and SIGHUP (a closed terminal signals its whole
    process group) are left to the batch, which pauses the relays it runs; the first SIGTERM (the batch abandoning it) ends the task at once, through its
    clean-up; the process's pid is written into the folder ``pids``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    (Path(pids) / str(os.getpid())).touch()


def _exit_on_sigterm(signum: int, frame: object) -> None:
    """End the task through its clean-up, which no later SIGTERM interrupts (see the module
    docstring; SIGKILL still ends a clean-up that hangs)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise SystemExit(128 + signum)


@dataclasses.dataclass(frozen=True)
class FileLink:
    """The local pool's link: the batch is cancelled when ``path`` exists."""

    path: str

    def cancelled(self) -> bool:
        return Path(self.path).exists()

    def attempt(self) -> int:
        return 1


class LocalEngine:
    """``workers`` goals at once in local processes (see the module docstring)."""

    name = "local pool"

    def __init__(self, workers: int) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="relay-batch-")
        self._flag = Path(self._folder.name) / "cancelled"
        self._pids = Path(self._folder.name) / "pids"
        self._pids.mkdir()
        self._notes = Path(self._folder.name) / "attempts"
        self._notes.mkdir()
        self.executor = concurrent.futures.ProcessPoolExecutor(
            max_workers=max(1, workers), initializer=_pool_process, initargs=(str(self._pids),)
        )

    def link_for(self, name: str) -> Link:
        return FileLink(str(self._flag))

    def submit(self, task: GoalTask) -> concurrent.futures.Future[Any]:
        return self.executor.submit(run_task, task, str(self._notes))

    def cancel(self) -> None:
        """Ask every running goal to pause and push; goals not started never start."""
        self._flag.touch()

    def abandon(self) -> None:
        """Stop the tasks still running, at once (see the module docstring)."""
        self.executor.shutdown(wait=False, cancel_futures=True)
        alive = self._processes()
        for pid in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + ABANDON_GRACE_S
        while alive and time.monotonic() < deadline:
            time.sleep(0.05)
            alive = self._processes()
        for pid in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def _processes(self) -> list[int]:
        """The pool's processes still running (children of this process; without ``/proc``
        too)."""
        alive = {child.pid for child in multiprocessing.active_children()}
        return [int(p.name) for p in self._pids.iterdir() if int(p.name) in alive]

    def close(self) -> None:
        """Wait for the pool's processes to end, then remove the attempts' folders they left
        (see the module docstring) and the engine's own."""
        self.executor.shutdown(wait=True, cancel_futures=True)
        for note in self._notes.iterdir():
            with contextlib.suppress(OSError, UnicodeDecodeError):
                left = Path(note.read_text(encoding="utf-8"))
                if left.name == note.name:  # not so: killed while writing it
                    shutil.rmtree(left, ignore_errors=True)
        self._folder.cleanup()


@dataclasses.dataclass(frozen=True)
class DaskLink:
    """A Dask task's link: a cancel ``Event`` and an attempt counter (``Variable``) named
    after the batch and the goal, on the scheduler the worker is connected to."""

    batch: str
    goal: str

    def cancelled(self) -> bool:
        from distributed import Event

        return Event(f"{self.batch}-cancel").is_set()

    def attempt(self) -> int:
        from distributed import Variable

        counter = Variable(f"{self.batch}-attempt-{self.goal}")
        number = int(counter.get(timeout=CONNECT_TIMEOUT_S)) + 1  # set to 0 at submission
        counter.set(number)
        return number


class DaskEngine:
    """Goal tasks on a Dask cluster through ``client`` (see the module docstring)."""

    name = "dask"

    def __init__(self, client: Any, *, own: bool = False) -> None:
        self.client = client
        self._own = own
        self.batch = f"relay-batch-{uuid.uuid4().hex[:12]}"
        _check_workers(client)
        self.executor = client.get_executor(resources={GOAL_RESOURCE: 1}, pure=False)

    @classmethod
    def connect(cls, address: str) -> DaskEngine:
        """Connect to the scheduler at ``address`` (``tcp://HOST:8786``, ``tls://…``).

        Raises:
            ConfigError: ``dask[distributed]`` is not installed, the scheduler cannot be
                reached, or no worker offers the ``goal`` resource.
        """
        try:
            from distributed import Client
        except ImportError:
            raise ConfigError(f"--scheduler needs Dask: {extra_install_command('dask')}") from None
        try:
            client = Client(address, timeout=CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError, ValueError) as exc:
            raise ConfigError(f"cannot reach the Dask scheduler {address}: {exc}") from None
        try:
            return cls(client, own=True)
        except ConfigError:
            client.close()
            raise

    def link_for(self, name: str) -> Link:
        from distributed import Variable

        link = DaskLink(self.batch, name)
        Variable(f"{self.batch}-attempt-{name}", client=self.client).set(0)
        return link

    def submit(self, task: GoalTask) -> concurrent.futures.Future[Any]:
        return self.executor.submit(run_task, task)

    def cancel(self) -> None:
        """Ask every running goal to pause and push; goals not started never start."""
        from distributed import Event

        Event(f"{self.batch}-cancel", client=self.client).set()

    def abandon(self) -> None:
        """Cancel the futures still running; their relays were told to pause (see the module
        docstring)."""
        self.executor.shutdown(wait=False)

    def close(self) -> None:
        self.executor.shutdown(wait=False)
        if self._own:
            self.client.close()


def _check_workers(client: Any) -> None:
    """Raise ``ConfigError`` unless a worker offers the ``goal`` resource (a task needing it
    would wait for ever)."""
    try:
        client.wait_for_workers(1, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        raise ConfigError(f"the Dask cluster has no worker: {exc}") from None
    workers = client.scheduler_info(n_workers=-1).get("workers", {})
    if not any(w.get("resources", {}).get(GOAL_RESOURCE) for w in workers.values()):
        raise ConfigError(
            f"no worker of the Dask cluster offers the resource {GOAL_RESOURCE!r}: start "
            f"workers with `dask worker SCHEDULER --nworkers N --nthreads 1 --resources "
            f"{GOAL_RESOURCE}=1` (one goal per worker; docs/batch.md)"
        )
