"""A hostile repository's `.mented/` (issue 21): it writes nothing outside, silences none
of the user's own rules, cannot hold or grow the daemon, and only the user's folders count.

Each attack is built here as a clone would bring it (links, a FIFO, a name that is not
UTF-8, a line nested 1,000 deep, another user's folder, a project past the caps), and a
bystander (a hook in a directory without `.mented/`) must keep answering meanwhile.
"""

from __future__ import annotations

import json
import os
import pwd
import threading
import time
from pathlib import Path

import pytest
import trio

from mented import team
from mented.actions import load_action_table
from mented.agents.pretooluse import pretooluse_event, text_of_answer
from mented.config import Config
from mented.hooks import HookHandler
from mented.matcher import Matcher
from mented.protocol import StatusReply
from mented.store import Store
from mented.team import ProjectRules, RuleLookup, TrustError
from mented_client.commands.doctor import check_sync
from tests.conftest import DaemonProcess

MINE = "mine: one line"
RULE = b'{"action": "git-commit", "text": "team: conventional prefix"}\n'


def make_repo(root: Path, rules: bytes | None = RULE) -> Path:
    """A cloned repository: `.git/`, and a `.mented/rules.jsonl` unless `rules` is None."""
    (root / ".git").mkdir(parents=True)
    if rules is not None:
        (root / ".mented").mkdir()
        (root / ".mented" / "rules.jsonl").write_bytes(rules)
    return root


def hook(daemon: DaemonProcess, cwd: Path, session: str) -> str:
    event = pretooluse_event("git commit -m x", cwd=str(cwd), session=session)
    with daemon.client() as client:
        return text_of_answer(client.hook("claude-code", event)) or ""


def bystander(daemon: DaemonProcess, tmp_path: Path) -> None:
    """Another session's hook, in a directory with no `.mented/`: it gets the user's rule."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    assert MINE in hook(daemon, elsewhere, f"bystander-{time.monotonic_ns()}")


def texts(rules: list) -> list[str]:  # type: ignore[type-arg]
    return [rule.content for rule in rules]


# ---------------------------------------------- item 3: the writer follows no link


def test_rule_add_team_never_follows_a_link(daemon: DaemonProcess, tmp_path: Path) -> None:
    home = daemon.home
    bashrc = home / ".bashrc"
    bashrc.write_text("export PATH=$PATH\n")
    (home / ".ssh").mkdir(exist_ok=True)
    (home / "elsewhere").mkdir()
    linked_file = make_repo(tmp_path / "linked-file", rules=None)
    (linked_file / ".mented").mkdir()
    (linked_file / ".mented" / "rules.jsonl").symlink_to(bashrc)
    dangling = make_repo(tmp_path / "dangling", rules=None)
    (dangling / ".mented").mkdir()
    (dangling / ".mented" / "rules.jsonl").symlink_to(home / ".ssh" / "rc")
    linked_folder = make_repo(tmp_path / "linked-folder", rules=None)
    (linked_folder / ".mented").symlink_to(home / "elsewhere")

    for repo, target in [
        (linked_file, bashrc),
        (dangling, home / ".ssh" / "rc"),
        (linked_folder, home / "elsewhere"),
    ]:
        refused = daemon.mentectl(
            "rule", "add", "--team", "git-commit", "team: x", cwd=repo, check=False
        )
        assert refused.returncode == 1, refused
        assert f"a symbolic link (to {target})" in refused.stderr
        assert "not written" in refused.stderr

    assert bashrc.read_text() == "export PATH=$PATH\n"
    assert not (home / ".ssh" / "rc").exists()
    assert list((home / "elsewhere").iterdir()) == []
    # A project of its own is written as before, inside `.mented/`.
    plain = make_repo(tmp_path / "plain", rules=None)
    daemon.mentectl("rule", "add", "--team", "git-commit", "team: x", cwd=plain)
    assert json.loads((plain / ".mented" / "rules.jsonl").read_text())["text"] == "team: x"


def test_rule_add_team_refuses_a_fifo_and_a_hard_link(tmp_path: Path) -> None:
    from mented_client.commands.output import CommandError
    from mented_client.commands.team import add_team_rule

    fifo = make_repo(tmp_path / "fifo", rules=None)
    (fifo / ".mented").mkdir()
    os.mkfifo(fifo / ".mented" / "rules.jsonl")
    hard = make_repo(tmp_path / "hard", rules=None)
    (hard / ".mented").mkdir()
    secret = tmp_path / "secret"
    secret.write_text("x\n")
    os.link(secret, hard / ".mented" / "rules.jsonl")
    cwd = Path.cwd()
    try:
        for repo, why in [(fifo, "a named pipe"), (hard, "a file with 2 names")]:
            os.chdir(repo)
            with pytest.raises(CommandError, match=why):  # at once: a FIFO is never waited on
                add_team_rule("git-commit", "team: x", None)
    finally:
        os.chdir(cwd)
    assert secret.read_text() == "x\n"


# --------------- item 5: a name that is not UTF-8, a line 1,000 deep: your rules still come


def test_a_hostile_name_or_nesting_never_silences_your_own_rules(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    daemon.mentectl("rule", "add", "git-commit", MINE)
    named = make_repo(tmp_path / "named")
    (named / ".mented" / os.fsdecode(b"\xff\xfe.jsonl")).write_bytes(RULE)
    deep = make_repo(tmp_path / "deep")
    nested = b"[" * 1000 + b"]" * 1000
    (deep / ".mented" / "rules.jsonl").write_bytes(
        b'{"action": "git-commit", "text": "' + b"x" * 2048 + b'", "x": ' + nested + b"}\n"
    )

    for n, repo in enumerate([named, deep]):
        assert MINE in hook(daemon, repo, f"s{n}")
        bystander(daemon, tmp_path)
        listed = daemon.mentectl("rule", "list", "--cwd", str(repo), check=False)
        assert listed.returncode == 0, listed.stderr  # never `internal`
        assert MINE in listed.stdout
        assert "are not used" in listed.stderr

    status = daemon.mentectl("status").stdout
    assert f"{named}: in .mented/: \\xff\\xfe.jsonl: the name is not UTF-8 text" in status
    assert f"{deep}: .mented/rules.jsonl:1: nested more than 32 levels deep" in status


# --------------------------- item 6: /dev/zero and a FIFO cannot hold or grow the daemon


def test_a_fifo_in_mented_never_hangs_the_daemon(daemon: DaemonProcess, tmp_path: Path) -> None:
    daemon.mentectl("rule", "add", "git-commit", MINE)
    repo = make_repo(tmp_path / "fifo")
    os.mkfifo(repo / ".mented" / "pipe.jsonl")

    assert MINE in hook(daemon, repo, "s1")
    bystander(daemon, tmp_path)
    status = daemon.mentectl("status").stdout  # another client is answered
    assert f"{repo}: in .mented/: pipe.jsonl: a named pipe, not a regular file" in status
    refused = daemon.mentectl("trust", str(repo), check=False)
    assert refused.returncode == 1
    assert "not trusted: in .mented/: pipe.jsonl: a named pipe" in refused.stderr


def test_a_link_to_dev_zero_is_never_read(daemon: DaemonProcess, tmp_path: Path) -> None:
    daemon.mentectl("rule", "add", "git-commit", MINE)
    repo = make_repo(tmp_path / "zero", rules=None)
    (repo / ".mented").mkdir()
    (repo / ".mented" / "rules.jsonl").symlink_to("/dev/zero")
    before = _rss_kib(daemon)

    for n in range(5):
        assert MINE in hook(daemon, repo, f"s{n}")
        bystander(daemon, tmp_path)

    assert _rss_kib(daemon) - before < 64 * 1024  # it grew by 1.6 GiB a hook before
    status = daemon.mentectl("status").stdout
    # Where the link points is named: the user sees what the repository tried.
    assert f"{repo}: in .mented/: rules.jsonl: a symbolic link (to /dev/zero)" in status


def _rss_kib(daemon: DaemonProcess) -> int:
    assert daemon.proc is not None
    for line in Path(f"/proc/{daemon.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


# --------------------- item 7: up to the repository's root, and only the user's folders


def test_the_walk_for_mented_stops_at_the_repository_root(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    (outer / ".mented").mkdir(parents=True)
    (outer / ".mented" / "rules.jsonl").write_bytes(RULE)
    projects = ProjectRules(tmp_path / "data")
    projects.trust(str(outer))
    repo = make_repo(outer / "repo", rules=None)
    (repo / "src").mkdir()

    assert projects.recall_for_action("git-commit", agent=None, cwd=str(repo / "src"), k=6) == []
    with pytest.raises(TrustError, match=r"no \.mented/ folder"):
        projects.trust(str(repo))
    # Outside that repository, the folder above applies as before.
    (outer / "notes").mkdir()
    assert texts(
        projects.recall_for_action("git-commit", agent=None, cwd=str(outer / "notes"), k=6)
    ) == ["team: conventional prefix"]
    # A submodule's root is no repository of its own: its superproject's rules apply.
    (outer / ".git").mkdir()
    sub = outer / "vendor" / "sub"
    sub.mkdir(parents=True)
    (sub / ".git").write_text("gitdir: ../../.git/modules/sub\n")
    assert texts(projects.recall_for_action("git-commit", agent=None, cwd=str(sub), k=6)) == [
        "team: conventional prefix"
    ]
    # A worktree's `.git` file points elsewhere: its root ends the walk.
    worktree = outer / "wt"
    worktree.mkdir()
    (worktree / ".git").write_text(f"gitdir: {tmp_path}/main/.git/worktrees/wt\n")
    assert projects.recall_for_action("git-commit", agent=None, cwd=str(worktree), k=6) == []


def test_a_git_file_pointing_at_another_repositorys_modules_ends_the_walk(
    tmp_path: Path,
) -> None:
    """Only a submodule of the repository above lets that repository's rules apply: a
    `.git` file a clone chose (pointing at another repository's modules, or not a
    `gitdir:` line at all) must not pull in the `.mented/` of the directory above."""
    outer = make_repo(tmp_path / "outer")
    for name, line in [
        ("elsewhere", f"gitdir: {tmp_path}/other/.git/modules/elsewhere"),
        ("garbled", "garbled ../.git/modules/garbled"),
    ]:
        clone = outer / name
        clone.mkdir()
        (clone / ".git").write_text(line + "\n")

        assert team.find_roots(str(clone)) == [], name
    sub = outer / "sub"
    sub.mkdir()
    (sub / ".git").write_text("gitdir: ../.git/modules/sub\n")
    assert team.find_roots(str(sub)) == [str(outer)]


def test_at_most_eight_nested_folders_apply_the_innermost_first(tmp_path: Path) -> None:
    path = make_repo(tmp_path / "r0")
    chain = [path]
    for n in range(1, team.MAX_FOLDERS + 2):
        path = path / f"r{n}"
        (path / ".mented").mkdir(parents=True)
        chain.append(path)

    found = team.find_roots(str(path))

    assert found == [str(p) for p in reversed(chain)][: team.MAX_FOLDERS]


def test_another_users_link_named_mented_is_passed_over(
    tmp_path: Path, nobody: pwd.struct_passwd
) -> None:
    """A `.mented` link of the user's is refused when read, and named; one someone else
    planted (in a shared directory) is not the user's project at all."""
    shared = make_repo(tmp_path / "shared", rules=None)
    target = tmp_path / "elsewhere"
    target.mkdir()
    (shared / ".mented").symlink_to(target)
    os.lchown(shared / ".mented", nobody.pw_uid, nobody.pw_gid)
    assert team.find_roots(str(shared)) == []
    os.lchown(shared / ".mented", os.geteuid(), os.getegid())
    assert team.find_roots(str(shared)) == [str(shared)]


def test_another_users_mented_is_ignored(
    daemon: DaemonProcess, tmp_path: Path, nobody: pwd.struct_passwd
) -> None:
    daemon.mentectl("rule", "add", "git-commit", MINE)
    shared = tmp_path / "shared"  # as /tmp: anyone may create a `.mented/` there
    (shared / ".mented").mkdir(parents=True)
    (shared / ".mented" / "rules.jsonl").write_bytes(RULE)
    os.mkfifo(shared / ".mented" / "pipe.jsonl")
    for path in [shared / ".mented", *(shared / ".mented").iterdir()]:
        os.chown(path, nobody.pw_uid, nobody.pw_gid)
    work = shared / "work"
    work.mkdir()

    assert MINE in hook(daemon, work, "s1")
    bystander(daemon, tmp_path)
    assert str(shared) not in daemon.mentectl("status").stdout
    refused = daemon.mentectl("trust", str(work), check=False)
    assert refused.returncode == 1
    assert f"{shared}/.mented/ is owned by another user (uid {nobody.pw_uid})" in refused.stderr


def test_a_file_of_another_user_or_a_folder_others_may_write_is_ignored(
    tmp_path: Path, nobody: pwd.struct_passwd
) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / ".mented" / "theirs.jsonl").write_bytes(
        b'{"action": "git-commit", "text": "theirs: push to main"}\n'
    )
    os.chown(repo / ".mented" / "theirs.jsonl", nobody.pw_uid, nobody.pw_gid)
    projects = ProjectRules(tmp_path / "data")
    assert texts(projects.trust(str(repo)).rules) == ["team: conventional prefix"]
    assert texts(projects.recall_for_action("git-commit", agent=None, cwd=str(repo), k=6)) == [
        "team: conventional prefix"
    ]
    (repo / ".mented").chmod(0o777)
    assert projects.recall_for_action("git-commit", agent=None, cwd=str(repo), k=6) == []
    with pytest.raises(TrustError, match="writable by others: mented ignores it"):
        projects.trust(str(repo))


# ------------------------------------------------ item 8: bounded projects, read off the loop


def test_a_project_past_the_caps_is_refused_saying_so(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    daemon.mentectl("rule", "add", "git-commit", MINE)
    many = make_repo(tmp_path / "many", rules=RULE * (team.MAX_PROJECT_RULES + 1))
    big = make_repo(tmp_path / "big")
    for n in range(8):  # 8 files of 64 KiB: each under the old 1 MiB, together over the cap
        line = b'{"action": "git-commit", "text": "' + b"y" * 1000 + b'"}\n'
        (big / ".mented" / f"part{n}.jsonl").write_bytes(line * 64)

    for n, repo in enumerate([many, big]):
        assert MINE in hook(daemon, repo, f"s{n}")
        bystander(daemon, tmp_path)
    status = daemon.mentectl("status").stdout
    assert f"{many}: .mented/ holds more than {team.MAX_PROJECT_RULES} rules" in status
    assert f"{big}: .mented/ holds more than {team.MAX_PROJECT_BYTES} bytes of rules" in status
    refused = daemon.mentectl("trust", str(big), check=False)
    assert "not trusted: .mented/ holds more than" in refused.stderr


def test_kept_projects_are_bounded_by_bytes_least_recently_used_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repos = [make_repo(tmp_path / f"r{n}", rules=RULE * 40) for n in range(5)]
    projects = ProjectRules(tmp_path / "data")
    one = team._cost(projects.projects_of(str(repos[0]))[0])
    monkeypatch.setattr(team, "MAX_CACHED_BYTES", 2 * one)
    for repo in [*repos, repos[3]]:  # r3 used again last: r4 is the least recently used
        projects.projects_of(str(repo))
    projects.projects_of(str(repos[0]))  # read again: r4 goes
    kept = [why.split(":")[0] for why in projects.untrusted()]
    assert kept == sorted([str(repos[0]), str(repos[3])])


async def test_a_project_is_read_off_the_event_loop_and_once_for_all_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mented import team_reads

    repo = make_repo(tmp_path / "repo")
    release = threading.Event()
    reads: list[str] = []

    def slow_read(root: str) -> team.Project:
        reads.append(root)
        release.wait()
        return team.read_project(root)

    monkeypatch.setattr(team_reads, "read_project", slow_read)
    projects = ProjectRules(tmp_path / "data", read_inline=False)
    project_reads = team_reads.ProjectReads(projects)

    # A hook whose deadline passes first goes on without the project (never read inline).
    await project_reads.ready(str(repo), time.monotonic() + 0.05)
    assert projects.projects_of(str(repo)) == []
    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(project_reads.ready, str(repo), time.monotonic() + 600)
        await trio.sleep(0.05)
        # The loop runs meanwhile (this task does), and nothing read the project inline.
        assert projects.projects_of(str(repo)) == []
        release.set()
    assert reads == [str(repo)]  # one read for the four that waited
    assert [p.rules[0].content for p in projects.projects_of(str(repo))] == [
        "team: conventional prefix"
    ]


async def test_every_project_that_applies_is_read_before_the_hook_goes_on(
    tmp_path: Path,
) -> None:
    """A monorepo with a `.mented/` inside another's: a hook in the inner one waits for
    both reads, so neither project's rules are missing from its first answer."""
    from mented import team_reads

    outer = make_repo(
        tmp_path / "mono", b'{"action": "git-commit", "text": "outer: squash merges"}\n'
    )
    inner = outer / "services" / "api"
    inner.mkdir(parents=True)
    (inner / ".mented").mkdir()
    (inner / ".mented" / "rules.jsonl").write_bytes(
        b'{"action": "git-commit", "text": "inner: api prefix"}\n'
    )
    projects = ProjectRules(tmp_path / "data", read_inline=False)

    await team_reads.ProjectReads(projects).ready(str(inner), time.monotonic() + 600)

    read = [rule.content for p in projects.projects_of(str(inner)) for rule in p.rules]
    assert sorted(read) == ["inner: api prefix", "outer: squash merges"]


async def test_a_project_changed_after_its_read_is_read_again(tmp_path: Path) -> None:
    """The team edits `.mented/` (a pull): the next hook there gets the new rules, not the
    ones read before (a finished read must not stay marked as under way)."""
    from mented import team_reads

    repo = make_repo(tmp_path / "repo")
    projects = ProjectRules(tmp_path / "data", read_inline=False)
    project_reads = team_reads.ProjectReads(projects)
    await project_reads.ready(str(repo), time.monotonic() + 600)
    rules = repo / ".mented" / "rules.jsonl"
    rules.write_bytes(b'{"action": "git-commit", "text": "team: squash merges only"}\n')
    os.utime(rules, ns=(time.time_ns() + 5 * 10**9,) * 2)  # a later mtime, whatever the clock

    await project_reads.ready(str(repo), time.monotonic() + 600)

    assert [r.content for p in projects.projects_of(str(repo)) for r in p.rules] == [
        "team: squash merges only"
    ]


async def test_at_most_two_projects_are_read_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hooks in many fresh clones at once do not take a worker thread each."""
    from mented import team_reads

    repos = [make_repo(tmp_path / f"repo{n}") for n in range(5)]
    release = threading.Event()
    two_reading = threading.Event()
    reading: list[str] = []
    most = 0
    lock = threading.Lock()

    def slow_read(root: str) -> team.Project:
        nonlocal most
        with lock:
            reading.append(root)
            most = max(most, len(reading))
            if len(reading) >= 2:
                two_reading.set()
        release.wait()
        with lock:
            reading.remove(root)
        return team.read_project(root)

    monkeypatch.setattr(team_reads, "read_project", slow_read)
    projects = ProjectRules(tmp_path / "data", read_inline=False)
    project_reads = team_reads.ProjectReads(projects)
    async with trio.open_nursery() as nursery:
        for repo in repos:
            nursery.start_soon(project_reads.ready, str(repo), time.monotonic() + 600)
        try:
            await trio.to_thread.run_sync(two_reading.wait)
            await trio.sleep(0.1)  # time for more readers to start, were they allowed to
            assert most == 2
        finally:
            release.set()  # else a failed assertion waits for the blocked threads forever
    assert all(projects.projects_of(str(repo)) for repo in repos)


# ------------------------------------------ item 11: the notice escapes terminal controls


def test_the_untrusted_notice_escapes_terminal_controls(store: Store, tmp_path: Path) -> None:
    clipboard = "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07"
    repo = make_repo(tmp_path / f"repo{clipboard}")
    broken = make_repo(tmp_path / "broken")
    (broken / ".mented" / "\x1b[2J.jsonl").write_bytes(b'{"action": "git-commit"}\n')
    projects = ProjectRules(tmp_path / "data")
    config = Config()
    handler = HookHandler(
        RuleLookup(store, projects), Matcher(load_action_table(config)), config, None
    )

    for n, where in enumerate([repo, broken]):
        event = pretooluse_event("git commit -m x", cwd=str(where), session=f"s{n}")
        notice = json.loads(handler.handle("claude-code", event))["systemMessage"]
        assert "\x1b" not in notice
        assert "\x07" not in notice
    assert (
        "repo\\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\\x07/.mented/ are not used"
        in json.loads(
            handler.handle(
                "claude-code", pretooluse_event("git commit -m x", cwd=str(repo), session="s9")
            )
        )["systemMessage"]
    )


# ----------------- also seen: a nested `.mented/` adds its rules, never hides the outer ones


@pytest.mark.parametrize("nested", [b"", b'{"action": "git-commit", "text": "vendored"}\n'])
def test_a_nested_mented_never_hides_the_repositorys_rules(
    store: Store, tmp_path: Path, nested: bytes
) -> None:
    repo = make_repo(tmp_path / "repo")
    vendored = repo / "vendor" / "dep"
    (vendored / ".mented").mkdir(parents=True)
    (vendored / ".mented" / "rules.jsonl").write_bytes(nested)
    projects = ProjectRules(tmp_path / "data")
    lookup = RuleLookup(store, projects)
    projects.trust(str(repo))

    inside = str(vendored)
    assert texts(lookup.recall_for_action("git-commit", cwd=inside)) == [
        "team: conventional prefix"
    ]
    if nested:
        assert lookup.untrusted_project(inside) is not None  # the nested one is named
        projects.trust(inside)
        assert texts(lookup.recall_for_action("git-commit", cwd=inside)) == [
            "team: conventional prefix",
            "vendored",
        ]
        assert texts(lookup.recall_for_action("git-commit", cwd=str(repo))) == [
            "team: conventional prefix"
        ]
    assert lookup.untrusted_project(inside) is None


# ---------------------------------------- issue 23: trust says so of an unknown action


def test_trust_names_an_unknown_action_with_the_closest(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo", rules=b'{"action": "git-comit", "text": "typo"}\n')
    trusted = daemon.mentectl("trust", str(repo))
    assert "trusted 1 rule in" in trusted.stdout
    assert "'git-comit' is not an action mented knows" in trusted.stderr
    assert "Did you mean: git-commit" in trusted.stderr


def test_doctors_fix_for_a_broken_mented_file_is_to_fix_it_first(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", rules=b'{"action": "git-commit"}\n')
    projects = ProjectRules(tmp_path / "data")
    projects.projects_of(str(repo))
    status = StatusReply(
        version="0",
        pid=1,
        uptime_s=0,
        socket="s",
        data_dir="d",
        untrusted_projects=projects.untrusted(),
    )
    (check,) = [check for check in check_sync(status) if check.link == "project"]
    assert ".mented/rules.jsonl:1: Object missing required field `text`" in check.detail
    assert check.fix is not None
    assert "fix or remove it" in check.fix
    assert "then `mentectl trust" in check.fix


async def test_a_rule_looked_up_by_id_has_its_project_read_off_the_event_loop(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`get` (and `history`, `forget`, `report`) of a project rule whose file changed:
    the read waits in a worker thread, and another client's request is answered
    meanwhile (before: read on the event loop, every other request waited)."""
    from mented import team_reads
    from mented.protocol import GetRequest, MemoryReply, StatusRequest
    from mented.server import Server, ServerOptions

    repo = make_repo(short_tmp / "repo")
    server = Server(
        ServerOptions(
            socket_path=short_tmp / "run" / "s.sock",
            data_dir=short_tmp / "data",
            handle_signals=False,
        )
    )
    server.open()
    try:
        rule = server.projects.trust(str(repo)).rules[0]
        # A pull changes the file: the next lookup of that rule must read it again.
        (repo / ".mented" / "rules.jsonl").write_bytes(RULE + b"\n")
        entered = threading.Event()
        release = threading.Event()
        on_the_loop: list[str] = []
        real_read = team.read_project

        def slow_read(root: str) -> team.Project:
            try:
                trio.lowlevel.current_task()
            except RuntimeError:  # a worker thread: wait, as a slow disk would
                entered.set()
                release.wait()
            else:
                on_the_loop.append(root)
                entered.set()
            return real_read(root)

        monkeypatch.setattr(team, "read_project", slow_read)
        monkeypatch.setattr(team_reads, "read_project", slow_read)
        answers: list[object] = []

        async def get() -> None:
            try:
                answers.append(await server._answer(GetRequest(id=rule.id)))
            finally:
                entered.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(get)
            await trio.to_thread.run_sync(entered.wait)
            assert isinstance(await server._answer(StatusRequest()), StatusReply)
            assert answers == [], "the get was answered before its project was read"
            release.set()
        assert on_the_loop == []
        (answer,) = answers
        assert isinstance(answer, MemoryReply)
        assert answer.memory.id == rule.id
        assert answer.file is not None and answer.file.endswith("rules.jsonl")
    finally:
        release.set()
        server.close()
