"""How alike two calls, two rounds or two texts are (:mod:`relay.guard.similarity`, SPEC §8):
near-identical calls, action sequences, lexical relevance."""

from __future__ import annotations

from difflib import SequenceMatcher

import pytest
from guard_support import (
    act,
    sh,
)

from relay.guard import (
    CHAR_COMPARE_LIMIT,
    Action,
    lexical_relevance,
    same_call,
    sequence_similarity,
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
