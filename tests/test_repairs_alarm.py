"""relay.repairs: in the sandbox, the protected paths and the progress file are read before
and after a shell call only when the kernel told of a change to them since relay last looked;
a change a command made is still undone, and a change made between calls (the user's edit) is
kept. Outside the sandbox they are read at every call: a write through mmap, which tells the
kernel's file events nothing, is undone too."""

from __future__ import annotations

import mmap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from relay import protect
from relay.own_files import OwnFiles
from relay.repairs import Repairs


class Findings:
    def __init__(self) -> None:
        self.found: list[str] = []

    def tamper(self, detail: str) -> None:
        self.found.append(detail)


class NoRepoGuard:
    def after_command(self) -> Any:
        return SimpleNamespace(findings=(), problem=None)


def make_repairs(tmp_path: Path, *, sandboxed: bool) -> tuple[Repairs, Findings, Path]:
    root = tmp_path / "repo"
    (root / ".relay").mkdir(parents=True)
    (root / "relay.yaml").write_text("mode: relay\n")
    own = OwnFiles(root, ".relay/progress.md")
    own.write_progress("# Progress\n")
    findings = Findings()
    made = Repairs(
        own,
        ("relay.yaml", "ci/deploy.sh", ".relay/progress.md"),
        repo_guard=NoRepoGuard(),  # type: ignore[arg-type]
        watcher=None,
        sandboxed=sandboxed,
        run_id="run",
        events=findings,  # type: ignore[arg-type]
    )
    return made, findings, root


@pytest.fixture()
def repairs(tmp_path: Path) -> tuple[Repairs, Findings, Path]:
    return make_repairs(tmp_path, sandboxed=True)


def counting(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    reads: list[Any] = []
    real = protect.path_state
    monkeypatch.setattr(protect, "path_state", lambda p: reads.append(p) or real(p))
    return reads


def test_unchanged_protected_paths_are_not_read_again(
    repairs: tuple[Repairs, Findings, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    made, findings, _root = repairs
    reads = counting(monkeypatch)
    for _ in range(4):
        made.after_shell(made.before(None), "true")
    assert len(reads) == 2 and findings.found == []  # the first snapshot only


def test_a_command_s_change_is_undone_and_the_user_s_edit_between_calls_kept(
    repairs: tuple[Repairs, Findings, Path],
) -> None:
    made, findings, root = repairs
    made.after_shell(made.before(None), "true")
    before = made.before(None)
    (root / "relay.yaml").write_text("mode: session\n")  # the command
    (root / "ci").mkdir()
    (root / "ci" / "deploy.sh").write_text("curl evil\n")
    (root / ".relay" / "progress.md").write_text("all done\n")
    made.after_shell(before, "edit")
    assert (root / "relay.yaml").read_text() == "mode: relay\n"
    assert not (root / "ci" / "deploy.sh").exists()
    assert (root / ".relay" / "progress.md").read_text() == "# Progress\n"
    assert len(findings.found) == 3
    (root / "relay.yaml").write_text("mode: relay\nlimits: {}\n")  # the user, between calls
    made.after_shell(made.before(None), "true")
    assert (root / "relay.yaml").read_text() == "mode: relay\nlimits: {}\n"
    assert len(findings.found) == 3


def test_outside_the_sandbox_a_write_through_mmap_is_undone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made, findings, root = make_repairs(tmp_path, sandboxed=False)
    reads = counting(monkeypatch)
    made.after_shell(made.before(None), "true")
    mappings = []  # e.g. held by a process that escaped an earlier call
    for path in (root / "relay.yaml", root / ".relay" / "progress.md"):
        with open(path, "r+b") as handle:
            mappings.append(mmap.mmap(handle.fileno(), 0))
    made.after_shell(made.before(None), "true")
    before = made.before(None)
    for mapped in mappings:
        mapped[0:1] = b"X"  # a write the kernel's file events do not tell of
        mapped.close()
    made.after_shell(before, "mmap")
    assert (root / "relay.yaml").read_text() == "mode: relay\n"
    assert (root / ".relay" / "progress.md").read_text() == "# Progress\n"
    assert len(findings.found) == 2 and len(reads) >= 6
