"""What a shell command's output costs relay, small beside huge (issue 27).

For each ``--sizes`` figure (default 2 MB and 200 MB) it runs, in a fresh Python process of
its own (so that each peak is that size's alone), one ``shell`` call through relay's shell
tool (``relay.tools.execute``, the sandbox off) of ``head -c SIZE /dev/zero | tr '\\0' x``
and measures:

* **kept**: the bytes of the output file relay kept in the run folder (head + note + tail
  once the output passes ``tools.kept_output_bytes``, ``--keep``; 0 when the output fit the
  result and no file was made), and the bytes it says it dropped;
* **peak RSS**: the process's peak resident memory (``getrusage``: Python, relay's imports
  and the call), beside the same process's peak before the call;
* **time**: the call's wall time, beside a plain ``bash -c`` of the same command reading its
  output into ``/dev/null`` (the floor: making the bytes).

Usage: ``python bench/kept_output.py [--sizes 2000000,200000000] [--keep 8388608]``. Prints
one table, the sizes side by side. A benchmark: exits 0 whatever it measures.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _command(size: int) -> str:
    return f"head -c {size} /dev/zero | tr '\\0' x"


def measure(size: int, keep: int) -> dict[str, float]:
    """One size in this process: the call's figures (see the module docstring)."""
    sys.path.insert(0, str(ROOT))
    from relay.models.base import ToolCall
    from relay.tools import ToolContext, execute

    before_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with tempfile.TemporaryDirectory(prefix="relay-bench-kept-") as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        ctx = ToolContext(
            repo_root=repo.resolve(),
            state_dir=Path(tmp) / "state",
            run_dir=Path(tmp) / "run",
            kept_output_bytes=keep,
            shell_timeout_s=600.0,
        )
        call = ToolCall(id="b", name="shell", arguments={"command": _command(size)})
        started = time.perf_counter()
        result = execute(call, ctx)
        seconds = time.perf_counter() - started
        path = result.full_output_path
        kept = Path(path).stat().st_size if path else 0
    said = re.search(r"; (\d+) of \d+ bytes dropped\)", result.content)
    dropped = int(said.group(1)) if said else 0
    started = time.perf_counter()
    subprocess.run(["/bin/bash", "-c", _command(size)], stdout=subprocess.DEVNULL, check=True)
    floor = time.perf_counter() - started
    return {
        "kept": kept,
        "dropped": dropped,
        "rss_before_mb": before_kb / 1024,
        "rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "seconds": seconds,
        "floor_s": floor,
        "exit": result.exit_code if result.exit_code is not None else -1,
    }


def _child(size: int, keep: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--one", str(size), "--keep", str(keep)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def _table(sizes: list[int], rows: list[dict[str, float]], keep: int) -> str:
    def line(label: str, cells: list[str]) -> str:
        return f"{label:<34}" + "".join(f"{c:>18}" for c in cells)

    lines = [
        f"shell output kept on disk (tools.kept_output_bytes = {keep}), one call per size",
        line("output printed (bytes)", [f"{s:,}" for s in sizes]),
        line("kept file (bytes)", [f"{int(r['kept']):,}" for r in rows]),
        line("dropped, as the result says", [f"{int(r['dropped']):,}" for r in rows]),
        line("peak RSS before the call (MB)", [f"{r['rss_before_mb']:.1f}" for r in rows]),
        line("peak RSS after the call (MB)", [f"{r['rss_peak_mb']:.1f}" for r in rows]),
        line("shell call (s)", [f"{r['seconds']:.3f}" for r in rows]),
        line("plain bash -c of it (s)", [f"{r['floor_s']:.3f}" for r in rows]),
        line("exit code", [str(int(r["exit"])) for r in rows]),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (``argv`` as on the command line); returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="2000000,200000000")
    parser.add_argument("--keep", type=int, default=8 * 1024 * 1024)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one is not None:
        print(json.dumps(measure(args.one, args.keep)))
        return 0
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--sizes takes whole numbers separated by commas, not {args.sizes!r}")
    if not sizes or min(sizes) < 1:
        parser.error("--sizes takes positive whole numbers")
    rows = [_child(size, args.keep) for size in sizes]
    print(_table(sizes, rows, args.keep))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
