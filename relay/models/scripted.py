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

The script is validated with pydantic models (unknown keys and bad values raise
:class:`relay.errors.ConfigError` naming the file, the entry, the value and what is allowed) and
compiled into a tree of leaves and repeat blocks. Entries are never expanded: the model keeps one
integer cursor into the (virtual) flattened sequence and finds the entry at that index by
descending the tree, so ``repeat: 1000000000`` costs no more memory than ``repeat: 2``.
"""

from __future__ import annotations

import copy
import json
import threading
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from relay.errors import ConfigError, ForcedToolChoiceRejected, ModelError
from relay.models.base import Request, Response, ToolCall, Usage, estimate_tokens

# --------------------------------------------------------------------------------------------
# Error kinds a script may raise, with provider-like default messages and codes.
# --------------------------------------------------------------------------------------------

ERROR_DEFAULTS: dict[str, tuple[str, str | None]] = {
    "rate_limit": ("Rate limit reached for requests.", "rate_limit_exceeded"),
    "overloaded": ("Overloaded", "overloaded_error"),
    "insufficient_quota": (
        "You exceeded your current quota, please check your plan and billing details.",
        "insufficient_quota",
    ),
    "auth": ("Invalid API key. Check the key in your environment.", "invalid_api_key"),
    "bad_request": ("Invalid request: the request body could not be processed.", "invalid_request"),
    "timeout": ("Request timed out.", None),
    "connection": ("Connection error: could not reach the API server.", None),
    "server": ("Internal server error. Please retry your request.", "server_error"),
    "permission": (
        "Your API key does not have permission to use the specified resource.",
        "permission_denied",
    ),
    "not_found": (
        "The model does not exist or you do not have access to it.",
        "model_not_found",
    ),
}
"""``kind -> (default message, default code)`` of the error entries a script may contain."""

ERROR_KINDS: tuple[str, ...] = tuple(ERROR_DEFAULTS)
"""Error kinds allowed in ``{error: KIND}`` entries (SPEC §13; SPEC §7.6 classifies them)."""

_ENTRY_SHAPES = (
    "a response {text, tool_calls, usage}, a repeat block {repeat, response | responses} "
    "or an error {error, message, retry_after_s, code}"
)


# --------------------------------------------------------------------------------------------
# Validation models (the script as written).
# --------------------------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _whole_number(value: Any, *, minimum: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"must be {what}")
    return value


class ScriptUsage(_Strict):
    """Reported usage of one scripted response, in tokens (all optional, default 0)."""

    input: int = 0
    """Uncached input tokens."""
    cached: int = 0
    """Cache reads (reported, not counted in the token budget)."""
    cache_write: int = 0
    """Cache writes."""
    output: int = 0
    """Output tokens."""

    @field_validator("input", "cached", "cache_write", "output", mode="before")
    @classmethod
    def _count(cls, value: Any) -> int:
        return _whole_number(value, minimum=0, what="a whole number of tokens, 0 or more")

    def to_usage(self) -> Usage:
        """The provider-neutral :class:`Usage` (``estimated`` false: the script reports it)."""
        return Usage(
            uncached_input=self.input,
            cache_write=self.cache_write,
            cached_input=self.cached,
            output=self.output,
        )


class ScriptToolCall(_Strict):
    """One scripted tool call: ``name`` (required), ``arguments`` (a mapping), optional ``id``."""

    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str | None = Field(default=None, min_length=1)

    @field_validator("arguments", mode="before")
    @classmethod
    def _mapping(cls, value: Any) -> Any:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ValueError("must be a mapping of argument names to values")
        return value


class ScriptResponse(_Strict):
    """A plain response entry; ``{}`` is an empty response (no text, no tool calls)."""

    text: str | None = None
    tool_calls: list[ScriptToolCall] | None = None
    usage: ScriptUsage | None = None


class ScriptError(_Strict):
    """An error entry: the call raises ``ModelError(kind)``; it consumes the entry."""

    error: str
    message: str | None = Field(default=None, min_length=1)
    retry_after_s: float | None = Field(default=None, ge=0)
    code: str | None = Field(default=None, min_length=1)

    @field_validator("error", mode="before")
    @classmethod
    def _kind(cls, value: Any) -> Any:
        if value not in ERROR_KINDS:
            raise ValueError(f"unknown error kind; allowed: {', '.join(ERROR_KINDS)}")
        return value


class ScriptRepeat(_Strict):
    """A repeat entry: ``response`` (one entry) or ``responses`` (a block) repeated ``repeat``
    times. The nested entries are checked separately, so they are kept raw here."""

    repeat: int
    response: Any = None
    responses: list[Any] | None = None

    @field_validator("repeat", mode="before")
    @classmethod
    def _positive(cls, value: Any) -> int:
        return _whole_number(value, minimum=1, what="a positive whole number (1, 2, …)")


class ScriptFile(_Strict):
    """The top level of a script."""

    responses: list[Any]
    rejects_forced_tool_choice: bool = False
    when_exhausted: Literal["error", "repeat_last"] = "error"

    @field_validator("responses", mode="after")
    @classmethod
    def _not_empty(cls, value: list[Any]) -> list[Any]:
        if not value:
            raise ValueError("a script needs at least one entry")
        return value

    @field_validator("when_exhausted", mode="before")
    @classmethod
    def _exhausted(cls, value: Any) -> Any:
        if value not in ("error", "repeat_last"):
            raise ValueError("allowed: error (fail with script_exhausted), repeat_last")
        return value


# --------------------------------------------------------------------------------------------
# Compiled script: leaves and repeat blocks, addressed by a flat index.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Reply:
    text: str
    tool_calls: tuple[ScriptToolCall, ...]
    usage: Usage | None


@dataclass(frozen=True)
class _Fail:
    kind: str
    message: str | None
    retry_after_s: float | None
    code: str | None


@dataclass(frozen=True)
class _Block:
    """``children`` repeated ``repeat`` times. ``starts[i]`` is the flat offset of child ``i``
    inside one repetition and ``period`` the length of one repetition."""

    children: tuple[_Node, ...]
    starts: tuple[int, ...]
    period: int
    repeat: int

    @property
    def length(self) -> int:
        return self.period * self.repeat

    @classmethod
    def of(cls, children: list[_Node], repeat: int) -> _Block:
        starts: list[int] = []
        total = 0
        for child in children:
            starts.append(total)
            total += _length(child)
        return cls(tuple(children), tuple(starts), total, repeat)


_Node = _Reply | _Fail | _Block


def _length(node: _Node) -> int:
    return node.length if isinstance(node, _Block) else 1


def _entry_at(node: _Node, index: int) -> _Reply | _Fail:
    """The leaf at flat ``index`` (0 ≤ index < length): O(depth · log(children))."""
    while isinstance(node, _Block):
        index %= node.period
        child = bisect_right(node.starts, index) - 1
        index -= node.starts[child]
        node = node.children[child]
    return node


# --------------------------------------------------------------------------------------------
# Parsing with error collection.
# --------------------------------------------------------------------------------------------

Loc = tuple[str | int, ...]


def _fmt_loc(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _model_at(model: type[BaseModel], loc: Loc) -> type[BaseModel] | None:
    """The validation model that holds the keys at ``loc`` (for 'allowed keys' messages)."""
    current: type[BaseModel] | None = model
    for part in loc:
        if isinstance(part, int) or current is None:
            continue
        field = current.model_fields.get(part)
        if field is None:
            return None
        current = _find_model(field.annotation)
    return current


def _find_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _find_model(arg)
        if found is not None:
            return found
    return None


def _validate(
    model: type[BaseModel], raw: dict[str, Any], loc: Loc, errors: list[str]
) -> Any | None:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        for err in exc.errors():
            where = loc + tuple(err["loc"])
            key = _fmt_loc(where)
            if err["type"] == "extra_forbidden":
                holder = _model_at(model, tuple(err["loc"])[:-1])
                allowed = ", ".join(holder.model_fields) if holder else "(none)"
                errors.append(
                    f"{key} = {err['input']!r}: unknown key {where[-1]!r}; allowed keys: {allowed}"
                )
            elif err["type"] == "missing":
                errors.append(f"{key}: required key {where[-1]!r} is missing")
            elif err["type"] == "model_type":
                holder = _model_at(model, tuple(err["loc"]))
                keys = ", ".join(holder.model_fields) if holder else ""
                errors.append(f"{key} = {err['input']!r}: expected a mapping with keys {keys}")
            else:
                msg = err["msg"].removeprefix("Value error, ")
                errors.append(f"{key} = {err['input']!r}: {msg}")
        return None


def _parse_entry(raw: Any, loc: Loc, errors: list[str]) -> _Node | None:
    if not isinstance(raw, dict):
        errors.append(f"{_fmt_loc(loc)} = {raw!r}: expected a mapping: {_ENTRY_SHAPES}")
        return None
    if raw.keys() & {"repeat", "response", "responses"}:
        return _parse_repeat(raw, loc, errors)
    if "error" in raw:
        fail = _validate(ScriptError, raw, loc, errors)
        if fail is None:
            return None
        return _Fail(fail.error, fail.message, fail.retry_after_s, fail.code)
    reply = _validate(ScriptResponse, raw, loc, errors)
    if reply is None:
        return None
    return _Reply(
        text=reply.text or "",
        tool_calls=tuple(reply.tool_calls or ()),
        usage=reply.usage.to_usage() if reply.usage is not None else None,
    )


def _parse_repeat(raw: dict[str, Any], loc: Loc, errors: list[str]) -> _Node | None:
    spec = _validate(ScriptRepeat, raw, loc, errors)
    has_one, has_block = "response" in raw, "responses" in raw
    where = _fmt_loc(loc)
    if has_one and has_block:
        errors.append(
            f"{where}: has both 'response' and 'responses'; give one: response (one entry "
            "repeated) or responses (a block of entries repeated in order)"
        )
        return None
    if not has_one and not has_block:
        errors.append(
            f"{where}: repeat = {raw.get('repeat')!r} needs 'response' (one entry repeated) or "
            "'responses' (a block of entries repeated in order)"
        )
        return None
    if has_one:
        child = _parse_entry(raw["response"], (*loc, "response"), errors)
        block = None if child is None else [child]
    else:
        items = raw["responses"]
        if isinstance(items, list) and not items:
            errors.append(f"{where}.responses = []: a repeat block needs at least one entry")
            return None
        if not isinstance(items, list):
            return None  # reported by the validation of ScriptRepeat
        block = _parse_children(items, (*loc, "responses"), errors)
    if spec is None or block is None:
        return None
    return _Block.of(block, spec.repeat)


def _parse_children(items: list[Any], loc: Loc, errors: list[str]) -> list[_Node] | None:
    """Parse every entry of ``items`` (reporting all problems); None if any is invalid."""
    children: list[_Node] = []
    failed = False
    for i, item in enumerate(items):
        child = _parse_entry(item, (*loc, i), errors)
        if child is None:
            failed = True
        else:
            children.append(child)
    return None if failed else children


# --------------------------------------------------------------------------------------------
# The model.
# --------------------------------------------------------------------------------------------


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
        root: _Block,
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
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"scripted model script {path} is not valid YAML: {exc}") from None
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
        header = f"invalid scripted model script {src}:"
        if not isinstance(data, dict):
            raise ConfigError(
                f"{header} expected a mapping with keys responses, rejects_forced_tool_choice, "
                f"when_exhausted; got {type(data).__name__} {data!r}"
            )
        errors: list[str] = []
        top = _validate(ScriptFile, data, (), errors)
        entries = data.get("responses")
        root = None
        if isinstance(entries, list) and entries:
            children = _parse_children(entries, ("responses",), errors)
            root = None if children is None else _Block.of(children, 1)
        if errors or top is None or root is None:
            raise ConfigError("\n  ".join([header, *errors]))
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
                entry = _entry_at(self._root, self._position)
                self._position += 1
            elif self.when_exhausted == "repeat_last":
                entry = _entry_at(self._root, total - 1)
            else:
                raise ModelError(
                    "script_exhausted",
                    f"scripted model: script exhausted after {total} responses ({self.source})",
                )
            if isinstance(entry, _Fail):
                raise _model_error(entry)
            return self._respond(entry, request)

    def _respond(self, entry: _Reply, request: Request) -> Response:
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


def _model_error(entry: _Fail) -> ModelError:
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
