"""Code that changes how tests run without touching a configuration file (SPEC §9 step 4,
``test_infra``): start-up hooks, modules that shadow the test runner or the standard library,
and code that reaches into pytest's internals.

* **start-up hooks**: ``sitecustomize.py``, ``usercustomize.py`` (any change), and ``*.pth``
  files with an executable (``import``) line, new or changed anywhere in the tree. Files git
  sees are compared with the base commit; with the goal's start time known, the whole tree
  (ignored folders such as ``.venv`` too, ``.git`` aside) is walked for such files whose
  inode changed (``st_ctime``, which ``touch`` cannot set back) since the goal started.
* **shadowing modules**: a module (``X.py``, ``X.pyc``, an extension module) or package
  (``X/__init__.py``) added in a folder that is not itself a package, named like the test
  runner (``pytest``, ``_pytest``, ``pluggy``, ``py``, relay's plugin) or a standard-library
  module (``sys.stdlib_module_names``).
* **pytest internals**: new code lines (comments and string contents aside) in a changed
  Python file other than ``conftest.py`` that import ``_pytest``, define a pytest hook
  (``def pytest_…`` other than ``pytest_generate_tests`` in a test module), set
  ``pytest_plugins``, use plugin machinery (``hookimpl``, ``hookwrapper``, ``pluggy``,
  ``pluginmanager``, ``ihook``), build or rewrite reports (``TestReport``, ``CallInfo``,
  ``CollectReport``), patch the ``pytest`` module (``setattr(pytest, …)``, ``pytest.x = …``,
  ``sys.modules`` with a pytest name), end the session (``pytest.exit(``), skip or xfail from
  code that is not a test file (``pytest.skip(``, ``pytest.xfail(``, ``pytest.importorskip(``),
  or name relay's plugin or its variables.
"""

from __future__ import annotations

import io
import os
import re
import sys
import tokenize
from collections import Counter
from collections.abc import Callable, Iterator
from importlib.machinery import all_suffixes
from pathlib import Path, PurePosixPath

from relay.fsread import read_regular_text
from relay.pytest_report import PLUGIN_MODULE, RUNNER_MODULES
from relay.testfiles import ignored, is_test_file, is_test_module

__all__ = [
    "SHADOWED",
    "internals_hits",
    "is_startup_file",
    "recent_startup_files",
    "shadowed_module",
    "startup_problem",
]

STARTUP_MODULES = frozenset(
    "abc argparse array ast atexit base64 bdb binascii bisect bz2 calendar codecs collections "
    "contextlib copy copyreg csv dataclasses datetime decimal dis email encodings enum errno "
    "fcntl fnmatch functools gc genericpath gettext glob hashlib heapq html importlib inspect "
    "io ipaddress itertools json keyword linecache locale logging lzma marshal math ntpath "
    "numbers opcode operator os pathlib platform posixpath pprint pyexpat quopri random re "
    "reprlib select selectors shlex shutil signal site socket stat string struct subprocess "
    "tempfile textwrap threading time token tokenize traceback types typing unicodedata urllib "
    "uuid warnings weakref xml zipfile zipimport zlib".split()
) & frozenset(sys.stdlib_module_names)
"""The standard-library modules that pytest, pluggy and relay's plugin import when a pytest
run starts (measured with Python 3.11 and pytest 8). A module of the tree with one of these
names replaces it inside the test runner itself (``python -m pytest`` puts the folder first on
the path), which can forge relay's report; other standard-library names (``statistics.py``,
``queue.py``) are the project's own choice and shadow nothing the runner uses."""

SHADOWED = frozenset(RUNNER_MODULES) | STARTUP_MODULES
"""Module names that a new module of the tree must not take."""

_MODULE_SUFFIXES = tuple(sorted(set(all_suffixes()), key=len, reverse=True))


STANDARD_PTH = re.compile(
    r"^(?:__editable__\.[\w.+-]+\.pth|distutils-precedence\.pth|_virtualenv\.pth|"
    r"[\w.-]+-nspkg\.pth)$"
)
"""Names of the ``.pth`` files installers write (an editable install, setuptools' distutils
shim, virtualenv, namespace packages): a rebuilt environment is no tampering. Inside the sandbox
virtual environments of the tree are read-only anyway."""


def is_startup_file(name: str) -> bool:
    """Whether a file of this name runs when Python starts (where it is on a site path)."""
    return name in ("sitecustomize.py", "usercustomize.py") or name.endswith(".pth")


def startup_problem(name: str, text: str | None) -> str | None:
    """Why a new or changed start-up file is a finding, or None (a ``.pth`` file of path lines
    only: they are appended after the installed packages and run nothing)."""
    if name.endswith(".pth"):
        if STANDARD_PTH.match(name):
            return None  # what pip, setuptools and virtualenv write into an environment
        runs = [ln for ln in (text or "").splitlines() if re.match(r"import[ \t]", ln)]
        if text is not None and not runs:
            return None
        return "a .pth file with an import line: Python runs it at start-up, before any test"
    return f"{name} runs at Python start-up, before any test"


_WALK_SKIPPED = frozenset(
    {".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", "node_modules"}
)


def recent_files(root: Path, since: float) -> Iterator[tuple[str, str]]:
    """``(repo-relative path, file name)`` of every file or symlink under ``root`` (ignored
    folders too; not ``.git`` nor byte-code and tool caches) whose inode changed at or after
    ``since`` (UNIX seconds; ``st_ctime``, which ``touch`` cannot set back)."""
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in _WALK_SKIPPED:
                        stack.append(Path(entry.path))
                    continue
                recent = entry.stat(follow_symlinks=False).st_ctime >= since
            except OSError:
                continue
            if recent:
                yield Path(entry.path).relative_to(root).as_posix(), entry.name


def recent_startup_files(root: Path, since: float) -> Iterator[tuple[str, str | None]]:
    """``(repo-relative path, problem)`` of the start-up files anywhere under ``root`` (ignored
    folders too; not ``.git``) whose inode changed at or after ``since`` (UNIX seconds)."""
    for rel, name in recent_files(root, since):
        if is_startup_file(name):
            text = read_regular_text(root / rel)  # a planted FIFO or device is never opened
            yield rel, startup_problem(name, text)


def _module_name(file_name: str) -> str | None:
    for suffix in _MODULE_SUFFIXES:
        if file_name.endswith(suffix) and len(file_name) > len(suffix):
            return file_name[: -len(suffix)].split(".", 1)[0]
    return None


def shadowed_module(
    root: Path, path: str, imported: Callable[[str], bool] | None = None
) -> str | None:
    """The name of the test-runner or standard-library module that the added file ``path``
    (repo-relative) would shadow, or None. The importable name is that of the top package of
    the chain of packages (folders with ``__init__.py``) holding the file, or of the file itself
    in a folder that is no package. A standard-library name outside :data:`STARTUP_MODULES`
    counts only when ``imported(name)`` says the project's code imported that module at the
    base commit (a ``statistics.py`` that replaces the ``statistics`` the code under test uses)."""
    parts = PurePosixPath(path).parts
    if "__pycache__" in parts or ignored(path):
        return None
    folder = len(parts) - 1  # index of the file; parts[:folder] is its folder
    top = folder
    while top > 0 and any(
        (root.joinpath(*parts[:top]) / f"__init__{s}").exists() for s in (".py", ".pyc")
    ):
        top -= 1
    name = _module_name(parts[-1]) if top == folder else parts[top]
    if name in SHADOWED:
        return name
    if name in sys.stdlib_module_names and imported is not None and imported(name):
        return name
    return None


_INTERNALS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), what)
    for p, what in (
        (r"\b_pytest\b", "uses pytest's internal package _pytest"),
        (r"\bpytest_plugins\b", "loads pytest plugins (pytest_plugins)"),
        (
            r"\b(?:hookimpl|hookwrapper|HookimplMarker|pluggy|pluginmanager|ihook)\b",
            "uses pytest's plugin machinery",
        ),
        (r"\b(?:TestReport|CallInfo|CollectReport)\b", "builds or changes pytest's reports"),
        (r"\bsetattr\s*\(\s*pytest\s*,|\bpytest\s*\.\s*\w+\s*=(?!=)", "patches the pytest module"),
        (r"\bpytest\s*\.\s*exit\s*\(", "ends the pytest session (pytest.exit)"),
    )
)
_HOOK = re.compile(r"\bdef\s+(pytest_\w+)\s*\(|^\s*(pytest_\w+)\s*(?::[^=]*)?=(?!=)")
_SKIP_CALL = re.compile(r"\bpytest\s*\.\s*(?:skip|xfail|importorskip)\s*\(")
_SYS_MODULES = re.compile(r"\bsys\s*\.\s*modules\b")
_PYTEST_NAME = re.compile(r"\b(?:_?pytest|pluggy)\b")
_RELAY_NAMES = re.compile(rf"{PLUGIN_MODULE}|RELAY_AUDIT_")


def _code_lines(text: str) -> dict[int, tuple[str, str]]:
    """``{line: (code, strings)}``: each line's code with string contents and comments
    removed, and the text of its strings (tokenized; a file that does not tokenize is taken
    line by line with ``#`` comments cut)."""
    out: dict[int, tuple[str, str]] = {}

    def add(line: int, code: str = "", strings: str = "") -> None:
        c, s = out.get(line, ("", ""))
        out[line] = (c + code, s + strings)

    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            kind = tok.type
            if kind == tokenize.COMMENT or kind in (tokenize.NL, tokenize.NEWLINE):
                continue
            if kind == tokenize.STRING or kind == getattr(tokenize, "FSTRING_MIDDLE", -1):
                add(tok.start[0], '""', tok.string + " ")
            else:
                add(tok.start[0], tok.string + " ")
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return {i: (ln.split("#", 1)[0], ln) for i, ln in enumerate(text.splitlines(), 1)}
    return out


def _hits(path: str, text: str | None) -> list[tuple[int, str, str]]:
    """``(line, key, what)`` of each internals rule a Python text breaks (``key``: the
    normalised code line, to compare base and now)."""
    if not text:
        return []
    test_module = is_test_module(path)
    test_file = is_test_file(path)
    raw = text.splitlines()
    out = []
    for line, (code, strings) in sorted(_code_lines(text).items()):
        key = " ".join(raw[line - 1].split()) if line <= len(raw) else code
        found: list[str] = [what for pattern, what in _INTERNALS if pattern.search(code)]
        for hook in (a or b for a, b in _HOOK.findall(code)):
            if hook == "pytest_plugins" or (hook == "pytest_generate_tests" and test_module):
                continue  # pytest_plugins has its own rule
            found.append(f"defines the pytest hook {hook} outside conftest.py")
        if not test_file and _SKIP_CALL.search(code):
            found.append("skips or xfails tests from code that is not a test file")
        if _SYS_MODULES.search(code) and _PYTEST_NAME.search(strings):
            found.append("replaces pytest in sys.modules")
        if _RELAY_NAMES.search(code + strings):
            found.append("refers to relay's pytest plugin or its variables")
        out += [(line, key, what) for what in dict.fromkeys(found)]
    return out


def internals_hits(path: str, before: str | None, after: str | None) -> list[tuple[int, str]]:
    """``(line, what)`` of the pytest-internals rules that new code of ``path`` breaks:
    hits now that the base text did not have (counted per line text)."""
    if not path.endswith(".py") or PurePosixPath(path).name == "conftest.py" or ignored(path):
        return []
    pool = Counter((key, what) for _, key, what in _hits(path, before))
    out = []
    for line, key, what in _hits(path, after):
        if pool[(key, what)] > 0:
            pool[(key, what)] -= 1
        else:
            out.append((line, what))
    return out
