"""The store's connection: opening (and refusing) a database file, and transactions."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from relay.errors import StoreError
from relay.store.schema import SCHEMA, SCHEMA_VERSION, migrate


class Connection:
    """An open relay database (SQLite, WAL) and its transactions; the tables' methods are
    mixed in by :class:`relay.store.Store`.

    Args:
        path: the database file (``<state_dir>/relay.db``); its folder is created.

    Raises:
        StoreError: the file exists but is not a readable relay database (never a silent
            fresh start), or a newer schema than this version knows.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        existed = path.exists() and path.stat().st_size > 0
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, timeout=30, isolation_level=None)
        except (OSError, sqlite3.DatabaseError) as exc:
            raise StoreError(f"cannot open the state database {path}: {exc}") from None
        try:
            self._db.row_factory = sqlite3.Row
            if existed:  # look before changing anything: a foreign file stays as it was
                self._check_relay_database()
                migrate(self._db)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            if not existed:
                self._db.executescript(SCHEMA)
                with self._tx() as db:
                    db.execute(
                        "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                        (str(SCHEMA_VERSION),),
                    )
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise StoreError(
                f"the state database {path} is unreadable or corrupt ({exc}); "
                "move it away to start afresh (its goals would be lost)"
            ) from None
        except StoreError:
            self._db.close()
            raise

    def _check_relay_database(self) -> None:
        """Raise ``StoreError`` unless the file holds relay's tables of a known schema."""
        tables = {
            r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        if "goals" not in tables or "meta" not in tables:
            raise StoreError(
                f"{self.path} is not a goal-relay state database; move it away to start afresh"
            )
        row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        try:
            version = int(row[0]) if row else 0
        except (TypeError, ValueError):
            raise StoreError(f"{self.path} has an unreadable schema version") from None
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} was written by a newer goal-relay (schema {version}); upgrade relay"
            )

    def close(self) -> None:
        """Close the connection."""
        self._db.close()

    def data_version(self) -> int:
        """SQLite's ``PRAGMA data_version``: a number that changes whenever another connection
        (another process: ``relay pause``, ``relay say``, a model's command without the
        sandbox) committed to the database since the last call, and never for this
        connection's own writes."""
        return int(self._db.execute("PRAGMA data_version").fetchone()[0])

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: committed when the block ends, rolled back
        when it raises."""
        try:  # a KeyboardInterrupt right after BEGIN never leaves the transaction open
            self._db.execute("BEGIN IMMEDIATE")
            yield self._db
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise
        else:
            self._db.execute("COMMIT")
