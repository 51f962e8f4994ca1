"""The syntax tree the suspicious-code scan reads (:class:`Tree`: parents, names resolved
through imports) and its probe rule: code that looks for the test runner or relay's audit
(SPEC §9 step 4, §14; issue 27; docs/audit.md "Suspicious code").

A **probe** is a place (the environment, ``sys.modules``, the call stack, the command line)
read together with a name of the test run: ``os.environ.get("PYTEST_CURRENT_TEST")``,
``any(k.startswith("RELAY_") for k in os.environ)``, ``"pytest" in sys.modules``,
``any("_pytest" in f.filename for f in inspect.stack())``. Where the name must appear: in the
same statement, in the condition of an ``if``/``while``, or anywhere in a loop or a
comprehension that goes through the place. ``os.environ.get("HOME")`` is no probe. Pure: no
I/O.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

__all__ = ["Hit", "Tree", "hit", "probe_hits"]

_BUILTIN_NAMES = frozenset(
    "exit quit open setattr getattr delattr int vars __import__ SystemExit".split()
)


@dataclass(frozen=True)
class Hit:
    """One construct a rule found: the ``line`` it is reported at, why (``reason``), and the
    ``lines`` its evidence spans (it counts when the change added one of them)."""

    line: int
    reason: str
    lines: frozenset[int]


def hit(node: ast.AST, reason: str, also: Iterable[ast.AST] = ()) -> Hit:
    """A :class:`Hit` at ``node`` (its whole span is evidence) and the first lines of the
    nodes ``also`` (a handler's registration, the ``if`` around an exit)."""
    first = getattr(node, "lineno", 1)
    last = getattr(node, "end_lineno", None) or first
    lines = set(range(first, last + 1)) | {getattr(n, "lineno", first) for n in also}
    return Hit(first, reason, frozenset(lines))


def _literal(node: ast.AST) -> bool:
    """Whether ``node`` is a string (or bytes) literal."""
    return isinstance(node, ast.Constant) and isinstance(node.value, str | bytes)


def _text(node: ast.Constant) -> str:
    value = node.value
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


def _is_main_test(test: ast.AST) -> bool:
    """Whether ``test`` is ``__name__ == "__main__"`` (either way round)."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return False
    sides = [test.left, test.comparators[0]]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    mains = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return isinstance(test.ops[0], ast.Eq) and bool(names) and bool(mains)


class Tree:
    """A parsed module with what the rules ask of it.

    Args:
        module: the parsed module (``ast.parse``).
    """

    def __init__(self, module: ast.Module) -> None:
        self.nodes: list[ast.AST] = list(ast.walk(module))
        self.parents: dict[ast.AST, ast.AST] = {}
        self.functions: dict[str, list[ast.AST]] = {}
        self.aliases: dict[str, str] = {}
        self.range_names: set[str] = set()
        self.constants: dict[str, str] = {}
        for node in self.nodes:
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self.functions.setdefault(node.name, []).append(node)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                self._imported(node)
            elif isinstance(node, ast.For | ast.comprehension):
                self._counted(node.target, node.iter)
        self._assigned()

    def _imported(self, node: ast.Import | ast.ImportFrom) -> None:
        for alias in node.names:
            if isinstance(node, ast.Import):
                bound = alias.asname or alias.name.split(".")[0]
                self.aliases[bound] = alias.name if alias.asname else bound
            elif node.level == 0 and node.module and alias.name != "*":
                self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def _counted(self, target: ast.AST, iterable: ast.AST) -> None:
        """Names bound by a loop over ``range(…)`` (numbers, e.g. file descriptors)."""
        func = iterable.func if isinstance(iterable, ast.Call) else None
        if isinstance(func, ast.Name) and func.id == "range" and isinstance(target, ast.Name):
            self.range_names.add(target.id)

    def _assigned(self) -> None:
        """``env = os.environ``, ``_exit = os._exit``: the name stands for what it was given
        (two passes, for a chain of such assignments); ``NAME = "text"``: a constant."""
        for _ in range(2):
            for node in self.nodes:
                if isinstance(node, ast.Assign) and len(node.targets) == 1:
                    target = node.targets[0]
                    if isinstance(target, ast.Name) and _literal(node.value):
                        self.constants[target.id] = _text(node.value)
                    if isinstance(target, ast.Name) and target.id not in self.aliases:
                        name = self.qualname(node.value)
                        if name is not None:
                            self.aliases[target.id] = name

    def qualname(self, node: ast.AST) -> str | None:
        """The dotted name ``node`` stands for through the imports (``o.environ`` after
        ``import os as o`` is ``os.environ``; ``getattr(os, "_exit")`` is ``os._exit``;
        ``__import__("sys")`` is ``sys``), a builtin's name, or None."""
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return self.aliases[node.id]
            if node.id == "__builtins__":
                return "builtins"
            return node.id if node.id in _BUILTIN_NAMES else None
        if isinstance(node, ast.Attribute):
            base = self.qualname(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call) and node.args:
            func = self.qualname(node.func)
            first = node.args[0]
            if func in ("getattr", "builtins.getattr") and len(node.args) >= 2:
                attr = node.args[1]
                base = self.qualname(first)
                if base and isinstance(attr, ast.Constant) and isinstance(attr.value, str):
                    return f"{base}.{attr.value}"
            if func in ("__import__", "importlib.import_module") and isinstance(
                first, ast.Constant
            ):
                text = str(first.value)
                return text.split(".")[0] if func == "__import__" else text
        return None

    def ancestors(self, node: ast.AST) -> Iterator[tuple[ast.AST, ast.AST]]:
        """``(child, parent)`` pairs from ``node`` up to the module."""
        child, parent = node, self.parents.get(node)
        while parent is not None:
            yield child, parent
            child, parent = parent, self.parents.get(parent)

    def function_of(self, node: ast.AST) -> ast.AST | None:
        """The innermost function or lambda around ``node`` (None: it runs at import)."""
        for _, parent in self.ancestors(node):
            if isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                return parent
        return None

    def under_main_guard(self, node: ast.AST) -> bool:
        """Whether ``node`` is in the body of an ``if __name__ == "__main__":``."""
        return any(
            isinstance(p, ast.If) and _is_main_test(p.test) and c in p.body
            for c, p in self.ancestors(node)
        )

    def headers(self, node: ast.AST) -> tuple[ast.AST, ...]:
        """The statements around ``node`` (their first lines: ``if True:`` around an exit)."""
        return tuple(p for _, p in self.ancestors(node) if isinstance(p, ast.stmt))


_ENV = frozenset({"os.environ", "os.environb", "os.getenv", "os.getenvb", "os.putenv"})
_MODULES = frozenset(
    {"sys.modules", "__import__", "importlib.import_module", "importlib.util.find_spec"}
)
_FRAMES = frozenset(
    "inspect.stack inspect.getouterframes inspect.currentframe inspect.trace sys._getframe "
    "sys._current_frames traceback.extract_stack traceback.walk_stack traceback.format_stack "
    "sys.argv sys.orig_argv".split()
)
_RUNNER = re.compile(r"(?i)py\.?test|pluggy|xdist|conftest|unittest|relay|audit")
_ENV_WORDS = re.compile(
    r"(?i)py_?test|pluggy|xdist|relay|audit|report|(?:^|_)ci(?:_|$)|github_actions|gitlab|"
    r"jenkins|buildkite|travis|circleci|teamcity"
)
_TESTS = re.compile(r"(?i)(?:^|[/\\_.])tests?(?:[/\\_.]|$)")
"""A test module's or folder's name, which code reading its callers looks for."""
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MODULE_NAME = re.compile(r"^[A-Za-z_][\w.]*$")


def _kind(tree: Tree, node: ast.AST) -> tuple[str, str] | None:
    """``(place, kind)`` when ``node`` reads a place probes look at (``env``, ``modules``,
    ``frames``), else None. A name given such a place's value (``frames = inspect.stack()``,
    ``env = dict(os.environ)``) reads it too."""
    name = tree.qualname(node) if isinstance(node, ast.Name | ast.Attribute | ast.Call) else None
    for places, kind in ((_ENV, "env"), (_MODULES, "modules"), (_FRAMES, "frames")):
        if name in places:
            return name, kind
    return None


def _context(tree: Tree, node: ast.AST) -> ast.AST:
    """Where a probe's name must appear: the whole loop or comprehension that goes through
    ``node``; the call or subscript that reads it with a literal
    (``os.environ.get("HOME")``, ``os.environ["X"]``); the comparison it is in
    (``"pytest" in sys.modules``); else the condition of the ``if``/``while`` it is in, or its
    statement. So ``{"home": os.environ.get("HOME"), "report": …}`` is no probe."""
    for child, parent in tree.ancestors(node):
        if isinstance(parent, ast.comprehension) and child is parent.iter:
            return tree.parents.get(parent, parent)
        if isinstance(parent, ast.For | ast.AsyncFor) and child is parent.iter:
            return parent
        if isinstance(parent, ast.Call) and child is parent.func:
            if any(_literal(a) or _constant(tree, a) for a in parent.args):
                return parent
        elif isinstance(parent, ast.Subscript) and child is parent.value:
            if _literal(parent.slice) or _constant(tree, parent.slice):
                return parent
        elif isinstance(parent, ast.Compare):
            return parent
        if isinstance(parent, ast.stmt):
            return child if hasattr(parent, "body") else parent
    return node


def _constant(tree: Tree, node: ast.AST) -> bool:
    """Whether ``node`` is a name given a string literal (``_VAR = "PYTEST_CURRENT_TEST"``)."""
    return isinstance(node, ast.Name) and node.id in tree.constants


def _fold(tree: Tree, node: ast.AST) -> str | None:
    """The text of a string literal, of a name given one, or of such texts joined with
    ``+``."""
    if _literal(node):
        assert isinstance(node, ast.Constant)
        return _text(node)
    if _constant(tree, node):
        assert isinstance(node, ast.Name)
        return tree.constants[node.id]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _fold(tree, node.left), _fold(tree, node.right)
        return left + right if left is not None and right is not None else None
    return None


def _named(kind: str, text: str) -> bool:
    """Whether ``text`` names the test run for a probe of ``kind`` (for the call stack and
    the command line also a test module's or folder's name: ``test_``, ``/tests/``)."""
    if kind == "env":
        return bool(_IDENTIFIER.match(text) and _ENV_WORDS.search(text))
    if kind == "modules":
        return bool(_MODULE_NAME.match(text) and _RUNNER.search(text))
    return bool(_RUNNER.search(text) or _TESTS.search(text))


def _sources(tree: Tree) -> Iterator[tuple[ast.AST, str, str]]:
    """``(node, place, kind)`` of every read of a probed place; a name assigned such a
    place's value (``frames = inspect.stack()``) reads it wherever it is used."""
    given: dict[str, tuple[str, str]] = {}
    for node in tree.nodes:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
            if isinstance(target, ast.Name):
                inner = [value]
                if isinstance(value, ast.Call):
                    inner += [value.func, *value.args[:1]]
                    if isinstance(value.func, ast.Attribute):
                        inner.append(value.func.value)
                found = next((k for k in map(lambda n: _kind(tree, n), inner) if k), None)
                if found is not None:
                    given[target.id] = found
    for node in tree.nodes:
        found = _kind(tree, node)
        if found is None and isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            found = given.get(node.id)
        if found is not None:
            yield node, found[0], found[1]


def probe_hits(tree: Tree) -> Iterator[Hit]:
    """A hit for each read of the environment, ``sys.modules``, the call stack or the command
    line whose context (:func:`_context`) names the test runner, relay, its audit or report,
    or CI."""
    for node, place, kind in _sources(tree):
        context = _context(tree, node)
        for inner in ast.walk(context):
            text = _fold(tree, inner)
            if text is not None and _named(kind, text):
                reason = f"looks for the test run: reads {place} for {text!r}"
                yield hit(node, reason, (inner,))
                break
