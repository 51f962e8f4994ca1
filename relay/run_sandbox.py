"""The sandbox of a goal's run and of ``relay audit`` (SPEC §14; docs/sandbox.md)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from relay.sandbox import Sandbox, resolve_sandbox

if TYPE_CHECKING:
    from relay.config import Config
    from relay.gitrepo import GitRepo

__all__ = ["sandbox_for", "sandbox_line"]


def sandbox_for(git: GitRepo, config: Config, state_dir: Path) -> Sandbox:
    """The sandbox of this run (SPEC §14): relay's state folders and the user configuration's
    folder (``$XDG_CONFIG_HOME/relay``, which a later run trusts) hidden, the git directories
    read-only. An agent worker's whole process runs in it (docs/workers.md). Raises
    ``SandboxUnavailable`` (exit 1) for ``required`` without bubblewrap."""
    from relay.config_layers import user_config_path

    git_dir, common = git.git_dir, git.common_dir
    cfg = config.sandbox
    user_folder = str(user_config_path().parent)  # DEFAULT_HIDDEN has ~/.config/relay only
    return resolve_sandbox(
        cfg.mode,
        network=cfg.network,
        writable_paths=cfg.writable_paths,
        hidden_paths=[*cfg.hidden_paths, user_folder],
        env_names=cfg.env,
        hide_processes=cfg.pid_namespace,
        state_dirs=dict.fromkeys([state_dir, git_dir / "relay", common / "relay"]),
        git_dirs=dict.fromkeys([git_dir, common]),
    )


def sandbox_line(sandbox: Sandbox) -> str:
    """How the model's commands run, as printed when a run starts."""
    if sandbox.active:
        return (
            f"bubblewrap ({sandbox.bwrap}); network {sandbox.network}; .git, relay's files "
            "and state out of the model's reach"
        )
    from relay.sandbox.pidns import PidNamespace, pid_namespace

    hiding = PidNamespace(sandbox.pid_namespace) if sandbox.pid_namespace else pid_namespace()
    if not sandbox.pid_namespace and hiding.active:
        hiding = PidNamespace(reason="sandbox.pid_namespace is off")
    return f"OFF - {sandbox.warning()} Processes: {hiding.describe()}."
