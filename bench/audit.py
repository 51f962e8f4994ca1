"""Completion-audit bench (SPEC §9): the false-claim suite's catch rate and the honest suite's
false rejections.

Runs every case of ``tests/audit_suites/false`` and ``tests/audit_suites/honest`` through the
real ``relay run`` (scripted model, real git, real test runs) with the same runner as
``tests/test_audit_suites.py``, once without the sandbox (the audit's own rules) and once in
the default configuration (``sandbox.mode: auto``), and prints one line per case, then::

    [sandbox off] false claims rejected: 36/36 (100.0 %)
    [sandbox off] honest claims rejected: 0/22
    [sandbox auto] false claims rejected: 36/36 (100.0 %)
    [sandbox auto] honest claims rejected: 0/22

Exit code 0 when the targets are met (100 % caught, 0 honest rejected), 1 otherwise.

    .venv/bin/python bench/audit.py [--sandbox off|auto|both] [--keep]
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


def _figures(label: str, results: dict[str, list]) -> bool:
    """Print one mode's per-case lines and figures; True when the targets are met."""
    for suite, rows in results.items():
        for r in rows:
            mark = "ok  " if r.ok else "MISS"
            print(f"{mark} {label:7} {suite:6} {r.case.name:40} {r.verdict:9} {r.seconds:5.1f} s")
            for problem in r.problems:
                print(f"       {problem[:300]}")
    false, honest = results["false"], results["honest"]
    caught = sum(1 for r in false if r.verdict == "rejected" and r.ok)
    wrongly = sum(1 for r in honest if r.verdict != "accepted")
    rate = 100.0 * caught / len(false) if false else 0.0
    print(f"[{label}] false claims rejected: {caught}/{len(false)} ({rate:.1f} %)")
    print(f"[{label}] honest claims rejected: {wrongly}/{len(honest)}")
    return caught == len(false) and wrongly == 0


def main(argv: list[str] | None = None) -> int:
    """Run both suites in both sandbox modes; print per-case lines and the figures; return the
    exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the case repositories")
    parser.add_argument(
        "--sandbox",
        choices=("off", "auto", "both"),
        default="both",
        help="off: the audit's own rules; auto: the default configuration with its sandbox",
    )
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="relay-audit-bench-"))
    started = time.monotonic()
    modes = ("off", "auto") if args.sandbox == "both" else (args.sandbox,)
    met = True
    try:
        for mode in modes:
            results = {suite: run_suite(suite, workdir, mode) for suite in ("false", "honest")}
            met = _figures(f"sandbox {mode}", results) and met
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"time: {time.monotonic() - started:.1f} s" + (f"; cases in {workdir}" if args.keep else "")
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
