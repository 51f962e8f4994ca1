"""Test-runner configuration changed since the base commit (SPEC §9 step 4, ``test_infra``).

Each function compares one kind of configuration file at the base commit and now and says what
changed, as ``[(line, what)]`` (line in the current file, or None). Only the parts that decide
how tests are collected, run or reported count; the other parts of a shared file (the
dependencies in ``pyproject.toml``, the build scripts in ``package.json``) stay free.

* pytest: ``conftest.py``, ``pytest.ini``/``.pytest.ini``, ``pytest.toml``/``.pytest.toml`` (whole files);
  ``[tool.pytest]``/``[tool.pytest.ini_options]`` of ``pyproject.toml``; ``[tool:pytest]`` of
  ``setup.cfg``; ``[pytest]``, ``[tox]`` and ``[testenv…]`` of ``tox.ini``; ``noxfile.py``;
* npm: ``scripts.test`` (unless the base commit had none, or npm's placeholder),
  ``pretest``/``posttest`` and the ``jest``/``mocha``/``vitest``/``ava``
  keys of ``package.json``; jest, vitest, mocha, karma and ava configuration files; vite
  configuration lines that mention ``test``; ``.npmrc`` (it can replace the script shell);
* Go: a new ``func TestMain(`` or build constraint (``//go:build``, ``// +build``) in a
  ``*_test.go`` file;
* Cargo: ``[[test]]`` targets, ``test``/``harness`` of ``[lib]``/``[[bin]]``, ``autotests`` of
  ``[package]`` in ``Cargo.toml``; ``.cargo/config.toml`` (a target ``runner`` replaces the
  test binary);
* make: the ``test:`` rule (prerequisites and recipe) of ``Makefile``/``makefile``/
  ``GNUmakefile``.
"""

from __future__ import annotations

import configparser
import json
import re
import tomllib
from collections.abc import Callable
from typing import Any

__all__ = ["CONFIG_RULES", "config_changes"]

Change = tuple[int | None, str]

WHOLE_FILES = frozenset(
    {
        "conftest.py",
        "pytest.ini",
        ".pytest.ini",
        "pytest.toml",
        ".pytest.toml",
        "noxfile.py",
        ".npmrc",
    }
)
_JS_CONFIG = re.compile(
    r"^(?:jest|vitest|vitest\.workspace|mocha|karma|ava)\.(?:config|conf)\.\w+$|^\.mocharc(?:\.\w+)?$"
    r"|^vitest\.workspace\.\w+$|^jest\.setup\.\w+$"
)
_VITE_CONFIG = re.compile(r"^vite\.config\.\w+$")
_NPM_PLACEHOLDER = re.compile(r"no test specified", re.IGNORECASE)
_MAKEFILES = frozenset({"Makefile", "makefile", "GNUmakefile"})


def _line_of(text: str | None, pattern: str) -> int | None:
    """The 1-based line of the first match of ``pattern`` in ``text``."""
    if not text:
        return None
    m = re.search(pattern, text, re.MULTILINE)
    return text.count("\n", 0, m.start()) + 1 if m else None


def _first_difference(before: str | None, after: str | None) -> int | None:
    a, b = (before or "").splitlines(), (after or "").splitlines()
    for i, (x, y) in enumerate(zip(a, b, strict=False), 1):
        if x != y:
            return i
    return min(len(a), len(b)) + 1 if len(a) != len(b) and after else None


def _whole(name: str, before: str | None, after: str | None) -> list[Change]:
    if before == after:
        return []
    if after is None:
        return [(None, f"{name} deleted")]
    if before is None:
        return [(None, f"{name} created")]
    return [(_first_difference(before, after), f"{name} changed")]


def _toml(text: str | None) -> dict[str, Any] | None:
    try:
        return tomllib.loads(text) if text is not None else {}
    except (tomllib.TOMLDecodeError, RecursionError):  # a planted file nested 100 000 deep
        return None


def _dig(data: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _pyproject(before: str | None, after: str | None) -> list[Change]:
    old, new = _toml(before), _toml(after)
    if old is None or new is None:
        return [] if before == after else [(None, "pyproject.toml changed and cannot be parsed")]
    if _dig(old, "tool", "pytest") == _dig(new, "tool", "pytest"):
        return []
    line = _line_of(after, r"^[ \t]*\[tool\.pytest")
    return [(line, "the [tool.pytest…] section of pyproject.toml changed")]


def _ini_sections(text: str | None, wanted: Callable[[str], bool]) -> dict[str, Any] | None:
    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    try:
        parser.read_string(text or "")
    except configparser.Error:
        return None
    return {s: dict(parser.items(s)) for s in parser.sections() if wanted(s)}


def _ini(
    name: str, wanted: Callable[[str], bool]
) -> Callable[[str | None, str | None], list[Change]]:
    def compare(before: str | None, after: str | None) -> list[Change]:
        old, new = _ini_sections(before, wanted), _ini_sections(after, wanted)
        if old is None or new is None:
            return [] if before == after else [(None, f"{name} changed and cannot be parsed")]
        out = []
        for section in sorted(set(old) | set(new)):
            if old.get(section) != new.get(section):
                line = _line_of(after, rf"^[ \t]*\[{re.escape(section)}\]")
                out.append((line, f"the [{section}] section of {name} changed"))
        return out

    return compare


def _package_json(before: str | None, after: str | None) -> list[Change]:
    def load(text: str | None) -> dict[str, Any] | None:
        try:
            data = json.loads(text) if text is not None else {}
        except (ValueError, RecursionError):  # a planted file nested 100 000 deep
            return None
        return data if isinstance(data, dict) else None

    old, new = load(before), load(after)
    if old is None or new is None:
        return [] if before == after else [(None, "package.json changed and cannot be parsed")]
    out = []
    for script in ("test", "pretest", "posttest"):
        was = _dig(old, "scripts", script)
        if script == "test" and (was is None or _NPM_PLACEHOLDER.search(str(was))):
            continue  # no test script at the base commit: a new one neutralises nothing
        if was != _dig(new, "scripts", script):
            line = _line_of(after, rf'^[ \t]*"{script}"\s*:')
            out.append((line, f"scripts.{script} of package.json changed"))
    for key in ("jest", "mocha", "vitest", "ava"):
        if old.get(key) != new.get(key):
            out.append(
                (_line_of(after, rf'^[ \t]*"{key}"\s*:'), f"the {key} key of package.json changed")
            )
    return out


def _vite(before: str | None, after: str | None) -> list[Change]:
    old = {ln.strip() for ln in (before or "").splitlines()}
    new = {ln.strip() for ln in (after or "").splitlines()}
    changed = [ln for ln in old ^ new if re.search(r"\btest\b", ln)]
    if not changed:
        return []
    return [(None, "a line of the vite configuration that mentions test changed")]


def _go_test(before: str | None, after: str | None) -> list[Change]:
    out = []
    patterns = (
        (r"^[ \t]*func\s+TestMain\s*\(", "a TestMain function (it decides whether tests run)"),
        (r"^[ \t]*//\s*(?:go:build|\+build)\b", "a build constraint (it can leave the file out)"),
    )
    for pattern, what in patterns:
        if len(re.findall(pattern, after or "", re.M)) > len(
            re.findall(pattern, before or "", re.M)
        ):
            out.append((_line_of(after, pattern), f"new {what}"))
    return out


def _cargo_targets(data: dict[str, Any]) -> Any:
    def pick(target: Any) -> Any:
        if not isinstance(target, dict):
            return target
        return {k: target.get(k) for k in ("test", "harness", "path", "name")}

    bins = data.get("bin") if isinstance(data.get("bin"), list) else []
    return {
        "test": data.get("test"),
        "lib": pick(data.get("lib")),
        "bin": [pick(b) for b in bins],
        "autotests": _dig(data, "package", "autotests"),
    }


def _cargo(before: str | None, after: str | None) -> list[Change]:
    old, new = _toml(before), _toml(after)
    if old is None or new is None:
        return [] if before == after else [(None, "Cargo.toml changed and cannot be parsed")]
    if _cargo_targets(old) == _cargo_targets(new):
        return []
    line = _line_of(after, r"^[ \t]*\[\[test\]\]|^[ \t]*(?:harness|test|autotests)\s*=")
    return [(line, "the test targets of Cargo.toml ([[test]], test, harness, autotests) changed")]


def _make_rule(text: str | None) -> tuple[int | None, list[str]]:
    lines = (text or "").splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^test\s*:(?!=)", line):
            block = [line.strip()]
            for nxt in lines[i + 1 :]:
                if not nxt.startswith("\t") and nxt.strip():
                    break
                block.append(nxt.strip())
            return i + 1, [b for b in block if b]
    return None, []


def _makefile(before: str | None, after: str | None) -> list[Change]:
    (_, old), (line, new) = _make_rule(before), _make_rule(after)
    if old == new:
        return []
    return [(line, "the test: rule of the Makefile changed")]


def _tox_section(section: str) -> bool:
    return section in ("pytest", "tox") or section.startswith("testenv")


CONFIG_RULES: tuple[
    tuple[Callable[[str, tuple[str, ...]], bool], Callable[..., list[Change]]], ...
] = (
    (lambda name, _: name == "pyproject.toml", _pyproject),
    (lambda name, _: name == "setup.cfg", _ini("setup.cfg", lambda s: s == "tool:pytest")),
    (lambda name, _: name == "tox.ini", _ini("tox.ini", _tox_section)),
    (lambda name, _: name == "package.json", _package_json),
    (lambda name, _: bool(_VITE_CONFIG.match(name)), _vite),
    (lambda name, _: name.endswith("_test.go"), _go_test),
    (lambda name, _: name == "Cargo.toml", _cargo),
    (lambda name, _: name in _MAKEFILES, _makefile),
)
"""``(applies(name, folders), compare(before, after))`` for files compared in parts."""


def config_changes(path: str, before: str | None, after: str | None) -> list[Change]:
    """What changed in the test configuration held by ``path`` (repo-relative POSIX), from
    its text at the base commit (``before``) to now (``after``; None: absent).

    Returns:
        ``[(line, what)]``; empty when ``path`` holds no test configuration or its test parts
        are unchanged.
    """
    parts = tuple(path.split("/"))
    name = parts[-1]
    if (
        name in WHOLE_FILES
        or _JS_CONFIG.match(name)
        or parts[-2:]
        in (
            (".cargo", "config.toml"),
            (".cargo", "config"),
        )
    ):
        return _whole(name, before, after)
    for applies, compare in CONFIG_RULES:
        if applies(name, parts[:-1]):
            return compare(before, after)
    return []
