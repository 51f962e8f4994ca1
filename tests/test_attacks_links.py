"""Attack: hard links and symlinks that make relay's own writes land somewhere else (SPEC §14).

* ``ln .git/config x`` then ``edit_file x``: the file tools refuse ``.git/`` paths, but a hard
  link has no ``.git`` in its name. Writes replace the file (a new inode), so the link is cut.
* the model replaces the protected ``relay.yaml`` by a symlink to a file outside: relay's
  restore must not write through the symlink, and must not commit the symlink.
"""

from __future__ import annotations

import pytest
from conftest import call, complete, git, respond
from sandbox_support import require_bwrap


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_hard_link_to_git_config_cannot_change_it(make_repo, write_script, relay_run, mode):
    if mode == "auto":
        require_bwrap()
    repo = make_repo()
    before = (repo / ".git" / "config").read_text()
    script = write_script(
        [
            respond(call("shell", command="ln .git/config cfg.txt; ls -l cfg.txt")),
            respond(
                call(
                    "write_file",
                    path="cfg.txt",
                    content="[core]\n\tfsmonitor = touch pwned\n",
                )
            ),
            respond(call("shell", command="git status --short")),
            complete(),
        ]
    )
    relay_run(repo, script, "Do it.", "--sandbox", mode)
    assert (repo / ".git" / "config").read_text() == before
    assert not (repo / "pwned").exists()


def test_protected_file_replaced_by_a_symlink_is_restored_not_written_through(
    make_repo, write_script, relay_run, tmp_path
):
    outside = tmp_path / "outside.yaml"
    outside.write_text("outside: untouched\n")
    repo = make_repo(config={"mode": "relay"})
    script = write_script(
        [
            respond(call("shell", command=f"rm relay.yaml && ln -s {outside} relay.yaml")),
            respond(call("write_file", path="a.txt", content="a")),
            complete(),
        ]
    )
    _code, data, _ = relay_run(repo, script, "Write a.txt.", "--sandbox", "off")
    assert outside.read_text() == "outside: untouched\n"
    assert not (repo / "relay.yaml").is_symlink()
    assert "mode: relay" in (repo / "relay.yaml").read_text()
    tracked = git(repo, "ls-files", "-s", "relay.yaml")
    assert tracked.startswith("100644")  # a regular file was committed, not a symlink (120000)
    assert any(e["kind"] == "tamper" and "relay.yaml" in e["detail"] for e in data["events"])


def test_relay_never_writes_outside_through_a_symlinked_state_folder(
    make_repo, write_script, relay_run, tmp_path
):
    """Without the sandbox: the model replaces ``.relay/`` by a symlink to a folder outside the
    repository; relay's progress file and goal state must not be written there."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    repo = make_repo()
    script = write_script(
        [
            respond(call("shell", command=f"mv .relay .relay-old; ln -s {outside} .relay")),
            respond(call("write_file", path="a.txt", content="a")),
            complete(),
        ]
    )
    relay_run(repo, script, "Write a.txt.", "--sandbox", "off")
    assert list(outside.iterdir()) == []
    assert (repo / ".relay").is_dir() and not (repo / ".relay").is_symlink()
    assert (repo / ".relay" / "progress.md").is_file()


def test_a_protected_files_folder_replaced_by_a_symlink_is_not_written_through(
    make_repo, write_script, relay_run, tmp_path
):
    """Without the sandbox: ``conf/`` holds a protected file; the model moves ``conf`` away
    and puts a symlink to a folder outside in its place. relay's restore must not write (or
    delete) anything out there."""
    outside = tmp_path / "outside-conf"
    outside.mkdir()
    (outside / "app.yaml").write_text("theirs\n")
    repo = make_repo(
        {"conf/app.yaml": "ours\n"}, config={"tools": {"protected_paths": ["conf/app.yaml"]}}
    )
    script = write_script(
        [
            respond(call("shell", command=f"mv conf conf-old && ln -s {outside} conf")),
            respond(call("write_file", path="a.txt", content="a")),
            complete(),
        ]
    )
    relay_run(repo, script, "Write a.txt.", "--sandbox", "off")
    assert (outside / "app.yaml").read_text() == "theirs\n"
    assert not (repo / "conf").is_symlink()
    assert (repo / "conf" / "app.yaml").read_text() == "ours\n"
