"""How alike two calls, two rounds or two texts are (SPEC §8).

Pure, no I/O. Call identity: :func:`same_call` (near-identical calls with the same result) and
:func:`sequence_similarity` (two rounds' action sequences), used by the ``loop`` detector and
:class:`relay.guard.repeats.RepeatTracker`. Lexical relevance: :func:`lexical_relevance` and
:func:`words_match`, the ``lexical`` drift scorer (the ``embedding`` one is
:mod:`relay.guard.embedding`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Hashable, Iterable, Iterator, Sequence
from difflib import SequenceMatcher

from relay.guard.history import Action

CHAR_COMPARE_LIMIT = 1000
"""Texts longer than this (characters) are compared line by line, not character by character
(a character comparison of two 20 kB file contents takes seconds)."""


@functools.lru_cache(maxsize=512)
def _similar(a: str, b: str, threshold: float) -> bool:
    """Whether ``difflib``'s ratio of ``a`` and ``b`` is at least ``threshold``: over their
    characters, or over their lines when one is longer than :data:`CHAR_COMPARE_LIMIT`.
    Remembered for the last pairs: the guard compares each round's calls with those of the
    rounds before it, so most pairs come back round after round."""
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


def same_call(a: Action, b: Action, similarity: float) -> bool:
    """Whether two calls are near-identical calls with the same result (SPEC §8).

    Rule: the same tool, the same result fingerprint, the same ``path`` argument, the same
    file-naming words (:func:`~relay.guard.history.path_tokens`) in the same order, and
    canonical texts (:func:`~relay.guard.history.call_text`) whose
    :class:`difflib.SequenceMatcher` ratio is at least ``similarity`` (0–1;
    ``guard.loop_similarity``, default 0.95).
    """
    if a.name != b.name or a.result_fp != b.result_fp:
        return False
    if a.arguments.get("path") != b.arguments.get("path"):
        return False
    ta, tb = a.text(), b.text()
    if ta == tb:
        return True
    return a.tokens() == b.tokens() and _similar(ta, tb, similarity)


def _call_key(action: Action) -> Hashable:
    """What :func:`same_call` requires to be equal: the tool, the result's fingerprint and
    the ``path`` argument (one that cannot be hashed shares a key with every such path)."""
    path = action.arguments.get("path")
    try:
        hash(path)
    except TypeError:
        path = _UNHASHABLE
    return (action.name, action.result_fp, path)


_UNHASHABLE = object()


def sequence_similarity(
    current: Sequence[Action], other: Sequence[Action], similarity: float
) -> float:
    """Similarity (0–1) of two rounds' action sequences: every call is replaced by the id of
    the first earlier-seen call it is near-identical to (:func:`same_call`), and the two id
    lists are compared with :class:`difflib.SequenceMatcher` (``2 * matches / total``)."""
    return next(similarities(current, [other], similarity))


def similarities(
    current: Sequence[Action],
    others: Iterable[Sequence[Action]],
    similarity: float,
    *,
    reaching: float | None = None,
) -> Iterator[float]:
    """:func:`sequence_similarity` of ``current`` with each of ``others`` in turn (lazily),
    the calls of ``current`` identified once for all of them.

    Only which calls of the other round get an id of ``current`` matters to the ratio (the
    matcher pairs equal ids of the two lists), so a call of the other round is compared with
    the distinct calls of ``current`` only, and one that matches none gets an id of its own.

    ``reaching`` (0–1): only whether a ratio reaches it matters to the caller (the ``loop``
    detector's threshold). A round whose calls so far already leave too few to match is then
    not compared further: its ratio is given as an upper bound below ``reaching``
    (``2 × calls that can still match / all calls``), not exactly.
    """
    seen: list[Action] = []
    by_key: dict[Hashable, list[int]] = {}  # only calls of one key can be the same call

    def first(action: Action) -> int | None:
        for i in by_key.get(_call_key(action), ()):
            if same_call(action, seen[i], similarity):
                return i
        return None

    a = []
    for action in current:
        found = first(action)
        if found is None:
            seen.append(action)
            by_key.setdefault(_call_key(action), []).append(len(seen) - 1)
            found = len(seen) - 1
        a.append(found)
    for other in others:
        total = len(a) + len(other)
        b: list[int] = []
        bound, unmatched = 1.0, 0
        for j, x in enumerate(other):
            b.append(-1 - j if (i := first(x)) is None else i)
            if i is None:  # a matching pair of ids needs a call of each round
                unmatched += 1
                bound = 2 * min(len(a), len(other) - unmatched) / total
                if reaching is not None and bound < reaching:
                    break
        if reaching is not None and bound < reaching:
            yield bound
            continue
        yield 1.0 if not a and not b else SequenceMatcher(None, a, b, autojunk=False).ratio()


# lexical relevance ------------------------------------------------------------------------

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


def meaningful_words(text: str) -> set[str]:
    """The words of ``text`` (see :func:`lexical_relevance`) that say something about the
    subject of the work: generic developer words left out."""
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


def _stem(word: str) -> str:
    """``word`` after :func:`_base`, without an ``-ing`` or ``-ed`` ending that leaves three
    letters or more, and then without a doubled last consonant (``l``, ``s``, ``z`` kept):
    ``padded`` → ``pad``, ``aligned`` → ``align``, ``running`` → ``run``, ``called`` →
    ``call``. Goals are written in the user's words (``padded``), code in its own (``_pad``)."""
    word = _base(word)
    for ending in ("ing", "ed"):
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            stem = word[: -len(ending)]
            if len(stem) >= 4 and stem[-1] == stem[-2] and stem[-1] not in "lsz":
                stem = stem[:-1]
            return stem
    return word


COMPOUND_MIN = 5
"""A word of at least this many letters that ends a word at least three letters longer is a
part of a compound identifier (``numalign``, ``padright``): code runs words together where
``_`` and camelCase do not split them."""


def _same(a: str, b: str) -> bool:
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    if a[:5] == b[:5] and len(short) >= 3:
        return True
    if len(short) >= 4 and long_.startswith(short):
        return True
    return len(short) >= COMPOUND_MIN and len(long_) - len(short) >= 3 and long_.endswith(short)


def words_match(a: str, b: str) -> bool:
    """Whether two words are taken for the same word by the lexical drift scorer (SPEC §8).

    Compared after :func:`_base` (plural endings) and again after :func:`_stem` (``-ing``,
    ``-ed`` too), they match when they share their first five letters, when the shorter one
    (four letters or more) starts the longer, or when the shorter one (:data:`COMPOUND_MIN`
    letters or more) ends a word at least three letters longer: ``pool`` meets ``pooling``,
    ``query`` meets ``queries``, ``padded`` meets ``pad``, ``aligned`` meets ``numalign``,
    ``right`` meets ``padright``; ``divide`` does not meet ``division``, nor ``right``
    ``bright``."""
    return _same(_base(a), _base(b)) or _same(_stem(a), _stem(b))


@functools.lru_cache(maxsize=64)
def lexical_relevance(goal_text: str, activity: str) -> tuple[int, int]:
    """``(goal words found in the activity, meaningful activity words)``.

    Words are runs of letters and digits of three letters or more, lower case (``_`` and
    camelCase split words), stop words left out; an activity word is a goal word when it
    :func:`words_match` a word of the goal (goal text and supplements). Generic developer
    words (tool and language names, ``src``, ``tests`` …) count as goal words when the goal
    uses them, but are not counted as meaningful activity words.
    """
    goal = _forms(goal_text)
    words = _words(activity)
    found = 0
    for w in words:  # words_match, each word's forms taken once
        base, stem = _base(w), _stem(w)
        found += any(_same(base, gb) or _same(stem, gs) for gb, gs in goal)
    return found, len(words - _NEUTRAL)


@functools.lru_cache(maxsize=8)
def _forms(goal_text: str) -> tuple[tuple[str, str], ...]:
    """``(_base(w), _stem(w))`` of each word of the goal (:func:`_words`), for
    :func:`lexical_relevance`; remembered, as the goal rarely changes."""
    return tuple((_base(w), _stem(w)) for w in _words(goal_text))
