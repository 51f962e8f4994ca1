"""The audit's plain run of a pytest command, and whether it agrees with relay's report
(issue 27, SPEC §9 step 2, §14).

A pytest deliverable runs twice, each time in a fresh copy of the judged export
(:mod:`relay.audit_export`): once **plain**, as the user would run it (no variable that names
relay, no plugin of relay's, nothing to find), and once with relay's plugin, whose report
comes through the channel of :mod:`relay.pytest_channel`. Code that behaves only while it is
audited, or that forges what one of the runs shows, makes them disagree:
:func:`plain_problems` says so, and the claim is rejected.

The plain run is judged by its exit status and pytest's own summary line
(``=== 1 failed, 2 passed in 0.12s ===``), read by :func:`summary_counts`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping

__all__ = ["COMPARED", "plain_problems", "summary_counts"]

COMPARED = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
"""The outcomes whose counts must agree."""

_WORD = {"errors": "error", "warning": "warnings"}
_PART = re.compile(r"(\d+) ([a-z]+)")
_SUMMARY = re.compile(
    r"^=*\s*((?:\d+ [a-z]+(?:, )?)+|no tests ran) in [\d.]+s(?: \([^)]*\))?\s*=*$"
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def summary_counts(output: str) -> Counter[str] | None:
    """The counts of pytest's last summary line in ``output`` (``{"passed": 2, "failed":
    1}``; ``errors`` counted as ``error``), or None when the output has none (``-p
    no:terminal``, output cut, the process died first). ``no tests ran`` is an empty count."""
    for line in reversed(output.splitlines()):
        text = _ANSI.sub("", line).strip()
        found = _SUMMARY.match(text)
        if found is None:
            continue
        counts: Counter[str] = Counter()
        for number, word in _PART.findall(found.group(1)):
            counts[_WORD.get(word, word)] += int(number)
        return counts
    return None


def _shown(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{counts[k]} {k}" for k in COMPARED if counts.get(k)) or "no test ran"


def plain_problems(
    exit_code: int | None,
    timed_out: bool,
    output: str,
    report_counts: Mapping[str, int],
    audited_output: str = "",
) -> list[str]:
    """Why the plain run does not confirm relay's report (empty: it does).

    Args:
        exit_code: the plain run's exit status (None when it was stopped).
        timed_out: it ran out of time.
        output: its output (the kept tail holds pytest's summary line).
        report_counts: tests per counted outcome in relay's report of the other run.
        audited_output: the output of the run with relay's plugin: when it printed pytest's
            summary line, the plain run of the same command must print one too (code that
            ends the plain run early with exit status 0 prints none).

    Returns:
        One sentence per problem: the plain run failed or timed out, or its summary
        disagrees with relay's report (naming both counts).
    """
    if timed_out:
        return ["run as a user would run it (without relay's plugin), the command timed out"]
    problems = []
    if exit_code != 0:
        problems.append(
            f"run as a user would run it (without relay's plugin or any variable of relay's), "
            f"the command failed: exit code {exit_code}"
        )
    counts = summary_counts(output)
    if counts is None and summary_counts(audited_output) is not None:
        problems.append(
            "the run without relay's plugin printed no pytest summary line, but the run with "
            "it did: the plain run ended before pytest finished"
        )
    elif counts is not None:
        wanted = {k: report_counts.get(k, 0) for k in COMPARED}
        printed = {k: counts.get(k, 0) for k in COMPARED}
        if wanted != printed:
            problems.append(
                f"the run without relay's plugin printed {_shown(printed)!r}, but relay's report "
                f"of the run with it counted {_shown(wanted)!r}: the code under test behaves "
                "differently when it is audited, or forged what one run shows"
            )
    return problems
