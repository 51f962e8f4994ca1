"""The guard: stop unreachable goals early, with a diagnosis (SPEC §8).

Pure policy, no I/O. Detectors look at round records and emit risk events; the risk engine adds
their weights to a score (capped at 100), lets a productive round without events decay it, and
terminates the goal when the score reaches the threshold.

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
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any

EVENT_KINDS = ("loop", "drift", "tool_failures", "api_errors", "tamper")

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
class Action:
    """One real tool call of a round: tool name, arguments, a fingerprint of its result, and
    whether it failed (non-zero exit, timeout, error result)."""

    name: str
    arguments: dict[str, Any]
    result_fp: str
    failed: bool

    def signature(self) -> str:
        """The call without its result: tool name and normalised arguments."""
        return f"{self.name}:{_normalise_args(self.arguments)}"

    def key(self) -> str:
        """The call with its exact result fingerprint."""
        return f"{self.signature()}=>{self.result_fp}"

    def text(self) -> str:
        """The canonical text of the call (:func:`call_text`), computed once."""
        cached = self.__dict__.get("_text")
        if cached is None:
            cached = call_text(self.name, self.arguments)
            object.__setattr__(self, "_text", cached)
        return cached


@dataclass(frozen=True)
class RoundRecord:
    """What the guard knows of one round.

    ``actions`` are the real tool calls in order; ``handoff`` the round's note; ``api_errors``
    failed model calls; ``tamper`` tamper findings (texts); ``repeat_events`` in-round repeat
    findings from :class:`RepeatTracker`; ``files_changed`` changed paths.
    """

    n: int
    actions: tuple[Action, ...] = ()
    handoff: str = ""
    files_changed: tuple[str, ...] = ()
    api_errors: tuple[str, ...] = ()
    tamper: tuple[str, ...] = ()
    repeat_events: tuple[str, ...] = ()


@dataclass(frozen=True)
class GuardEvent:
    """A risk event: its kind, the round, and a detail a user can read."""

    kind: str
    round: int
    detail: str


@dataclass(frozen=True)
class GuardSettings:
    """The guard configuration (``guard`` section of relay.yaml; SPEC §8)."""

    enabled: bool = True
    threshold: int = 70
    weights: dict[str, int] = field(
        default_factory=lambda: {
            "loop": 30,
            "drift": 25,
            "tool_failures": 15,
            "api_errors": 10,
            "tamper": 30,
        }
    )
    detectors: tuple[str, ...] = EVENT_KINDS
    loop_window: int = 4
    loop_similarity: float = 0.95
    repeat_limit: int = 5
    failure_streak: int = 3
    decay: float = 0.5
    drift: str = "lexical"

    @classmethod
    def from_config(cls, guard: Any) -> GuardSettings:
        """Build from :class:`relay.config.GuardConfig`."""
        return cls(
            enabled=guard.enabled,
            threshold=guard.threshold,
            weights=dict(guard.weights),
            detectors=tuple(guard.detectors),
            loop_window=guard.loop_window,
            loop_similarity=guard.loop_similarity,
            repeat_limit=guard.repeat_limit,
            failure_streak=guard.failure_streak,
            decay=guard.decay,
            drift=guard.drift,
        )


# fingerprints -----------------------------------------------------------------------------

_VOLATILE = [
    # the shell tool's cut marker names the bytes cut and a per-call file; the partial lines
    # around it move with the output's length
    (re.compile(r"[^\n]*\n\[\.\.\. \d+ bytes cut[^\n]*\.\.\.\]\n[^\n]*"), "<cut>"),
    (re.compile(r"\b\d+(\.\d+)?\s*(ms|s|sec|secs|seconds|minutes?)\b"), "<duration>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2})?(\.\d+)?Z?\b"), "<datetime>"),
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}(\.\d+)?\b"), "<time>"),
    (re.compile(r"\b0x[0-9a-fA-F]{6,}\b"), "<address>"),
    (re.compile(r"/tmp/[\w.-]+"), "<tmp>"),
    (re.compile(r"[ \t]+"), " "),
]


def result_fingerprint(text: str) -> str:
    """A short hash (12 hex digits) of a tool result with volatile parts removed: the shell
    tool's cut marker (with the partial lines around it), durations (``0.03s``, ``12 ms``),
    dates and clock times, hex addresses, ``/tmp/...`` paths, runs of blanks. The same outcome
    gives the same fingerprint while real changes (a progress counter, a different error)
    give a different one."""
    for pattern, repl in _VOLATILE:
        text = pattern.sub(repl, text)
    return hashlib.sha1(text.strip().encode("utf-8", "replace")).hexdigest()[:12]


def _normalise_args(arguments: dict[str, Any]) -> str:
    def norm(value: Any) -> Any:
        if isinstance(value, str):
            return " ".join(value.split())
        if isinstance(value, dict):
            return {k: norm(v) for k, v in sorted(value.items())}
        if isinstance(value, list):
            return [norm(v) for v in value]
        return value

    return json.dumps(norm(arguments), sort_keys=True, ensure_ascii=False)


CHAR_COMPARE_LIMIT = 1000
"""Texts longer than this (characters) are compared line by line, not character by character
(a character comparison of two 20 kB file contents takes seconds)."""


def _similar(a: str, b: str, threshold: float) -> bool:
    """Whether ``difflib``'s ratio of ``a`` and ``b`` is at least ``threshold``: over their
    characters, or over their lines when one is longer than :data:`CHAR_COMPARE_LIMIT`."""
    if a == b:
        return True
    if max(len(a), len(b)) > CHAR_COMPARE_LIMIT:
        matcher = SequenceMatcher(None, a.splitlines(), b.splitlines(), autojunk=False)
    else:
        matcher = SequenceMatcher(None, a, b, autojunk=False)
    return (
        matcher.real_quick_ratio() >= threshold
        and matcher.quick_ratio() >= threshold
        and matcher.ratio() >= threshold
    )


# near-identical calls ---------------------------------------------------------------------

_COMMENT_STARTS_AFTER = frozenset(" \t\n;&|()")


def strip_shell_comments(command: str) -> str:
    """``command`` without its shell comments: a ``#`` outside quotes at the start of a word
    runs to the end of its line (bash's rule; ``$#`` and ``${#x}`` are not comments).

    Args:
        command: a shell command line (several lines allowed).

    Returns:
        The command with every comment removed (the line breaks stay). Used only to compare
        calls, never to run them: ``pytest -k a  # attempt 3`` and ``pytest -k a  # attempt 4``
        are the same call.
    """
    out: list[str] = []
    quote: str | None = None
    i, n = 0, len(command)
    while i < n:
        c = command[i]
        if quote is not None:
            out.append(c)
            if c == "\\" and quote == '"' and i + 1 < n:
                out.append(command[i + 1])
                i += 2
                continue
            if c == quote:
                quote = None
        elif c == "\\" and i + 1 < n:
            out.append(command[i : i + 2])
            i += 2
            continue
        elif c in "'\"":
            quote = c
            out.append(c)
        elif c == "#" and (not out or out[-1][-1] in _COMMENT_STARTS_AFTER):
            end = command.find("\n", i)
            if end == -1:
                break
            i = end
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


_TOKEN_SPLIT = re.compile(r"[\s;|&()<>=,\"'`]+")
_FILE_NAME = re.compile(r"^[\w.+-]*\w\.[A-Za-z]\w{0,7}$")


def path_tokens(text: str) -> tuple[str, ...]:
    """The words of ``text`` that name files: those containing ``/`` or looking like
    ``name.ext`` (``src/mod1.py``, ``calc.py``, ``'s/old/new/g'``), in order.

    Two calls that differ in such a word act on different things (``sed -i … mod1.py`` and
    ``sed -i … mod2.py``), so they are never near-identical, however similar the rest.
    """
    return tuple(t for t in _TOKEN_SPLIT.split(text) if t and ("/" in t or _FILE_NAME.match(t)))


def call_text(name: str, arguments: dict[str, Any]) -> str:
    """The canonical text of a call, as compared for near-identity: the tool name, then each
    argument sorted by name as ``key=value``. In text values, runs of blanks are collapsed
    within each line and blank lines are dropped; shell comments are removed from a ``shell``
    command. Other values are JSON."""
    parts = [name]
    for key in sorted(arguments):
        value = arguments[key]
        if isinstance(value, str):
            if name == "shell" and key == "command":
                value = strip_shell_comments(value)
            text = "\n".join(" ".join(line.split()) for line in value.splitlines() if line.strip())
        else:
            text = json.dumps(value, sort_keys=True, ensure_ascii=False)
        parts.append(f"{key}={text}")
    return "\n".join(parts)


def same_call(a: Action, b: Action, similarity: float) -> bool:
    """Whether two calls are near-identical calls with the same result (SPEC §8).

    Rule: the same tool, the same result fingerprint, the same ``path`` argument, the same
    file-naming words (:func:`path_tokens`) in the same order, and canonical texts
    (:func:`call_text`) whose :class:`difflib.SequenceMatcher` ratio is at least
    ``similarity`` (0–1; ``guard.loop_similarity``, default 0.95).
    """
    if a.name != b.name or a.result_fp != b.result_fp:
        return False
    if a.arguments.get("path") != b.arguments.get("path"):
        return False
    ta, tb = a.text(), b.text()
    if ta == tb:
        return True
    return path_tokens(ta) == path_tokens(tb) and _similar(ta, tb, similarity)


def sequence_similarity(
    current: Sequence[Action], other: Sequence[Action], similarity: float
) -> float:
    """Similarity (0–1) of two rounds' action sequences: every call is replaced by the id of
    the first earlier-seen call it is near-identical to (:func:`same_call`), and the two id
    lists are compared with :class:`difflib.SequenceMatcher` (``2 * matches / total``)."""
    seen: list[Action] = []

    def ident(action: Action) -> int:
        for i, known in enumerate(seen):
            if same_call(action, known, similarity):
                return i
        seen.append(action)
        return len(seen) - 1

    a = [ident(x) for x in current]
    b = [ident(x) for x in other]
    if not a and not b:
        return 1.0
    return SequenceMatcher(None, a, b, autojunk=False).ratio()


# in-round repeats -------------------------------------------------------------------------

MAX_CYCLE = 3
"""Longest cycle of calls the in-round repeat tracker recognises (A A A…, A B A B…,
A B C A B C…)."""


class RepeatTracker:
    """Counts near-identical calls with the same result in a row inside one round (SPEC §8).

    A "call" may also be a short cycle of up to :data:`MAX_CYCLE` different calls (``A B A B
    …``): the cycle then counts once per repetition. Calls compare with :func:`same_call`.

    Args:
        repeat_limit: repetitions in a row that make a loop event (``guard.repeat_limit``,
            default 5), again at every further multiple (10, 15, …).
        similarity: how similar two calls' canonical texts must be to count as the same call
            (``guard.loop_similarity``, 0–1).
        max_cycle: the longest cycle recognised (1 = only the same call in a row).
    """

    def __init__(self, repeat_limit: int, similarity: float, max_cycle: int = MAX_CYCLE) -> None:
        self.repeat_limit = repeat_limit
        self.similarity = similarity
        self.max_cycle = max_cycle
        self._recent: list[Action] = []
        self._runs = dict.fromkeys(range(1, max_cycle + 1), 0)
        self.count = 0
        """Repetitions in a row of the current call or cycle (1 for a new call)."""
        self.period = 1
        """Length of the cycle being repeated (1: one call)."""

    def observe(self, action: Action) -> str | None:
        """Record a call; when the call (or cycle) has been made a multiple of
        ``repeat_limit`` times in a row with the same results, return the nudge the model
        sees with the tool result, else None."""
        recent = self._recent
        self.count, self.period = 1, 1
        for p in self._runs:
            repeats = len(recent) >= p and same_call(action, recent[-p], self.similarity)
            if repeats and p > 1:  # a cycle of p different calls, not a shorter one
                cycle = [*recent[-p + 1 :], action]
                repeats = all(
                    not same_call(x, y, self.similarity)
                    for i, x in enumerate(cycle)
                    for y in cycle[i + 1 :]
                )
            self._runs[p] = self._runs[p] + 1 if repeats else 0
            if self._runs[p]:
                count = self._runs[p] // p + 1
                if count > self.count or (count == self.count and p < self.period):
                    self.count, self.period = count, p
        recent.append(action)
        del recent[: -self.max_cycle]
        run = self._runs[self.period]
        if run and run % self.period == 0 and self.count % self.repeat_limit == 0:
            return self._nudge()
        return None

    def finding(self) -> str:
        """The loop event's detail for the latest repetition, e.g. ``shell called 5 times in
        a row with the same result``."""
        last = self._recent[-1].name if self._recent else "a tool"
        if self.period == 1:
            return f"{last} called {self.count} times in a row with the same result"
        names = ", ".join(a.name for a in self._recent[-self.period :])
        return (
            f"the same {self.period} calls ({names}) repeated {self.count} times in a row "
            "with the same results"
        )

    def _nudge(self) -> str:
        what, results = "this call", "the same result"
        if self.period > 1:
            what, results = f"this sequence of {self.period} calls", "the same results"
        return (
            f"You have made {what} {self.count} times in a row with {results}. "
            "Repeating it will not change the outcome: try a different approach, or report "
            "the state with update_goal."
        )


# detectors --------------------------------------------------------------------------------


@dataclass(frozen=True)
class DetectorInput:
    """What a detector sees: the current round, earlier rounds (oldest first), the goal text
    with its supplements, the settings, and the failure streak before this round."""

    round: RoundRecord
    previous: tuple[RoundRecord, ...]
    goal_text: str
    settings: GuardSettings
    failure_streak_before: int


Detector = Callable[[DetectorInput], list[GuardEvent]]


def detect_loop(d: DetectorInput) -> list[GuardEvent]:
    """``loop`` events of a round (SPEC §8).

    * Inside the round: one event per finding of :class:`RepeatTracker` (recorded live by the
      loop in ``round.repeat_events``).
    * Across rounds: one event when the round has real tool calls and its action sequence has
      :func:`sequence_similarity` ≥ ``loop_similarity`` (default 0.95) with one of the previous
      ``loop_window`` (default 4) rounds (those without real tool calls are not compared); the
      most recent such round is named. Calls compare with :func:`same_call`, results included, so a poll whose output
      changes never matches.
    """
    events = [GuardEvent("loop", d.round.n, text) for text in d.round.repeat_events]
    if not d.round.actions:
        return events
    current = d.round.actions
    window = [r for r in d.previous[-d.settings.loop_window :] if r.actions]
    for earlier in reversed(window):
        ratio = sequence_similarity(current, earlier.actions, d.settings.loop_similarity)
        if ratio >= d.settings.loop_similarity:
            events.append(
                GuardEvent(
                    "loop",
                    d.round.n,
                    f"round {d.round.n} repeated round {earlier.n}: the same "
                    f"{len(current)} tool call(s) with the same results "
                    f"(similarity {ratio:.2f})",
                )
            )
            break
    return events


_WORD = re.compile(r"[a-z][a-z0-9]+")
_STOP = frozenset(
    """the and for with that this from into are was were will all any can not but its has have
    had make made sure add added adding use used using new should must also when then than
    them they there their which what who how why where file files code goal tests test run
    runs ran running pass passes passed passing please fix fixed fixes fixing work worked
    working done each every one two three some more most other only just like need needs
    needed get got set now next again still yet retry retrying try tried trying attempt
    attempts fail fails failed failing failure failures see seen look looked looking check
    checked checking let going first last before after about did does doing don nothing
    something anything thing things same may might could would shall want way ways part very
    much many few here our out over under able unable cannot because since while until
    without within these those such own off yes okay fine good well think thought know found
    find looks seems seem start started""".split()
)
_NEUTRAL = frozenset(
    """src lib tests test spec specs docs doc readme md txt py js ts json yaml yml toml cfg ini
    git grep cat sed awk head tail echo find python python3 pytest pip npm node make cargo go
    bash sh true false none null print import def class return self exit code stdout stderr
    tmp dev main init setup config license changelog log logs out build dist bin usr home
    relay progress handoff round rounds automatic note commands command files changed error
    errors last ran read write edit shell status diff show stat oneline verbose quiet cacheprovider
    pycache cpython pyc gitignore venv unittest xdist traceback assert assertion line lines
    content old new path offset limit""".split()
)
"""Words every round of any goal may use (tools, languages, generic repository names); they
say nothing about the subject of the work."""


_CAMEL = re.compile(r"([a-z0-9])([A-Z])")


def _words(text: str) -> set[str]:
    """Lower-case words of ``text`` (``_`` and camelCase split words), three letters or more,
    stop words left out."""
    text = _CAMEL.sub(r"\1 \2", text.replace("_", " ")).lower()
    return {w for w in _WORD.findall(text) if len(w) >= 3 and w not in _STOP}


def _meaningful(text: str) -> set[str]:
    return _words(text) - _NEUTRAL


def _base(word: str) -> str:
    """``word`` without a plural ending: ``queries`` → ``query``, ``classes`` → ``class``,
    ``pools`` → ``pool``."""
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word


def words_match(a: str, b: str) -> bool:
    """Whether two words are taken for the same word by the lexical drift scorer: after
    :func:`_base`, they share their first five letters, or the shorter one (four letters or
    more) starts the longer: ``pool`` meets ``pooling``, ``query`` meets ``queries``,
    ``divide`` does not meet ``division``."""
    a, b = _base(a), _base(b)
    if a[:5] == b[:5] and min(len(a), len(b)) >= 3:
        return True
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    return len(short) >= 4 and long_.startswith(short)


def lexical_relevance(goal_text: str, activity: str) -> tuple[int, int]:
    """``(goal words found in the activity, meaningful activity words)``.

    Words are runs of letters and digits of three letters or more, lower case (``_`` and
    camelCase split words), stop words left out; an activity word is a goal word when it
    :func:`words_match` a word of the goal (goal text and supplements). Generic developer
    words (tool and language names, ``src``, ``tests`` …) count as goal words when the goal
    uses them, but are not counted as meaningful activity words.
    """
    goal = _words(goal_text)
    words = _words(activity)
    found = sum(1 for w in words if any(words_match(w, g) for g in goal))
    return found, len(words - _NEUTRAL)


_FILE_TOOLS = frozenset({"read_file", "write_file", "edit_file"})
_LONG_ARGS = frozenset({"content", "old", "new"})

DRIFT_MIN_WORDS = 5
"""A round's activity needs at least this many meaningful words (see
:func:`lexical_relevance`) before any drift scorer judges it: ``pytest -q`` alone or ``git
status`` says nothing about the subject of the work."""


def round_subjects(r: RoundRecord) -> list[str]:
    """What a round worked on: the paths of its file tool calls, the file-naming words of its
    shell commands (:func:`path_tokens`) and the files it changed, in that order."""
    subjects: list[str] = []
    for a in r.actions:
        if a.name in _FILE_TOOLS and isinstance(a.arguments.get("path"), str):
            subjects.append(a.arguments["path"])
        elif a.name == "shell" and isinstance(a.arguments.get("command"), str):
            subjects += path_tokens(strip_shell_comments(a.arguments["command"]))
    subjects += r.files_changed
    return subjects


def goal_working_set(goal_text: str, rounds: Sequence[RoundRecord]) -> set[str]:
    """The subjects (:func:`round_subjects`) of the on-topic rounds among ``rounds`` (oldest
    first): a round is on-topic when its activity has a goal word (:func:`lexical_relevance`)
    or it worked on a subject of an earlier on-topic round. Later rounds that work on these
    files are on-topic too, even when their commands and edits use no word of the goal."""
    working: set[str] = set()
    for r in rounds:
        if not r.actions:
            continue
        subjects = set(round_subjects(r))
        if subjects & working or lexical_relevance(goal_text, round_activity(r))[0]:
            working |= subjects
    return working


def round_activity(r: RoundRecord) -> str:
    """The text the drift scorers judge: the round's handoff note, then each real tool call's
    name with its short arguments (commands, paths), then the changed paths, then the long
    arguments (file contents, ``old``/``new`` of edits; each cut to 2000 characters). Tool
    results are not part of it."""
    head = [r.handoff]
    tail = []
    for a in r.actions:
        head.append(a.name)
        for key, value in a.arguments.items():
            text = value if isinstance(value, str) else json.dumps(value)
            (tail if key in _LONG_ARGS else head).append(text[:2000])
    return "\n".join([*head, *r.files_changed, *tail])


def detect_drift(d: DetectorInput) -> list[GuardEvent]:
    """A ``drift`` event for a round with real tool calls whose activity
    (:func:`round_activity`) is unrelated to the goal and its supplements (SPEC §8).

    Judged only when the round worked on something (a meaningful word among its
    :func:`round_subjects`: paths, not just ``pytest -q``), on nothing of the goal's working
    set of the previous ``loop_window`` rounds (:func:`goal_working_set`), and its activity
    has at least :data:`DRIFT_MIN_WORDS` meaningful words. Then, by ``guard.drift``:

    * ``lexical`` (default): not one meaningful activity word shares its first five letters
      with a goal word (:func:`lexical_relevance`);
    * ``embedding``: the cosine similarity of the activity and goal embeddings
      (all-MiniLM-L6-v2) is below :data:`relay.guard_embedding.DRIFT_THRESHOLD`;
    * ``off``: never.
    """
    if d.settings.drift == "off" or not d.round.actions:
        return []
    subjects = round_subjects(d.round)
    if not _meaningful(" ".join(subjects)):
        return []
    window = d.previous[-d.settings.loop_window :]
    if set(subjects) & goal_working_set(d.goal_text, window):
        return []
    activity = round_activity(d.round)
    found, total = lexical_relevance(d.goal_text, activity)
    if total < DRIFT_MIN_WORDS:
        return []
    if d.settings.drift == "embedding":
        from relay import guard_embedding  # the optional extra, loaded only when configured

        score = guard_embedding.relevance(d.goal_text, activity)
        if score >= guard_embedding.DRIFT_THRESHOLD:
            return []
        why = (
            f"embedding similarity {score:.2f} of its commands, paths and handoff to the goal, "
            f"below {guard_embedding.DRIFT_THRESHOLD}"
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
                    f"{_normalise_args(a.arguments)[:80]})",
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


# the risk engine --------------------------------------------------------------------------


@dataclass(frozen=True)
class GuardDecision:
    """The guard's verdict after a round: the new events, the new score, and a diagnosis when
    the score reached the threshold (the goal is then ``terminated``)."""

    events: tuple[GuardEvent, ...]
    score: float
    failure_streak: int
    diagnosis: str | None = None


def evaluate_round(
    current: RoundRecord,
    previous: Sequence[RoundRecord],
    *,
    goal_text: str,
    settings: GuardSettings,
    score: float,
    failure_streak: int,
    history: Callable[[], Sequence[GuardEvent]] = tuple,
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

    Returns:
        The decision. The score adds the weight of every new event (capped at 100); a round
        that changed files and brought no event multiplies it by ``decay``.
    """
    streak = failure_streak_after(failure_streak, current.actions)
    if not settings.enabled:
        return GuardDecision((), score, streak)
    d = DetectorInput(current, tuple(previous), goal_text, settings, failure_streak)
    events: list[GuardEvent] = []
    for name in settings.detectors:
        events += DETECTORS[name](d)
    if events:
        score = min(100.0, score + sum(settings.weights.get(e.kind, 0) for e in events))
    elif current.files_changed and current.actions:
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
