"""Builds what a round shows the model: the system prompt, the round message (SPEC §3, §7.3).

Templates are Markdown files in ``prompts/`` with ``$name`` placeholders
(:class:`string.Template`); ``prompts_dir`` in the configuration overrides them file by file.
"""

from __future__ import annotations

import hashlib
import os
import string
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from relay.data import data_dir
from relay.errors import ConfigError
from relay.models.base import Message

TEMPLATE_NAMES = (
    "system",
    "round",
    "continue",
    "supplements",
    "wrap_up",
    "auto_handoff",
    "agent",
)


class Prompts:
    """The prompt templates of a run.

    Args:
        override_dir: a folder whose ``<name>.md`` files replace the shipped templates.

    Raises:
        ConfigError: the override folder does not exist, or a template has a bad placeholder.
    """

    def __init__(self, override_dir: Path | None = None) -> None:
        if override_dir is not None and not override_dir.is_dir():
            raise ConfigError(f"prompts_dir = {str(override_dir)!r}: no such folder")
        shipped = data_dir("prompts")
        self._templates: dict[str, string.Template] = {}
        for name in TEMPLATE_NAMES:
            path = override_dir / f"{name}.md" if override_dir else None
            if path is not None and path.is_file():
                text = path.read_text(encoding="utf-8")
            else:
                text = (shipped / f"{name}.md").read_text(encoding="utf-8")
            self._templates[name] = string.Template(text)

    def render(self, name: str, **values: Any) -> str:
        """Render template ``name`` with ``values``. Raises ``ConfigError`` naming a placeholder
        the template uses but the orchestrator does not provide."""
        try:
            return self._templates[name].substitute(values)
        except KeyError as exc:
            raise ConfigError(
                f"prompt template {name}.md uses unknown placeholder ${exc}"
            ) from None
        except ValueError as exc:
            raise ConfigError(f"prompt template {name}.md is malformed: {exc}") from None


@dataclass(frozen=True)
class RoundFacts:
    """Everything a round message names (SPEC §3, §7.3).

    ``round`` is the round number counted toward ``max_rounds`` (since the last restart);
    ``goal_round`` the goal's own round number (they differ after a resume or supplement).
    """

    round: int
    goal_round: int
    max_rounds: int
    remaining_warning: str | None
    goal: str
    supplements: tuple[dict[str, Any], ...]
    progress_path: str
    progress: str
    git_log: str
    git_status: str
    audit: str


def render_supplements(prompts: Prompts, supplements: tuple[dict[str, Any], ...]) -> str:
    """The supplements section, or '' when there are none. The newest one is marked."""
    if not supplements:
        return ""
    items = []
    for i, s in enumerate(supplements, 1):
        stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(s["created_at"]))
        newest = ", newest" if i == len(supplements) else ""
        items.append(
            f"<<<USER SUPPLEMENT {i} ({stamp}, {s['source']}{newest})\n"
            f"{s['text'].strip()}\nUSER SUPPLEMENT {i}>>>"
        )
    return prompts.render("supplements", items="\n\n".join(items)) + "\n"


def _round_note(facts: RoundFacts) -> str:
    if facts.goal_round != facts.round:
        return f"(Round {facts.goal_round} of the goal; the round count restarted.)\n"
    return ""


def _shared_fields(prompts: Prompts, facts: RoundFacts) -> dict[str, object]:
    """The template fields both round messages have."""
    warning = f"\n**{facts.remaining_warning}**\n" if facts.remaining_warning else ""
    return {
        "round": facts.round,
        "max_rounds": facts.max_rounds,
        "round_note": _round_note(facts),
        "remaining_warning": warning,
        "goal": facts.goal.strip(),
        "supplements": render_supplements(prompts, facts.supplements),
        "git_status": facts.git_status.strip() or "(clean)",
        "audit": facts.audit.strip() or "No audit yet.",
    }


def round_message(prompts: Prompts, facts: RoundFacts) -> str:
    """The relay-mode round message: goal, supplements, round counter and warning, progress
    file, git log, git status and the latest audit."""
    return prompts.render(
        "round",
        **_shared_fields(prompts, facts),
        progress_path=facts.progress_path,
        progress=facts.progress.strip() or "(empty)",
        git_log=facts.git_log.strip() or "(no commits)",
    )


def continuation_message(prompts: Prompts, facts: RoundFacts) -> str:
    """The session-mode continuation round message (SPEC §3)."""
    return prompts.render("continue", **_shared_fields(prompts, facts))


def format_audit(audit: dict[str, Any] | None) -> str:
    """One line per check of the latest audit, for round messages and get_goal."""
    if audit is None:
        return "No audit yet."
    lines = [f"Round {audit.get('round')}: {'passed' if audit['passed'] else 'FAILED'}"]
    for c in audit["checks"]:
        mark = "✓" if c["passed"] else "✗"
        evidence = c["evidence"].strip().splitlines()
        tail = evidence[-1] if evidence else ""
        lines.append(f"- {mark} {c['kind']} {c['target']}: {tail[:200]}")
    return "\n".join(lines)


class RelayContext:
    """Relay mode (SPEC §3): every round starts a fresh context with one round message."""

    mode = "relay"

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.round_steps = 0

    def start_round(self, round_message: str) -> None:
        """Forget everything; the round message is the only thing the model sees."""
        self.messages = [Message("user", round_message)]
        self.round_steps = 0

    def append(self, *messages: Message) -> None:
        """Add a response or tool results of the current round."""
        self.messages.extend(messages)
        if any(m.role == "assistant" for m in messages):
            self.round_steps += 1

    def visible(self, overhead_chars: int = 0) -> tuple[Message, ...]:
        """The messages sent with the next request."""
        return tuple(self.messages)


MASKED = "[tool result removed to save context: {chars} characters; run the tool again if needed]"
"""The one-line placeholder of a masked tool result (observation masking, SPEC §3)."""

EARLIER_LEFT_OUT = (
    "[Earlier round messages are left out of this history; the latest one, below, is current.]"
)
"""Opens a session history whose first kept message is not the user's: providers such as the
Anthropic Messages API require the first message to be a user message."""

DROPPED = "[{count} older messages were left out to fit the context window.]"
"""Opens a session history from which whole exchanges had to be dropped after masking."""

TokenCounter = Callable[[str], int]
"""Counts the tokens of a text (a tokenizer), for the session-mode size estimate."""

TIKTOKEN_ENCODING = "o200k_base"
_TIKTOKEN_BLOB = (
    f"https://openaipublic.blob.core.windows.net/encodings/{TIKTOKEN_ENCODING}.tiktoken"
)


def chars_per_4(text: str) -> int:
    """The fallback token estimate: characters / 4 (rounded up), as for unreported usage."""
    return (len(text) + 3) // 4


def tokenizer_counter() -> TokenCounter | None:
    """A tokenizer-based counter when one works offline here, else None.

    Uses ``tiktoken`` (``o200k_base``) only when the package is installed and its vocabulary is
    already in the folder named by ``TIKTOKEN_CACHE_DIR`` (tiktoken's documented offline cache):
    relay never lets a tokenizer download anything. The counts are an estimate for any model.
    """
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR")
    if not cache_dir:
        return None
    cached = Path(cache_dir) / hashlib.sha1(_TIKTOKEN_BLOB.encode()).hexdigest()
    if not cached.is_file():
        return None
    try:
        import tiktoken  # type: ignore[import-not-found]

        encoding = tiktoken.get_encoding(TIKTOKEN_ENCODING)
    except Exception:  # not installed, or a vocabulary it cannot read: characters / 4
        return None

    def count(text: str) -> int:
        return len(encoding.encode(text, disallowed_special=()))

    return count


class SessionContext(RelayContext):
    """Session mode (SPEC §3): one context for the whole goal.

    Every message stays in :attr:`messages` (the full history, e.g. for :attr:`final_response`);
    :meth:`visible` builds what is sent:

    1. History rules: assistant responses without a tool call, and every round message but the
       latest, are left out (a model would otherwise take announced steps for done).
    2. Observation masking: when the request nears ``max_tokens`` (``margin`` of it), the
       oldest tool results are replaced by a one-line placeholder, never the results of the
       latest response. A result once masked stays masked, so the history's prefix is stable.
    3. Only when masking every older result is not enough, the oldest whole exchanges (a
       response with its tool results, or a user note) are dropped, never the latest round
       message or the latest response with its results.

    A history that would not start with a user message (its first round message was left out)
    opens with a one-line note instead, as providers require.

    Args:
        max_tokens: the context size to stay under, in tokens (``context.max_tokens``).
        margin: the fraction of ``max_tokens`` at which masking starts (0 < margin ≤ 1).
        count_tokens: a tokenizer (text → tokens); default :func:`tokenizer_counter` where
            available, else characters / 4.
    """

    mode = "session"

    def __init__(
        self,
        max_tokens: int,
        margin: float = 0.9,
        count_tokens: TokenCounter | None = None,
    ) -> None:
        super().__init__()
        self.max_tokens = max_tokens
        self.margin = margin
        self.count_tokens: TokenCounter = count_tokens or tokenizer_counter() or chars_per_4
        self.round_starts: list[int] = []
        self.masked: set[int] = set()
        self.dropped: set[int] = set()
        self._placeholders: dict[int, Message] = {}
        self._tokens: dict[tuple[int, bool], int] = {}

    def start_round(self, round_message: str) -> None:
        """Append the round message (a continuation after the first round)."""
        self.round_starts.append(len(self.messages))
        self.messages.append(Message("user", round_message))
        self.round_steps = 0

    @property
    def final_response(self) -> str:
        """The text of the latest response, also when it called no tool (such an answer is
        left out of what is sent, but it is the model's last word for the result)."""
        for m in reversed(self.messages):
            if m.role == "assistant":
                return m.content
        return ""

    def visible(self, overhead_chars: int = 0) -> tuple[Message, ...]:
        """The history as sent: filtered by the history rules, then masked (and, as a last
        resort, trimmed) to fit.

        Args:
            overhead_chars: the size of the system prompt and tool schemas, in characters
                (estimated at characters / 4 tokens).
        """
        latest = self.round_starts[-1] if self.round_starts else -1
        starts = set(self.round_starts)
        keep: list[int] = []
        for i, m in enumerate(self.messages):
            if i in starts and i != latest:
                continue
            if m.role == "assistant" and not m.tool_calls:
                continue
            keep.append(i)
        budget = int(self.max_tokens * self.margin) - chars_per_4("x" * overhead_chars)
        protected = set(range(self._last_assistant(), len(self.messages))) | {latest}
        size = sum(self._size(i) for i in keep if i not in self.dropped)
        for i in keep:  # observation masking, oldest first
            if size <= budget:
                break
            m = self.messages[i]
            if m.role == "tool" and i not in self.masked and i not in protected:
                before = self._size(i)
                self.masked.add(i)
                size -= before - self._size(i)
        if size > budget:  # still too big: drop the oldest whole exchanges
            for unit in self._units(keep):
                if size <= budget:
                    break
                if protected & set(unit) or set(unit) <= self.dropped:
                    continue
                size -= sum(self._size(i) for i in unit if i not in self.dropped)
                self.dropped.update(unit)
        shown = [self._shown(i) for i in keep if i not in self.dropped]
        dropped = sum(1 for i in keep if i in self.dropped)
        if dropped:
            shown.insert(0, Message("user", DROPPED.format(count=dropped)))
        elif shown and shown[0].role != "user":
            shown.insert(0, Message("user", EARLIER_LEFT_OUT))
        return tuple(shown)

    def _units(self, keep: list[int]) -> list[list[int]]:
        """The kept messages grouped into droppable units, oldest first: a response with the
        tool results that follow it, or a user message on its own."""
        units: list[list[int]] = []
        for i in keep:
            role = self.messages[i].role
            if role == "tool" and units and self.messages[units[-1][0]].role == "assistant":
                units[-1].append(i)
            else:
                units.append([i])
        return units

    def _last_assistant(self) -> int:
        for i in range(len(self.messages) - 1, -1, -1):
            if self.messages[i].role == "assistant":
                return i
        return len(self.messages)

    def _shown(self, i: int) -> Message:
        m = self.messages[i]
        if i not in self.masked:
            return m
        if i not in self._placeholders:  # one object per masked message (transcript reuse)
            self._placeholders[i] = replace(m, content=MASKED.format(chars=len(m.content)))
        return self._placeholders[i]

    def _size(self, i: int) -> int:
        """Estimated tokens of message ``i`` as shown (content and tool-call arguments)."""
        key = (i, i in self.masked)
        if key not in self._tokens:
            m = self._shown(i)
            text = m.content + "".join(c.name + str(c.arguments) for c in m.tool_calls)
            self._tokens[key] = self.count_tokens(text)
        return self._tokens[key]
