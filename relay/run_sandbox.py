"""The sandbox of a goal's run and of ``relay audit`` (SPEC §14; docs/sandbox.md)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from relay.sandbox import Sandbox, SandboxUnavailable, resolve_sandbox

if TYPE_CHECKING:
    from relay.config import Config
    from relay.gitrepo import GitRepo

__all__ = ["sandbox_for", "sandbox_line"]


def sandbox_for(git: GitRepo, config: Config, state_dir: Path) -> Sandbox:
    """The sandbox of this run (SPEC §14): relay's state folders and the user configuration's
    folder (``$XDG_CONFIG_HOME/relay``, which a later run trusts) hidden, the git directories
    read-only. An agent worker (``worker`` other than ``builtin``) runs outside the sandbox
    (docs/workers.md): the sandbox is then off, and ``required`` is refused.

    Raises:
        SandboxUnavailable: (exit 1) ``required`` without bubblewrap, or with an agent worker.
    """
    from relay.config_layers import user_config_path

    git_dir, common = git.git_dir, git.common_dir
    cfg = config.sandbox
    agent = config.worker != "builtin"
    if agent and cfg.mode == "required":
        raise SandboxUnavailable(
            f"sandbox.mode is required, but worker {config.worker} does not run in relay's "
            "sandbox yet (docs/workers.md); use worker builtin, or sandbox.mode auto or off"
        )
    user_folder = str(user_config_path().parent)  # DEFAULT_HIDDEN has ~/.config/relay only
    sandbox = resolve_sandbox(
        "off" if agent else cfg.mode,
        network=cfg.network,
        writable_paths=cfg.writable_paths,
        hidden_paths=[*cfg.hidden_paths, user_folder],
        env_names=cfg.env,
        state_dirs=dict.fromkeys([state_dir, git_dir / "relay", common / "relay"]),
        git_dirs=dict.fromkeys([git_dir, common]),
    )
    if agent:
        why = f"worker {config.worker} runs outside relay's sandbox (not built yet)"
        sandbox = replace(sandbox, requested=cfg.mode, reason=why)
    return sandbox


def sandbox_line(sandbox: Sandbox) -> str:
    """How the model's commands run, as printed when a run starts."""
    if sandbox.active:
        return (
            f"bubblewrap ({sandbox.bwrap}); network {sandbox.network}; .git, relay's files "
            "and state out of the model's reach"
        )
    return f"OFF - {sandbox.warning()}"
