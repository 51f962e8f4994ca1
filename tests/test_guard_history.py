"""The records the guard scores and their canonical forms (:mod:`relay.guard.history`, SPEC §8):
result fingerprints, shell comments, file-naming words, canonical call texts."""

from __future__ import annotations

from relay.guard import (
    call_text,
    path_tokens,
    result_fingerprint,
    strip_shell_comments,
)

# fingerprints ---------------------------------------------------------------------------------


def test_fingerprint_ignores_durations_clock_times_addresses_and_temp_paths() -> None:
    a = "1 failed in 0.03s at 12:01:02 (obj 0x7f3a2b1c9d) /tmp/tmpab12/x.py\n"
    b = "1 failed in 1.27s at 23:59:59 (obj 0x7f00000001) /tmp/pytest-9/x.py\n"
    assert result_fingerprint(a) == result_fingerprint(b)


def test_fingerprint_changes_with_a_progress_counter_or_another_error() -> None:
    assert result_fingerprint("running: 3/14 batches") != result_fingerprint(
        "running: 4/14 batches"
    )
    assert result_fingerprint("NameError: x") != result_fingerprint("TypeError: x")


def test_fingerprint_ignores_the_cut_marker_and_the_partial_lines_around_it() -> None:
    a = "head\npart\n[... 525 bytes cut; full output in /run/1/out-1.txt ...]\nial\nFAILED a\n"
    b = "head\npar\n[... 527 bytes cut; full output in /run/1/out-7.txt ...]\ntial\nFAILED a\n"
    c = "head\npar\n[... 527 bytes cut; full output in /run/1/out-7.txt ...]\ntial\nFAILED b\n"
    assert result_fingerprint(a) == result_fingerprint(b)
    assert result_fingerprint(b) != result_fingerprint(c)


# the canonical text of a call -----------------------------------------------------------------


def test_shell_comments_are_stripped_outside_quotes_only() -> None:
    assert strip_shell_comments("pytest -q  # attempt 3").strip() == "pytest -q"
    assert strip_shell_comments("# note\nls") == "\nls"
    assert strip_shell_comments("echo '#1' \"a # b\" x#y") == "echo '#1' \"a # b\" x#y"
    assert strip_shell_comments("echo $# ${#x} \\# z") == "echo $# ${#x} \\# z"


def test_path_tokens_are_the_words_that_name_files() -> None:
    assert path_tokens("sed -i 's/a/b/' src/mod1.py && cat calc.py -n 3 0.5") == (
        "s/a/b/",
        "src/mod1.py",
        "calc.py",
    )


def test_call_text_is_canonical() -> None:
    assert call_text("shell", {"command": "ls   -la  # x"}) == "shell\ncommand=ls -la"
    assert call_text("write_file", {"path": "a", "content": "x  y\n\n  z\n"}) == (
        "write_file\ncontent=x y\nz\npath=a"
    )
    assert call_text("read_file", {"path": "a.py", "limit": 5}) == ("read_file\nlimit=5\npath=a.py")
