"""The model's shell cannot change a configuration layer a later run trusts (issue 15).

* the user file (``$XDG_CONFIG_HOME/relay/config.yaml``) is hidden inside the sandbox, also
  when ``XDG_CONFIG_HOME`` is not ``~/.config``: the model can neither read nor write it;
* ``RELAY_*`` variables never reach the model's commands, whatever ``sandbox.env`` allows;
* ``relay.yaml`` stays protected.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from conftest import git
from sandbox_support import require_bwrap

from relay.config import Config, SandboxConfig
from relay.errors import ConfigError
from relay.gitrepo import GitRepo
from relay.models.base import ToolCall
from relay.run_sandbox import sandbox_for
from relay.sandbox import allowed_env
from relay.tools import ToolContext, execute


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "relay.yaml").write_text("mode: relay\n")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "initial")
    return root.resolve()


def context(repo: Path, tmp_path: Path, env: list[str] | None = None) -> ToolContext:
    require_bwrap()
    state = repo / ".git" / "relay"
    state.mkdir(exist_ok=True)
    config = Config(sandbox=SandboxConfig(mode="required", env=env or []))
    sandbox = sandbox_for(GitRepo(repo), config, state)
    assert sandbox.active
    return ToolContext(
        repo_root=repo,
        state_dir=state,
        run_dir=tmp_path / f"run-{tmp_path.name}",
        protected_paths=("relay.yaml",),
        shell_timeout_s=20.0,
        sandbox=sandbox,
    )


def shell(ctx: ToolContext, command: str) -> str:
    call = ToolCall(id="s", name="shell", arguments={"command": command})
    return execute(call, ctx).content


def test_the_user_file_is_out_of_reach_also_under_xdg_config_home(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    # outside /tmp, which the sandbox replaces by a private one: visible unless hidden
    xdg = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="relay-xdg-"))
    request.addfinalizer(lambda: shutil.rmtree(xdg, ignore_errors=True))
    user = xdg / "relay" / "config.yaml"
    user.parent.mkdir(parents=True)
    user.write_text("model: anthropic:claude-sonnet-4-6\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    ctx = context(repo, tmp_path)
    seen = shell(
        ctx,
        f"cat {user}; echo 'sandbox: {{mode: off}}' > {user}; "
        f"echo 'model: scripted:/evil.yaml' > {xdg}/relay/new.yaml; ls -A {xdg}/relay",
    )
    assert "claude-sonnet" not in seen
    assert user.read_text() == "model: anthropic:claude-sonnet-4-6\n"
    assert sorted(p.name for p in user.parent.iterdir()) == ["config.yaml"]


def test_relay_settings_variables_never_reach_the_models_commands(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELAY_MODEL", "openai:secret-model")
    monkeypatch.setenv("RELAY_LIMITS__MAX_ROUNDS_TOTAL", "7")
    monkeypatch.setenv("MYAPP_HOME", "/opt/app")
    env = allowed_env(extra_names=["*"])  # even a user allowing every name
    assert not [name for name in env if name.startswith("RELAY_")]
    assert env["MYAPP_HOME"] == "/opt/app"
    seen = shell(context(repo, tmp_path, env=["MYAPP_*"]), "env")
    assert "RELAY_MODEL" not in seen and "RELAY_LIMITS" not in seen
    assert "MYAPP_HOME=/opt/app" in seen and "RELAY_SANDBOX=bwrap" in seen  # relay's own mark


def test_sandbox_env_cannot_name_relays_settings() -> None:
    with pytest.raises(ValueError, match="RELAY_"):
        SandboxConfig(env=["RELAY_*"])
    from relay.config import validate_config

    with pytest.raises(ConfigError, match=r"sandbox.env .*never passed to the model's commands"):
        validate_config({"sandbox": {"env": ["RELAY_MODEL"]}}, "relay.yaml")


def test_relay_yaml_stays_protected(repo: Path, tmp_path: Path) -> None:
    ctx = context(repo, tmp_path)
    seen = shell(ctx, "echo 'model: scripted:/evil.yaml' >> relay.yaml")
    assert (repo / "relay.yaml").read_text() == "mode: relay\n", seen
    write = ToolCall(id="w", name="write_file", arguments={"path": "relay.yaml", "content": "x"})
    assert execute(write, ctx).is_error
    assert (repo / "relay.yaml").read_text() == "mode: relay\n"
