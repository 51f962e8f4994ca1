"""The help texts (issue 13, the new-user check): ``-h`` works like ``--help``, arguments are
named plainly, and no help text points into relay's source."""

from __future__ import annotations

import re

import pytest

COMMANDS = [
    "run",
    "resume",
    "status",
    "say",
    "log",
    "report",
    "batch",
    "audit",
    "compare",
    "init",
    "schema",
]


@pytest.mark.parametrize("command", COMMANDS)
def test_dash_h_is_help(run_relay, command: str) -> None:
    code, out, err = run_relay([command, "-h"])
    assert code == 0, err
    assert f"relay {command} " in out.splitlines()[0]
    assert "[[" not in out.splitlines()[0]  # no doubled brackets around an optional argument
    assert not re.search(r"relay/\w+\.py", out)  # no pointer into relay's source


def test_the_top_level_dash_h(run_relay) -> None:
    code, out, _ = run_relay(["-h"])
    assert code == 0 and "COMMAND [ARGS]" in out
