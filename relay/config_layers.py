"""The layers of the configuration and their one precedence (issue 15; SPEC §12).

From lowest to highest (a later layer overrides an earlier one, key by key; mappings merge):

1. ``default`` — the built-in defaults (the fields of :class:`relay.config.Config`);
2. ``user`` — the user file, ``$XDG_CONFIG_HOME/relay/config.yaml`` (else
   ``~/.config/relay/config.yaml``): a person's defaults for every repository, such as the model;
3. ``repo`` — the repository's ``relay.yaml``;
4. ``config file`` — ``--config FILE``;
5. ``front matter`` — the goal file's front matter (on ``relay resume``: the settings the goal
   started with, its front matter and the flags of its start). It sits above the files because
   it belongs to one goal and is more specific than any file, and below the environment and the
   flags because those are what the person typed for this invocation (a CI job's
   ``RELAY_MODEL``, a one-off ``--max-rounds``);
6. ``env`` — ``RELAY_*`` variables (:mod:`relay.config_env`);
7. ``flag`` — the command-line options (:func:`relay.config_flags.flag_overrides`).

pydantic-settings reads the environment layer against the models (:mod:`relay.config_env`).
The merge itself stays relay's: each layer is validated as it is added (the layers below it and
itself), so that a message names the layer (the file, ``the environment``, ``the command-line
flags``), the key as the user wrote it (its old name, its variable), the value and what is
allowed; pydantic-settings' single validation of all sources at once cannot say which layer a
bad value came from. A relative ``scripted:`` model path is made absolute against the folder
of the file that names it (the current folder for a variable or a flag).

Provider keys are no settings: they are read from the environment by the providers' SDKs only,
and a configuration file that holds one is refused (:mod:`relay.config_errors`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from relay.config import (
    Config,
    deep_merge,
    read_yaml_mapping,
    resolve_model_spec,
    upgrade_keys,
    validate_config,
)
from relay.config_env import env_layer
from relay.config_errors import written_names
from relay.errors import ConfigError

__all__ = [
    "SOURCES",
    "Effective",
    "Layer",
    "effective_config",
    "leaf_keys",
    "no_model_message",
    "read_layers",
    "user_config_path",
]

_warned: set[str] = set()

SOURCES = ("default", "user", "repo", "config file", "front matter", "env", "flag")
"""The layers' names, lowest first (what ``relay config show`` prints as a value's source)."""


@dataclass
class Layer:
    """One layer: its ``source`` (one of :data:`SOURCES`), ``where`` it came from as messages
    name it (a file's path, ``the environment``, ``the command-line flags``), its ``data``
    (a configuration mapping; None when absent, e.g. no such file), the file's ``path``, and
    for the environment the variable of each key path (``variables``)."""

    source: str
    where: str
    data: dict[str, Any] | None
    path: Path | None = None
    variables: dict[tuple[str, ...], str] = field(default_factory=dict)


@dataclass
class Effective:
    """The effective configuration and the layers it was built from."""

    config: Config
    layers: list[Layer]

    def sources(self) -> dict[str, Layer | None]:
        """``{dotted key: the layer that set it}`` for every leaf key of the configuration
        (None: the built-in default). A mapping or list setting is one key."""
        out: dict[str, Layer | None] = {}
        for path in leaf_keys(Config):
            out[".".join(path)] = None
            for layer in self.layers:
                if layer.data is not None and _has(upgrade_keys(layer.data), path):
                    out[".".join(path)] = layer
        return out


def user_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """The user file: ``$XDG_CONFIG_HOME/relay/config.yaml`` when that variable holds an
    absolute path (the XDG rule), else ``~/.config/relay/config.yaml``."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME", "")
    if not base or not os.path.isabs(base):
        base = os.path.join(env.get("HOME") or os.path.expanduser("~"), ".config")
    return Path(base) / "relay" / "config.yaml"


def no_model_message() -> str:
    """The error of a run without a model: the three ways to set one."""
    return (
        "no model is configured: pass --model PROVIDER:MODEL (e.g. anthropic:claude-sonnet-4-6, "
        "or scripted:FILE.yaml to run offline), set RELAY_MODEL, or set `model:` in your user "
        f"file {user_config_path()} (for every repository) or in relay.yaml; "
        "`relay config show` shows where each setting comes from"
    )


def read_layers(
    repo: Path,
    config_path: Path | None = None,
    front_matter: dict[str, Any] | None = None,
    overrides: dict[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[Layer]:
    """The layers above the defaults, lowest first (see the module docstring); absent ones have
    ``data`` None. ``environ`` defaults to ``os.environ``; a warning about an ignored
    ``RELAY_*`` variable goes to stderr.

    Raises:
        ConfigError: ``config_path`` does not exist; a file that cannot be read or is not a
            YAML mapping; a ``RELAY_*`` list or mapping that is not YAML.
    """
    if config_path is not None and not _exists(config_path):
        raise ConfigError(f"configuration file {config_path} does not exist")
    user = user_config_path(environ)
    repo_file = repo / "relay.yaml"
    same = config_path is not None and _same(config_path, repo_file)
    layers = [
        _file_layer("user", user),
        _file_layer("repo", repo_file) if not same else Layer("repo", str(repo_file), None),
        _file_layer("config file", config_path)
        if config_path is not None
        else Layer("config file", "--config", None),
        Layer("front matter", "the goal file's front matter", front_matter or None),
    ]
    env = env_layer(Config, environ)
    for warning in env.warnings:
        if warning not in _warned:  # once per process, however often the layers are read
            _warned.add(warning)
            print(f"warning: {warning}", file=sys.stderr, flush=True)
    env_data = env.data or None
    if env_data and isinstance(env_data.get("model"), str):
        env_data["model"] = resolve_model_spec(env_data["model"], Path.cwd())
    layers.append(Layer("env", "the environment", env_data, variables=env.variables))
    layers.append(Layer("flag", "the command-line flags", overrides or None))
    return layers


def effective_config(
    repo: Path,
    config_path: Path | None = None,
    front_matter: dict[str, Any] | None = None,
    overrides: dict[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Effective:
    """The effective configuration of the working tree ``repo`` and its layers (arguments as
    for :func:`read_layers`). Each layer is validated as it is added; the path settings are
    checked against ``repo`` (:mod:`relay.config_paths`). Nothing is changed on disk.

    Raises:
        ConfigError: see :func:`read_layers`; an unknown key or a bad value (naming the layer,
            the key or variable, the value and what is allowed).
    """
    layers = read_layers(repo, config_path, front_matter, overrides, environ)
    data: dict[str, Any] = {}
    config: Config | None = None
    for layer in layers:
        if layer.data is None:
            continue
        if not isinstance(layer.data, dict):
            raise ConfigError(f"invalid configuration in {layer.where}: expected a mapping of keys")
        data = deep_merge(data, upgrade_keys(layer.data, layer.where))
        config = validate_config(
            data,
            layer.where,
            root=repo,
            written=written_names(layer.data),
            variables=layer.variables,
        )
    if config is None:
        config = validate_config({}, "defaults", root=repo)
    return Effective(config, layers)


def leaf_keys(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The key paths of every setting of ``model``: a section's keys one by one, a mapping or
    list setting as one key (``prices``, ``deliverables``, ``guard.weights``)."""
    out: list[tuple[str, ...]] = []
    for name, info in model.model_fields.items():
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            out.extend(leaf_keys(kind, (*prefix, name)))
        else:
            out.append((*prefix, name))
    return out


def _has(data: Any, path: tuple[str, ...]) -> bool:
    """Whether the mapping ``data`` gives a value at ``path``."""
    for part in path:
        if not isinstance(data, dict) or part not in data:
            return False
        data = data[part]
    return True


def _file_layer(source: str, path: Path) -> Layer:
    """The layer of the file ``path`` (``data`` None when it does not exist); a relative
    ``scripted:`` model is made absolute against the file's folder."""
    if not _exists(path):
        return Layer(source, str(path), None, path)
    data = read_yaml_mapping(path)
    if isinstance(data.get("model"), str):
        data["model"] = resolve_model_spec(data["model"], path.resolve().parent)
    return Layer(source, str(path), data or None, path)


def _same(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` are the same existing file."""
    try:
        return a.exists() and b.exists() and a.samefile(b)
    except OSError:
        return False


def _exists(path: Path) -> bool:
    """Whether ``path`` exists. Raises ``ConfigError`` when it cannot be looked at (a name
    too long, no permission)."""
    try:
        return path.exists()
    except OSError as exc:
        raise ConfigError(f"cannot read configuration file {path}: {exc.strerror}") from None
