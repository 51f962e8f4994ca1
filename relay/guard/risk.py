"""The risk engine: events to a score, the score to a verdict, the verdict's diagnosis
(SPEC §8).

Pure, no I/O. :func:`evaluate_round` judges a finished round with every enabled detector;
:func:`evaluate_step` judges a round in progress, after each tool call, with those whose
verdict on the first calls of a round holds for the whole round.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from relay.guard.detectors import (
    DETECTORS,
    STEP_DETECTORS,
    Detector,
    DetectorInput,
    failure_streak_after,
)
from relay.guard.history import GuardEvent, GuardRound
from relay.guard.settings import GuardSettings

SUGGESTIONS = {
    "loop": "the model repeats the same actions with the same results; check whether the goal "
    "is reachable as stated, or add a supplement with a hint",
    "drift": "the model works on things unrelated to the goal; make the goal more specific",
    "tool_failures": "tool calls keep failing; check the environment (dependencies, "
    "permissions, test setup)",
    "api_errors": "the model API keeps failing; check the provider's status and your quota",
    "tamper": "the model changed files it must not change; review its commits",
}


@dataclass(frozen=True)
class GuardDecision:
    """The guard's verdict after a round (or a step of one, :func:`evaluate_step`): the new
    events, the new score, the failure streak after the round, and a diagnosis when the score
    reached the threshold (the goal is then ``terminated``)."""

    events: tuple[GuardEvent, ...]
    score: float
    failure_streak: int
    diagnosis: str | None = None


def evaluate_round(
    current: GuardRound,
    previous: Sequence[GuardRound],
    *,
    goal_text: str,
    settings: GuardSettings,
    score: float,
    failure_streak: int,
    history: Callable[[], Sequence[GuardEvent]] = tuple,
    goal_paths: Sequence[str] = (),
) -> GuardDecision:
    """Run the enabled detectors on a finished round and update the risk score (SPEC §8).

    Args:
        current: the round just finished.
        previous: earlier rounds, oldest first (at least ``loop_window`` of them if they exist).
        goal_text: the goal with its supplements.
        settings: the guard settings.
        score: the score before this round (0–100).
        failure_streak: failed real tool calls in a row before this round.
        history: returns the goal's earlier events, for the diagnosis (called only then).
        goal_paths: the paths the goal's deliverables name
            (:func:`~relay.guard.detectors.deliverable_paths`), for ``drift``.

    Returns:
        The decision. The score adds the weight of every new event (capped at 100); a round
        that changed files and brought no event multiplies it by ``decay``.
    """
    streak = failure_streak_after(failure_streak, current.actions)
    if not settings.enabled:
        return GuardDecision((), score, streak)
    d = DetectorInput(
        current, tuple(previous), goal_text, settings, failure_streak, tuple(goal_paths)
    )
    events = _run([DETECTORS[name] for name in settings.detectors], d)
    decays = bool(current.files_changed and current.actions)
    return _decide(events, score, streak, settings, history, decays=decays)


def evaluate_step(
    current: GuardRound,
    *,
    settings: GuardSettings,
    score: float,
    failure_streak: int,
    history: Callable[[], Sequence[GuardEvent]] = tuple,
) -> GuardDecision:
    """Score a round in progress, after one of its tool calls: would the goal end now? (SPEC §8:
    the guard acts when its score reaches the threshold, inside a round too.)

    Runs the enabled detectors of :data:`~relay.guard.detectors.STEP_DETECTORS` (the in-round
    half of ``loop``, ``tool_failures``, ``api_errors``, ``tamper``), whose events for a
    round's first calls are among the events of the whole round; ``drift`` and the
    across-rounds ``loop`` wait for :func:`evaluate_round`. So when this returns a diagnosis,
    :func:`evaluate_round` on the finished round would reach the threshold too. Cost: one
    pass over the round's calls and findings so far; nothing of earlier rounds is read, no
    text is compared.

    Args:
        current: the round so far: its number, its real tool calls (``actions``), failed model
            calls (``api_errors``), tamper findings (``tamper``) and repeat findings
            (``repeat_events``) up to now; ``handoff`` and ``files_changed`` are not read.
        settings: the guard settings.
        score: the score before this round (0–100): the value :func:`evaluate_round` gets at
            the round's end, not the score of an earlier call of this function.
        failure_streak: failed real tool calls in a row before this round.
        history: returns the goal's events of earlier rounds, for the diagnosis (called only
            then).

    Returns:
        The decision if the round ended now: its events so far, the score with their weights
        (capped at 100; no decay inside a round), the failure streak after the calls so far,
        and the diagnosis when the score reached ``threshold`` (the goal is then
        ``terminated``), the same text :func:`evaluate_round` would write for these events.
    """
    streak = failure_streak_after(failure_streak, current.actions)
    if not settings.enabled:
        return GuardDecision((), score, streak)
    d = DetectorInput(current, (), "", settings, failure_streak)
    detectors = [STEP_DETECTORS[name] for name in settings.detectors if name in STEP_DETECTORS]
    return _decide(_run(detectors, d), score, streak, settings, history, decays=False)


def _run(detectors: Sequence[Detector], d: DetectorInput) -> list[GuardEvent]:
    events: list[GuardEvent] = []
    for detector in detectors:
        events += detector(d)
    return events


def _decide(
    events: list[GuardEvent],
    score: float,
    streak: int,
    settings: GuardSettings,
    history: Callable[[], Sequence[GuardEvent]],
    *,
    decays: bool,
) -> GuardDecision:
    """The decision for a round's events: their weights added to ``score`` (capped at 100),
    or, without events, ``score`` times ``decay`` when ``decays``; a diagnosis when the round
    brought events and the score reached the threshold."""
    if events:
        score = min(100.0, score + sum(settings.weights.get(e.kind, 0) for e in events))
    elif decays:
        score *= settings.decay
    diagnosis = None
    if score >= settings.threshold and events:
        diagnosis = diagnose([*history(), *events])
    return GuardDecision(tuple(events), score, streak, diagnosis)


def diagnose(events: Sequence[GuardEvent]) -> str:
    """``Terminated: loop (rounds 6, 7), tool_failures (round 7). Check …`` (SPEC §8)."""
    rounds: dict[str, list[int]] = {}
    for e in events:
        if e.kind in SUGGESTIONS:
            rounds.setdefault(e.kind, [])
            if e.round not in rounds[e.kind]:
                rounds[e.kind].append(e.round)
    parts = []
    for kind, ns in rounds.items():
        label = "round" if len(ns) == 1 else "rounds"
        parts.append(f"{kind} ({label} {', '.join(str(n) for n in sorted(ns))})")
    checks = "; ".join(SUGGESTIONS[k] for k in rounds)
    return f"Terminated: {', '.join(parts)}. Check: {checks}."
