"""Sync over real git: a bare remote and three data directories ("machines")."""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from mented.memory import Memory, origin_of
from mented.store import Store
from mented.sync import GitSync, SyncError

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


class Machine:
    def __init__(self, root: Path, remote: Path) -> None:
        self.store = Store(root / "data", sync=False)
        self.sync = GitSync(root / "data", timeout_s=30)
        self.sync.init(str(remote))

    def everything(self) -> list[Memory]:
        return self.store.list(include_superseded=True)


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    path = tmp_path / "remote.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(path)], check=True)
    return path


@pytest.fixture
def machines(tmp_path: Path, remote: Path) -> Iterator[list[Machine]]:
    made = [Machine(tmp_path / name, remote) for name in ("laptop", "desk", "server")]
    yield made
    for machine in made:
        machine.store.close()


def test_a_rule_added_on_one_machine_reaches_the_others(machines: list[Machine]) -> None:
    laptop, desk, server = machines
    rule = laptop.store.store("single line", tags=["trigger:git-commit"])

    first = laptop.sync.sync(laptop.store)
    assert (first.written, first.pushed) == (1, True)
    desk.sync.sync(desk.store)
    server.sync.sync(server.store)

    for machine in machines:
        assert machine.store.recall_for_action("git-commit") == [rule]
    again = desk.sync.sync(desk.store)
    assert (again.written, again.added, again.pushed) == (0, 0, False)


def origins(machine: Machine) -> dict[str, str]:
    """Each rule's text -> where this machine says it comes from (as `rule list` does)."""
    rules = machine.store.list(include_superseded=True)
    synced = machine.store.synced_among(rules)
    return {rule.content: origin_of(rule, synced) for rule in rules}


def test_a_rule_is_yours_where_it_was_made_and_synced_on_the_others(
    machines: list[Machine],
) -> None:
    laptop, desk, _ = machines
    rule = laptop.store.store("single line", tags=["trigger:git-commit"])
    laptop.sync.sync(laptop.store)
    desk.sync.sync(desk.store)
    assert origins(laptop) == {"single line": "yours"}
    assert origins(desk) == {"single line": "synced"}

    # Superseded on the desk: the new version is the desk's own, and synced on the laptop.
    desk.store.supersede(rule.id, "single line, no emojis")
    desk.sync.sync(desk.store)
    laptop.sync.sync(laptop.store)
    assert origins(desk) == {"single line": "synced", "single line, no emojis": "yours"}
    assert origins(laptop) == {"single line": "yours", "single line, no emojis": "synced"}
    # The index is this machine's own: no record file carries it.
    files = b"".join(path.read_bytes() for path in desk.sync.repo.rglob("*.json"))
    assert b"synced" not in files

    # Forgotten on the laptop, where it came by sync: its note goes with the record.
    laptop.store.forget(laptop.store.recall_for_action("git-commit")[0].id)
    assert origins(laptop) == {"single line": "yours"}
    assert laptop.store._read(lambda txn: txn.stat(laptop.store._synced)["entries"]) == 0
    laptop.sync.sync(laptop.store)
    desk.sync.sync(desk.store)
    assert origins(desk) == {"single line": "synced"}


def test_a_forget_on_one_machine_wins_over_the_others_copies(machines: list[Machine]) -> None:
    laptop, desk, _ = machines
    rule = laptop.store.store("single line", tags=["trigger:git-commit"])
    laptop.sync.sync(laptop.store)
    desk.sync.sync(desk.store)

    desk.store.forget(rule.id)
    desk.sync.sync(desk.store)
    laptop.sync.sync(laptop.store)
    laptop.sync.sync(laptop.store)

    assert laptop.store.recall_for_action("git-commit") == []
    assert laptop.everything() == desk.everything() == []
    assert not list((laptop.sync.repo / "records").rglob("*.json"))


def test_a_remote_that_is_down_loses_nothing_and_is_reported(
    machines: list[Machine], remote: Path
) -> None:
    laptop, desk, _ = machines
    hidden = remote.with_name("away.git")
    remote.rename(hidden)
    rule = laptop.store.store("single line", tags=["trigger:git-commit"])

    with pytest.raises(SyncError, match="cannot reach the remote"):
        laptop.sync.sync(laptop.store)
    assert "cannot reach the remote" in (laptop.sync.state().last_error or "")
    assert laptop.store.recall_for_action("git-commit") == [rule]

    hidden.rename(remote)
    assert laptop.sync.sync(laptop.store).pushed
    assert laptop.sync.state().last_error is None
    desk.sync.sync(desk.store)
    assert desk.store.recall_for_action("git-commit") == [rule]


def test_init_refuses_another_remote_and_keeps_the_first(
    machines: list[Machine], tmp_path: Path, remote: Path
) -> None:
    laptop = machines[0]
    laptop.sync.init(str(remote))  # the same one again: nothing to do
    with pytest.raises(SyncError, match="already set up with"):
        laptop.sync.init(str(tmp_path / "other.git"))
    assert laptop.sync.remote() == str(remote)


def commit_files(repo: Path, files: dict[str, str], *, push_to: Path | None = None) -> None:
    """Commit `files` in the working repository `repo` (and push them to `push_to`)."""
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "--all"], check=True)
    subprocess.run([*git, "commit", "--quiet", "-m", "files"], check=True)
    if push_to is not None:
        subprocess.run([*git, "push", "--quiet", str(push_to), "HEAD:refs/heads/main"], check=True)


def test_init_refuses_a_remote_holding_other_files_and_leaves_it_untouched(
    tmp_path: Path,
) -> None:
    code = tmp_path / "code.git"
    subprocess.run(["git", "init", "--quiet", "--bare", "-b", "main", str(code)], check=True)
    work = tmp_path / "work"
    subprocess.run(["git", "init", "--quiet", "-b", "main", str(work)], check=True)
    commit_files(work, {"app.py": "print()\n", "README.md": "app\n"}, push_to=code)
    before = subprocess.run(
        ["git", "-C", str(code), "rev-parse", "main"], capture_output=True, text=True, check=True
    ).stdout
    sync = GitSync(tmp_path / "data", timeout_s=30)

    with pytest.raises(SyncError) as refused:
        sync.init(str(code))
    message = str(refused.value)
    assert f"{code} already holds files that are not mented's (app.py)" in message
    assert "make an empty one (`git init --bare PATH`" in message
    assert not sync.configured
    assert not (tmp_path / "data" / "sync.partial").exists()
    after = subprocess.run(
        ["git", "-C", str(code), "rev-parse", "main"], capture_output=True, text=True, check=True
    ).stdout
    assert after == before


def test_init_refuses_a_working_repository_even_an_empty_one(tmp_path: Path) -> None:
    work = tmp_path / "work"
    subprocess.run(["git", "init", "--quiet", str(work)], check=True)
    sync = GitSync(tmp_path / "data", timeout_s=30)
    with pytest.raises(SyncError, match="is a working repository"):
        sync.init(str(work))
    branches = subprocess.run(
        ["git", "-C", str(work), "branch", "--all"], capture_output=True, text=True, check=True
    ).stdout
    assert branches == ""  # no branch pushed into it


def test_init_takes_a_new_hosted_repository_and_marks_it_as_mented(
    tmp_path: Path, remote: Path
) -> None:
    seed = tmp_path / "seed"
    subprocess.run(["git", "init", "--quiet", "-b", "main", str(seed)], check=True)
    files = {"README.md": "my rules\n", "LICENSE": "MIT\n", ".gitignore": "*.tmp\n"}
    commit_files(seed, files, push_to=remote)
    laptop = Machine(tmp_path / "laptop", remote)
    laptop.store.store("single line", tags=["trigger:git-commit"])
    laptop.sync.sync(laptop.store)
    laptop.store.close()

    listed = subprocess.run(
        ["git", "-C", str(remote), "ls-tree", "--name-only", "main"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert sorted(listed) == [".gitignore", "LICENSE", "README.md", "mented-sync.json", "records"]
    shown = subprocess.run(
        ["git", "-C", str(remote), "show", "main:mented-sync.json"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert shown == '{"mented":"rules","format":1}\n'
    log = subprocess.run(
        ["git", "-C", str(remote), "log", "--format=%s", "main"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert f"mented: 1 record from {socket.gethostname()}" in log.splitlines()

    # A repository mented filled is taken, whatever else its owner added to it since.
    commit_files(seed, {"notes/why.md": "...\n"})
    identity = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
    identity |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    git = ["git", "-C", str(seed)]
    env = {**os.environ, "GIT_MERGE_AUTOEDIT": "no", **identity}
    subprocess.run(
        [*git, "pull", "--quiet", "--no-rebase", str(remote), "main"], check=True, env=env
    )
    subprocess.run([*git, "push", "--quiet", str(remote), "HEAD:refs/heads/main"], check=True)
    desk = Machine(tmp_path / "desk", remote)
    desk.sync.sync(desk.store)
    assert [rule.content for rule in desk.store.recall_for_action("git-commit")] == ["single line"]
    desk.store.close()


def test_a_remote_marked_by_a_newer_format_is_refused(tmp_path: Path, remote: Path) -> None:
    seed = tmp_path / "seed"
    subprocess.run(["git", "init", "--quiet", "-b", "main", str(seed)], check=True)
    commit_files(seed, {"mented-sync.json": '{"mented":"rules","format":9}\n'}, push_to=remote)
    with pytest.raises(SyncError, match="written in format 9 by a newer mented"):
        GitSync(tmp_path / "data", timeout_s=30).init(str(remote))


def test_three_machines_that_add_supersede_and_forget_concurrently_converge(
    machines: list[Machine],
) -> None:
    rng = random.Random(15)
    acknowledged: set[str] = set()  # every id any machine stored
    made_on: dict[str, Machine] = {}  # ... and which
    forgotten: set[str] = set()
    for step in range(40):
        machine = rng.choice(machines)
        live = machine.store.list(rules_only=True)
        choice = rng.random()
        if not live or choice < 0.45:
            memory = machine.store.store(f"rule {step}", tags=["trigger:git-commit"])
            acknowledged.add(memory.id)
            made_on[memory.id] = machine
        elif choice < 0.85:
            new, _ = machine.store.supersede(rng.choice(live).id, f"rule {step}")
            acknowledged.add(new.id)
            made_on[new.id] = machine
        else:
            forgotten.add(machine.store.forget(rng.choice(live).id).id)
        if rng.random() < 0.3:
            syncing = rng.choice(machines)
            syncing.sync.sync(syncing.store)
    for _ in range(2):  # twice around: everyone has pushed, then everyone has pulled
        for machine in rng.sample(machines, len(machines)):
            machine.sync.sync(machine.store)

    reference = machines[0]
    expected = reference.everything()
    assert {m.id for m in expected} == acknowledged - forgotten  # nothing acknowledged lost
    for machine in machines[1:]:
        assert machine.everything() == expected
        assert machine.store.forks() == reference.store.forks()
        for memory in expected:
            assert machine.store.history(memory.id) == reference.store.history(memory.id)
        assert machine.store.recall_for_action("git-commit", k=50) == (
            reference.store.recall_for_action("git-commit", k=50)
        )
    # The same records everywhere, and each machine knows which came from the others.
    for machine in machines:
        others = sorted(m.id for m in expected if made_on[m.id] is not machine)
        assert machine.store.synced_among(expected) == others

    # a fork (two machines superseded one rule apart) is settled on one, everywhere
    forks = reference.store.forks()
    assert forks, "the random walk above is seeded to leave a fork"
    settled, _ = machines[1].store.supersede(forks[0].tips[-1].id, "settled")
    for _ in range(2):
        for machine in machines:
            machine.sync.sync(machine.store)
    for machine in machines:
        assert machine.store.forks() == forks[1:]
        assert machine.store.get(settled.id).merges == tuple(t.id for t in forks[0].tips[:-1])
