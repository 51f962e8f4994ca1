"""Where the shipped data lives: ``prompts/`` and ``examples/`` at the top of the repository,
installed as ``relay/prompts`` and ``relay/examples`` in a wheel."""

from __future__ import annotations

from pathlib import Path

from relay.errors import RelayError


def data_dir(name: str) -> Path:
    """The folder of shipped data ``name`` (``prompts`` or ``examples``).

    Raises ``RelayError`` when the installation lacks it (a broken install)."""
    here = Path(__file__).resolve().parent
    for candidate in (here / name, here.parent / name):
        if candidate.is_dir():
            return candidate
    raise RelayError(f"the installation of goal-relay lacks its {name}/ folder; reinstall it")
