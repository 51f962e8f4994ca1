"""Goal tasks are self-contained and safe (issue 17, item 1): a task made from a batch file
holds the contents of its goal file, script and configuration, but no path of the submitting
machine and no key; a Dask cluster whose workers offer no goal slot is refused, naming the
worker command that offers one; ``--remote`` sends the local pool's branches elsewhere."""

from __future__ import annotations

import pickle

import pytest
import yaml
from conftest import call, complete, git, respond

from relay.batch.entries import make_tasks
from relay.batch.task import NoLink
from relay.errors import ConfigError


def test_a_task_holds_contents_but_no_path_and_no_key(tmp_path, write_script, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-value-1234")
    plans = tmp_path / "plans"
    plans.mkdir()
    (plans / "fix.md").write_text("---\nlimits: {max_rounds_total: 3}\n---\nFix the parser.\n")
    script = write_script([complete()])
    config = tmp_path / "relay-ci.yaml"
    config.write_text("limits: {max_no_progress: 4}\n")
    batch = plans / "goals.yaml"
    batch.write_text(
        yaml.safe_dump([{"goal_file": "fix.md", "name": "fix", "model": f"scripted:{script}"}])
    )
    [task] = make_tasks(
        batch, remote="https://git.example/p.git", base="a" * 40, model=None,
        config_text=config.read_text(), link_for=lambda name: NoLink(),
    )  # fmt: skip
    assert (task.goal, task.front) == ("Fix the parser.\n", {"limits": {"max_rounds_total": 3}})
    assert task.script is not None and "update_goal" in task.script
    assert task.config == "limits: {max_no_progress: 4}\n"
    data = pickle.dumps(task)
    assert str(tmp_path).encode() not in data and b"sk-ant-secret" not in data


def test_an_unreadable_script_is_refused_before_any_goal_runs(tmp_path):
    batch = tmp_path / "goals.yaml"
    batch.write_text(yaml.safe_dump([{"goal": "x", "model": "scripted:missing.yaml"}]))
    with pytest.raises(ConfigError, match=r"missing\.yaml"):
        make_tasks(
            batch, remote="r", base="a" * 40, model=None, config_text=None,
            link_for=lambda name: NoLink(),
        )  # fmt: skip


class _Client:
    """A client of a cluster whose one worker declares no resources."""

    def wait_for_workers(self, n, timeout=None):
        return None

    def scheduler_info(self, n_workers=-1):
        return {"workers": {"tcp://127.0.0.1:1": {"resources": {}}}}


def test_a_cluster_without_goal_slots_is_refused():
    from relay.batch.engines import DaskEngine

    with pytest.raises(ConfigError, match="--resources goal=1"):
        DaskEngine(_Client())


def test_remote_sends_the_local_pools_branches_there(make_repo, write_script, tmp_path, run_relay):
    repo = make_repo()
    remote = tmp_path / "elsewhere.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(remote))
    script = write_script([respond(call("write_file", path="r.txt", content="r")), complete()])
    batch = tmp_path / "goals.yaml"
    batch.write_text(yaml.safe_dump([{"goal": "Write r.txt.", "name": "r",
                                      "model": f"scripted:{script}"}]))  # fmt: skip
    code, out, err = run_relay(["batch", batch, "--repo", repo, "--remote", str(remote)])
    assert code == 0, err
    assert git(remote, "show", "relay/batch-r:r.txt") == "r"
    assert not git(repo, "branch", "--list", "relay/batch-r").strip()
    assert "complete" in out and "yes" in out  # the table: pushed


class KilledWorker(Exception):
    """Named as Dask's: the engine gave up retrying a task whose workers died."""


@pytest.mark.parametrize(
    ("failure", "reason", "code"),
    [
        (KilledWorker("task lost 3 times"), "killed_worker", 1),
        (TimeoutError("no answer"), "timeout", 1),
        (RuntimeError("scheduler closed"), "engine_error", 1),
    ],
)
def test_an_engine_failure_is_a_lost_row_with_its_reason(failure, reason, code):
    import concurrent.futures

    from relay.batch.run import outcome
    from relay.batch.task import GoalTask

    task = GoalTask(name="g", branch="relay/batch-g", remote="r", base="a" * 40, goal="x")
    future: concurrent.futures.Future = concurrent.futures.Future()
    future.set_exception(failure)
    row = outcome(future, task)
    assert (row.status, row.reason, row.exit_code, row.pushed) == ("lost", reason, code, False)
    assert str(failure) in row.message
    cancelled: concurrent.futures.Future = concurrent.futures.Future()
    cancelled.cancel()
    assert (outcome(cancelled, task).reason, outcome(cancelled, task).exit_code) == (
        "cancelled",
        130,
    )


class _HungEngine:
    """An engine whose tasks never come back; it records what the batch asked of it."""

    name = "hung"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def link_for(self, name: str) -> NoLink:
        return NoLink()

    def submit(self, task):
        import concurrent.futures

        return concurrent.futures.Future()  # never done

    def cancel(self) -> None:
        self.calls.append("cancel")

    def abandon(self) -> None:
        self.calls.append("abandon")

    def close(self) -> None:
        self.calls.append("close")


def test_a_timeout_that_runs_out_lets_go_of_the_running_goals(monkeypatch):
    """``--timeout``: the running goals are told to pause; after the grace the batch stops
    waiting, lets go of what still runs (the local pool stops it) and reports them ``lost``."""
    from relay.batch import run as batch_run
    from relay.batch.task import GoalTask

    monkeypatch.setattr(batch_run, "CANCEL_GRACE_S", 0.2)
    engine = _HungEngine()
    task = GoalTask(name="g", branch="relay/batch-g", remote="r", base="a" * 40, goal="x")
    rows = batch_run.collect(engine, [task], lambda r: None, timeout_s=0.2)
    assert [(r.status, r.reason) for r in rows] == [("lost", "timeout")]
    assert engine.calls == ["cancel", "abandon"]


def test_a_goal_paused_by_sighup_or_a_closed_output_is_a_pause_in_the_batch_exit_code() -> None:
    from relay.batch.results import worst_exit_code

    assert worst_exit_code([0, 129]) == 129  # paused: nothing else went wrong
    assert worst_exit_code([141, 2]) == 2  # needs_user_input outranks a pause
    assert worst_exit_code([129, 130, 141, 143, 7]) == 7
