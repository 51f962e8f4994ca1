"""The goal store: SQLite in ``<state_dir>/relay.db`` with WAL (SPEC §10).

Tables: goals, supplements, runs, rounds, steps, events, audits (and earlier_rounds, what an
imported goal state summed up). Every write to a goal row names the status it expects, so that
a stale process can never overwrite a newer goal or a user's pause (:meth:`Store.save_goal`
raises :class:`relay.errors.GoalStateError` otherwise). Writes are transactions; a process
killed at any point loses at most the step in flight. Queries fetch only what their callers
show: the newest rounds, the last answer, a run's log lines, sums per round.

The methods live by table in :mod:`relay.store.goals`, :mod:`relay.store.rounds`,
:mod:`relay.store.steps` and :mod:`relay.store.events`; the schema in
:mod:`relay.store.schema`.
"""

from __future__ import annotations

from relay.store.events import EventRows
from relay.store.goals import GoalRows
from relay.store.records import GoalRecord, Round, Tally, new_id
from relay.store.rounds import RunRows
from relay.store.schema import SCHEMA_VERSION
from relay.store.steps import StepRows


class Store(GoalRows, RunRows, StepRows, EventRows):
    """The SQLite store of one working tree.

    Args:
        path: the database file (``<state_dir>/relay.db``); its folder is created.

    Raises:
        StoreError: the file exists but is not a readable relay database (never a silent
            fresh start), or a newer schema than this version knows.
    """


__all__ = ["SCHEMA_VERSION", "GoalRecord", "Round", "Store", "Tally", "new_id"]
