"""``relay batch --emit-matrix goals.yaml``: the batch as a CI matrix, one job per goal (SPEC
§16; issue 17, item 5).

Each job runs ``relay run GOAL --branch relay/<name> --push`` in a fresh checkout of the
repository: the branch carries the goal from one night's job to the next. The matrix holds the
goal text (or the goal file's path from the repository's root), the branch, the model and the
further options of an entry; the workflow passes them to relay through environment variables
(``BATCH_GOAL``, ``BATCH_GOAL_FILE``, ``BATCH_BRANCH``, ``BATCH_MODEL``,
``BATCH_OPTIONS``; never spliced into a shell command). ``github`` prints the JSON object of a GitHub Actions
``strategy.matrix`` (``{"include": [...]}``); ``gitlab`` prints a child pipeline: a job per goal
extending the ``.relay-goal`` template of ``examples/ci/gitlab-relay-goal.yml``.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import yaml

from relay.batch.entries import entry_flags, goal_names, load_batch, resolve_model_path
from relay.errors import ConfigError

__all__ = ["FORMATS", "emit_matrix", "matrix_entries"]

FORMATS = ("github", "gitlab")
"""The CI systems ``--emit-matrix`` writes for."""

GITLAB_TEMPLATE = "examples/ci/gitlab-relay-goal.yml"
"""Where the child pipeline's ``.relay-goal`` job template is, in the shipped examples."""


def matrix_entries(batch_file: Path, root: Path) -> list[dict[str, str]]:
    """One entry per goal: ``name``, ``branch``, ``goal`` or ``goal_file`` (from ``root``, the
    repository's root), ``model`` and ``options`` (``relay run`` options, shell-quoted).

    Raises:
        ConfigError: a bad batch file, or a goal file or script outside the repository (a CI
            job has only the repository).
    """
    goals = load_batch(batch_file)
    folder = batch_file.resolve().parent
    entries = []
    for entry, (name, branch) in zip(goals, goal_names(goals, batch_file), strict=True):
        row = {"name": name, "branch": branch, "goal": entry.goal or "", "goal_file": ""}
        if entry.goal_file:
            row["goal_file"] = _from_root(folder / entry.goal_file, root, "goal_file")
        model = resolve_model_path(entry.model, folder) or ""
        if model.startswith("scripted:"):
            path = _from_root(Path(model.removeprefix("scripted:")), root, "model")
            model = f"scripted:{path}"
        row["model"] = model
        row["options"] = shlex.join(entry_flags(entry))
        entries.append(row)
    return entries


def _from_root(path: Path, root: Path, key: str) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        raise ConfigError(
            f"{key} {path} is outside the repository {root}: a CI job checks out only the "
            "repository; move it there"
        ) from None


def emit_matrix(batch_file: Path, root: Path, ci: str) -> str:
    """The matrix of ``batch_file`` for ``ci`` (one of :data:`FORMATS`), as text to print.
    Raises ``ConfigError`` for an unknown ``ci`` and as :func:`matrix_entries`."""
    if ci not in FORMATS:
        raise ConfigError(f"--ci {ci!r} is not known; use one of {', '.join(FORMATS)}")
    entries = matrix_entries(batch_file, root)
    if ci == "github":
        return json.dumps({"include": entries}, ensure_ascii=False)
    pipeline: dict[str, Any] = {"include": [{"local": GITLAB_TEMPLATE}]}
    for row in entries:
        variables = {
            "BATCH_GOAL": row["goal"],
            "BATCH_GOAL_FILE": row["goal_file"],
            "BATCH_BRANCH": row["branch"],
            "BATCH_MODEL": row["model"],
            "BATCH_OPTIONS": row["options"],
        }
        pipeline[f"relay-{row['name']}"] = {"extends": ".relay-goal", "variables": variables}
    return yaml.safe_dump(pipeline, sort_keys=False, allow_unicode=True)
