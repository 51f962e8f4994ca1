"""``relay batch`` (issue 13, item 14): a batch entry's relative paths — ``goal_file`` and a
scripted model's script — are taken from the batch file's folder, whatever the working
directory; a goal that could not start leaves no worktree behind."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from conftest import call, complete, git, respond


def test_a_relative_script_path_is_taken_from_the_batch_files_folder(
    make_repo, tmp_path, run_relay, monkeypatch
):
    repo = make_repo()
    plans = tmp_path / "plans"
    plans.mkdir()
    script = {"responses": [respond(call("write_file", path="a.txt", content="a")), complete()]}
    (plans / "a-script.yaml").write_text(yaml.safe_dump(script))
    (plans / "goal-a.md").write_text("Write a.txt.\n")
    batch = plans / "goals.yaml"
    batch.write_text(
        yaml.safe_dump([{"goal_file": "goal-a.md", "name": "a", "model": "scripted:a-script.yaml"}])
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, out, _ = run_relay(["batch", batch, "--repo", repo, "--json"])
    result = json.loads(out)["goals"][0]
    assert (code, result["status"]) == (0, "complete"), result
    assert git(repo, "show", "relay/batch-a:a.txt") == "a"


def test_a_goal_that_could_not_start_leaves_no_worktree(
    make_repo, write_script, tmp_path, run_relay
):
    repo = make_repo()
    good = write_script([respond(call("write_file", path="b.txt", content="b")), complete()])
    batch = tmp_path / "goals.yaml"
    batch.write_text(
        yaml.safe_dump(
            [
                {"goal": "Write b.txt.", "name": "b", "model": f"scripted:{good}"},
                {"goal": "Never starts.", "name": "c", "model": "scripted:/no/such/script.yaml"},
            ]
        )
    )
    code, out, _ = run_relay(["batch", batch, "--repo", repo, "--json"])
    results = {r["name"]: r for r in json.loads(out)["goals"]}
    assert results["b"]["status"] == "complete" and results["c"]["status"] == "error"
    assert code == 1
    listed = git(repo, "worktree", "list", "--porcelain")
    assert results["b"]["worktree"] in listed  # kept: its run folder
    assert results["c"]["worktree"] not in listed
    assert not Path(results["c"]["worktree"]).exists()


def test_a_goal_that_started_and_then_failed_keeps_its_worktree(make_repo, tmp_path, monkeypatch):
    """A goal whose branch exists has history worth keeping (its store, its run folder)."""
    import concurrent.futures

    from relay import runner
    from relay.batch import run_batch
    from relay.errors import StoreError

    repo = make_repo()

    def started_then_failed(request, display=None):
        git(request.repo, "switch", "-q", "-c", request.branch)
        raise StoreError("the disk holding the state database is full")

    monkeypatch.setattr(runner, "run", started_then_failed)
    batch = tmp_path / "goals.yaml"
    batch.write_text(yaml.safe_dump([{"goal": "Fails late.", "name": "late"}]))
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        [result] = run_batch(batch, repo, model="scripted:x.yaml", executor=pool)
    assert result.status == "error" and "disk" in result.message
    assert result.worktree in git(repo, "worktree", "list", "--porcelain")
    assert Path(result.worktree).is_dir()
