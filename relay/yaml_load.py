"""The one YAML reader of every file relay reads (SPEC §12, §13; issue 28 item 12):
``relay.yaml`` and ``--config``, a goal file's front matter, ``RELAY_*`` values, scripted-model
scripts, batch and deliverables files.

* Safe types only (PyYAML's ``SafeLoader``).
* A plain number with an exponent (``1e3``, ``2.5e-1``) is a number, as in YAML 1.2; YAML 1.1
  reads it as text, which strict validation refuses. A quoted ``'1e3'`` stays text.
* A key given twice in one mapping is an error naming the key and both lines: PyYAML would
  silently keep the last value. Merge keys (``<<: *anchor``) may still be overridden.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.nodes import MappingNode, ScalarNode

from relay.errors import ConfigError

__all__ = ["DuplicateKeyError", "RelayLoader", "load_yaml"]


class DuplicateKeyError(yaml.YAMLError):
    """A key given twice in one mapping.

    Attributes:
        key: the key as read; line, first: the 1-based lines of the second and first use.
    """

    def __init__(self, key: object, line: int, first: int) -> None:
        super().__init__(f"duplicate key {key!r} at line {line}")
        self.key, self.line, self.first = key, line, first


class RelayLoader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2's exponent numbers and no duplicate keys."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        """The mapping of ``node``; raises :class:`DuplicateKeyError` for a scalar key given
        twice (merge keys ``<<`` aside)."""
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the base class says so
                continue
            if first is not None:
                raise DuplicateKeyError(key, line, first)
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


RelayLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)?(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


def load_yaml(text: str, where: str) -> Any:
    """``text`` parsed as YAML by :class:`RelayLoader`.

    Args:
        text: the YAML text.
        where: what messages call it: a file, ``"<file>: the front matter"``, a variable.

    Raises:
        ConfigError: invalid YAML; a key given twice in one mapping (naming the key and both
            lines); a structure nested too deeply for the parser (hundreds of levels).
    """
    try:
        return yaml.load(text, Loader=RelayLoader)  # a SafeLoader: safe types only
    except DuplicateKeyError as exc:
        raise ConfigError(
            f"{where}: the key {str(exc.key)!r} is given twice in one mapping (line {exc.line};"
            f" first at line {exc.first}): each key may appear once, write it once with the"
            " value you want"
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where} is not valid YAML: {exc}") from None
    except RecursionError:
        raise ConfigError(
            f"{where} is nested too deeply to read (lists or mappings hundreds of levels deep)"
        ) from None
