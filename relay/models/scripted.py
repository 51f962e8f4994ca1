"""The scripted model (SPEC §13): a deterministic, offline model for demos, tests and bug reports.

A script is a YAML mapping::

    responses:                  # consumed in order, one per model call, across rounds
      - text: "Looking around."
        tool_calls: [{name: shell, arguments: {command: ls}}]
        usage: {input: 1200, cached: 0, cache_write: 0, output: 150}
      - repeat: 3               # one entry repeated
        response: {tool_calls: [{name: shell, arguments: {command: "pytest -q"}}]}
      - repeat: 10              # a block of entries, repeated in order
        responses: [{text: "a"}, {text: "b"}]
      - error: insufficient_quota
    rejects_forced_tool_choice: false
    when_exhausted: error       # or repeat_last

The script is validated with pydantic models (:mod:`relay.models.script_schema`; unknown keys
and bad values raise :class:`relay.errors.ConfigError` naming the file, the entry, the value
and what is allowed) and compiled into a tree of leaves and repeat blocks
(:mod:`relay.models.script_tree`). Entries are never expanded: the model keeps one integer
cursor into the (virtual) flattened sequence and finds the entry at that index by descending
the tree, so ``repeat: 1000000000`` costs no more memory than ``repeat: 2``.
"""

from __future__ import annotations

import copy
import json
import threading
from pathlib import Path
from typing import Any

from relay.errors import ConfigError, ForcedToolChoiceRejected, ModelError
from relay.models.base import Request, Response, ToolCall, Usage, estimate_tokens
from relay.models.script_schema import ERROR_DEFAULTS, ERROR_KINDS
from relay.models.script_tree import Block, Fail, Reply, compile_script, entry_at
from relay.text import counted
from relay.yaml_load import load_yaml

__all__ = ["ERROR_DEFAULTS", "ERROR_KINDS", "ScriptedModel"]


class ScriptedModel:
    """A model that answers from a script (SPEC §13); implements :class:`relay.models.Model`.

    Each :meth:`complete` consumes exactly one entry, in order, across rounds. Build it with
    :meth:`from_file` or :meth:`from_dict`; both raise :class:`ConfigError` on a bad script.

    Attributes:
        name: ``"scripted:<path>"`` (``"scripted:inline"`` for :meth:`from_dict`).
        rejects_forced_tool_choice: requests with ``tool_choice == "required"`` fail with
            :class:`ForcedToolChoiceRejected` without consuming an entry.
        when_exhausted: ``"error"`` (fatal ``script_exhausted``) or ``"repeat_last"``.
    """

    def __init__(
        self,
        root: Block,
        *,
        name: str,
        source: str,
        rejects_forced_tool_choice: bool = False,
        when_exhausted: str = "error",
    ) -> None:
        """Use :meth:`from_file` or :meth:`from_dict`; ``root`` is a compiled script."""
        self.name = name
        self.source = source
        self.rejects_forced_tool_choice = rejects_forced_tool_choice
        self.when_exhausted = when_exhausted
        self._root = root
        self._position = 0
        self._tool_call_counter = 0
        self._lock = threading.Lock()

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def from_file(cls, path: Path, *, name: str | None = None) -> ScriptedModel:
        """Load and validate a YAML script.

        Args:
            path: the script file (UTF-8 YAML holding a mapping).
            name: the model name; default ``"scripted:<path>"``.

        Raises:
            ConfigError: the file is unreadable, not YAML, not a mapping, or the script is
                invalid (the message names the file, the entry, the value and what is allowed).
        """
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise ConfigError(f"cannot read scripted model script {path}: {reason}") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"scripted model script {path} is not UTF-8 text: {exc}") from None
        data = load_yaml(text, f"scripted model script {path}")
        return cls.from_dict(data, name=name or f"scripted:{path}", source=str(path))

    @classmethod
    def from_dict(
        cls, data: Any, name: str = "scripted:inline", *, source: str | None = None
    ) -> ScriptedModel:
        """Validate a script given as a mapping (the parsed YAML).

        Args:
            data: ``{responses: [...], rejects_forced_tool_choice?: bool, when_exhausted?:
                "error" | "repeat_last"}``.
            name: the model name.
            source: what error messages call the script (default: ``name`` without the
                ``scripted:`` prefix, e.g. ``inline``).

        Raises:
            ConfigError: the script is invalid; every problem is listed, one per line.
        """
        src = source or name.removeprefix("scripted:")
        top, root = compile_script(data, src)
        return cls(
            root,
            name=name,
            source=src,
            rejects_forced_tool_choice=top.rejects_forced_tool_choice,
            when_exhausted=top.when_exhausted,
        )

    # -- state ------------------------------------------------------------------------------

    @property
    def position(self) -> int:
        """Entries consumed so far (0 … :attr:`length`); ``repeat_last`` replays add nothing."""
        return self._position

    @property
    def length(self) -> int:
        """Entries in the script with every repeat expanded (computed, never materialised)."""
        return self._root.length

    def resume_at(self, position: int) -> None:
        """Continue the script after ``position`` consumed entries: a resumed goal picks up
        where its earlier runs left the script (capped at :attr:`length`)."""
        with self._lock:
            self._position = max(0, min(position, self._root.length))

    @property
    def exhausted(self) -> bool:
        """True once every entry has been consumed."""
        return self._position >= self._root.length

    # -- the Model protocol ----------------------------------------------------------------------

    def complete(self, request: Request) -> Response:
        """Answer ``request`` with the next script entry.

        Returns a :class:`Response` for a response entry (``stop_reason`` ``tool_use`` when it
        has tool calls, else ``end_turn``; tool calls without a scripted ``id`` get
        ``call_<n>``, ``n`` counting every tool call this model returned, from 1). Usage is the
        scripted ``usage`` or, without one, an estimate (characters / 4, ``estimated=True``).

        Raises:
            ForcedToolChoiceRejected: ``rejects_forced_tool_choice`` and ``tool_choice ==
                "required"``; no entry is consumed.
            ModelError: an error entry (kind from the script; the entry is consumed), or
                ``script_exhausted`` when the script is used up and ``when_exhausted: error``.
        """
        with self._lock:
            if self.rejects_forced_tool_choice and request.tool_choice == "required":
                raise ForcedToolChoiceRejected(
                    f"scripted model ({self.source}): tool_choice forcing tool use is not "
                    "supported by this model (rejects_forced_tool_choice: true)"
                )
            total = self._root.length
            if self._position < total:
                entry = entry_at(self._root, self._position)
                self._position += 1
            elif self.when_exhausted == "repeat_last":
                entry = entry_at(self._root, total - 1)
            else:
                raise ModelError(
                    "script_exhausted",
                    f"scripted model: script exhausted after {counted(total, 'response')} "
                    f"({self.source})",
                )
            if isinstance(entry, Fail):
                raise _model_error(entry)
            return self._respond(entry, request)

    def _respond(self, entry: Reply, request: Request) -> Response:
        calls: list[ToolCall] = []
        for call in entry.tool_calls:
            self._tool_call_counter += 1
            calls.append(
                ToolCall(
                    id=call.id or f"call_{self._tool_call_counter}",
                    name=call.name,
                    arguments=copy.deepcopy(call.arguments),
                )
            )
        usage = entry.usage
        if usage is None:
            calls_chars = len(json.dumps([c.to_dict() for c in calls])) if calls else 0
            usage = Usage(
                uncached_input=estimate_tokens(request.char_count()),
                output=estimate_tokens(len(entry.text) + calls_chars),
                estimated=True,
            )
        return Response(
            text=entry.text,
            tool_calls=tuple(calls),
            usage=usage,
            stop_reason="tool_use" if calls else "end_turn",
        )

    def __repr__(self) -> str:
        return f"ScriptedModel({self.name!r}, position={self._position}/{self._root.length})"


def _model_error(entry: Fail) -> ModelError:
    default_message, default_code = ERROR_DEFAULTS[entry.kind]
    message = entry.message
    if message is None:
        message = default_message
        if entry.retry_after_s is not None:
            message += f" Please try again in {entry.retry_after_s:g}s."
    return ModelError(
        entry.kind,
        message,
        retry_after_s=entry.retry_after_s,
        code=entry.code or default_code,
    )
