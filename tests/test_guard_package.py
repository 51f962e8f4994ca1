"""The guard package's surface (:mod:`relay.guard`): one import path for every name, pure
modules, the optional embedding scorer loaded only on demand."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import relay.guard
from relay.guard import embedding

PACKAGE = Path(relay.guard.__file__).parent

PURE_IMPORTS = {
    "__future__",
    "collections.abc",
    "dataclasses",
    "difflib",
    "functools",
    "hashlib",
    "json",
    "re",
    "typing",
}
"""What the pure modules of the guard may import besides each other: nothing that reads or
writes files, starts processes or talks to the network."""


def test_every_public_name_is_exported_from_the_package() -> None:
    exported = set(relay.guard.__all__)
    for name in exported:
        assert getattr(relay.guard, name) is not None, name
    for module in ("history", "settings", "similarity", "repeats", "detectors", "risk"):
        public = {n for n in _defined_names(PACKAGE / f"{module}.py") if not n.startswith("_")}
        assert public <= exported, (module, sorted(public - exported))


def _defined_names(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def test_the_guard_modules_are_pure() -> None:
    for path in sorted(PACKAGE.glob("*.py")):
        if path.name == "embedding.py":  # loads the optional model, lazily
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                assert module in PURE_IMPORTS or module.startswith("relay.guard"), (
                    f"{path.name} imports {module}"
                )


def test_the_embedding_scorer_keeps_its_old_import_path_and_loads_on_demand() -> None:
    from relay import guard_embedding

    assert guard_embedding is embedding
    code = "import sys, relay.guard; print('relay.guard.embedding' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
