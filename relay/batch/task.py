"""A goal task: everything a worker anywhere needs to run one goal of a batch (issue 17, item 1).

A :class:`GoalTask` is plain, picklable data: the git remote URL, the branch, the goal text, its
front matter, the configuration and a scripted model's script as text, the ``relay run``
options. It holds no path of the submitting machine and no key: a worker's relay reads its
provider keys from the worker's own environment.

:func:`run_task` is the function an engine runs: it clones the remote into a temporary folder,
runs ``relay run GOAL --branch B --push`` there (:mod:`relay.batch.attempt`), and returns a
:class:`~relay.batch.results.BatchResult` holding what dies with the folder. It never raises:
a goal that cannot run is a row with status ``error``. The folder is removed when it returns.
"""

from __future__ import annotations

import dataclasses
import socket
import tempfile
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


def run_task(task: GoalTask) -> BatchResult:
    """Run ``task`` on this machine (see the module docstring); never raises."""
    from relay.batch import attempt

    host = socket.gethostname()
    try:
        if task.link.cancelled():  # the batch was cancelled before this goal started
            return lost(task.name, task.branch, "cancelled", host=host)
        number = task.link.attempt()
    except Exception:  # an engine that cannot count attempts still runs the goal
        number = 1
    with tempfile.TemporaryDirectory(prefix="relay-goal-") as folder:
        try:
            return attempt.run(task, Path(folder), host=host, number=number)
        except RelayError as exc:
            return BatchResult(
                task.name, task.branch, 1, "error", None, message=str(exc), host=host,
                attempt=number,
            )  # fmt: skip
        except OSError as exc:
            return lost(task.name, task.branch, "engine_error", str(exc), host=host)
