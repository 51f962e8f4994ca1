"""Shell completion (issue 28, item 11): ``--show-completion SHELL`` prints that shell's
script and ``--install-completion SHELL`` installs it, whatever shell runs relay; without a
shell name, the shell is detected from the parent processes."""

from __future__ import annotations

from pathlib import Path

import pytest

MARKS = {
    "bash": "complete -o default -F _relay_completion relay",
    "zsh": "#compdef relay",
    "fish": "complete --command relay",
    "powershell": "Register-ArgumentCompleter -Native -CommandName relay",
    "pwsh": "Register-ArgumentCompleter -Native -CommandName relay",
}


@pytest.mark.parametrize("shell", sorted(MARKS))
def test_show_completion_prints_the_named_shells_script(shell: str, run_relay) -> None:
    # run from bash (the parent's shell is what detection would find): the name given wins
    code, out, err = run_relay(["--show-completion", shell], subprocess=True)
    assert code == 0, err
    assert MARKS[shell] in out, out
    assert "_RELAY_COMPLETE" in out
    others = {mark for name, mark in MARKS.items() if mark != MARKS[shell]}
    assert not any(mark in out for mark in others), out
    assert "Traceback" not in err


def test_show_completion_of_an_unknown_shell_is_a_usage_error(run_relay) -> None:
    code, out, err = run_relay(["--show-completion", "tcsh"], subprocess=True)
    assert code == 1 and out == ""
    assert "tcsh" in err and "zsh" in err and "Traceback" not in err


INSTALLED = {
    "bash": (".bash_completions/relay.sh", ".bashrc"),
    "zsh": (".zfunc/_relay", ".zshrc"),
    "fish": (".config/fish/completions/relay.fish", None),
}


@pytest.mark.parametrize("shell", sorted(INSTALLED))
def test_install_completion_installs_the_named_shells_script(
    shell: str, tmp_path: Path, run_relay
) -> None:
    home = tmp_path / "comp-home"
    home.mkdir()
    code, out, err = run_relay(
        ["--install-completion", shell], subprocess=True, env={"HOME": str(home)}
    )
    assert code == 0, err
    script, rc_file = INSTALLED[shell]
    assert MARKS[shell] in (home / script).read_text()
    written = {str(p.relative_to(home)) for p in home.rglob("*") if p.is_file()}
    assert written == {script} | ({rc_file} if rc_file else set())
    assert shell in out + err and "Traceback" not in err


def test_install_completion_for_powershell_without_powershell(tmp_path: Path, run_relay) -> None:
    home = tmp_path / "comp-home"
    home.mkdir()
    empty = tmp_path / "bin"
    empty.mkdir()
    code, _, err = run_relay(
        ["--install-completion", "pwsh"],
        subprocess=True,
        env={"HOME": str(home), "PATH": str(empty)},
    )
    assert code == 1 and "pwsh" in err and "Traceback" not in err
    assert list(home.iterdir()) == []


@pytest.mark.parametrize(
    ("shell", "env"),
    [
        ("zsh", {"_TYPER_COMPLETE_ARGS": "relay con"}),
        ("fish", {"_TYPER_COMPLETE_ARGS": "relay con", "_TYPER_COMPLETE_FISH_ACTION": "get-args"}),
    ],
)
def test_the_scripts_completion_requests_are_answered(
    shell: str, env: dict[str, str], run_relay
) -> None:
    code, out, err = run_relay(
        [], subprocess=True, env={"_RELAY_COMPLETE": f"complete_{shell}", **env}
    )
    assert code == 0, err
    assert "config" in out and "Traceback" not in err


@pytest.mark.parametrize(
    ("detected", "code", "mark"),
    [("fish", 0, MARKS["fish"]), ("zsh", 0, MARKS["zsh"]), (None, 1, "could not detect")],
)
def test_without_a_shell_name_the_shell_is_detected(
    detected: str | None, code: int, mark: str, monkeypatch, run_relay
) -> None:
    monkeypatch.setattr("relay.cli.completion._detected_shell", lambda: detected)
    for args in (["--show-completion"], ["--show-completion", "--no-color"]):
        got, out, err = run_relay(args)
        assert got == code and mark in out + err and "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--show-completion", "zsh"], ["--show-completion=zsh"]),
        (["--show-completion"], ["--show-completion=auto"]),
        (["--show-completion", "--no-color"], ["--show-completion=auto", "--no-color"]),
        (["--install-completion=fish"], ["--install-completion=fish"]),
        # a command's own words are not the root's options
        (["run", "--show-completion", "zsh"], ["run", "--show-completion", "zsh"]),
        (["--no-color", "status"], ["--no-color", "status"]),
    ],
)
def test_the_optional_shell_value(args: list[str], expected: list[str]) -> None:
    from relay.cli.completion import with_shell_values

    assert with_shell_values(args) == expected
