"""Round records for the guard's pure tests (``tests/test_guard_*.py``)."""

from __future__ import annotations

from typing import Any

from relay.guard import Action, DetectorInput, GuardRound, GuardSettings, result_fingerprint

DEFAULT = GuardSettings()


def sh(command: str, result: str = "exit code: 0", *, failed: bool = False) -> Action:
    """A shell call with its result fingerprint."""
    return Action("shell", {"command": command}, result_fingerprint(result), failed)


def act(name: str, result: str = "ok", *, failed: bool = False, **arguments: Any) -> Action:
    return Action(name, arguments, result_fingerprint(result), failed)


def rnd(n: int, *actions: Action, **fields: Any) -> GuardRound:
    return GuardRound(n=n, actions=tuple(actions), **fields)


def inp(
    current: GuardRound,
    previous: tuple[GuardRound, ...] = (),
    *,
    goal: str = "Fix the division bug in calc.py",
    settings: GuardSettings = DEFAULT,
    streak: int = 0,
) -> DetectorInput:
    return DetectorInput(current, previous, goal, settings, streak)


def settings(**changes: Any) -> GuardSettings:
    values = {**DEFAULT.__dict__, **changes}
    return GuardSettings(**values)


def fails(k: int) -> list[Action]:
    return [sh(f"cmd{i}", "exit code: 127", failed=True) for i in range(k)]


GOAL = "Fix the division bug in calc.py: divide(1, 0) must raise ZeroDivisionError."


def marketing_round(n: int = 1, tagline: str = "Ship faster with our product") -> GuardRound:
    return rnd(
        n,
        act("write_file", "wrote 80 bytes", path="docs/marketing.html", content=tagline),
        handoff="Polished the landing page headline.",
        files_changed=("docs/marketing.html",),
    )
