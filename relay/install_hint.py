"""The command that installs one of relay's optional extras, as messages give it (issue 28).

No package index has goal-relay, so ``pip install 'goal-relay[dask]'`` fails. The command
names where this relay came from instead: a checkout (relay imported from a folder holding the
project's ``pyproject.toml``, as ``pip install -e .`` makes) gets ``pip install -e
'<checkout>[extra]'``; any other installation gets the repository URL from the package's
metadata (``[project.urls] Repository``), as the CI examples install it.
"""

from __future__ import annotations

import importlib.metadata
import shlex
import sys
from pathlib import Path

__all__ = ["REPOSITORY", "extra_install_command"]

REPOSITORY = "https://github.com/goal-relay/goal-relay"
"""The repository when the installed metadata does not name one (pyproject.toml's)."""


def _repository() -> str:
    try:
        urls = importlib.metadata.metadata("goal-relay").get_all("Project-URL") or []
    except importlib.metadata.PackageNotFoundError:
        urls = []
    for entry in urls:
        label, _, url = entry.partition(",")
        if label.strip().lower() == "repository" and url.strip():
            return url.strip()
    return REPOSITORY


def _checkout() -> Path | None:
    root = Path(__file__).resolve().parent.parent
    project = root / "pyproject.toml"
    try:
        text = project.read_text(encoding="utf-8")
    except OSError:
        return None
    return root if 'name = "goal-relay"' in text else None


def extra_install_command(extra: str) -> str:
    """The shell command that adds ``extra`` (``"dask"``, ``"embeddings"``, ``"dev"``) to the
    interpreter relay runs in: ``<python> -m pip install -e '/path/to/checkout[dask]'`` from a
    checkout, else ``<python> -m pip install 'goal-relay[dask] @ git+<repository>'``."""
    pip = f"{shlex.quote(sys.executable)} -m pip install"
    checkout = _checkout()
    if checkout is not None:
        return f"{pip} -e {shlex.quote(f'{checkout}[{extra}]')}"
    return f"{pip} {shlex.quote(f'goal-relay[{extra}] @ git+{_repository()}')}"
