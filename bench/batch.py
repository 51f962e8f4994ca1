"""Wall time of a batch on 1, 2 and 4 local Dask workers (issue 17, "Done when").

For each worker count it starts a Dask ``LocalCluster`` on 127.0.0.1 (worker processes, one
thread and one ``goal`` slot each), builds a bare git remote and a clone of it in a temporary
folder, writes ``--goals`` scripted goals and runs them with ``relay.batch.run_batch`` on the
cluster. Every goal has ``--rounds`` rounds; each round's one step stands for a model that
takes ``--delay`` seconds to answer (a ``shell`` call ``sleep DELAY``, a ``write_file``, then
``handoff``), and one more step completes the goal. Every goal ends ``complete`` with its branch on the remote,
or the run says which did not.

It prints the wall time per worker count, the speed-up over the first count and the ideal one
(from how the goals divide among the workers). The delay dominates a goal's
time, so the figures measure how well the engine spreads goals; relay's own start-up (a clone,
a process, the first git calls) is the rest.

Usage: ``python bench/batch.py [--goals 8] [--rounds 2] [--delay 1.0] [--workers 1,2,4]``.
Needs ``goal-relay[dask]``. Not a test: the figures depend on the machine and its load (on a
2-core machine, 4 worker processes share 2 cores for relay's own work).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def make_remote(folder: Path) -> Path:
    """A bare remote with one commit, and a clone of it to submit from."""
    seed = folder / "seed"
    seed.mkdir()
    _git(seed, "init", "-q", "-b", "main")
    _git(seed, "config", "user.name", "bench")
    _git(seed, "config", "user.email", "bench@example.invalid")
    (seed / "README.md").write_text("bench\n")
    _git(seed, "add", "-A")
    _git(seed, "commit", "-qm", "initial")
    remote = folder / "remote.git"
    _git(folder, "clone", "-q", "--bare", str(seed), str(remote))
    clone = folder / "submitter"
    _git(folder, "clone", "-q", str(remote), str(clone))
    return clone


def write_batch(folder: Path, goals: int, rounds: int, delay: float) -> Path:
    """``goals`` goals of ``rounds`` rounds; every round waits ``delay`` seconds."""

    def wait(n: int) -> dict:
        return {
            "tool_calls": [
                {"name": "shell", "arguments": {"command": f"sleep {delay}"}},
                {"name": "write_file", "arguments": {"path": f"round-{n}.txt", "content": "x"}},
                {"name": "handoff", "arguments": {"note": "next round"}},
            ],
            "usage": {"input": 1000, "output": 100},
        }

    done = {"tool_calls": [{"name": "update_goal", "arguments": {"status": "complete",
                                                                 "summary": "done"}}]}  # fmt: skip
    entries = []
    for i in range(goals):
        script = folder / f"script-{i}.yaml"
        responses = [wait(n) for n in range(1, rounds + 1)] + [done]
        script.write_text(yaml.safe_dump({"responses": responses}))
        entries.append({"goal": f"Bench goal {i}.", "name": f"g{i}", "model": f"scripted:{script}"})
    batch = folder / "goals.yaml"
    batch.write_text(yaml.safe_dump(entries))
    return batch


def run_once(workers: int, goals: int, rounds: int, delay: float) -> float:
    """Wall time (s) of the batch on ``workers`` Dask workers; exits naming any goal that
    did not complete with its branch on the remote."""
    from distributed import Client, LocalCluster

    from relay.batch import run_batch
    from relay.batch.engines import DaskEngine

    with tempfile.TemporaryDirectory(prefix="relay-bench-batch-") as tmp:
        folder = Path(tmp)
        clone = make_remote(folder)
        batch = write_batch(folder, goals, rounds, delay)
        with (
            LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
                resources={"goal": 1},
            ) as cluster,
            Client(cluster) as client,
        ):
            started = time.perf_counter()
            results = run_batch(batch, clone, DaskEngine(client))
            wall = time.perf_counter() - started
    bad = [
        f"{r.name}: {r.status} ({r.reason}) {r.message}, pushed: {r.pushed}"
        for r in results
        if r.status != "complete" or not r.pushed
    ]
    if bad:
        raise SystemExit("goals that did not complete on the remote:\n" + "\n".join(bad))
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--goals", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--delay", type=float, default=1.0, help="seconds per round")
    parser.add_argument("--workers", default="1,2,4", help="worker counts, comma-separated")
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")]
    print(
        f"{args.goals} scripted goals x {args.rounds} rounds, {args.delay} s per round "
        f"(+1 step to complete); Python {sys.version.split()[0]}"
    )
    walls: dict[int, float] = {}
    for n in counts:
        walls[n] = run_once(n, args.goals, args.rounds, args.delay)
        print(f"  {n} worker(s): {walls[n]:6.1f} s", flush=True)
    base = walls[counts[0]]
    print(f"\n{'workers':>7} {'wall s':>8} {'speed-up':>9} {'ideal':>6}")
    for n in counts:
        ideal = -(-args.goals // counts[0]) / -(-args.goals // n)
        print(f"{n:>7} {walls[n]:>8.1f} {base / walls[n]:>8.2f}x {ideal:>5.1f}x")


if __name__ == "__main__":
    main()
