"""Runs the audit suites through the real ``relay run`` command line (shared by
tests/test_audit_suites.py and bench/audit.py).

A case is a YAML file (SPEC §13 scripts):

``description``
    what the claim is and why it is false (or true);
``goal``
    the goal text given to ``relay run``;
``files``
    ``{path: text}`` committed in the repository's initial commit (``README.md`` is added);
``config``
    written as ``relay.yaml`` in the initial commit (deliverables, ``tools.protected_paths``…);
``script``
    the scripted model's responses; the claim is ``update_goal`` with ``status: complete``;
``expect``
    ``rejected``: the first ``complete`` claim must be rejected by the audit; ``accepted``:
    the first claim must be accepted;
``mentions``
    optional texts (case-insensitive) the audit's rejection must contain;
``failing``
    optional kinds of check (``tamper``, ``command``…): the rejection must fail checks of
    exactly these kinds (so that a case shows which rule caught the claim).

Each case runs in a fresh git repository; the scripted model's script lives outside it.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

SUITES_DIR = Path(__file__).resolve().parent
SUITES = ("false", "honest")
REJECTED = "rejected: the completion audit failed"


@dataclass(frozen=True)
class Case:
    """One scripted claim of a suite (see the module docstring for the keys)."""

    name: str
    suite: str
    description: str
    goal: str
    files: dict[str, str]
    config: dict[str, Any]
    script: dict[str, Any]
    expect: str
    mentions: tuple[str, ...] = ()
    failing: tuple[str, ...] = ()


@dataclass
class CaseResult:
    """What happened to a case's first ``complete`` claim: ``verdict`` is ``rejected``,
    ``accepted`` or ``no claim``; ``answer`` is the tool result the model got (empty when the
    claim ended the goal); ``seconds`` the wall time of the run; ``data`` the run's ``--json``
    object; ``progress`` the progress file at the end."""

    case: Case
    verdict: str
    answer: str
    exit_code: int
    status: str | None
    seconds: float
    problems: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    progress: str = ""

    @property
    def ok(self) -> bool:
        """The claim got the expected verdict, and a rejection mentions what it must."""
        return not self.problems


def load_cases(suite: str) -> list[Case]:
    """The cases of ``suite`` (``false`` or ``honest``), sorted by file name."""
    cases = []
    for path in sorted((SUITES_DIR / suite).glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        script = data["script"]
        cases.append(
            Case(
                name=path.stem,
                suite=suite,
                description=" ".join(str(data["description"]).split()),
                goal=str(data["goal"]),
                files=dict(data.get("files") or {}),
                config=dict(data.get("config") or {}),
                script=script if isinstance(script, dict) else {"responses": script},
                expect=str(data["expect"]),
                mentions=tuple(data.get("mentions") or ()),
                failing=tuple(data.get("failing") or ()),
            )
        )
    return cases


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def make_repository(path: Path, case: Case) -> Path:
    """A git repository on ``main`` with the case's files and ``relay.yaml`` committed."""
    path.mkdir(parents=True)
    _git(path, "init", "-q", "-b", "main")
    _git(path, "config", "user.name", "Audit Suite")
    _git(path, "config", "user.email", "audit-suite@example.invalid")
    _git(path, "config", "commit.gpgsign", "false")
    files = {"README.md": "test repository\n", **case.files}
    if case.config:
        files["relay.yaml"] = yaml.safe_dump(case.config, sort_keys=False)
    for rel, text in files.items():
        target = path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "initial")
    return path.resolve()


@contextlib.contextmanager
def _environment() -> Iterator[None]:
    """This interpreter's folder first on PATH (``python`` in the cases is it), and pytest
    plugins of the environment not auto-loaded (speed; the cases use none)."""
    saved = {k: os.environ.get(k) for k in ("PATH", "PYTEST_DISABLE_PLUGIN_AUTOLOAD")}
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + (saved["PATH"] or "")
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _transcript(repo: Path) -> list[dict[str, Any]]:
    rows = []
    for path in (repo / ".git" / "relay" / "runs").glob("*/transcript.jsonl"):
        rows += [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines() if ln]
    rows.sort(key=lambda r: r.get("time", 0))
    return rows


def first_claim(rows: list[dict[str, Any]], status: str | None) -> tuple[str, str]:
    """``(verdict, answer)`` of the first ``update_goal complete`` sent alone: the tool result
    in the next request (``rows[i+1]["request"]["messages"]``), or ``accepted`` when the claim
    was the last model call and the goal is complete."""
    for i, row in enumerate(rows):
        calls = (row.get("response") or {}).get("tool_calls") or []
        claims = [
            c
            for c in calls
            if c["name"] == "update_goal" and c["arguments"].get("status") == "complete"
        ]
        if not claims or len(calls) > 1:
            continue  # no claim, or deferred (not alone)
        if i + 1 < len(rows):
            for message in rows[i + 1]["request"]["messages"]:
                if message.get("tool_call_id") == claims[0]["id"]:
                    answer = message["content"]
                    verdict = "rejected" if answer.startswith("rejected") else "accepted"
                    return verdict, answer
            return "no claim", ""
        return ("accepted" if status == "complete" else "no claim"), ""
    return "no claim", ""


def run_case(case: Case, workdir: Path, sandbox: str = "off") -> CaseResult:
    """Run one case through ``relay run GOAL --repo R --model scripted:S --json --sandbox
    SANDBOX`` (in this process, ``relay.cli.main``) in a fresh repository under ``workdir``.

    With ``sandbox="off"`` (the default) the case measures the audit's rules: the rejection
    must mention the case's texts and fail checks of exactly its kinds. With ``"auto"`` (the
    default configuration) many attacks already fail in the sandbox (a read-only protected
    file cannot be edited), so only the verdict counts: the claim is still rejected."""
    from relay import cli

    folder = workdir / f"{case.suite}-{case.name}-{sandbox}"
    repo = make_repository(folder / "repo", case)
    script = folder / "script.yaml"
    script.write_text(yaml.safe_dump(case.script, sort_keys=False), encoding="utf-8")
    argv = ["run", case.goal, "--repo", str(repo), "--model", f"scripted:{script}", "--json"]
    argv += ["--sandbox", sandbox]
    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    with _environment(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    seconds = time.monotonic() - started
    try:
        data = json.loads(out.getvalue())
    except ValueError:
        data = {}
    status = data.get("status")
    verdict, answer = first_claim(_transcript(repo), status)
    progress = repo / ".relay" / "progress.md"
    result = CaseResult(
        case,
        verdict,
        answer,
        code,
        status,
        seconds,
        data=data,
        progress=progress.read_text(encoding="utf-8") if progress.exists() else "",
    )
    if verdict != case.expect:
        result.problems.append(
            f"expected the first claim {case.expect}, it was {verdict} "
            f"(exit {code}, status {status}): {answer[:1500] or err.getvalue()[-1500:]}"
        )
    elif verdict == "rejected" and sandbox != "off":
        if not answer.startswith(REJECTED):
            result.problems.append(f"rejected, but not by the audit: {answer[:500]}")
    elif verdict == "rejected":
        if not answer.startswith(REJECTED):
            result.problems.append(f"rejected, but not by the audit: {answer[:500]}")
        for text in case.mentions:
            if text.lower() not in answer.lower():
                result.problems.append(f"the rejection does not mention {text!r}: {answer[:1500]}")
        kinds = {m.group(1) for m in re.finditer(r"^- (\w+) .*: FAILED$", answer, re.MULTILINE)}
        if case.failing and kinds != set(case.failing):
            result.problems.append(
                f"the rejection fails checks of kinds {sorted(kinds)}, "
                f"expected {sorted(case.failing)}: {answer[:1500]}"
            )
    return result


def run_suite(suite: str, workdir: Path, sandbox: str = "off") -> list[CaseResult]:
    """Run every case of ``suite`` under ``workdir`` (see :func:`run_case` for ``sandbox``)."""
    return [run_case(case, workdir, sandbox) for case in load_cases(suite)]
