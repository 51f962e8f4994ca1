"""Fuzzing of the command line (issue 28): random argument lists made of relay's real
commands and options (read from the typer app, so that a new option is fuzzed too) with
values of every kind (empty, odd unicode, huge and negative numbers, paths that do not exist,
URLs without a scheme, junk words) end with an exit code of the README's table and a message,
never a traceback.

Nothing reaches the network: the models are the scripted one or a provider without a key,
URLs point at a closed loopback port, and every proxy variable does too. 60 examples by
default; ``CLI_FUZZ_EXAMPLES=400`` for a longer hunt. Each example runs
``relay.cli.main`` in-process (fast) in a fresh folder with an empty stdin, under an alarm
that turns a hang into a failure. Left out: ``demo`` (a whole demo run, test_demo.py),
``--install-completion`` (writes into HOME, test_cli_completion.py), ``log --follow`` (waits
for a run) and ``--push``/``--remote`` (a git remote)."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import click
import pytest
import typer
import yaml
from conftest import GIT_EMAIL, GIT_NAME
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from relay import cli

EXIT_CODES = {0, 1, 2, 3, 4, 5, 6, 7, 130, 143}
"""The README's table "Exit codes and outputs"."""

SKIPPED_COMMANDS = {("demo",)}
SKIPPED_OPTIONS = {"--install-completion", "--follow", "-f", "--push", "--remote"}
HANG_AFTER_S = 40
CLOSED = "127.0.0.1:9"
"""A loopback port nothing listens on (discard)."""

WRITE = {"name": "write_file", "arguments": {"path": "made.txt", "content": "x\n"}}
COMPLETE = {"name": "update_goal", "arguments": {"status": "complete", "summary": "done"}}
SCRIPT = {"responses": [{"tool_calls": [WRITE]}, {"tool_calls": [COMPLETE]}]}


def _commands() -> dict[tuple[str, ...], click.Command]:
    """Every command of relay that runs something, by its words after ``relay``."""
    found: dict[tuple[str, ...], click.Command] = {}

    def walk(command: click.Command, words: tuple[str, ...]) -> None:
        subcommands = getattr(command, "commands", None)
        if subcommands:
            for name, sub in subcommands.items():
                walk(sub, (*words, name))
        elif words not in SKIPPED_COMMANDS:
            found[words] = command

    walk(typer.main.get_command(cli.app), ())
    return found


COMMANDS = _commands()

# --------------------------------------------------------------------------- strategies

junk = st.text(
    alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)),
    max_size=24,
)
numbers = st.one_of(
    st.integers(-3, 12).map(str),
    st.sampled_from(["0", "-1", str(2**63), str(-(2**63)), "9" * 400, "1e999", "nan", "-inf"]),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
)
LONG_NAME = "n" * 300
"""Longer than a file name may be (ENAMETOOLONG from the first stat)."""
PLACES = ["", ".", "repo", "repo/README.md", "no/such/file", "ü/ä b", "script.yaml", "repo/.git"]
PLACES += [LONG_NAME, f"repo/{LONG_NAME}", "repo/README.md/x"]
paths = st.one_of(st.sampled_from(PLACES), junk.map(lambda t: t.replace("/", "_") or "x"))
WORDS: dict[str, list[str]] = {
    "--model": [
        "scripted:script.yaml",
        "scripted:no-such.yaml",
        "openai:gpt-4o",
        "anthropic:claude-sonnet-4-6",
        "nope",
        ":",
        "",
    ],
    "--base-url": [CLOSED, f"http://{CLOSED}/v1", "localhost", f"ftp://{CLOSED}", "http://", ""],
    "--time-budget": ["10m", "1s", "0", "-5m", "1e999h", "soon"],
    "--sandbox": ["off", "auto", "required", "bwrap", ""],
    "--mode": ["goal", "plain", "both", ""],
    "--worker": ["builtin", "codex", "claude-code", "nope"],
    "--ci": ["github", "gitlab", "jenkins", ""],
    "--base": ["HEAD", "main", "HEAD~5", "no-such-ref", "-x", "a..b"],
    "--branch": ["main", "relay/x", "-x", "a..b", "a b", "@{-1}"],
    "--scheduler": ["local", "nope"],
}
ROOT_OPTIONS = [
    *[[]] * 6,
    ["--no-color"],
    ["--version"],
    ["-h"],
    *[["--show-completion", shell] for shell in ("bash", "zsh", "fish", "pwsh", "tcsh", "")],
]
"""What comes before the command: mostly nothing (most of these end relay at once)."""


def _value(option: click.Parameter) -> st.SearchStrategy[str]:
    """Values for ``option``: its own kind mostly, junk sometimes."""
    kind = getattr(getattr(option, "type_descriptor", None), "annotation", str)
    name = max(option.opts, key=len)
    if name in WORDS:
        own: st.SearchStrategy[str] = st.sampled_from(WORDS[name])
    elif kind in (int, float):
        own = numbers
    elif kind is Path:
        own = paths
    else:
        own = junk
    return st.one_of(own, own, st.one_of(junk, numbers, paths))


@st.composite
def argument_lists(draw: st.DrawFn) -> list[str]:
    """``relay WORDS…``: root options, a command, its options and arguments, some junk."""
    argv: list[str] = list(draw(st.sampled_from(ROOT_OPTIONS)))
    words = draw(st.sampled_from(sorted(COMMANDS)))
    command = COMMANDS[words]
    argv += words
    options = [p for p in command.params if p.opts and p.opts[0].startswith("-")]
    options = [p for p in options if not SKIPPED_OPTIONS & set(p.opts)]
    for option in draw(st.lists(st.sampled_from(options), max_size=6)) if options else []:
        argv.append(draw(st.sampled_from(option.opts)))
        if not getattr(option, "is_flag", False):
            argv.append(draw(_value(option)))
    for _ in [p for p in command.params if not p.opts[0].startswith("-")]:
        if draw(st.booleans()):
            argv.append(draw(st.one_of(junk, paths, st.just("Write made.txt."))))
    if draw(st.integers(0, 4)) == 0:
        junk_word = st.one_of(
            junk, st.sampled_from(["--nope", "-x", "--", "-", "--json=1", "--help"])
        )
        argv.insert(draw(st.integers(0, len(argv))), draw(junk_word))
    return argv


# --------------------------------------------------------------------------- running


class Hang(BaseException):
    """The command ran longer than HANG_AFTER_S (not an Exception: relay must not catch it)."""


@contextlib.contextmanager
def _alarm(seconds: int) -> Iterator[None]:
    def ring(signum: int, frame: FrameType | None) -> None:
        raise Hang(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _folder_with_repo() -> contextlib.AbstractContextManager[str]:
    return tempfile.TemporaryDirectory(prefix="relay-cli-fuzz-")


def _make_repo(root: Path) -> None:
    """``root/repo``: a git repository with one commit; ``root/script.yaml``: a script."""
    (root / "script.yaml").write_text(yaml.safe_dump(SCRIPT))
    repo = root / "repo"
    repo.mkdir()
    (repo / "README.md").write_text("test repository\n")
    for args in (
        ["init", "-q", "-b", "main"],
        ["config", "user.name", GIT_NAME],
        ["config", "user.email", GIT_EMAIL],
        ["config", "commit.gpgsign", "false"],
        ["add", "-A"],
        ["commit", "-q", "-m", "initial"],
    ):
        subprocess.run(["git", *args], cwd=repo, check=True)


def run_cli(argv: list[str], root: Path) -> tuple[int, str, str]:
    """``relay ARGV`` in-process in ``root`` with an empty stdin → (exit code, out, err)."""
    out, err = io.StringIO(), io.StringIO()
    with (
        contextlib.chdir(root),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        _alarm(HANG_AFTER_S),
    ):
        saved_stdin, sys.stdin = sys.stdin, io.StringIO("")
        try:
            code = cli.main(argv)
        except SystemExit as exc:  # a callback's sys.exit: allowed, when its code is
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            sys.stdin = saved_stdin
    return code, out.getvalue(), err.getvalue()


@pytest.fixture()
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No provider key, every proxy on a closed loopback port."""
    for name in list(os.environ):
        if name.endswith("_API_KEY") or name.endswith("_BASE_URL"):
            monkeypatch.delenv(name)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, f"http://{CLOSED}")
    monkeypatch.setenv("NO_PROXY", "")


def check(argv: list[str]) -> int:
    """``relay ARGV`` in a fresh folder ends with a documented exit code, no traceback."""
    with _folder_with_repo() as name:
        root = Path(name)
        _make_repo(root)
        try:
            code, out, err = run_cli(argv, root)
        except Exception as exc:  # the failure this test exists to find
            raise AssertionError(f"relay {argv!r} raised {exc!r}") from exc
    shown = f"relay {argv!r}: exit {code}\n{err[-3000:]}"
    assert code in EXIT_CODES, shown
    assert "Traceback" not in out + err, shown
    if code == 1 and "--help" not in argv and "-h" not in argv:
        assert err.strip(), shown  # an error says something
    return code


@settings(
    max_examples=int(os.environ.get("CLI_FUZZ_EXAMPLES", "60")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(argv=argument_lists())
def test_any_command_line_ends_with_a_documented_code_and_no_traceback(
    argv: list[str], offline: None
) -> None:
    code = check(argv)
    command = next((w for w in argv if w in {words[0] for words in COMMANDS}), "-")
    event(f"{command}: exit {code}")  # pytest --hypothesis-show-statistics


@pytest.mark.parametrize(
    "argv",
    [
        # found by the fuzz: a file name too long for the file system was a traceback
        ["status", "--repo", LONG_NAME],
        ["init", "--repo", LONG_NAME],
        ["audit", "--repo", LONG_NAME],
        ["run", "Write made.txt.", "--repo", LONG_NAME, "--model", "scripted:script.yaml"],
        ["batch", LONG_NAME],
        ["report", "--repo", "repo", "--compare", LONG_NAME],
        [
            "compare",
            "Write made.txt.",
            "--repo",
            "repo",
            "--model",
            "scripted:script.yaml",
            "--max-rounds",
            "1",
            "--out",
            LONG_NAME,
        ],
    ],
    ids=lambda argv: " ".join(w for w in argv if w != LONG_NAME)[:40],
)
def test_a_file_name_too_long_is_an_error_message(argv: list[str], offline: None) -> None:
    assert check(argv) == 1
