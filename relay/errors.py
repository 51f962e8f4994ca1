"""The one exception hierarchy of goal-relay.

Every error a user can cause or meet derives from :class:`RelayError`; the CLI turns it into a
message on stderr and an exit code (SPEC §12) at the boundary, never a traceback.
"""

from __future__ import annotations


class RelayError(Exception):
    """Base of every expected error. ``exit_code`` is the process exit code the CLI uses."""

    exit_code: int = 1


class ConfigError(RelayError):
    """A configuration key or value is wrong (relay.yaml, goal-file front matter, or a flag)."""


class RepoStateError(RelayError):
    """The repository is not in a state relay may work on (SPEC §11 preflight refusals)."""


class SecretInCommitError(RelayError):
    """A commit relay was about to make holds one of relay's secrets (a provider key), plain
    or encoded (SPEC §14, issue 27): nothing was committed. The message names the files and
    the variables (never a value) and what to do. A run stops on it, the goal paused for
    ``relay resume`` once the secret is gone.

    Args:
        message: the whole message.
        places: where the secrets are (paths, ``the commit message``…).
        names: the variables whose values were found.
    """

    def __init__(self, message: str, *, places: tuple[str, ...], names: tuple[str, ...]) -> None:
        super().__init__(message)
        self.places = places
        self.names = names


class SecretInPushError(SecretInCommitError):
    """A push relay was about to make would send objects that hold one of relay's secrets
    (a commit the model made itself, say): nothing was pushed (SPEC §14, issue 27)."""


class StoreError(RelayError):
    """The state database cannot be opened or is inconsistent (names the file)."""


class StoreAccessError(StoreError):
    """The state database failed under relay: its disk is full, the file became read-only,
    corrupt, locked or unreachable (issue 13). The message names the file and what to do.

    Args:
        message: the whole message.
        kind: ``full``, ``readonly``, ``moved`` (deleted or moved while open), ``corrupt``,
            ``locked``, ``io`` or ``other``.
        path: the database file.
    """

    def __init__(self, message: str, *, kind: str, path: object) -> None:
        super().__init__(message)
        self.kind = kind
        self.path = path


class RunStoppedError(RelayError):
    """A run stopped mid-way because relay could not write its own files (the state database,
    a run folder, the progress file: a full disk, a read-only or deleted file). The goal is
    paused where its status could still be written, its work is committed or left in the tree
    for ``relay resume`` to commit; the message says which, and what to do (issue 13)."""


class UnreadableGoalError(StoreError):
    """A goal's row holds a value relay cannot decode (the store was changed outside relay);
    ``goal_id`` names the goal so that relay can restore it from its own copy."""

    def __init__(self, message: str, goal_id: str) -> None:
        super().__init__(message)
        self.goal_id = goal_id


class GoalStateError(RelayError):
    """A request that the goal's current status does not allow (e.g. a second open goal)."""


class ModelError(RelayError):
    """A model call failed. ``kind`` is the classified error kind (SPEC §7.6, §13).

    Args:
        kind: one of ``rate_limit``, ``overloaded``, ``timeout``, ``connection``, ``server``
            (transient) or ``insufficient_quota``, ``auth``, ``permission``, ``not_found``,
            ``bad_request``, ``script_exhausted`` (fatal).
        message: the provider's message, shown to the user.
        retry_after_s: the provider's ``Retry-After`` in seconds, if it sent one.
        code: the provider's structured error code, if any (e.g. ``insufficient_quota``).
    """

    exit_code = 7

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        retry_after_s: float | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.retry_after_s = retry_after_s
        self.code = code

    @property
    def transient(self) -> bool:
        """True when the call may succeed if repeated later (SPEC §7.6)."""
        return self.kind in TRANSIENT_KINDS


class ForcedToolChoiceRejected(ModelError):
    """The provider refused a request because it forced tool use (SPEC §7.5)."""

    def __init__(self, message: str) -> None:
        super().__init__("bad_request", message, code="tool_choice_unsupported")


TRANSIENT_KINDS = frozenset({"rate_limit", "overloaded", "timeout", "connection", "server"})
