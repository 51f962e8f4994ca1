"""Builds what a round shows the model: the system prompt, the round message (SPEC §3, §7.3).

Templates are Markdown files in ``prompts/`` with ``$name`` placeholders
(:class:`string.Template`); ``prompts_dir`` in the configuration overrides them file by file.
"""

from __future__ import annotations

import string
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from relay.data import data_dir
from relay.errors import ConfigError
from relay.models.base import Message

TEMPLATE_NAMES = ("system", "round", "continue", "supplements", "wrap_up", "auto_handoff")


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


def round_message(prompts: Prompts, facts: RoundFacts) -> str:
    """The relay-mode round message: goal, supplements, round counter and warning, progress
    file, git log, git status and the latest audit."""
    warning = f"\n**{facts.remaining_warning}**\n" if facts.remaining_warning else ""
    return prompts.render(
        "round",
        round=facts.round,
        max_rounds=facts.max_rounds,
        round_note=_round_note(facts),
        remaining_warning=warning,
        goal=facts.goal.strip(),
        supplements=render_supplements(prompts, facts.supplements),
        progress_path=facts.progress_path,
        progress=facts.progress.strip() or "(empty)",
        git_log=facts.git_log.strip() or "(no commits)",
        git_status=facts.git_status.strip() or "(clean)",
        audit=facts.audit.strip() or "No audit yet.",
    )


def continuation_message(prompts: Prompts, facts: RoundFacts) -> str:
    """The session-mode continuation round message (SPEC §3)."""
    warning = f"\n**{facts.remaining_warning}**\n" if facts.remaining_warning else ""
    return prompts.render(
        "continue",
        round=facts.round,
        max_rounds=facts.max_rounds,
        round_note=_round_note(facts),
        remaining_warning=warning,
        goal=facts.goal.strip(),
        supplements=render_supplements(prompts, facts.supplements),
        git_status=facts.git_status.strip() or "(clean)",
        audit=facts.audit.strip() or "No audit yet.",
    )


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


class SessionContext(RelayContext):
    """Session mode (SPEC §3): one context for the whole goal.

    History rules for what is sent: assistant responses without a tool call, and every round
    message but the latest, are left out (a model would otherwise take announced steps for
    done). When the request nears ``max_tokens`` (estimated at characters / 4), the oldest tool
    results are replaced by a one-line placeholder (observation masking) before anything else.

    Args:
        max_tokens: the context size to stay under, in tokens.
        margin: the fraction of ``max_tokens`` at which masking starts.
    """

    mode = "session"

    def __init__(self, max_tokens: int, margin: float = 0.9) -> None:
        super().__init__()
        self.max_tokens = max_tokens
        self.margin = margin
        self.round_starts: list[int] = []
        self.masked: set[int] = set()

    def start_round(self, round_message: str) -> None:
        """Append the round message (a continuation after the first round)."""
        self.round_starts.append(len(self.messages))
        self.messages.append(Message("user", round_message))
        self.round_steps = 0

    def visible(self, overhead_chars: int = 0) -> tuple[Message, ...]:
        """The history as sent: filtered by the history rules, then masked to fit.

        ``overhead_chars`` is the size of the system prompt and tool schemas, in characters.
        """
        latest = self.round_starts[-1] if self.round_starts else -1
        keep: list[int] = []
        for i, m in enumerate(self.messages):
            if i in self.round_starts and i != latest:
                continue
            if m.role == "assistant" and not m.tool_calls:
                continue
            keep.append(i)
        budget = int(self.max_tokens * self.margin) * 4 - overhead_chars
        size = sum(self._chars(i) for i in keep)
        protected = set(range(self._last_assistant() + 1, len(self.messages)))
        for i in keep:
            if size <= budget:
                break
            m = self.messages[i]
            if m.role == "tool" and i not in self.masked and i not in protected:
                before = self._chars(i)
                self.masked.add(i)
                size -= before - self._chars(i)
        return tuple(self._shown(i) for i in keep)

    def _last_assistant(self) -> int:
        for i in range(len(self.messages) - 1, -1, -1):
            if self.messages[i].role == "assistant":
                return i
        return len(self.messages)

    def _shown(self, i: int) -> Message:
        m = self.messages[i]
        if i in self.masked:
            return replace(m, content=MASKED.format(chars=len(m.content)))
        return m

    def _chars(self, i: int) -> int:
        m = self._shown(i)
        return len(m.content) + sum(len(str(c.arguments)) + len(c.name) for c in m.tool_calls)
