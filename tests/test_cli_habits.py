"""The habits people bring from other command lines (issue 15, item 5): shell completion,
``NO_COLOR`` and ``--no-color``, ``--quiet`` and ``--verbose``, an example in every help."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest
import typer
import yaml
from conftest import call, complete, respond
from typer.core import TyperGroup

from relay.cli import app

ANSI = "\x1b["


def command_paths() -> list[list[str]]:
    """Every command of relay, as the words after ``relay`` (groups included)."""
    root = typer.main.get_command(app)
    out: list[list[str]] = [[]]

    def walk(group: TyperGroup, prefix: list[str]) -> None:
        for name, command in group.commands.items():
            out.append([*prefix, name])
            if isinstance(command, TyperGroup):
                walk(command, [*prefix, name])

    assert isinstance(root, TyperGroup)
    walk(root, [])
    return out


def parse(words: list[str]) -> None:
    """Parse ``relay WORDS`` as the command line would, without running anything: the words
    naming (sub)commands, then the last command's arguments and options (raises the usage
    errors of typer's click)."""
    command = typer.main.get_command(app)
    rest = list(words)
    while isinstance(command, TyperGroup) and rest and rest[0] in command.commands:
        command = command.commands[rest.pop(0)]
    command.make_context("relay", rest, resilient_parsing=False)


@pytest.mark.parametrize("words", command_paths(), ids=lambda w: " ".join(w) or "relay")
def test_every_help_gives_an_example_that_parses(words: list[str], run_relay) -> None:
    code, out, err = run_relay([*words, "--help"])
    assert code == 0, err
    examples = [line.strip() for line in out.splitlines() if line.strip().startswith("Example:")]
    assert len(examples) == 1, out
    example = shlex.split(examples[0].removeprefix("Example:"))
    assert example[0] == "relay"
    assert example[1 : 1 + len(words)] == words  # the example is of this command
    parse(example[1:])


def test_shell_completion_is_on(run_relay) -> None:
    # the shell is detected from the parent processes: run relay from bash (`; true` keeps
    # bash from replacing itself by relay)
    shown = subprocess.run(
        ["bash", "-c", f"{shlex.quote(sys.executable)} -m relay.cli --show-completion; true"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "_RELAY_COMPLETE" in shown.stdout and "complete " in shown.stdout, shown.stderr
    _, out, _ = run_relay(
        [],
        subprocess=True,
        env={"_RELAY_COMPLETE": "complete_bash", "COMP_WORDS": "relay con", "COMP_CWORD": "1"},
    )
    assert out.split() == ["config"]
    _, out, _ = run_relay(
        [],
        subprocess=True,
        env={
            "_RELAY_COMPLETE": "complete_bash",
            "COMP_WORDS": "relay run --max-r",
            "COMP_CWORD": "2",
        },
    )
    assert out.split() == ["--max-rounds"]
    code, out, _ = run_relay(["--help"])
    assert code == 0 and "--install-completion" in out


def one_step_run(make_repo, write_script, name: str) -> list[str]:
    repo = make_repo(name=name)
    script = write_script([respond(call("write_file", path="a.txt", content="a")), complete()])
    return ["run", "Write a.txt.", "--repo", str(repo), "--model", f"scripted:{script}"]


@pytest.mark.parametrize("how", ["NO_COLOR", "--no-color first", "--no-color last"])
def test_no_color_and_no_colour_flag_leave_no_escape_sequence(
    how: str, make_repo, write_script, run_relay
) -> None:
    args = one_step_run(make_repo, write_script, "control")
    forced = {"FORCE_COLOR": "1", "TERM": "xterm-256color"}
    _, _, coloured = run_relay(args, subprocess=True, env=forced)
    assert ANSI in coloured  # the control: a terminal gets colours
    args = one_step_run(make_repo, write_script, "repo")
    env = dict(forced)
    if how == "NO_COLOR":
        env["NO_COLOR"] = "1"
    elif how == "--no-color first":
        args = ["--no-color", *args]
    else:
        args = [*args, "--no-color"]
    code, out, err = run_relay(args, subprocess=True, env=env)
    assert code == 0, err
    assert "complete" in err
    assert ANSI not in err + out


def test_quiet_and_verbose_of_run(make_repo, write_script, run_relay) -> None:
    repo = make_repo()
    lines = "\n".join(f"line {n}" for n in range(1, 31))
    script = write_script(
        [
            respond(call("shell", command=f"printf '{lines}\\n'"), text="First.\nSecond."),
            respond(call("write_file", path="a.txt", content="a")),
            complete(),
        ]
    )
    base = ["run", "Write a.txt.", "--repo", repo, "--model", f"scripted:{script}"]
    code, out, err = run_relay([*base, "--verbose"])
    assert code == 0, err
    assert "line 15" in err  # the tool call's output, not only its first and last line
    assert "line 29" not in err and "more lines in the transcript" in err  # up to 20 lines
    assert "Second." in err  # the model's whole text, not only its first line
    repo2 = make_repo(name="repo2")
    code, out, err = run_relay([*base[:3], repo2, *base[4:], "--quiet"])
    assert code == 0 and err.strip() == "" and out == ""
    code, _, err = run_relay([*base, "--quiet", "--verbose"])
    assert code == 1 and "--quiet and --verbose exclude each other" in err


def test_quiet_and_verbose_of_batch(make_repo, write_script, tmp_path, run_relay) -> None:
    repo = make_repo()
    script = write_script([respond(call("write_file", path="a.txt", content="a")), complete()])
    goals = tmp_path / "goals.yaml"
    goals.write_text(yaml.safe_dump([{"goal": "Write a.txt.", "name": "a"}]))
    model = f"scripted:{script}"
    code, out, err = run_relay(
        ["batch", goals, "--repo", repo, "--model", model, "--verbose"], subprocess=True
    )
    assert code == 0, err
    assert "[a] round 1 ended" in err and "relay batch: goals.yaml" in out
    goals.write_text(yaml.safe_dump([{"goal": "Write a.txt.", "name": "b"}]))
    code, out, err = run_relay(
        ["batch", goals, "--repo", repo, "--model", model, "--quiet"], subprocess=True
    )
    assert code == 0 and out == "" and "round" not in err
    code, out, _ = run_relay(["batch", goals, "--repo", repo, "--quiet", "--json", "-v"])
    assert code == 1
    # --json puts JSON lines on stdout; the line per goal stays on stderr (quiet only with -q)
    goals.write_text(yaml.safe_dump([{"goal": "Write a.txt.", "name": "c"}]))
    code, out, err = run_relay(
        ["batch", goals, "--repo", repo, "--model", model, "--json"], subprocess=True
    )
    assert code == 0, err
    assert [json.loads(line)["name"] for line in out.splitlines()[:1]] == ["c"]
    assert "c: complete after 1 round" in err


def test_quiet_of_compare_prints_nothing_but_writes_its_files(
    make_repo, write_script, run_relay
) -> None:
    repo = make_repo()
    script = write_script(
        {
            "responses": [respond(call("write_file", path="a.txt", content="a")), complete()],
            "when_exhausted": "repeat_last",
        }
    )
    args = ["compare", "Write a.txt.", "--repo", repo, "--model", f"scripted:{script}"]
    code, out, err = run_relay([*args, "--quiet"])
    assert code == 0 and out == "" and "round" not in err, err
    _, out, err = run_relay([*args, "--verbose", "--json"])
    data = json.loads(out)
    assert len(data["runs"]) == 2
    # README: --verbose adds a line per tool call of each run
    assert "[relay]   ✓ write_file a.txt" in err and "[session]   ✓ write_file a.txt" in err


def test_compare_prints_a_line_per_round_of_each_run_and_the_table_on_stdout(
    make_repo, write_script, run_relay
) -> None:
    """README's table of what the commands print: compare, by default, a line per round of
    each run on stderr (no tool call lines) and the table on stdout."""
    repo = make_repo()
    script = write_script(
        {
            "responses": [respond(call("write_file", path="a.txt", content="a")), complete()],
            "when_exhausted": "repeat_last",
        }
    )
    args = ["compare", "Write a.txt.", "--repo", repo, "--model", f"scripted:{script}"]
    code, out, err = run_relay(args)
    assert code == 0, err
    for mode in ("relay", "session"):
        assert f"[{mode}] round 1 ended: complete" in err
    assert "write_file" not in err
    assert "round 1 ended" not in out and "│ status" in out
