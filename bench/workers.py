"""Wall time per round of each worker on one scripted goal (issue 16, SPEC §15).

The same scripted goal runs once per worker (``builtin``, ``claude-code``, ``codex``) through
the installed ``relay`` command: ``--rounds`` rounds of ``--calls`` cheap shell calls, one per
model answer, each round ending with ``handoff``. The round times come from the store
(``started_at`` to ``ended_at`` of each round: the worker's work and relay's round end, the
commit included). An agent round adds the agent's start, its MCP server's start and its own
request handling; the table gives each worker's median round and its overhead over the
built-in worker's, per round and per model call.

Usage: ``python bench/workers.py [--rounds 5] [--calls 3] [--workers builtin,claude-code,codex]
[--sandbox off]``. The agents must be on ``PATH`` (``.agents/node_modules/.bin`` of the
checkout is added). Exits 0 whether or not the agents are there (a missing one is reported).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from relay.store import Store

ROOT = Path(__file__).resolve().parents[1]
RELAY = str(Path(sys.executable).parent / "relay")


def script(rounds: int, calls: int) -> dict:
    """``rounds`` rounds of ``calls`` shell calls and a handoff (one call per answer)."""
    responses = []
    for r in range(1, rounds + 1):
        for c in range(1, calls + 1):
            command = f"echo round {r} call {c} > notes-{c}.txt"
            responses.append({"tool_calls": [{"name": "shell", "arguments": {"command": command}}]})
        note = f"round {r} wrote the notes"
        responses.append({"tool_calls": [{"name": "handoff", "arguments": {"note": note}}]})
    return {"responses": responses}


def run_worker(worker: str, where: Path, args: argparse.Namespace) -> list[float] | str:
    """The round durations (s) of one worker's run, or why it could not run."""
    repo = where / worker / "repo"
    repo.mkdir(parents=True)
    # the guard runs but scores nothing: the repetitive benchmark rounds are never terminated
    weights = dict.fromkeys(["loop", "drift", "tool_failures", "api_errors", "tamper"], 0)
    (repo / "relay.yaml").write_text(yaml.safe_dump({"guard": {"weights": weights}}))
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
        subprocess.run(
            ["git", "-c", "user.name=b", "-c", "user.email=b@example.invalid", *cmd],
            cwd=repo,
            check=True,
        )
    path = where / worker / "script.yaml"
    path.write_text(yaml.safe_dump(script(args.rounds, args.calls)), encoding="utf-8")
    argv = [RELAY, "run", "Write the notes.", "--repo", str(repo), "--json", "--worker", worker]
    argv += ["--model", f"scripted:{path}", "--max-rounds", str(args.rounds)]
    argv += ["--sandbox", args.sandbox]
    env = dict(os.environ)
    env["PATH"] = f"{ROOT / '.agents' / 'node_modules' / '.bin'}:{env.get('PATH', '')}"
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    try:
        result = json.loads(done.stdout)
    except json.JSONDecodeError:
        return f"no result (exit {done.returncode}): {done.stderr.strip().splitlines()[-1:]}"
    store = Store(repo / ".git" / "relay" / "relay.db")
    try:
        rounds = store.rounds(result["goal_id"])
    finally:
        store.close()
    times = [r.ended_at - r.started_at for r in rounds if r.ended_at and r.started_at]
    if len(times) != args.rounds:
        return f"{len(times)} rounds ran ({result['status']}: {result['message']})"
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds per worker")
    parser.add_argument("--calls", type=int, default=3, help="shell calls per round")
    parser.add_argument("--workers", default="builtin,claude-code,codex")
    parser.add_argument("--sandbox", default="off", choices=["off", "auto", "required"])
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args(argv)
    where = Path(tempfile.mkdtemp(prefix="relay-bench-workers-"))
    steps = args.calls + 1
    print(
        f"{args.rounds} rounds of {args.calls} shell calls + handoff ({steps} model calls), "
        f"sandbox {args.sandbox}"
    )
    print(
        f"{'worker':<12} {'median round s':>15} {'max s':>7} {'+ per round s':>14} "
        f"{'+ per call s':>13}"
    )
    base: float | None = None
    try:
        for worker in args.workers.split(","):
            times = run_worker(worker, where, args)
            if isinstance(times, str):
                print(f"{worker:<12} {times}")
                continue
            median = statistics.median(times)
            base = median if worker == "builtin" else base
            extra = "" if base is None or worker == "builtin" else f"{median - base:14.2f}"
            per_call = "" if not extra else f"{(median - base) / steps:13.2f}"  # type: ignore[operator]
            print(f"{worker:<12} {median:15.2f} {max(times):7.2f} {extra:>14} {per_call:>13}")
    finally:
        if args.keep:
            print(f"kept in {where}")
        else:
            shutil.rmtree(where, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
