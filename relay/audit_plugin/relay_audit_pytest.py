"""relay's own pytest plugin: what a pytest session really collected and ran (SPEC §9, §14).

relay loads this module into every pytest session an audit command starts (``-p
relay_audit_pytest`` through ``PYTEST_ADDOPTS``, this folder first on ``PYTHONPATH``) and
decides from the JSON report it writes, never from what the session printed. The module runs
in the project's interpreter: it imports only the standard library and pytest, and must keep
working on every Python and pytest a project may use (Python 3.8+, pytest 7+).

The report reaches relay through a **channel the code under test is not told about** (issue
27): the write end of a pipe relay's process holds the other end of, inherited by the test
process, whose number ``RELAY_AUDIT_CHANNEL`` names. When this module is imported (before any
conftest or test module), it takes that number and removes from ``os.environ`` every trace of
relay: the variable itself, ``-p relay_audit_pytest`` from ``PYTEST_ADDOPTS`` and this folder
from ``PYTHONPATH`` (put back only while pytest-xdist starts its workers, which need them).
Each line written is one JSON record: ``{"session": id, "snapshot": {...}}`` when the session
starts and when it finishes, and ``{"session": id, "phase": [nodeid, when, {...}]}`` as soon
as each phase of a test is reported, before any later code of the test process runs. relay
counts a streamed phase, never a snapshot's copy of it, and a phase streamed twice counts as
its first record: code that rewrites the recorder's data at exit changes nothing. A
pytest-xdist worker has no channel: it hands its snapshot to the controller through
``config.workeroutput``, which streams it.

A session's report holds:

* ``collected``: every test id collected (``pytest_itemcollected``), before deselection;
  ``deselected``: the ids deselected (``-k``, ``-m``, ``--deselect``…); ``selected``: the
  ids left to run (``session.items`` when collection finished); ``collection_errors``;
* ``tests``: per executed test id and phase (``setup``, ``call``, ``teardown``): ``raw``,
  the report outcome seen by the innermost ``pytest_runtest_makereport`` wrapper (registered
  when the test loop starts, after every conftest, so that no other wrapper runs inside it);
  ``exc``, the kind of exception the phase raised, read by the outermost wrapper before any
  other implementation ran (``skip``, ``xfail``, ``error`` or null); for a skip or an xfail,
  ``origin``, the ``[file, line]`` of each frame of its traceback (outermost first, at most
  the innermost ``MAX_FRAMES``): which code decided it; ``final``, the outcome
  ``pytest_runtest_logreport`` got and ``wasxfail``; ``xfail_marked``;
* ``exitstatus``, ``finished`` (false until the session finished: a process that ended early
  leaves its first, unfinished report), ``collect_only``, ``stopped`` (``-x``/``--maxfail``),
  ``module_files`` (where test-runner and standard-library modules were imported from, when
  inside the working folder), ``plugin_files`` (``{name: file}`` of the pytest plugins
  registered when the test loop started or when the session finished whose module lies inside
  the working folder: conftest.py files, and modules loaded through ``-p``, entry points or
  ``pytest_plugins``), ``shadowing`` (``{name: file}`` of the top-level modules imported from
  inside the working folder that an installed location on ``sys.path`` also provides: a
  ``numpy/`` of the tree hides the installed numpy), ``parent`` (the session that started this one, for nested
  sessions) and ``worker`` (a pytest-xdist worker id).
"""

from __future__ import annotations

import json
import os
import re
import sys
import uuid
from typing import Any

import pytest

CHANNEL_VARIABLE = "RELAY_AUDIT_CHANNEL"
FORMAT = 1
WATCHED_MODULES = ("pytest", "_pytest", "pluggy", "py", "relay_audit_pytest")
MAX_FRAMES = 64
WORKER_OUTPUT = "relay_audit_pytest"
_OPTION = re.compile(r"(^|\s)-p relay_audit_pytest(\s+--co)?(?=\s|$)")
_SESSION = uuid.uuid4().hex


def _take_environment() -> tuple[int | None, dict[str, str]]:
    """The channel's file descriptor (None: not given), and the variables as relay set them;
    ``os.environ`` is left without any of relay's entries (see the module docstring)."""
    given = {
        k: os.environ[k]
        for k in (CHANNEL_VARIABLE, "PYTEST_ADDOPTS", "PYTHONPATH")
        if k in os.environ
    }
    raw = os.environ.pop(CHANNEL_VARIABLE, "")
    channel = int(raw) if raw.isdigit() else None
    options = os.environ.get("PYTEST_ADDOPTS")
    if options is not None:
        options = _OPTION.sub("", options).strip()
        if options:
            os.environ["PYTEST_ADDOPTS"] = options
        else:
            del os.environ["PYTEST_ADDOPTS"]
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.environ.get("PYTHONPATH")
    if path is not None:
        kept = [p for p in path.split(os.pathsep) if p and os.path.abspath(p) != here]
        if kept:
            os.environ["PYTHONPATH"] = os.pathsep.join(kept)
        else:
            del os.environ["PYTHONPATH"]
    return channel, given


_CHANNEL, _GIVEN = _take_environment()


def _send(record: dict[str, Any]) -> None:
    """Write one record to the channel (nothing without one: a worker, or a plain run)."""
    if _CHANNEL is None:
        return
    data = (json.dumps(record) + "\n").encode("utf-8")
    try:
        while data:
            data = data[os.write(_CHANNEL, data) :]
    except OSError as exc:  # the audit reports the missing records
        sys.stderr.write(f"relay_audit_pytest: cannot write its report: {exc}\n")


def _exception_kind(call: Any) -> str | None:
    excinfo = getattr(call, "excinfo", None)
    if excinfo is None:
        return None
    value = getattr(excinfo, "value", None)
    if isinstance(value, pytest.xfail.Exception):
        return "xfail"
    if isinstance(value, pytest.skip.Exception):
        return "skip"
    return "error"


def _origin(call: Any) -> list[list[Any]]:
    """``[[file, line], ...]`` of the frames of the phase's exception, outermost first (the
    innermost :data:`MAX_FRAMES`)."""
    excinfo = getattr(call, "excinfo", None)
    value = getattr(excinfo, "value", None)
    tb = getattr(excinfo, "tb", None) or getattr(value, "__traceback__", None)
    frames = []
    while tb is not None:
        frames.append([os.path.abspath(tb.tb_frame.f_code.co_filename), tb.tb_lineno])
        tb = tb.tb_next
    return frames[-MAX_FRAMES:]


class _Recorder:
    """Collects the session's facts; written by :meth:`write`."""

    def __init__(self, config: Any) -> None:
        self.config = config
        workerinput = getattr(config, "workerinput", None)
        self.data: dict[str, Any] = {
            "relay_audit_report": FORMAT,
            "plugin": os.path.abspath(__file__),
            "session": _SESSION,
            "parent": None,
            "worker": workerinput.get("workerid") if isinstance(workerinput, dict) else None,
            "pid": os.getpid(),
            "cwd": os.getcwd(),
            "rootdir": str(getattr(config, "rootpath", "") or getattr(config, "rootdir", "")),
            "args": [str(a) for a in getattr(config, "args", [])],
            "finished": False,
            "collect_only": bool(getattr(config.option, "collectonly", False)),
            "exitstatus": None,
            "stopped": None,
            "collected": [],
            "deselected": [],
            "selected": None,
            "collection_errors": [],
            "tests": {},
            "module_files": {},
            "plugin_files": {},
            "shadowing": {},
        }

    def phase(self, nodeid: str, when: str) -> dict[str, Any]:
        test = self.data["tests"].setdefault(nodeid, {})
        return test.setdefault(when, {})

    def write(self) -> None:
        """Stream a snapshot of the session; a worker hands it to the controller instead."""
        workeroutput = getattr(self.config, "workeroutput", None)
        if isinstance(workeroutput, dict):
            workeroutput[WORKER_OUTPUT] = json.dumps(self.data)
        else:
            _send({"session": _SESSION, "snapshot": self.data})

    def roots(self) -> set[str]:
        return {os.path.abspath(os.getcwd()), os.path.abspath(self.data["rootdir"] or ".")}

    def inside(self, file: str) -> bool:
        return any(file == r or file.startswith(r.rstrip(os.sep) + os.sep) for r in self.roots())

    def plugin_files(self) -> None:
        """Add the registered plugins whose module lies inside the working folder."""
        manager = self.config.pluginmanager
        for name, plugin in manager.list_name_plugin():
            module = plugin if hasattr(plugin, "__file__") else None
            if module is None and plugin is not None:
                module = sys.modules.get(getattr(type(plugin), "__module__", ""))
            file = getattr(module, "__file__", None)
            if isinstance(file, str) and self.inside(os.path.abspath(file)):
                self.data["plugin_files"][str(name)] = os.path.abspath(file)

    def shadowing(self) -> None:
        """Add the top-level modules imported from inside the working folder that a folder of
        ``sys.path`` outside it also provides (the installed module they hide)."""
        from importlib.machinery import PathFinder

        outside = [
            p for p in sys.path if isinstance(p, str) and p and not self.inside(os.path.abspath(p))
        ]
        for name, module in list(sys.modules.items()):
            file = getattr(module, "__file__", None)
            if "." in name or not isinstance(file, str) or not self.inside(os.path.abspath(file)):
                continue
            try:
                spec = PathFinder.find_spec(name, outside)
            except Exception:  # a broken path entry: nothing is known to be hidden
                continue
            origin = getattr(spec, "origin", None)
            if isinstance(origin, str) and not self.inside(os.path.abspath(origin)):
                self.data["shadowing"][name] = os.path.abspath(file)

    def module_files(self) -> dict[str, str]:
        names = set(WATCHED_MODULES) | set(getattr(sys, "stdlib_module_names", ()))
        out = {}
        for name, module in list(sys.modules.items()):
            if name.split(".", 1)[0] not in names:
                continue
            file = getattr(module, "__file__", None)
            if not isinstance(file, str):
                continue
            file = os.path.abspath(file)
            if self.inside(file):
                out[name] = file
        return out


class _Outer:
    """The outermost ``pytest_runtest_makereport`` wrapper: the phase's exception, before any
    other implementation could change the call information."""

    def __init__(self, recorder: _Recorder) -> None:
        self.recorder = recorder

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item: Any, call: Any) -> Any:
        when = getattr(call, "when", "?")
        phase = self.recorder.phase(item.nodeid, when)
        phase["exc"] = _exception_kind(call)
        if phase["exc"] in ("skip", "xfail"):
            phase["origin"] = _origin(call)
        phase["xfail_marked"] = item.get_closest_marker("xfail") is not None
        yield


class _Inner:
    """The innermost ``pytest_runtest_makereport`` wrapper: the report as pytest made it."""

    def __init__(self, recorder: _Recorder) -> None:
        self.recorder = recorder

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_runtest_makereport(self, item: Any, call: Any) -> Any:
        outcome = yield
        report = None
        try:
            report = outcome.get_result()
        except BaseException:  # an implementation raised: the phase did not pass
            pass
        raw = getattr(report, "outcome", None) if report is not None else "failed"
        self.recorder.phase(item.nodeid, getattr(call, "when", "?"))["raw"] = str(raw)


class _Plugin:
    """The hooks registered at start-up (``-p``)."""

    def __init__(self, config: Any) -> None:
        self.recorder = _Recorder(config)
        self.late_registered = False

    def pytest_itemcollected(self, item: Any) -> None:
        self.recorder.data["collected"].append(item.nodeid)

    def pytest_deselected(self, items: Any) -> None:
        self.recorder.data["deselected"].extend(i.nodeid for i in items)

    def pytest_collectreport(self, report: Any) -> None:
        if getattr(report, "failed", False):
            text = getattr(report, "longreprtext", "") or str(getattr(report, "longrepr", ""))
            entry = {"nodeid": report.nodeid, "message": text[-2000:]}
            self.recorder.data["collection_errors"].append(entry)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: Any) -> None:
        self.recorder.data["selected"] = [i.nodeid for i in getattr(session, "items", [])]

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: Any) -> None:
        self.recorder.plugin_files()
        self.recorder.shadowing()
        if not self.late_registered:
            self.late_registered = True
            manager = session.config.pluginmanager
            manager.register(_Inner(self.recorder), "relay_audit_pytest_inner")
            manager.register(_Outer(self.recorder), "relay_audit_pytest_outer")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: Any) -> None:
        when = getattr(report, "when", "?")
        phase = self.recorder.phase(report.nodeid, when)
        phase["final"] = str(getattr(report, "outcome", "?"))
        phase["wasxfail"] = hasattr(report, "wasxfail")
        if "raw" in phase:  # run in this process (a worker's tests come in its snapshot)
            _send({"session": _SESSION, "phase": [report.nodeid, when, phase]})

    @pytest.hookimpl(hookwrapper=True)
    def pytest_sessionstart(self, session: Any) -> Any:
        """pytest-xdist starts its workers here: they get relay's variables, then the
        environment is without them again."""
        saved = {k: os.environ.get(k) for k in ("PYTEST_ADDOPTS", "PYTHONPATH")}
        os.environ.update({k: v for k, v in _GIVEN.items() if k != CHANNEL_VARIABLE})
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """A pytest-xdist worker ended: stream its snapshot as a session of its own."""
        raw = getattr(node, "workeroutput", {}).get(WORKER_OUTPUT)
        try:
            data = json.loads(raw) if isinstance(raw, str) else None
        except ValueError:
            data = None
        if isinstance(data, dict):
            data["parent"] = _SESSION
            _send({"session": str(data.get("session") or ""), "snapshot": data})

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: Any, exitstatus: Any) -> None:
        data = self.recorder.data
        try:
            data["exitstatus"] = int(exitstatus)
        except (TypeError, ValueError):
            data["exitstatus"] = None
        data["stopped"] = getattr(session, "shouldstop", None) or getattr(
            session, "shouldfail", None
        )
        if data["stopped"] is not None and not isinstance(data["stopped"], str):
            data["stopped"] = str(data["stopped"]) if data["stopped"] else None
        data["module_files"] = self.recorder.module_files()
        self.recorder.plugin_files()
        self.recorder.shadowing()
        data["finished"] = True
        self.recorder.write()


def pytest_configure(config: Any) -> None:
    """Register the recorder and write the unfinished report (a session that never finishes
    leaves it)."""
    if config.pluginmanager.has_plugin("relay_audit_pytest_session"):
        return
    plugin = _Plugin(config)
    config.pluginmanager.register(plugin, "relay_audit_pytest_session")
    plugin.recorder.write()
