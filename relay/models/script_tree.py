"""A scripted model's script compiled into leaves and repeat blocks (SPEC §13).

:func:`compile_script` validates a parsed script (:mod:`relay.models.script_schema`),
collecting every problem into one :class:`relay.errors.ConfigError`, and compiles it into a
tree of :class:`Reply`/:class:`Fail` leaves and :class:`Block` repeats. Entries are never
expanded: :func:`entry_at` finds the entry at an index of the (virtual) flattened sequence by
descending the tree, so ``repeat: 1000000000`` costs no more memory than ``repeat: 2``.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from relay.errors import ConfigError
from relay.models.base import Usage
from relay.models.script_schema import (
    ENTRY_SHAPES,
    ScriptError,
    ScriptFile,
    ScriptRepeat,
    ScriptResponse,
    ScriptToolCall,
)

__all__ = ["Block", "Fail", "Reply", "compile_script", "entry_at"]


@dataclass(frozen=True)
class Reply:
    text: str
    tool_calls: tuple[ScriptToolCall, ...]
    usage: Usage | None


@dataclass(frozen=True)
class Fail:
    kind: str
    message: str | None
    retry_after_s: float | None
    code: str | None


@dataclass(frozen=True)
class Block:
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
    def of(cls, children: list[_Node], repeat: int) -> Block:
        starts: list[int] = []
        total = 0
        for child in children:
            starts.append(total)
            total += _length(child)
        return cls(tuple(children), tuple(starts), total, repeat)


_Node = Reply | Fail | Block


def _length(node: _Node) -> int:
    return node.length if isinstance(node, Block) else 1


def entry_at(node: _Node, index: int) -> Reply | Fail:
    """The leaf at flat ``index`` (0 ≤ index < length): O(depth · log(children))."""
    while isinstance(node, Block):
        index %= node.period
        child = bisect_right(node.starts, index) - 1
        index -= node.starts[child]
        node = node.children[child]
    return node


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
        errors.append(f"{_fmt_loc(loc)} = {raw!r}: expected a mapping: {ENTRY_SHAPES}")
        return None
    if raw.keys() & {"repeat", "response", "responses"}:
        return _parse_repeat(raw, loc, errors)
    if "error" in raw:
        fail = _validate(ScriptError, raw, loc, errors)
        if fail is None:
            return None
        return Fail(fail.error, fail.message, fail.retry_after_s, fail.code)
    reply = _validate(ScriptResponse, raw, loc, errors)
    if reply is None:
        return None
    return Reply(
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
    return Block.of(block, spec.repeat)


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


def compile_script(data: Any, source: str) -> tuple[ScriptFile, Block]:
    """Validate a parsed script and compile its entries.

    Args:
        data: ``{responses: [...], rejects_forced_tool_choice?: bool, when_exhausted?:
            "error" | "repeat_last"}`` (the parsed YAML).
        source: what error messages call the script (a path, or ``inline``).

    Returns:
        The validated top level and the tree of its entries (one block repeated once).

    Raises:
        ConfigError: the script is invalid; every problem is listed, one per line.
    """
    header = f"invalid scripted model script {source}:"
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
        root = None if children is None else Block.of(children, 1)
    if errors or top is None or root is None:
        raise ConfigError("\n  ".join([header, *errors]))
    return top, root
