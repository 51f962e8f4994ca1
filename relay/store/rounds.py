"""The runs and rounds tables: one row per run of a goal and per round (SPEC §4, §10)."""

from __future__ import annotations

import json
import time
from typing import Any

from relay.store.base import Connection
from relay.store.records import Round, Tally, new_id, round_from_row


class RunRows(Connection):
    """Methods of :class:`relay.store.Store` on runs and rounds."""

    def start_run(self, goal_id: str, pid: int) -> str:
        """Record a new run of the goal; returns its id. A file written back by this connection
        while the run goes on is recorded as ``tamper`` of this goal and run."""
        run_id = time.strftime("%Y%m%d-%H%M%S-") + new_id()[:6]
        with self._tx() as db:
            db.execute(
                "INSERT INTO runs (id, goal_id, pid, started_at) VALUES (?, ?, ?, ?)",
                (run_id, goal_id, pid, time.time()),
            )
        self._running = (goal_id, run_id)
        return run_id

    def end_run(self, run_id: str, status: str, exit_code: int) -> None:
        """Mark a run as ended with the goal status and exit code it ended with."""
        with self._tx() as db:
            db.execute(
                "UPDATE runs SET ended_at=?, status=?, exit_code=? WHERE id=?",
                (time.time(), status, exit_code, run_id),
            )

    def runs(self, goal_id: str) -> list[dict[str, Any]]:
        """Runs of the goal, oldest first."""
        rows = self._db.execute(
            "SELECT * FROM runs WHERE goal_id=? ORDER BY started_at, rowid", (goal_id,)
        )
        return [dict(r) for r in rows]

    def run_record(self, run_id: str) -> dict[str, Any] | None:
        """The run ``run_id`` (id, goal_id, pid, started_at, ended_at, status, exit_code)."""
        row = self._db.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
        return dict(row) if row else None

    def start_round(self, goal_id: str, n: int, run_id: str) -> None:
        """Record the start of round ``n`` (replacing an interrupted record of the same n)
        with the goal's model calls so far (``model_calls``, see :meth:`add_step`)."""
        with self._tx() as db:
            db.execute("DELETE FROM rounds WHERE goal_id=? AND n=?", (goal_id, n))
            db.execute(
                "INSERT INTO rounds (goal_id, n, run_id, started_at, model_calls) VALUES"
                " (?, ?, ?, ?, (SELECT model_calls FROM goals WHERE id=?))",
                (goal_id, n, run_id, time.time(), goal_id),
            )

    def add_claim(self, goal_id: str, n: int, arguments: dict[str, Any]) -> None:
        """Keep a ``complete`` claim of round ``n`` (the ``update_goal`` arguments) before the
        audit runs: until a failed audit drops it, a run that crashed before the goal was
        saved complete has it audited again (:mod:`relay.recovery`)."""
        with self._tx() as db:
            db.execute(
                "UPDATE rounds SET claim=? WHERE goal_id=? AND n=?",
                (json.dumps(arguments), goal_id, n),
            )

    def pending_claim(self, goal_id: str) -> dict[str, Any] | None:
        """The arguments of the goal's latest claim that no failed audit answered, or None."""
        row = self._db.execute(
            "SELECT * FROM rounds WHERE goal_id=? AND claim IS NOT NULL ORDER BY n DESC LIMIT 1",
            (goal_id,),
        ).fetchone()
        return round_from_row(row).claim if row else None

    def last_round(self, goal_id: str) -> Round | None:
        """The goal's round with the highest number (as :meth:`rounds`), or None."""
        rounds = self.rounds(goal_id, last=1)
        return rounds[0] if rounds else None

    def end_round(self, goal_id: str, n: int, **fields: Any) -> None:
        """Complete round ``n``'s record (steps, tool_calls, real_tool_calls, files_changed (list),
        commit_sha, handoff, handoff_auto, end_reason)."""
        if "files_changed" in fields:
            fields["files_changed"] = json.dumps(fields["files_changed"])
        fields["ended_at"] = time.time()
        cols = ", ".join(f"{k}=?" for k in fields)
        with self._tx() as db:
            db.execute(
                f"UPDATE rounds SET {cols} WHERE goal_id=? AND n=?", (*fields.values(), goal_id, n)
            )

    def rounds(
        self,
        goal_id: str,
        *,
        last: int | None = None,
        finished: bool = False,
        run_id: str | None = None,
    ) -> list[Round]:
        """Rounds of the goal, oldest first.

        Args:
            last: only the newest ``last`` rounds (still oldest first); a query of constant
                cost however many rounds the goal has. None: every round.
            finished: only rounds that ended (an interrupted round's record is left out).
            run_id: only the rounds of this run.
        """
        sql = "SELECT * FROM rounds WHERE goal_id=?"
        params: list[Any] = [goal_id]
        if finished:
            sql += " AND ended_at IS NOT NULL"
        if run_id is not None:
            sql += " AND run_id=?"
            params.append(run_id)
        if last is None:
            sql += " ORDER BY n"
        else:
            sql = f"SELECT * FROM ({sql} ORDER BY n DESC LIMIT ?) ORDER BY n"
            params.append(max(0, last))
        return [round_from_row(r) for r in self._db.execute(sql, params)]

    def round_tally(self, goal_id: str, *, before: int | None = None) -> Tally:
        """The finished rounds of the goal numbered below ``before`` (all when None) summed
        up, the rounds an imported goal state summed up (:meth:`import_earlier_rounds`)
        included. One aggregate query over a covering index (``rounds_tally``): no round's
        row is read, and none reaches Python."""
        sql = (
            "SELECT count(*), min(n), max(n), total(tool_calls) FROM rounds"
            " WHERE goal_id=? AND ended_at IS NOT NULL"
        )
        params: list[Any] = [goal_id]
        if before is not None:
            sql += " AND n<?"
            params.append(before)
        count, first, last, calls = self._db.execute(sql, params).fetchone()
        stored = Tally(count, first or 0, last or 0, int(calls)) if count else Tally()
        row = self._db.execute(
            "SELECT count, first, last, tool_calls FROM earlier_rounds WHERE goal_id=?",
            (goal_id,),
        ).fetchone()
        if row is None or row[0] <= 0 or (before is not None and row[2] >= before):
            return stored
        return Tally(*row) + stored

    def import_round(self, goal_id: str, r: Round) -> None:
        """Insert a finished round's record as another machine wrote it (run ``imported``)."""
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO rounds (goal_id, n, run_id, started_at, ended_at, steps,"
                " tool_calls, real_tool_calls, files_changed, commit_sha, handoff, handoff_auto,"
                " end_reason) VALUES (?, ?, 'imported', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    goal_id,
                    r.n,
                    r.started_at or r.ended_at,
                    r.ended_at,
                    r.steps,
                    r.tool_calls,
                    r.real_tool_calls,
                    json.dumps(list(r.files_changed)),
                    r.commit_sha,
                    r.handoff,
                    int(r.handoff_auto),
                    r.end_reason,
                ),
            )

    def import_earlier_rounds(self, goal_id: str, tally: Tally) -> None:
        """Record the rounds a goal state summed up instead of carrying them (they come before
        every round stored for the goal); :meth:`round_tally` counts them."""
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO earlier_rounds (goal_id, count, first, last, tool_calls)"
                " VALUES (?, ?, ?, ?, ?)",
                (goal_id, tally.count, tally.first, tally.last, tally.tool_calls),
            )
