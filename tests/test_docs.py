"""The documentation (issue 28, item 8): it cites no section of a specification the repository
does not hold, its links to files and headings of the repository resolve, and the scripted
model's script format is documented in docs/scripted-model.md, whose example runs through the
scripted model as it says."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from conftest import git

from relay.models import ScriptedModel

ROOT = Path(__file__).parents[1]
DOC = ROOT / "docs" / "scripted-model.md"
DOCS = sorted([ROOT / "README.md", ROOT / "bench" / "README.md", *(ROOT / "docs").glob("*.md")])
SPEC_REF = re.compile(r"SPEC\s*§|§\s*\d+(\.\d+)* of the spec|\bthe spec\b", re.IGNORECASE)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _relative(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_no_doc_cites_the_spec():
    files = [*DOCS, *(ROOT / "examples").rglob("*.md"), *(ROOT / "examples").rglob("*.y*ml")]
    found = [
        f"{_relative(path)}:{n}: {line.strip()}"
        for path in files
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if SPEC_REF.search(line)
    ]
    assert found == []


def _prose(path: Path) -> list[str]:
    """The lines of the Markdown file ``path`` outside fenced code blocks (a fence is three
    backticks or more, with an info string that holds no backtick, as in CommonMark)."""
    lines, fence = [], ""
    for line in path.read_text(encoding="utf-8").splitlines():
        match = re.match(r"(`{3,})([^`]*)$", line)
        if fence:
            if match and match.group(1).startswith(fence) and not match.group(2).strip():
                fence = ""
        elif match:
            fence = match.group(1)
        else:
            lines.append(line)
    return lines


def _anchors(path: Path) -> set[str]:
    """GitHub's anchors of the Markdown headings of ``path``."""
    headings = [m.group(1) for line in _prose(path) if (m := re.match(r"#{1,6} +(.+?) *$", line))]
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("path", DOCS, ids=_relative)
def test_every_link_into_the_repository_resolves(path):
    broken = []
    for target in LINK.findall(path.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue  # a URL
        name, _, anchor = target.partition("#")
        dest = (path.parent / name).resolve() if name else path
        checked = dest.exists() and bool(anchor) and dest.suffix == ".md"
        if not dest.exists() or (checked and anchor not in _anchors(dest)):
            broken.append(target)
    assert broken == []


def test_the_readme_links_the_scripted_model_doc():
    assert "](docs/scripted-model.md)" in (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks(marker: str) -> list[str]:
    """The YAML blocks of docs/scripted-model.md whose first line is ``# <marker>``."""
    blocks = re.findall(r"^```yaml\n(.*?)^```", DOC.read_text(encoding="utf-8"), re.M | re.S)
    return [b for b in blocks if b.startswith(f"# {marker}\n")]


def test_the_docs_yaml_blocks_are_a_valid_script_and_configuration():
    assert {len(_blocks("script.yaml")), len(_blocks("relay.yaml"))} == {1}
    ScriptedModel.from_dict(yaml.safe_load(_blocks("script.yaml")[0]))
    assert yaml.safe_load(_blocks("relay.yaml")[0])["deliverables"]


def test_every_key_of_the_script_format_is_documented():
    from relay.models import script_schema as schema

    text = DOC.read_text(encoding="utf-8")
    models = (schema.ScriptFile, schema.ScriptResponse, schema.ScriptToolCall, schema.ScriptUsage)
    keys = {k for m in (*models, schema.ScriptError, schema.ScriptRepeat) for k in m.model_fields}
    assert [k for k in sorted(keys) if f"`{k}" not in text] == []
    assert [k for k in schema.ERROR_KINDS if f"| `{k}` |" not in text] == []
    for kind, (message, _code) in schema.ERROR_DEFAULTS.items():
        assert f"| `{kind}` | {message} |" in text


def test_the_docs_example_runs_as_it_says(make_repo, tmp_path, relay_run):
    config = yaml.safe_load(_blocks("relay.yaml")[0])
    repo = make_repo(config=config)
    script = tmp_path / "script.yaml"
    script.write_text(_blocks("script.yaml")[0])
    code, data, err = relay_run(repo, script, "Write hello.txt saying hello.")
    assert (code, data["status"]) == (0, "complete"), err
    assert data["rounds"] == 2
    transcript = Path(data["run_dir"], "transcript.jsonl").read_text(encoding="utf-8")
    calls = [json.loads(line) for line in transcript.splitlines()]
    assert len(calls) == 7, [c.get("error") for c in calls]
    assert git(repo, "show", "HEAD:hello.txt") == "hello\n"
    assert [e["kind"] for e in data["events"]].count("api_errors") == 1
