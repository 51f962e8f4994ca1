"""The worker tools offered to the model (SPEC §5) and a small validator for their arguments.

:data:`WORKER_TOOLS` holds one JSON-schema :class:`ToolSpec` per tool, in a fixed order.
:func:`check_arguments` checks a call's arguments against the subset of JSON schema these specs
use (objects, strings, integers with ``minimum``, arrays of objects); it does not check
``enum`` values: the statuses of ``update_goal`` are the supervisor's business (SPEC §7.1).
"""

from __future__ import annotations

from typing import Any

from relay.models.base import ToolSpec


def _object(
    properties: dict[str, dict[str, Any]], required: tuple[str, ...] = ()
) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


SHELL = ToolSpec(
    name="shell",
    description=(
        "Run a bash command in the repository root and get its exit code, stdout and stderr. "
        "Use it to run tests, build, search (grep, find, ls), inspect git history and run git "
        "commands that read. stdin is closed, so interactive commands cannot wait for input; "
        "pass non-interactive flags. Each call starts a fresh shell: `cd` and exported "
        "variables do not carry over to the next call. Long output is cut to its beginning and "
        "end with a marker; to see another part, run the command again with grep, tail or sed "
        "(relay keeps the whole output for the user). A command that runs longer than its "
        "timeout is killed together with every process it started, and no process it starts "
        "(background jobs included) outlives the call. relay commits the changes after each "
        "round: do not commit, reset or rebase yourself (.git, relay's files and protected "
        "paths are read-only). Credentials are not available in the environment."
    ),
    parameters=_object(
        {
            "command": {
                "type": "string",
                "description": "The bash command line, e.g. `python -m pytest -q tests/`.",
            },
            "timeout_s": {
                "type": "integer",
                "minimum": 1,
                "description": (
                    "Timeout in whole seconds. Default: the configured shell timeout "
                    "(120 s unless changed); larger values are capped at the configured "
                    "maximum."
                ),
            },
        },
        ("command",),
    ),
)

READ_FILE = ToolSpec(
    name="read_file",
    description=(
        "Read a text file of the repository. The path is relative to the repository root. "
        "Returns the file's text exactly (no line numbers); bytes that are not UTF-8 are shown "
        "as U+FFFD. Long files are cut at the output limit with a note giving the `offset` to "
        "continue from. Files inside .git/ and relay's state folder cannot be read."
    ),
    parameters=_object(
        {
            "path": {
                "type": "string",
                "description": "File path relative to the repository root, e.g. `src/app.py`.",
            },
            "offset": {
                "type": "integer",
                "minimum": 1,
                "description": "First line to return, 1-based. Default 1.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": "Number of lines to return. Default: as many as fit.",
            },
        },
        ("path",),
    ),
)

WRITE_FILE = ToolSpec(
    name="write_file",
    description=(
        "Create a file or replace its whole content (UTF-8), creating missing parent folders. "
        "The path is relative to the repository root. Paths outside the repository, inside "
        ".git/ and protected files (such as relay's progress file and relay.yaml) are refused "
        "and nothing is written. To change part of an existing file, prefer edit_file."
    ),
    parameters=_object(
        {
            "path": {
                "type": "string",
                "description": "File path relative to the repository root.",
            },
            "content": {
                "type": "string",
                "description": "The complete new content of the file.",
            },
        },
        ("path", "content"),
    ),
)

EDIT_FILE = ToolSpec(
    name="edit_file",
    description=(
        "Replace one exact piece of text in an existing file. `old` must occur exactly once in "
        "the file, matched character for character including whitespace and indentation; if "
        "it occurs zero times or several times nothing is changed and the result says how "
        "many times it was found (then read the file again, or include more surrounding lines "
        "in `old`). Protected files cannot be edited."
    ),
    parameters=_object(
        {
            "path": {
                "type": "string",
                "description": "File path relative to the repository root.",
            },
            "old": {
                "type": "string",
                "description": "The exact text to replace; not empty; must occur exactly once.",
            },
            "new": {
                "type": "string",
                "description": "The text to put in its place (may be empty to delete).",
            },
        },
        ("path", "old", "new"),
    ),
)

GET_GOAL = ToolSpec(
    name="get_goal",
    description=(
        "Show the goal: its text and supplements added by the user, its status, the round "
        "number and the maximum, the no-progress streak, blocked reports so far, the budget "
        "used and left, and the latest completion audit. Takes no arguments."
    ),
    parameters=_object({}),
)

UPDATE_GOAL = ToolSpec(
    name="update_goal",
    description=(
        "End work on the goal with a status. Call it alone, not together with other tools in "
        "the same response. `complete`: every requirement is done and verified; relay then "
        "checks the deliverables against the real files and test output, and rejects the call "
        "with the failing checks if they do not hold. `needs_user_input`: you cannot continue "
        "without an answer from a person; put it in `question`. `blocked`: the goal cannot be "
        "reached (explain in `reason`); early reports are rejected with a request to try "
        "another way. The result says whether the update was accepted, rejected or deferred, "
        "and why."
    ),
    parameters=_object(
        {
            "status": {
                "type": "string",
                "enum": ["complete", "needs_user_input", "blocked"],
                "description": "One of complete, needs_user_input, blocked.",
            },
            "summary": {
                "type": "string",
                "description": "What was done and how it was verified.",
            },
            "question": {
                "type": "string",
                "description": "For needs_user_input: the question for the user.",
            },
            "reason": {
                "type": "string",
                "description": "For blocked: what blocks the goal and what was tried.",
            },
            "checklist": {
                "type": "array",
                "description": (
                    "For complete: each requirement of the goal with the evidence that it is "
                    "met (a file, a command and its result)."
                ),
                "items": _object(
                    {
                        "requirement": {
                            "type": "string",
                            "description": "One requirement of the goal.",
                        },
                        "evidence": {
                            "type": "string",
                            "description": "Concrete evidence that it is met.",
                        },
                    },
                    ("requirement", "evidence"),
                ),
            },
        },
        ("status", "summary"),
    ),
)

HANDOFF = ToolSpec(
    name="handoff",
    description=(
        "Leave a note for the next round and end this round (the goal stays open). The next "
        "round starts with a fresh context and sees only the goal, the progress file (which "
        "will contain this note) and the git log, so say what was done, what is left, what "
        "failed and what to try next. Other tool calls of the same response run first."
    ),
    parameters=_object(
        {
            "note": {
                "type": "string",
                "description": "Handoff note: state of the work, next steps, known problems.",
            }
        },
        ("note",),
    ),
)

WORKER_TOOLS: tuple[ToolSpec, ...] = (
    SHELL,
    READ_FILE,
    WRITE_FILE,
    EDIT_FILE,
    GET_GOAL,
    UPDATE_GOAL,
    HANDOFF,
)
"""Every worker tool, in the order offered to the model."""

REAL_TOOLS = frozenset({"shell", "read_file", "write_file", "edit_file"})
"""Tools that act on the repository (run by :func:`relay.tools.execute`)."""

GOAL_TOOLS = frozenset({"get_goal", "update_goal", "handoff"})
"""Tools handled by the loop and supervisor."""

_BY_NAME: dict[str, ToolSpec] = {spec.name: spec for spec in WORKER_TOOLS}


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _check(schema: dict[str, Any], value: object, where: str) -> str | None:
    """The first problem of ``value`` against ``schema`` (``where`` names it), or ``None``."""
    kind = schema.get("type")
    label = f"argument {where!r}" if where else "arguments"
    if kind == "object":
        if not isinstance(value, dict):
            return f"{label} must be an object, got {_type_name(value)}"
        properties: dict[str, Any] = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                inner = f"{where}.{name}" if where else name
                return f"missing required argument {inner!r}"
        if schema.get("additionalProperties") is False:
            for name in value:
                if name not in properties:
                    inner = f"{where}.{name}" if where else str(name)
                    allowed = ", ".join(properties) or "none"
                    return f"unknown argument {inner!r} (allowed: {allowed})"
        for name, item in value.items():
            if name in properties:
                problem = _check(properties[name], item, f"{where}.{name}" if where else name)
                if problem:
                    return problem
        return None
    if kind == "string":
        if not isinstance(value, str):
            return f"{label} must be a string, got {_type_name(value)}"
        return None
    if kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{label} must be an integer, got {_type_name(value)}"
        minimum = schema.get("minimum")
        if minimum is not None and value < minimum:
            return f"{label} must be at least {minimum}, got {value}"
        return None
    if kind == "array":
        if not isinstance(value, list | tuple):
            return f"{label} must be an array, got {_type_name(value)}"
        items = schema.get("items")
        if items:
            for index, item in enumerate(value):
                problem = _check(items, item, f"{where}[{index}]")
                if problem:
                    return problem
        return None
    return None


INVALID_JSON = "__invalid_json__"
"""Key a provider adapter uses for tool-call arguments that were not a JSON object."""


def check_arguments(name: str, arguments: object) -> str | None:
    """Check a tool call's arguments against the tool's schema.

    Args:
        name: the tool name the model called.
        arguments: the decoded JSON arguments (should be a dict).

    Returns:
        ``None`` when they fit; otherwise one line naming the tool and the problem: unknown
        tool, arguments not an object, a missing required argument, an unknown argument, or an
        argument of the wrong type (booleans are not integers) or below its minimum. ``enum``
        values (``update_goal.status``) are not checked here.
    """
    if isinstance(arguments, dict) and INVALID_JSON in arguments:
        return f"{name}: {arguments[INVALID_JSON]}"
    spec = _BY_NAME.get(name)
    if spec is None:
        available = ", ".join(_BY_NAME)
        return f"unknown tool {name!r}; available tools: {available}"
    problem = _check(spec.parameters, arguments, "")
    return f"{name}: {problem}" if problem else None
