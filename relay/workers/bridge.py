"""The agent's only way out of a sandbox without network (SPEC §14, §15).

``python -I …/relay/workers/bridge.py SOCKET PORT -- AGENT ARGS...`` (a script of the standard
library alone: importing relay would move the agent's key out of the environment) runs inside
relay's sandbox
(its own network namespace: a loopback device and nothing else). It listens on
``127.0.0.1:PORT`` there, the port of relay's gateway outside, so that the agent's base URL is
the same inside and out, and carries every connection to the gateway's Unix socket ``SOCKET``
(the one file of relay's that is mounted into the sandbox). Then it runs the agent and exits
with its exit code; SIGTERM and SIGINT are passed on to the agent. Nothing else is reachable:
the agent talks to relay's gateway, which holds the keys, and to nothing on the network.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import threading

CHUNK = 65536


def _pipe(source: socket.socket, target: socket.socket) -> None:
    """Copy ``source`` to ``target`` until ``source`` ends; then end ``target``'s writes."""
    try:
        while data := source.recv(CHUNK):
            target.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)


def _carry(client: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
    back.start()
    _pipe(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_carry, args=(client, path), daemon=True).start()


def main(argv: list[str]) -> int:
    """``SOCKET PORT -- COMMAND...``; returns the command's exit code (2: bad arguments)."""
    if len(argv) < 4 or argv[2] != "--":
        print("usage: bridge.py SOCKET PORT -- COMMAND...", file=sys.stderr)
        return 2
    path, port, command = argv[0], int(argv[1]), argv[3:]
    listener = socket.create_server(("127.0.0.1", port))
    threading.Thread(target=_serve, args=(listener, path), daemon=True).start()
    agent = subprocess.Popen(command)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: agent.send_signal(signum))
    code = agent.wait()
    listener.close()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
