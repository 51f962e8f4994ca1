"""A goal carried by its branch on a shared remote (issue 17, items 2): ``relay run GOAL
--branch B --push`` continues the goal B carries (fetched first), and a stale writer — the
branch moved on the remote under the run — stops at once with ``branch_moved``, a non-zero
exit, and never reports commits that are not on the remote."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from conftest import GIT_EMAIL, GIT_NAME, call, complete, git, load_json, respond

GOAL = "Write the files a.txt and b.txt."
BRANCH = "relay/shared"


def _remote_and_clone(make_repo, tmp_path: Path, name: str = "first") -> tuple[Path, Path]:
    """A bare remote holding ``main``, and a clone of it (``origin`` = the remote)."""
    seed = make_repo(name="seed")
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(remote))
    return remote, _clone(remote, tmp_path / name)


def _clone(remote: Path, path: Path) -> Path:
    git(remote.parent, "clone", "-q", str(remote), str(path))
    git(path, "config", "user.name", GIT_NAME)
    git(path, "config", "user.email", GIT_EMAIL)
    return path


def _foreign_commit(remote: Path, tmp_path: Path) -> str:
    """Another writer's commit pushed on top of the remote's branch; returns its sha."""
    other = _clone(remote, tmp_path / f"other-{time.monotonic_ns()}")
    git(other, "switch", "-q", BRANCH)
    (other / "foreign.txt").write_text("not relay's\n")
    git(other, "add", "-A")
    git(other, "commit", "-q", "-m", "someone else's work")
    git(other, "push", "-q", "origin", BRANCH)
    return git(other, "rev-parse", "HEAD").strip()


def _round_one(path: str = "a.txt") -> dict:
    return respond(call("write_file", path=path, content="x"), call("handoff", note="next"))


def test_a_second_run_of_the_same_goal_on_a_fresh_clone_continues_it(
    make_repo, tmp_path, write_script, relay_run
):
    remote, first = _remote_and_clone(make_repo, tmp_path)
    fresh = _clone(remote, tmp_path / "fresh")  # before the branch exists: relay fetches it
    script = write_script([_round_one("a.txt"), respond(text="stop here")])
    code, data, _ = relay_run(
        first, script, GOAL, "--branch", BRANCH, "--push", "--max-rounds", "2"
    )
    assert data["rounds"] == 2 and code != 0  # not finished; both rounds pushed
    assert not git(fresh, "branch", "-r", "--list", f"origin/{BRANCH}").strip()
    rest = write_script([_round_one("b.txt"), complete()])
    code, data, err = relay_run(fresh, rest, GOAL, "--branch", BRANCH, "--push")
    assert (code, data["status"]) == (0, "complete"), err
    assert data["rounds"] == 4  # the goal went on: rounds 3 and 4 of the same goal
    assert git(remote, "show", f"{BRANCH}:b.txt") == "x"
    assert git(remote, "rev-parse", BRANCH).strip() == data["commits"][-1]["sha"]


def test_the_same_goal_run_again_on_its_branch_here_continues_it(
    make_repo, tmp_path, write_script, relay_run, run_relay
):
    """Issue 17 item 2, the local case: ``relay run GOAL --branch B`` again in the clone where
    B carries the same open goal (a local pool's retried task, a second run by hand) continues
    it, with no remote; another goal there is refused while it is open."""
    repo = make_repo()
    write_b = respond(call("write_file", path="b.txt", content="x"))
    script = write_script([_round_one("a.txt"), write_b, complete()])
    code, data, _ = relay_run(repo, script, GOAL, "--branch", BRANCH, "--max-rounds", "1")
    assert (code, data["status"], data["rounds"]) == (4, "limit_reached", 1)
    git(repo, "switch", "-q", "main")
    code, _, err = run_relay(
        ["run", "Something else.", "--repo", repo, "--branch", BRANCH, "--model", f"scripted:{script}"]
    )  # fmt: skip
    assert code == 1 and "is still open" in err and "Traceback" not in err
    code, data, err = relay_run(repo, script, GOAL, "--branch", BRANCH)
    assert (code, data["status"]) == (0, "complete"), err
    assert data["rounds"] == 2 and data["branch"] == BRANCH  # round 2 of the same goal
    assert git(repo, "show", f"{BRANCH}:b.txt") == "x"


def test_another_goal_on_a_branch_that_carries_an_open_goal_is_refused(
    make_repo, tmp_path, write_script, relay_run, run_relay
):
    remote, first = _remote_and_clone(make_repo, tmp_path)
    script = write_script([_round_one("a.txt")])
    relay_run(first, script, GOAL, "--branch", BRANCH, "--push", "--max-rounds", "1")
    fresh = _clone(remote, tmp_path / "fresh")
    code, _, err = run_relay(
        ["run", "Something else.", "--repo", fresh, "--branch", BRANCH, "--push",
         "--model", f"scripted:{script}"]
    )  # fmt: skip
    assert code == 1 and "is still open" in err and "Traceback" not in err


def test_a_run_whose_branch_moved_on_the_remote_stops_before_its_first_round(
    make_repo, tmp_path, write_script, relay_run
):
    remote, first = _remote_and_clone(make_repo, tmp_path)
    script = write_script([_round_one("a.txt"), _round_one("b.txt"), complete()])
    code, data, _ = relay_run(
        first, script, GOAL, "--branch", BRANCH, "--push", "--max-rounds", "1"
    )
    assert data["rounds"] == 1
    foreign = _foreign_commit(remote, tmp_path)
    code, data, err = relay_run(first, script, None, "--push")  # resume: a stale writer now
    assert (code, data["status"], data["reason"]) == (6, "terminated", "branch_moved"), err
    assert data["rounds"] == 1  # no further round, no model call
    assert foreign not in {c["sha"] for c in data["commits"]}
    assert git(remote, "rev-parse", BRANCH).strip() == foreign  # the other writer's work stays


def test_a_rejected_push_stops_the_goal_at_once_and_never_says_complete(
    make_repo, tmp_path, write_script
):
    """Round 2 waits until another writer pushed, then claims complete: the round's push is
    rejected, so the goal stops ``branch_moved`` (exit 6) instead of ``complete``."""
    remote, first = _remote_and_clone(make_repo, tmp_path)
    ready, go = tmp_path / "ready", tmp_path / "go"
    wait = f"touch {ready}; while [ ! -e {go} ]; do sleep 0.05; done"
    script = write_script(
        [
            _round_one("a.txt"),
            respond(call("write_file", path="b.txt", content="x"), call("shell", command=wait)),
            complete(),
        ]
    )
    argv = ["run", GOAL, "--repo", str(first), "--branch", BRANCH, "--push", "--json",
            "--sandbox", "off", "--model", f"scripted:{script}"]  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "relay.cli", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    foreign = _foreign_commit(remote, tmp_path)
    go.touch()
    timer = threading.Timer(60, proc.kill)
    timer.start()
    out, err = proc.communicate()
    timer.cancel()
    data = load_json(out)
    assert (proc.returncode, data["status"], data["reason"]) == (6, "terminated", "branch_moved")
    assert "another writer" in data["message"] and "Traceback" not in err
    assert git(remote, "rev-parse", BRANCH).strip() == foreign
    assert foreign not in {c["sha"] for c in data["commits"]}
