"""User controls with real processes and real signals (SPEC §10, §12): Ctrl+C, SIGTERM and
`relay pause` during a long tool call, `relay resume`, `relay say` and the inbox and goal-file
supplements, `relay clear`, the one-run-per-tree lock, and `relay log [-f]`.

Every run is the installed ``relay`` console script started with :class:`subprocess.Popen` in
its own session, against a real temporary git repository, with the scripted model. A ``shell``
call that sleeps (with a unique duration, so that ``pgrep -f`` finds exactly its processes) or
waits for a gate file outside the repository keeps a run busy long enough to interact with it.
The helpers here are also used by ``test_crash_safety.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import call, complete, git, load_json, read_transcript, respond, state_dir

from relay.store import Store

RELAY = str(Path(sys.executable).parent / "relay")
GOAL = "Create notes.txt saying hello."
NOTES = {"deliverables": [{"file": "notes.txt", "contains": "hello"}]}
WRITE_NOTES = call("write_file", path="notes.txt", content="hello\n")

START_TIMEOUT_S = 20.0
"""How long a run may take to reach its slow tool call (process start, git, first step)."""
STOP_WITHIN_S = 2.0
"""SPEC §10: a pause or signal stops the run at once; the tests allow this much."""


# --------------------------------------------------------------------------- live-run helpers


def wait_for(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.02)


def pgrep(marker: str) -> list[int]:
    """PIDs of the live processes whose command line contains ``marker``."""
    proc = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True, check=False)
    return [pid for pid in map(int, proc.stdout.split()) if pid != os.getpid() and alive(pid)]


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running process (a zombie waiting to be reaped is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in {"Z", "X"}


class Run:
    """A ``relay`` process started in the background; stdout and stderr go to files."""

    def __init__(self, proc: subprocess.Popen[bytes], out: Path, err: Path) -> None:
        self.proc = proc
        self.out = out
        self.err = err

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait(self, timeout: float = 60) -> int:
        return self.proc.wait(timeout=timeout)

    def wait_timed(self, timeout: float = 30) -> tuple[int, float]:
        """Exit code and the seconds it took from now."""
        t0 = time.monotonic()
        code = self.proc.wait(timeout=timeout)
        return code, time.monotonic() - t0

    @property
    def stdout(self) -> str:
        return self.out.read_text(encoding="utf-8")

    @property
    def stderr(self) -> str:
        return self.err.read_text(encoding="utf-8")

    def json(self) -> dict[str, Any]:
        assert "Traceback" not in self.stderr, self.stderr
        return load_json(self.stdout)


class Live:
    """Starts ``relay`` processes and cleans up after them (the ``live`` fixture)."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path / "live"
        self.tmp.mkdir()
        self.gates = Path(tempfile.mkdtemp(prefix="relay-gates-", dir="/var/tmp"))
        self.runs: list[Run] = []
        self.markers: list[str] = []

    def start(self, *args: str | Path) -> Run:
        """Start ``relay ARGS...`` in a new session (its own process group)."""
        n = len(self.runs) + 1
        out, err = self.tmp / f"run{n}.out", self.tmp / f"run{n}.err"
        with out.open("wb") as fo, err.open("wb") as fe:
            proc = subprocess.Popen(
                [RELAY, *map(str, args)],
                stdout=fo,
                stderr=fe,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        run = Run(proc, out, err)
        self.runs.append(run)
        return run

    def run(self, repo: Path, script: Path, goal: str | None = GOAL, *extra: str | Path) -> Run:
        """Start ``relay run [GOAL] --repo REPO --model scripted:SCRIPT --json EXTRA...``."""
        args: list[str | Path] = ["run"] if goal is None else ["run", goal]
        return self.start(*args, "--repo", repo, "--model", f"scripted:{script}", "--json", *extra)

    def relay(self, *args: str | Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run ``relay ARGS...`` to its end (a second process next to a live run)."""
        return subprocess.run(
            [RELAY, *map(str, args)],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )

    def status(self, repo: Path) -> dict[str, Any]:
        """``relay status --json``, which must succeed and print one JSON object."""
        proc = self.relay("status", "--repo", repo, "--json")
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr, proc.stderr
        return json.loads(proc.stdout)

    def slow(self, seconds: int = 30) -> str:
        """A unique ``sleep`` command (its text is the ``pgrep -f`` marker of its processes)."""
        marker = f"sleep {seconds}.{uuid.uuid4().int % 10**8:08d}"
        self.markers.append(marker)
        return marker

    def gate(self) -> tuple[str, Path]:
        """A shell command that waits (at most ~60 s) until the returned file exists; the
        file's path is the ``pgrep -f`` marker of the waiting shell. The file lies under
        ``/var/tmp``, which the sandbox shows (read-only), unlike the private ``/tmp``."""
        path = self.gates / f"gate-{uuid.uuid4().hex[:12]}"
        self.markers.append(str(path))
        command = f"for i in $(seq 1200); do [ -f '{path}' ] && exit 0; sleep 0.05; done; exit 1"
        return command, path

    def wait_started(self, run: Run, marker: str, timeout: float = START_TIMEOUT_S) -> list[int]:
        """Wait until the run's tool call with ``marker`` is running; its PIDs."""

        def started() -> list[int]:
            if run.proc.poll() is not None:
                raise AssertionError(
                    f"the run ended (exit {run.proc.returncode}) before its tool call started:"
                    f"\n{run.stderr[-3000:]}\n{run.stdout[-3000:]}"
                )
            return pgrep(marker)

        return wait_for(started, timeout, f"the tool call {marker!r} to start")

    def cleanup(self) -> None:
        """Kill every process the test started that is still there (by PID)."""
        for run in self.runs:
            if run.proc.poll() is None:
                try:
                    os.killpg(run.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    run.proc.kill()
        for marker in self.markers:
            for pid in pgrep(marker):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        for run in self.runs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                run.proc.wait(timeout=10)
        shutil.rmtree(self.gates, ignore_errors=True)


@pytest.fixture()
def live(tmp_path: Path) -> Iterator[Live]:
    lv = Live(tmp_path)
    try:
        yield lv
    finally:
        lv.cleanup()


def shell(command: str) -> dict[str, Any]:
    return call("shell", command=command, timeout_s=120)


def handoff(note: str) -> dict[str, Any]:
    return call("handoff", note=note)


def gone(pids: list[int], timeout: float = 2.0) -> bool:
    """Whether every process in ``pids`` is gone within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def transcript_rows(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "transcript.jsonl"
    return [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]


def run_dir_of(data: dict[str, Any]) -> Path:
    return Path(data["run_dir"])


def kinds(data: dict[str, Any]) -> list[str]:
    return [e["kind"] for e in data["events"]]


def first_user_message(row: dict[str, Any]) -> str:
    return next(m["content"] for m in row["request"]["messages"] if m["role"] == "user")


# --------------------------------------------------------------------------- Ctrl+C / SIGTERM


@pytest.mark.parametrize(
    ("sig", "code", "how"),
    [(signal.SIGINT, 130, "Ctrl+C"), (signal.SIGTERM, 143, "SIGTERM")],
    ids=["sigint", "sigterm"],
)
def test_signal_during_shell_call_pauses_at_once(
    make_repo, write_script, live, sig, code, how
) -> None:
    repo = make_repo(config=NOTES)
    slow = live.slow()
    run = live.run(repo, write_script([respond(shell(slow)), complete()]))
    pids = live.wait_started(run, slow)
    calls_before = len(read_transcript(repo))
    assert calls_before == 1
    if sig == signal.SIGINT:
        os.killpg(run.pid, sig)  # Ctrl+C in a terminal signals the foreground process group
    else:
        os.kill(run.pid, sig)  # `kill PID`
    exit_code, took = run.wait_timed()
    assert exit_code == code, run.stderr
    assert took < STOP_WITHIN_S, f"the run took {took:.2f} s to stop"
    assert gone(pids), f"the shell call's processes survived: {pgrep(slow)}"
    assert len(read_transcript(repo)) == calls_before, "a model call happened after the signal"
    data = run.json()
    assert data["status"] == "paused"
    status = live.status(repo)
    assert status["status"] == "paused"
    assert status["reason"] == "user"
    assert how in status["message"]
    assert "relay resume" in status["message"]
    assert len(read_transcript(repo)) == calls_before


def test_second_ctrl_c_exits_at_once_and_resume_completes(make_repo, write_script, live) -> None:
    """The tool ignores SIGTERM, so the first Ctrl+C's shutdown waits for the kill grace
    period; the second Ctrl+C arrives during that shutdown, deterministically. Without the
    sandbox: inside it, SIGTERM ends the whole sandbox at once, so there is no grace period."""
    repo = make_repo(config=NOTES)
    slow = live.slow()
    stubborn = f"trap '' TERM; {slow}; true"
    script = write_script([respond(WRITE_NOTES), respond(shell(stubborn)), complete()])
    run = live.run(repo, script, GOAL, "--sandbox", "off")
    pids = live.wait_started(run, slow)
    calls_before = len(read_transcript(repo))
    assert calls_before == 2
    os.killpg(run.pid, signal.SIGINT)
    time.sleep(0.05)
    assert run.proc.poll() is None, "expected the first Ctrl+C's shutdown to be under way"
    os.killpg(run.pid, signal.SIGINT)
    exit_code, took = run.wait_timed()
    assert exit_code in {130, -signal.SIGINT}, run.stderr  # -2: killed by SIGINT, $? 130
    assert took < 1.0, f"the second Ctrl+C took {took:.2f} s to exit"
    assert "Traceback" not in run.stderr, run.stderr
    assert gone(pids), f"the shell call's processes survived: {pgrep(slow)}"
    assert len(read_transcript(repo)) == calls_before

    status = live.status(repo)  # readable and consistent, never corrupt
    assert status["status"] in {"paused", "active"}
    assert status["goal_id"]
    git(repo, "status", "--porcelain")
    assert not (repo / ".git" / "index.lock").exists()

    resumed = live.start(
        "resume", "--repo", repo, "--model", f"scripted:{write_script([complete()])}", "--json"
    )
    assert resumed.wait() == 0, resumed.stderr
    data = resumed.json()
    assert data["status"] == "complete"
    assert data["goal_id"] == status["goal_id"]
    assert git(repo, "show", "HEAD:notes.txt") == "hello\n"
    assert git(repo, "status", "--porcelain") == ""


# --------------------------------------------------------------------------- relay pause / resume


def test_pause_from_another_process_then_resume_restarts_counts(
    make_repo, write_script, live
) -> None:
    repo = make_repo(config=NOTES)
    slow = live.slow()
    script = write_script(
        [
            respond(WRITE_NOTES, handoff("notes written")),  # round 1
            respond(text="Thinking."),  # round 2: no tool call (no-progress streak 1)
            respond(shell(slow)),  # round 3
            complete(),
        ]
    )
    run = live.run(repo, script)
    pids = live.wait_started(run, slow)
    calls_before = len(read_transcript(repo))
    assert calls_before == 3

    paused = live.relay("pause", "--repo", repo)
    t_paused = time.monotonic()
    assert paused.returncode == 0, paused.stderr
    assert str(run.pid) in paused.stderr
    exit_code = run.wait(timeout=30)
    took = time.monotonic() - t_paused
    assert exit_code == 130, run.stderr
    assert took < STOP_WITHIN_S, f"the run took {took:.2f} s to stop after relay pause"
    assert gone(pids), f"the shell call's processes survived: {pgrep(slow)}"

    status = live.status(repo)
    assert status["status"] == "paused"
    assert status["reason"] == "user"
    assert status["rounds"] == 3
    assert "paused" in kinds(status)
    time.sleep(0.3)
    assert len(read_transcript(repo)) == calls_before, "a model call happened while paused"

    resumed = live.start(
        "resume", "--repo", repo, "--model", f"scripted:{write_script([complete()])}", "--json"
    )
    assert resumed.wait() == 0, resumed.stderr
    data = resumed.json()
    assert data["status"] == "complete"
    assert data["rounds"] == 4  # the goal's rounds go on ...
    assert data["no_progress_streak"] == 0
    assert "resumed" in kinds(data)
    rows = transcript_rows(run_dir_of(data))
    assert len(rows) == 1
    message = first_user_message(rows[0])
    assert "Round 1 of" in message  # ... but the counted rounds restarted
    assert "Round 4 of the goal" in message
    assert rows[0]["round"] == 4 and rows[0]["step"] == 1
    store = Store(state_dir(repo) / "relay.db")
    try:
        assert store.goal(data["goal_id"]).counted_rounds == 1  # only the round after resume
    finally:
        store.close()


def test_pause_of_a_goal_that_is_not_running_is_refused(make_repo, write_script, live) -> None:
    repo = make_repo(config=NOTES)
    question = respond(call("update_goal", status="needs_user_input", summary="?", question="Q?"))
    run = live.run(repo, write_script([question]))
    assert run.wait() == 2, run.stderr
    paused = live.relay("pause", "--repo", repo)
    assert paused.returncode == 1
    assert "needs_user_input" in paused.stderr
    assert live.status(repo)["status"] == "needs_user_input"


# --------------------------------------------------------------------------- supplements


@pytest.mark.parametrize("where", ["say", "inbox", "goal_file", "goal_file_outside"])
def test_supplement_reaches_the_next_request_and_restarts_counts(
    make_repo, write_script, live, where, tmp_path
) -> None:
    """Also a goal file outside the repository (issue 13, item 5): its edit counts too."""
    source = where.removesuffix("_outside")
    repo = make_repo(files={"GOAL.md": GOAL + "\n"}, config=NOTES)
    goal_file = repo / "GOAL.md"
    if where == "goal_file_outside":
        goal_file = tmp_path / "plans" / "GOAL.md"
        goal_file.parent.mkdir()
        goal_file.write_text(GOAL + "\n", encoding="utf-8")
    wait_cmd, gate = live.gate()
    script = write_script(
        [
            respond(WRITE_NOTES, handoff("notes written")),  # round 1
            respond(shell(wait_cmd)),  # round 2, step 1: the user adds to the goal meanwhile
            respond(handoff("read the supplement")),  # round 2, step 2
            complete(),  # round 3
        ]
    )
    extra = ("--goal-file", goal_file) if source == "goal_file" else ()
    run = live.run(repo, script, None if source == "goal_file" else GOAL, *extra)
    live.wait_started(run, str(gate))
    word = f"Write it in French, please ({uuid.uuid4().hex[:8]})."
    t_added = time.time()
    if source == "say":
        said = live.relay("say", word, "--repo", repo)
        assert said.returncode == 0, said.stderr
    elif source == "inbox":
        inbox = Path(live.status(repo)["inbox"])  # where relay status says the inbox is
        assert inbox == state_dir(repo) / "inbox"
        (inbox / "note.txt").write_text(word + "\n", encoding="utf-8")
        time.sleep(1.0)  # file watching delivers the event in the background
    else:
        with goal_file.open("a", encoding="utf-8") as fh:
            fh.write(word + "\n")
        time.sleep(1.0)
    gate.touch()
    assert run.wait() == 0, run.stderr + run.stdout[-2000:]
    data = run.json()
    assert data["status"] == "complete"

    sups = data["supplements"]
    assert len(sups) == 1, sups
    assert word in sups[0]["text"]
    assert sups[0]["source"] == source
    assert t_added - 5 <= float(sups[0]["created_at"]) <= time.time() + 5
    assert "supplement" in kinds(data)

    rows = transcript_rows(run_dir_of(data))
    by_step = {(r["round"], r["step"]): r for r in rows}
    before = json.dumps(by_step[(2, 1)]["request"])
    assert word not in before
    latest = by_step[(2, 2)]["request"]["messages"][-1]
    assert latest["role"] == "user", latest
    assert word in latest["content"]
    assert "the user's" in latest["content"]
    assert "newest" in latest["content"]
    # The supplement restarted the round counts: round 3 of the goal is counted round 2.
    message = first_user_message(by_step[(3, 1)])
    assert "Round 2 of" in message
    assert "Round 3 of the goal" in message
    assert word in message
    if source == "inbox":
        assert list((state_dir(repo) / "inbox").iterdir()) == []


# --------------------------------------------------------------------------- relay clear


def test_clear_then_a_new_goal_keeps_the_old_history(make_repo, write_script, live) -> None:
    repo = make_repo(config=NOTES)
    question = respond(call("update_goal", status="needs_user_input", summary="?", question="Q?"))
    first = live.run(repo, write_script([question]), "Old goal about apples.")
    assert first.wait() == 2, first.stderr
    old = first.json()
    old_run = run_dir_of(old).name

    refused = live.run(repo, write_script([complete()]), "Other goal.")
    assert refused.wait() == 1
    assert "relay clear" in refused.stderr

    cleared = live.relay("clear", "--repo", repo)
    assert cleared.returncode == 0, cleared.stderr
    status = live.status(repo)
    assert status["goal_id"] == old["goal_id"]
    assert status["status"] == "cleared"

    second = live.run(
        repo, write_script([respond(WRITE_NOTES), complete()]), "Create notes.txt with hello."
    )
    assert second.wait() == 0, second.stderr
    new = second.json()
    assert new["goal_id"] != old["goal_id"]
    assert new["status"] == "complete"

    log = live.relay("log", old_run, "--repo", repo)
    assert log.returncode == 0, log.stderr
    assert "run_started" in log.stdout
    assert "needs_user_input" in log.stdout
    assert old_run in log.stdout


def test_clear_of_a_running_goal_stops_it_and_stays_cleared(make_repo, write_script, live) -> None:
    repo = make_repo(config=NOTES)
    slow = live.slow()
    run = live.run(repo, write_script([respond(shell(slow)), complete()]))
    pids = live.wait_started(run, slow)
    cleared = live.relay("clear", "--repo", repo)
    t_cleared = time.monotonic()
    assert cleared.returncode == 0, cleared.stderr
    run.wait(timeout=30)
    assert time.monotonic() - t_cleared < STOP_WITHIN_S
    assert gone(pids)
    assert len(read_transcript(repo)) == 1
    status = live.status(repo)
    assert status["status"] == "cleared"  # never overwritten by the stopping run
    assert run.json()["status"] == "cleared"
    assert run.proc.returncode == 130  # stopped by the user, as the README's exit-code table says


# --------------------------------------------------------------------------- one run per tree


@pytest.mark.parametrize("how", ["run", "resume", "run GOAL"])
def test_a_second_run_in_the_same_tree_names_the_holder(make_repo, write_script, live, how) -> None:
    repo = make_repo(config=NOTES)
    slow = live.slow()
    first = live.run(repo, write_script([respond(shell(slow)), complete()]))
    live.wait_started(first, slow)
    other = write_script([respond(WRITE_NOTES), complete()])
    if how == "resume":
        second = live.start("resume", "--repo", repo, "--model", f"scripted:{other}", "--json")
    else:
        second = live.run(repo, other, "A second goal." if how == "run GOAL" else None)
    code = second.wait(timeout=30)
    try:
        assert code == 1, second.stderr
        assert "Traceback" not in second.stderr
        assert f"pid {first.pid}" in second.stderr, f"relay {how}: {second.stderr}"
        assert first.proc.poll() is None, "the first run was disturbed"
        assert len(read_transcript(repo)) == 1
        assert live.status(repo)["status"] == "active"
    finally:
        os.killpg(first.pid, signal.SIGINT)
        assert first.wait(timeout=10) == 130


def test_a_stale_lock_is_taken_over_with_a_warning(make_repo, write_script, live) -> None:
    repo = make_repo(config=NOTES)
    dead = subprocess.Popen(["true"])
    dead.wait()
    assert not alive(dead.pid)
    state = state_dir(repo)
    state.mkdir(parents=True)
    (state / "run.lock").write_text(str(dead.pid))
    run = live.run(repo, write_script([respond(WRITE_NOTES), complete()]))
    assert run.wait() == 0, run.stderr
    data = run.json()
    assert data["status"] == "complete"
    warnings = [e["detail"] for e in data["events"] if e["kind"] == "warning"]
    assert any("lock" in w and str(dead.pid) in w for w in warnings), warnings


# --------------------------------------------------------------------------- relay log


def test_log_prints_the_latest_runs_events(make_repo, write_script, live) -> None:
    repo = make_repo(config=NOTES)
    first = live.run(repo, write_script([respond(text="Nothing yet.")]), GOAL, "--max-rounds", "1")
    assert first.wait() == 4, first.stderr
    second = live.start(
        "resume",
        "--repo",
        repo,
        "--model",
        f"scripted:{write_script([respond(WRITE_NOTES), complete('notes written')])}",
        "--json",
    )
    assert second.wait() == 0, second.stderr
    latest = run_dir_of(second.json()).name
    log = live.relay("log", "--repo", repo)
    assert log.returncode == 0, log.stderr
    lines = [ln for ln in log.stdout.splitlines() if ln.strip()]
    assert lines, log.stdout
    assert f"run_started: run {latest}" in log.stdout
    assert run_dir_of(first.json()).name not in log.stdout  # only the latest run
    assert any("round 2" in ln and "update_goal" in ln and "complete" in ln for ln in lines), (
        log.stdout
    )
    for ln in lines:  # human-readable: time, round, kind: detail — no JSON, no traceback
        assert ln[:8].count(":") == 2, ln
    assert "{" not in log.stdout.split("\n", 1)[0]


def test_log_follow_streams_a_live_run_and_returns_when_it_ends(
    make_repo, write_script, live
) -> None:
    repo = make_repo(config=NOTES)
    wait_cmd, gate = live.gate()
    run = live.run(repo, write_script([respond(shell(wait_cmd)), respond(WRITE_NOTES), complete()]))
    live.wait_started(run, str(gate))
    follower = live.start("log", "-f", "--repo", repo)
    wait_for(lambda: "run_started" in follower.stdout, 15, "relay log -f to print the run's start")
    time.sleep(0.5)
    assert follower.proc.poll() is None, "relay log -f returned while the run was live"
    assert "update_goal" not in follower.stdout
    gate.touch()
    assert run.wait() == 0, run.stderr
    code = follower.wait(timeout=15)
    assert code == 0, follower.stderr
    assert "update_goal" in follower.stdout
    assert "complete" in follower.stdout
