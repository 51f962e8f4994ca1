"""One attempt at a goal task on a worker (issue 17, items 1-3): clone, run, collect.

The attempt clones the task's remote into its temporary folder and runs ``relay run GOAL
--branch B --push`` there as a child process that lives exactly as long as the task:

* it dies with the worker process (``PR_SET_PDEATHSIG``: a killed worker's relay never pushes
  after the engine's retry has started) and runs in its own session, so a terminal's Ctrl+C
  reaches it only through the batch;
* when the batch is cancelled (:meth:`Link.cancelled`), it gets SIGINT: it pauses at the next
  step boundary and pushes its round;
* when it ends, whatever it started is killed with its process group.

A branch that already carries this goal continues it (``relay run`` resumes the same goal);
one that carries it ``complete`` is reported as such without running anything. The result
says ``pushed`` only when the remote's branch is the clone's head; a ``complete`` goal whose
head is not on the remote (or whose remote can no longer be read) is ``lost``
(``not_pushed``): its commits die with the folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import yaml

from relay.batch.results import BatchResult, lost
from relay.batch.task import GoalTask
from relay.branch_trust import read_trusted
from relay.config import load_config
from relay.errors import RelayError, RepoStateError
from relay.gitenv import git_environment
from relay.protected import goal_state_path

__all__ = ["run"]

POLL_S = 0.25
"""Seconds between two looks at the batch's cancel link while relay runs."""

GIT_TIMEOUT_S = 300.0
"""Seconds a clone or ``ls-remote`` may take."""

_BOOT = (
    "import ctypes, os, runpy, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)\n"
    "if os.getppid() != int(sys.argv[1]): os._exit(137)\n"
    "sys.argv = ['relay', *sys.argv[2:]]\n"
    "runpy.run_module('relay.cli', run_name='__main__', alter_sys=True)\n"
)
"""Starts relay so that it dies with the process that started it (set before relay runs;
kept across ``exec``), then runs ``python -m relay.cli ARGS``."""


def run(task: GoalTask, folder: Path, *, host: str, number: int) -> BatchResult:
    """Run one attempt of ``task`` in ``folder`` (removed by the caller). Raises
    ``RelayError`` when the remote cannot be cloned or relay refused the goal."""
    clone = folder / "repo"
    _git(["clone", "--quiet", "--no-checkout", "--", task.remote, str(clone)], folder)
    if _git(["ls-remote", "--heads", "origin", f"refs/heads/{task.branch}"], clone).strip():
        _git(["checkout", "--quiet", "--detach", f"origin/{task.branch}"], clone)
        done = _complete_on_branch(task, folder, clone, host, number)
        if done is not None:
            return done
    else:
        try:
            _git(["checkout", "--quiet", "--detach", task.base], clone)
        except RepoStateError:
            raise RepoStateError(
                f"the commit {task.base[:12]} the goals start from is not on the remote "
                f"{task.remote}: push it first"
            ) from None
    code, out, err = _run_relay(task, folder, clone)
    try:
        data = json.loads(out)
    except json.JSONDecodeError:
        said = err.strip().splitlines()[-5:] or [f"relay exited with status {code}"]
        raise RelayError("\n".join(said)) from None
    return _result(task, clone, data, code, host=host, number=number)


def _run_relay(task: GoalTask, folder: Path, clone: Path) -> tuple[int, str, str]:
    """Run relay for ``task`` until it ends; forward a cancel as SIGINT. Returns its exit
    code, stdout and stderr."""
    args = _relay_args(task, folder, clone)
    out_path = folder / "stdout.json"
    with out_path.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT, str(os.getpid()), *args],
            cwd=folder,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        said: list[str] = []
        reader = threading.Thread(target=_read_stderr, args=(proc, task, said), daemon=True)
        reader.start()
        try:
            _wait(proc, task)
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # nothing relay started outlives it
            proc.wait()
            reader.join(timeout=5)
    return proc.returncode, out_path.read_text(encoding="utf-8", errors="replace"), "".join(said)


def _read_stderr(proc: subprocess.Popen[bytes], task: GoalTask, said: list[str]) -> None:
    """Keep relay's stderr (its error, if it fails); ``task.verbose``: also pass each line on
    to this process's stderr, prefixed ``[name]``."""
    assert proc.stderr is not None
    for raw in proc.stderr:
        line = raw.decode("utf-8", "replace")
        said.append(line)
        del said[:-200]
        if task.verbose and line.strip():
            print(f"[{task.name}] {line.strip()}", file=sys.stderr, flush=True)


def _wait(proc: subprocess.Popen[bytes], task: GoalTask) -> None:
    """Wait for relay; the first cancel of the batch sends it SIGINT (pause and push)."""
    told = False
    while True:
        try:
            proc.wait(timeout=POLL_S)
            return
        except subprocess.TimeoutExpired:
            pass
        if told:
            continue
        try:
            cancelled = task.link.cancelled()
        except Exception:  # the engine went away: relay finishes its goal on its own
            cancelled = False
        if cancelled:
            proc.send_signal(signal.SIGINT)
            told = True


def _relay_args(task: GoalTask, folder: Path, clone: Path) -> list[str]:
    """``relay run`` for ``task``: its goal file, configuration and script written into
    ``folder`` (outside the clone)."""
    goal_file = folder / "goal.md"
    front = f"---\n{yaml.safe_dump(task.front, sort_keys=False)}---\n" if task.front else ""
    goal_file.write_text(front + task.goal.strip() + "\n", encoding="utf-8")
    args = ["run", "--goal-file", str(goal_file), "--repo", str(clone), "--branch", task.branch]
    args += ["--push", "--json", "--no-color"] + ([] if task.verbose else ["--quiet"])
    if task.config is not None:
        config = folder / "relay-config.yaml"
        config.write_text(task.config, encoding="utf-8")
        args += ["--config", str(config)]
    if task.script is not None:
        args += ["--model", f"scripted:{_script_file(task.script)}"]
    elif task.model:
        args += ["--model", task.model]
    return [*args, *task.flags]


def _script_file(text: str) -> Path:
    """Where a scripted model's script is written: a path named after its content, the same
    for every attempt on this machine, so that a retry's script goes on where the goal's
    branch left it (a scripted model continues only the same script file, SPEC §13). In a
    folder of this user's only."""
    folder = Path(tempfile.gettempdir()) / f"relay-scripts-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    if folder.is_symlink() or folder.stat().st_uid != os.getuid():
        raise RelayError(f"{folder} is not this user's folder; remove it")
    path = folder / f"{hashlib.sha256(text.encode()).hexdigest()[:24]}.yaml"
    if not path.exists():
        path.write_text(text, encoding="utf-8")
    return path


def _result(
    task: GoalTask, clone: Path, data: dict[str, Any], code: int, *, host: str, number: int
) -> BatchResult:
    """The row of a finished relay run: what it printed, its summary, and whether its head is
    on the remote."""
    head = _git(["rev-parse", "--verify", "-q", f"refs/heads/{task.branch}"], clone, check=False)
    head = head.strip() or None
    try:
        remote, unread = _remote_head(task, clone), None
    except RepoStateError as exc:  # gone or unreachable: nothing of this run is known there
        remote, unread = None, str(exc).splitlines()[0]
    pushed = head is not None and head == remote
    summary = None
    with contextlib.suppress(OSError, KeyError, TypeError):
        summary = (Path(data["run_dir"]) / "summary.md").read_text(encoding="utf-8")
    message = (data.get("message") or "").strip()
    fields: dict[str, Any] = {
        "rounds": data.get("rounds", 0),
        "tokens": (data.get("tokens") or {}).get("counted", 0),
        "cost_usd": data.get("cost_usd", 0.0),
        "pushed": pushed,
        "head": head,
        "host": host,
        "attempt": number,
        "summary": summary,
        "result": data,
    }
    if data.get("status") == "complete" and not pushed:
        where = f"the remote's branch is at {remote[:7]}" if remote else "the remote has no branch"
        where = f"the remote could not be read ({unread})" if unread else where
        detail = f"the goal completed at {(head or '?')[:7]}, but {where}"
        return lost(task.name, task.branch, "not_pushed", detail, **fields)
    first = message.splitlines()[0] if message else ""
    return BatchResult(
        task.name, task.branch, code, data.get("status", "error"), data.get("reason"),
        message=first, **fields,
    )  # fmt: skip


def _complete_on_branch(
    task: GoalTask, folder: Path, clone: Path, host: str, number: int
) -> BatchResult | None:
    """The row of a goal the remote's branch (checked out in ``clone``) already carries as
    ``complete`` (an earlier attempt finished it and was lost before it answered), in a goal
    state relay sealed with this machine's key (:mod:`relay.branch_trust`); None otherwise.
    Raises ``ConfigError`` for a configuration relay would refuse."""
    config_path = None
    if task.config is not None:
        config_path = folder / "relay-config.yaml"
        config_path.write_text(task.config, encoding="utf-8")
    config = load_config(clone, config_path, task.front, {})
    text = _git(["show", f"HEAD:{goal_state_path(config)}"], clone, check=False)
    state = read_trusted(text, f"{goal_state_path(config)} on {task.branch}") if text else None
    goal = state["goal"] if state is not None else None  # relay's own, sealed (SPEC §14)
    if goal is None or goal.get("status") != "complete":
        return None
    if str(goal.get("text", "")).strip() != task.goal.strip():
        return None
    head = _remote_head(task, clone)
    return BatchResult(
        task.name, task.branch, 0, "complete", goal.get("reason"), rounds=goal.get("rounds", 0),
        message="complete on its branch already (an earlier attempt finished it)",
        pushed=True, head=head, host=host, attempt=number,
    )  # fmt: skip


def _remote_head(task: GoalTask, clone: Path) -> str | None:
    out = _git(["ls-remote", "--heads", "origin", f"refs/heads/{task.branch}"], clone)
    return out.split("\t", 1)[0].strip() or None


def _git(args: list[str], cwd: Path, *, check: bool = True) -> str:
    """Run git (the environment of relay's network calls: no provider keys, no prompts);
    returns stdout. Raises ``RepoStateError`` with git's message when ``check`` and it fails."""
    try:
        proc = subprocess.run(
            ["git", "-c", "core.hooksPath=/dev/null", "-c", "protocol.ext.allow=never", *args],
            cwd=cwd,
            env=git_environment(network=True),
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise RepoStateError(f"git {args[0]} took more than {GIT_TIMEOUT_S:.0f} s") from None
    if check and proc.returncode != 0:
        raise RepoStateError(f"git {args[0]} failed: {proc.stderr.strip()}")
    return proc.stdout
