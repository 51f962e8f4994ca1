"""A new goal must fit the context it is sent in (issue 28, item 5; SPEC §3, §7.3).

The goal text is part of every round's first request (the system prompt, the tools and the
round message that quotes it). A goal whose first request alone is estimated over
``context.max_tokens`` would fail at the provider or crowd out all work, so it is refused
before any change, with its size, the limit and the two ways on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from relay.context import Prompts, RoundFacts, chars_per_4, round_message, tokenizer_counter
from relay.errors import ConfigError

if TYPE_CHECKING:
    from relay.config import Config

__all__ = ["check_goal_size", "start_prompts"]


def check_goal_size(prompts: Prompts, config: Config, goal_text: str) -> None:
    """Refuse ``goal_text`` when the first request of its first round is estimated over
    ``config.context.max_tokens`` (the estimate of :class:`relay.context.SessionContext`:
    tiktoken when it works offline, else characters / 4).

    Raises:
        ConfigError: naming the goal's size, the first request's estimate, the limit and what
            to do (put the detail in a file the goal names, or raise the limit).
    """
    from relay import tools

    count = tokenizer_counter() or chars_per_4
    facts = RoundFacts(
        round=1,
        goal_round=1,
        max_rounds=config.limits.max_rounds_total,
        remaining_warning=None,
        goal=goal_text,
        supplements=(),
        progress_path=config.progress.path,
        progress="",
        git_log="",
        git_status="",
        audit="",
    )
    specs = json.dumps([t.to_dict() for t in tools.WORKER_TOOLS])
    seed = count(prompts.render("system")) + count(specs) + count(round_message(prompts, facts))
    limit = config.context.max_tokens
    if seed <= limit:
        return
    raise ConfigError(
        f"the goal is too large for context.max_tokens = {limit:,}: its {len(goal_text):,} "
        f"characters (about {count(goal_text):,} tokens) make a first request of about "
        f"{seed:,} tokens with relay's prompt and tools; put the detail in a file of the repository and have the goal name it "
        "(the model reads it with its tools), or raise context.max_tokens (relay.yaml, or "
        "RELAY_CONTEXT__MAX_TOKENS) when the model's context window is that large; nothing "
        "was changed"
    )


def start_prompts(config: Config, goal_text: str | None) -> Prompts:
    """The run's prompt templates (``prompts_dir``), a new goal's size checked with them
    (:func:`check_goal_size`; ``goal_text`` None: a goal resumed).

    Raises:
        ConfigError: a bad ``prompts_dir`` or template, or a goal too large.
    """
    prompts = Prompts(Path(config.prompts_dir) if config.prompts_dir else None)
    if goal_text is not None:
        check_goal_size(prompts, config, goal_text)
    return prompts
