"""The sandbox for everything the model's actions execute (SPEC §14).

* :mod:`relay.sandbox.env` - the allow-listed environment (no provider keys, ever);
* :mod:`relay.sandbox.mounts` - the file system inside bubblewrap (a pure plan);
* :mod:`relay.sandbox.launcher` - the mode in force (``auto``/``required``/``off``, checked
  here) and the command line of one sandboxed command;
* :mod:`relay.sandbox.session` - one sandbox kept for a run's ``shell`` calls, each call
  ending as in a sandbox of its own (:mod:`relay.sandbox.kept`: the running sandbox and a
  command in it; :mod:`relay.sandbox.session_server`: its init, which starts the commands);
* :mod:`relay.sandbox.reaper` - no process outlives its call without bubblewrap either;
* :mod:`relay.sandbox.redact` - secret values replaced in everything relay records.

docs/sandbox.md states the guarantees of each mode.
"""

from relay.sandbox.env import ALLOWED_NAMES, allowed_env, is_credential_name, scrubbed_env
from relay.sandbox.launcher import (
    DEFAULT_HIDDEN,
    INSTALL_HINT,
    SANDBOX_DOCS,
    Sandbox,
    SandboxUnavailable,
    probe,
    resolve_sandbox,
)
from relay.sandbox.reaper import (
    become_subreaper,
    protect_process,
    stop_escaped,
    stop_run_processes,
)
from relay.sandbox.redact import Redactor
from relay.sandbox.session import SandboxSession

__all__ = [
    "ALLOWED_NAMES",
    "DEFAULT_HIDDEN",
    "INSTALL_HINT",
    "SANDBOX_DOCS",
    "Redactor",
    "Sandbox",
    "SandboxSession",
    "SandboxUnavailable",
    "allowed_env",
    "become_subreaper",
    "is_credential_name",
    "probe",
    "protect_process",
    "resolve_sandbox",
    "scrubbed_env",
    "stop_escaped",
    "stop_run_processes",
]
