"""A goal task: everything a worker anywhere needs to run one goal of a batch (issue 17, item 1).

A :class:`GoalTask` is plain, picklable data: the git remote URL, the branch, the goal text, its
front matter, the configuration and a scripted model's script as text, the ``relay run``
options. It holds no path of the submitting machine and no key: a worker's relay reads its
provider keys from the worker's own environment.

:func:`run_task` is the function an engine runs: it clones the remote into a temporary folder,
runs ``relay run GOAL --branch B --push`` there (:mod:`relay.batch.attempt`), and returns a
:class:`~relay.batch.results.BatchResult` holding what dies with the folder. It never raises:
a goal that cannot run is a row with status ``error``. The folder is removed when it returns;
an engine that may kill the task's process first has it noted (``notes``) and removes it then.
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from relay.batch.results import BatchResult, lost
from relay.errors import RelayError

__all__ = ["GoalTask", "Link", "NoLink", "run_task"]


class Link(Protocol):
    """What a task asks the engine while it runs (picklable)."""

    def cancelled(self) -> bool:
        """Whether the batch was cancelled (Ctrl+C, SIGTERM): the goal pauses and pushes."""
        ...

    def attempt(self) -> int:
        """This attempt's number (1 for the first; a retry of a lost worker counts on)."""
        ...


@dataclasses.dataclass(frozen=True)
class NoLink:
    """A task that nothing cancels, always on its first attempt (tests, a single goal)."""

    def cancelled(self) -> bool:
        return False

    def attempt(self) -> int:
        return 1


@dataclasses.dataclass(frozen=True)
class GoalTask:
    """One goal of a batch, as data (see the module docstring)."""

    name: str
    """The goal's name in the batch (the table's first column)."""
    branch: str
    """The branch that carries the goal, on ``remote``."""
    remote: str
    """The git remote URL every worker clones and pushes to."""
    base: str
    """The commit the branch starts from when the remote does not have it yet."""
    goal: str
    """The goal text."""
    front: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The goal file's front matter (configuration keys)."""
    config: str | None = None
    """The text of the batch's ``--config`` file, if any."""
    model: str | None = None
    """PROVIDER:MODEL, or ``scripted`` with :attr:`script`; None: the repository's relay.yaml."""
    script: str | None = None
    """The scripted model's script (YAML text)."""
    flags: tuple[str, ...] = ()
    """Further ``relay run`` options (``--max-rounds 5``, ``--unattended``…)."""
    link: Link = dataclasses.field(default_factory=NoLink)
    """The engine's cancel and attempt link."""
    verbose: bool = False
    """Relay's progress lines on the worker's stderr, prefixed ``[name]``."""


def run_task(task: GoalTask, notes: str | None = None) -> BatchResult:
    """Run ``task`` on this machine (see the module docstring); never raises.

    Args:
        notes: a folder of the engine's (the local pool's) where the attempt's folder is
            noted while it exists, for the engine to remove it if this process is killed
            before it could.
    """
    from relay.batch import attempt

    host = socket.gethostname()
    try:
        if task.link.cancelled():  # the batch was cancelled before this goal started
            return lost(task.name, task.branch, "cancelled", host=host)
        number = task.link.attempt()
    except Exception:  # an engine that cannot count attempts still runs the goal
        number = 1
    with _attempt_folder(notes) as folder:
        try:
            return attempt.run(task, folder, host=host, number=number)
        except RelayError as exc:
            return BatchResult(
                task.name, task.branch, 1, "error", None, message=str(exc), host=host,
                attempt=number,
            )  # fmt: skip
        except OSError as exc:
            return lost(task.name, task.branch, "engine_error", str(exc), host=host)


@contextlib.contextmanager
def _attempt_folder(notes: str | None) -> Iterator[Path]:
    """A new temporary folder for the attempt, removed when the attempt ends; with ``notes``,
    its path is noted there until then. The folder and its note are made with SIGTERM held
    back (a local pool process ends its task on SIGTERM): whenever it comes, the clean-up
    finds both."""
    made: tempfile.TemporaryDirectory[str] | None = None
    note: Path | None = None
    try:
        with _sigterm_held():
            made = tempfile.TemporaryDirectory(prefix="relay-goal-")
            if notes is not None:
                note = Path(notes) / Path(made.name).name
                note.write_text(made.name, encoding="utf-8")
        yield Path(made.name)
    finally:
        if made is not None:
            made.cleanup()
        if note is not None:  # not reached when the clean-up failed: the engine tries again
            note.unlink(missing_ok=True)


@contextlib.contextmanager
def _sigterm_held() -> Iterator[None]:
    """SIGTERM is held back in this thread until the block ends, then acts."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
