"""The guard: stop unreachable goals early, with a diagnosis (SPEC §8).

Pure policy, no I/O. Detectors look at round records and emit risk events; the risk engine adds
their weights to a score (capped at 100), lets a productive round without events decay it, and
terminates the goal when the score reaches the threshold: after a round
(:func:`evaluate_round`) or, for the detectors that can judge a round in progress, after any
tool call of it (:func:`evaluate_step`).

Detectors (switchable through ``guard.detectors``; the exact rules are in their docstrings and
in ``docs/guard.md``):

* ``loop``: across rounds, a round's action sequence (tool, arguments, result fingerprint) is at
  least ``loop_similarity`` similar to one of the previous ``loop_window`` rounds; inside a
  round, :class:`RepeatTracker` catches a near-identical call (or a short cycle of calls) with
  the same result ``repeat_limit`` times in a row. Calls that differ only in blanks, shell
  comments (``# attempt 3``) or a few characters outside file names are near-identical
  (:func:`same_call`). A call whose result changes (a poll that progresses) is never a loop.
* ``drift``: a round that worked on something outside the goal's working set and whose
  activity (handoff, commands, paths, written text) has no word of the goal and its
  supplements (``lexical``), or is far from it in meaning (``embedding``, optional extra).
* ``tool_failures``: the streak of failed real tool calls reaches a multiple of
  ``failure_streak``.
* ``api_errors``: a model call failed (rate limit, overload, timeout, connection).
* ``tamper``: the progress file or a protected path was changed behind relay's back.

Rounds without a real tool call are the supervisor's business (§7.2), never loop or drift.

Modules: :mod:`~relay.guard.history` (the records scored and their fingerprints),
:mod:`~relay.guard.settings`, :mod:`~relay.guard.similarity` (call identity, lexical
relevance), :mod:`~relay.guard.repeats` (in-round repeats), :mod:`~relay.guard.detectors`,
:mod:`~relay.guard.risk` (score, verdict, diagnosis) and :mod:`~relay.guard.embedding` (the
optional embedding scorer, imported only when ``guard.drift`` is ``embedding``).
"""

from relay.guard.detectors import (
    DETECTORS,
    DRIFT_MIN_WORDS,
    STEP_DETECTORS,
    Detector,
    DetectorInput,
    deliverable_paths,
    detect_api_errors,
    detect_drift,
    detect_loop,
    detect_repeats,
    detect_round_repeat,
    detect_tamper,
    detect_tool_failures,
    failure_streak_after,
    goal_working_set,
    on_goal_paths,
    round_activity,
    round_subjects,
    subject_path,
)
from relay.guard.history import (
    Action,
    GuardEvent,
    GuardRound,
    call_text,
    normalised_arguments,
    path_tokens,
    result_fingerprint,
    strip_shell_comments,
)
from relay.guard.repeats import MAX_CYCLE, RepeatTracker
from relay.guard.risk import (
    SUGGESTIONS,
    GuardDecision,
    diagnose,
    evaluate_round,
    evaluate_step,
)
from relay.guard.settings import DEFAULT_WEIGHTS, EVENT_KINDS, GuardSettings
from relay.guard.similarity import (
    CHAR_COMPARE_LIMIT,
    COMPOUND_MIN,
    lexical_relevance,
    meaningful_words,
    same_call,
    sequence_similarity,
    similarities,
    words_match,
)

__all__ = [
    "CHAR_COMPARE_LIMIT",
    "COMPOUND_MIN",
    "DEFAULT_WEIGHTS",
    "DETECTORS",
    "DRIFT_MIN_WORDS",
    "EVENT_KINDS",
    "MAX_CYCLE",
    "STEP_DETECTORS",
    "SUGGESTIONS",
    "Action",
    "Detector",
    "DetectorInput",
    "GuardDecision",
    "GuardEvent",
    "GuardRound",
    "GuardSettings",
    "RepeatTracker",
    "call_text",
    "deliverable_paths",
    "detect_api_errors",
    "detect_drift",
    "detect_loop",
    "detect_repeats",
    "detect_round_repeat",
    "detect_tamper",
    "detect_tool_failures",
    "diagnose",
    "evaluate_round",
    "evaluate_step",
    "failure_streak_after",
    "goal_working_set",
    "lexical_relevance",
    "meaningful_words",
    "normalised_arguments",
    "on_goal_paths",
    "path_tokens",
    "result_fingerprint",
    "round_activity",
    "round_subjects",
    "same_call",
    "sequence_similarity",
    "similarities",
    "strip_shell_comments",
    "subject_path",
    "words_match",
]
