"""Start-up of the ``relay`` command line (issue 12: ``relay --version`` within 0.3 s).

Prints, as the median of ``--runs`` fresh processes each:

* the wall time of ``relay --version`` (the installed console script, else ``python -m relay``)
  and of ``relay --help``, beside a bare ``python -c pass`` (the interpreter's own floor);
* the cumulative import time of ``relay.cli`` as ``python -X importtime`` reports it, with
  the slowest modules it pulls in;
* the heavy modules that ``relay --version`` loads (none expected).

Usage: ``python bench/startup.py [--runs N] [--top N]``. Not a test: the figures depend on the
machine and its load.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HEAVY = ("git", "pydantic", "yaml", "httpx", "anthropic", "openai", "watchdog", "matplotlib")
TARGET_S = 0.3


def relay_command() -> list[str]:
    """The console script beside this interpreter, else ``python -m relay``."""
    script = Path(sys.executable).parent / "relay"
    if script.exists():
        return [str(script)]
    found = shutil.which("relay")
    return [found] if found else [sys.executable, "-m", "relay"]


def wall_s(argv: list[str], runs: int) -> float:
    """Median wall time of ``argv`` in seconds over ``runs`` fresh processes."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True, stdin=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def import_times(module: str) -> list[tuple[int, int, str]]:
    """``python -X importtime -c 'import MODULE'``: ``(self µs, cumulative µs, name)`` rows;
    a top-level import's name keeps its one leading space (nested ones have more)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, total, name = line.removeprefix("import time:").split("|")
        rows.append((int(own), int(total), name.rstrip()))
    return rows


def heavy_modules_of_version() -> list[str]:
    """The heavy modules loaded by ``relay --version`` in a fresh process."""
    probe = (
        "import json, sys\nfrom relay.cli import main\nmain(['--version'])\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    modules = json.loads(proc.stdout.strip().splitlines()[-1])
    return [m for m in modules if m.split(".")[0] in HEAVY]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="processes per figure (median)")
    parser.add_argument("--top", type=int, default=8, help="slowest imports listed")
    args = parser.parse_args()
    relay = relay_command()
    floor = wall_s([sys.executable, "-c", "pass"], args.runs)
    version = wall_s([*relay, "--version"], args.runs)
    help_s = wall_s([*relay, "--help"], args.runs)
    rows = import_times("relay.cli")
    relay_rows = [(t, name) for _, t, name in rows if name.strip().split(".")[0] == "relay"]
    total = sum(t for t, name in relay_rows if not name.startswith("  "))  # relay + relay.cli
    verdict = "ok" if version <= TARGET_S else f"OVER the {TARGET_S} s target"
    print(f"relay --version      {version:6.3f} s  ({verdict})")
    print(f"relay --help         {help_s:6.3f} s")
    print(f"python -c pass       {floor:6.3f} s  (the interpreter's floor)")
    print(f"import relay.cli     {total / 1e6:6.3f} s with relay itself (-X importtime)")
    for own, _, name in sorted(rows, reverse=True)[: args.top]:
        print(f"  {own / 1e3:7.1f} ms self  {name.strip()}")
    heavy = heavy_modules_of_version()
    print(f"heavy modules loaded by relay --version: {', '.join(heavy) or 'none'}")


if __name__ == "__main__":
    main()
