"""What a finished run tells the people and systems around it: the morning summary (Markdown;
also the CI job summary) and the audit as JUnit XML for CI test views."""

from __future__ import annotations

import re
import time
import xml.etree.ElementTree as ET
from typing import Any

from relay.store import Store
from relay.text import counted, first_line
from relay.text_call_texts import no_audit_line

NEXT_STEPS = {
    "complete": "Review the branch and merge it.",
    "needs_user_input": 'Answer with `relay say "…"`, then `relay resume`.',
    "blocked": 'Help with `relay say "…"` (or change the goal), then `relay resume`; '
    "`relay clear` drops it.",
    "limit_reached": 'Say how to continue with `relay say "…"`, then `relay resume` '
    "(the counts restart).",
    "budget_limited": "Raise the budget (flag or relay.yaml), then `relay resume`.",
    "terminated": 'Check the diagnosis; `relay say "…"` with a hint, then `relay resume`.',
    "failed": "Fix the cause above (key, quota, provider), then `relay resume`.",
    "paused": "`relay resume` continues the goal.",
    "cleared": "Nothing: the goal was dropped.",
}
"""What a user can do next, by final status (:func:`next_step`)."""

REASON_STEPS = {
    "script_exhausted": "The scripted model's script is used up: add responses to it (or set "
    "`when_exhausted: repeat_last`; docs/scripted-model.md), then `relay resume`.",
    "branch_moved": "Another writer moved the goal's branch on the remote: look at the branch "
    "there (`git fetch`, `git log origin/BRANCH`); `relay run --branch BRANCH --push` on a fresh "
    "clone continues the goal the remote's branch carries.",
}
"""What a user can do next where the reason says more than the status."""


def token_line(tokens: dict[str, int]) -> str:
    """The goal's tokens in one line (``tokens`` of the ``--json`` object), led by the figure
    the token budget counts (SPEC §7.4): ``tokens: 7,105 counted (6,000 uncached input + 0
    cache writes + 1,105 output); 1,044 cache reads, not counted``."""
    return (
        f"tokens: {tokens['counted']:,} counted ({tokens['uncached_input']:,} uncached input + "
        f"{tokens['cache_write']:,} cache writes + {tokens['output']:,} output); "
        f"{tokens['cached_input']:,} cache reads, not counted"
    )


def next_step(status: str, reason: str | None) -> str:
    """What a user can do next about a goal that ended with ``status`` for ``reason``."""
    return REASON_STEPS.get(reason or "") or NEXT_STEPS.get(status, "")


ROUNDS_SHOWN = 15
"""The newest rounds the summary lists one by one (the earlier ones are counted)."""


_XML_UNSAFE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _xml_text(text: str | None) -> str:
    """``text`` without ANSI escape sequences and characters XML 1.0 forbids."""
    return _XML_UNSAFE.sub("", text or "")


def push_failures(data: dict[str, Any]) -> list[str]:
    """The details of the ``push_failed`` events of a run's JSON object ``data`` that still
    stand: those of the goal's last rounds with a commit, back to the last push that went
    through. Every round's commit is pushed (``--push``), so a later push carries the
    earlier rounds' commits too: a failure before it (a previous run's, a passing network
    error) left nothing unpushed. Empty when the last push went through."""
    failed: dict[int | None, list[str]] = {}
    for event in data.get("events", []):
        if event["kind"] == "push_failed":
            failed.setdefault(event.get("round"), []).append(event["detail"])
    rounds = sorted({c["round"] for c in data.get("commits") or []}, reverse=True)
    if not rounds:
        return [detail for details in failed.values() for detail in details]
    standing: list[str] = []
    for n in rounds:
        if n not in failed:
            break
        standing = failed[n] + standing
    return standing


def _failed_pushes(n: int) -> str:
    return f"{n} failed push{'' if n == 1 else 'es'}"


def not_pushed_line(data: dict[str, Any]) -> str | None:
    """What the end of a run says when ``--push`` failed (the last failure's first line), or
    None when every push went through or none was asked for."""
    pushes = push_failures(data)
    if not pushes:
        return None
    return (
        f"the branch was not pushed ({_failed_pushes(len(pushes))}); the work is only in this "
        f"clone: {first_line(pushes[-1], 300)}"
    )


def _first_line(text: str | None, limit: int = 160) -> str:
    return _inert(first_line(text, limit))


def _inert(text: str) -> str:
    """Model-written text as plain text in Markdown that GitHub renders as HTML (the job
    summary): no tag, entity or control character of it takes effect (SPEC §14)."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return "".join(ch if ch in "\n\t" or (ord(ch) >= 32 and ord(ch) != 127) else "?" for ch in text)


def _what_was_done(goal_id: str, store: Store) -> tuple[list[str], str | None]:
    """The summary's lines of the newest :data:`ROUNDS_SHOWN` rounds (the earlier ones
    counted) and the last handoff note among them (None when none has one)."""
    rounds = store.rounds(goal_id, last=ROUNDS_SHOWN)
    lines = [] if rounds else ["No round ran."]
    for r in rounds:
        files = ", ".join(r.files_changed[:6]) or "no file changed"
        sha = f" · `{r.commit_sha[:7]}`" if r.commit_sha else ""
        lines.append(f"- Round {r.n}: {_first_line(r.handoff)} ({files}){sha}")
    earlier = store.round_tally(goal_id, before=rounds[0].n).count if rounds else 0
    if earlier:
        lines.append(f"- … {earlier} earlier rounds in `relay log` and the progress file")
    return lines, next((r.handoff for r in reversed(rounds) if r.handoff), None)


def run_summary_markdown(data: dict[str, Any], store: Store) -> str:
    """The morning summary of a goal after a run: status, what was done (round by round),
    what is next, the audit, spending, and where to look (branch, run folder, report).

    Args:
        data: the goal's ``--json`` object (:func:`relay.json_output.goal_json`) plus ``run_dir``.
        store: the goal's store, for the newest :data:`ROUNDS_SHOWN` round records (the
            last handoff is looked for among them) and the count of the earlier ones.
    """
    status = data["status"]
    lines = [
        f"# relay: {status}"
        + (f" ({data['reason']})" if data["reason"] not in (None, status) else ""),
        "",
        f"**Goal** ({data['goal_id']}): {_first_line(data['goal'], 300)}",
        "",
    ]
    if data.get("message"):
        lines += [_inert(data["message"].strip()), ""]
    if data.get("diagnosis"):
        lines += [f"**Diagnosis:** {data['diagnosis']}", ""]
    pushes = push_failures(data)
    if pushes:
        lines += [
            f"**⚠ The branch was not pushed** ({_failed_pushes(len(pushes))}); the work is "
            f"only in this clone: {_first_line(pushes[-1], 300)}",
            "",
        ]
    done, last_note = _what_was_done(data["goal_id"], store)
    lines += ["## What was done", "", *done]
    lines += ["", "## What is next", "", next_step(status, data.get("reason"))]
    if status != "complete" and last_note:
        lines.append(f"Last handoff: {_first_line(last_note, 300)}")
    audit = data.get("audit")
    lines += ["", "## Audit", ""]
    if audit:
        lines.append(f"{'Passed' if audit['passed'] else 'Failed'} (round {audit['round']}):")
        for c in audit["checks"]:
            mark = "✅" if c["passed"] else "❌"
            lines.append(f"- {mark} `{c['kind']}` {c['target']}: {_first_line(c['evidence'])}")
        if audit.get("note"):
            lines += ["", f"**Note:** {_inert(audit['note'])}"]
    else:
        lines.append(no_audit_line(data))
    t = data["tokens"]
    lines += [
        "",
        "## Spending",
        "",
        f"{counted(data['rounds'], 'round')} · {token_line(t)} · ${data['cost_usd']:.4f} · "
        f"{data['elapsed_s'] / 60:.1f} min",
        *(["", f"Note: {data['cache_note']}."] if data.get("cache_note") else []),
        "",
        "## Where to look",
        "",
        f"- Branch: `{data['branch']}` ({len(data['commits'])} relay commits)",
        f"- Run folder: `{data.get('run_dir', '-')}` (transcript.jsonl, this summary)",
        "- Events: `relay log`; status: `relay status`",
        "",
        f"_Written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}._",
    ]
    return "\n".join(lines) + "\n"


def junit_xml(data: dict[str, Any]) -> str:
    """The goal's outcome and latest audit as JUnit XML: one test case for the goal's status
    (passes only when complete) and one per audit check, with the evidence as the failure
    message (CI systems show them as tests)."""
    audit = data.get("audit") or {"checks": []}
    checks = audit["checks"]
    pushes = push_failures(data)
    suite = ET.Element(
        "testsuite",
        name=f"relay goal {data['goal_id']}",
        tests=str(1 + len(checks) + bool(pushes)),
        failures=str(
            sum(1 for c in checks if not c["passed"])
            + (data["status"] != "complete")
            + bool(pushes)
        ),
        time=f"{data['elapsed_s']:.3f}",
    )
    case = ET.SubElement(suite, "testcase", classname="relay.goal", name="goal status")
    if data["status"] != "complete":
        failure = ET.SubElement(
            case, "failure", message=f"{data['status']} ({data['reason']})", type=data["status"]
        )
        failure.text = _xml_text(data.get("message"))
    if pushes:
        case = ET.SubElement(suite, "testcase", classname="relay.git", name="push")
        failure = ET.SubElement(case, "failure", message="the branch was not pushed", type="push")
        failure.text = _xml_text("\n".join(pushes))
    for c in checks:
        case = ET.SubElement(
            suite, "testcase", classname=f"relay.audit.{c['kind']}", name=_xml_text(c["target"])
        )
        evidence = _xml_text(c["evidence"])
        if c["passed"]:
            out = ET.SubElement(case, "system-out")
            out.text = evidence
        else:
            failure = ET.SubElement(
                case, "failure", message=_first_line(evidence) or "failed", type=c["kind"]
            )
            failure.text = evidence
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
