"""The messages of a configuration that does not validate, in relay's words (SPEC §12).

Each line names the key as the user wrote it (an old name of :data:`RENAMED_KEYS` stays the
old name), the value (shortened: a value of millions of items made with YAML aliases is shown
at once) and what is allowed; pydantic's own wording ("Input should be a valid dictionary or
instance of Limits") never reaches the user.
"""

from __future__ import annotations

import itertools
import reprlib
from typing import Any

from pydantic import BaseModel, ValidationError

from relay.config_sections import RENAMED_KEYS
from relay.text import counted

__all__ = ["flag_problem", "format_validation_error", "shown", "written_names"]

_NOT_TEXT = " (write it without quotes)"
SHOWN_CHARS = 300
"""The longest a value is shown in a message, in characters."""


def written_names(data: Any) -> dict[tuple[str, str], str]:
    """``{(section, new key): old key}`` for every key of :data:`RENAMED_KEYS` that ``data``
    (a configuration mapping, as the user wrote it) gives under its old name."""
    out: dict[tuple[str, str], str] = {}
    if not isinstance(data, dict):
        return out
    for section, renames in RENAMED_KEYS.items():
        value = data.get(section)
        if isinstance(value, dict):
            out.update({(section, new): old for old, new in renames.items() if old in value})
    return out


class _Short(reprlib.Repr):
    """``repr`` with limits (depth, items, characters) that keeps a mapping's key order."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxdict, self.maxlist, self.maxtuple = 3, 6, 6, 6
        self.maxstring, self.maxother, self.maxlong = 120, 120, 60

    def repr_dict(self, x: dict[Any, Any], level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        items = [
            f"{self.repr1(k, level - 1)}: {self.repr1(v, level - 1)}"
            for k, v in itertools.islice(x.items(), self.maxdict)
        ]
        return "{" + ", ".join(items) + (", ..." if len(x) > self.maxdict else "") + "}"


def shown(value: Any) -> str:
    """``value`` as a message shows it: its ``repr``, cut to at most :data:`SHOWN_CHARS`."""
    text = _Short().repr(value)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."


def format_validation_error(
    exc: ValidationError,
    source: str,
    model: type[BaseModel],
    names: dict[tuple[str, str], str] | None = None,
    variables: dict[tuple[str, ...], str] | None = None,
) -> str:
    """The message of ``exc`` (a validation of ``model``, e.g. :class:`relay.config.Config`)
    for the configuration from ``source``: one line per problem.

    Args:
        names: ``{(section, new key): old key}`` of keys written under an old name.
        variables: ``{key path: variable}`` when the values come from ``RELAY_*`` variables
            (:mod:`relay.config_env`): a key is named by its variable.
    """
    lines = [f"invalid configuration in {source}:"]
    for err in exc.errors():
        loc = [str(p) for p in err["loc"]]
        if len(loc) >= 2 and (loc[0], loc[1]) in (names or {}):
            loc[1] = (names or {})[(loc[0], loc[1])]
        key = _key_name(loc, variables or {})
        if err["type"] == "extra_forbidden":
            parent = ".".join(loc[:-1])
            allowed = sorted(_fields_at(model, loc[:-1]))
            where = f" in {parent}" if parent else ""
            lines.append(
                f"  unknown key {key!r}{where}; allowed keys: {', '.join(allowed) or '(none)'}"
                + _credential_hint(loc[-1])
            )
            continue
        what = _in_relays_words(err, key, _fields_at(model, loc))
        lines.append(f"  {key} = {shown(err.get('input'))}: {what}")
    return "\n".join(lines)


def _key_name(loc: list[str], variables: dict[tuple[str, ...], str]) -> str:
    """The key at ``loc`` as the user wrote it: ``limits.max_rounds_total``, or the variable
    that set it (``RELAY_LIMITS__MAX_ROUNDS_TOTAL``; ``RELAY_LIMITS (limits.x)`` for a key
    inside a variable's mapping)."""
    dotted = ".".join(loc) or "(top level)"
    lowered = tuple(part.lower() for part in loc)
    for size in range(len(lowered), 0, -1):
        variable = variables.get(lowered[:size])
        if variable is not None:
            return variable if size == len(lowered) else f"{variable} ({dotted})"
    return dotted


def _credential_hint(key: str) -> str:
    """For an unknown key that looks like a credential: where keys go instead."""
    from relay.sandbox.env import is_credential_name

    if not is_credential_name(key):
        return ""
    return (
        " (provider keys are read from the environment only, e.g. ANTHROPIC_API_KEY or "
        "OPENAI_API_KEY, never from a configuration file)"
    )


def flag_problem(exc: ValidationError, flag: str) -> str:
    """The message of a command-line flag's value that does not convert (``--max-rounds
    ten``; typer converts with pydantic): ``--max-rounds = 'ten': expected a whole number``,
    one line per problem, in relay's words."""
    return "\n".join(
        f"{flag} = {shown(e.get('input'))}: {_in_relays_words(e, flag, set())}"
        for e in exc.errors()
    )


def _in_relays_words(err: Any, key: str, fields: set[str]) -> str:
    """What is allowed, for one pydantic error ``err`` at ``key`` (whose model, if it is one,
    has the keys ``fields``)."""
    kind, value, ctx = err["type"], err.get("input"), err.get("ctx") or {}
    quoted = _NOT_TEXT if _is_number_text(value) else ""
    if kind in ("model_type", "model_attributes_type", "dataclass_type") or (
        kind == "dict_type" and fields
    ):
        return f"{key} must be a mapping of keys: {', '.join(sorted(fields))}"
    words = {
        "dict_type": f"{key} must be a mapping (key: value)",
        "list_type": "expected a list",
        "string_type": "expected text",
        "int_type": f"expected a whole number{quoted}",
        "int_from_float": "expected a whole number",
        "int_parsing": "expected a whole number",
        "float_parsing": "expected a number",
        "float_type": f"expected a number{quoted}",
        "bool_type": "expected true or false",
        "literal_error": f"expected one of {ctx.get('expected')}",
        "greater_than": f"must be greater than {_number(ctx.get('gt'))}",
        "greater_than_equal": f"must be at least {_number(ctx.get('ge'))}",
        "less_than": f"must be less than {_number(ctx.get('lt'))}",
        "less_than_equal": f"must be at most {_number(ctx.get('le'))}",
        "finite_number": "expected a finite number",
        "missing": "this key is required",
        "too_short": f"needs at least {counted(ctx.get('min_length') or 1, 'item')}",
        "recursion_loop": "nested too deeply",
    }
    if kind in words:
        return words[kind]
    return str(err["msg"]).removeprefix("Value error, ")


def _is_number_text(value: Any) -> bool:
    """Whether ``value`` is a number written in quotes (``'2'``, ``"1.5"``)."""
    if not isinstance(value, str):
        return False
    try:
        float(value)
    except ValueError:
        return False
    return True


def _number(value: Any) -> str:
    """A bound as a user writes it: ``1`` for ``1.0``."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _model_in(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The pydantic model an annotation holds, and whether it sits in a list or dict."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    origin = getattr(annotation, "__origin__", None)
    for arg in getattr(annotation, "__args__", ()):
        model, _ = _model_in(arg)
        if model is not None:
            return model, origin in (list, dict)
    return None, False


def _fields_at(root: type[BaseModel], path: list[str]) -> set[str]:
    """The keys allowed at ``path`` (a location in a configuration of model ``root``)."""
    model: type[BaseModel] | None = root
    skip_next = False
    for part in path:
        if skip_next:  # a list index or a dict key
            skip_next = False
            continue
        field = model.model_fields.get(part) if model else None
        if field is None:
            return set()
        model, skip_next = _model_in(field.annotation)
    return set(model.model_fields) if model and not skip_next else set()
