"""Published output schemas (SPEC §12, issue 15 item 3): ``relay schema NAME`` prints the JSON
Schema of each machine-readable output, real outputs of scripted-model runs validate against
them, docs/outputs.md is what the models generate, and ``relay log --json`` prints JSON lines."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from conftest import call, complete, respond, state_dir

from relay.outputs import SCHEMAS
from relay.outputs_docs import outputs_markdown

ROOT = Path(__file__).resolve().parent.parent
NAMES = ["result", "status", "transcript", "batch", "events"]
NOTES = {"deliverables": [{"file": "notes.txt", "contains": "hello"}]}
WRITE = respond(call("write_file", path="notes.txt", content="hello\n"))


def schema_of(run_relay, name: str) -> dict:
    code, out, err = run_relay(["schema", name])
    assert code == 0, err
    schema = json.loads(out)
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


def valid(run_relay, name: str, instance) -> None:
    """``instance`` validates against ``relay schema NAME`` (an error names the field)."""
    jsonschema.validate(instance, schema_of(run_relay, name), jsonschema.Draft202012Validator)


def run_with_everything(make_repo, write_script, relay_run):
    """A run whose object has an audit, events (a failed check, an API error), commits and a
    failed model call in its transcript; returns (repo, JSON object, stderr)."""
    repo = make_repo(config=NOTES)
    script = write_script(
        [
            {"error": "overloaded"},
            respond(call("shell", command="echo one"), call("handoff", note="first")),
            complete("too early"),
            WRITE,
            complete("notes written"),
        ]
    )
    code, data, err = relay_run(repo, script, "Create notes.txt saying hello.")
    assert code == 0, err
    assert data["audit"]["checks"] and data["events"] and data["commits"]
    return repo, data, err


@pytest.mark.parametrize("name", NAMES)
def test_relay_schema_prints_a_json_schema_of_each_output(run_relay, name):
    schema = schema_of(run_relay, name)
    assert schema == SCHEMAS[name].model_json_schema()


def test_relay_schema_without_a_name_prints_all_and_refuses_an_unknown_one(run_relay):
    code, out, _ = run_relay(["schema"])
    assert code == 0 and sorted(json.loads(out)) == sorted(NAMES)
    code, out, err = run_relay(["schema", "goals"])
    assert code == 1 and out == ""
    assert "relay schema 'goals': expected one of result, status, transcript, batch, events" in err


def test_a_real_run_json_object_validates_with_check_jsonschema(
    make_repo, write_script, relay_run, run_relay, tmp_path
):
    _, data, _ = run_with_everything(make_repo, write_script, relay_run)
    (tmp_path / "schema.json").write_text(json.dumps(schema_of(run_relay, "result")))
    (tmp_path / "result.json").write_text(json.dumps(data))
    checker = Path(sys.executable).parent / "check-jsonschema"
    proc = subprocess.run(
        [checker, "--schemafile", tmp_path / "schema.json", tmp_path / "result.json"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    broken = {**data, "rounds": "3"}  # a wrong type is caught
    (tmp_path / "result.json").write_text(json.dumps(broken))
    proc = subprocess.run(
        [checker, "--schemafile", tmp_path / "schema.json", tmp_path / "result.json"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1 and "rounds" in proc.stdout


def test_status_json_validates_before_and_after_a_goal(make_repo, write_script, run_relay):
    repo = make_repo(config=NOTES)
    code, out, _ = run_relay(["status", "--repo", repo, "--json"])
    assert code == 0
    before = json.loads(out)
    assert before["goal_id"] is None
    valid(run_relay, "status", before)
    script = write_script([WRITE, complete()])
    run_relay(["run", "Write notes.", "--repo", repo, "--model", f"scripted:{script}"])
    code, out, _ = run_relay(["status", "--repo", repo, "--json"])
    after = json.loads(out)
    assert after["status"] == "complete" and after["running"] is False
    valid(run_relay, "status", after)


def test_every_transcript_line_validates(make_repo, write_script, relay_run, run_relay):
    repo, _, _ = run_with_everything(make_repo, write_script, relay_run)
    lines = [
        json.loads(line)
        for path in (state_dir(repo) / "runs").glob("*/transcript.jsonl")
        for line in path.read_text().splitlines()
    ]
    assert any("error" in line for line in lines) and any("response" in line for line in lines)
    for line in lines:
        valid(run_relay, "transcript", line)


def test_relay_log_json_prints_json_lines_that_validate(
    make_repo, write_script, relay_run, run_relay
):
    repo, _, _ = run_with_everything(make_repo, write_script, relay_run)
    code, out, err = run_relay(["log", "--repo", repo, "--json"])
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert {line["type"] for line in lines} == {"event", "step"}
    assert [line["time"] for line in lines] == sorted(line["time"] for line in lines)
    shells = [c for line in lines if line["type"] == "step" for c in line["tool_calls"]]
    assert {"name": "shell", "is_error": False, "arguments": {"command": "echo one"}} in shells
    for line in lines:
        valid(run_relay, "events", line)
    code, text, _ = run_relay(["log", "--repo", repo])  # the same stream for a person
    assert len(text.splitlines()) == len(lines)


def test_batch_json_validates(make_repo, write_script, run_relay, tmp_path):
    repo = make_repo(config=NOTES)
    good = write_script([WRITE, complete()])
    batch = tmp_path / "goals.yaml"
    entries = [
        {"goal": "Write notes.", "name": "a", "model": f"scripted:{good}"},
        {"goal": "Never starts.", "name": "b", "model": "nosuchprovider:x"},
    ]
    batch.write_text(yaml.safe_dump(entries))
    code, out, _ = run_relay(["batch", batch, "--repo", repo, "--json"])
    *rows, data = [json.loads(line) for line in out.splitlines()]
    assert code == 1 and [g["status"] for g in data["goals"]] == ["complete", "error"]
    valid(run_relay, "batch", data)
    for row in rows:  # each line before the last is one goal's row, as it ended
        valid(run_relay, "batch", {"exit_code": 0, "goals": [row]})


def test_docs_outputs_md_is_what_the_models_generate(run_relay):
    committed = (ROOT / "docs" / "outputs.md").read_text(encoding="utf-8")
    assert committed == outputs_markdown(), (
        "docs/outputs.md is out of date: relay schema --markdown > docs/outputs.md"
    )
    code, out, _ = run_relay(["schema", "--markdown"])
    assert code == 0 and out == committed


def _all_fields(node) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        found |= set(node.get("properties", {}))
        for value in node.values():
            found |= _all_fields(value)
    elif isinstance(node, list):
        for value in node:
            found |= _all_fields(value)
    return found


def test_the_readme_points_to_docs_outputs_and_names_only_real_fields():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Exit codes and outputs", 1)[1].split("\n## ", 1)[0]
    assert "docs/outputs.md" in section and "relay schema" in section
    fields = _all_fields([model.model_json_schema() for model in SCHEMAS.values()])
    named = set(re.findall(r"`([a-z_]+)`", section)) - {"relay", "jq"}
    assert named and named <= fields, named - fields


@pytest.mark.parametrize("code_value", [{"nested": [1]}, 503, True])
def test_a_provider_error_code_of_any_json_type_keeps_the_transcript_valid(
    code_value, make_repo, run_relay, httpserver, monkeypatch
):
    """The error body of a provider (or an OpenAI-compatible server) is not relay's: an odd
    ``code`` is written as text, the line still validates, and the run goes on."""
    from relay.models.base import Response, ToolCall
    from relay.testing import openai_body

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    repo = make_repo(config={**NOTES, "limits": {"api_backoff_s": 0.01}})
    failure = {"error": {"code": code_value, "message": "boom", "type": "server_error"}}
    answers = [
        Response(
            tool_calls=(ToolCall("c1", "write_file", {"path": "notes.txt", "content": "hello\n"}),)
        ),
        Response(
            tool_calls=(ToolCall("c2", "update_goal", {"status": "complete", "summary": "ok"}),)
        ),
    ]
    path = "/v1/chat/completions"
    httpserver.expect_ordered_request(path).respond_with_json(failure, status=500)
    for answer in answers:
        httpserver.expect_ordered_request(path).respond_with_json(openai_body(answer, "m"))
    url = httpserver.url_for("/v1").rstrip("/")
    args = ["run", "Write notes.", "--repo", repo, "--model", "openai:m", "--base-url", url]
    code, _, err = run_relay([*args, "--json"])
    assert "Traceback" not in err and code == 0, err
    lines = [
        json.loads(line)
        for path in (state_dir(repo) / "runs").glob("*/transcript.jsonl")
        for line in path.read_text().splitlines()
    ]
    errors = [line["error"] for line in lines if "error" in line]
    assert errors and errors[0]["kind"] == "server"
    for line in lines:
        valid(run_relay, "transcript", line)


def test_resume_json_validates_as_a_result(make_repo, write_script, relay_run, run_relay):
    repo = make_repo(config=NOTES)
    first_round = respond(call("shell", command="echo one"), call("handoff", note="next: notes"))
    script = write_script([first_round, WRITE, complete()])
    code, first, _ = relay_run(repo, script, "Write notes.", "--max-rounds", "1")
    assert (code, first["status"]) == (4, "limit_reached")
    valid(run_relay, "result", first)
    code, out, err = run_relay(["resume", "--repo", repo, "--max-rounds", "5", "--json"])
    assert code == 0, err
    resumed = json.loads(out)
    assert resumed["status"] == "complete" and resumed["goal_id"] == first["goal_id"]
    valid(run_relay, "result", resumed)
