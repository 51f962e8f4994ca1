"""Completion-audit bench (SPEC §9): the false-claim suite's catch rate and the honest suite's
false rejections.

Runs every case of ``tests/audit_suites/false`` and ``tests/audit_suites/honest`` through the
real ``relay run`` (scripted model, real git, real test runs) with the same runner as
``tests/test_audit_suites.py``, and prints one line per case, then::

    false claims rejected: 36/36 (100.0 %)
    honest claims rejected: 0/22

Exit code 0 when the targets are met (100 % caught, 0 honest rejected), 1 otherwise.

    .venv/bin/python bench/audit.py [--keep]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from audit_suites.runner import run_suite


def main(argv: list[str] | None = None) -> int:
    """Run both suites; print per-case lines and the figures; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the case repositories")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="relay-audit-bench-"))
    started = time.monotonic()
    try:
        results = {suite: run_suite(suite, workdir) for suite in ("false", "honest")}
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    for suite, rows in results.items():
        for r in rows:
            mark = "ok  " if r.ok else "MISS"
            print(f"{mark} {suite:6} {r.case.name:40} {r.verdict:9} {r.seconds:5.1f} s")
            for problem in r.problems:
                print(f"       {problem[:300]}")
    false, honest = results["false"], results["honest"]
    caught = sum(1 for r in false if r.verdict == "rejected" and r.ok)
    wrongly = sum(1 for r in honest if r.verdict != "accepted")
    rate = 100.0 * caught / len(false) if false else 0.0
    print(f"false claims rejected: {caught}/{len(false)} ({rate:.1f} %)")
    print(f"honest claims rejected: {wrongly}/{len(honest)}")
    print(
        f"time: {time.monotonic() - started:.1f} s" + (f"; cases in {workdir}" if args.keep else "")
    )
    return 0 if caught == len(false) and wrongly == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
