"""The code's shape rules (issue 12): small modules, small functions, one public surface.

A module under ``relay/`` has at most ``MAX_MODULE_LINES`` lines; a function's body (from its
first statement after the docstring to its last line; the signature and docstring do not count)
at most ``MAX_FUNCTION_LINES``. ``relay.__all__`` names only what ``relay`` really provides.
"""

from __future__ import annotations

import ast
from pathlib import Path

import relay

PACKAGE = Path(relay.__file__).parent
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    body = node.body
    first = body[0]
    docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    if docstring and isinstance(first.value.value, str) and len(body) > 1:
        first = body[1]
    return (node.end_lineno or node.lineno) - first.lineno + 1


def test_no_module_is_over_the_line_limit() -> None:
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in _modules()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_no_function_is_over_the_line_limit() -> None:
    long = {}
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = _body_lines(node)
                if n > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}"] = n
    assert long == {}, f"function bodies over {MAX_FUNCTION_LINES} lines: {long}"


def test_the_public_api_is_what_all_names() -> None:
    missing = [name for name in relay.__all__ if not hasattr(relay, name)]
    assert missing == []
    assert len(set(relay.__all__)) == len(relay.__all__)
