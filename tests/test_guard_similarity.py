"""How alike two calls, two rounds or two texts are (:mod:`relay.guard.similarity`, SPEC §8):
near-identical calls, action sequences, lexical relevance."""

from __future__ import annotations

from difflib import SequenceMatcher

import pytest
from guard_support import (
    act,
    sh,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from relay.guard import (
    CHAR_COMPARE_LIMIT,
    Action,
    lexical_relevance,
    same_call,
    sequence_similarity,
    similarities,
    words_match,
)

# near-identical calls -------------------------------------------------------------------------


def test_calls_differing_only_by_a_comment_label_are_the_same_call() -> None:
    a = sh("python -m pytest -q -k test_div  # attempt 3", "1 failed in 0.1s", failed=True)
    b = sh("python -m pytest -q -k test_div  # attempt 4", "1 failed in 0.2s", failed=True)
    assert same_call(a, b, 0.95)


def test_calls_on_different_files_or_with_different_results_are_not_the_same() -> None:
    a = sh("sed -i 's/get_conn/get_connection/' pkg/m01.py")
    b = sh("sed -i 's/get_conn/get_connection/' pkg/m02.py")
    assert not same_call(a, b, 0.95)  # one character apart, but another file
    assert not same_call(sh("ls", "a"), sh("ls", "b"), 0.95)
    assert not same_call(act("read_file", path="a"), act("read_file", path="b"), 0.5)
    assert not same_call(act("read_file", path="a"), act("write_file", path="a"), 0.5)


def test_near_identity_threshold_is_the_text_similarity() -> None:
    a = sh("python tools/report.py --since yesterday --format csv --limit 5000")
    b = sh("python tools/report.py --since yesterday --format csv --limit 6000")
    ratio = SequenceMatcher(None, a.text(), b.text(), autojunk=False).ratio()
    assert 0.9 < ratio < 1
    assert same_call(a, b, ratio)  # exactly at the threshold
    assert not same_call(a, b, ratio + 0.001)  # just below it


def test_long_texts_are_compared_line_by_line() -> None:
    lines = [f"line {i}: " + "x" * 40 for i in range(200)]

    def write(changed: int) -> Action:
        content = "\n".join([*lines[:100], *["changed"] * changed, *lines[100 + changed :]])
        return act("write_file", "wrote 9000 bytes to big.txt", path="big.txt", content=content)

    assert len(write(0).text()) > CHAR_COMPARE_LIMIT
    assert same_call(write(0), write(1), 0.95)  # 201 of 202 lines equal
    assert not same_call(write(0), write(20), 0.95)  # 182 of 202


def test_sequence_similarity_uses_near_identity() -> None:
    first = [sh("pytest -q  # 1", "F"), act("read_file", "x", path="a.py")]
    second = [sh("pytest -q  # 2", "F"), act("read_file", "x", path="a.py")]
    assert sequence_similarity(first, second, 0.95) == 1.0
    assert sequence_similarity(first, second[:1], 0.95) == pytest.approx(2 / 3)


# lexical relevance ----------------------------------------------------------------------------


def test_words_match() -> None:
    assert words_match("query", "queries")
    assert words_match("pool", "pooling")
    assert words_match("calc", "calculator")
    assert not words_match("divide", "division")
    assert not words_match("landing", "division")
    assert lexical_relevance("Use getConnection everywhere", "get_connection") == (1, 1)


# the round comparison's shortcut is exact ------------------------------------------------------


def _sequence_similarity_by_every_pair(
    current: list[Action], other: list[Action], similarity: float
) -> float:
    """The rule as written in SPEC §8, without shortcuts: every call of both rounds gets the id
    of the first earlier-seen call it is near-identical to."""
    seen: list[Action] = []

    def ident(action: Action) -> int:
        for i, known in enumerate(seen):
            if same_call(action, known, similarity):
                return i
        seen.append(action)
        return len(seen) - 1

    a = [ident(x) for x in current]
    b = [ident(x) for x in other]
    return 1.0 if not a and not b else SequenceMatcher(None, a, b, autojunk=False).ratio()


_CALLS = [
    sh("pytest -q", "1 failed", failed=True),
    sh("pytest -q  # again", "1 failed", failed=True),
    sh("pytest -q -x", "1 failed", failed=True),
    sh("ls src", "a.py"),
    act("read_file", "x = 1", path="src/a.py"),
    act("read_file", "x = 1", path="src/b.py"),
    act("write_file", "wrote 6 bytes", path="src/a.py", content="x = 2\n"),
    act("write_file", "wrote 6 bytes", path="src/a.py", content="x = 3\n"),
    act("write_file", "refused", path=["odd"], content="x"),
    act("write_file", "refused", path=["odd"], content="y"),
]


@given(
    st.lists(st.integers(0, len(_CALLS) - 1), max_size=12),
    st.lists(st.lists(st.integers(0, len(_CALLS) - 1), max_size=12), max_size=4),
    st.sampled_from([0.5, 0.8, 0.95, 1.0]),
)
@settings(max_examples=300, deadline=None)
def test_round_similarities_are_the_rule_computed_over_every_pair(
    current: list[int], others: list[list[int]], similarity: float
) -> None:
    """Comparing a call of an earlier round only with the calls of the current round (and of
    the same tool, result and path) gives exactly the ratio of the rule over every pair."""
    now = [_CALLS[i] for i in current]
    earlier = [[_CALLS[i] for i in other] for other in others]
    want = [_sequence_similarity_by_every_pair(now, other, similarity) for other in earlier]
    assert list(similarities(now, earlier, similarity)) == want
    for other, ratio in zip(earlier, want, strict=True):
        assert sequence_similarity(now, other, similarity) == ratio
    # asked only whether each reaches ``similarity``: the same answer, the ratio itself when
    # it does, and when it does not, a value between it and the threshold
    bounded = list(similarities(now, earlier, similarity, reaching=similarity))
    for got, exact in zip(bounded, want, strict=True):
        assert got == exact if exact >= similarity else exact <= got < similarity
