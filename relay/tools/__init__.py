"""Worker tools (SPEC §5): specs offered to the model and executors for the real tools.

:func:`execute` runs one real tool call (``shell``, ``read_file``, ``write_file``,
``edit_file``) and always returns a :class:`ToolResult`: a model's mistake is an error result it
can read, never an exception. The goal tools (``get_goal``, ``update_goal``, ``handoff``) are
answered by the loop.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from relay.models.base import ToolCall
from relay.tools.base import ToolContext, ToolResult
from relay.tools.files import edit_file, read_file, write_file
from relay.tools.paths import PathRefused, protected_entry, resolve_path
from relay.tools.shell import is_credential_name, kill_running, run_shell, scrubbed_env
from relay.tools.specs import GOAL_TOOLS, REAL_TOOLS, WORKER_TOOLS, check_arguments

__all__ = [
    "GOAL_TOOLS",
    "REAL_TOOLS",
    "WORKER_TOOLS",
    "PathRefused",
    "ToolContext",
    "ToolResult",
    "check_arguments",
    "edit_file",
    "execute",
    "is_credential_name",
    "kill_running",
    "protected_entry",
    "read_file",
    "resolve_path",
    "run_shell",
    "scrubbed_env",
    "write_file",
]


def execute(call: ToolCall, ctx: ToolContext) -> ToolResult:
    """Run one real tool call.

    Args:
        call: the model's call; ``call.arguments`` is checked against the tool's schema.
        ctx: where and how tools run.

    Returns:
        The tool's result. Unknown tools, goal tools (answered by the loop), arguments that do
        not fit the schema, refused paths, missing files and OS errors all give
        ``ToolResult(is_error=True)`` with a message naming the problem. Only
        ``KeyboardInterrupt``/``SystemExit`` propagate (after the shell's process group is
        killed). Secret values in the result are replaced (``ctx.redact``).
    """
    name = call.name
    if name in GOAL_TOOLS:
        return ToolResult(
            f"{name} is answered by relay's loop, not by the tool executor", is_error=True
        )
    problem = check_arguments(name, call.arguments)
    if problem is not None:
        return ToolResult(problem, is_error=True)
    if name not in REAL_TOOLS:  # pragma: no cover - every spec is a real or a goal tool
        return ToolResult(f"unknown tool {name!r}", is_error=True)
    args = call.arguments
    result = _run(name, args, ctx)
    content = ctx.redact(result.content)
    return result if content == result.content else replace(result, content=content)


def _run(name: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    try:
        if name == "shell":
            return run_shell(ctx, args["command"], args.get("timeout_s"))
        if name == "read_file":
            return read_file(ctx, args["path"], args.get("offset"), args.get("limit"))
        if name == "write_file":
            return write_file(ctx, args["path"], args["content"])
        return edit_file(ctx, args["path"], args["old"], args["new"])
    except PathRefused as refused:
        return ToolResult(f"{name}: refused: {refused.message}", is_error=True)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        reason = exc.strerror or str(exc)
        return ToolResult(f"{name}: {reason}{where}", is_error=True)
    except Exception as exc:  # a tool must never crash the run (SPEC §5)
        return ToolResult(f"{name}: unexpected {type(exc).__name__}: {exc}", is_error=True)
