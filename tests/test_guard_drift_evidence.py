"""The evidence of relevance a fixing round carries, for the ``drift`` detector (SPEC §8; issue
13, item 10): a goal in the user's words ("right-aligned columns are padded on the wrong
side") and a fix in the code's words (``_pad``, ``_padleft``, ``numalign``), and the files the
goal's deliverables name."""

from __future__ import annotations

from guard_support import DEFAULT, GOAL, act, marketing_round, rnd, sh

from relay.guard import (
    DetectorInput,
    GuardRound,
    deliverable_paths,
    detect_drift,
    goal_working_set,
    lexical_relevance,
    words_match,
)

PAD_GOAL = (
    "Right-aligned columns are padded on the wrong side: fix it so that numbers line up on "
    "the right"
)
DELIVERABLES = [{"command": "python -m pytest -q test/test_output.py"}]


def drift(
    current: GuardRound,
    previous: tuple[GuardRound, ...] = (),
    *,
    goal: str = PAD_GOAL,
    goal_paths: tuple[str, ...] = (),
) -> list[str]:
    d = DetectorInput(current, previous, goal, DEFAULT, 0, goal_paths=goal_paths)
    return [e.detail for e in detect_drift(d)]


def investigation() -> GuardRound:
    """What an agent does first: run the failing test, look for the pad helpers, read them.
    No handoff note (the automatic one is written after the guard judged the round)."""
    return rnd(
        1,
        sh("python -m pytest -q -x test/test_output.py 2>&1 | tail -30", "1 failed"),
        sh("grep -n 'def _pad' tabulate/__init__.py", "1067:def _padleft(width, s):"),
        act("read_file", "def _padleft", path="tabulate/__init__.py", offset=1060, limit=40),
    )


def fix(n: int = 2, test: str = "python -m pytest -q test/test_output.py") -> GuardRound:
    """The round that fixes ``_padleft``: one edit (made unique by the next function's line),
    the tests again, no handoff note."""
    return rnd(
        n,
        act(
            "edit_file",
            "replaced 1 occurrence",
            path="tabulate/__init__.py",
            old='    fmt = "{0:<%ds}" % width\n    return fmt.format(s)\n\n\ndef _padright',
            new='    fmt = "{0:>%ds}" % width\n    return fmt.format(s)\n\n\ndef _padright',
        ),
        sh(test, "178 passed"),
        files_changed=("tabulate/__init__.py",),
    )


def test_the_rounds_that_find_and_fix_padleft_are_not_drift() -> None:
    # before the fix: round 1 had 3 meaningful words (no verdict), round 2 was drift
    # ("6 distinct words in its commands, paths and handoff, none from the goal")
    assert drift(investigation()) == []
    assert drift(fix(), (investigation(),)) == []
    assert "tabulate/__init__.py" in goal_working_set(PAD_GOAL, [investigation()])


def test_a_grep_for_the_stem_of_a_goal_word_is_on_topic() -> None:
    # "padded" → "pad", "aligned" → "align", "padding" → "pad"
    assert words_match("pad", "padded")
    assert words_match("padding", "padded")
    assert words_match("align", "aligned")
    assert words_match("running", "run")
    assert words_match("called", "call")
    assert lexical_relevance(PAD_GOAL, "grep -n 'def _pad' tabulate/__init__.py")[0] == 1


def test_a_goal_word_that_ends_a_compound_identifier_matches() -> None:
    # code runs words together: numalign, padright, colwidth
    assert words_match("numalign", "aligned")
    assert words_match("padright", "right")
    assert words_match("right", "padright")
    # but not a longer word that merely ends the same way, nor short goal words
    assert not words_match("bright", "right")
    assert not words_match("pipeline", "line")
    assert not words_match("divide", "division")
    assert lexical_relevance(PAD_GOAL, "numalign='decimal'")[0] == 1


def test_deliverable_paths_are_the_paths_the_deliverables_name() -> None:
    deliverables = [
        {"command": "python -m pytest -q test/test_output.py", "timeout_s": 600},
        {"file": "src/pool.py"},
        {"file": "docs/pooling.md", "contains": "pool_size"},
        {"changed": "pool/"},
        {"changed": "src/**"},  # a pattern: not a path
        # generic paths name no subject of the work
        {"command": ".venv/bin/python -m pytest -q"},
        {"file": "README.md", "contains": "pool_size"},
        {"command": "pytest -q"},
    ]
    assert deliverable_paths(deliverables) == (
        "test/test_output.py",
        "src/pool.py",
        "docs/pooling.md",
        "pool",
    )
    assert deliverable_paths([]) == ()


def test_a_round_on_the_files_of_the_deliverables_is_not_drift() -> None:
    paths = deliverable_paths(DELIVERABLES)
    # a round in the code's words only, no goal word: it runs the deliverable's tests
    terse = rnd(
        2,
        act("edit_file", "replaced", path="fmt/cells.py", old="ljust(width)", new="rjust(width)"),
        sh("python -m pytest -q test/test_output.py::test_float_format", "1 passed"),
        files_changed=("fmt/cells.py",),
    )
    assert drift(terse, goal="Make the report nicer to read")  # without the deliverables
    assert drift(terse, goal="Make the report nicer to read", goal_paths=paths) == []
    # ./ and pytest node ids name the same file
    dotted = rnd(
        1, sh("pytest ./test/test_output.py -k widths"), act("read_file", path="fmt/widths.py")
    )
    goal = "Make the report nicer to read"
    assert goal_working_set(goal, [dotted], paths) >= {"test/test_output.py", "fmt/widths.py"}
    # a later round that works only on what that on-topic round touched is on-topic too
    later = rnd(
        2,
        act(
            "write_file",
            "wrote",
            path="fmt/widths.py",
            content="def rjust_cells(cells, widths): return list(zip(cells, widths))",
        ),
        files_changed=("fmt/widths.py",),
    )
    assert drift(later, goal=goal, goal_paths=paths)
    assert drift(later, (dotted,), goal=goal, goal_paths=paths) == []


def test_drift_away_from_the_deliverables_is_still_drift() -> None:
    paths = deliverable_paths(
        [{"command": "python -m pytest -q test_calc.py"}, {"file": "calc.py"}]
    )
    assert drift(marketing_round(), goal=GOAL, goal_paths=paths)
    assert drift(marketing_round(2), (marketing_round(1),), goal=GOAL, goal_paths=paths)
