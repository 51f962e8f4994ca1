"""``relay batch``: many goals, each carried by its branch (SPEC §16; docs/batch.md).

* :mod:`relay.batch.entries`: the batch file, and the self-contained task of every goal;
* :mod:`relay.batch.task` and :mod:`relay.batch.attempt`: a task as it runs on a worker;
* :mod:`relay.batch.engines`: the local process pool and Dask;
* :mod:`relay.batch.run`: submit, stream the rows, cancel;
* :mod:`relay.batch.matrix`: the CI matrix (one job per goal).
"""

from relay.batch.entries import BatchGoal, load_batch, resolve_model_path
from relay.batch.results import BatchResult, lost, worst_exit_code
from relay.batch.run import collect, run_batch
from relay.batch.task import GoalTask, run_task

__all__ = [
    "BatchGoal",
    "BatchResult",
    "GoalTask",
    "collect",
    "load_batch",
    "lost",
    "resolve_model_path",
    "run_batch",
    "run_task",
    "worst_exit_code",
]
