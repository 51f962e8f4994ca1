"""The steps table: one row per model call of a round (SPEC §4), and the narrow queries of the
commands that show steps (``relay status``, ``relay log``, ``relay report``)."""

from __future__ import annotations

import json
import time
from typing import Any

from relay.models.base import Usage
from relay.store.base import Connection
from relay.store.records import decoded_rows

_COLUMNS = (
    "id, goal_id, run_id, round, step, text, actions, uncached_input, cache_write, cached_input,"
    " output, created_at"
)
"""What a step record holds (the ``error`` column of older databases is never read)."""

_LOG_TARGETS = ("command", "path", "status")
"""The arguments of a tool call that ``relay log`` shows (whichever is set first)."""


_LOG_ACTIONS = f"""
SELECT s.id, s.round, s.step, s.created_at, CASE WHEN a.key IS NULL THEN s.text END AS text,
       CASE WHEN a.type = 'object' THEN json_extract(
           a.value, '$.name', '$.is_error', {", ".join(f"'$.arguments.{k}'" for k in _LOG_TARGETS)}
       ) END AS picked
FROM steps s LEFT JOIN json_each(
    CASE WHEN json_valid(s.actions) AND json_type(s.actions) = 'array' THEN s.actions END
) a
WHERE s.run_id=? AND s.id>?
ORDER BY s.id, a.key
"""
"""One row per tool call of each step of a run (one row with no call for a step without
calls): only the fields a log line shows, as a JSON list ``[name, is_error, command, path,
status]`` that SQLite picks out of the stored call (one parse per call), so a call's other
arguments and its result never reach Python. An entry of the call list that is not an object
picks nothing."""


class StepRows(Connection):
    """Methods of :class:`relay.store.Store` on steps."""

    def add_step(
        self,
        goal_id: str,
        run_id: str,
        round_n: int,
        step: int,
        *,
        text: str,
        actions: list[dict[str, Any]],
        usage: dict[str, int],
    ) -> None:
        """Record one step: the response text, its actions (``[{name, arguments, is_error,
        result, result_fp}]``) and its usage (token counts, keys of ``relay.models.Usage``).
        The round's ``model_calls`` becomes the goal's: the model calls a recorded step
        accounts for (a crash loses only the calls after it, :mod:`relay.recovery`)."""
        with self._tx() as db:
            db.execute(
                "UPDATE rounds SET model_calls=(SELECT model_calls FROM goals WHERE id=?)"
                " WHERE goal_id=? AND n=?",
                (goal_id, goal_id, round_n),
            )
            db.execute(
                "INSERT INTO steps (goal_id, run_id, round, step, text, actions, uncached_input,"
                " cache_write, cached_input, output, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    goal_id,
                    run_id,
                    round_n,
                    step,
                    text,
                    json.dumps(actions),
                    usage.get("uncached_input", 0),
                    usage.get("cache_write", 0),
                    usage.get("cached_input", 0),
                    usage.get("output", 0),
                    time.time(),
                ),
            )

    def steps(self, goal_id: str, round_n: int | None = None) -> list[dict[str, Any]]:
        """Steps of the goal (or of one round), in order; ``actions`` decoded."""
        sql, params = f"SELECT {_COLUMNS} FROM steps WHERE goal_id=?", [goal_id]
        if round_n is not None:
            sql += " AND round=?"
            params.append(round_n)
        return self._step_records(sql + " ORDER BY id", params)

    def run_steps(self, run_id: str, after_id: int = 0) -> list[dict[str, Any]]:
        """Steps of one run with an id above ``after_id``, in order; ``actions`` decoded."""
        return self._step_records(
            f"SELECT {_COLUMNS} FROM steps WHERE run_id=? AND id>? ORDER BY id", [run_id, after_id]
        )

    def _step_records(self, sql: str, params: list[Any]) -> list[dict[str, Any]]:
        return decoded_rows(self._db.execute(sql, params), "actions")

    def log_steps(self, run_id: str, after_id: int = 0) -> list[dict[str, Any]]:
        """Steps of one run with an id above ``after_id``, in order, with only what a log line
        shows: ``{id, round, step, created_at, text, actions}``, where ``text`` is the answer
        of a step without tool calls (None otherwise) and each action is ``{name, is_error,
        arguments}`` with only the ``command``, ``path`` and ``status`` arguments: the other
        arguments and the results stay in the database (``relay log`` reads what it prints).
        A call list that is not valid JSON counts as no call (SPEC §14)."""
        out: list[dict[str, Any]] = []
        for r in self._db.execute(_LOG_ACTIONS, (run_id, after_id)):
            if not out or out[-1]["id"] != r["id"]:
                out.append(
                    {
                        "id": r["id"],
                        "round": r["round"],
                        "step": r["step"],
                        "created_at": r["created_at"],
                        "text": r["text"],
                        "actions": [],
                    }
                )
            if r["picked"] is not None:
                name, is_error, *targets = json.loads(r["picked"])
                arguments = {
                    k: v for k, v in zip(_LOG_TARGETS, targets, strict=True) if v is not None
                }
                out[-1]["actions"].append(
                    {"name": name, "is_error": bool(is_error), "arguments": arguments}
                )
        return out

    def last_answer(self, goal_id: str, run_id: str | None = None) -> str:
        """The text of the goal's (or run's) last step that said something, or ``""``: one
        query that stops at the first such step from the end."""
        sql, params = "SELECT text FROM steps WHERE goal_id=?", [goal_id]
        if run_id is not None:
            sql += " AND run_id=?"
            params.append(run_id)
        rows = self._db.execute(
            sql + " AND text IS NOT NULL AND text != '' ORDER BY id DESC", params
        )
        return next((r[0] for r in rows if isinstance(r[0], str) and r[0].strip()), "")

    def usage_by_round(self, goal_id: str, run_id: str | None = None) -> dict[int, dict[str, int]]:
        """Tokens of the goal's (or run's) steps summed per round: ``{round: {uncached_input,
        cache_write, cached_input, output, calls}}`` (``calls``: model calls)."""
        sql, params = (
            "SELECT round, total(uncached_input), total(cache_write), total(cached_input),"
            " total(output), count(*) FROM steps WHERE goal_id=?",
            [goal_id],
        )
        if run_id is not None:
            sql += " AND run_id=?"
            params.append(run_id)
        keys = ("uncached_input", "cache_write", "cached_input", "output", "calls")
        return {
            r[0]: {k: int(v) for k, v in zip(keys, r[1:], strict=True)}
            for r in self._db.execute(sql + " GROUP BY round", params)
        }

    def step_usages(self, goal_id: str, run_id: str | None = None) -> list[tuple[int, Usage]]:
        """``(round, usage)`` of each of the goal's (or run's) model calls, oldest first: for
        pricing each call on its own (a tier threshold applies per request;
        :mod:`relay.prices`)."""
        sql = "SELECT round, uncached_input, cache_write, cached_input, output FROM steps"
        sql, params = sql + " WHERE goal_id=?", [goal_id]
        if run_id is not None:
            sql += " AND run_id=?"
            params.append(run_id)
        return [
            (r[0], Usage(*(int(v) for v in r[1:])))
            for r in self._db.execute(sql + " ORDER BY id", params)
        ]
