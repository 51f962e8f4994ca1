"""Fixtures of the real-model tests (issue 14): a real model behind llama.cpp's server.

The package gets the model (:mod:`real_model.model_files`, cached between runs) and starts the
server (:mod:`real_model.model_server`) once, when the first test asks for it, and stops it after
its last test (not at the end of the whole suite). What cannot be had — ``xllamacpp`` not installed, the parts not downloadable, a server
that does not start — is returned as the reason instead of a server: every test passes it to
:func:`real_model.harness.need`, which skips on a developer machine and FAILS in CI
(``CI=true``), where ``.ci/run`` installs the ``real-model`` extra.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from real_model.model_files import ModelUnavailable, cache_dir, ensure_model
from real_model.model_server import (
    RunningServer,
    ServerSettings,
    ServerUnavailable,
    start_server,
    xllamacpp_problem,
)

CACHE = cache_dir()
"""Resolved at import, before the shared fixtures point HOME at an empty folder."""
THREADS = int(os.environ.get("RELAY_TEST_MODEL_THREADS", "2"))
"""Server threads (``-t``); 2 by default (CI's machine has 2 cores)."""


def _start(settings: ServerSettings, log: Path) -> RunningServer | str:
    problem = xllamacpp_problem()
    if problem:
        return problem
    try:
        model = ensure_model(CACHE)
        return start_server(model, settings, log)
    except (ModelUnavailable, ServerUnavailable, OSError) as exc:
        return f"the real model could not be served: {exc}"


@pytest.fixture(scope="package")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer | str]:
    """llama.cpp's server with ``--jinja`` (tool calls parsed), or why there is none."""
    log = tmp_path_factory.mktemp("llama") / "server.log"
    found = _start(ServerSettings(jinja=True, threads=THREADS), log)
    yield found
    if isinstance(found, RunningServer):
        found.stop()


@pytest.fixture()
def llama_server_without_jinja(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RunningServer | str]:
    """The same server started without ``--jinja``: it refuses requests that offer tools."""
    log = tmp_path_factory.mktemp("llama-nojinja") / "server.log"
    found = _start(ServerSettings(jinja=False, threads=THREADS), log)
    yield found
    if isinstance(found, RunningServer):
        found.stop()
