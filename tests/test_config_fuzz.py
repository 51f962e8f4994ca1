"""Fuzzing of the configuration (issue 13 item 17; SPEC §12): whatever ``relay.yaml``, the
goal file's front matter or the flags hold, reading them gives a configuration or a
``RelayError`` (a clear message, exit 1), never another exception; and ``relay run`` with such
a file ends with an exit code of the README's table and no traceback.

The generated input mixes the real keys of every section (so that it reaches the values'
checks) with unknown keys, values of every YAML type (huge numbers, NaN, odd unicode, long
text, paths of every shape), nesting hundreds of levels deep, byte order marks and bytes that
are not UTF-8."""

from __future__ import annotations

import contextlib
import io
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from conftest import GIT_EMAIL, GIT_NAME
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from relay import cli
from relay.config import Config, load_config
from relay.errors import RelayError
from relay.goal_file import parse_goal_file

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
EXIT_CODES = {0, 1, 2, 3, 4, 5, 6, 7, 130, 143}
"""The README's table "Exit codes and outputs"."""

# --------------------------------------------------------------------------- strategies

_PATH_PARTS = [
    *["", ".", "..", "/", "~", "~no-such-user", ".git", ".relay", "progress.md", "goal.json"],
    *["a b", "ü", "relay.yaml", "inbox"],
]
paths = st.one_of(
    st.lists(st.sampled_from(_PATH_PARTS), min_size=1, max_size=5).map("/".join),
    st.text(min_size=250, max_size=320).map(lambda t: t.replace("/", "x")),
    st.sampled_from(
        ["/proc/self/environ", "/", "..", "x/../../y", ".relay/progress.md", "\x00", "\ud800"]
    ),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([0, -1, 1, 2**63, -(2**63), 10**40]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=200, max_size=400),
    st.sampled_from(["2", "1.5", "yes", "90m", "8h", "auto", "relay", "session", "loop"]),
    paths,
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)


def _section(model: type[BaseModel]) -> st.SearchStrategy[dict[str, Any]]:
    """Mappings of ``model``'s own keys (and now and then an unknown one) to any values."""
    keys = list(model.model_fields)
    return st.dictionaries(st.sampled_from(keys) | st.text(max_size=6), values, max_size=4)


_SECTIONS: dict[str, st.SearchStrategy[Any]] = {}
for _name, _field in Config.model_fields.items():
    _annotation = _field.annotation
    if isinstance(_annotation, type) and issubclass(_annotation, BaseModel):
        _SECTIONS[_name] = _section(_annotation) | values
    else:
        _SECTIONS[_name] = values
_SECTIONS["limits"] = _SECTIONS["limits"] | st.just({"max_rounds_without_progress": -1})
_SECTIONS["deliverables"] = (
    st.lists(
        st.dictionaries(st.sampled_from(["file", "command", "changed", "contains"]), paths),
        max_size=2,
    )
    | values
)

configs = st.fixed_dictionaries({}, optional=_SECTIONS) | st.dictionaries(
    st.text(max_size=5), values, max_size=3
)


def _deep(depth: int) -> str:
    return "limits: " + "[" * depth + "]" * depth + "\n"


yaml_texts = st.one_of(
    configs.map(lambda c: yaml.safe_dump(c, allow_unicode=True)),
    st.text(alphabet="{}[]:-,&*!|>'\"#%@` \n\tab1.", max_size=80),
    st.integers(1, 3000).map(_deep),
    st.integers(1, 2000).map(lambda n: "guard: " + "{a: " * n + "1" + "}" * n + "\n"),
)
boms = st.sampled_from([b"", b"\xef\xbb\xbf"])
raw_bytes = st.binary(max_size=60)


def _as_bytes(bom: bytes, text: str) -> bytes:
    return bom + text.encode("utf-8", "surrogatepass")


# --------------------------------------------------------------------------- the parsers


@contextlib.contextmanager
def _folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as name:
        yield Path(name).resolve()


def _config_or_relay_error(**kwargs: Any) -> Config | RelayError:
    with contextlib.redirect_stderr(io.StringIO()):  # deprecation warnings
        try:
            return load_config(**kwargs)
        except RelayError as exc:
            assert str(exc).strip()
            return exc


@SETTINGS
@given(bom=boms, text=yaml_texts, junk=st.none() | raw_bytes)
def test_any_relay_yaml_gives_a_configuration_or_a_relay_error(
    bom: bytes, text: str, junk: bytes | None
) -> None:
    with _folder() as repo:
        (repo / "relay.yaml").write_bytes(junk if junk is not None else _as_bytes(bom, text))
        _config_or_relay_error(repo=repo)


@SETTINGS
@given(front=configs, overrides=configs)
def test_any_front_matter_and_flags_mapping_gives_a_configuration_or_a_relay_error(
    front: dict[str, Any], overrides: dict[str, Any]
) -> None:
    with _folder() as repo:
        _config_or_relay_error(repo=repo, front_matter=front, overrides=overrides)


@SETTINGS
@given(bom=boms, front=yaml_texts, goal=st.text(max_size=40), junk=st.none() | raw_bytes)
def test_any_goal_file_gives_its_parts_or_a_relay_error(
    bom: bytes, front: str, goal: str, junk: bytes | None
) -> None:
    with _folder() as folder:
        path = folder / "goal.md"
        text = f"---\n{front}\n---\n{goal}"
        path.write_bytes(junk if junk is not None else _as_bytes(bom, text))
        try:
            goal_text, front_matter = parse_goal_file(path)
        except RelayError:
            return
        assert goal_text.strip()
        if junk is None and not front.strip().startswith(("---", "...")):
            assert not goal_text.startswith(("\ufeff", "---")), "the front matter became goal text"
        _config_or_relay_error(repo=folder, front_matter=front_matter)


# --------------------------------------------------------------------------- relay run

_SAFE_DELIVERABLES = st.lists(
    st.one_of(
        st.fixed_dictionaries({"file": paths}),
        st.fixed_dictionaries({"changed": paths}),
        st.just({"command": "true"}),
    ),
    max_size=2,
)
_RELATIVE = paths.filter(lambda p: not p.startswith(("/", "~")))
"""Paths that cannot name a place outside the test's folder (relay may create them)."""
_small = st.integers(1, 3)
_limits = st.fixed_dictionaries(
    {},
    optional={
        "max_rounds_total": _small | values,
        "max_no_progress": _small,
        "max_steps_per_round": st.integers(1, 5),
        "token_budget": st.integers(1, 10**6) | st.none(),
        "time_budget": st.sampled_from(["90m", 30, "1h30m", None]) | values,
        "max_rounds_without_progress": _small | values,
    },
)
run_configs = st.fixed_dictionaries(
    {},
    optional={
        "limits": _limits | values,
        "guard": st.fixed_dictionaries({}, optional={"enabled": st.booleans() | values}),
        "progress": st.fixed_dictionaries(
            {},
            optional={
                "path": st.sampled_from(["notes/p.md", ".relay/p.md", "P ü.md"]) | paths,
                "keep_rounds": _small | values,
            },
        ),
        "state_dir": st.sampled_from(["var/state", ".relay/state", ".git/relay"]) | _RELATIVE,
        "prompts_dir": _RELATIVE,
        "deliverables": _SAFE_DELIVERABLES,
        "mode": st.sampled_from(["relay", "session"]) | values,
        "git": st.fixed_dictionaries({}, optional={"branch_prefix": st.just("r/") | values}),
    },
)
"""Configurations for a real run: mostly good values (so that runs start), some bad ones."""


def _repo(root: Path, relay_yaml: bytes) -> Path:
    """A git repository in ``root`` with README.md and ``relay_yaml`` committed."""
    repo = root / "repo"
    repo.mkdir()
    (repo / "README.md").write_text("test repository\n")
    (repo / "relay.yaml").write_bytes(relay_yaml)
    for args in (
        ["init", "-q", "-b", "main"],
        ["config", "user.name", GIT_NAME],
        ["config", "user.email", GIT_EMAIL],
        ["config", "commit.gpgsign", "false"],
        ["add", "-A"],
        ["commit", "-q", "-m", "initial"],
    ):
        subprocess.run(["git", *args], cwd=repo, check=True)
    return repo


WRITE = {"name": "write_file", "arguments": {"path": "made.txt", "content": "x\n"}}
COMPLETE = {"name": "update_goal", "arguments": {"status": "complete", "summary": "done"}}
SCRIPT = {"responses": [{"tool_calls": [WRITE]}, {"tool_calls": [COMPLETE]}]}
"""Writes a file (the default audit wants a change), then claims complete; then exhausted."""


@settings(SETTINGS, max_examples=8)
@given(config=run_configs, bom=boms)
def test_relay_run_with_any_relay_yaml_exits_with_a_documented_code(
    tmp_path: Path, config: dict[str, Any], bom: bytes
) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(SCRIPT))
    with _folder() as root:
        repo = _repo(root, _as_bytes(bom, yaml.safe_dump(config, allow_unicode=True)))
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(
                ["run", "Do it.", "--repo", str(repo), "--model", f"scripted:{script}", "--json"]
            )
        assert code in EXIT_CODES, (code, err.getvalue()[-2000:])
        assert "Traceback" not in err.getvalue() + out.getvalue(), err.getvalue()[-4000:]
        if code == 1:
            assert "error:" in err.getvalue()
