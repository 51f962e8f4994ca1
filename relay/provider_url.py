"""The model API's base URL, checked before a run changes anything (SPEC §11, §12; issue 28,
item 7).

* :func:`check_base_url`: ``base_url``/``--base-url`` is an ``http://`` or ``https://`` URL
  with a host (``localhost:11434`` would be read as a scheme ``localhost``, and the SDKs then
  fail with a connection error that does not name it).
* :func:`check_reachable`: the API's host accepts a TCP connection, so that an unreachable
  provider is refused before the goal's branch exists rather than failing its first model call
  on a new branch. Skipped when a proxy carries the requests (the proxy decides).
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from relay.errors import ConfigError

__all__ = ["ALLOWED", "check_base_url", "check_reachable"]

ALLOWED = "an http:// or https:// URL with a host, e.g. http://localhost:11434/v1"
"""What a base URL may be, as messages say it."""


def check_base_url(value: str) -> str:
    """``value`` when it is :data:`ALLOWED`; raises ``ValueError`` saying what is allowed
    (configuration validation names the key and the value)."""
    try:
        parts = urlsplit(value.strip())
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        raise ValueError(f"expected {ALLOWED} (the port must be a number)") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise ValueError(f"expected {ALLOWED}: it has no http:// or https:// scheme")
    if not parts.hostname:
        raise ValueError(f"expected {ALLOWED}: it has no host")
    return value.strip()


def _proxied(scheme: str, host: str) -> bool:
    """Whether the HTTP clients send requests for ``host`` through a proxy of the
    environment (``HTTPS_PROXY``, ``ALL_PROXY``, … less ``NO_PROXY``)."""
    import urllib.request  # http.client and more: only when a run starts

    proxies = urllib.request.getproxies()
    if not (proxies.get(scheme) or proxies.get("all")):
        return False
    return not urllib.request.proxy_bypass(host)


def check_reachable(url: str, timeout_s: float, *, setting: str = "--base-url/base_url") -> None:
    """Refuse a model API that cannot be reached: open (and close) a TCP connection to the
    host and port of ``url``.

    Args:
        url: the API's base URL (as the model's client uses it).
        timeout_s: seconds to wait for the connection (``connect_timeout_s``).
        setting: what sets the URL, for the message.

    Raises:
        ConfigError: the host does not resolve, refuses or does not answer in time; the
            message names the URL, the reason, and what to check.
    """
    parts = urlsplit(url)
    host, scheme = parts.hostname, parts.scheme.lower()
    if not host or scheme not in ("http", "https") or _proxied(scheme, host):
        return
    port = parts.port or (443 if scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except socket.gaierror:
        reason = f"the host name {host} does not resolve"
    except TimeoutError:
        reason = f"no answer at port {port} of {host} within {timeout_s:g} s"
    except OSError as exc:
        reason = f"{(exc.strerror or str(exc)).lower()} at port {port} of {host}"
    else:
        return
    raise ConfigError(
        f"cannot reach the model's API at {url} ({reason}): start the server, or fix "
        f"{setting} ({ALLOWED}); nothing was changed"
    )
