"""An agent installed under the sandbox's private /tmp (a project-local ``npm install`` in a
checkout under /tmp, as CI machines often have it) is still there inside relay's sandbox: the
``node_modules`` folder that holds it is shown read-only (issue 16). It once failed with
``FileNotFoundError`` for ``…/.agents/node_modules/.bin/claude`` in every round."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

from sandbox_support import require_bwrap

from relay.sandbox import resolve_sandbox
from relay.workers.agents import agent_folders


def _fake_install(top: Path) -> Path:
    """``top/node_modules`` with a package whose command ``.bin/agent`` links to."""
    package = top / "node_modules" / "@vendor" / "agent" / "bin"
    package.mkdir(parents=True)
    exe = package / "agent.exe"
    exe.write_text("#!/bin/sh\necho agent ran\n")
    exe.chmod(0o755)
    bin_dir = top / "node_modules" / ".bin"
    bin_dir.mkdir()
    (bin_dir / "agent").symlink_to("../@vendor/agent/bin/agent.exe")
    return bin_dir / "agent"


def test_the_node_modules_folder_of_an_agent_under_tmp_is_named(tmp_path: Path) -> None:
    command = _fake_install(tmp_path / "checkout" / ".agents")
    assert agent_folders(str(command)) == [tmp_path / "checkout" / ".agents" / "node_modules"]
    assert agent_folders("/usr/bin/env") == []  # outside /tmp and /run: visible anyway


def test_an_agent_installed_under_tmp_runs_inside_the_sandbox(tmp_path: Path) -> None:
    require_bwrap()
    command = _fake_install(tmp_path / "checkout" / ".agents")
    repo = tmp_path / "repo"
    repo.mkdir()
    sandbox = resolve_sandbox("required")
    hidden = subprocess.run(
        sandbox.command([str(command)], root=repo), capture_output=True, text=True
    )
    assert hidden.returncode != 0  # what the worker met before
    shown = replace(sandbox, visible=(*sandbox.visible, *agent_folders(str(command))))
    ran = subprocess.run(shown.command([str(command)], root=repo), capture_output=True, text=True)
    assert (ran.returncode, ran.stdout) == (0, "agent ran\n"), ran.stderr


def test_a_command_in_the_sandbox_cannot_replace_the_shown_agent(tmp_path: Path) -> None:
    """The agent's folder is shown read-only: a model's command cannot swap the agent that
    relay starts for the next round."""
    require_bwrap()
    command = _fake_install(tmp_path / "checkout" / ".agents")
    repo = tmp_path / "repo"
    repo.mkdir()
    sandbox = resolve_sandbox("required")
    shown = replace(sandbox, visible=(*sandbox.visible, *agent_folders(str(command))))
    swap = f"echo 'echo swapped' > {command.resolve()}; echo x > {command.parent}/other"
    done = subprocess.run(
        shown.command(["bash", "-c", swap], root=repo), capture_output=True, text=True
    )
    assert done.returncode != 0 and "Read-only file system" in done.stderr, done.stderr
    assert command.read_text() == "#!/bin/sh\necho agent ran\n"
    assert not (command.parent / "other").exists()
