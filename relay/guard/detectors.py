"""The detectors: pure functions from a round and its history to risk events (SPEC §8).

Every detector takes a :class:`DetectorInput` (the round, the previous rounds, the goal text,
the settings) and returns the events it finds; none keeps state or does I/O (the ``embedding``
drift scorer loads its model lazily in :mod:`relay.guard.embedding`). :data:`DETECTORS` maps
the names of ``guard.detectors`` to them; :data:`STEP_DETECTORS` are the ones that judge a
round in progress (see :func:`relay.guard.risk.evaluate_step`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from relay.guard.history import (
    Action,
    GuardEvent,
    GuardRound,
    normalised_arguments,
    path_tokens,
    strip_shell_comments,
)
from relay.guard.settings import GuardSettings
from relay.guard.similarity import lexical_relevance, meaningful_words, similarities


@dataclass(frozen=True)
class DetectorInput:
    """What a detector sees: the current round, earlier rounds (oldest first), the goal text
    with its supplements, the settings, the failure streak before this round, and the paths
    the goal's deliverables name (:func:`deliverable_paths`)."""

    round: GuardRound
    previous: tuple[GuardRound, ...]
    goal_text: str
    settings: GuardSettings
    failure_streak_before: int
    goal_paths: tuple[str, ...] = ()


Detector = Callable[[DetectorInput], list[GuardEvent]]


def detect_repeats(d: DetectorInput) -> list[GuardEvent]:
    """The in-round half of ``loop`` (SPEC §8): one event per finding of
    :class:`relay.guard.repeats.RepeatTracker`, recorded live by the loop in
    ``round.repeat_events``. Judges a round in progress as well as a finished one."""
    return [GuardEvent("loop", d.round.n, text) for text in d.round.repeat_events]


def detect_round_repeat(d: DetectorInput) -> list[GuardEvent]:
    """The across-rounds half of ``loop`` (SPEC §8): one event when the round has real tool
    calls and its action sequence has :func:`~relay.guard.similarity.sequence_similarity` ≥
    ``loop_similarity`` (default 0.95) with one of the previous ``loop_window`` (default 4)
    rounds (those without real tool calls are not compared); the most recent such round is
    named. Calls compare with :func:`~relay.guard.similarity.same_call`, results included, so a
    poll whose output changes never matches. Judges finished rounds only: the first calls of
    a round may match a whole earlier round that the rest of it does not repeat."""
    current = d.round.actions
    if not current:
        return []
    window = [r for r in d.previous[-d.settings.loop_window :] if r.actions][::-1]
    similar = d.settings.loop_similarity
    ratios = similarities(current, (r.actions for r in window), similar, reaching=similar)
    for earlier, ratio in zip(window, ratios, strict=True):
        if ratio >= d.settings.loop_similarity:
            calls = f"{len(current)} tool call{'' if len(current) == 1 else 's'}"
            detail = (
                f"round {d.round.n} repeated round {earlier.n}: the same {calls} with the "
                f"same results (similarity {ratio:.2f})"
            )
            return [GuardEvent("loop", d.round.n, detail)]
    return []


def detect_loop(d: DetectorInput) -> list[GuardEvent]:
    """``loop`` events of a finished round (SPEC §8): those of :func:`detect_repeats` (inside
    the round), then that of :func:`detect_round_repeat` (across rounds)."""
    return [*detect_repeats(d), *detect_round_repeat(d)]


_FILE_TOOLS = frozenset({"read_file", "write_file", "edit_file"})
_LONG_ARGS = frozenset({"content", "old", "new"})

DRIFT_MIN_WORDS = 5
"""A round's activity needs at least this many meaningful words (see
:func:`~relay.guard.similarity.lexical_relevance`) before any drift scorer judges it:
``pytest -q`` alone or ``git status`` says nothing about the subject of the work."""


def round_subjects(r: GuardRound) -> list[str]:
    """What a round worked on: the paths of its file tool calls, the file-naming words of its
    shell commands (:func:`~relay.guard.history.path_tokens`) and the files it changed, in
    that order."""
    cached = r.__dict__.get("_subjects")
    if cached is not None:
        return list(cached)
    subjects: list[str] = []
    for a in r.actions:
        if a.name in _FILE_TOOLS and isinstance(a.arguments.get("path"), str):
            subjects.append(a.arguments["path"])
        elif a.name == "shell" and isinstance(a.arguments.get("command"), str):
            subjects += path_tokens(strip_shell_comments(a.arguments["command"]))
    subjects += r.files_changed
    object.__setattr__(r, "_subjects", tuple(subjects))  # a round's record never changes
    return subjects


def deliverable_paths(deliverables: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """The paths the goal's deliverables (SPEC §9, frozen with the goal) name, in order: each
    ``file``, the file-naming words (:func:`~relay.guard.history.path_tokens`) of each
    ``command``, each ``changed`` entry without a wildcard (``*``, ``?``, ``[``). Paths with
    no meaningful word (``.venv/bin/python``) are left out: they name no subject of the work.

    Args:
        deliverables: the goal's deliverables, as stored (``{"command": ..., ...}``).
    """
    found: list[str] = []
    for item in deliverables:
        named = [item.get("file"), item.get("changed")]
        command = item.get("command")
        if isinstance(command, str):
            named += path_tokens(strip_shell_comments(command))
        for path in named:
            if not isinstance(path, str) or any(c in path for c in "*?["):
                continue
            path = subject_path(path)
            if path and path not in found and meaningful_words(path):
                found.append(path)
    return tuple(found)


def subject_path(subject: str) -> str:
    """A subject as a repository path: quotes, a leading ``./``, a pytest node id's
    ``::name`` and a trailing ``/`` removed (``./tests/test_a.py::test_b`` → ``tests/test_a.py``)."""
    path = subject.strip("'\"").split("::", 1)[0]
    while path.startswith("./"):
        path = path[2:]
    return path.rstrip("/")


def on_goal_paths(subjects: Iterable[str], goal_paths: Sequence[str]) -> bool:
    """Whether one of ``subjects`` (:func:`subject_path` applied) is one of the goal's paths
    (:func:`deliverable_paths`) or lies below one of them."""
    for path in map(subject_path, subjects):
        if any(path == p or path.startswith(p + "/") for p in goal_paths):
            return True
    return False


def goal_working_set(
    goal_text: str, rounds: Sequence[GuardRound], goal_paths: Sequence[str] = ()
) -> set[str]:
    """The subjects (:func:`round_subjects`, as :func:`subject_path`) of the on-topic rounds
    among ``rounds`` (oldest first): a round is on-topic when its activity has a goal word
    (:func:`lexical_relevance`), it worked on a path the goal's deliverables name
    (``goal_paths``, :func:`on_goal_paths`: the test a fixing round runs is the deliverable's
    test) or on a subject of an earlier on-topic round. Later rounds that work on these files
    are on-topic too, even when their commands and edits use no word of the goal."""
    working: set[str] = set()
    for r in rounds:
        if not r.actions:
            continue
        subjects = {subject_path(s) for s in round_subjects(r)}
        if (
            subjects & working
            or on_goal_paths(subjects, goal_paths)
            or lexical_relevance(goal_text, round_activity(r))[0]
        ):
            working |= subjects
    return working


def round_activity(r: GuardRound) -> str:
    """The text the drift scorers judge: the round's handoff note, then each real tool call's
    name with its short arguments (commands, paths), then the changed paths, then the long
    arguments (file contents, ``old``/``new`` of edits; each cut to 2000 characters). Tool
    results are not part of it."""
    cached = r.__dict__.get("_activity")
    if cached is not None:
        return cached
    head = [r.handoff]
    tail = []
    for a in r.actions:
        head.append(a.name)
        for key, value in a.arguments.items():
            text = value if isinstance(value, str) else json.dumps(value)
            (tail if key in _LONG_ARGS else head).append(text[:2000])
    activity = "\n".join([*head, *r.files_changed, *tail])
    object.__setattr__(r, "_activity", activity)  # a round's record never changes
    return activity


def detect_drift(d: DetectorInput) -> list[GuardEvent]:
    """A ``drift`` event for a round with real tool calls whose activity
    (:func:`round_activity`) is unrelated to the goal and its supplements (SPEC §8).

    Judged only when the round worked on something (a meaningful word among its
    :func:`round_subjects`: paths, not just ``pytest -q``), on none of the paths the goal's
    deliverables name (:func:`on_goal_paths`) and nothing of the goal's working set of the
    previous ``loop_window`` rounds (:func:`goal_working_set`), and its activity has at least
    :data:`DRIFT_MIN_WORDS` meaningful words. Then, by ``guard.drift``:

    * ``lexical`` (default): not one activity word matches a goal word
      (:func:`lexical_relevance`, :func:`~relay.guard.similarity.words_match`);
    * ``embedding``: the cosine similarity of the activity and goal embeddings
      (all-MiniLM-L6-v2) is below :data:`relay.guard.embedding.DRIFT_THRESHOLD`;
    * ``off``: never.
    """
    if d.settings.drift == "off" or not d.round.actions:
        return []
    subjects = round_subjects(d.round)
    if not meaningful_words(" ".join(subjects)):
        return []
    if on_goal_paths(subjects, d.goal_paths):
        return []
    window = d.previous[-d.settings.loop_window :]
    working = goal_working_set(d.goal_text, window, d.goal_paths)
    if {subject_path(s) for s in subjects} & working:
        return []
    activity = round_activity(d.round)
    found, total = lexical_relevance(d.goal_text, activity)
    if total < DRIFT_MIN_WORDS:
        return []
    if d.settings.drift == "embedding":
        from relay.guard import embedding  # the optional extra, loaded only when configured

        score = embedding.relevance(d.goal_text, activity)
        if score >= embedding.DRIFT_THRESHOLD:
            return []
        why = (
            f"embedding similarity {score:.2f} of its commands, paths and handoff to the goal, "
            f"below {embedding.DRIFT_THRESHOLD}"
        )
    else:
        if found:
            return []
        why = f"{total} distinct words in its commands, paths and handoff, none from the goal"
    return [
        GuardEvent(
            "drift", d.round.n, f"round {d.round.n} worked on things unrelated to the goal ({why})"
        )
    ]


def failure_streak_after(before: int, actions: Sequence[Action]) -> int:
    """The streak of failed real tool calls in a row after ``actions`` (SPEC §8)."""
    streak = before
    for a in actions:
        streak = streak + 1 if a.failed else 0
    return streak


def detect_tool_failures(d: DetectorInput) -> list[GuardEvent]:
    """An event each time the failure streak reaches a multiple of ``failure_streak``."""
    events = []
    streak = d.failure_streak_before
    for a in d.round.actions:
        streak = streak + 1 if a.failed else 0
        if a.failed and streak % d.settings.failure_streak == 0:
            events.append(
                GuardEvent(
                    "tool_failures",
                    d.round.n,
                    f"{streak} failed tool calls in a row (last: {a.name} "
                    f"{normalised_arguments(a.arguments)[:80]})",
                )
            )
    return events


def detect_api_errors(d: DetectorInput) -> list[GuardEvent]:
    """One event per failed model call of the round."""
    return [GuardEvent("api_errors", d.round.n, text) for text in d.round.api_errors]


def detect_tamper(d: DetectorInput) -> list[GuardEvent]:
    """One event per tamper finding of the round."""
    return [GuardEvent("tamper", d.round.n, text) for text in d.round.tamper]


DETECTORS: dict[str, Detector] = {
    "loop": detect_loop,
    "drift": detect_drift,
    "tool_failures": detect_tool_failures,
    "api_errors": detect_api_errors,
    "tamper": detect_tamper,
}
"""The detector registry: ``guard.detectors`` names entries of it."""

STEP_DETECTORS: dict[str, Detector] = {
    "loop": detect_repeats,
    "tool_failures": detect_tool_failures,
    "api_errors": detect_api_errors,
    "tamper": detect_tamper,
}
"""The detectors that judge a round in progress, by the ``guard.detectors`` name they serve:
their events for the first calls of a round are among their events for the whole round (a
call's events depend only on the calls before it). ``drift`` and the across-rounds half of
``loop`` judge a round as a whole, so only finished rounds."""
