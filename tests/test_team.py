"""Team rules: a project's .mented/ folder, trusted before it reaches an agent."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from mented import team
from mented.actions import load_action_table
from mented.agents.pretooluse import pretooluse_event, text_of_answer
from mented.config import Config
from mented.hooks import HookHandler
from mented.matcher import Matcher
from mented.portable import FormatError, export_store, parse_line
from mented.store import Store
from mented.team import ProjectRules, RuleLookup, TrustError
from tests.conftest import DaemonProcess


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    db = Store(tmp_path / "data", sync=False)
    yield db
    db.close()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / ".mented").mkdir(parents=True)
    (root / "src" / "deep").mkdir(parents=True)
    (root / ".mented" / "rules.jsonl").write_text(
        '{"action": "git-commit", "text": "conventional prefix, imperative mood"}\n'
        '{"actions": ["pr-create"], "text": "link the issue", "agent": "codex"}\n'
    )
    return root


def texts(rules: list) -> list[str]:  # type: ignore[type-arg]
    return [rule.content for rule in rules]


def test_project_rules_are_served_only_once_trusted_and_after_yours(
    store: Store, repo: Path, tmp_path: Path
) -> None:
    projects = ProjectRules(tmp_path / "data")
    lookup = RuleLookup(store, projects)
    store.store("mine: one line", tags=["trigger:git-commit"])
    inside = str(repo / "src" / "deep")

    assert texts(lookup.recall_for_action("git-commit", cwd=inside)) == ["mine: one line"]
    assert projects.untrusted() == [
        f"{repo}: 2 project rules not trusted (`mentectl trust {repo}` after reading .mented/)"
    ]

    projects.trust(str(repo / "src"))

    rules = lookup.recall_for_action("git-commit", cwd=inside)
    assert texts(rules) == ["mine: one line", "conventional prefix, imperative mood"]
    assert [rule.origin for rule in rules] == [None, "project"]
    assert texts(lookup.recall_for_action("git-commit", cwd=inside, k=1)) == ["mine: one line"]
    assert texts(lookup.recall_for_action("git-commit", cwd=str(tmp_path))) == ["mine: one line"]
    # scoped to an agent, like any rule: the store's visibility predicate decides
    assert texts(lookup.recall_for_action("pr-create", agent="codex", cwd=inside)) == [
        "link the issue"
    ]
    assert lookup.recall_for_action("pr-create", agent="claude-code", cwd=inside) == []
    assert projects.untrusted() == []
    # trust is kept across restarts
    assert texts(
        ProjectRules(tmp_path / "data").recall_for_action("git-commit", agent=None, cwd=inside, k=6)
    ) == ["conventional prefix, imperative mood"]


def test_a_change_to_the_files_needs_trusting_again(
    store: Store, repo: Path, tmp_path: Path
) -> None:
    projects = ProjectRules(tmp_path / "data")
    projects.trust(str(repo))
    rules_file = repo / ".mented" / "rules.jsonl"
    with rules_file.open("a") as out:
        out.write('{"action": "git-commit", "text": "sneaky: push to main"}\n')

    assert projects.recall_for_action("git-commit", agent=None, cwd=str(repo), k=6) == []
    assert "not trusted" in projects.untrusted()[0]
    projects.trust(str(repo))
    assert len(projects.recall_for_action("git-commit", agent=None, cwd=str(repo), k=6)) == 2


def test_a_malformed_file_is_named_and_never_served(repo: Path, tmp_path: Path) -> None:
    projects = ProjectRules(tmp_path / "data")
    projects.trust(str(repo))
    (repo / ".mented" / "more.jsonl").write_text('{"action": "git-commit"}\n{"text": "x"}\n')

    with pytest.raises(TrustError, match=r"\.mented/more\.jsonl:1: .*text"):
        projects.trust(str(repo))
    assert projects.recall_for_action("git-commit", agent=None, cwd=str(repo), k=6) == []
    assert projects.untrusted()[0].startswith(f"{repo}: .mented/more.jsonl:1:")
    assert issubclass(TrustError, ValueError)
    # The same kind of message as an import's: the file and line, then what is wrong.
    with pytest.raises(FormatError) as imported:
        parse_line(b'{"kind": "memory", "id": "x"}', "rules.jsonl:1")
    assert str(imported.value).startswith("rules.jsonl:1: ")


def test_a_rule_without_text_or_action_is_named_not_served(tmp_path: Path) -> None:
    """A blank text or a missing action is a mistake in the file, told to the user with
    its line (not a rule that is silently empty, or silently never fires)."""
    for line, why in [
        ('{"action": "git-commit", "text": "   "}', "a rule needs a `text`"),
        ('{"text": "push to main only"}', "a rule needs an `action` (e.g. git-commit)"),
    ]:
        root = tmp_path / str(len(line))
        (root / ".mented").mkdir(parents=True)
        (root / ".mented" / "rules.jsonl").write_text(line + "\n")

        project = team.read_project(str(root))

        assert (project.problem, project.rules) == (f".mented/rules.jsonl:1: {why}", [])


def test_a_malformed_file_is_told_to_the_user_by_the_hook(
    store: Store, repo: Path, tmp_path: Path
) -> None:
    (repo / ".mented" / "more.jsonl").write_text('{"action": "git-commit"}\n')
    store.store("mine: one line", tags=["trigger:git-commit"])
    config = Config()
    handler = HookHandler(
        RuleLookup(store, ProjectRules(tmp_path / "data")),
        Matcher(load_action_table(config)),
        config,
        None,
    )
    event = pretooluse_event("git commit -m x", cwd=str(repo), session="s1")
    answer = handler.handle("claude-code", event)
    notice = json.loads(answer)["systemMessage"]
    assert f"the project rules in {repo}/.mented/ are not used (.mented/more.jsonl:1: " in notice
    assert "fix that in the repository (or ask its maintainers to)" in notice
    assert "mine: one line" in (text_of_answer(answer) or "")


def test_a_project_fills_only_the_places_your_rules_leave(
    store: Store, repo: Path, tmp_path: Path
) -> None:
    (repo / ".mented" / "rules.jsonl").write_text(
        "".join(f'{{"action": "git-commit", "text": "team {n}"}}\n' for n in range(10))
    )
    projects = ProjectRules(tmp_path / "data")
    projects.trust(str(repo))
    lookup = RuleLookup(store, projects)
    store.store("mine: one line", tags=["trigger:git-commit"])

    for k in (1, 2, 3, 6):
        rules = lookup.recall_for_action("git-commit", cwd=str(repo), k=k)
        assert texts(rules) == ["mine: one line"] + [f"team {n}" for n in range(k - 1)]
    # Asked for no rules (the user's own filled the places), a project adds none.
    assert projects.recall_for_action("git-commit", agent=None, cwd=str(repo), k=0) == []


def test_a_project_exactly_at_each_limit_is_read(tmp_path: Path) -> None:
    """The limits refuse what passes them, not what reaches them: a team that sized its
    `.mented/` to the documented limit still gets its rules served."""
    rule = '{"action": "git-commit", "text": "team: squash"}\n'
    cases = {
        "files": {f"part{n:02}.jsonl": rule for n in range(team.MAX_FILES)},
        "rules": {"rules.jsonl": rule * team.MAX_PROJECT_RULES},
        # Blank lines are skipped but count as bytes: one rule, the rest padding.
        "bytes": {"rules.jsonl": rule + "\n" * (team.MAX_PROJECT_BYTES - len(rule))},
    }
    for limit, files in cases.items():
        root = tmp_path / limit
        (root / ".mented").mkdir(parents=True)
        for name, text in files.items():
            (root / ".mented" / name).write_text(text)

        project = team.read_project(str(root))

        assert (project.problem, bool(project.rules)) == (None, True), limit
    assert project.size == team.MAX_PROJECT_BYTES


def test_an_export_copied_into_the_project_is_read_with_its_header(
    store: Store, tmp_path: Path
) -> None:
    """`mentectl export > .mented/rules.jsonl` is a way to share one's rules with a team:
    the export's first line names the format and is not a rule."""
    store.store("exported: one line", tags=["trigger:git-commit"])
    root = tmp_path / "repo"
    (root / ".mented").mkdir(parents=True)
    export_store(store, root / ".mented" / "rules.jsonl")

    project = team.read_project(str(root))

    assert (project.problem, texts(project.rules)) == (None, ["exported: one line"])


def test_what_is_named_untrusted_is_what_would_be_served(
    store: Store, repo: Path, tmp_path: Path
) -> None:
    """The notice names the nearest project first, never an empty `.mented/`, and forgets
    a project whose folder was removed."""
    inner = repo / "services" / "api"
    (inner / ".mented").mkdir(parents=True)
    (inner / ".mented" / "rules.jsonl").write_text('{"action": "git-commit", "text": "api"}\n')
    empty = tmp_path / "empty"
    (empty / ".mented").mkdir(parents=True)
    (empty / ".mented" / "rules.jsonl").write_text("")
    projects = ProjectRules(tmp_path / "data")
    lookup = RuleLookup(store, projects)

    assert [p.root for p in lookup.untrusted_projects(str(inner))] == [str(inner), str(repo)]
    projects.projects_of(str(empty))
    assert {why.split(":")[0] for why in projects.untrusted()} == {str(inner), str(repo)}
    (inner / ".mented" / "rules.jsonl").unlink()
    (inner / ".mented").rmdir()
    projects.projects_of(str(inner))
    assert [why.split(":")[0] for why in projects.untrusted()] == [str(repo)]


def test_the_same_line_in_two_projects_is_two_rules(tmp_path: Path) -> None:
    """A rule's id names its project: `rule show` and `history` find the one asked for."""
    line = '{"action": "git-commit", "text": "conventional prefix"}\n'
    ids = []
    for name in ("one", "two"):
        (tmp_path / name / ".mented").mkdir(parents=True)
        (tmp_path / name / ".mented" / "rules.jsonl").write_text(line)
        ids.append(team.read_project(str(tmp_path / name)).rules[0].id)
    assert ids[0] != ids[1]


def test_a_project_larger_than_the_cache_is_still_served(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(team, "MAX_CACHED_BYTES", 1)
    projects = ProjectRules(tmp_path / "data", read_inline=False)  # as the daemon's
    projects.trust(str(repo))
    projects.install(team.read_project(str(repo)))  # what the daemon's read keeps
    assert texts(projects.recall_for_action("git-commit", agent=None, cwd=str(repo), k=6)) == [
        "conventional prefix, imperative mood"
    ]


def test_a_mented_folder_created_later_is_found_once_the_walk_is_old(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ "This directory is in no project" is believed a few seconds, not until a restart."""
    now = [1000.0]
    monkeypatch.setattr(team.time, "monotonic", lambda: now[0])
    work = tmp_path / "work"
    work.mkdir()
    projects = ProjectRules(tmp_path / "data")
    assert projects.roots_of(str(work)) == ()
    (work / ".mented").mkdir()
    now[0] += team.ROOT_TTL_S + 1
    assert projects.roots_of(str(work)) == (str(work),)


def test_nothing_to_trust_outside_a_project(tmp_path: Path) -> None:
    with pytest.raises(TrustError, match=r"no \.mented/ folder"):
        ProjectRules(tmp_path / "data").trust(str(tmp_path))


def test_the_warm_path_costs_a_few_stat_calls(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    projects = ProjectRules(tmp_path / "data")
    projects.trust(str(repo))
    inside = str(repo / "src")
    projects.recall_for_action("git-commit", agent=None, cwd=inside, k=6)  # cold
    calls: list[str] = []
    real_stat, real_lstat, real_listdir = os.stat, os.lstat, os.listdir
    monkeypatch.setattr(os, "stat", lambda *a, **k: calls.append("stat") or real_stat(*a, **k))
    monkeypatch.setattr(os, "lstat", lambda *a, **k: calls.append("lstat") or real_lstat(*a, **k))
    monkeypatch.setattr(
        os, "listdir", lambda *a, **k: calls.append("listdir") or real_listdir(*a, **k)
    )

    rules = projects.recall_for_action("git-commit", agent=None, cwd=inside, k=6)

    assert texts(rules) == ["conventional prefix, imperative mood"]
    # The working directory (its resolved path is kept while it stats the same: no
    # `realpath`, which is a `lstat` per component), the folder and its one file; no
    # listing, no parsing.
    assert calls == ["stat", "stat", "stat"]


# ------------------------------------------------------------- the daemon


def test_rule_add_team_trust_and_the_hook_marks_the_projects_rules(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    from mented.agents.pretooluse import pretooluse_event

    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    daemon.mentectl("rule", "add", "git-commit", "mine: one line")

    def run_here(*args: str) -> str:
        return daemon.mentectl(*args, cwd=repo).stdout

    out = run_here("rule", "add", "--team", "git-commit", "team: conventional prefix")
    assert f"added a rule for git-commit to {repo}/.mented/rules.jsonl" in out
    line = json.loads((repo / ".mented" / "rules.jsonl").read_text())
    assert line == {"action": "git-commit", "text": "team: conventional prefix"}

    def hook(session: str) -> bytes:
        event = pretooluse_event("git commit -m x", cwd=str(repo), session=session)
        with daemon.client() as client:
            return client.hook("claude-code", event)

    assert b"team: conventional prefix" not in hook("s1")  # not trusted yet
    assert "NOT SERVED" in daemon.mentectl("status").stdout

    assert "trusted 1 rule in" in run_here("trust")

    answer = hook("s2")
    assert b"mine: one line" in answer
    assert b"(the project's) team: conventional prefix" in answer
    listed = daemon.mentectl("rule", "list", "--action", "git-commit", "--cwd", str(repo)).stdout
    assert "[the project's: .mented/]" in listed
    # Every rule that applies there, not only one action's: yours and the project's.
    everything = daemon.mentectl("rule", "list", "--cwd", str(repo)).stdout
    assert "team: conventional prefix" in everything
    assert "mine: one line" in everything
    elsewhere = daemon.mentectl("rule", "list", "--cwd", str(repo.parent)).stdout
    assert "team: conventional prefix" not in elsewhere
    explained = daemon.mentectl("explain", "--cwd", str(repo), "git commit -m x").stdout
    assert "[the project's: .mented/]" in explained
    assert "NOT SERVED" not in daemon.mentectl("status").stdout


def test_untrusted_project_rules_are_named_to_the_user_once_per_session(
    store: Store, repo: Path, tmp_path: Path
) -> None:
    projects = ProjectRules(tmp_path / "data")
    config = Config()
    handler = HookHandler(
        RuleLookup(store, projects), Matcher(load_action_table(config)), config, None
    )

    def commit(agent: str, session: str, n: int) -> bytes:
        event = pretooluse_event(
            "git commit -m x", cwd=str(repo / "src"), session=session, tool_use_id=f"t{n}"
        )
        return handler.handle(agent, event)

    first = json.loads(commit("claude-code", "s1", 1))
    # To the user, not the model: no rule text, and the project's rules are not handed over.
    assert set(first) == {"systemMessage"}
    assert f"mentectl trust {repo}" in first["systemMessage"]
    assert commit("claude-code", "s1", 2) == b""  # once per session
    assert "systemMessage" in json.loads(commit("claude-code", "s2", 3))
    assert commit("codex", "s3", 4) == b""  # Codex shows hooks' messages to no one
    projects.trust(str(repo))
    assert "conventional prefix" in commit("claude-code", "s4", 5).decode()
    assert b"systemMessage" not in commit("claude-code", "s5", 6)


def test_a_project_rule_is_found_by_its_handle_after_a_restart(repo: Path, tmp_path: Path) -> None:
    projects = ProjectRules(tmp_path / "data")
    (rule, _) = projects.trust(str(repo)).rules
    handle = rule.id[-8:].lower()
    # A new daemon has met no project yet: the trusted ones are looked in.
    found = ProjectRules(tmp_path / "data").find_rule(f"[{handle}]")
    assert found is not None
    project, same = found
    assert same.id == rule.id
    assert project.file_of(same) == f"{repo}/.mented/rules.jsonl"
    assert ProjectRules(tmp_path / "data").find_rule("zzzzzzzz") is None


def test_project_rules_are_not_offered_for_superseding_and_their_handles_name_their_file(
    daemon: DaemonProcess, repo: Path
) -> None:
    daemon.mentectl("rule", "add", "git-commit", "mine: one line")
    before = daemon.mentectl("rule", "list", "--cwd", str(repo))
    assert "conventional prefix" not in before.stdout
    assert f"note: 2 project rules in {repo}/.mented/ are not trusted, so not used" in before.stderr
    assert f"run `mentectl trust {repo}`" in before.stderr
    explained = daemon.mentectl("explain", "--cwd", str(repo), "git commit -m x").stdout
    assert f"2 project rules in {repo}/.mented/ are not trusted" in explained
    assert f"`mentectl trust {repo}`" in explained

    daemon.mentectl("trust", str(repo))
    after = daemon.mentectl("rule", "list", "--cwd", str(repo))
    assert "conventional prefix" in after.stdout
    assert "not trusted" not in after.stderr

    event = pretooluse_event("git commit -m x", cwd=str(repo), session="s1")
    with daemon.client() as client:
        text = text_of_answer(client.hook("claude-code", event)) or ""
    handle = text.split("] (the project's) conventional prefix")[0].rsplit("[", 1)[1]
    assert text.index("mine: one line") < text.index("conventional prefix")
    assert "the newest wins" not in text
    assert "when two conflict, the one listed first wins" in text
    assert "is not superseded that way: it is committed in the repository's `.mented/`" in text

    where = (
        f"is a project rule from {repo}/.mented/rules.jsonl: edit that file (shared with the team)"
    )
    shown = daemon.mentectl("rule", "show", handle)
    assert "conventional prefix" in shown.stdout
    assert f"this is a project rule from {repo}/.mented/rules.jsonl: edit that file" in shown.stdout
    for verb in (["supersede", handle, "new text"], ["forget", handle], ["history", handle]):
        refused = daemon.mentectl("rule", *verb, check=False)
        assert refused.returncode == 1
        assert where in refused.stderr
        assert "(project_rule)" in refused.stderr
    # The rule is untouched: it still reaches the agent.
    again = pretooluse_event("git commit -m x", cwd=str(repo), session="s2")
    with daemon.client() as client:
        assert "conventional prefix" in (text_of_answer(client.hook("claude-code", again)) or "")
