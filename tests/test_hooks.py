"""HookHandler: an agent's event in, the exact stdout bytes out, with a real store."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from mented import hooks
from mented.actions import load_action_table
from mented.agents.pretooluse import pretooluse_event
from mented.config import Config, DeliverySettings, HookSettings
from mented.hooks import HookHandler
from mented.matcher import Matcher
from mented.memory import MemoryType, short_handle
from mented.sessions import SessionMemory
from mented.store import Store


def make_matcher(config: Config) -> Matcher:
    return Matcher(load_action_table(config))


COMMIT = 'git -c commit.gpgsign=false commit -m "fix: x"'


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(tmp_path / "data", sync=False)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def sessions(tmp_path: Path) -> Iterator[SessionMemory]:
    opened = SessionMemory(tmp_path / "sessions", ttl_s=3600)
    try:
        yield opened
    finally:
        opened.close()


def delivery_of(default: str = "before", **actions: str) -> DeliverySettings:
    return DeliverySettings(default=default, actions=actions)  # type: ignore[arg-type]


def handler_for(
    store: Store,
    sessions: SessionMemory | None = None,
    *,
    delivery: DeliverySettings | None = None,
    **settings: Any,
) -> HookHandler:
    """A handler on the default config but for `settings`; `context` delivery unless given."""
    config = Config(hook=HookSettings(**settings), delivery=delivery or delivery_of("context"))
    return HookHandler(store, make_matcher(config), config, sessions)


def rule(store: Store, action: str, text: str, **scope: Any) -> str:
    memory = store.store(
        text, memory_type=MemoryType.PROCEDURAL, tags=[f"trigger:{action}"], **scope
    )
    return memory.id


_use_ids = iter(range(1_000_000))


def event(
    command: str = COMMIT,
    *,
    tool: str = "Bash",
    session: str | None = "session-1",
    cwd: str = "/home/u/repo",
    tool_use_id: str | None = None,
    **extra: Any,
) -> bytes:
    """A PreToolUse event as Claude Code sends it (a fresh tool_use_id each call)."""
    return pretooluse_event(
        command,
        cwd=cwd,
        session=session,
        tool_use_id=tool_use_id or f"toolu_{next(_use_ids):06d}",
        tool_name=tool,
        **extra,
    )


def context_of(out: bytes) -> str:
    """The additionalContext of a context answer, checking nothing else is in it."""
    doc = json.loads(out)
    assert list(doc) == ["hookSpecificOutput"]
    specific = doc["hookSpecificOutput"]
    assert set(specific) == {"hookEventName", "additionalContext"}
    assert specific["hookEventName"] == "PreToolUse"
    text: str = specific["additionalContext"]
    return text


def deny_reason_of(out: bytes) -> str:
    doc = json.loads(out)
    assert list(doc) == ["hookSpecificOutput"]
    specific = doc["hookSpecificOutput"]
    assert set(specific) == {"hookEventName", "permissionDecision", "permissionDecisionReason"}
    assert specific["permissionDecision"] == "deny"
    reason: str = specific["permissionDecisionReason"]
    return reason


# ------------------------------------------------------------------- context


def test_commit_rules_come_back_newest_first_with_handles(store: Store) -> None:
    older = rule(store, "git-commit", "commit messages: single line")
    newer = rule(store, "git-commit", "no emojis in commit messages")
    rule(store, "pr-create", "PR titles follow the commit convention")
    text = context_of(handler_for(store).handle("claude-code", event(COMMIT)))
    # Context reaches Claude Code's model after the command ran: the words say so.
    assert text.startswith("The command that just ran falls under the user's rules")
    assert "If it broke one, correct it." in text
    assert "about to run" not in text
    assert "Rules for git-commit (record changes to the repository):" in text
    assert "the newest wins" in text
    assert f"[{short_handle(newer)}] no emojis" in text
    assert text.index(short_handle(newer)) < text.index(short_handle(older))
    assert "PR titles" not in text


def test_codex_gets_the_same_shape(store: Store) -> None:
    rule(store, "git-commit", "commit messages: single line")
    text = context_of(handler_for(store).handle("codex", event(COMMIT)))
    assert "single line" in text


@pytest.mark.parametrize(
    ("agent", "payload"),
    [
        ("claude-code", event("git log --oneline -3")),
        ("claude-code", event("", tool="Bash")),
        ("claude-code", event(tool_input={"command": None})),
        ("claude-code", event(COMMIT, tool="Edit")),
        ("claude-code", event(COMMIT, hook_event_name="PostToolUse")),
        ("claude-code", b'"not an object"'),
        ("claude-code", b"{not json"),
        ("claude-code", b""),
        ("claude-code", b'{"tool_name": "Bash", "tool_input": "git commit"}'),
        ("claude-code", b'{"tool_name": "Bash", "tool_input": {"command": 42}}'),
        ("claude-code", b'{"tool_name": "Bash", "extra": ' + b"[" * 5000 + b"]" * 5000 + b"}"),
        ("no-such-agent", event(COMMIT)),
    ],
    ids=[
        "no-action",
        "empty-command",
        "null-command",
        "edit-tool",
        "post-tool-use",
        "json-string",
        "invalid-json",
        "empty",
        "tool-input-not-object",
        "command-not-string",
        "nested-too-deeply",
        "unknown-agent",
    ],
)
def test_silence_when_there_is_nothing_to_say(store: Store, agent: str, payload: bytes) -> None:
    rule(store, "git-commit", "commit messages: single line")
    assert handler_for(store).handle(agent, payload) == b""


def test_a_commit_without_rules_is_silent_but_logged(store: Store) -> None:
    rule(store, "pr-create", "PR titles follow the commit convention")
    handler = handler_for(store)
    assert handler.handle("claude-code", event(COMMIT)) == b""
    (fire,) = handler.recent_fires(10)
    assert (fire.actions, fire.rule_ids, fire.mode) == (["git-commit"], [], "none")
    assert handler.last_fire is None


def test_several_actions_give_one_section_each(store: Store, sessions: SessionMemory) -> None:
    rule(store, "git-commit", "commit messages: single line")
    rule(store, "pr-create", "PR titles follow the commit convention")
    text = deny_reason_of(
        handler_for(store, sessions, delivery=delivery_of()).handle(
            "claude-code", event("git commit -m x && gh pr create --fill")
        )
    )
    assert text.count("Rules for ") == 2
    assert text.index("single line") < text.index("PR titles")
    assert "Rules for the git commit you are about to run (git-commit:" in text
    assert "Rules for the pull request you are about to open (pr-create:" in text


def test_the_words_for_an_action_come_from_the_table_and_the_users_config(
    store: Store, sessions: SessionMemory
) -> None:
    rule(store, "docker-push", "tag images with the git sha")
    rule(store, "deploy", "deploy on weekdays only")
    config = Config(
        actions={
            "docker-push": {"phrase": "the image you are about to ship"},
            "deploy": {"shapes": [{"program": "make", "subcommand": ["deploy"]}]},
        }
    )
    handler = HookHandler(store, make_matcher(config), config, sessions)
    text = deny_reason_of(handler.handle("claude-code", event("docker push app:1 && make deploy")))
    assert "Rules for the image you are about to ship (docker-push:" in text
    # An action without a phrase is named after itself.
    assert "Rules for the deploy you are about to run (deploy):" in text


def test_k_limits_rules_per_action(store: Store) -> None:
    ids = [rule(store, "git-commit", f"rule number {n}") for n in range(5)]
    text = context_of(handler_for(store, k=2).handle("claude-code", event(COMMIT)))
    assert [short_handle(i) in text for i in ids] == [False, False, False, True, True]


def test_the_size_cap_drops_whole_old_rules_and_says_so(store: Store) -> None:
    for n in range(6):
        rule(store, "git-commit", f"rule {n}: " + "x" * 300)
    text = context_of(handler_for(store, max_context_chars=1400).handle("claude-code", event()))
    assert len(text) <= 1400
    assert "rule 5: " in text  # the newest survives
    assert "rule 0: " not in text
    kept = sum(f"rule {n}: " + "x" * 300 in text for n in range(6))
    assert f"{6 - kept} older rules for `git-commit` left out" in text


def test_a_cap_too_small_for_any_heading_is_silence(store: Store) -> None:
    rule(store, "git-commit", "commit messages: single line")
    assert handler_for(store, max_context_chars=20).handle("claude-code", event()) == b""


def test_agent_and_project_scopes_are_honoured(store: Store, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    rule(store, "git-commit", "codex-only rule", agent="codex")
    rule(store, "git-commit", "claude-only rule", agent="claude-code")
    rule(store, "git-commit", "project rule", project=str(project))
    handler = handler_for(store)
    inside = context_of(handler.handle("claude-code", event(cwd=str(project / "src"))))
    assert "claude-only rule" in inside
    assert "project rule" in inside
    assert "codex-only rule" not in inside
    outside = context_of(handler.handle("codex", event(cwd=str(tmp_path / "elsewhere"))))
    assert "codex-only rule" in outside
    assert "project rule" not in outside
    assert "claude-only rule" not in outside


def test_a_superseded_rule_is_gone_from_the_next_fire(store: Store) -> None:
    old = rule(store, "git-commit", "squash merges")
    handler = handler_for(store)
    assert "squash merges" in context_of(handler.handle("claude-code", event()))
    store.supersede(old, "rebase, never squash")
    text = context_of(handler.handle("claude-code", event()))
    assert "rebase, never squash" in text
    assert "squash merges" not in text


# -------------------------------------------------------------------- dedupe


def test_the_same_event_twice_answers_once(store: Store) -> None:
    rule(store, "git-commit", "commit messages: single line")
    handler = handler_for(store)
    same = event(tool_use_id="toolu_same")
    assert handler.handle("claude-code", same) != b""
    assert handler.handle("claude-code", same) == b""
    assert handler.handle("claude-code", event()) != b""  # another call of the same command


def test_dedupe_expires(store: Store) -> None:
    rule(store, "git-commit", "commit messages: single line")
    handler = handler_for(store, dedupe_seconds=0)
    same = event(tool_use_id="toolu_same")
    assert handler.handle("claude-code", same) != b""
    assert handler.handle("claude-code", same) != b""


def test_dedupe_memory_does_not_hold_whole_commands(store: Store) -> None:
    rule(store, "git-commit", "commit messages: single line")
    handler = handler_for(store)
    # Distinct huge commands, each remembered for de-duplication (the bound is 1024).
    commands = [f"git commit -m '{n} {'x' * 64_000}'" for n in range(100)]
    events = [event(command) for command in commands]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for payload in events:
            assert handler.handle("claude-code", payload) != b""
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 1_000_000  # holding the commands would be 6.4 MB
    assert handler.handle("claude-code", events[0]) == b""  # still remembered


def test_dedupe_memory_is_bounded(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hooks, "MAX_RECENT_EVENTS", 3)
    rule(store, "git-commit", "commit messages: single line")
    handler = handler_for(store)
    first = event(tool_use_id="toolu_first")
    assert handler.handle("claude-code", first) != b""
    for _ in range(3):
        handler.handle("claude-code", event())
    assert handler.handle("claude-code", first) != b""  # forgotten: the memory holds 3


def test_the_action_is_described_as_the_table_in_force_describes_it(
    store: Store, sessions: SessionMemory
) -> None:
    rule(store, "git-commit", "commit messages: single line")
    handler = handler_for(store, sessions, delivery=delivery_of())
    text = deny_reason_of(handler.handle("claude-code", event(session="a")))
    assert (
        "the git commit you are about to run (git-commit: record changes to the repository)" in text
    )
    config = Config(actions={"git-commit": {"description": "a commit to our monorepo"}})
    handler.reconfigure(make_matcher(config), config)
    assert "(git-commit: a commit to our monorepo)" in deny_reason_of(
        handler.handle("claude-code", event(session="b"))
    )


# ----------------------------------------------------------------- fire log


def test_fires_are_logged_newest_first_with_why(store: Store) -> None:
    rule_id = rule(store, "git-commit", "commit messages: single line")
    handler = handler_for(store)
    handler.handle("claude-code", event("git commit -m one", session="s", cwd="/r"))
    handler.handle("codex", event("git commit -m two"))
    newest, oldest = handler.recent_fires(5)
    assert newest.command == "git commit -m two"
    assert newest.agent == "codex"
    assert (oldest.agent, oldest.session, oldest.cwd) == ("claude-code", "s", "/r")
    assert (oldest.actions, oldest.rule_ids, oldest.mode) == (["git-commit"], [rule_id], "context")
    assert (oldest.delivery, oldest.full_ids, oldest.why) == ("full", [rule_id], hooks.WHY_CONTEXT)
    assert oldest.chars > len("commit messages: single line")
    assert oldest.latency_us > 0
    assert handler.last_fire == newest
    assert handler.recent_fires(1) == [newest]
    assert handler.recent_fires(0) == []
    msgspec.json.encode(handler.recent_fires(5))  # travels in a LogReply


def test_commands_without_actions_are_not_logged(store: Store) -> None:
    handler = handler_for(store)
    handler.handle("claude-code", event("ls -la"))
    assert handler.recent_fires(5) == []


def test_fire_log_is_bounded(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hooks, "FIRE_LOG_SIZE", 4)
    rule(store, "git-commit", "commit messages: single line")
    handler = handler_for(store)
    for n in range(10):
        handler.handle("claude-code", event(f"git commit -m {n}"))
    assert [f.command for f in handler.recent_fires(100)] == [
        f"git commit -m {n}" for n in (9, 8, 7, 6)
    ]


# -------------------------------------------------------------------- faults


def test_a_failing_store_means_silence(store: Store) -> None:
    class BrokenStore:
        def recall_for_action(self, *args: Any, **kwargs: Any) -> list[Any]:
            raise RuntimeError("disk on fire")

    config = Config()
    handler = HookHandler(BrokenStore(), make_matcher(config), config)  # type: ignore[arg-type]
    assert handler.handle("claude-code", event()) == b""
    assert handler.handle("claude-code", event()) == b""
