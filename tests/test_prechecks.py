"""PreChecks in process: what is kept between commands, and what is never kept."""

from __future__ import annotations

import json
import subprocess
from typing import TYPE_CHECKING

import pytest

from mented.actions import load_action_table
from mented.checks import CheckError, rule_checks
from mented.config import Config, ConfigError
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
    tested = [
        (check.text, rules)
        for _, _, checks, _ in plan.checks["git-commit"]
        for check, rules in checks
    ]
    at = {rule.id: position for position, (_, rule) in enumerate(plan.wanted)}
    assert sorted(tested) == [
        ("message no-emoji", tuple(sorted((at[first.id], at[second.id])))),
        ("subject max 50", (at[second.id],)),
    ]


def test_the_fields_are_read_by_the_shape_the_matcher_matched() -> None:
    table = load_action_table(Config())
    (found,) = Matcher(table).matched_commands('git -C sub commit -m "fix: x" -m body')
    assert found.actions == ("git-commit",)
    (shape,) = found.shapes  # handed over with the words: the fields do not look for it again
    assert shape in [s for action, s in table.shapes_for("git") if action == "git-commit"]
    (fields,) = fields_in(table, [found], ["git-commit"], None)
    assert fields.values["message"] == "fix: x\n\nbody"


DEPLOY = {
    "deploy": {
        "description": "roll out",
        "shapes": [{"program": "shipit", "subcommand": ["apply"]}],
        "fields": {"env": "option -e --env", "service": "positional 1", "flags": "flags"},
    },
    "db-migration": {"paths": ["migrations/"]},
}


def reason_of(out: bytes) -> str:
    return str(json.loads(out)["hookSpecificOutput"].get("permissionDecisionReason", ""))


def test_a_users_action_declares_fields_that_its_rules_check(
    store: Store, sessions: SessionMemory
) -> None:
    config = Config(actions=DEPLOY)
    table = load_action_table(config)
    checks = rule_checks(
        ["env not-matches ^prod$", "service max 8", "flags forbid --force"],
        ["trigger:deploy"],
        table,
    )
    store.store("never deploy to prod by hand", tags=["trigger:deploy"], checks=checks)
    hooks = HookHandler(store, Matcher(table), config, sessions)
    out = hooks.handle("claude-code", event("shipit apply --env prod api"))
    assert denied(out)
    assert "the env 'prod' matches ^prod$" in reason_of(out)
    out = hooks.handle("claude-code", event("shipit apply -e staging a-long-service --force"))
    assert "the service is 14 characters; at most 8" in reason_of(out)
    assert "the command has --force" in reason_of(out)
    assert not denied(hooks.handle("claude-code", event("shipit apply -e staging api")))
    assert not denied(hooks.handle("claude-code", event("shipit apply api")))  # env unknown


def test_a_check_on_a_field_the_action_lacks_is_refused_with_the_fields_it_has() -> None:
    table = load_action_table(Config(actions=DEPLOY))
    with pytest.raises(
        CheckError, match=r"deploy has no field 'message'; its fields: env, service, flags"
    ):
        rule_checks(["message single-line"], ["trigger:deploy"], table)
    with pytest.raises(CheckError, match=r"db-migration has no field 'env'; its fields: path"):
        rule_checks(["env max 3"], ["trigger:db-migration"], table)
    plain = load_action_table(Config(actions={"lint": {"shapes": [{"program": "ruff"}]}}))
    with pytest.raises(CheckError, match=r"action lint has no fields .* declare `fields`"):
        rule_checks(["env max 3"], ["trigger:lint"], plain)
    with pytest.raises(CheckError, match="action deploy has no fields"):  # without the table
        rule_checks(["env max 3"], ["trigger:deploy"])


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ({"shapes": [{"program": "x"}], "fields": {"env": "value of -e"}}, "say how the command"),
        ({"shapes": [{"program": "x"}], "fields": {"Env": "flags"}}, "lower-case word"),
        ({"paths": ["a/"], "fields": {"path": "flags"}}, "not `path`"),
    ],
)
def test_a_declared_field_that_cannot_be_read_is_refused(
    entry: dict[str, object], said: str
) -> None:
    with pytest.raises(ConfigError, match=said):
        load_action_table(Config(actions={"mine": entry}))


def test_a_built_in_action_takes_no_declared_fields() -> None:
    with pytest.raises(ConfigError, match="a built-in action has its own fields"):
        load_action_table(Config(actions={"git-commit": {"fields": {"env": "flags"}}}))


def test_an_edit_is_checked_on_its_path(
    store: Store, sessions: SessionMemory, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    config = Config(actions=DEPLOY)
    table = load_action_table(config)
    checks = rule_checks([r"path not-matches ^legacy/"], ["trigger:db-migration"], table)
    store.store("no new migrations in legacy/", tags=["trigger:db-migration"], checks=checks)
    hooks = HookHandler(store, Matcher(table), config, sessions)
    bad = event(
        tool="Write", cwd=str(repo), tool_input={"file_path": str(repo / "legacy/migrations/1.sql")}
    )
    out = hooks.handle("claude-code", bad)
    assert denied(out)
    assert reason_of(out).startswith("mented stopped this file edit: it breaks a rule")
    assert "the path item 'legacy/migrations/1.sql' matches ^legacy/" in reason_of(out)
    good = event(tool="Write", cwd=str(repo), tool_input={"file_path": "app/migrations/2.sql"})
    assert not denied(hooks.handle("claude-code", good))
    # A shell command of the action (none here) would leave the path unknown: never a stop.
    matched = Matcher(table).matched_commands("shipit apply x")
    (fields,) = fields_in(table, matched, ["deploy"], None)
    assert fields.values["service"] == "x"
