"""Deterministic kill points for the crash tests (``test_kill_points.py``), without hooks in
relay's code.

A relay command runs in a forked child of the test process (relay is imported once, so a run
costs its work, not an interpreter start). Before it runs, the child wraps the operations
after which a crash matters, and counts them as *points* in the order they happen:

* ``os.replace`` of one of relay's temporary files, or its exchange with the file it replaces
  (:func:`relay.fswrite.replace_file`): every write relay makes into the tree or its state,
  counted once before the rename (a temporary file is on disk) and once after it;
* every SQLite ``COMMIT`` of the store (the connection is made with a counting factory);
* every ``git commit`` and ``git push`` relay makes (:class:`relay.gitrepo.GitRepo`);
* the start of every process whose command line holds the test's marker (the model's
  commands and the audit's command): a kill there leaves the command running.

Only points of the main thread count, so that the numbering is the same in every run of the
same script. At the chosen point the child acts: ``kill`` sends itself SIGKILL (``kill -9``),
``sigint`` sends itself SIGINT (a Ctrl+C: the first asks for a pause, the second one, at the
same or a later point, interrupts whatever runs then).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TMP_SUFFIX = ".relay-tmp"
"""The suffix of the temporary files of :func:`relay.fswrite.replace_file`."""


@dataclass
class Plan:
    """What a child does at its points: ``actions`` maps a point number (from 1) to
    ``"kill"``, ``"sigint"`` or ``"sigint2"`` (two at once); every point is appended to ``log`` as ``number<TAB>label``."""

    log: Path
    actions: dict[int, str] = field(default_factory=dict)
    count: int = 0

    def hit(self, label: str) -> None:
        """Count one point of the main thread and act if the plan says so."""
        if threading.current_thread() is not threading.main_thread():
            return
        self.count += 1
        with self.log.open("a", encoding="utf-8") as fh:
            fh.write(f"{self.count}\t{label}\n")
        action = self.actions.get(self.count)
        if action == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif action in ("sigint", "sigint2"):
            for _ in range(1 if action == "sigint" else 2):
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0)  # the handler runs here, before the caller goes on


def _statement(sql: str) -> str:
    words = sql.split()
    return " ".join(words[:3]).upper() if words else ""


def _install(plan: Plan, marker: str) -> None:
    """Wrap the counted operations of this (child) process."""
    import relay.fswrite
    from relay.gitrepo import GitRepo

    real_replace = os.replace
    real_exchange = relay.fswrite._exchange

    def replace(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        ours = str(src).endswith(TMP_SUFFIX)
        if ours:
            plan.hit(f"before rename onto {Path(dst).name}")
        real_replace(src, dst, *args, **kwargs)
        if ours:
            plan.hit(f"wrote {Path(dst).name}")

    def exchange(new: str, target: Path) -> bool:  # relay.fswrite's rename onto a file
        plan.hit(f"before rename onto {Path(target).name}")
        done = real_exchange(new, target)
        if done:
            plan.hit(f"wrote {Path(target).name}")
        return done

    class Connection(sqlite3.Connection):
        last = ""

        def execute(self, sql: str, *args: Any, **kwargs: Any) -> sqlite3.Cursor:
            cursor = super().execute(sql, *args, **kwargs)
            what = _statement(sql)
            if what == "COMMIT":
                plan.hit(f"store commit ({self.last})")
            elif what and not what.startswith(("BEGIN", "SELECT", "PRAGMA")):
                self.last = what
            return cursor

        def commit(self) -> None:
            super().commit()
            plan.hit("store commit")

    real_connect = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        kwargs.setdefault("factory", Connection)
        return real_connect(*args, **kwargs)

    def after(method: Callable[..., Any], label: Callable[..., str]) -> Callable[..., Any]:
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = method(self, *args, **kwargs)
            plan.hit(label(*args))
            return result

        return wrapper

    real_popen_init = subprocess.Popen.__init__

    def popen_init(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        real_popen_init(self, args, *rest, **kwargs)
        text = " ".join(map(str, args)) if isinstance(args, Sequence) else str(args)
        if marker in text:
            plan.hit("started a command: " + text[max(0, text.find("python")) :][:60])

    os.replace = replace  # type: ignore[assignment]
    relay.fswrite._exchange = exchange  # type: ignore[assignment]
    sqlite3.connect = connect  # type: ignore[assignment]
    GitRepo.commit_all = after(GitRepo.commit_all, lambda subject, **_: f"git commit {subject}")
    GitRepo.push = after(GitRepo.push, lambda *a, **_: "git push")
    subprocess.Popen.__init__ = popen_init  # type: ignore[method-assign]


@dataclass(frozen=True)
class Outcome:
    """How a child ended: its exit code (``-9`` when killed), stdout and stderr."""

    code: int
    stdout: str
    stderr: str

    @property
    def killed(self) -> bool:
        return self.code == -signal.SIGKILL


def run_relay(
    argv: list[str], folder: Path, *, plan: Plan | None = None, marker: str = ""
) -> Outcome:
    """Run ``relay ARGV`` (``relay.cli.main``) in a child process, with ``plan``'s points.

    The child is forked from this process when it has no other thread (a fork copies no lock
    another thread holds, and costs no interpreter start); else it is a new interpreter that
    runs this module. Its stdout and stderr go to files in ``folder``. Returns when the child
    ended (exited or was killed); never raises for the child's failures."""
    folder.mkdir(parents=True, exist_ok=True)
    n = len(list(folder.glob("*.out"))) + 1
    out, err = folder / f"{n}.out", folder / f"{n}.err"
    if threading.active_count() > 1:
        spec = {"argv": argv, "out": str(out), "err": str(err), "marker": marker}
        if plan is not None:
            spec.update(log=str(plan.log), actions={str(k): v for k, v in plan.actions.items()})
        proc = subprocess.run([sys.executable, __file__, json.dumps(spec)], check=False)
        code = proc.returncode
    else:
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            _run_child(argv, out, err, plan, marker)
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return Outcome(code, out.read_text(encoding="utf-8"), err.read_text(encoding="utf-8"))


def _run_child(argv: list[str], out: Path, err: Path, plan: Plan | None, marker: str) -> None:
    """Run relay in this child process and end it with relay's exit code."""
    code = 99
    try:
        code = _child(argv, out, err, plan, marker)
    except BaseException:
        with contextlib.suppress(Exception), err.open("a", encoding="utf-8") as fh:
            fh.write(traceback.format_exc())
    finally:
        os._exit(code)


def _child(argv: list[str], out: Path, err: Path, plan: Plan | None, marker: str) -> int:
    stdout = out.open("w", encoding="utf-8", buffering=1)
    stderr = err.open("w", encoding="utf-8", buffering=1)
    os.dup2(stdout.fileno(), 1)
    os.dup2(stderr.fileno(), 2)
    sys.stdout, sys.stderr = stdout, stderr
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if plan is not None:
        _install(plan, marker)
    from relay import cli

    try:
        code = cli.main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    stdout.flush()
    stderr.flush()
    return code


def points(log: Path) -> list[str]:
    """The labels of the points a run logged, in order (index 0 is point 1)."""
    if not log.exists():
        return []
    return [line.split("\t", 1)[1] for line in log.read_text(encoding="utf-8").splitlines()]


def wait_gone(marker: str, timeout: float = 20.0) -> None:
    """Wait until no process's command line holds ``marker`` (a command the killed run left
    running ends on its own, as it would on the user's machine)."""
    deadline = time.monotonic() + timeout
    while True:
        proc = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True, check=False)
        pids = [int(p) for p in proc.stdout.split() if int(p) != os.getpid()]
        if not pids:
            return
        if time.monotonic() > deadline:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            return
        time.sleep(0.02)


if __name__ == "__main__":  # the child as a new interpreter (see run_relay)
    given = json.loads(sys.argv[1])
    child_plan = None
    if "log" in given:
        actions = {int(k): v for k, v in given["actions"].items()}
        child_plan = Plan(Path(given["log"]), actions)
    out_path, err_path = Path(given["out"]), Path(given["err"])
    _run_child(given["argv"], out_path, err_path, child_plan, given["marker"])
