"""``relay batch`` on a real Dask cluster (issue 17, item 6): a ``LocalCluster`` of two worker
processes on 127.0.0.1 (one ``goal`` slot each) and a bare git remote. Four goals on two workers
all complete with their branches on the remote; a worker killed by pid mid-goal is retried by
Dask and the retry completes the goal from its branch; SIGTERM to ``relay batch`` pauses every
running goal, which pushes its state.

Without ``dask[distributed]`` these tests skip, but with ``CI=true`` they fail: CI installs
``goal-relay[dask]`` (.ci/run)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import GIT_EMAIL, GIT_NAME, call, complete, git, respond

if os.environ.get("CI") == "true":
    import distributed  # CI installs goal-relay[dask]: a missing Dask fails, never skips
else:
    distributed = pytest.importorskip("distributed")


WAIT_S = 90.0
"""The longest a test waits for its goals (they take seconds)."""


@pytest.fixture(scope="module")
def cluster():
    """Two worker processes, one thread and one ``goal`` slot each, on loopback."""
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            resources={"goal": 1},
        ) as local,
        distributed.Client(local) as client,
    ):
        yield client


def _remote_and_clone(make_repo, tmp_path: Path) -> tuple[Path, Path]:
    """A bare remote and the submitting clone; the goals' shell commands reach the test's
    marker files (no sandbox)."""
    seed = make_repo(name="seed", config={"sandbox": {"mode": "off"}})
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(remote))
    clone = tmp_path / "submitter"
    git(tmp_path, "clone", "-q", str(remote), str(clone))
    git(clone, "config", "user.name", GIT_NAME)
    git(clone, "config", "user.email", GIT_EMAIL)
    return remote, clone


def _batch(tmp_path: Path, goals: list[dict]) -> Path:
    path = tmp_path / "goals.yaml"
    path.write_text(yaml.safe_dump(goals))
    return path


def _run(batch: Path, clone: Path, client) -> list:
    from relay.batch import run_batch
    from relay.batch.engines import DaskEngine

    return run_batch(batch, clone, DaskEngine(client), timeout_s=WAIT_S)


def test_four_goals_on_two_workers_complete_with_their_branches_on_the_remote(
    cluster, make_repo, tmp_path, write_script
):
    remote, clone = _remote_and_clone(make_repo, tmp_path)
    words = ["alpha", "beta", "gamma", "delta"]
    goals = [
        {
            "goal": f"Write {word}.txt.",
            "name": word,
            "model": "scripted:"
            + str(write_script([respond(call("write_file", path=f"{word}.txt", content=word)),
                                complete()])),
        }
        for word in words
    ]  # fmt: skip
    started = time.monotonic()
    results = {r.name: r for r in _run(_batch(tmp_path, goals), clone, cluster)}
    assert time.monotonic() - started < WAIT_S
    for word in words:
        r = results[word]
        assert (r.status, r.exit_code, r.pushed, r.attempt) == ("complete", 0, True, 1), r
        assert git(remote, "show", f"relay/batch-{word}:{word}.txt") == word
        assert git(remote, "rev-parse", f"relay/batch-{word}").strip() == r.head
    assert git(clone, "status", "--short") == ""


def _worker_running(client, deadline: float) -> str:
    while time.monotonic() < deadline:
        busy = [addr for addr, keys in client.processing().items() if keys]
        if busy:
            return busy[0]
        time.sleep(0.1)
    raise AssertionError("no worker runs the goal")


def test_a_worker_killed_mid_goal_is_retried_and_the_goal_completes_from_its_branch(
    cluster, make_repo, tmp_path, write_script
):
    """Round 1 writes a.txt and is pushed; round 2 waits (marker file), the test kills its
    worker with SIGKILL; Dask retries the task on a worker, which continues the goal from the
    branch (round 2 again) and completes it."""
    remote, clone = _remote_and_clone(make_repo, tmp_path)
    marker = tmp_path / "round-2-started"
    wait = respond(call("shell", command=f"touch {marker}; sleep 3"))
    script = write_script(
        [
            respond(call("write_file", path="a.txt", content="a"), call("handoff", note="go on")),
            wait,
            complete(),
        ]
    )
    batch = _batch(
        tmp_path, [{"goal": "Write a.txt.", "name": "kill", "model": f"scripted:{script}"}]
    )
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(_run, batch, clone, cluster)
        deadline = time.monotonic() + WAIT_S
        while not marker.exists():
            assert time.monotonic() < deadline and not future.done(), "round 2 never started"
            time.sleep(0.05)
        worker = _worker_running(cluster, deadline)
        os.kill(cluster.run(os.getpid, workers=[worker])[worker], signal.SIGKILL)
        [result] = future.result(timeout=WAIT_S)
    assert (result.status, result.pushed, result.attempt) == ("complete", True, 2), result
    assert result.rounds == 2
    assert git(remote, "show", "relay/batch-kill:a.txt") == "a"
    subjects = git(remote, "log", "--format=%s", "relay/batch-kill").splitlines()
    assert subjects[0].startswith("relay: round 2: complete")
    assert not any("round 2:" in s for s in subjects[1:])  # the killed round never pushed


def test_sigterm_pauses_every_running_goal_which_pushes_its_state(
    cluster, make_repo, tmp_path, write_script
):
    remote, clone = _remote_and_clone(make_repo, tmp_path)
    goals = []
    for name in ("one", "two"):
        marker = tmp_path / f"{name}-running"
        script = write_script(
            [
                respond(call("write_file", path=f"{name}.txt", content=name)),
                respond(call("shell", command=f"touch {marker}; sleep 60")),
                complete(),
            ]
        )
        goals.append({"goal": f"Write {name}.txt.", "name": name, "model": f"scripted:{script}"})
    batch = _batch(tmp_path, goals)
    address = cluster.scheduler.address
    proc = subprocess.Popen(
        [sys.executable, "-m", "relay.cli", "batch", str(batch), "--repo", str(clone),
         "--scheduler", address, "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + WAIT_S
    while not all((tmp_path / f"{n}-running").exists() for n in ("one", "two")):
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read()
        time.sleep(0.05)
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=WAIT_S)
    assert time.monotonic() - started < 30  # not the 60 s of the shell commands
    final = json.loads(out.splitlines()[-1])
    assert "Traceback" not in err
    for row in final["goals"]:
        assert (row["status"], row["pushed"]) == ("paused", True), row
        state = json.loads(git(remote, "show", f"{row['branch']}:.relay/goal.json"))
        assert state["goal"]["status"] == "paused"
    assert proc.returncode == final["exit_code"] == 130
