"""Credentials in git's configuration stay out of the model's reach (SPEC §14).

The sandbox shows ``.git`` read-only so that git commands that read work; its configuration
then showed the model every credential in it. A CI checkout puts the job's push token there
(GitHub's ``actions/checkout``: ``http.https://github.com/.extraheader``; GitLab runners:
the remote's URL), as ``relay init --ci`` workflows do. Inside the sandbox git's configuration
files are now copies without credentials (:mod:`relay.sandbox.gitconfig`).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from conftest import call, git, read_transcript, respond
from sandbox_support import require_bwrap

from relay.config import Config, SandboxConfig
from relay.gitrepo import GitRepo
from relay.models.base import ToolCall
from relay.run_sandbox import sandbox_for
from relay.tools import ToolContext, execute

HEADER = "AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Z2hzX2hlYWRlcg=="
URL_TOKEN = "ghs_urltoken1234"
INCLUDED_TOKEN = "ghs_includedtoken"
GLOBAL_TOKEN = "ghp_globaltoken99"


@pytest.fixture()
def outside(request: pytest.FixtureRequest) -> Path:
    """A folder outside /tmp (the sandbox's /tmp is private: files there are out of sight
    anyway), removed after the test."""
    folder = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="relay-gitcred-"))
    request.addfinalizer(lambda: shutil.rmtree(folder, ignore_errors=True))
    return folder


def _with_credentials(repo: Path, outside: Path) -> None:
    """The repository's configuration as CI checkouts and people leave it."""
    git(repo, "config", "http.https://github.com/.extraheader", HEADER)
    git(repo, "remote", "add", "origin", f"https://x-access-token:{URL_TOKEN}@github.com/o/r.git")
    git(repo, "config", "credential.helper", "store --file /var/tmp/creds")
    included = outside / "checkout-credentials.config"
    included.write_text(f'[http "https://github.com/"]\n\textraheader = basic {INCLUDED_TOKEN}\n')
    git(repo, "config", f"includeIf.gitdir:{repo}/.git.path", str(included))


READ_ALL = (
    "cat .git/config; git remote -v; git config --list --show-origin; "
    "cat /var/tmp/relay-gitcred-*/* ~/.gitconfig; git log --oneline -1; echo STATUS; "
    "git status --short"
)


def test_the_models_shell_sees_no_credential_of_gits_configuration(
    make_repo, tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_bwrap()
    home = outside / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(
        f'[url "https://bot:{GLOBAL_TOKEN}@github.com/"]\n\tinsteadOf = https://github.com/\n'
    )
    monkeypatch.setenv("HOME", str(home))
    repo = make_repo()
    _with_credentials(repo, outside)
    state = repo / ".git" / "relay"
    state.mkdir()
    sandbox = sandbox_for(GitRepo(repo), Config(sandbox=SandboxConfig(mode="required")), state)
    ctx = ToolContext(
        repo_root=repo,
        state_dir=state,
        run_dir=tmp_path / f"run-{tmp_path.name}",
        protected_paths=(),
        shell_timeout_s=30.0,
        sandbox=sandbox,
    )
    seen = execute(ToolCall(id="s", name="shell", arguments={"command": READ_ALL}), ctx).content
    for secret in ("eC1hY2Nlc3Mt", URL_TOKEN, INCLUDED_TOKEN, GLOBAL_TOKEN, "/var/tmp/creds"):
        assert secret not in seen, seen
    assert "origin\thttps://github.com/o/r.git (fetch)" in seen  # git still reads its config
    assert "initial" in seen and "fatal" not in seen
    # relay's own git (outside the sandbox) reads the real files, unchanged
    assert URL_TOKEN in git(repo, "config", "remote.origin.url")


def test_a_run_sends_no_credential_of_gits_configuration_to_the_model(
    make_repo, write_script, relay_run, outside: Path
) -> None:
    """The whole path: the model's ``shell`` reads git's configuration; its result goes into
    the transcript and the next request to the provider."""
    require_bwrap()
    repo = make_repo()
    _with_credentials(repo, outside)
    script = write_script(
        [respond(call("shell", command=READ_ALL)), respond(call("handoff", note="looked"))]
    )
    relay_run(repo, script, "Look around.", "--sandbox", "required", "--max-rounds", "1")
    text = json.dumps(read_transcript(repo))
    assert "eC1hY2Nlc3Mt" not in text and URL_TOKEN not in text and INCLUDED_TOKEN not in text
    assert "https://github.com/o/r.git" in text


def test_the_scrubbed_configuration_keeps_everything_else() -> None:
    from relay.sandbox.gitconfig import scrub_entries

    text, includes = scrub_entries(
        [
            ("core.bare", "false"),
            ("core.filemode", None),
            ("remote.origin.url", "https://u:p@example.com/a.git"),
            ("remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"),
            ("url.https://t@h.example/.insteadof", "gh:"),
            ("http.https://github.com/.extraheader", "AUTHORIZATION: x"),
            ("http.sslverify", "true"),
            ("credential.https://h.example.username", "me"),
            ("include.path", "~/extra.inc"),
            ("user.name", 'A "quoted" \\ name\twith tab'),
            ("hub.oauthtoken", "gho_hubtoken"),
            ("gitlab.example.com.token", "glpat-x"),
            ("github.password", "hunter2"),
        ]
    )
    assert includes == ["~/extra.inc"]
    assert text == (
        '[core]\n\tbare = "false"\n\tfilemode\n'
        '[remote "origin"]\n\turl = "https://example.com/a.git"\n'
        '\tfetch = "+refs/heads/*:refs/remotes/origin/*"\n'
        '[url "https://h.example/"]\n\tinsteadof = "gh:"\n'
        '[http]\n\tsslverify = "true"\n'
        '[user]\n\tname = "A \\"quoted\\" \\\\ name\\twith tab"\n'
    )


def test_submodule_configurations_and_cookie_files_are_scrubbed_too(
    make_repo, tmp_path: Path, outside: Path
) -> None:
    """A submodule's git directory (``.git/modules/<name>``, nested ones too) and a linked
    worktree's keep their own configuration, with the same credentials as the main one; a
    cookie file named by ``http.cookieFile`` holds a session's credential."""
    require_bwrap()
    repo = make_repo()
    nested = repo / ".git" / "modules" / "lib" / "modules" / "deep"
    nested.mkdir(parents=True)
    for folder, token in ((nested.parent.parent, "ghs_submodule1"), (nested, "ghs_nested22")):
        (folder / "config").write_text(
            f'[remote "origin"]\n\turl = https://x:{token}@github.com/o/lib.git\n'
        )
    cookies = outside / "cookies.txt"
    cookies.write_text("github.com\tFALSE\t/\tTRUE\t0\tsession\tghs_cookie333\n")
    git(repo, "config", "http.cookieFile", str(cookies))
    state = repo / ".git" / "relay"
    state.mkdir()
    sandbox = sandbox_for(GitRepo(repo), Config(sandbox=SandboxConfig(mode="required")), state)
    ctx = ToolContext(
        repo_root=repo, state_dir=state, run_dir=tmp_path / f"run-{tmp_path.name}", sandbox=sandbox
    )
    command = f"cat .git/modules/lib/config .git/modules/lib/modules/deep/config {cookies}"
    seen = execute(ToolCall(id="s", name="shell", arguments={"command": command}), ctx).content
    for secret in ("ghs_submodule1", "ghs_nested22", "ghs_cookie333"):
        assert secret not in seen, seen
    assert "https://github.com/o/lib.git" in seen  # the rest of the file is there


def test_passwords_and_key_files_in_other_sections_are_scrubbed_too() -> None:
    """git keeps more credentials than the remote's: ``git send-email``'s SMTP password and
    ``git imap-send``'s password in clear text, client certificates and their private keys
    (``http.sslKey``, ``http.<url>.sslCert``, the proxy's); and a password may hold a raw
    ``@`` (curl takes the user information up to the last one)."""
    from relay.sandbox.gitconfig import scrub_entries

    text, hidden = scrub_entries(
        [
            ("sendemail.smtppass", "smtp-secret-1"),
            ("sendemail.work.smtppass", "smtp-secret-2"),
            ("imap.pass", "imap-secret-3"),
            ("imap.user", "me"),
            ("http.sslkey", "/home/me/.certs/client.key"),
            ("http.https://corp.example/.sslcert", "/home/me/.certs/client.pem"),
            ("http.proxysslkey", "/home/me/.certs/proxy.key"),
            ("remote.origin.url", "https://bot:pa@ss-secret-4@example.com/a.git"),
        ]
    )
    for secret in ("smtp-secret-1", "smtp-secret-2", "imap-secret-3", "ss-secret-4", ".certs"):
        assert secret not in text, text
    assert hidden == [
        "/home/me/.certs/client.key",
        "/home/me/.certs/client.pem",
        "/home/me/.certs/proxy.key",
    ]
    assert '[imap]\n\tuser = "me"' in text
    assert 'url = "https://example.com/a.git"' in text


def test_a_changed_or_removed_copy_is_written_again_before_it_is_shown(make_repo) -> None:
    """The copies lie in a folder of relay's (out of the sandbox's sight unless a writable
    path shows it; a cleaner of /tmp may remove it): each time a command's mounts are planned
    the copy holds what relay wrote, or is written again."""
    from relay.sandbox.gitconfig import git_config_views

    repo = make_repo()
    git(repo, "config", "remote.origin.url", "https://x:tok@github.com/o/r.git")
    config = (repo / ".git" / "config").resolve()

    def shown() -> Path:
        return dict(git_config_views([repo / ".git"]).replaced)[config]

    first = shown()
    expected = first.read_bytes()
    first.chmod(0o644)
    first.write_text("[core]\n\tfsmonitor = /tmp/evil\n")
    assert shown().read_bytes() == expected
    shutil.rmtree(first.parent)
    again = shown()
    assert again.read_bytes() == expected and b"tok" not in expected
