"""The environment layer of the configuration: ``RELAY_*`` variables (issue 15; SPEC §12).

One variable per setting, named ``RELAY_`` + the key, with ``__`` between the keys of a
section: ``RELAY_MODEL``, ``RELAY_LIMITS__MAX_ROUNDS_TOTAL=20``, ``RELAY_SANDBOX__MODE=off``.
Names are read in any case. pydantic-settings' :class:`~pydantic_settings.EnvSettingsSource`
finds the variables against the model's fields (its sections, and old key names such as
``RELAY_LIMITS__MAX_ROUNDS_WITHOUT_PROGRESS``); relay reads each value as it would read the
same value written after the key in ``relay.yaml``:

* a value that is already valid text for the key stays text (``RELAY_SANDBOX__MODE=off`` is
  ``off``, not YAML's false; ``RELAY_AUTO_REPLY=Yes: go on`` is that sentence);
* anything else is read as YAML: numbers, ``true``/``false``, ``null`` (unsets the key, e.g.
  a budget a file sets), lists and mappings (``RELAY_SANDBOX__ENV='[FOO, BAR_*]'``, JSON works
  too); a value YAML reads as text is then refused by validation as for a file, naming the
  variable, the value and what is allowed.

An empty variable is not set. Which variables are not settings:

* the ones relay itself sets for the commands it starts (:data:`RESERVED`): ``RELAY_SANDBOX``
  and ``RELAY_RUN`` (in the model's commands), ``RELAY_AUDIT_*`` (relay's pytest plug-in);
* a variable whose first part names no key (``RELAY_HOST`` of another program called relay)
  is ignored; when the name is close to a setting's (``RELAY_MODLE``) or is an option's name
  (``RELAY_MAX_ROUNDS``), a warning names the variable to use.

A variable under a section with an unknown key (``RELAY_LIMITS__MAX_ROUND``) is an error
naming the variable and the keys allowed: it can only be meant for relay. Provider keys
(``ANTHROPIC_API_KEY``, …) are no settings: they are read by the providers' SDKs from the
environment only; an unknown ``RELAY_*`` name that looks like a credential is ignored without
a word (its name is never echoed).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, get_args

from pydantic import AliasChoices, BaseModel, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import EnvSettingsSource

__all__ = ["PREFIX", "RESERVED", "EnvLayer", "env_layer", "variable_for"]

PREFIX = "RELAY_"
"""The prefix of relay's setting variables."""
DELIMITER = "__"
"""Between the keys of a nested setting."""
NULLS = ("null", "~")
"""Values that unset a key (as YAML's null), also for a text key: ``RELAY_MODEL=null``."""
RESERVED: tuple[str, ...] = ("RELAY_SANDBOX", "RELAY_RUN", "RELAY_AUDIT_*")
"""Variables relay sets for the commands it starts: never read as settings (``*``: any end)."""


@dataclass
class EnvLayer:
    """What the environment sets: ``data`` (a configuration mapping, as from a file),
    ``variables`` (``{key path: variable name}`` of each variable read, e.g.
    ``{("limits", "max_rounds_total"): "RELAY_LIMITS__MAX_ROUNDS_TOTAL"}``) and ``warnings``
    (one line per ignored variable that looks meant for relay)."""

    data: dict[str, Any] = field(default_factory=dict)
    variables: dict[tuple[str, ...], str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def variable_for(path: tuple[str, ...] | list[str]) -> str:
    """The variable of the key ``path`` (``("limits", "max_rounds_total")`` →
    ``RELAY_LIMITS__MAX_ROUNDS_TOTAL``)."""
    return PREFIX + DELIMITER.join(path).upper()


def _reserved(name: str) -> bool:
    upper = name.upper()
    return any(upper.startswith(r[:-1]) if r.endswith("*") else upper == r for r in RESERVED)


def _settings_variables(environ: Mapping[str, str]) -> dict[str, str]:
    """The ``RELAY_*`` variables of ``environ`` that may be settings: not reserved, not
    empty."""
    return {
        name: value
        for name, value in environ.items()
        if name.upper().startswith(PREFIX) and value != "" and not _reserved(name)
    }


class _Source(EnvSettingsSource):
    """pydantic-settings' environment source over the variables given (not ``os.environ``):
    it finds the variables of the model's keys and decodes list and mapping values (as YAML);
    every other value stays the variable's text, read by :func:`_typed` afterwards."""

    def __init__(self, model: type[BaseModel], variables: Mapping[str, str]) -> None:
        self._given = variables
        super().__init__(
            model,  # type: ignore[arg-type]  # any pydantic model works as the field source
            case_sensitive=False,
            env_prefix=PREFIX,
            env_nested_delimiter=DELIMITER,
        )

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {name.lower(): value for name, value in self._given.items()}

    def decode_complex_value(self, field_name: str, field: FieldInfo, value: Any) -> Any:
        """A list or mapping value, read as YAML (JSON is YAML). Raises ``ValueError``."""
        from relay.config import ConfigError, load_yaml

        try:
            return load_yaml(value, "the value")
        except ConfigError as exc:
            raise ValueError(str(exc)) from None

    def _coerce_env_val_strict(self, field: FieldInfo | None, value: Any) -> Any:
        """No conversion here (pydantic-settings converts text for strict models since 2.12,
        its own way): :func:`_typed` reads every value the same way in every version."""
        return value


def _typed(annotation: Any, value: Any) -> Any:
    """``value`` (from :class:`_Source`) read for a key of type ``annotation`` (None when
    unknown): mappings key by key, text by :func:`_text_value`, anything else as it is."""
    if isinstance(value, dict):
        model = _model_in(annotation)
        if model is not None:
            return {k: _typed(_field_type(model, k), v) for k, v in value.items()}
        args = get_args(_unwrapped(annotation))
        item = args[-1] if len(args) == 2 else None  # dict[str, X]: each value is an X
        return {k: _typed(item, v) for k, v in value.items()}
    if isinstance(value, str):
        return _text_value(annotation, value)
    return value


def _text_value(annotation: Any, text: str) -> Any:
    """A variable's text for a key of type ``annotation``: ``null``/``~`` is None; text that
    is valid for the key stays text; anything else is read as YAML (text YAML cannot read
    stays text, for validation to name)."""
    from relay.config import ConfigError, load_yaml

    if text.strip() in NULLS:
        return None
    if annotation is not None:
        try:
            TypeAdapter(annotation).validate_python(text, strict=True)
            return text
        except (ValidationError, TypeError, ValueError):
            pass
    try:
        return load_yaml(text, "the value")
    except ConfigError:
        return text


def _unwrapped(annotation: Any) -> Any:
    """``X`` of ``X | None``; anything else as it is."""
    args = [a for a in get_args(annotation) if a is not type(None)]
    if type(None) in get_args(annotation) and len(args) == 1:
        return args[0]
    return annotation


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model ``annotation`` is (or ``model | None``), else None."""
    kind = _unwrapped(annotation)
    return kind if isinstance(kind, type) and issubclass(kind, BaseModel) else None


def _field_type(model: type[BaseModel], key: str) -> Any:
    """The annotation of ``model``'s key ``key`` (also under an old name, any case), or
    None for an unknown key."""
    for name, info in model.model_fields.items():
        names = {name}
        alias = info.validation_alias
        if isinstance(alias, AliasChoices):
            names |= {c for c in alias.choices if isinstance(c, str)}
        if key.lower() in {n.lower() for n in names}:
            return info.annotation
    return None


def env_layer(model: type[BaseModel], environ: Mapping[str, str] | None = None) -> EnvLayer:
    """The settings of ``environ`` (default ``os.environ``) for the configuration ``model``
    (:class:`relay.config.Config`). See the module docstring for the rules.

    Raises:
        ConfigError: a variable whose list or mapping value is not YAML, naming it.
    """
    from relay.errors import ConfigError
    from relay.sandbox.env import is_credential_name

    variables = _settings_variables(os.environ if environ is None else environ)
    layer = EnvLayer()
    if not variables:
        return layer
    fields = set(model.model_fields)
    for name in sorted(variables):
        head = name[len(PREFIX) :].lower().split(DELIMITER)[0]
        if head in fields:
            path = tuple(name[len(PREFIX) :].lower().split(DELIMITER))
            layer.variables[path] = name
        elif not is_credential_name(name[len(PREFIX) :]):  # a key's name is never echoed
            hint = _hint(name, fields)
            if hint:
                layer.warnings.append(f"{name} is not a relay setting (ignored); {hint}")
    source = _Source(model, variables)
    try:
        layer.data = _typed(model, source())
    except Exception as exc:  # pydantic-settings' SettingsError names the field only
        bad = _unreadable(variables)
        raise ConfigError(
            f"invalid configuration in the environment: {bad or 'a RELAY_ variable'} is "
            f"not a YAML list or mapping ({exc.__cause__ or exc})"
        ) from None
    for path, name in layer.variables.items():  # a top-level null is dropped by the source
        if variables[name].strip() in NULLS:
            _put(layer.data, path, None)
    return layer


def _put(data: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    """Set ``data[path[0]][path[1]]…`` to ``value``, creating mappings on the way."""
    *parents, last = path
    for part in parents:
        child = data.get(part)
        if not isinstance(child, dict):
            child = data[part] = {}
        data = child
    data[last] = value


def _unreadable(variables: Mapping[str, str]) -> str | None:
    """The first variable whose value YAML cannot read, as ``NAME='value'``."""
    from relay.config import ConfigError, load_yaml

    for name, value in sorted(variables.items()):
        try:
            load_yaml(value, name)
        except ConfigError:
            return f"{name}={value!r}"
    return None


def _hint(name: str, fields: set[str]) -> str | None:
    """What to use instead of the unknown variable ``name``, or None when it does not look
    meant for relay."""
    from relay.config_flags import FLAGS

    rest = name[len(PREFIX) :].lower()
    flag = FLAGS.get(rest)
    if flag is not None and flag.when_on is None:
        return f"the setting of {flag.option} is {variable_for(flag.key)}"
    head, *tail = rest.split(DELIMITER)
    close = difflib.get_close_matches(head, sorted(fields), n=3, cutoff=0.8)
    close.sort(key=lambda field: sorted(field) != sorted(head))  # swapped letters first
    if close:
        names = " or ".join(variable_for((field, *tail)) for field in close[:2])
        return f"did you mean {names}?"
    return None
