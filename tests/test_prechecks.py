"""PreChecks in process: what is kept between commands, and what is never kept."""

from __future__ import annotations

import json
import subprocess
from typing import TYPE_CHECKING

from mented.actions import load_action_table
from mented.config import Config
from mented.fields import fields_in
from mented.hooks import HookHandler
from mented.matcher import Matcher
from mented.memory import short_handle
from tests.test_hooks import event

if TYPE_CHECKING:
    from pathlib import Path

    from mented.sessions import SessionMemory
    from mented.store import Store


def handler(store: Store, sessions: SessionMemory) -> HookHandler:
    config = Config()
    return HookHandler(store, Matcher(load_action_table(config)), config, sessions)


def denied(out: bytes) -> bool:
    return bool(out) and json.loads(out)["hookSpecificOutput"].get("permissionDecision") == "deny"


def test_a_message_file_is_read_again_on_every_attempt(
    store: Store, sessions: SessionMemory, tmp_path: Path
) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    store.store("short", tags=["trigger:git-commit"], checks=["subject max 10"])
    hooks = handler(store, sessions)
    message = tmp_path / "msg.txt"
    message.write_text("fix: a subject far too long\n")
    command = "git commit -F msg.txt"
    assert denied(hooks.handle("claude-code", event(command, cwd=str(tmp_path))))
    message.write_text("fix: short\n")  # the model fixed the file: the same command now passes
    assert not denied(hooks.handle("claude-code", event(command, cwd=str(tmp_path))))


def test_without_rules_that_carry_checks_nothing_is_kept_for_them(
    store: Store, sessions: SessionMemory
) -> None:
    store.store("single line", tags=["trigger:git-commit"])
    hooks = handler(store, sessions)
    matcher = hooks._matcher
    hooks.handle("claude-code", event('git commit -m "fix: x"'))
    assert not matcher.keep_matched
    assert matcher._matched == {}
    store.store("no emoji", tags=["trigger:git-commit"], checks=["message no-emoji"])
    hooks.handle("claude-code", event('git commit -m "fix: y"'))
    assert matcher.keep_matched
    # The next command's one parse serves its actions and its checks.
    hooks.handle("claude-code", event('git commit -m "fix: z 🎉"'))
    assert len(matcher._matched) == 2


def test_an_unusable_check_from_a_file_never_stops(store: Store, sessions: SessionMemory) -> None:
    # As an import or a team file may carry it: the shape is fine, the meaning is not.
    store.store("odd", tags=["trigger:git-commit"], checks=["subject matches (a+)+$"])
    hooks = handler(store, sessions)
    first = hooks.handle("claude-code", event('git commit -m "aaaaaaaaaaaaaaaaaaaaaaaaaaaa!"'))
    assert b"it breaks" not in first


def test_a_check_two_rules_share_is_tested_once_and_named_for_both(
    store: Store, sessions: SessionMemory
) -> None:
    first = store.store(
        "no emoji in commits", tags=["trigger:git-commit"], checks=["message no-emoji"]
    )
    second = store.store(
        "short, no emoji",
        tags=["trigger:git-commit"],
        checks=["message no-emoji", "subject max 50"],
    )
    hooks = handler(store, sessions)
    out = hooks.handle("claude-code", event('git commit -m "fix: login 🎉"'))
    assert denied(out)
    reason = json.loads(out)["hookSpecificOutput"]["permissionDecisionReason"]
    assert "it breaks 2 of the user's rules" in reason
    assert f"[{short_handle(first.id)}]" in reason
    assert f"[{short_handle(second.id)}]" in reason
    assert reason.count("holds 🎉") == 2  # the one failure, said under each rule
    (plan,) = hooks.prechecks._plans.values()
    assert [check.text for check, _ in plan.checks["git-commit"]] == [
        "message no-emoji",
        "subject max 50",
    ]


def test_the_fields_are_read_by_the_shape_the_matcher_matched() -> None:
    table = load_action_table(Config())
    (found,) = Matcher(table).matched_commands('git -C sub commit -m "fix: x" -m body')
    assert found.actions == ("git-commit",)
    (shape,) = found.shapes  # handed over with the words: the fields do not look for it again
    assert shape in [s for action, s in table.shapes_for("git") if action == "git-commit"]
    (fields,) = fields_in(table, [found], ["git-commit"], None)
    assert fields.values["message"] == "fix: x\n\nbody"
