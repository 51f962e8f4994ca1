"""``relay batch`` (issue 13, item 14; issue 17, item 4): a batch entry's relative paths —
``goal_file`` and a scripted model's script — are taken from the batch file's folder, whatever
the working directory; ``--json`` prints a line per goal as it ends, then the batch's object;
no attempt leaves a worktree or a temporary clone behind."""

from __future__ import annotations

import json

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
    result = json.loads(out.splitlines()[-1])["goals"][0]
    assert (code, result["status"]) == (0, "complete"), result
    assert git(repo, "show", "relay/batch-a:a.txt") == "a"


def test_json_lines_stream_each_goal_then_the_batch(make_repo, write_script, tmp_path, run_relay):
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
    code, out, err = run_relay(["batch", batch, "--repo", repo, "--json"])
    assert code == 1 and "no/such/script.yaml" in out + err  # refused before anything ran
    script = write_script([respond(text="Hmm.")] * 3)
    batch.write_text(
        yaml.safe_dump(
            [
                {"goal": "Write b.txt.", "name": "b", "model": f"scripted:{good}"},
                {"goal": "Never works.", "name": "c", "model": f"scripted:{script}",
                 "max_rounds": 1},
            ]
        )
    )  # fmt: skip
    code, out, _ = run_relay(["batch", batch, "--repo", repo, "--json"])
    lines = [json.loads(line) for line in out.splitlines()]
    assert sorted(line["name"] for line in lines[:2]) == ["b", "c"]
    final = lines[-1]
    assert [g["status"] for g in final["goals"]] == ["complete", "limit_reached"]
    assert code == final["exit_code"] == 4
    assert final["goals"][0]["pushed"] and final["goals"][0]["result"]["status"] == "complete"
    assert "# relay: complete" in final["goals"][0]["summary"]


def test_no_attempt_leaves_a_worktree_or_a_clone(make_repo, write_script, tmp_path, monkeypatch):
    """A goal relay refuses (a model it cannot make) and one that completes: the repository
    has no linked worktree afterwards, and the temporary folder no clone."""
    import tempfile

    from relay.batch import run_batch
    from relay.batch.engines import LocalEngine

    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    repo = make_repo()
    good = write_script([respond(call("write_file", path="b.txt", content="b")), complete()])
    batch = tmp_path / "goals.yaml"
    batch.write_text(
        yaml.safe_dump(
            [
                {"goal": "Write b.txt.", "name": "b", "model": f"scripted:{good}"},
                {"goal": "Refused.", "name": "c", "model": "nosuchprovider:x"},
            ]
        )
    )
    results = {r.name: r for r in run_batch(batch, repo, LocalEngine(2))}
    assert results["b"].status == "complete" and results["c"].status == "error"
    assert "nosuchprovider" in results["c"].message
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert [p.name for p in temp.iterdir() if not p.name.startswith("relay-scripts-")] == []
    assert git(repo, "show", "relay/batch-b:b.txt") == "b"
