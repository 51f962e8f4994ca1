"""The Python rules of the suspicious-code scan (SPEC §9 step 4, §14; issue 27;
docs/audit.md "Suspicious code"): constructs in code that is not a test that a program under
test has no business with, but that forge or detect a test run.

Read from the syntax tree of the new text (``ast``), names resolved through the file's imports
(``import os as o``, ``from os import environ``, ``getattr(os, "_exit")``,
``__import__("sys")``), so that ``os.environ.get("HOME")`` and a local variable called ``os``
are told apart. Pure: no I/O. :func:`python_hits` gives every hit of a text with the lines its
evidence spans; :mod:`relay.audit_suspicious` keeps those on lines the change added.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator

from relay.suspicious_probes import Hit, Tree, hit, probe_hits

__all__ = ["python_hits"]

_SOFT_EXITS = frozenset({"sys.exit", "exit", "quit", "builtins.exit", "builtins.quit"})
_HARD_EXITS = frozenset(
    {"os._exit", "posix._exit", "os.abort", "signal.raise_signal", "signal.pthread_kill"}
)
_KILLS = frozenset({"os.kill", "os.killpg"})
_SELF = frozenset({"os.getpid", "os.getppid", "os.getpgid", "os.getpgrp"})
_MAIN_FUNCTIONS = frozenset({"main", "_main", "cli", "run_cli"})

_TRACE = frozenset(
    {
        "sys.settrace",
        "sys.setprofile",
        "sys.call_tracing",
        "sys.addaudithook",
        "threading.settrace",
        "threading.setprofile",
        "threading.settrace_all_threads",
        "threading.setprofile_all_threads",
        "sys.monitoring.use_tool_id",
        "sys.monitoring.register_callback",
        "sys.monitoring.set_events",
        "sys.monitoring.set_local_events",
    }
)
_IMPORT_HOOKS = frozenset({"sys.meta_path", "sys.path_hooks", "sys.path_importer_cache"})
_MUTATORS = frozenset(
    {"insert", "append", "extend", "remove", "pop", "popitem", "clear", "update", "setdefault"}
    | {"__setitem__", "__delitem__"}
)
_GC = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents"})
_PYTEST_INTERNALS = frozenset(
    "Session Config Item Collector StashKey Stash main console_main PytestPluginManager".split()
)
_CTYPES = frozenset(
    {"ctypes.pythonapi", "ctypes.PyDLL", "ctypes.pydll", "ctypes.py_object"}
    | {"ctypes.CDLL", "ctypes.cdll.LoadLibrary"}
)
_STDLIB_STORES_ALLOWED = frozenset(
    "sys.stdout sys.stderr sys.stdin sys.path sys.argv sys.excepthook sys.displayhook "
    "sys.dont_write_bytecode sys.tracebacklimit sys.ps1 sys.ps2".split()
)
_FD_CALLS = frozenset(
    "os.write os.read os.fdopen os.fstat os.dup os.dup2 os.lseek os.close os.ftruncate os.fsync "
    "os.set_inheritable os.get_inheritable os.set_blocking os.pwrite os.pread os.writev "
    "os.sendfile fcntl.fcntl fcntl.flock fcntl.ioctl socket.fromfd socket.socket io.open open "
    "builtins.open io.FileIO mmap.mmap".split()
)


def _exit_kind(tree: Tree, node: ast.AST) -> str | None:
    """``soft`` (``sys.exit``: a test sees ``SystemExit``), ``hard`` (``os._exit``, a
    ``_exit`` of a C library, killing its own or its parent process) or None."""
    if isinstance(node, ast.Raise) and node.exc is not None:
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        return "soft" if tree.qualname(exc) in ("SystemExit", "builtins.SystemExit") else None
    if not isinstance(node, ast.Call):
        return None
    name = tree.qualname(node.func)
    if name in _SOFT_EXITS:
        return "soft"
    if name in _HARD_EXITS or (isinstance(node.func, ast.Attribute) and node.func.attr == "_exit"):
        return "hard"
    if name in _KILLS and node.args:
        target = node.args[0]
        if isinstance(target, ast.Constant) and target.value == 0:
            return "hard"
        if isinstance(target, ast.Call) and tree.qualname(target.func) in _SELF:
            return "hard"
    return None


def _spelled(tree: Tree, node: ast.AST) -> str:
    """How an exit reads, for a reason: ``os._exit``, ``raise SystemExit``."""
    if isinstance(node, ast.Raise):
        return "raise SystemExit"
    assert isinstance(node, ast.Call)
    return tree.qualname(node.func) or ast.unparse(node.func)


def _handlers(tree: Tree) -> Iterator[tuple[ast.AST, ast.AST | None, str]]:
    """``(registration, handler, what)`` of each exit or signal handler the module installs:
    ``atexit.register(f)``, ``@atexit.register``, ``signal.signal(sig, f)``; ``f`` a lambda
    or a function of the module named so (None: one defined elsewhere)."""
    for node in tree.nodes:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for deco in node.decorator_list:
                if tree.qualname(deco) == "atexit.register":
                    yield deco, node, "an exit handler (atexit)"
        if not isinstance(node, ast.Call):
            continue
        name = tree.qualname(node.func)
        if name == "atexit.register" and node.args:
            target, what = node.args[0], "an exit handler (atexit)"
        elif name == "signal.signal" and len(node.args) > 1:
            target, what = node.args[1], "a signal handler"
        else:
            continue
        functions = tree.functions.get(target.id, []) if isinstance(target, ast.Name) else []
        for fn in [target] if isinstance(target, ast.Lambda) else functions or [None]:
            yield node, fn, what


def _exit_hits(tree: Tree, main_file: bool) -> Iterator[Hit]:
    """Exits at import time (but ``sys.exit`` when an import failed), in exit and signal
    handlers, and hard exits anywhere but in a ``main()``, under ``if __name__ ==
    "__main__":`` or in a process the code forked."""
    handled: set[ast.AST] = set()
    for reg, handler, what in _handlers(tree):
        if what.startswith("an exit"):
            yield hit(reg, "registers an exit handler (atexit): it runs after the tests ended")
        for node in ast.walk(handler) if handler is not None else ():
            if _exit_kind(tree, node) is not None:
                handled.add(node)
                reason = f"ends the process ({_spelled(tree, node)}) from {what}"
                yield hit(node, reason, (reg,))
                if what == "a signal handler":
                    yield hit(reg, "installs a signal handler that ends the process")
    for node in tree.nodes:
        kind = _exit_kind(tree, node)
        if kind is None or node in handled or tree.under_main_guard(node):
            continue
        fn = tree.function_of(node)
        if fn is None and kind == "soft" and _missing_dependency(tree, node):
            continue  # "install the extra" and SystemExit: the import fails, loudly
        if fn is None and not main_file:
            reason = f"ends the process at import time ({_spelled(tree, node)})"
            yield hit(node, reason, tree.headers(node))
        elif fn is not None and kind == "hard" and not _main_or_fork(tree, fn):
            reason = f"ends the process at once ({_spelled(tree, node)}), past pytest's own end"
            yield hit(node, reason)


def _missing_dependency(tree: Tree, node: ast.AST) -> bool:
    """Whether ``node`` is in an ``except ImportError:`` (or ``ModuleNotFoundError``)."""
    for _, parent in tree.ancestors(node):
        if isinstance(parent, ast.ExceptHandler) and parent.type is not None:
            kinds = parent.type.elts if isinstance(parent.type, ast.Tuple) else [parent.type]
            names = {tree.qualname(k) or getattr(k, "id", "") for k in kinds}
            if names & {"ImportError", "ModuleNotFoundError"}:
                return True
    return False


def _main_or_fork(tree: Tree, fn: ast.AST) -> bool:
    """Whether ``fn`` is a program's ``main()`` or forks (its ``os._exit`` ends the child)."""
    if getattr(fn, "name", "") in _MAIN_FUNCTIONS:
        return True
    calls = (n for n in ast.walk(fn) if isinstance(n, ast.Call))
    return any(tree.qualname(c.func) in ("os.fork", "os.forkpty") for c in calls)


def _stored(node: ast.AST) -> bool:
    """Whether ``node`` is written: an assignment or ``del`` target (also ``x[k] = …``)."""
    return isinstance(getattr(node, "ctx", None), ast.Store | ast.Del)


def _mutated(tree: Tree, node: ast.AST, names: frozenset[str]) -> str | None:
    """The name in ``names`` that ``node`` changes: ``X = …``, ``X[k] = …``, ``del X[k]``,
    ``X.insert(…)`` (one of :data:`_MUTATORS`); None when it does not."""
    if isinstance(node, ast.Attribute | ast.Name) and _stored(node):
        name = tree.qualname(node)
        return name if name in names else None
    if isinstance(node, ast.Subscript) and _stored(node):
        name = tree.qualname(node.value)
        if name == "sys.modules" and isinstance(node.slice, ast.Name):
            return None if node.slice.id == "__name__" else name  # a module replacing itself
        return name if name in names else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        name = tree.qualname(node.func.value)
        if name in names and node.func.attr in _MUTATORS:
            return name
    return None


def _patch_hits(tree: Tree) -> Iterator[Hit]:
    """Changes to ``sys.modules``, import hooks, ``builtins`` and the standard library."""
    for node in tree.nodes:
        name = _mutated(tree, node, frozenset({"sys.modules"}))
        if name is not None:
            yield hit(node, "changes sys.modules: replaces or removes modules the tests import")
            continue
        name = _mutated(tree, node, _IMPORT_HOOKS)
        if name is not None:
            yield hit(node, f"installs an import hook ({name}): it decides what later imports get")
            continue
        patched = _patched_module(tree, node)
        if patched is not None:
            yield hit(node, f"patches {patched}, which the test runner uses too")


def _patched_module(tree: Tree, node: ast.AST) -> str | None:
    """What ``node`` patches of ``builtins`` or a standard-library module: ``builtins.open =
    …``, ``__builtins__["x"] = …``, ``setattr(json, "dumps", …)``, ``os._exit = …``."""
    target: str | None = None
    if isinstance(node, ast.Attribute) and _stored(node):
        target = tree.qualname(node)
    elif isinstance(node, ast.Subscript) and _stored(node):
        key = node.slice.value if isinstance(node.slice, ast.Constant) else "…"
        if tree.qualname(node.value) in ("builtins", "builtins.__dict__"):
            target = f"builtins.{key}"
    elif isinstance(node, ast.Call) and tree.qualname(node.func) in (
        "setattr",
        "delattr",
        "builtins.setattr",
        "builtins.delattr",
    ):
        base = tree.qualname(node.args[0]) if node.args else None
        if base is not None and base.split(".")[0] in sys.stdlib_module_names:
            attr = node.args[1] if len(node.args) > 1 else None
            what = attr.value if isinstance(attr, ast.Constant) else "…"
            target = f"{base}.{what}"
    if target is None or target in _STDLIB_STORES_ALLOWED or target.startswith("pytest."):
        return None  # pytest's module: relay.infra_code's rule
    root = target.split(".")[0]
    return target if root in sys.stdlib_module_names and "." in target else None


def _reference_hits(tree: Tree) -> Iterator[Hit]:
    """Tracing hooks, the garbage collector's object lists, ctypes into the interpreter, and
    pytest's session objects (the scan reads code that is not a test)."""
    for node in tree.nodes:
        if not isinstance(node, ast.Name | ast.Attribute | ast.Call):
            continue
        name = tree.qualname(node)
        if name in _TRACE:
            yield hit(node, f"installs a tracing hook ({name}): it sees every frame of the tests")
        elif name in _GC:
            yield hit(node, f"searches the interpreter's live objects ({name})")
        elif name in _CTYPES and _ctypes_into_interpreter(tree, node, name):
            yield hit(node, f"reaches into the interpreter or the C library ({name})")
        elif name and name.startswith("pytest.") and name.split(".")[1] in _PYTEST_INTERNALS:
            yield hit(node, f"reaches into the test runner ({name}) from code under test")


def _ctypes_into_interpreter(tree: Tree, node: ast.AST, name: str) -> bool:
    """``ctypes.pythonapi`` and friends always; ``CDLL(None)`` (the process's own symbols)."""
    if not name.endswith(("CDLL", "LoadLibrary")):
        return True
    call = tree.parents.get(node)
    if not isinstance(call, ast.Call) or call.func is not node:
        return False
    return not call.args or (isinstance(call.args[0], ast.Constant) and call.args[0].value is None)


_PROC = re.compile(r"^/proc/(?:self|thread-self|\d+|\{\})(/.*)?$")
_PROC_FINE = frozenset({"status", "statm", "stat", "limits", "io", "smaps_rollup"})
_TMP = re.compile(r"^/(?:tmp|var/tmp|dev/shm)(?:/|$)")
_RUNNER_FILES = re.compile(r"pytest-of-|\.pytest_cache|\.git/relay\b")


def _path_reason(text: str) -> str | None:
    """Why a string literal that names a path is suspicious, or None."""
    m = _PROC.match(text)
    if text in ("/proc", "/proc/") or (m and (m.group(1) or "").strip("/") not in _PROC_FINE):
        return f"names {text!r}: looks at the process's open files or at other processes"
    if re.match(r"^/dev/fd(?:/|$)", text):
        return f"names {text!r}: looks at the process's open files"
    if _TMP.match(text):
        return f"names {text!r}: writes outside the repository, where the runner's files are"
    if _RUNNER_FILES.search(text):
        return f"names {text!r}: the test runner's or relay's own files"
    return None


def _path_hits(tree: Tree) -> Iterator[Hit]:
    """String literals (not docstrings) naming ``/proc``, ``/dev/fd``, ``/tmp`` or the test
    runner's files, and the shared temporary folder (``tempfile.gettempdir()``)."""
    for node in tree.nodes:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if isinstance(tree.parents.get(node), ast.Expr | ast.JoinedStr):
                continue  # a docstring, or a piece of an f-string (below)
            text = node.value
        elif isinstance(node, ast.JoinedStr):
            parts = (str(v.value) if isinstance(v, ast.Constant) else "{}" for v in node.values)
            text = "".join(parts)
        elif isinstance(node, ast.Name | ast.Attribute):
            name = tree.qualname(node)
            if name in ("tempfile.gettempdir", "tempfile.gettempdirb", "tempfile.tempdir"):
                yield hit(node, f"uses the shared temporary folder ({name})")
            continue
        else:
            continue
        reason = _path_reason(str(text))
        if reason is not None:
            yield hit(node, reason)


def _fd_number(tree: Tree, arg: ast.AST) -> str | None:
    """The descriptor ``arg`` names when this code cannot have opened it: a number from 3
    on, a number parsed at run time (``int(…)``), a loop over ``range(…)``."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, int) and arg.value >= 3:
        return str(arg.value)
    if isinstance(arg, ast.Call) and tree.qualname(arg.func) in ("int", "builtins.int"):
        return "a number read at run time"
    if isinstance(arg, ast.Name) and arg.id in tree.range_names:
        return "numbers counted in a loop"
    return None


def _fd_hits(tree: Tree) -> Iterator[Hit]:
    """Reads and writes of file descriptors the code did not open (inherited ones)."""
    for node in tree.nodes:
        if not isinstance(node, ast.Call) or tree.qualname(node.func) not in _FD_CALLS:
            continue
        args = list(node.args[:1]) + [k.value for k in node.keywords if k.arg == "fileno"]
        for arg in args:
            fd = _fd_number(tree, arg)
            if fd is not None:
                name = tree.qualname(node.func)
                yield hit(node, f"{name} on file descriptor {fd}, which it did not open")


def python_hits(path: str, text: str) -> list[Hit]:
    """Every hit of the Python rules in ``text`` (lines of the whole text; the caller keeps
    the new ones).

    Args:
        path: the file's repo-relative path (``__main__.py`` is a program: exits at its top
            level are fine).
        text: the file's new text (a file that is not a test file).

    Raises:
        SyntaxError, ValueError: ``text`` is not Python this interpreter parses.
    """
    tree = Tree(ast.parse(text))
    main_file = path.rsplit("/", 1)[-1] == "__main__.py"
    hits: list[Hit] = []
    for found in (
        _exit_hits(tree, main_file),
        _patch_hits(tree),
        _reference_hits(tree),
        _path_hits(tree),
        _fd_hits(tree),
        probe_hits(tree),
    ):
        hits += found
    return hits
