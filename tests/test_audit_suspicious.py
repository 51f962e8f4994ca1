"""The suspicious-code scan (issue 27; relay.audit_suspicious, docs/audit.md "Suspicious
code"): constructs in changed code that is not a test that end, trace or detect the test run
are findings with their file and line; their honest counterparts are not."""

from __future__ import annotations

import textwrap

import pytest

from relay.audit_suspicious import (
    Suspicion,
    added_lines,
    scan_changes,
    scan_file,
    suspicious_check,
)


def found(new: str, old: str | None = None, path: str = "calc.py") -> list[tuple[int, str]]:
    """``(line, reason)`` of the findings of ``path`` changed from ``old`` to ``new``."""
    new = textwrap.dedent(new).lstrip("\n")
    old = textwrap.dedent(old).lstrip("\n") if old is not None else None
    return [(s.line, s.reason) for s in scan_file(path, old, new)]


def lines(new: str, old: str | None = None, path: str = "calc.py") -> list[int]:
    return sorted({line for line, _ in found(new, old, path)})


# --- what is flagged, at which line -------------------------------------------------------

FLAGGED = {
    "os._exit at import": ("import os\n\nos._exit(0)\n", [3], "at import time"),
    "sys.exit at import": ("import sys\nsys.exit(0)\n", [2], "at import time (sys.exit)"),
    "raise SystemExit at import": ("raise SystemExit(0)\n", [1], "raise SystemExit"),
    "exit under if True": ("import sys\nif True:\n    sys.exit(0)\n", [3], "at import time"),
    "os._exit when an import failed": (
        "import os\ntry:\n    import x\nexcept ImportError:\n    os._exit(0)\n",
        [5],
        "at import time",
    ),
    "exit in a class body": ("import os\nclass A:\n    os._exit(0)\n", [3], "at import time"),
    "getattr(os, '_exit')": ('import os\ngetattr(os, "_exit")(0)\n', [2], "os._exit"),
    "aliased os": ("import os as o\no._exit(0)\n", [2], "os._exit"),
    "from os import _exit": ("from os import _exit as bye\nbye(0)\n", [2], "os._exit"),
    "__import__('os')": ('__import__("os")._exit(0)\n', [1], "os._exit"),
    "os._exit in a library function": (
        "import os\n\n\ndef add(a, b):\n    os._exit(0)\n",
        [5],
        "past pytest's own end",
    ),
    "kill the parent": (
        "import os\n\n\ndef add(a, b):\n    os.kill(os.getppid(), 9)\n",
        [5],
        "os.kill",
    ),
    "atexit.register": (
        "import atexit\n\n\ndef bye():\n    pass\n\n\natexit.register(bye)\n",
        [8],
        "registers an exit handler",
    ),
    "atexit.register of an imported function": (
        "import atexit\nfrom app.report import flush\n\natexit.register(flush)\n",
        [4],
        "registers an exit handler",
    ),
    "@atexit.register": (
        "import atexit\n\n\n@atexit.register\ndef bye():\n    pass\n",
        [4],
        "registers an exit handler",
    ),
    "signal handler that exits": (
        "import os, signal\n\nsignal.signal(signal.SIGTERM, lambda *a: os._exit(0))\n",
        [3],
        "signal handler",
    ),
    "env: PYTEST_CURRENT_TEST": (
        'import os\n\nUNDER_TEST = "PYTEST_CURRENT_TEST" in os.environ\n',
        [3],
        "'PYTEST_CURRENT_TEST'",
    ),
    "env: getenv CI": ('import os\nQUIET = os.getenv("CI")\n', [2], "'CI'"),
    "env: from os import environ": (
        'from os import environ as e\nX = e.get("RELAY_SANDBOX")\n',
        [2],
        "RELAY_SANDBOX",
    ),
    "env: a loop over the environment": (
        "import os\nfor k in os.environ:\n    if k.startswith('RELAY_'):\n        pass\n",
        [2],
        "'RELAY_'",
    ),
    "env: a copy of the environment": (
        'import os\nenv = dict(os.environ)\nFLAG = env.get("AUDIT_DIR")\n',
        [3],
        "AUDIT_DIR",
    ),
    "env: a name put together": (
        'import os\nX = os.environ.get("PY" + "TEST_CURRENT_TEST")\n',
        [2],
        "PYTEST_CURRENT_TEST",
    ),
    "env: a name kept in a constant": (
        'import os\n_VAR = "PYTEST_CURRENT_TEST"\n\n\ndef f():\n    return os.getenv(_VAR)\n',
        [6],
        "PYTEST_CURRENT_TEST",
    ),
    "env: a variable's name ends in REPORT_DIR": (
        'import os\nD = [v for k, v in os.environ.items() if k.endswith("REPORT_DIR")]\n',
        [2],
        "REPORT_DIR",
    ),
    "pytest in sys.modules": (
        'import sys\n\n\ndef add(a, b):\n    if "pytest" in sys.modules:\n        return 5\n',
        [5],
        "reads sys.modules for 'pytest'",
    ),
    "a search of sys.modules": (
        'import sys\nA = any("audit" in name for name in sys.modules)\n',
        [2],
        "'audit'",
    ),
    "__import__ of the runner": ('M = __import__("pytest")\n', [1], "'pytest'"),
    "the command line": (
        'import sys\nT = any("pytest" in a for a in sys.argv)\n',
        [2],
        "sys.argv",
    ),
    "inspect.stack": (
        "import inspect\n\n\ndef add(a, b):\n"
        "    for f in inspect.stack():\n        if 'test' in f.filename:\n            return 5\n",
        [5],
        "inspect.stack",
    ),
    "frames kept in a name": (
        "import sys\nf = sys._getframe(1)\nT = 'pytest' in f.f_code.co_filename\n",
        [3],
        "sys._getframe",
    ),
    "sys.modules assignment": (
        'import sys\nsys.modules["json"] = object()\n',
        [2],
        "changes sys.modules",
    ),
    "sys.modules deletion": ('import sys\ndel sys.modules["json"]\n', [2], "sys.modules"),
    "sys.modules.pop": ('import sys\nsys.modules.pop("json", None)\n', [2], "sys.modules"),
    "import hook": ("import sys\nsys.meta_path.insert(0, object())\n", [2], "import hook"),
    "sys.settrace": ("import sys\nsys.settrace(lambda *a: None)\n", [2], "sys.settrace"),
    "sys.setprofile": ("import sys\nsys.setprofile(None)\n", [2], "sys.setprofile"),
    "threading.settrace": ("import threading\nthreading.settrace(print)\n", [2], "tracing"),
    "settrace through getattr": (
        'import sys\ngetattr(sys, "settrace")(print)\n',
        [2],
        "sys.settrace",
    ),
    "builtins attribute": ("import builtins\nbuiltins.open = print\n", [2], "builtins.open"),
    "setattr on builtins": (
        'import builtins\nsetattr(builtins, "print", len)\n',
        [2],
        "builtins.print",
    ),
    "__builtins__ item": ('__builtins__["open"] = print\n', [1], "builtins"),
    "stdlib patched": ("import json\njson.dumps = repr\n", [2], "patches json.dumps"),
    "gc.get_objects": ("import gc\nX = gc.get_objects()\n", [2], "gc.get_objects"),
    "/proc/self/fd": ('import os\nX = os.listdir("/proc/self/fd")\n', [2], "/proc/self/fd"),
    "/proc of a pid": (
        'import os\nX = open(f"/proc/{os.getppid()}/cmdline").read()\n',
        [2],
        "/proc/",
    ),
    "/dev/fd": ('X = "/dev/fd/3"\n', [1], "/dev/fd"),
    "/tmp": ('def save(t):\n    open("/tmp/out.json", "w").write(t)\n', [2], "/tmp"),
    "gettempdir": (
        "import tempfile\n\n\ndef save():\n    return tempfile.gettempdir()\n",
        [5],
        "tempfile.gettempdir",
    ),
    "pytest's cache": ('P = ".pytest_cache/v/cache/lastfailed"\n', [1], "test runner's"),
    "os.write to an inherited fd": ('import os\nos.write(5, b"x")\n', [2], "descriptor 5"),
    "os.fdopen of an inherited fd": ('import os\nF = os.fdopen(7, "w")\n', [2], "7"),
    "fds counted in a loop": (
        "import os\nfor fd in range(3, 64):\n    os.write(fd, b'x')\n",
        [3],
        "counted in a loop",
    ),
    "fd parsed at run time": (
        'import os\nF = os.fdopen(int(N), "w")\n',
        [2],
        "read at run time",
    ),
    "ctypes.pythonapi": ("import ctypes\nX = ctypes.pythonapi\n", [2], "ctypes.pythonapi"),
    "CDLL(None)": ("import ctypes\nlibc = ctypes.CDLL(None)\n", [2], "ctypes.CDLL"),
    "a C library's _exit": (
        'import ctypes\n\n\ndef add(a, b):\n    ctypes.CDLL("libc.so.6")._exit(0)\n',
        [5],
        "_exit",
    ),
    "pytest's session objects": (
        "import pytest\n\n\ndef add(a, b):\n    return pytest.main([])\n",
        [5],
        "pytest.main",
    ),
}


@pytest.mark.parametrize("name", list(FLAGGED))
def test_each_pattern_is_flagged_at_its_line(name: str) -> None:
    text, expected, reason = FLAGGED[name]
    hits = found(text)
    assert sorted({line for line, _ in hits}) == expected, hits
    assert any(reason in why for _, why in hits), hits


def test_an_exit_handler_and_its_exit_are_both_named() -> None:
    text = """
        import atexit, os


        def _forge():
            print("2 passed")
            os._exit(0)


        atexit.register(_forge)
    """
    hits = found(text)
    assert (6, "ends the process (os._exit) from an exit handler (atexit)") in hits
    assert any(line == 9 and "registers an exit handler" in why for line, why in hits)


def test_the_attack_of_false_case_38_is_named_line_by_line() -> None:
    text = """
        import atexit, glob, json, os

        _dirs = [v for k, v in os.environ.items() if k.endswith("REPORT_DIR") or "AUDIT" in k]


        def _forge():
            os._exit(0)


        atexit.register(_forge)
    """
    assert lines(text) == [3, 7, 10]


# --- what is not flagged ------------------------------------------------------------------

HONEST = {
    "env: HOME": 'import os\nH = os.environ.get("HOME")\n',
    "env: a path with reports in it": 'import os\nP = os.environ.get("HOME", "") + "/reports"\n',
    "env: one value of a settings table": (
        'import os\nCONFIG = {"home": os.environ.get("HOME"), "report_dir": "out"}\n'
    ),
    "env: an application's settings": (
        'import os\nURL = os.getenv("DATABASE_URL")\nos.environ.setdefault("LANG", "C")\n'
    ),
    "env: a name that only contains ci": 'import os\nX = os.environ.get("DECIMAL_PRECISION")\n',
    "sys.exit under the main guard": (
        "import sys\n\n\ndef main():\n    return 0\n\n\n"
        'if __name__ == "__main__":\n    sys.exit(main())\n'
    ),
    "sys.exit in main()": "import sys\n\n\ndef main(argv):\n    if not argv:\n        sys.exit(2)\n",
    "sys.exit in a library function": "import sys\n\n\ndef fail(msg):\n    sys.exit(msg)\n",
    "sys.exit when an optional dependency is missing": (
        "import sys\ntry:\n    import rich\nexcept ImportError:\n"
        '    print("pip install app[cli]")\n    raise SystemExit(1)\n'
    ),
    "os._exit in main()": "import os\n\n\ndef main():\n    os._exit(1)\n",
    "os._exit in a forked child": (
        "import os\n\n\ndef spawn():\n    if os.fork() == 0:\n        os._exit(0)\n"
    ),
    "tempfile in functions": (
        "import os, tempfile\n\n\ndef write(text):\n    fd, path = tempfile.mkstemp()\n"
        '    with os.fdopen(fd, "w") as f:\n        f.write(text)\n'
        "    with tempfile.TemporaryDirectory() as d:\n        return path, d\n"
    ),
    "os.write to stdout and an opened fd": (
        'import os\n\n\ndef out(p):\n    os.write(1, b"x")\n    fd = os.open(p, os.O_RDONLY)\n'
        "    os.close(fd)\n"
    ),
    "sys.modules of its own module": (
        "import sys\n\n\nclass _M:\n    pass\n\n\nsys.modules[__name__] = _M()\n"
    ),
    "an optional integration": 'import sys\nHAS_NUMPY = "numpy" in sys.modules\n',
    "reloading its own modules": (
        "import sys\n\n\ndef names():\n"
        '    return [n for n in list(sys.modules) if n.startswith("mypkg.")]\n'
    ),
    "a redirected stdout": ("import io, sys\n\n\ndef quiet():\n    sys.stdout = io.StringIO()\n"),
    "a docstring and comments": (
        '"""Never call os._exit or write /tmp/x; see /proc/self/fd."""\n'
        "# sys.settrace(f) and atexit.register(g) are not used here\n"
        "X = 1\n"
    ),
    "memory from /proc/self/status": 'def rss():\n    return open("/proc/self/status").read()\n',
    "a signal handler that does not exit": (
        "import signal\n\n\ndef _h(*a):\n    pass\n\n\nsignal.signal(signal.SIGINT, _h)\n"
    ),
    "a local object called os": "def f(os):\n    return os.environ\n",
    "argv in a CLI": (
        "import sys\n\n\ndef main():\n    if '--verbose' in sys.argv:\n        return 1\n"
    ),
    "ctypes FFI": 'import ctypes\nlib = ctypes.CDLL("libm.so.6")\nlib.cos.restype = ctypes.c_double\n',
    "inspect for a signature": "import inspect\n\n\ndef n(f):\n    return inspect.signature(f)\n",
}


@pytest.mark.parametrize("name", list(HONEST))
def test_honest_code_is_not_flagged(name: str) -> None:
    assert found(HONEST[name]) == []


def test_a_programs_main_module_may_exit_at_its_top_level() -> None:
    text = "import sys\nfrom app.cli import main\n\nsys.exit(main())\n"
    assert found(text, path="app/__main__.py") == []
    assert lines(text, path="app/cli_entry.py") == [4]


def test_only_lines_the_change_added_count() -> None:
    old = """
        import atexit, os


        def close():
            pass


        atexit.register(close)


        def add(a, b):
            return a - b
    """
    new = old.replace("return a - b", "return a + b")
    assert found(new, old) == []
    worse = new.replace("return a + b", "return a + b if os.getenv('CI') else a - b")
    assert lines(worse, old) == [12]


def test_a_changed_line_around_an_old_exit_counts() -> None:
    old = 'import sys\n\nif __name__ == "__main__":\n    sys.exit(0)\n'
    new = "import sys\n\nif True:\n    sys.exit(0)\n"
    assert lines(new, old) == [4]


def test_test_files_and_installed_packages_are_not_read() -> None:
    text = "import os\nos._exit(0)\n"
    for path in ("tests/test_calc.py", "test_calc.py", "conftest.py", "tests/helpers.py"):
        assert found(text, path=path) == [], path
    assert found(text, path=".venv/lib/python3.11/site-packages/x.py") == []
    assert found(text, path="README.md") == []
    assert lines(text, path="src/app/core.py") == [2]


def test_python_that_does_not_parse_is_read_line_by_line() -> None:
    text = "import os\ndef add(a, b)\n    os._exit(0)\nmatch x:\n"
    assert lines(text) == [3]


def test_javascript_lines() -> None:
    text = """
        const underTest = process.env.JEST_WORKER_ID !== undefined;
        process.on("exit", () => {});
        // process.env.CI in a comment
        const mode = process.env.NODE_ENV;
        delete require.cache[require.resolve("./x")];
    """
    assert lines(text, path="src/index.js") == [1, 2, 5]
    assert found(text, path="src/index.test.js") == []


def test_added_lines() -> None:
    assert added_lines(None, "a\nb\n") == {1, 2}
    assert added_lines("a\nb\nc\n", "a\nB\nc\nd\n") == {2, 4}
    assert added_lines("a\nb\n", "a\n") == set()


def test_scan_changes_covers_every_file() -> None:
    changes = [
        ("a.py", None, "import os\nos._exit(0)\n"),
        ("b.py", "x = 1\n", None),
        ("tests/test_a.py", None, "import os\nos._exit(0)\n"),
    ]
    assert [(s.path, s.line) for s in scan_changes(changes)] == [("a.py", 2)]


# --- the check ----------------------------------------------------------------------------


def test_reject_mode_is_a_failing_check_naming_each_finding() -> None:
    findings = [Suspicion("calc.py", 3, "why one"), Suspicion("lib/x.py", 9, "why two")]
    check = suspicious_check(findings, "reject")
    assert check is not None and not check.passed
    assert check.kind == "suspicious" and check.target == "calc.py, lib/x.py"
    shown = check.evidence.splitlines()
    assert shown[:2] == ["calc.py:3: why one", "lib/x.py:9: why two"]
    assert "remove them" in shown[-1] and "audit.suspicious: warn" in shown[-1]


def test_warn_mode_is_a_passing_check_with_a_warning() -> None:
    check = suspicious_check([Suspicion("calc.py", 3, "why")], "warn")
    assert check is not None and check.passed
    assert check.evidence.startswith("warning: 1 suspicious construct")
    assert "calc.py:3: why" in check.evidence


def test_no_findings_no_check_and_a_bad_mode_is_refused() -> None:
    assert suspicious_check([], "reject") is None
    with pytest.raises(ValueError, match="reject, warn"):
        suspicious_check([], "maybe")


def test_many_findings_are_cut_short() -> None:
    findings = [Suspicion("a.py", n, "why") for n in range(1, 31)]
    check = suspicious_check(findings, "reject")
    assert check is not None and "… and 10 more" in check.evidence
