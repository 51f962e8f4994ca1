"""The sandbox modes as a user meets them (SPEC §14): ``auto`` with and without bubblewrap,
``required`` without it, ``off``; the mode in force is stored with the goal and shown."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import call, complete, respond, tree_snapshot
from sandbox_support import require_bwrap

from relay.sandbox import SANDBOX_DOCS

WRITE = respond(call("write_file", path="a.txt", content="a\n"))


@pytest.fixture()
def no_bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine without bubblewrap."""
    real = shutil.which
    monkeypatch.setattr(
        "relay.sandbox.launcher.shutil.which",
        lambda name, *a, **k: None if name == "bwrap" else real(name, *a, **k),
    )


def test_auto_uses_bubblewrap_and_says_so(make_repo, write_script, relay_run, run_relay):
    require_bwrap()
    repo = make_repo()
    code, data, _ = relay_run(repo, write_script([WRITE, complete()]), "Write a.txt.")
    assert code == 0 and data["sandbox"] == "bwrap"
    assert "sandbox_off" not in [e["kind"] for e in data["events"]]
    _, out, err = run_relay(["status", "--repo", repo])
    assert "sandbox: bubblewrap" in out + err


def test_auto_without_bubblewrap_runs_and_warns_everywhere(
    make_repo, write_script, relay_run, run_relay, no_bwrap
):
    repo = make_repo()
    code, data, err = relay_run(repo, write_script([WRITE, complete()]), "Write a.txt.")
    assert code == 0 and data["sandbox"] == "off"
    warning = next(e["detail"] for e in data["events"] if e["kind"] == "sandbox_off")
    assert "bubblewrap (bwrap) is not installed" in warning
    assert SANDBOX_DOCS in warning  # how to install it: one short line and a link (issue 28)
    code, out, err = run_relay(["status", "--repo", repo])
    assert "sandbox: OFF" in out + err
    _, out, _ = run_relay(["status", "--repo", repo, "--json"])
    assert json.loads(out)["sandbox"] == "off"


def test_required_without_bubblewrap_is_refused_before_any_change(
    make_repo, write_script, run_relay, no_bwrap
):
    repo = make_repo()
    before = tree_snapshot(repo)
    code, _out, err = run_relay(
        [
            "run",
            "Write a.txt.",
            "--repo",
            repo,
            "--model",
            f"scripted:{write_script([WRITE, complete()])}",
            "--sandbox",
            "required",
        ]
    )
    assert code == 1
    assert "sandbox.mode is required" in err and "apt-get install bubblewrap" in err
    assert "Traceback" not in err
    assert tree_snapshot(repo) == before


def test_off_is_stored_with_the_goal_and_warns(make_repo, write_script, relay_run):
    repo = make_repo(config={"sandbox": {"mode": "off"}})
    code, data, _ = relay_run(repo, write_script([WRITE, complete()]), "Write a.txt.")
    assert code == 0 and data["sandbox"] == "off"
    assert any(e["kind"] == "sandbox_off" for e in data["events"])


def test_a_bad_sandbox_value_names_the_key_and_the_choices(make_repo, write_script, run_relay):
    repo = make_repo()
    code, _, err = run_relay(
        [
            "run",
            "x",
            "--repo",
            repo,
            "--model",
            f"scripted:{write_script([complete()])}",
            "--sandbox",
            "maybe",
        ]
    )
    assert code == 1 and "sandbox.mode" in err and "'auto'" in err and "'required'" in err
    bad_env = make_repo(config={"sandbox": {"env": ["OPENAI_API_KEY"]}}, name="repo2")
    code, _, err = run_relay(
        ["run", "x", "--repo", bad_env, "--model", f"scripted:{write_script([complete()])}"]
    )
    assert code == 1 and "sandbox.env" in err and "credentials" in err
