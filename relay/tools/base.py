"""Shared types of the worker tools (SPEC §5): the result a tool returns and the context it runs in."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from relay.sandbox import Redactor, Sandbox, SandboxSession
from relay.tools.kept_output import DEFAULT_KEPT_BYTES


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one real tool call, as the loop records it and the model sees it.

    Attributes:
        content: the text the model sees (bounded by ``ToolContext.output_limit_bytes``, roughly).
        is_error: true for failures the model should notice: refusals, missing files, bad
            arguments, a non-zero exit code, a timeout.
        exit_code: ``shell`` only: the command's exit status; negative ``-N`` when the command
            was killed by signal ``N``; ``None`` when it never started or was never reaped.
        timed_out: ``shell`` only: the command hit its timeout and its process group was killed.
        paths_written: repo-relative POSIX paths that ``write_file``/``edit_file`` changed.
        full_output_path: ``shell`` only: absolute path of the file holding the output
            (stdout and stderr in arrival order; past ``ToolContext.kept_output_bytes`` its
            head and tail around a note naming the full size) when the visible content was
            cut; else ``None``.
    """

    content: str
    is_error: bool = False
    exit_code: int | None = None
    timed_out: bool = False
    paths_written: tuple[str, ...] = ()
    full_output_path: str | None = None


@dataclass(frozen=True)
class ToolContext:
    """Where and how the worker tools run.

    Attributes:
        repo_root: absolute, resolved repository root; file paths are relative to it and
            ``shell`` runs in it.
        state_dir: absolute path of relay's state directory; file tools refuse paths inside it.
        run_dir: absolute path of the current run's folder; ``shell`` writes whole outputs
            that were cut to ``run_dir/"outputs"/``.
        protected_paths: repo-relative paths or gitignore globs (:mod:`relay.globs`) that
            file tools refuse to write, e.g. ``".relay/progress.md"``, ``"relay.yaml"``,
            ``"tests/**"``, ``"*.lock"``. An entry also protects everything below a folder it
            matches.
        output_limit_bytes: tool output the model sees: characters of a ``shell`` result's text
            (issue 28), bytes of a file ``read_file`` shows; more is cut (head + tail).
        kept_output_bytes: bytes of a cut ``shell`` output kept in its file (head + tail).
        shell_timeout_s: default ``shell`` timeout, in seconds.
        max_shell_timeout_s: largest ``timeout_s`` the model may ask for, in seconds.
        sandbox: how ``shell`` (and the audit's commands) run: in bubblewrap, or off
            (SPEC §14); default off.
        redact: replaces secret values in every result before anyone sees it.
        session: the sandbox kept for the run's ``shell`` calls (:mod:`relay.sandbox.session`);
            None: each call starts a sandbox of its own (the audit's commands always do).
    """

    repo_root: Path
    state_dir: Path
    run_dir: Path
    protected_paths: tuple[str, ...] = ()
    output_limit_bytes: int = 16384
    kept_output_bytes: int = DEFAULT_KEPT_BYTES
    shell_timeout_s: float = 120.0
    max_shell_timeout_s: float = 3600.0
    sandbox: Sandbox = field(default_factory=Sandbox)
    redact: Redactor = field(default_factory=Redactor)
    session: SandboxSession | None = None
