"""Session mode (SPEC §3): one context for the goal, the history rules, observation masking."""

from __future__ import annotations

import hashlib
import json
import sys
import types
from pathlib import Path

import pytest
from conftest import call, complete, read_transcript, respond

from relay.context import (
    DROPPED,
    EARLIER_LEFT_OUT,
    MASKED,
    SessionContext,
    chars_per_4,
    tokenizer_counter,
)
from relay.models.base import Message, ToolCall


def _exchange(ctx: SessionContext, n: int, output: str, text: str = "") -> None:
    """One response with a shell call and its result."""
    call_id = f"c{n}"
    ctx.append(
        Message("assistant", text, tool_calls=(ToolCall(call_id, "shell", {"command": f"cmd{n}"}),))
    )
    ctx.append(Message("tool", output, tool_call_id=call_id))


def _contents(messages: tuple[Message, ...]) -> list[str]:
    return [m.content for m in messages]


# --- history rules -----------------------------------------------------------------------------


def test_text_only_answers_and_older_round_messages_are_not_sent() -> None:
    ctx = SessionContext(max_tokens=1_000_000)
    ctx.start_round("ROUND-1 message")
    _exchange(ctx, 1, "output one")
    ctx.append(Message("assistant", "ANNOUNCED: I will now write the file."))
    ctx.start_round("ROUND-2 continuation")
    sent = ctx.visible()
    texts = _contents(sent)
    assert "ROUND-1 message" not in texts
    assert "ANNOUNCED: I will now write the file." not in texts
    assert "output one" in texts  # tool results stay
    assert texts[-1] == "ROUND-2 continuation"  # the latest round message is sent, last
    # The history still opens with a user message (the Messages API requires it).
    assert sent[0].role == "user" and sent[0].content == EARLIER_LEFT_OUT
    # Everything is kept in the full history, and the last word is available for the result.
    assert len(ctx.messages) == 5
    assert ctx.final_response == "ANNOUNCED: I will now write the file."


def test_first_round_is_sent_as_is() -> None:
    ctx = SessionContext(max_tokens=1_000_000)
    ctx.start_round("ROUND-1 message")
    _exchange(ctx, 1, "output one", text="Looking.")
    sent = ctx.visible()
    assert [m.role for m in sent] == ["user", "assistant", "tool"]
    assert sent[0].content == "ROUND-1 message"
    assert sent[1].content == "Looking."  # a response with a tool call keeps its text


def test_a_supplement_note_mid_round_is_kept() -> None:
    ctx = SessionContext(max_tokens=1_000_000)
    ctx.start_round("ROUND-1")
    _exchange(ctx, 1, "out")
    ctx.append(Message("user", "The user added to the goal: use tabs"))
    assert "The user added to the goal: use tabs" in _contents(ctx.visible())


# --- observation masking -----------------------------------------------------------------------


def test_oldest_tool_results_are_masked_first_and_never_the_latest() -> None:
    # 1000 tokens at margin 0.9 → 900 tokens to fill (characters / 4).
    ctx = SessionContext(max_tokens=1000, margin=0.9)
    ctx.start_round("R1")
    for n in range(1, 5):
        _exchange(ctx, n, f"RESULT-{n} " + "x" * 1200)  # ~300 tokens each
    sent = ctx.visible()
    texts = _contents(sent)
    masked = [t for t in texts if t.startswith("[tool result removed")]
    assert masked, texts
    assert texts.count(MASKED.format(chars=len("RESULT-1 " + "x" * 1200))) >= 1
    # the oldest went first; the latest response's result is intact
    assert not any(t.startswith("RESULT-1") for t in texts)
    assert any(t.startswith("RESULT-4") for t in texts)
    assert sum(chars_per_4(t) for t in texts) <= 900
    # once masked, stays masked (a stable prefix), even if the budget would allow it later
    ctx.max_tokens = 10_000_000
    assert not any(t.startswith("RESULT-1") for t in _contents(ctx.visible()))


def test_latest_results_are_not_masked_even_when_over_budget() -> None:
    ctx = SessionContext(max_tokens=100)
    ctx.start_round("R1")
    _exchange(ctx, 1, "LATEST " + "y" * 4000)
    texts = _contents(ctx.visible())
    assert any(t.startswith("LATEST") for t in texts)


def test_overhead_counts_toward_the_window() -> None:
    ctx = SessionContext(max_tokens=2000, margin=1.0)
    ctx.start_round("R1")
    _exchange(ctx, 1, "A" * 2000)  # 500 tokens
    _exchange(ctx, 2, "B" * 400)
    assert not any("removed" in t for t in _contents(ctx.visible(overhead_chars=0)))
    # a system prompt and tool schemas of 6400 characters (1600 tokens) leave 400 tokens
    assert any(t.startswith("[tool result removed") for t in _contents(ctx.visible(6400)))


def test_whole_exchanges_are_dropped_only_after_masking_is_not_enough() -> None:
    ctx = SessionContext(max_tokens=300, margin=1.0)
    ctx.start_round("R1 " + "r" * 200)
    for n in range(1, 4):
        ctx.append(
            Message(
                "assistant",
                "",
                tool_calls=(ToolCall(f"c{n}", "write_file", {"path": "f", "content": "z" * 600}),),
            )
        )
        ctx.append(Message("tool", f"wrote {n}", tool_call_id=f"c{n}"))
    ctx.start_round("R2 latest")
    _exchange(ctx, 9, "LATEST-RESULT")
    sent = ctx.visible()
    assert sent[0].content.startswith("[") and "left out to fit" in sent[0].content
    assert sent[0].content == DROPPED.format(count=len(ctx.dropped))
    texts = _contents(sent)
    assert "R2 latest" in texts and "LATEST-RESULT" in texts
    # a tool call is never sent without its result, nor a result without its call
    ids_called = {c.id for m in sent for c in m.tool_calls}
    ids_answered = {m.tool_call_id for m in sent if m.role == "tool"}
    assert ids_called == ids_answered
    assert "c1" not in ids_called  # the oldest exchange went first


# --- token estimates ---------------------------------------------------------------------------


def test_a_tokenizer_can_count_instead_of_characters() -> None:
    words = SessionContext(max_tokens=50, margin=1.0, count_tokens=lambda t: len(t.split()))
    words.start_round("R1")
    _exchange(words, 1, "one two three " * 14)  # 42 words, 196 characters
    _exchange(words, 2, "last")
    # about 48 tokens by words fit in 50; about 63 by characters / 4 do not
    assert not any("removed" in t for t in _contents(words.visible()))
    chars = SessionContext(max_tokens=50, margin=1.0)
    chars.start_round("R1")
    _exchange(chars, 1, "one two three " * 14)
    _exchange(chars, 2, "last")
    assert any("removed" in t for t in _contents(chars.visible()))


def test_tokenizer_is_used_only_when_it_works_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    assert tokenizer_counter() is None  # no local vocabulary: characters / 4
    fake = types.ModuleType("tiktoken")

    class _Encoding:
        def encode(self, text: str, disallowed_special: tuple[()] = ()) -> list[str]:
            return text.split()

    fake.get_encoding = lambda name: _Encoding()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tiktoken", fake)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    assert tokenizer_counter() is None  # the vocabulary is not in the cache: never downloaded
    blob = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    (tmp_path / hashlib.sha1(blob.encode()).hexdigest()).write_text("cached")
    counter = tokenizer_counter()
    assert counter is not None and counter("a b c") == 3
    assert SessionContext(max_tokens=10).count_tokens("a b c d") == 4


# --- end to end --------------------------------------------------------------------------------


def test_session_run_sends_history_without_announcements(
    make_repo, write_script, relay_run
) -> None:
    repo = make_repo(config={"deliverables": [{"file": "t.txt"}]})
    script = write_script(
        [
            respond(call("shell", command="echo MARKER-SHELL-88")),
            respond(text="ANNOUNCED-STEP-9: I will now write t.txt."),
            respond(call("write_file", path="t.txt", content="t\n")),
            complete("t.txt written"),
        ]
    )
    code, out, _ = relay_run(repo, script, "Create t.txt.", "--mode", "session")
    assert code == 0 and out["status"] == "complete" and out["rounds"] == 2
    calls = read_transcript(repo)
    assert all(c["mode"] == "session" for c in calls)
    second = next(c for c in calls if c["round"] == 2 and c["step"] == 1)
    sent = json.dumps(second["request"]["messages"])
    assert "MARKER-SHELL-88" in sent and "ANNOUNCED-STEP-9" not in sent
    assert "Round 1 of" not in sent  # the first round message is not sent again
    assert second["request"]["messages"][0]["role"] == "user"
    assert "(continuation)" in second["request"]["messages"][-1]["content"]


def test_session_run_masks_oldest_results_near_the_window(
    make_repo, write_script, relay_run
) -> None:
    repo = make_repo(
        files={f"big{i}.txt": f"BIG-{i}\n" + ("q" * 99 + "\n") * 120 for i in range(1, 4)},
        config={"deliverables": [{"file": "t.txt"}], "context": {"max_tokens": 8000}},
    )
    script = write_script(
        [
            respond(call("read_file", path="big1.txt")),
            respond(call("read_file", path="big2.txt")),
            respond(call("read_file", path="big3.txt")),
            respond(call("write_file", path="t.txt", content="t\n")),
            complete(),
        ]
    )
    code, out, _ = relay_run(repo, script, "Create t.txt.", "--mode", "session")
    assert code == 0, out
    calls = read_transcript(repo)
    last_read = calls[3]["request"]["messages"]  # after the third read: over 7200 tokens
    contents = [m["content"] for m in last_read if m["role"] == "tool"]
    assert contents[0].startswith("[tool result removed")  # big1, the oldest
    assert "BIG-3" in contents[-1]  # the latest response's result
