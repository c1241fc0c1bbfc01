"""HookHandler: an agent's event in, the exact stdout bytes out, with a real store."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import msgspec
import pytest

from mented import handover, hooks
from mented.actions import load_action_table
from mented.agents.pretooluse import pretooluse_event
from mented.config import Config, DeliverySettings, HookSettings
from mented.hooks import HookHandler
from mented.matcher import Matcher
from mented.memory import MemoryType, short_handle
from mented.sessions import MAX_RULES_PER_SESSION, SessionKey, SessionMemory, SessionMemoryError
from mented.store import Store


def make_matcher(config: Config) -> Matcher:
    return Matcher(load_action_table(config))


COMMIT = 'git -c commit.gpgsign=false commit -m "fix: x"'


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
    new, _ = store.supersede(old, "rebase, never squash")
    text = context_of(handler.handle("claude-code", event()))
    # Not a rule any more: only named as the one the new rule replaces.
    replaces = f'(replaces [{short_handle(old)}] "squash merges")'
    assert f"- [{short_handle(new.id)}] {replaces} rebase" in text
    assert text.count("squash merges") == 1
    assert f"- [{short_handle(old)}]" not in text


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
    # An hour: "still remembered" below must not depend on how fast a busy machine
    # gets through 100 huge commands (the default 5 s passed under load).
    handler = handler_for(store, dedupe_seconds=3600)
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


# ------------------------------------------------- delivery: before the action, once


def stopping(store: Store, sessions: SessionMemory, **settings: Any) -> HookHandler:
    """A handler on the default delivery (`before`)."""
    return handler_for(store, sessions, delivery=delivery_of(), **settings)


def test_by_default_the_first_matching_command_is_stopped_once_then_passes(
    store: Store, sessions: SessionMemory
) -> None:
    rule_id = rule(store, "git-commit", "commit messages: single line")
    handler = stopping(store, sessions)
    reason = deny_reason_of(handler.handle("claude-code", event(session="a")))
    assert "single line" in reason
    assert f"[{short_handle(rule_id)}]" in reason
    assert "before it ran" in reason
    assert "Run it again once it follows them" in reason
    # The retry: nothing more (the model read the rules one turn ago).
    assert handler.handle("claude-code", event(session="a")) == b""
    # Every later commit of the session: one short line, never a stop.
    for _ in range(5):
        pointer = context_of(handler.handle("claude-code", event(session="a")))
        assert len(pointer) <= 120
        assert "single line" not in pointer
        assert f"[{short_handle(rule_id)}]" in pointer
        assert "git-commit" in pointer
    # Another session is stopped once too.
    assert "single line" in deny_reason_of(handler.handle("claude-code", event(session="b")))
    fires = handler.recent_fires(10)
    assert [(f.mode, f.delivery) for f in reversed(fires)] == [
        ("stop", "full"),
        ("none", "none"),
        *[("context", "pointer")] * 5,
        ("stop", "full"),
    ]
    assert fires[-1].why == hooks.WHY_NEW
    assert fires[-2].why == hooks.WHY_RETRY
    assert fires[1].why == hooks.WHY_HANDED


def test_a_session_handed_thousands_of_versions_still_records_the_newest(
    store: Store, sessions: SessionMemory
) -> None:
    # Past MAX_RULES_PER_SESSION versions in one session, the newest must still be
    # recorded: otherwise every later commit is stopped again for the same rule.
    handler = stopping(store, sessions)
    key = SessionKey("claude-code", "long")
    sessions.add(key, [f"earlier-{n}" for n in range(MAX_RULES_PER_SESSION)])
    rule_id = rule(store, "git-commit", "commit messages: single line")
    assert "single line" in deny_reason_of(handler.handle("claude-code", event(session="long")))
    assert handler.handle("claude-code", event(session="long")) == b""  # the retry
    later = context_of(handler.handle("claude-code", event("git commit -m 2", session="long")))
    assert later == (
        "mented: the rules shown earlier still apply to this command: "
        f"git-commit [{short_handle(rule_id)}]."
    )


def test_the_full_text_goes_once_per_session(store: Store, sessions: SessionMemory) -> None:
    for n in range(6):
        rule(store, "git-commit", f"rule {n}: " + "x" * 200)
    handler = stopping(store, sessions)
    outputs = [handler.handle("claude-code", event(session="s")) for _ in range(10)]
    full = deny_reason_of(outputs[0])
    assert outputs[1] == b""  # the retry of the stopped commit
    pointers = [context_of(out) for out in outputs[2:]]
    assert all(len(p) <= 120 for p in pointers)
    assert sum(len(p) for p in pointers) + len(full) <= len(full) + 9 * 120
    assert handler.chars_per_session() == (len(full) + sum(len(p) for p in pointers), 1)


def test_commands_that_do_not_perform_the_action_are_not_stopped(
    store: Store, sessions: SessionMemory
) -> None:
    rule(store, "git-push", "push only to your fork")
    rule(store, "git-commit", "commit messages: single line")
    handler = stopping(store, sessions)
    for command in ("git push --dry-run origin main", 'echo "git commit"', "ls -la"):
        assert handler.handle("claude-code", event(command)) == b""


def test_a_new_rule_goes_alone_and_a_superseding_one_names_the_rule_it_replaces(
    store: Store, sessions: SessionMemory
) -> None:
    kept = rule(store, "git-commit", "commit messages: single line")
    old = rule(store, "git-commit", "squash before merging")
    handler = stopping(store, sessions)
    deny_reason_of(handler.handle("claude-code", event()))
    assert handler.handle("claude-code", event()) == b""  # the retry
    new, _ = store.supersede(old, "rebase, never squash")
    reason = deny_reason_of(handler.handle("claude-code", event()))
    assert (
        f"[{short_handle(new.id)}] (replaces [{short_handle(old)}]) rebase, never squash" in reason
    )
    assert "squash before merging" not in reason
    assert "single line" not in reason  # the session has it
    assert "shown earlier in this session still apply" in reason
    added = rule(store, "git-commit", "sign your commits")
    reason = deny_reason_of(handler.handle("claude-code", event()))
    assert "sign your commits" in reason
    assert "replaces" not in reason
    assert "rebase, never squash" not in reason
    assert handler.handle("claude-code", event()) == b""  # the retry
    pointer = context_of(handler.handle("claude-code", event("git commit -m next")))
    assert all(short_handle(i) in pointer for i in (kept, new.id, added))
    assert short_handle(old) not in pointer
    assert handler.recent_fires(1)[0].why == hooks.WHY_HANDED


def test_a_superseding_rule_names_the_old_one_by_its_first_words_to_a_session_never_given_it(
    store: Store, sessions: SessionMemory
) -> None:
    # The model may know the old rule from elsewhere (it superseded it itself through
    # the MCP tool, or read it in a rules file): it must be able to tell it is void.
    old = rule(store, "git-commit", "squash before merging, " + "and more words " * 20)
    handler = stopping(store, sessions)
    deny_reason_of(handler.handle("claude-code", event(session="saw-it")))
    new, _ = store.supersede(old, "rebase, never squash")
    fresh = deny_reason_of(handler.handle("claude-code", event(session="new")))
    head = f'- [{short_handle(new.id)}] (replaces [{short_handle(old)}] "squash before merging,'
    assert head in fresh
    quoted = fresh.split(head)[1].split('")')[0]
    assert quoted.endswith("…")  # the first words only, cut between words
    assert len('"squash before merging,' + quoted + '"') <= handover.MAX_REPLACED_WORDS + 2
    assert '…") rebase, never squash' in fresh
    assert "shown earlier in this session" not in fresh
    # The one that did: the reference.
    seen = deny_reason_of(handler.handle("claude-code", event(session="saw-it")))
    assert f"- [{short_handle(new.id)}] (replaces [{short_handle(old)}]) rebase" in seen


def test_context_delivery_never_stops_and_says_the_command_ran(
    store: Store, sessions: SessionMemory
) -> None:
    rule(store, "git-commit", "commit messages: single line")
    rule(store, "pr-create", "PR titles follow the commit convention")
    handler = handler_for(
        store, sessions, delivery=delivery_of("before", **{"git-commit": "context"})
    )
    text = context_of(handler.handle("claude-code", event("git commit -m x")))
    assert text.startswith("The command that just ran")
    assert "single line" in text
    assert len(context_of(handler.handle("claude-code", event("git commit -m x")))) <= 120
    # pr-create keeps the default: stopped once.
    reason = deny_reason_of(handler.handle("claude-code", event("gh pr create --fill")))
    assert "PR titles" in reason


def test_no_session_id_means_context_every_time_and_never_a_stop(
    store: Store, sessions: SessionMemory
) -> None:
    rule(store, "git-commit", "commit messages: single line")
    handler = stopping(store, sessions)
    for _ in range(3):
        assert "single line" in context_of(handler.handle("claude-code", event(session=None)))
    assert {f.why for f in handler.recent_fires(3)} == {hooks.WHY_NO_SESSION}


def test_without_a_session_memory_nothing_is_ever_stopped(store: Store) -> None:
    rule(store, "git-commit", "commit messages: single line")
    handler = handler_for(store, None, delivery=delivery_of())
    assert "single line" in context_of(handler.handle("claude-code", event()))
    assert handler.recent_fires(1)[0].why == hooks.WHY_NO_MEMORY


def test_a_memory_that_fails_to_record_means_context_not_a_stop(
    store: Store, sessions: SessionMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    rule(store, "git-commit", "commit messages: single line")
    handler = stopping(store, sessions)

    def broken(*args: Any) -> None:
        raise SessionMemoryError("cannot write the session memory: disk on fire")

    monkeypatch.setattr(sessions, "add", broken)
    for _ in range(2):
        text = context_of(handler.handle("claude-code", event()))
        assert text.startswith("The command that just ran")
    assert handler.recent_fires(1)[0].why == hooks.WHY_NO_MEMORY


def test_a_daemon_restart_does_not_stop_the_same_rules_again(store: Store, tmp_path: Path) -> None:
    rule(store, "git-commit", "commit messages: single line")
    first = SessionMemory(tmp_path / "sessions", ttl_s=3600)
    deny_reason_of(stopping(store, first).handle("claude-code", event()))
    first.close()
    again = SessionMemory(tmp_path / "sessions", ttl_s=3600)
    try:
        pointer = context_of(stopping(store, again).handle("claude-code", event()))
    finally:
        again.close()
    assert "single line" not in pointer


def test_compacting_the_context_hands_the_rules_over_again(
    store: Store, sessions: SessionMemory
) -> None:
    rule(store, "git-commit", "commit messages: single line")
    handler = stopping(store, sessions)
    deny_reason_of(handler.handle("claude-code", event(session="s")))
    assert handler.handle("claude-code", event(session="s")) == b""  # the retry
    for source, forgets in (("resume", False), ("startup", False), ("compact", True)):
        started = {"hook_event_name": "SessionStart", "session_id": "s", "source": source}
        assert handler.handle("claude-code", json.dumps(started).encode()) == b""
        out = handler.handle("claude-code", event("git commit -m other", session="s"))
        assert ("permissionDecision" in json.loads(out)["hookSpecificOutput"]) == forgets
    context_of(handler.handle("claude-code", event(session="s")))
    cleared = {"hook_event_name": "SessionStart", "session_id": "s", "source": "clear"}
    handler.handle("codex", json.dumps(cleared).encode())  # another agent's session: kept
    context_of(handler.handle("claude-code", event(session="s")))
    handler.handle("claude-code", json.dumps(cleared).encode())
    deny_reason_of(handler.handle("claude-code", event(session="s")))


def test_a_stop_that_could_not_be_sent_does_not_count_as_handed_over(
    store: Store, sessions: SessionMemory
) -> None:
    rule(store, "git-commit", "commit messages: single line")
    handler = stopping(store, sessions, max_context_chars=200)
    assert handler.handle("claude-code", event()) == b""  # not even a heading fits
    assert handler.recent_fires(1)[0].why == hooks.WHY_TOO_LONG
    config = Config(delivery=delivery_of())
    handler.reconfigure(make_matcher(config), config)
    assert "single line" in deny_reason_of(handler.handle("claude-code", event()))


def test_an_answer_nobody_read_hands_nothing_over(store: Store, sessions: SessionMemory) -> None:
    # Issue 22, item 4: the daemon could only send the stop after the shim gave up.
    rule(store, "git-commit", "commit messages: single line")
    pinned = store.store("we use uv, never pip", tags=["pinned"])
    handler = stopping(store, sessions)
    call = hooks.decode_event("claude-code", event())
    late = handler.answer_decoded("claude-code", call)
    assert "single line" in deny_reason_of(late.out)
    late.dropped()
    fire = handler.recent_fires(1)[0]
    assert (fire.mode, fire.delivery, fire.why) == ("none", "none", hooks.WHY_LATE)
    assert handler.last_fire is None
    assert handler.chars_per_session() == (None, 0)
    # The same command again is not "the retry of the stop": the rules come in full.
    assert "single line" in deny_reason_of(handler.handle("claude-code", event()))
    assert handler.handle("claude-code", event()) == b""  # now its retry passes
    # A session start whose pinned rules were read by nobody gets them the next time.
    start = msgspec.json.encode(
        {"session_id": "s-pin", "hook_event_name": "SessionStart", "source": "startup"}
    )
    unread = handler.answer_decoded("claude-code", hooks.decode_event("claude-code", start))
    assert pinned.content.encode() in unread.out
    unread.dropped()
    assert pinned.content.encode() in handler.handle("claude-code", start)
    assert handler.handle("claude-code", start) == b""  # handed over once it was sent


def test_an_answer_sent_in_time_counts_once_sent(store: Store, sessions: SessionMemory) -> None:
    rule(store, "git-commit", "commit messages: single line")
    handler = stopping(store, sessions)
    answer = handler.answer_decoded("claude-code", hooks.decode_event("claude-code", event()))
    assert handler.recent_fires(1) == []  # not logged before it went out
    answer.sent()
    answer.dropped()  # once settled, settled: nothing withdrawn
    assert handler.recent_fires(1)[0].mode == "stop"
    assert handler.handle("claude-code", event()) == b""  # the retry of the stop


def test_rules_left_out_for_room_do_not_stop_the_command_again(
    store: Store, sessions: SessionMemory
) -> None:
    for n in range(6):
        rule(store, "git-commit", f"rule {n}: " + "x" * 300)
    handler = stopping(store, sessions, max_context_chars=1400)
    reason = deny_reason_of(handler.handle("claude-code", event()))
    assert "left out" in reason
    assert handler.handle("claude-code", event()) == b""  # the retry
    pointer = context_of(handler.handle("claude-code", event("git commit -m 2")))
    # A pointer naming the rules (all six: those left out were told of), not a stop.
    assert pointer.startswith("mented: the rules shown earlier still apply to this command: ")
    assert len(pointer) <= 120
    assert "git-commit [" in pointer
    assert pointer.endswith(("].", " …"))
    fire = handler.recent_fires(3)[2]
    assert 0 < len(fire.full_ids) < len(fire.rule_ids) == 6


def test_reconfigure_switches_delivery(store: Store, sessions: SessionMemory) -> None:
    rule(store, "git-commit", "commit messages: single line")
    handler = handler_for(store, sessions)
    context_of(handler.handle("claude-code", event(session="a")))
    config = Config(delivery=delivery_of("before"))
    handler.reconfigure(make_matcher(config), config)
    deny_reason_of(handler.handle("claude-code", event(session="b")))


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


def test_the_fire_log_keeps_only_a_cut_of_each_event_field(store: Store) -> None:
    rule(store, "git-commit", "commit messages: single line")
    handler = handler_for(store)
    huge = "s" * 1_000_000
    handler.handle(
        "claude-code", event("git commit -m '" + "m" * 100_000 + "'", session=huge, cwd="/" + huge)
    )
    (fire,) = handler.recent_fires(1)
    assert fire.session is not None
    assert fire.cwd is not None
    assert len(fire.session) < 200
    assert len(fire.cwd) < 1100
    assert len(fire.command) < 1100
    assert fire.session.endswith("more characters)")
    assert len(msgspec.json.encode(fire)) < 4000


# ------------------------------------------------------- MCP tools and file edits


def test_an_mcp_tool_that_opens_a_pull_request_gets_the_pr_rules(
    store: Store, sessions: SessionMemory
) -> None:
    rule(store, "pr-create", "PR titles follow the commit convention")
    rule(store, "git-commit", "commit messages: single line")
    handler = stopping(store, sessions)
    payload = event(tool="mcp__github__create_pull_request", tool_input={"title": "x", "body": "y"})
    reason = deny_reason_of(handler.handle("claude-code", payload))
    assert reason.startswith("mented stopped this tool call once")
    assert "PR titles" in reason
    assert "single line" not in reason
    (fire,) = handler.recent_fires(1)
    assert fire.command == "MCP tool github/create_pull_request"
    assert fire.actions == ["pr-create"]
    # The same rules through `gh pr create` later in the session: the session has them.
    assert len(context_of(handler.handle("claude-code", event("gh pr create --fill")))) <= 120
    reading = event(tool="mcp__github__list_pull_requests", tool_input={})
    assert handler.handle("claude-code", reading) == b""


def test_an_edit_under_migrations_gets_the_migration_rules(
    store: Store, sessions: SessionMemory, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    rule(store, "db-migration", "migrations are append-only; never edit an applied one")
    config = Config(
        delivery=delivery_of(),
        actions={"db-migration": {"description": "change the schema", "paths": ["migrations/"]}},
    )
    handler = HookHandler(store, make_matcher(config), config, sessions)
    edit = event(
        tool="Edit",
        cwd=str(repo),
        tool_input={"file_path": str(repo / "db/migrations/0042.sql"), "old_string": "a"},
    )
    reason = deny_reason_of(handler.handle("claude-code", edit))
    assert reason.startswith("mented stopped this file edit once")
    assert "append-only" in reason
    other = event(tool="Write", cwd=str(repo), tool_input={"file_path": "src/app.py"})
    assert handler.handle("claude-code", other) == b""


def test_a_git_alias_of_the_users_gets_the_rules_of_what_it_runs(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text("[alias]\n\tci = commit -v\n")
    rule(store, "git-commit", "commit messages: single line")
    handler = handler_for(store)
    assert "single line" in context_of(
        handler.handle("claude-code", event("git ci -m x", cwd=str(repo)))
    )
    # Elsewhere `git ci` is nothing git knows: no rules.
    assert handler.handle("claude-code", event("git ci -m y", cwd=str(tmp_path))) == b""


# ------------------------------------------------------------ over-long commands


def test_a_long_heredoc_commit_still_fires_and_a_command_over_the_cap_is_logged(
    store: Store,
) -> None:
    from mented.matcher import MAX_COMMAND_CHARS

    rule(store, "git-commit", "commit messages: single line")
    handler = handler_for(store)
    body = "a line of the release notes\n" * (MAX_COMMAND_CHARS // 20)
    long_heredoc = (
        f"cat > NOTES.md <<'MSG'\n{body}MSG\ngit add NOTES.md && git commit -m 'docs: notes'"
    )
    assert len(long_heredoc) > MAX_COMMAND_CHARS
    text = context_of(handler.handle("claude-code", event(long_heredoc)))
    assert "commit messages: single line" in text
    assert handler.recent_fires(1)[0].actions == ["git-commit"]

    too_long = "echo " + "y " * (MAX_COMMAND_CHARS // 2) + "&& git commit -m x"
    assert handler.handle("claude-code", event(too_long, session="session-2")) == b""
    (fire,) = handler.recent_fires(1)
    assert fire.why == (
        f"not analyzed: {len(too_long)} characters (without heredoc bodies), over the cap "
        f"of {MAX_COMMAND_CHARS}: no action could be named"
    )
    assert fire.actions == []
    assert fire.delivery == "none"
    assert len(fire.command) < 1100  # cut for the log

    # A command that fits once its heredoc bodies are left out, and names no action,
    # is analyzed: nothing to log.
    handler.handle("claude-code", event(f"cat <<'MSG'\n{body}MSG\n", session="session-3"))
    assert handler.recent_fires(1)[0] is fire
