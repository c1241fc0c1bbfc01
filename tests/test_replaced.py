"""A rule that supersedes another names it, however it was superseded (mented.replaced).

Each way a rule gets superseded, in process: the MCP tool `supersede_rule` (its
code, against the daemon's request handler), a sync from another machine, `mentectl
import`, a project's committed file; then what the hook hands over, to a session
that was handed the old rule (its handle) and to one that was not (its handle and
first words) -- never a rule the caller may not see, never a forgotten rule's text.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import trio

from mented.memory import Memory, MemoryType, new_id, short_handle
from mented.portable import export_store, import_streamed, memory_line
from mented.protocol import Request
from mented.replaced import MAX_CHAIN, first_words
from mented.store import Store
from mented.sync import GitSync
from mented.team import ProjectRules, RuleLookup
from mented_client.mcp_server.rule_tools import add_supersede_rule
from tests.test_hooks import deny_reason_of, event, rule, stopping

if TYPE_CHECKING:
    from collections.abc import Callable

    from mented.sessions import SessionMemory

OLD = (
    "Merge PRs with squash, then delete the branch, then tell the reviewers, then close "
    "the issue it fixes"
)
NEW = "Merge PRs with rebase, never squash"


def replaces(old: str, words: str | None = None) -> str:
    said = f' "{words}"' if words else ""
    return f"(replaces [{short_handle(old)}]{said}) "


def handed_then_superseded(
    store: Store, sessions: SessionMemory, supersede: Callable[[str], str]
) -> tuple[str, str, str, str]:
    """A session handed the old rule, then `supersede` (old id -> new id); what a
    commit then shows that session ("saw-it") and a new one ("new")."""
    old = rule(store, "git-commit", OLD)
    handler = stopping(store, sessions)
    assert OLD in deny_reason_of(handler.handle("claude-code", event(session="saw-it")))
    assert handler.handle("claude-code", event(session="saw-it")) == b""  # the retry
    new = supersede(old)
    seen = deny_reason_of(handler.handle("claude-code", event(session="saw-it")))
    fresh = deny_reason_of(handler.handle("claude-code", event(session="new")))
    return old, new, seen, fresh


def check_named(old: str, new: str, seen: str, fresh: str) -> None:
    """The session that has the old rule: its handle; the other: its first words too."""
    assert f"- [{short_handle(new)}] {replaces(old)}{NEW}" in seen
    assert "Merge PRs with squash" not in seen
    words = first_words(OLD)
    assert words.startswith("Merge PRs with squash, then") and words.endswith("…")
    assert f"- [{short_handle(new)}] {replaces(old, words)}{NEW}" in fresh
    assert fresh.count("Merge PRs with squash") == 1  # only as the rule it replaces
    assert f"- [{short_handle(old)}]" not in fresh


# ------------------------------------------------------------- each way in


class ToolCatcher:
    """Stands for the MCP server: keeps the tool function a module registers."""

    def __init__(self) -> None:
        self.tools: dict[str, Callable[..., Any]] = {}

    def tool(self, **_: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def keep(function: Callable[..., Any]) -> Callable[..., Any]:
            self.tools[function.__name__] = function
            return function

        return keep


async def test_a_rule_the_model_superseded_with_the_mcp_tool_names_the_one_it_replaces(
    short_tmp: Path,
) -> None:
    # The tool's own code, its requests answered by the daemon's handler in process.
    from mented.server import Server, ServerOptions

    server = Server(
        ServerOptions(
            socket_path=short_tmp / "run" / "s.sock",
            data_dir=short_tmp / "data",
            handle_signals=False,
        )
    )
    server.open()
    try:

        class InProcessBridge:
            def request(self, message: Request, kind: type[Any], **_: Any) -> Any:
                reply = trio.from_thread.run(server._answer, message)
                assert isinstance(reply, kind), reply
                return reply

        tools = ToolCatcher()
        add_supersede_rule(tools, InProcessBridge())  # type: ignore[arg-type]
        old = rule(server.store, "git-commit", OLD)
        hooks = server.hooks
        assert OLD in deny_reason_of(hooks.handle("claude-code", event(session="saw-it")))
        assert hooks.handle("claude-code", event(session="saw-it")) == b""  # the retry
        result = await trio.to_thread.run_sync(
            lambda: tools.tools["supersede_rule"](rule_id=short_handle(old), new_rule=NEW)
        )
        new = result.new_id
        assert result.old_id == old
        seen = deny_reason_of(hooks.handle("claude-code", event(session="saw-it")))
        # A session that knows the old rule only from the tools (`rules_for_action`):
        fresh = deny_reason_of(hooks.handle("claude-code", event(session="new")))
        check_named(old, new, seen, fresh)
    finally:
        server.close()


def test_a_rule_superseded_with_the_cli_names_the_one_it_replaces(
    store: Store, sessions: SessionMemory
) -> None:
    check_named(
        *handed_then_superseded(store, sessions, lambda old: store.supersede(old, NEW)[0].id)
    )


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_rule_superseded_on_another_machine_names_the_one_it_replaces_after_a_sync(
    tmp_path: Path, sessions: SessionMemory
) -> None:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(remote)], check=True)
    here, there = Store(tmp_path / "here", sync=False), Store(tmp_path / "there", sync=False)
    try:
        syncs = [GitSync(tmp_path / name, timeout_s=30) for name in ("here", "there")]
        for sync in syncs:
            sync.init(str(remote))

        def superseded_there(old: str) -> str:
            syncs[0].sync(here)  # the rule added here reaches the other machine
            syncs[1].sync(there)
            new, _ = there.supersede(old, NEW)
            syncs[1].sync(there)
            syncs[0].sync(here)  # and its new version comes back
            assert here.get(old).superseded_by == new.id
            return new.id

        check_named(*handed_then_superseded(here, sessions, superseded_there))
    finally:
        here.close()
        there.close()


def test_a_rule_superseded_in_an_imported_file_names_the_one_it_replaces(
    store: Store, sessions: SessionMemory, tmp_path: Path
) -> None:
    def imported(old: str) -> str:
        # The user's other store had the same rule and superseded it; they export
        # and `mentectl import` the file here.
        other = Store(tmp_path / "other", sync=False)
        try:
            other.import_records(next(iter(store.export_records())), [])
            new, _ = other.supersede(old, NEW)
            export_store(other, tmp_path / "export.jsonl")
        finally:
            other.close()
        import_streamed(store, tmp_path / "export.jsonl")
        return new.id

    check_named(*handed_then_superseded(store, sessions, imported))


def test_a_project_rule_names_the_version_it_replaces_in_the_same_project(
    store: Store, sessions: SessionMemory, tmp_path: Path
) -> None:
    # A team's `.mented/rules.jsonl` in the portable format, with a rule's new version;
    # another line claims to replace one of the user's own rules: it names nothing.
    repo = tmp_path / "repo"
    (repo / ".mented").mkdir(parents=True)
    mine = rule(store, "git-commit", "my own rule: sign every commit")
    now = time.time()
    team_old = Memory(
        id=new_id(now - 10),
        content=OLD,
        memory_type=MemoryType.PROCEDURAL,
        tags=("trigger:git-push",),
        created_at=now - 10,
    )
    team_new = Memory(
        id=new_id(now),
        content=NEW,
        memory_type=MemoryType.PROCEDURAL,
        tags=("trigger:git-commit",),
        created_at=now,
        supersedes=team_old.id,
    )
    claims = Memory(
        id=new_id(now + 1),
        content="the project's word on commits",
        memory_type=MemoryType.PROCEDURAL,
        tags=("trigger:git-commit",),
        created_at=now,
        supersedes=mine,
    )
    (repo / ".mented" / "rules.jsonl").write_bytes(
        memory_line(team_old) + memory_line(team_new) + memory_line(claims)
    )
    projects = ProjectRules(tmp_path / "data")
    projects.trust(str(repo))
    handler = stopping(RuleLookup(store, projects), sessions)  # type: ignore[arg-type]
    # The user's rule is handed first; the project's claim must not void it.
    reason = deny_reason_of(handler.handle("claude-code", event(session="s", cwd=str(repo))))
    assert f"- [{short_handle(mine)}] my own rule" in reason
    assert f"- [{short_handle(claims.id)}] (the project's) the project's word" in reason
    assert f"replaces [{short_handle(mine)}]" not in reason
    assert (
        f"- [{short_handle(team_new.id)}] {replaces(team_old.id, first_words(OLD))}"
        f"(the project's) {NEW}" in reason
    )
    # Outside the repository, the project's rules are not served at all.
    elsewhere = handler.handle("claude-code", event(session="t", cwd=str(tmp_path)))
    assert "the project's" not in deny_reason_of(elsewhere)


# ---------------------------------------------------- what is never named


def test_a_rule_the_caller_may_not_see_is_never_named(
    store: Store, sessions: SessionMemory, tmp_path: Path
) -> None:
    # Scoped to Codex, superseded by a version for Claude Code (and one moved from
    # one project to another): Claude Code, and a caller in the second project, get
    # the new rule alone -- not the old one's handle, nor its words.
    old = rule(store, "git-commit", OLD, agent="codex")
    new, _ = store.supersede(old, NEW, agent="claude-code")
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    moved_from = rule(store, "git-push", "push to the fork of a", project=str(a))
    moved, _ = store.supersede(moved_from, "push to the fork of b", project=str(b))
    handler = stopping(store, sessions)
    reason = deny_reason_of(handler.handle("claude-code", event(session="s")))
    assert f"- [{short_handle(new.id)}] {NEW}" in reason
    assert short_handle(old) not in reason
    assert "squash" not in reason.replace("never squash", "")
    push = deny_reason_of(handler.handle("claude-code", event("git push", session="p", cwd=str(b))))
    assert f"- [{short_handle(moved.id)}] push to the fork of b" in push
    assert short_handle(moved_from) not in push
    assert "fork of a" not in push


def test_a_forgotten_rule_is_never_quoted(store: Store, sessions: SessionMemory) -> None:
    first = rule(store, "git-commit", "first version of the rule")
    middle, _ = store.supersede(first, "middle version of the rule")
    last, _ = store.supersede(middle.id, NEW)
    store.forget(middle.id)  # linked past: the last version replaces the first
    handler = stopping(store, sessions)
    reason = deny_reason_of(handler.handle("claude-code", event(session="s")))
    assert f"- [{short_handle(last.id)}] {replaces(first, 'first version of the rule')}" in reason
    assert "middle" not in reason
    assert short_handle(middle.id) not in reason
    store.forget(first)
    reason = deny_reason_of(handler.handle("claude-code", event(session="t")))
    assert f"- [{short_handle(last.id)}] {NEW}" in reason
    assert "replaces" not in reason
    assert "first version" not in reason


def test_a_rule_handed_then_superseded_and_forgotten_is_not_said_again(
    store: Store, sessions: SessionMemory
) -> None:
    old = rule(store, "git-commit", OLD)
    handler = stopping(store, sessions)
    deny_reason_of(handler.handle("claude-code", event(session="s")))
    new, _ = store.supersede(old, NEW)
    store.forget(old)  # the new version is linked past it: it replaces nothing now
    reason = deny_reason_of(handler.handle("claude-code", event(session="s")))
    assert f"- [{short_handle(new.id)}] {NEW}" in reason
    assert "Merge PRs with squash" not in reason


# --------------------------------------------------------- chains and checks


def test_a_rule_superseded_twice_since_names_the_version_the_session_has(
    store: Store, sessions: SessionMemory
) -> None:
    old = rule(store, "git-commit", OLD)
    handler = stopping(store, sessions)
    deny_reason_of(handler.handle("claude-code", event(session="s")))
    between, _ = store.supersede(old, "a version this session never saw")
    new, _ = store.supersede(between.id, NEW)
    reason = deny_reason_of(handler.handle("claude-code", event(session="s")))
    assert f"- [{short_handle(new.id)}] {replaces(old)}{NEW}" in reason
    assert "never saw" not in reason


def test_a_long_history_is_walked_no_further_than_its_bound(
    store: Store, sessions: SessionMemory
) -> None:
    old = rule(store, "git-commit", "version 0")
    handler = stopping(store, sessions)
    deny_reason_of(handler.handle("claude-code", event(session="s")))
    current = old
    for n in range(1, MAX_CHAIN + 3):
        current = store.supersede(current, f"version {n}")[0].id
    reason = deny_reason_of(handler.handle("claude-code", event(session="s")))
    # Too far back to find the one handed over: the direct predecessor, by its words.
    assert f"{replaces(store.get(current).supersedes or '', f'version {MAX_CHAIN + 1}')}" in reason
    assert f"version {MAX_CHAIN + 2}" in reason


def test_a_failed_check_hands_the_new_rule_naming_the_one_it_replaces(
    store: Store, sessions: SessionMemory
) -> None:
    old = rule(store, "git-commit", OLD)
    new, _ = store.supersede(old, "Commit subjects are short", checks=["subject max 3"])
    handler = stopping(store, sessions)
    reason = deny_reason_of(handler.handle("claude-code", event(session="s")))
    assert "at most 3" in reason
    assert f"- [{short_handle(new.id)}] {replaces(old, first_words(OLD))}Commit subjects" in (
        reason
    )


def test_first_words_are_one_line_cut_between_words() -> None:
    assert first_words("one\n\ttwo   three") == "one two three"
    assert first_words("word " * 100, limit=12) == "word word…"
    assert first_words("x" * 100, limit=12) == "x" * 11 + "…"
    assert len(first_words("y" * 70_000)) == 60


def test_a_pinned_rule_handed_at_a_session_start_names_the_one_it_replaces(
    store: Store, sessions: SessionMemory
) -> None:
    from tests.test_pinned import handed, handler, pin, session_start

    old = pin(store, "answer in British English")
    hook = handler(store, sessions)
    assert "British" in handed(hook.handle("claude-code", session_start("startup")))
    new, _ = store.supersede(old.id, "answer in American English")
    # Resumed: the session has the old text, the handle is enough.
    resumed = handed(hook.handle("claude-code", session_start("resume")))
    assert f"- [{short_handle(new.id)}] {replaces(old.id)}answer in American English" in resumed
    assert "British" not in resumed
    # Another session never handed it: the handle and the first words.
    other = handed(hook.handle("claude-code", session_start("startup", session="s2")))
    assert f"{replaces(old.id, 'answer in British English')}answer in American" in other
