"""llama.cpp's OpenAI-compatible server for the real-model tests (issue 14), from ``xllamacpp``.

``xllamacpp`` (PyPI, pinned by the ``real-model`` extra) is a prebuilt wheel of llama.cpp's
server: ``xllamacpp.Server(CommonParams)`` loads the model and serves HTTP on
``CommonParams.hostname``/``port`` (port 0: a free one, read back from
``Server.listening_address``) until the object is destroyed. The server runs in a child process
of its own (this file run as a script) so that a test can stop it, and so that it dies with
the test session: the child exits when its standard input closes.

The settings mirror ``llama-server`` flags: ``use_jinja`` is ``--jinja`` (the chat template
that parses tool calls; llama.cpp answers a request with tools HTTP 500 "tools param requires
--jinja flag" without it), ``n_predict`` is ``-n`` (the output cap of a request that sets no
``max_tokens``), ``n_ctx`` is ``-c``, ``cpuparams.n_threads`` is ``-t``, ``sampling.temp`` is
``--temp`` (0: greedy, the same answer to the same request).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

MODEL_ALIAS = "qwen2.5-coder-0.5b"
"""The model name the server reports (llama.cpp answers whatever name a request gives)."""
READY_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class ServerSettings:
    """How the server is started.

    Attributes:
        jinja: parse tool calls with the model's chat template (``--jinja``).
        n_ctx: context size in tokens (``-c``).
        n_predict: output cap in tokens for a request that sets none (``-n``); a request's
            ``max_tokens`` overrides it, so relay is run with ``--max-output-tokens`` at
            this value (:func:`real_model.harness.model_args`).
        threads: CPU threads for generation and prompt processing (``-t``, ``-tb``).
        temperature: sampling temperature for a request that sets none (``--temp``).
        poll: how hard idle threads spin waiting for work, 0-100 (``--poll``). 0: they sleep;
            on a busy machine a spinning thread that loses its core slows generation tenfold
            (measured: 0.7 tokens/s at the default 50, 4.7 at 0, with 2 threads on 2 shared
            cores).
    """

    jinja: bool = True
    n_ctx: int = 8192
    n_predict: int = 384
    threads: int = 2
    temperature: float = 0.0
    poll: int = 0


@dataclass
class RunningServer:
    """A started server: its base URL (``http://127.0.0.1:PORT``), the ``/v1`` URL for
    ``--base-url``, and the child process with its log file."""

    url: str
    process: subprocess.Popen[str]
    log: Path
    settings: ServerSettings = field(default_factory=ServerSettings)

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def log_tail(self, chars: int = 3000) -> str:
        """The end of the server's own log (llama.cpp writes it on stderr)."""
        try:
            return self.log.read_text(encoding="utf-8", errors="replace")[-chars:]
        except OSError as exc:
            return f"(no server log: {exc})"

    def stop(self) -> None:
        """Stop the server: close its stdin, then SIGTERM, then SIGKILL after a grace time."""
        if self.process.poll() is not None:
            return
        with contextlib.suppress(OSError):
            if self.process.stdin:
                self.process.stdin.close()
        try:
            self.process.wait(STOP_TIMEOUT_S)
            return
        except subprocess.TimeoutExpired:
            self.process.terminate()
        try:
            self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class ServerUnavailable(Exception):
    """The server could not be started; the message says why (with the end of its log)."""


def xllamacpp_problem() -> str | None:
    """Why ``xllamacpp`` cannot be imported by this interpreter, or None when it can."""
    proc = subprocess.run(
        [sys.executable, "-c", "import xllamacpp"],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode == 0:
        return None
    last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
    return f"xllamacpp cannot be imported ({last}); install it: pip install -e '.[real-model]'"


def start_server(model: Path, settings: ServerSettings, log: Path) -> RunningServer:
    """Start the server on 127.0.0.1 (a free port) and wait until ``/health`` answers 200.

    Raises:
        ServerUnavailable: the child exited, printed no address, or was not ready within
            ``READY_TIMEOUT_S`` (the message holds the end of its log).
    """
    args = [sys.executable, str(Path(__file__).resolve()), "--model", str(model)]
    args += ["--n-ctx", str(settings.n_ctx), "--n-predict", str(settings.n_predict)]
    args += ["--threads", str(settings.threads), "--temperature", str(settings.temperature)]
    args += ["--poll", str(settings.poll), "--jinja" if settings.jinja else "--no-jinja"]
    with log.open("w", encoding="utf-8") as sink:
        process = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=sink, text=True
        )
    server = RunningServer(url="", process=process, log=log, settings=settings)
    try:
        server.url = _read_address(process)
        _wait_ready(server)
    except ServerUnavailable as exc:
        server.stop()
        raise ServerUnavailable(f"{exc}\n--- server log ---\n{server.log_tail()}") from None
    return server


def _read_address(process: subprocess.Popen[str]) -> str:
    """The ``{"url": ...}`` line the child prints once the model is loaded."""
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:  # any descriptor number (select: < 1024)
        selector.register(process.stdout, selectors.EVENT_READ)
        ready = selector.select(READY_TIMEOUT_S)
    if not ready:
        raise ServerUnavailable(f"the llama.cpp server loaded no model in {READY_TIMEOUT_S:.0f} s")
    line = process.stdout.readline()
    if not line:
        code = process.wait(STOP_TIMEOUT_S)
        raise ServerUnavailable(f"the llama.cpp server exited with code {code} before serving")
    try:
        return str(json.loads(line)["url"]).rstrip("/")
    except (ValueError, KeyError, TypeError):
        raise ServerUnavailable(f"the llama.cpp server printed {line!r}, not its address") from None


def _wait_ready(server: RunningServer) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    last = "no answer"
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise ServerUnavailable(f"the llama.cpp server exited with {server.process.returncode}")
        try:
            with urllib.request.urlopen(f"{server.url}/health", timeout=5) as answer:
                if answer.status == 200:
                    return
        except urllib.error.HTTPError as exc:  # 503 while the model loads
            last = f"HTTP {exc.code}"
        except OSError as exc:
            last = str(exc)
        time.sleep(0.5)
    raise ServerUnavailable(
        f"the llama.cpp server was not ready in {READY_TIMEOUT_S:.0f} s: {last}"
    )


# The child process ----------------------------------------------------------------------------


def _serve(ns: argparse.Namespace) -> int:
    """Load the model, print the address as one JSON line, serve until stdin closes."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = ns.model
    params.model_alias = MODEL_ALIAS
    params.hostname = "127.0.0.1"
    params.port = 0
    params.n_ctx = ns.n_ctx
    params.n_predict = ns.n_predict
    params.n_parallel = 1
    params.cpuparams.n_threads = ns.threads
    params.cpuparams_batch.n_threads = ns.threads
    params.cpuparams.poll = ns.poll
    params.cpuparams_batch.poll = ns.poll
    params.sampling.temp = ns.temperature
    params.use_jinja = ns.jinja
    server = xllamacpp.Server(params)
    print(json.dumps({"url": server.listening_address}), flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    done.wait()
    del server
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve a GGUF model with llama.cpp (xllamacpp).")
    parser.add_argument("--model", required=True)
    parser.add_argument("--n-ctx", type=int, default=ServerSettings.n_ctx)
    parser.add_argument("--n-predict", type=int, default=ServerSettings.n_predict)
    parser.add_argument("--threads", type=int, default=ServerSettings.threads)
    parser.add_argument("--temperature", type=float, default=ServerSettings.temperature)
    parser.add_argument("--poll", type=int, default=ServerSettings.poll)
    parser.add_argument("--jinja", action=argparse.BooleanOptionalAction, default=True)
    return _serve(parser.parse_args(argv))


if __name__ == "__main__":
    os.environ.setdefault("LLAMA_LOG_COLORS", "0")
    sys.exit(main())
