"""Public names of a package imported on first use (PEP 562), so that importing the package
(``relay --version``, a module needing only ``relay.models.base``) loads nothing heavy."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    package: str, namespace: dict[str, Any], public: Mapping[str, tuple[str, str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package`` (its ``globals()`` is
    ``namespace``) for ``public``: name → (module, attribute) it is imported from. A name is
    imported once and kept in ``namespace``; any other name is an ``AttributeError``, so that
    ``from package import <submodule>`` still finds the submodule."""

    def getattr_(name: str) -> Any:
        try:
            module, attribute = public[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module), attribute)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted([*namespace, *public])

    return getattr_, dir_
