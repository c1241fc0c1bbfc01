"""Pinned rules: the pinned index, the cap, and the SessionStart hook that hands them over."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mented.actions import load_action_table
from mented.agents.pretooluse import text_of_answer
from mented.config import Config, PinnedSettings
from mented.hooks import WHY_NO_PINNED, WHY_PINNED_HANDED, HookHandler
from mented.matcher import Matcher
from mented.memory import InvalidInputError, Memory, MemoryType, short_handle
from mented.pinned import check_cap, over_cap, render_pinned
from mented.sessions import SessionMemory
from mented.store import Store
from tests.test_hooks import event, rule


def pin(store: Store, text: str, **scope: Any) -> Memory:
    return store.store(text, memory_type=MemoryType.PROCEDURAL, tags=["pinned"], **scope)


def candidate(text: str, memory_id: str = "", **scope: Any) -> Memory:
    return Memory(id=memory_id, content=text, tags=("pinned",), created_at=0.0, **scope)


def handler(store: Store, sessions: SessionMemory | None, **pinned: int) -> HookHandler:
    config = Config(pinned=PinnedSettings(**pinned))
    return HookHandler(store, Matcher(load_action_table(config)), config, sessions)


def session_start(
    source: str, session: str | None = "s1", cwd: str = "/home/u/repo", **extra: Any
) -> bytes:
    fields = {"hook_event_name": "SessionStart", "source": source, "cwd": cwd, **extra}
    if session is not None:
        fields["session_id"] = session
    return json.dumps(fields).encode()


def handed(out: bytes) -> str:
    """The additionalContext of a SessionStart answer, checking nothing else is in it."""
    doc = json.loads(out)
    assert doc == {
        "hookSpecificOutput": {
            "hookEventName": "SessionStart",
            "additionalContext": doc["hookSpecificOutput"]["additionalContext"],
        }
    }
    text: str = doc["hookSpecificOutput"]["additionalContext"]
    return text


# ------------------------------------------------------------------ the store


def test_pinned_rules_are_rules_seen_per_scope_newest_first(store: Store) -> None:
    first = pin(store, "answer in British English")
    pin(store, "in this repo, never run the full suite", project="/work/app")
    pin(store, "codex: be terse", agent="codex")
    rule(store, "git-commit", "single line")
    store.store("the staging database is stg-db-2")
    seen = [m.content for m in store.pinned_rules(agent="claude-code", cwd="/work/app/src")]
    assert seen == ["in this repo, never run the full suite", "answer in British English"]
    assert [m.content for m in store.pinned_rules(agent="codex", cwd="/tmp")] == [
        "codex: be terse",
        "answer in British English",
    ]
    # Shown with the other rules, and not with facts.
    rules = store.list(rules_only=True)
    assert {m.content for m in rules} == {
        "answer in British English",
        "in this repo, never run the full suite",
        "codex: be terse",
        "single line",
    }
    # Superseded and forgotten as rules are, with history.
    new, _ = store.supersede(first.id, "answer in British English, with Oxford commas")
    assert "answer in British English" not in [m.content for m in store.pinned_rules()]
    assert [m.content for m in store.history(new.id)] == [
        "answer in British English",
        "answer in British English, with Oxford commas",
    ]
    store.forget(new.id)
    assert len(store.pinned_rules()) == 2


def test_a_tag_spelled_otherwise_still_pins(store: Store) -> None:
    memory = store.store("tabs, not spaces", tags=[" Pinned "])
    assert memory.tags == ("pinned",)
    assert store.pinned_rules() == [memory]


def test_a_store_from_before_pinned_rules_gets_its_index_at_open(tmp_path: Path) -> None:
    store = Store(tmp_path / "data", sync=False)
    memory = pin(store, "answer in British English")
    store.reindex_pinned()
    # As a store made before the pinned index existed: no `pinned` database.
    with store._env.begin(write=True) as txn:
        txn.drop(store._pinned, delete=True)
    store.close()
    again = Store(tmp_path / "data", sync=False)
    try:
        assert again.pinned_rules() == [memory]
    finally:
        again.close()


# -------------------------------------------------------------------- the cap


def test_the_cap_refuses_a_rule_past_the_count_and_says_what_to_do() -> None:
    settings = PinnedSettings(max_rules=2, max_chars=1000)
    existing = [candidate("a", "0" * 26, project="/work/a"), candidate("b", "1" * 26)]
    # Elsewhere than /work/a, a session sees one pinned rule: room for one more.
    check_cap(existing, candidate("c", project="/work/b"), settings)
    with pytest.raises(InvalidInputError) as refused:
        check_cap(existing, candidate("c"), settings)  # in /work/a it would make three
    message = str(refused.value)
    assert "sessions in /work/a 3 pinned rules" in message
    assert "the cap is 2 rules and 1000 characters" in message
    assert "[pinned] in the config file" in message
    assert "action rule instead (`mentectl rule add ACTION TEXT`" in message
    with pytest.raises(InvalidInputError):
        check_cap(existing, candidate("c", project="/work/a/sub"), settings)


def test_the_cap_counts_characters_and_agents_apart() -> None:
    settings = PinnedSettings(max_rules=5, max_chars=100)
    existing = [candidate("x" * 60, "0" * 26, agent="codex")]
    check_cap(existing, candidate("y" * 60, agent="claude-code"), settings)
    with pytest.raises(InvalidInputError, match="for codex 2 pinned rules of 120 characters"):
        check_cap(existing, candidate("y" * 60), settings)
    with pytest.raises(InvalidInputError, match="this pinned rule is 101 characters"):
        check_cap([], candidate("z" * 101), settings)


def test_over_the_cap_a_supersede_goes_through_and_only_a_rise_is_refused() -> None:
    # A sync brought four pinned rules where the cap is two: the way out stays open.
    settings = PinnedSettings(max_rules=2, max_chars=100)
    existing = [candidate(f"rule {n}", str(n) * 26) for n in range(4)]
    check_cap(existing, candidate("rule 0, reworded"), settings, replaced={"0" * 26})
    with pytest.raises(InvalidInputError, match="every session 5 pinned rules"):
        check_cap(existing, candidate("a fifth"), settings)
    # Counted after the change: replacing one rule by a wider one still adds nothing ...
    check_cap(existing, candidate("rule 1 " + "x" * 40), settings, replaced={"1" * 26})
    # ... but characters past the cap that grow are refused.
    long = [candidate("y" * 45, str(n) * 26) for n in range(3)]  # 135 characters
    check_cap(long, candidate("y" * 40), settings, replaced={"0" * 26})
    with pytest.raises(InvalidInputError, match="135 characters"):
        check_cap(long[:2], candidate("y" * 45), settings)
    with pytest.raises(InvalidInputError, match="every session 3 pinned rules of 140"):
        check_cap(long, candidate("y" * 50), settings, replaced={"0" * 26})
    # Settling a fork replaces both of its current versions: the count goes down.
    check_cap(existing, candidate("settled"), settings, replaced={"2" * 26, "3" * 26})


def test_the_cap_at_rule_add_and_at_session_start_agree_at_exactly_the_cap(
    store: Store, sessions: SessionMemory
) -> None:
    # What `rule add` accepts, the session start hands over whole; one more
    # character is refused, not left out later.
    settings = PinnedSettings(max_rules=3, max_chars=100)
    check_cap([], candidate("a" * 100), settings)  # one rule of exactly the cap
    with pytest.raises(InvalidInputError, match="this pinned rule is 101 characters"):
        check_cap([], candidate("a" * 101), settings)
    first = pin(store, "x" * 60)
    second = candidate("y" * 40)
    check_cap(store.pinned_rules(), second, settings)  # 100 together: accepted
    with pytest.raises(InvalidInputError, match="every session 2 pinned rules of 101 characters"):
        check_cap(store.pinned_rules(), candidate("y" * 41), settings)
    pin(store, second.content)
    third = candidate("")  # the count: a third rule is within 3
    with pytest.raises(InvalidInputError):  # ... but not past 100 characters
        check_cap(store.pinned_rules(), candidate("z"), settings)
    rules = store.pinned_rules()
    assert render_pinned(rules, settings).shown_ids == [rule.id for rule in rules]
    text = handed(
        handler(store, sessions, max_rules=3, max_chars=100).handle(
            "claude-code", session_start("startup")
        )
    )
    assert f"[{short_handle(first.id)}] {'x' * 60}" in text
    assert "y" * 40 in text
    assert "left out" not in text
    assert over_cap(rules, settings) == []
    # At exactly max_rules too.
    check_cap(rules, third, PinnedSettings(max_rules=3, max_chars=1000))  # the third of 3
    few = PinnedSettings(max_rules=2, max_chars=1000)
    assert over_cap(rules, few) == []
    with pytest.raises(InvalidInputError, match="every session 3 pinned rules"):
        check_cap(rules, third, few)


def test_over_cap_names_the_sessions_and_the_rules_left_out(store: Store) -> None:
    settings = PinnedSettings(max_rules=2, max_chars=1000)
    assert over_cap([], settings) == []
    for n in range(3):
        pin(store, f"everywhere {n}")
    pin(store, "codex only", agent="codex")
    rules = store.pinned_rules()
    found = over_cap(rules, settings)
    oldest = [rule.id for rule in rules if rule.content == "everywhere 0"]
    for_codex = [rule.id for rule in rules if rule.content in {"everywhere 0", "everywhere 1"}]
    assert [(o.sessions, o.live, o.left_out) for o in found] == [
        ("sessions for codex", 4, for_codex),  # in the order they are handed over
        ("every session", 3, oldest),
    ]
    assert over_cap(rules, PinnedSettings(max_rules=4, max_chars=1000)) == []


def test_render_keeps_within_a_lowered_cap_and_says_what_it_left_out(store: Store) -> None:
    for n in range(4):
        pin(store, f"rule number {n}")
    rules = store.pinned_rules()
    text = render_pinned(rules, PinnedSettings(max_rules=2, max_chars=1000)).text
    assert "rule number 3" in text
    assert "rule number 2" in text
    assert "rule number 1" not in text
    assert "(2 more pinned rules left out by the cap of 2 rules" in text
    assert f"[{short_handle(rules[0].id)}]" in text
    assert render_pinned([], PinnedSettings()).text == ""


# ----------------------------------------------------------- the session start


def test_a_session_start_hands_the_pinned_rules_once(store: Store, sessions: SessionMemory) -> None:
    pin(store, "answer in British English")
    pin(store, "codex only", agent="codex")
    pin(store, "another project", project="/work/other")
    hook = handler(store, sessions)
    text = handed(hook.handle("claude-code", session_start("startup")))
    assert "answer in British English" in text
    assert "codex only" not in text
    assert "another project" not in text
    fire = hook.recent_fires(1)[0]
    assert (fire.mode, fire.delivery, fire.chars) == ("context", "full", len(text))
    # A resumed session (or the same event twice) already has them.
    assert hook.handle("claude-code", session_start("resume")) == b""
    assert hook.recent_fires(1)[0].why == WHY_PINNED_HANDED
    # A rule pinned since reaches it on resume, alone.
    pin(store, "tabs, not spaces")
    text = handed(hook.handle("claude-code", session_start("resume")))
    assert "tabs, not spaces" in text
    assert "British" not in text


@pytest.mark.parametrize("source", ["compact", "clear"])
def test_after_the_context_is_emptied_they_go_again(
    store: Store, sessions: SessionMemory, source: str
) -> None:
    pin(store, "answer in British English")
    rule(store, "git-commit", "single line")
    hook = handler(store, sessions)
    handed(hook.handle("claude-code", session_start("startup")))
    assert "single line" in str(text_of_answer(hook.handle("claude-code", event(session="s1"))))
    assert "single line" not in str(text_of_answer(hook.handle("claude-code", event(session="s1"))))
    assert "British" in handed(hook.handle("claude-code", session_start(source)))
    # The action rules were forgotten too: the next commit gets them in full.
    assert "single line" in str(text_of_answer(hook.handle("claude-code", event(session="s1"))))


def test_no_pinned_rule_is_silence_and_no_session_id_still_hands_them(
    store: Store, sessions: SessionMemory
) -> None:
    hook = handler(store, sessions)
    assert hook.handle("codex", session_start("startup")) == b""
    assert hook.recent_fires(1)[0].why == WHY_NO_PINNED
    pin(store, "answer in British English")
    assert "British" in handed(hook.handle("codex", session_start("startup", session=None)))
    assert "British" in handed(hook.handle("codex", session_start("startup", session=None)))


def test_without_a_session_memory_they_still_go(store: Store) -> None:
    pin(store, "answer in British English")
    hook = handler(store, None)
    assert "British" in handed(hook.handle("claude-code", session_start("startup")))


def test_an_unknown_source_or_a_broken_event_is_silence(
    store: Store, sessions: SessionMemory
) -> None:
    pin(store, "answer in British English")
    hook = handler(store, sessions)
    assert hook.handle("claude-code", session_start("vscode")) == b""
    assert hook.handle("claude-code", b'{"hook_event_name": "SessionStart", "source": 3}') == b""
    assert hook.handle("claude-code", b"not json") == b""


def test_a_store_that_fails_is_silence(store: Store, sessions: SessionMemory) -> None:
    pin(store, "answer in British English")
    hook = handler(store, sessions)
    store.close()
    assert hook.handle("claude-code", session_start("startup")) == b""


# ------------------------------------------------------ Gemini CLI and Copilot CLI


def test_gemini_takes_them_at_startup_and_again_on_resume_and_clear_empties_the_context(
    store: Store, sessions: SessionMemory
) -> None:
    pin(store, "answer in British English")
    rule(store, "git-commit", "single line")
    hook = handler(store, sessions)
    first = hook.handle("gemini-cli", session_start("startup"))
    assert "British" in handed(first)
    # A resumed Gemini session leaves out what the first start handed: all of them again.
    assert hook.handle("gemini-cli", session_start("resume")) == first

    def commit(message: str) -> bytes:
        return json.dumps(
            {
                "hook_event_name": "BeforeTool",
                "session_id": "s1",
                "cwd": "/home/u/repo",
                "tool_name": "run_shell_command",
                "tool_input": {"command": f"git commit -m {message}"},
            }
        ).encode()

    assert "single line" in json.loads(hook.handle("gemini-cli", commit("x")))["reason"]
    # /clear: Gemini CLI 0.61 drops a SessionStart answer there; the context is emptied.
    assert hook.handle("gemini-cli", session_start("clear")) == b""
    assert "single line" in json.loads(hook.handle("gemini-cli", commit("y")))["reason"]


def test_qwen_takes_them_at_startup_and_again_on_resume(
    store: Store, sessions: SessionMemory
) -> None:
    # Qwen Code 0.24.4 adds a SessionStart answer's context to a new chat, and fires
    # "resume" for `--continue`, whose saved history leaves that context out (tried
    # with the real binary: tests/test_real_agents.py).
    pin(store, "answer in British English")
    hook = handler(store, sessions)
    first = hook.handle("qwen-code", session_start("startup"))
    assert "British" in handed(first)
    assert hook.handle("qwen-code", session_start("startup")) == b""  # the same event twice
    assert hook.handle("qwen-code", session_start("resume")) == first


def test_copilot_takes_them_at_the_top_level_and_again_on_resume(
    store: Store, sessions: SessionMemory
) -> None:
    pin(store, "answer in British English")
    rule(store, "git-commit", "single line")
    hook = handler(store, sessions)
    first = json.loads(hook.handle("copilot-cli", session_start("new", initial_prompt="go")))
    assert list(first) == ["additionalContext"]  # Copilot's own shape for this event
    assert "British" in first["additionalContext"]
    assert text_of_answer(json.dumps(first).encode()) == first["additionalContext"]
    assert hook.handle("copilot-cli", session_start("new")) == b""  # the same event twice
    assert "single line" in str(text_of_answer(hook.handle("copilot-cli", event(session="s1"))))
    # A resumed Copilot session has lost the first start's answer: all of them again ...
    again = json.loads(hook.handle("copilot-cli", session_start("resume")))
    assert again == first
    # ... while the action rules it was handed (in tool results, kept) stay handed.
    assert "single line" not in str(text_of_answer(hook.handle("copilot-cli", event(session="s1"))))
    assert "British" in hook.handle("copilot-cli", session_start("startup", session="s2")).decode()
    assert hook.handle("copilot-cli", session_start("compact", session="s3")) == b""
