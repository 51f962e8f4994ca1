"""The environment and ``-c`` overrides of every git process relay starts (SPEC §11, §14).

:func:`git_environment` is ``os.environ`` without credentials and without the ``GIT_*``
variables that would redirect or reconfigure git; :data:`HARDENING` (and, outside a push,
:data:`LOCAL_ONLY`) are the ``-c`` overrides that switch off everything in git's configuration
that runs a program relay did not ask for. :class:`relay.gitsafe.SafeGit` applies both.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from relay.sandbox.env import is_credential_name, is_provider_name

__all__ = ["GIT_KEPT", "HARDENING", "LOCAL_ONLY", "git_environment", "is_provider_name"]

#: ``GIT_*`` variables every relay git process keeps: identity and which config files to read.
GIT_KEPT = frozenset(
    {
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_AUTHOR_DATE",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "GIT_COMMITTER_DATE",
        "GIT_CONFIG_NOSYSTEM",
        "GIT_CONFIG_SYSTEM",
        "GIT_CONFIG_GLOBAL",
    }
)

#: Prefixes of the further ``GIT_*`` variables a network call (push) keeps.
_GIT_NETWORK_PREFIXES = (
    "GIT_SSH",
    "GIT_ASKPASS",
    "GIT_PROXY_",
    "GIT_SSL_",
    "GIT_HTTP_",
    "GIT_ALLOW_PROTOCOL",
    "GIT_PROTOCOL_FROM_USER",
)

#: ``-c`` overrides of every relay git process: nothing in the configuration runs a program.
HARDENING: tuple[tuple[str, str], ...] = (
    ("core.quotepath", "false"),
    ("core.hooksPath", os.devnull),
    ("core.fsmonitor", "false"),
    ("core.pager", "cat"),
    ("core.editor", "true"),
    ("sequence.editor", "true"),
    ("diff.external", ""),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("push.gpgSign", "false"),
    ("log.showSignature", "false"),
    ("protocol.ext.allow", "never"),
    ("core.alternateRefsCommand", ""),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("submodule.recurse", "false"),
    ("color.ui", "false"),
    ("color.status", "false"),
)

#: Further overrides of calls that never talk to a remote (everything but a push).
LOCAL_ONLY: tuple[tuple[str, str], ...] = (
    ("core.sshCommand", ""),
    ("core.askPass", ""),
    ("credential.helper", ""),
)


def git_environment(
    *, network: bool = False, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of one relay git process.

    Args:
        network: the process talks to a remote (``git push``): keep the non-provider
            credentials and transport variables it may authenticate with.
        environ: the source (default ``os.environ``).

    Returns:
        A new dict: ``environ`` without credentials (all of them unless ``network``; provider
        variables always), without ``GIT_*`` variables other than :data:`GIT_KEPT` (and the
        transport ones when ``network``), with ``GIT_TERMINAL_PROMPT=0``, and with replacement
        objects and grafts off (``git replace`` or ``.git/info/grafts`` cannot make a diff
        against the base commit lie).
    """
    source = os.environ if environ is None else environ
    env: dict[str, str] = {}
    for name, value in source.items():
        upper = name.upper()
        if is_provider_name(name):
            continue
        if upper.startswith("GIT_"):
            keep = upper in GIT_KEPT or (network and upper.startswith(_GIT_NETWORK_PREFIXES))
        else:
            keep = network or not is_credential_name(name)
        if keep:
            env[name] = value
    env["GIT_TERMINAL_PROMPT"] = "0"
    # relay compares with the real history: no replacement objects or grafts the model set up
    env["GIT_NO_REPLACE_OBJECTS"] = "1"
    env["GIT_GRAFT_FILE"] = os.devnull
    return env
