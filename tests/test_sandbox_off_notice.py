"""Issue 28 item 16: without the sandbox relay says so once per run, in one short line with a
link to docs/sandbox.md (what is then not guaranteed, how to turn it on), instead of a
paragraph of ~1,300 characters at start, in every run's event, in ``relay status`` and
``relay log``."""

from __future__ import annotations

import tomllib
from pathlib import Path

from relay.sandbox import SANDBOX_DOCS, Sandbox
from tests.conftest import call, complete, respond

ROOT = Path(__file__).resolve().parents[1]
SHORT = 220
"""Characters of the notice at most (its reason included)."""


def test_the_notice_is_short_and_links_to_the_sandbox_docs() -> None:
    for sandbox in (
        Sandbox(),
        Sandbox(requested="auto", reason="bubblewrap (bwrap) is not installed"),
    ):
        notice = sandbox.warning() or ""
        assert len(notice) <= SHORT, notice
        assert "unconfined" in notice and SANDBOX_DOCS in notice
    assert Sandbox(requested="auto", reason="x").warning() != Sandbox().warning()  # names why
    repository = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]
    assert SANDBOX_DOCS.startswith(repository["Repository"] + "/")
    assert SANDBOX_DOCS.endswith("/docs/sandbox.md") and (ROOT / "docs" / "sandbox.md").is_file()


def test_a_run_without_the_sandbox_says_so_once_in_a_short_line(
    make_repo, write_script, relay_run, run_relay
):
    repo = make_repo()
    script = write_script(
        [
            respond(call("shell", command="echo one")),
            respond(call("shell", command="echo two")),
            respond(call("write_file", path="a.txt", content="a\n")),
            complete(),
        ]
    )
    code, data, err = relay_run(repo, script, "Write a.txt.", "--sandbox", "off")
    assert code == 0 and data["sandbox"] == "off"
    said = [line for line in err.splitlines() if "sandbox is off" in line]
    assert len(said) == 1 and SANDBOX_DOCS in said[0], err
    notices = [e["detail"] for e in data["events"] if e["kind"] == "sandbox_off"]
    assert len(notices) == 1 and len(notices[0]) <= SHORT
    _, out, status_err = run_relay(["status", "--repo", repo])
    status = out + status_err
    assert "sandbox: OFF" in status and "Not guaranteed" not in status
    assert all(len(line) <= 400 for line in status.splitlines() if "sandbox" in line)
