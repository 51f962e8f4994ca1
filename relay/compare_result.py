"""What a ``relay compare`` produced (``compare.json``): one :class:`RunRow` per run and the
:class:`CompareResult` that holds them (SPEC §3; :mod:`relay.compare` runs the comparison)."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from relay.errors import ConfigError

__all__ = [
    "COMPARE_HTML",
    "COMPARE_JSON",
    "COMPARE_MD",
    "MODES",
    "NUMERIC_FIELDS",
    "CompareResult",
    "RunRow",
    "load_compare",
    "mode_means",
]

MODES: tuple[str, ...] = ("relay", "session")
"""The memory strategies compared, in column order."""

COMPARE_JSON = "compare.json"
COMPARE_MD = "compare.md"
COMPARE_HTML = "report.html"


@dataclass
class RunRow:
    """One run of a comparison, with every figure read from its store.

    Token counts are tokens; ``cost_usd`` is USD; ``elapsed_s`` is the goal's active wall time
    in seconds as the store has it; ``lines_added``/``lines_removed``/``files_changed`` come
    from ``git diff --shortstat base..branch`` without relay's own committed files.
    ``audit`` is ``passed``, ``failed`` or ``none`` (never audited).
    """

    mode: str
    repetition: int
    label: str
    branch: str
    worktree: str
    store_path: str
    goal_id: str | None = None
    run_id: str | None = None
    exit_code: int | None = None
    error: str | None = None
    status: str = "error"
    reason: str | None = None
    message: str | None = None
    rounds: int = 0
    model_calls: int = 0
    tool_calls: int = 0
    uncached_input: int = 0
    cache_write: int = 0
    cached_input: int = 0
    output: int = 0
    cost_usd: float = 0.0
    elapsed_s: float = 0.0
    audit: str = "none"
    lines_added: int = 0
    lines_removed: int = 0
    files_changed: int = 0
    final_response: str = ""
    arm: str = ""
    """What this run stands for in the comparison: its mode, or its worker (``compared``)."""

    def __post_init__(self) -> None:
        self.arm = self.arm or self.mode  # a comparison written before workers were compared


@dataclass
class CompareResult:
    """A finished comparison (what ``compare.json`` holds).

    ``created_at`` is a UNIX time in seconds; ``runs`` are ordered by mode, then repetition.
    """

    compare_id: str
    repo: str
    base_commit: str
    goal: str
    model: str
    limits: dict[str, Any]
    out_dir: str
    created_at: float
    parallel: bool
    repeat: int
    runs: list[RunRow]
    compared: str = "mode"
    """``mode`` (relay and session) or ``worker`` (``relay compare --worker A --worker B``)."""
    arms: list[str] = field(default_factory=lambda: list(MODES))
    """The modes or workers compared, in column order."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of the comparison (``runs`` as objects, plus ``summary``: the mean
        of every numeric figure per mode or worker)."""
        data = asdict(self)
        data["summary"] = {arm: mode_means(self.runs, arm) for arm in self.arms}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompareResult:
        """Rebuild a result from :meth:`to_dict` output (``summary`` is recomputed)."""
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        fields["runs"] = [
            RunRow(**{k: v for k, v in r.items() if k in RunRow.__dataclass_fields__})
            for r in data["runs"]
        ]
        return cls(**fields)


NUMERIC_FIELDS: tuple[str, ...] = (
    "rounds",
    "model_calls",
    "tool_calls",
    "uncached_input",
    "cached_input",
    "cache_write",
    "output",
    "cost_usd",
    "elapsed_s",
    "lines_added",
    "lines_removed",
)


def mode_means(runs: Sequence[RunRow], arm: str) -> dict[str, float]:
    """Mean of every numeric figure over the runs of ``arm`` (a mode or a worker; empty
    without runs), plus ``runs`` and ``complete`` (how many ended complete)."""
    rows = [r for r in runs if r.arm == arm]
    if not rows:
        return {}
    out: dict[str, float] = {
        k: statistics.fmean(getattr(r, k) for r in rows) for k in NUMERIC_FIELDS
    }
    out["runs"] = len(rows)
    out["complete"] = sum(1 for r in rows if r.status == "complete")
    return out


def load_compare(folder: Path) -> CompareResult:
    """Read a comparison back from its output folder (``compare.json``).

    Raises:
        ConfigError: the folder holds no readable ``compare.json``.
    """
    path = folder / COMPARE_JSON if folder.is_dir() else folder
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return CompareResult.from_dict(data)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: not a relay compare result ({exc})") from None
