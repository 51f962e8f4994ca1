"""The transcript writer and reader (SPEC §12): a session transcript holds each message once,
and reading it gives back every request exactly as it was sent."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from relay.context import SessionContext
from relay.models.base import Message, Request, Response, ToolCall, Usage
from relay.transcript import Transcript, read_transcript


def _session_steps(
    path: Path, steps: list[tuple[int, bool]], max_tokens: int
) -> list[dict[str, object]]:
    """Drive a session context through ``steps`` (result size in characters, whether the step
    starts a round), write each request to the transcript; returns the requests sent."""
    context = SessionContext(max_tokens, count_tokens=lambda text: len(text) // 4)
    transcript = Transcript(path, "session")
    sent = []
    for i, (size, new_round) in enumerate(steps):
        if new_round or not context.messages:
            context.start_round(f"round message {i}")
        messages = context.visible(100)
        request = Request("the system prompt", messages)
        if i % 7 == 6:  # a wrap-up style request: a note of relay's after the history
            request = Request("the system prompt", (*messages, Message("user", "wrap up")))
            ids = (*context.sent_ids, None)
        else:
            ids = context.sent_ids
        transcript.write(
            1, i + 1, request, ids=ids, masked=context.masked, response=Response("ok", (), Usage())
        )
        sent.append(request.to_dict())
        call = ToolCall(f"c{i}", "read_file", {"path": f"f{i}.txt"})
        context.append(Message("assistant", f"step {i}", tool_calls=(call,)))
        context.append(Message("tool", "x" * size, tool_call_id=call.id))
        if i % 5 == 4:
            context.append(Message("assistant", "an announcement without a tool call"))
    return sent


@settings(max_examples=40, deadline=None, database=None)
@given(
    steps=st.lists(st.tuples(st.integers(0, 3000), st.booleans()), min_size=1, max_size=30),
    max_tokens=st.integers(500, 5000),
)
def test_reading_a_session_transcript_gives_back_every_request_sent(
    tmp_path_factory, steps: list[tuple[int, bool]], max_tokens: int
) -> None:
    path = tmp_path_factory.mktemp("t") / "transcript.jsonl"
    sent = _session_steps(path, steps, max_tokens)
    rows = read_transcript(path)
    assert [r["request"] for r in rows] == sent
    assert all(r["mode"] == "session" and "response" in r for r in rows)


def test_a_session_transcript_writes_each_result_once(tmp_path: Path) -> None:
    """200 steps: every tool result appears once in the file, not once per later request."""
    path = tmp_path / "transcript.jsonl"
    _session_steps(path, [(300, i % 4 == 0) for i in range(200)], 10**6)
    text = path.read_text(encoding="utf-8")
    assert text.count("x" * 300) == 200 - 1  # the last result is never sent
    assert text.count("the system prompt") == 1
    whole = sum(len(json.dumps(r["request"])) for r in read_transcript(path))
    assert len(text) * 20 < whole


def test_a_relay_mode_line_holds_the_whole_request(tmp_path: Path) -> None:
    path = tmp_path / "transcript.jsonl"
    request = Request("sys", (Message("user", "round message"),))
    Transcript(path, "relay").write(1, 1, request, response=Response("ok", (), Usage()))
    line = json.loads(path.read_text(encoding="utf-8"))
    assert line["request"] == request.to_dict()
    assert read_transcript(path)[0]["request"] == request.to_dict()
