"""``relay batch``: submit every goal of a batch file to an engine and collect the rows as they
finish (SPEC §16; issue 17, items 3 and 4).

Every goal is a self-contained task (:mod:`relay.batch.task`) carried by its branch on a git
remote: the repository itself for the local pool (its branches end up in it, as before), the
repository's ``origin`` (or ``--remote URL``) for a Dask cluster. Rows are handed to
``on_result`` as they come; engine failures become ``lost`` rows. The first Ctrl+C or SIGTERM
cancels the batch: running goals pause and push, goals not started never start, and every row
is still returned; a second one stops waiting.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from relay.batch.entries import make_tasks
from relay.batch.results import BatchResult, lost
from relay.batch.task import GoalTask, Link
from relay.errors import ConfigError
from relay.gitrepo import GitRepo
from relay.interrupts import STOP_SIGNALS

__all__ = ["CANCEL_GRACE_S", "Engine", "collect", "run_batch"]

CANCEL_GRACE_S = 120.0
"""Seconds a cancelled (or timed-out) batch waits for its running goals to pause and push."""


class Engine(Protocol):
    """What :func:`collect` needs of an engine (:mod:`relay.batch.engines`)."""

    name: str

    def link_for(self, name: str) -> Link: ...
    def submit(self, task: GoalTask) -> concurrent.futures.Future[Any]: ...
    def cancel(self) -> None: ...
    def abandon(self) -> None: ...
    def close(self) -> None: ...


def run_batch(
    batch_file: Path,
    repo: Path,
    engine: Engine,
    *,
    remote: str | None = None,
    model: str | None = None,
    config_path: Path | None = None,
    timeout_s: float | None = None,
    on_result: Callable[[BatchResult], None] | None = None,
    verbose: bool = False,
) -> list[BatchResult]:
    """Run every goal of ``batch_file`` on ``engine`` (closed when done); rows in file order.

    Args:
        repo: the submitting clone; it must be clean (new branches start from its HEAD).
        remote: the git remote URL of the goals' branches (default: ``repo`` itself for the
            local pool, its ``origin`` for other engines).
        model: the default model; config_path: ``--config`` for every goal (sent as text).
        timeout_s: the batch's time limit; unfinished goals are cancelled, then ``lost``.
        verbose: each goal's progress on its worker's stderr, prefixed ``[NAME]``.

    Raises:
        ConfigError: a bad batch file, no remote. RepoStateError: not a repository, dirty.
    """
    try:
        git = GitRepo(repo)
        git.preflight(offer_allow_dirty=False)  # batch has no --allow-dirty
        url = remote or _default_remote(git, local=engine.name == "local pool")
        base = git.head_sha()
        git.close()
        config_text = _read_config(config_path)
        tasks = make_tasks(
            batch_file,
            remote=url,
            base=base,
            model=model,
            config_text=config_text,
            link_for=engine.link_for,
            verbose=verbose,
        )
        return collect(engine, tasks, on_result or (lambda r: None), timeout_s)
    finally:
        engine.close()


def _default_remote(git: GitRepo, *, local: bool) -> str:
    if local:
        return str(git.root)
    if not git.has_remote("origin"):
        raise ConfigError(
            "the goals' branches need a shared git remote: run relay batch in a clone whose "
            "origin the workers can reach, or give --remote URL"
        )
    return git.remote_url("origin")


def _read_config(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the configuration file {path}: {exc}") from None


def collect(
    engine: Engine,
    tasks: list[GoalTask],
    on_result: Callable[[BatchResult], None],
    timeout_s: float | None = None,
) -> list[BatchResult]:
    """Submit ``tasks`` and return one row per task, in order, handing each to ``on_result``
    as it comes (see the module docstring)."""
    futures = {engine.submit(task): i for i, task in enumerate(tasks)}
    rows: list[BatchResult | None] = [None] * len(tasks)
    stop = _Stop(engine)
    deadline = time.monotonic() + timeout_s if timeout_s else None
    with stop.signals():
        pending = set(futures)
        while pending:
            wait_s = stop.wait_s(deadline)
            done, pending = concurrent.futures.wait(
                pending, timeout=wait_s, return_when=concurrent.futures.FIRST_COMPLETED
            )
            for future in done:
                i = futures[future]
                rows[i] = outcome(future, tasks[i])
                on_result(rows[i])
            if not done and stop.expired(deadline):
                engine.abandon()  # stop waiting: what still runs is let go
                break
    for i, task in enumerate(tasks):
        if rows[i] is None:
            rows[i] = lost(task.name, task.branch, stop.why(), "no answer after the cancel")
            on_result(rows[i])
    return [r for r in rows if r is not None]


def outcome(future: concurrent.futures.Future[Any], task: GoalTask) -> BatchResult:
    """The row of a finished future: its result, or a ``lost`` row naming the engine's
    failure (a killed worker, a broken pool, a cancel, a timeout, anything else)."""
    try:
        result = future.result()
    except concurrent.futures.CancelledError:
        return lost(task.name, task.branch, "cancelled")
    except concurrent.futures.process.BrokenProcessPool as exc:
        return lost(task.name, task.branch, "broken_pool", str(exc))
    except SystemExit:  # a local pool process told to stop (SIGTERM) ended its task
        return lost(task.name, task.branch, "broken_pool", "its pool process got SIGTERM")
    except Exception as exc:  # whatever the engine raises is a row, never a traceback
        kind = type(exc).__name__
        reason = {"KilledWorker": "killed_worker", "TimeoutError": "timeout"}.get(kind)
        return lost(task.name, task.branch, reason or "engine_error", f"{kind}: {exc}")
    if not isinstance(result, BatchResult):
        return lost(task.name, task.branch, "engine_error", f"unexpected answer {result!r}")
    return result


class _Stop:
    """The batch's cancel: by signal (first: cancel; second: stop waiting) or timeout."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.cancelled_at: float | None = None
        self.reason = "cancelled"
        self.hard = False

    def cancel(self, reason: str) -> None:
        if self.cancelled_at is not None:
            return
        self.cancelled_at, self.reason = time.monotonic(), reason
        with contextlib.suppress(Exception):  # an engine already gone cancels nothing
            self.engine.cancel()  # a task not started yet sees it and never starts

    def wait_s(self, deadline: float | None) -> float:
        if self.hard:
            return 0.0
        if deadline is not None and self.cancelled_at is None:
            return max(0.0, min(1.0, deadline - time.monotonic()))
        return 1.0

    def expired(self, deadline: float | None) -> bool:
        """Whether to stop waiting: a second signal, or the grace after a cancel is over
        (a passed ``deadline`` cancels first)."""
        if self.hard:
            return True
        if deadline is not None and time.monotonic() >= deadline:
            self.cancel("timeout")
        return self.cancelled_at is not None and (
            time.monotonic() - self.cancelled_at > CANCEL_GRACE_S
        )

    def why(self) -> str:
        return self.reason

    @contextlib.contextmanager
    def signals(self) -> Iterator[None]:
        """Ctrl+C, SIGTERM and SIGHUP (the terminal closed, issue 28) cancel the batch
        (main thread only)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def handler(signum: int, frame: object) -> None:
            if self.cancelled_at is not None:
                self.hard = True
            self.cancel("cancelled")

        previous = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
        try:
            yield
        finally:
            for s, old in previous.items():
                signal.signal(s, old)
