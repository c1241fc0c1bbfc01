"""Sync against a hostile remote: whoever can push to it must not reach outside the clone.

Each test builds the remote itself in a temporary directory (a bare repository and an
attacker's clone that pushes to it) and checks what the user would notice: no file
written outside mented's data directory, the bad record skipped and named, the failure
kept for `status`, the other records still synced.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mented.memory import Memory, origin_of
from mented.portable import memory_line
from mented.store import Store
from mented.sync import GitSync, SyncError, record_path

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

GIT_ID = ["-c", "user.name=attacker", "-c", "user.email=a@a", "-c", "commit.gpgsign=false"]


class Machine:
    def __init__(self, root: Path, remote: Path) -> None:
        self.root = root
        self.store = Store(root / "data", sync=False)
        self.sync = GitSync(root / "data", timeout_s=30)
        self.sync.init(str(remote))

    def rules(self) -> list[str]:
        return sorted(m.content for m in self.store.list(include_superseded=True))


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(repo), *GIT_ID, *args], capture_output=True, text=True, check=check
    )


class Attacker:
    """Someone who can push to the remote: a clone of their own."""

    def __init__(self, root: Path, remote: Path) -> None:
        self.work = root / "attacker"
        self.remote = remote
        subprocess.run(["git", "clone", "--quiet", str(remote), str(self.work)], check=True)

    def push(self, message: str = "attack") -> None:
        git(self.work, "pull", "--quiet", "--no-rebase", "origin", "main", check=False)
        git(self.work, "add", "--all", "--force")
        git(self.work, "commit", "--quiet", "--no-verify", "-m", message)
        git(self.work, "push", "--quiet", "origin", "HEAD:refs/heads/main")


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    path = tmp_path / "remote.git"
    subprocess.run(["git", "init", "--quiet", "--bare", "-b", "main", str(path)], check=True)
    return path


@pytest.fixture
def laptop(tmp_path: Path, remote: Path) -> Iterator[Machine]:
    machine = Machine(tmp_path / "laptop", remote)
    yield machine
    machine.store.close()


def remote_files(remote: Path) -> list[str]:
    listed = git(remote, "ls-tree", "-r", "--name-only", "main").stdout
    return listed.split()


def a_record(text: str, memory_id: str | None = None) -> tuple[str, bytes]:
    """A valid record line (and its path) as another machine would have pushed it."""
    with_id = Memory(
        id=memory_id or "01JDQ8Z5K3M4N5P6Q7R8S9T0VW",
        content=text,
        tags=("trigger:git-commit",),
        created_at=time.time() - 60,
    )
    return record_path("records", with_id.id), memory_line(with_id)


def test_a_prefix_directory_turned_into_a_symlink_gets_nothing_written_outside(
    laptop: Machine, remote: Path, tmp_path: Path
) -> None:
    first = laptop.store.store("single line", tags=["trigger:git-commit"])
    laptop.sync.sync(laptop.store)
    attacker = Attacker(tmp_path, remote)
    prefix = first.id[:4]
    outside = tmp_path / "outside"  # e.g. ~/.ssh
    outside.mkdir()
    shutil.rmtree(attacker.work / "records" / prefix)
    (attacker.work / "records" / prefix).symlink_to(outside)
    attacker.push()
    laptop.sync.sync(laptop.store)  # takes the attacker's commit

    second = laptop.store.store("no emojis", tags=["trigger:git-commit"])
    assert second.id[:4] == prefix  # ids of one day share their first 4 characters
    for _ in range(2):  # the next sync fails too: the rule never reached the remote
        with pytest.raises(SyncError, match=f"records/{prefix}: .*not a directory") as failed:
            laptop.sync.sync(laptop.store)
        assert "nothing was written through it" in str(failed.value)
        assert list(outside.iterdir()) == []
        assert f"records/{prefix}" in (laptop.sync.state().last_error or "")
    assert record_path("records", second.id) not in remote_files(remote)


def test_a_record_written_through_a_symlinked_records_directory_is_refused(
    laptop: Machine, tmp_path: Path
) -> None:
    # The clone's own checkout holds the link (an older mented, core.symlinks=true).
    outside = tmp_path / "outside"
    outside.mkdir()
    laptop.store.store("single line", tags=["trigger:git-commit"])
    (laptop.sync.repo / "records").symlink_to(outside)
    with pytest.raises(SyncError, match="records: a symbolic link"):
        laptop.sync.sync(laptop.store)
    assert list(outside.iterdir()) == []


def test_bad_remote_records_are_skipped_and_named_and_the_rest_still_syncs(
    laptop: Machine, remote: Path, tmp_path: Path
) -> None:
    laptop.store.store("single line", tags=["trigger:git-commit"])
    laptop.sync.sync(laptop.store)
    attacker = Attacker(tmp_path, remote)
    good_path, good = a_record("from the desk", "01JDQ8Z5K3M4N5P6Q7R8S9T0A1")
    bad: dict[str, bytes] = {
        # 1,000 deep: msgspec recursed, every later sync answered `internal`
        "records/01JD/01JDQ8Z5K3M4N5P6Q7R8S9T0A2.json": b"[" * 1000 + b"]" * 1000,
        # a time near 2**40 stays "newest" for ever
        a_record("x", "01JDQ8Z5K3M4N5P6Q7R8S9T0A3")[0]: a_record("x", "01JDQ8Z5K3M4N5P6Q7R8S9T0A3")[
            1
        ].replace(b'"created_at":', b'"created_at":1099511627000,"old":'),
        # a file whose name says another id
        "records/01JD/01JDQ8Z5K3M4N5P6Q7R8S9T0A4.json": a_record("y", "01JDQ8Z5K3M4N5P6Q7R8S9T0A5")[
            1
        ],
        # not a record file's name at all
        "records/01JD/evil.json": good,
        # a memory filed as a forget: never imported as either
        "forgotten/01JD/01JDQ8Z5K3M4N5P6Q7R8S9T0A8.json": a_record(
            "z", "01JDQ8Z5K3M4N5P6Q7R8S9T0A8"
        )[1],
    }
    for name, data in {good_path: good, **bad}.items():
        (attacker.work / name).parent.mkdir(parents=True, exist_ok=True)
        (attacker.work / name).write_bytes(data)
    secret = tmp_path / "secret-record.json"  # a file of the user's, outside the clone
    secret.write_bytes(a_record("read from outside", "01JDQ8Z5K3M4N5P6Q7R8S9T0A6")[1])
    (attacker.work / "records/01JD/01JDQ8Z5K3M4N5P6Q7R8S9T0A6.json").symlink_to(secret)
    (attacker.work / "records/01JD/01JDQ8Z5K3M4N5P6Q7R8S9T0A7.json").symlink_to("/dev/zero")
    attacker.push()

    result = laptop.sync.sync(laptop.store)
    assert laptop.rules() == ["from the desk", "single line"]
    skipped = "\n".join(result.skipped)
    for name in [*bad, "01JDQ8Z5K3M4N5P6Q7R8S9T0A6.json", "01JDQ8Z5K3M4N5P6Q7R8S9T0A7.json"]:
        assert name.rpartition("/")[2] in skipped, skipped
    assert "nested more than 32 levels deep" in skipped
    assert "created_at 1099511627000.0 is in the future" in skipped
    assert "holds the record 01JDQ8Z5K3M4N5P6Q7R8S9T0A5, not 01JDQ8Z5K3M4N5P6Q7R8S9T0A4" in skipped
    assert "01JDQ8Z5K3M4N5P6Q7R8S9T0A8.json: a forget is expected" in skipped
    assert laptop.sync.state().skipped_total == len(result.skipped) == 7

    # and sync keeps working: a local rule still reaches the remote
    later = laptop.store.store("no emojis", tags=["trigger:git-commit"])
    assert laptop.sync.sync(laptop.store).pushed
    assert record_path("records", later.id) in remote_files(remote)


def test_a_blob_bomb_is_refused_before_anything_is_checked_out(
    laptop: Machine, remote: Path, tmp_path: Path
) -> None:
    laptop.store.store("single line", tags=["trigger:git-commit"])
    laptop.sync.sync(laptop.store)
    attacker = Attacker(tmp_path, remote)
    bomb = attacker.work / "records/01JD/01JDQ8Z5K3M4N5P6Q7R8S9T0B1.json"
    bomb.parent.mkdir(parents=True, exist_ok=True)
    # 8 MiB of zeros, 16 times the most a record may be: about 8 KiB in the pack (git
    # hashes and packs every byte of it twice, so not the 64 MiB a bomb might hold).
    with bomb.open("wb") as out:
        for _ in range(8):
            out.write(bytes(1024 * 1024))
    attacker.push()

    with pytest.raises(SyncError, match=r"01JDQ8Z5K3M4N5P6Q7R8S9T0B1\.json is 8388608 bytes"):
        laptop.sync.sync(laptop.store)
    assert not (laptop.sync.repo / "records/01JD/01JDQ8Z5K3M4N5P6Q7R8S9T0B1.json").exists()
    checked_out = sum(
        path.stat().st_size for path in laptop.sync.repo.rglob("*") if ".git" not in path.parts
    )
    assert checked_out < 1024 * 1024
    assert "is 8388608 bytes" in (laptop.sync.state().last_error or "")


def test_a_push_refused_by_a_server_hook_is_reported_at_once_with_gits_words(
    laptop: Machine, remote: Path
) -> None:
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'pushes are frozen today' >&2\nexit 1\n")
    hook.chmod(0o755)
    laptop.store.store("single line", tags=["trigger:git-commit"])
    with pytest.raises(SyncError) as refused:
        laptop.sync.sync(laptop.store)
    message = str(refused.value)
    assert "git push was refused" in message
    assert "pushes are frozen today" in message
    assert "pre-receive hook declined" in message
    assert "kept changing" not in message


def fake_ssh(tmp_path: Path, said: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An ssh that fails as the real one does (`said`, exit 255); each call is counted."""
    calls = tmp_path / "ssh-calls"
    script = tmp_path / "fake-ssh"
    script.write_text(f"#!/bin/sh\necho x >> {calls}\necho '{said}' >&2\nexit 255\n")
    script.chmod(0o755)
    monkeypatch.setenv("GIT_SSH_COMMAND", str(script))
    monkeypatch.setenv("GIT_SSH_VARIANT", "ssh")  # else git probes it with `-G` first
    return calls


def test_a_push_refused_for_authentication_is_reported_after_one_attempt(
    laptop: Machine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = fake_ssh(tmp_path, "git@host.invalid: Permission denied (publickey).", monkeypatch)
    git(laptop.sync.repo, "config", "remote.origin.pushurl", "ssh://git@host.invalid/rules.git")
    laptop.store.store("single line", tags=["trigger:git-commit"])
    with pytest.raises(SyncError) as refused:
        laptop.sync.sync(laptop.store)
    message = str(refused.value)
    assert "git push was refused: git@host.invalid: Permission denied (publickey)." in message
    assert "kept changing" not in message
    assert calls.read_text().count("x") == 1  # one attempt, not four


def test_init_keeps_gits_reason_not_its_last_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_ssh(
        tmp_path,
        "ssh: Could not resolve hostname example.com: Name or service not known",
        monkeypatch,
    )
    sync = GitSync(tmp_path / "data", timeout_s=30)
    with pytest.raises(SyncError) as failed:
        sync.init("git@example.com:me/rules.git")
    message = str(failed.value)
    assert "Could not resolve hostname example.com" in message
    assert "fatal: Could not read from remote repository." in message
    assert "and the repository exists." not in message
    assert not sync.configured


@pytest.mark.parametrize("form", ["path", "file-url"])
def test_init_refuses_a_projects_dot_git(tmp_path: Path, form: str) -> None:
    project = tmp_path / "code" / "project"
    subprocess.run(["git", "init", "--quiet", str(project)], check=True)
    dot_git = project / ".git"
    remote = str(dot_git) if form == "path" else f"file://{dot_git}"
    sync = GitSync(tmp_path / "data", timeout_s=30)
    with pytest.raises(SyncError, match=r"is a working repository"):
        sync.init(remote)
    assert not sync.configured


@pytest.mark.parametrize("blank", ["", "   "])
def test_init_refuses_a_blank_remote(tmp_path: Path, blank: str) -> None:
    sync = GitSync(tmp_path / "data", timeout_s=30)
    with pytest.raises(SyncError, match="the remote is empty: give a git URL"):
        sync.init(blank)
    assert not sync.configured


def test_a_clone_config_that_would_run_a_program_is_refused(
    laptop: Machine, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    git(laptop.sync.repo, "config", "core.fsmonitor", f"touch {marker}; false")
    git(laptop.sync.repo, "config", "core.hooksPath", str(tmp_path))
    laptop.store.store("single line", tags=["trigger:git-commit"])
    with pytest.raises(SyncError, match=r"sets core\.fsmonitor, core\.hookspath"):
        laptop.sync.sync(laptop.store)
    assert not marker.exists()


def test_a_filter_chosen_by_the_remote_never_runs(
    laptop: Machine, remote: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    laptop.sync.sync(laptop.store)
    # The user's own config defines a filter (git-lfs does); the remote selects it.
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(
        "[user]\n\tname = me\n\temail = me@example.com\n"
        f'[filter "evil"]\n\tsmudge = "touch {marker}; cat"\n\tclean = cat\n'
        f'[diff "evil"]\n\ttextconv = "touch {marker}; cat"\n'
    )
    attacker = Attacker(tmp_path, remote)
    (attacker.work / ".gitattributes").write_text("* filter=evil diff=evil\n")
    name, data = a_record("from the desk", "01JDQ8Z5K3M4N5P6Q7R8S9T0C1")
    (attacker.work / name).parent.mkdir(parents=True, exist_ok=True)
    (attacker.work / name).write_bytes(data)
    attacker.push()
    hook = laptop.sync.repo / ".git" / "hooks" / "post-merge"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    old_home = os.environ["HOME"]
    os.environ["HOME"] = str(home)
    try:
        laptop.store.store("single line", tags=["trigger:git-commit"])
        laptop.sync.sync(laptop.store)
    finally:
        os.environ["HOME"] = old_home
    assert "from the desk" in laptop.rules()
    assert not marker.exists()


def processes_naming(text: str) -> list[str]:
    """The command lines of live processes that mention `text`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{entry.name}: {cmdline}")
    return found


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc")
def test_a_timeout_kills_git_and_its_helpers(laptop: Machine) -> None:
    import socket

    silent = socket.socket()  # accepts the connection (the kernel does) and never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    url = f"http://127.0.0.1:{silent.getsockname()[1]}/rules.git"
    try:
        git(laptop.sync.repo, "config", "remote.origin.url", url)
        laptop.sync.timeout_s = 1.5
        did_not_answer = r"the remote did not answer within 1.5 s \(git fetch\)"
        with pytest.raises(SyncError, match=did_not_answer):
            laptop.sync.sync(laptop.store)
        deadline = time.monotonic() + 10  # killed processes go once init reaps them
        while processes_naming(url) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processes_naming(url) == []  # no `git remote-http` left behind
    finally:
        silent.close()


def test_an_unexpected_failure_is_kept_for_status_not_lost(
    laptop: Machine, monkeypatch: pytest.MonkeyPatch, remote: Path, tmp_path: Path
) -> None:
    attacker = Attacker(tmp_path, remote)
    name, data = a_record("from the desk", "01JDQ8Z5K3M4N5P6Q7R8S9T0F1")
    (attacker.work / name).parent.mkdir(parents=True, exist_ok=True)
    (attacker.work / name).write_bytes(data)
    attacker.push()

    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("a bug nobody foresaw")

    monkeypatch.setattr(laptop.store, "import_records", broken)
    with pytest.raises(SyncError, match="sync failed: RuntimeError: a bug nobody foresaw"):
        laptop.sync.sync(laptop.store)
    assert "a bug nobody foresaw" in (laptop.sync.state().last_error or "")
    monkeypatch.undo()
    laptop.sync.sync(laptop.store)  # and the record is imported once it works
    assert laptop.rules() == ["from the desk"]
    assert laptop.sync.state().last_error is None


# ------------------------------------------- what a fetch may leave in the clone


def pack_files(machine: Machine) -> dict[str, int]:
    pack = machine.sync.repo / ".git" / "objects" / "pack"
    return {path.name: path.stat().st_size for path in pack.iterdir()}


def test_a_fetch_past_the_bound_is_removed_and_the_clone_stays_as_it_was(
    laptop: Machine, remote: Path, tmp_path: Path
) -> None:
    """A remote pushed a blob that does not compress, past the bound (before: up to 1 GiB
    of pack stayed in `.git/objects` for good)."""
    laptop.store.store("single line", tags=["trigger:git-commit"])
    laptop.sync.sync(laptop.store)
    attacker = Attacker(tmp_path, remote)
    (attacker.work / "README.md").write_bytes(os.urandom(900 * 1024))
    attacker.push()
    laptop.sync.max_fetch_bytes = 512 * 1024
    before = pack_files(laptop)
    tracking = git(laptop.sync.repo, "rev-parse", "refs/remotes/origin/main").stdout

    with pytest.raises(SyncError, match=r"more than 0.5 MiB .*`\[sync\] max_fetch_mib`") as caught:
        laptop.sync.sync(laptop.store)

    assert "nothing of it reached the store" in str(caught.value)
    assert pack_files(laptop) == before
    loose = laptop.sync.repo / ".git" / "objects"
    assert sum(p.stat().st_size for p in loose.rglob("*") if p.is_file()) < 512 * 1024
    assert git(laptop.sync.repo, "rev-parse", "refs/remotes/origin/main").stdout == tracking
    assert git(laptop.sync.repo, "fsck", "--no-dangling").returncode == 0
    assert "max_fetch_mib" in (laptop.sync.state().last_error or "")
    # With room for it, the same remote syncs (the blob is the remote's README).
    laptop.sync.max_fetch_bytes = 64 * 1024 * 1024
    laptop.sync.sync(laptop.store)
    assert laptop.sync.state().last_error is None


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc")
def test_a_fetch_that_keeps_sending_is_stopped_at_the_bound_not_at_the_timeout(
    laptop: Machine, tmp_path: Path
) -> None:
    """A git that fetches and fetches (its pack growing) is killed with its group as soon
    as its pack passes the bound, and its partial pack removed."""
    real_git = shutil.which("git")
    fake = tmp_path / "slow-git"
    fake.write_text(
        "#!/bin/sh\n"
        'for arg; do if [ "$arg" = fetch ]; then\n'
        "  head -c 3145728 /dev/zero > .git/objects/pack/tmp_pack_sending\n"
        "  exec sleep 297\n"
        "fi; done\n"
        f'exec {real_git} "$@"\n'
    )
    fake.chmod(0o755)
    laptop.sync._git = str(fake)  # the one git it runs
    laptop.sync.max_fetch_bytes = 1024 * 1024
    laptop.sync.timeout_s = 120  # far past the bound's first look

    with pytest.raises(SyncError, match=r"more than 1 MiB \(git fetch was at \d+ bytes\)"):
        laptop.sync.sync(laptop.store)

    assert "tmp_pack_sending" not in pack_files(laptop)
    assert processes_naming("sleep 297") == []


def test_a_version_someone_else_pushed_over_your_rule_is_shown_as_synced(
    laptop: Machine, remote: Path, tmp_path: Path
) -> None:
    # Whoever can push may supersede a rule (that is sync); the user must be able to
    # tell the version that now fires is not theirs, and find their own in its history.
    mine = laptop.store.store("single line", tags=["trigger:git-commit"])
    laptop.sync.sync(laptop.store)
    attacker = Attacker(tmp_path, remote)
    theirs = Memory(
        id="01JDQ8Z5K3M4N5P6Q7R8S9T0A1",
        content="anything goes",
        tags=("trigger:git-commit",),
        created_at=time.time() - 60,
        supersedes=mine.id,
    )
    (attacker.work / record_path("records", theirs.id)).parent.mkdir(parents=True, exist_ok=True)
    (attacker.work / record_path("records", theirs.id)).write_bytes(memory_line(theirs))
    attacker.push()
    laptop.sync.sync(laptop.store)

    (current,) = laptop.store.recall_for_action("git-commit")
    assert current.id == theirs.id
    history = laptop.store.history(theirs.id)
    synced = laptop.store.synced_among(history)
    assert [(m.content, origin_of(m, synced)) for m in history] == [
        ("single line", "yours"),
        ("anything goes", "synced"),
    ]
