"""Recovery after a stopped run (relay/recovery.py) where the kill-point test does not reach:
a git process that keeps the index locked."""

from __future__ import annotations

import pytest
from conftest import git, respond, state_dir
from test_user_controls import NOTES, WRITE_NOTES, handoff

from relay import recovery
from relay.config import load_config
from relay.errors import RepoStateError
from relay.gitrepo import GitRepo
from relay.store import Store


def test_a_lock_git_left_on_the_index_is_an_error_naming_it(make_repo, write_script, relay_run):
    repo = make_repo(config=NOTES)
    relay_run(repo, write_script([respond(WRITE_NOTES, handoff("notes"))]))
    store = Store(state_dir(repo) / "relay.db")
    goal = store.latest_goal()
    assert goal is not None
    lock = repo / ".git" / "index.lock"
    lock.write_text("")
    head = git(repo, "rev-parse", "HEAD")
    with pytest.raises(RepoStateError, match=r"index\.lock"):
        recovery.recover(GitRepo(repo), store, goal, load_config(repo, None, {}, {}), wait_s=0.2)
    assert git(repo, "rev-parse", "HEAD") == head
