"""A non-editable install ships every part of relay (pyproject.toml's explicit package list)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_relay_package_is_listed_for_setuptools() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "relay").rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"


def test_relays_pytest_plugin_ships_as_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    data = config["tool"]["setuptools"]["package-data"]["relay"]
    assert "audit_plugin/relay_audit_pytest.py" in data
    assert (ROOT / "relay" / "audit_plugin" / "relay_audit_pytest.py").is_file()
