"""A process that runs many goals (``relay batch``'s pool workers, ``relay compare``, an
embedding program) keeps no file open after each: every run closes the goal store it opened,
also when it is refused before any change. Each run left five descriptors of ``relay.db``
open, so a long-lived process ran out of them (``select()`` failed past descriptor 1024)."""

from __future__ import annotations

import os

from conftest import call, complete, respond

GOAL = "Create notes.txt saying hello."


def open_files() -> list[str]:
    """What this process has open (the targets of its descriptors)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # the descriptor of the listing itself
            continue
    return sorted(found)


def test_runs_in_one_process_leave_no_file_open(make_repo, write_script, relay_run, run_relay):
    script = write_script(
        [respond(call("write_file", path="notes.txt", content="hello\n")), complete()]
    )
    relay_run(make_repo(name="warm-up"), script, GOAL)  # imports, caches
    before = open_files()
    paused = write_script([respond(text="thinking")])
    for n in range(2):
        code, data, _ = relay_run(make_repo(name=f"done{n}"), script, GOAL)
        assert code == 0 and data["status"] == "complete", data
        # refused before any change: another goal is open on this tree
        repo = make_repo(name=f"open{n}")
        model = f"scripted:{paused}"
        run_relay(["run", "Other.", "--repo", repo, "--model", model, "--max-rounds", "1"])
        commands = [
            ["run", "Something else.", "--repo", repo],  # refused: another goal is open
            ["status", "--repo", repo, "--json"],
            ["say", "Also this.", "--repo", repo],
            ["log", "--repo", repo],
            ["audit", "--repo", repo],
            ["report", "--repo", repo],
            ["clear", "--repo", repo],
            ["pause", "--repo", repo],  # refused: no open goal
        ]
        for args in commands:
            code, _, err = run_relay(args)
            assert "Traceback" not in err, (args, err)
    leaked = [f for f in open_files() if f not in before]
    assert not [f for f in leaked if "relay" in f or f.endswith((".db", "-wal", "-shm"))], leaked
