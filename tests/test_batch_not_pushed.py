"""No batch row says ``complete`` for commits that are not on the remote (issue 17, item 2;
docs/batch.md): a goal that completed while its pushes failed is ``lost`` (``not_pushed``),
and its row still holds the run's JSON object and summary, which die with the worker's clone —
whether the remote refused the push or could no longer be reached at all."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from conftest import call, complete, git, respond


def _batch(tmp_path: Path, script: Path) -> Path:
    batch = tmp_path / "goals.yaml"
    entry = {"goal": "Write v.txt.", "name": "v", "model": f"scripted:{script}"}
    batch.write_text(yaml.safe_dump([entry]))
    return batch


def _row(run_relay, batch: Path, repo: Path, remote: Path) -> tuple[int, dict]:
    code, out, err = run_relay(["batch", batch, "--repo", repo, "--remote", str(remote), "--json"])
    assert "Traceback" not in err, err
    final = json.loads(out.splitlines()[-1])
    assert final["exit_code"] == code
    [row] = final["goals"]
    return code, row


def _assert_lost_with_its_outputs(code: int, row: dict) -> None:
    assert (code, row["status"], row["reason"], row["pushed"]) == (1, "lost", "not_pushed", False)
    assert "the goal completed at" in row["message"], row["message"]
    assert row["result"]["status"] == "complete"  # the run's JSON, kept
    assert "# relay: complete" in row["summary"]
    assert [e for e in row["result"]["events"] if e["kind"] == "push_failed"]


def test_a_remote_that_refuses_the_pushes_makes_a_complete_goal_lost(
    make_repo, tmp_path, write_script, run_relay
):
    repo = make_repo()
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(remote))
    git(remote, "config", "receive.maxInputSize", "10")  # every push fails on the remote
    script = write_script([respond(call("write_file", path="v.txt", content="v")), complete()])
    code, row = _row(run_relay, _batch(tmp_path, script), repo, remote)
    _assert_lost_with_its_outputs(code, row)
    assert "the remote has no branch" in row["message"]
    assert not git(remote, "branch", "--list", "relay/batch-v").strip()


def test_a_remote_gone_before_the_last_push_makes_a_complete_goal_lost(
    make_repo, tmp_path, write_script, run_relay
):
    """The remote disappears during the goal (the model's command moves it away: no sandbox):
    relay's pushes fail, the goal completes, and the batch cannot even read the remote."""
    repo = make_repo(config={"sandbox": {"mode": "off"}})
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(remote))
    gone = tmp_path / "gone.git"
    script = write_script(
        [
            respond(
                call("write_file", path="v.txt", content="v"),
                call("shell", command=f"mv {remote} {gone}"),
            ),
            complete(),
        ]
    )
    code, row = _row(run_relay, _batch(tmp_path, script), repo, remote)
    _assert_lost_with_its_outputs(code, row)
    assert "the remote could not be read" in row["message"], row["message"]
