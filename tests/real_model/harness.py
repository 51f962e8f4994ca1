"""Running relay against the real-model server (issue 14): the environment, the arguments, a
bounded subprocess, and the rule that what cannot be had fails in CI and skips elsewhere.

Each relay run is a subprocess (``python -m relay.cli``) in the test's repository, with
``--model openai:<alias> --base-url <server>/v1 --max-output-tokens <the server's -n>`` and no
provider key in its environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from real_model.model_server import MODEL_ALIAS, RunningServer

RELAY_TIMEOUT_S = 600.0
"""Hard stop of one relay run (the limits in each test end it long before)."""
_DROPPED_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def need(found: RunningServer | str) -> RunningServer:
    """The server, or fail (CI) / skip (elsewhere) with the reason it could not be had."""
    if isinstance(found, RunningServer):
        return found
    if in_ci():
        pytest.fail(f"CI must run the real-model tests, but {found}", pytrace=False)
    pytest.skip(found)


@dataclass
class RelayRun:
    """One finished ``relay`` command: exit code, stdout, stderr and wall time (s)."""

    code: int
    out: str
    err: str
    seconds: float


def relay_env() -> dict[str, str]:
    """The environment of a relay subprocess: the test's, less every provider variable."""
    return {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}


def model_args(server: RunningServer) -> list[str]:
    """The model options of a relay run against ``server``, with relay's output cap at the
    server's ``-n``: relay sends ``max_tokens`` on every call (16000 unless told), and
    llama.cpp takes a request's ``max_tokens`` over its own ``-n`` (measured with xllamacpp
    0.2.14: ``-n 16`` and ``max_tokens: 200`` gave a 141-token answer)."""
    cap = str(server.settings.n_predict)
    return [
        "--model",
        f"openai:{MODEL_ALIAS}",
        "--base-url",
        server.base_url,
        "--max-output-tokens",
        cap,
    ]


def relay_cli(args: list[str | Path], *, timeout: float = RELAY_TIMEOUT_S) -> RelayRun:
    """Run ``python -m relay.cli ARGS``; a run past ``timeout`` is killed and fails the test."""
    argv = [sys.executable, "-m", "relay.cli", *(str(a) for a in args)]
    start = time.monotonic()
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            env=relay_env(),
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        pytest.fail(f"relay {args[:2]} ran over {timeout:.0f} s; stderr:\n{err[-3000:]}")
    return RelayRun(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)
