"""The events and audits tables: guard events, warnings and status changes (SPEC §8), and the
results of the completion audit (SPEC §9)."""

from __future__ import annotations

import json
import time
from typing import Any

from relay.store.base import Connection
from relay.store.records import decoded


class EventRows(Connection):
    """Methods of :class:`relay.store.Store` on events and audits."""

    def add_event(
        self,
        goal_id: str,
        kind: str,
        detail: str,
        *,
        run_id: str | None = None,
        round_n: int | None = None,
        weight: int = 0,
    ) -> None:
        """Record an event (guard events, warnings, API errors, status changes)."""
        with self._tx() as db:
            db.execute(
                "INSERT INTO events (goal_id, run_id, round, kind, detail, weight, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (goal_id, run_id, round_n, kind, detail, weight, time.time()),
            )

    def events(
        self, goal_id: str, run_id: str | None = None, after_id: int = 0
    ) -> list[dict[str, Any]]:
        """Events of the goal (or of one run), oldest first; only those with an id above
        ``after_id`` (for following a live run)."""
        sql, params = "SELECT * FROM events WHERE goal_id=? AND id>?", [goal_id, after_id]
        if run_id is not None:
            sql += " AND run_id=?"
            params.append(run_id)
        return [dict(r) for r in self._db.execute(sql + " ORDER BY id", params)]

    def add_audit(
        self,
        goal_id: str,
        round_n: int | None,
        passed: bool,
        checks: list[dict[str, Any]],
        *,
        created_at: float | None = None,
    ) -> None:
        """Record an audit result: ``checks`` is ``[{kind, target, passed, evidence}]``; its
        time is now unless ``created_at`` (UNIX seconds, an imported audit's) says otherwise.
        A failed audit answers the goal's pending claim (:meth:`RunRows.add_claim`)."""
        with self._tx() as db:
            db.execute(
                "INSERT INTO audits (goal_id, round, passed, checks, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (
                    goal_id,
                    round_n,
                    int(passed),
                    json.dumps(checks),
                    created_at if created_at is not None else time.time(),
                ),
            )
            if not passed:
                db.execute(
                    "UPDATE rounds SET claim=NULL WHERE goal_id=? AND claim IS NOT NULL",
                    (goal_id,),
                )

    def audits(self, goal_id: str, *, last: int | None = None) -> list[dict[str, Any]]:
        """The goal's audits ``{round, passed, checks, created_at}``, oldest first; only the
        newest ``last`` of them when given."""
        sql = "SELECT id, round, passed, checks, created_at FROM audits WHERE goal_id=?"
        params: list[Any] = [goal_id]
        if last is not None:
            sql += " ORDER BY id DESC LIMIT ?"
            params.append(max(0, last))
        rows = self._db.execute(f"SELECT * FROM ({sql}) ORDER BY id", params)
        return [
            {
                "round": r["round"],
                "passed": bool(r["passed"]),
                "checks": decoded(r["checks"], []),
                "created_at": r["created_at"],
            }
            for r in rows
        ]

    def latest_audit(self, goal_id: str) -> dict[str, Any] | None:
        """The goal's most recent audit ``{round, passed, checks, created_at}`` or None."""
        audits = self.audits(goal_id, last=1)
        return audits[0] if audits else None
