"""Checks on rules: parsing, refusals, evaluation (mented.checks), and rules that carry them."""

from __future__ import annotations

import itertools
import json
from typing import TYPE_CHECKING

import pytest

from mented.checks import (
    CheckError,
    FieldChecks,
    evaluate,
    parse_check,
    passes,
    passes_value,
    rule_checks,
)
from mented.fields import Fields
from mented.memory import InvalidInputError, trigger_tag
from mented.portable import memory_line, parse_line
from mented.store import check_imported

if TYPE_CHECKING:
    from mented.store import Store
    from tests.conftest import DaemonProcess

CONVENTIONAL = r"subject matches ^(feat|fix|docs|chore|refactor|test)(\(.+\))?!?: "
POST = "Fixed the login bug 🎉\n\nIt was broken\nbadly"


def commit(message: str, flags: tuple[str, ...] = ()) -> Fields:
    fields = Fields("git-commit")
    fields.known("message", message)
    fields.known("subject", message.split("\n", 1)[0])
    fields.known("flags", flags)
    return fields


def outcome(check: str, fields: Fields) -> tuple[bool | None, str]:
    result = evaluate(parse_check(check, ["git-commit"]), fields)
    return result.passed, result.said


def test_the_posts_rule_fails_on_the_posts_commit_and_passes_a_good_one() -> None:
    for check, said in [
        ("message single-line", "the message is 4 lines"),
        (CONVENTIONAL, "does not match"),
        ("message no-emoji", "🎉"),
    ]:
        passed, text = outcome(check, commit(POST))
        assert passed is False
        assert said in text
        assert outcome(check, commit("fix: login bug"))[0] is True


def test_max_says_the_length_and_the_limit_per_line() -> None:
    assert outcome("subject max 72", commit("x" * 84)) == (
        False,
        "the subject is 84 characters; at most 72",
    )
    passed, said = outcome("message max 10", commit("short\n\n" + "y" * 11))
    assert passed is False
    assert "(line 3) is 11 characters" in said
    assert outcome("subject max 72", commit("x" * 72))[0] is True


def test_lines_max_contains_not_matches_and_forbid() -> None:
    assert (
        outcome("message lines-max 2", commit("a\nb\nc"))[1] == "the message has 3 lines; at most 2"
    )
    assert outcome("message contains #", commit("fix: x"))[0] is False
    assert outcome("message contains #", commit("fix: x (#12)"))[0] is True
    passed, said = outcome("subject not-matches WIP", commit("WIP: x"))
    assert passed is False
    assert "matches WIP" in said
    passed, said = outcome("flags forbid --no-verify", commit("x", ("-n", "--no-verify")))
    assert passed is False
    assert "--no-verify" in said
    assert outcome("flags forbid --no-verify", commit("x", ("--amend",)))[0] is True


def test_an_unknown_field_neither_passes_nor_fails() -> None:
    fields = Fields("git-commit")
    fields.not_known("the editor opens to write it", "message", "subject")
    passed, said = outcome("message single-line", fields)
    assert passed is None
    assert "editor" in said


def test_an_offending_value_is_cut_in_the_reason() -> None:
    passed, said = outcome("message no-emoji", commit("🎉" + "z" * 5000))
    assert passed is False
    assert len(said) < 200


@pytest.mark.parametrize(
    ("check", "said"),
    [
        ("subject matchs ^x", "at character 9, 'matchs' is not a kind"),
        ("title max 3", "git-commit has no field 'title'; its fields: message, subject, body"),
        ("subject max many", "at character 13, max needs a whole number"),
        ("subject max 0", "whole number above 0"),
        ("subject matches (a+)+$", "repeats a group that holds another repetition"),
        ("subject matches (x|xy)*z", "alternation"),
        (r"subject matches (a)\1", "back-reference"),
        ("subject matches .*a.*b.*c.*d.*e", "unbounded repetitions"),
        ("subject matches [a-", "at character 17, the regex is wrong"),
        ("subject single-line please", "takes nothing after it"),
        ("message contains", "needs a text"),
        ("flags forbid", "give the flag"),
        ("", "cannot be empty"),
        ("subject max 72\nmessage no-emoji", "control character"),
    ],
)
def test_a_check_that_cannot_be_used_is_refused_saying_where(check: str, said: str) -> None:
    with pytest.raises(CheckError) as caught:
        parse_check(check, ["git-commit"])
    assert said in str(caught.value)


def test_checks_need_an_action_with_fields() -> None:
    with pytest.raises(CheckError, match="has no fields mented knows"):
        rule_checks(["subject max 3"], [trigger_tag("docker-push")])
    with pytest.raises(CheckError, match="pinned rule"):
        rule_checks(["subject max 3"], ["pinned"])
    with pytest.raises(CheckError, match="at most 16 checks"):
        rule_checks(["subject max 3"] * 17, [trigger_tag("git-commit")])
    assert rule_checks(["  subject max 3"], [trigger_tag("git-commit")]) == ("subject max 3",)
    # A regex keeps its trailing blank: `^feat: ` is not `^feat:`.
    kept = rule_checks(["subject matches ^feat: "], [trigger_tag("git-commit")])
    assert kept == ("subject matches ^feat: ",)
    assert outcome(kept[0], commit("feat:x"))[0] is False


def test_the_store_keeps_checks_and_a_new_version_replaces_or_keeps_them(store: Store) -> None:
    rule = store.store(
        "single line", tags=[trigger_tag("git-commit")], checks=["message single-line"]
    )
    assert store.get(rule.id).checks == ("message single-line",)
    same, _ = store.supersede(rule.id, "single line, short", checks=None)
    assert same.checks == ("message single-line",)
    replaced, _ = store.supersede(same.id, "single line, short", checks=["subject max 50"])
    assert replaced.checks == ("subject max 50",)
    with pytest.raises(InvalidInputError, match="nothing changed"):
        store.supersede(replaced.id, "single line, short", checks=["subject max 50"])
    with pytest.raises(InvalidInputError, match="at most 16 checks"):
        store.store("x", tags=[trigger_tag("git-commit")], checks=["subject max 1"] * 17)


def test_export_and_import_carry_checks(store: Store) -> None:
    rule = store.store("short", tags=[trigger_tag("git-commit")], checks=["subject max 50"])
    line = memory_line(store.get(rule.id))
    assert json.loads(line)["checks"] == ["subject max 50"]
    back = parse_line(line.strip(), "test:1")
    assert back is not None
    assert check_imported(back).checks == ("subject max 50",)  # type: ignore[arg-type]
    plain = store.store("no checks", tags=[trigger_tag("git-commit")])
    assert "checks" not in json.loads(memory_line(store.get(plain.id)))


# ------------------------------------------------------------- the CLI, a real daemon


def test_rule_add_check_show_list_and_supersede(daemon: DaemonProcess) -> None:
    added = daemon.mentectl(
        "rule",
        "add",
        "git-commit",
        "commit messages: single line, conventional prefix, no emojis",
        "--check",
        "message single-line",
        "--check",
        CONVENTIONAL,
        "--check",
        "message no-emoji",
        "--json",
    )
    rule_id = json.loads(added.stdout)["id"]
    shown = daemon.mentectl("rule", "show", rule_id).stdout
    assert "check:         message single-line" in shown
    assert "check:         message no-emoji" in shown
    listed = daemon.mentectl("rule", "list", "--action", "git-commit").stdout
    assert "    check: message no-emoji" in listed
    document = json.loads(daemon.mentectl("rule", "show", rule_id, "--json").stdout)
    assert document["checks"][1] == CONVENTIONAL

    new = json.loads(
        daemon.mentectl(
            "rule", "supersede", rule_id, "short subjects", "--check", "subject max 50", "--json"
        ).stdout
    )["id"]
    assert json.loads(daemon.mentectl("rule", "show", new, "--json").stdout)["checks"] == [
        "subject max 50"
    ]
    kept = json.loads(
        daemon.mentectl("rule", "supersede", new, "short subjects!", "--json").stdout
    )["id"]
    assert json.loads(daemon.mentectl("rule", "show", kept, "--json").stdout)["checks"] == [
        "subject max 50"
    ]
    dropped = json.loads(
        daemon.mentectl(
            "rule", "supersede", kept, "short subjects!!", "--no-checks", "--json"
        ).stdout
    )["id"]
    assert json.loads(daemon.mentectl("rule", "show", dropped, "--json").stdout)["checks"] == []


def test_rule_add_refuses_a_bad_check_and_stores_nothing(daemon: DaemonProcess) -> None:
    result = daemon.mentectl(
        "rule", "add", "git-commit", "short", "--check", "title max 50", check=False
    )
    assert result.returncode != 0
    assert "git-commit has no field 'title'; its fields: message, subject" in result.stderr
    result = daemon.mentectl(
        "rule", "add", "git-commit", "x", "--check", "subject matches (a*)*", check=False
    )
    assert "repeats a group" in result.stderr
    assert json.loads(daemon.mentectl("rule", "list", "--json").stdout)["rules"] == []


@pytest.mark.parametrize(
    "check",
    [
        "message single-line",
        "message lines-max 2",
        "message max 10",
        "message no-emoji",
        "message contains fix",
        "message matches ^fix: ",
        "message not-matches WIP",
        "flags forbid --no-verify",
        "trailers lines-max 1",
        "trailers max 12",
        "trailers contains Signed",
        "trailers matches ^[A-Z]",
        "subject no-emoji",
    ],
)
def test_the_hooks_quick_test_agrees_with_the_worded_one(check: str) -> None:
    # The hook tests each check with `passes` and words only the failures (`evaluate`):
    # the two must never disagree, or a stop would come without its reason.
    parsed = parse_check(check, ["git-commit"])
    messages = ["fix: x", "fix: x 🎉", "WIP fix\n\nbody", "a" * 11, "x\ny\nz", "", "é" * 9]
    trailer_sets: list[tuple[str, ...]] = [(), ("Signed-off-by: a",), ("A: b", "c: very long one")]
    for message in messages:
        for flags in [(), ("--no-verify",), ("-a", "--all")]:
            for trailers in trailer_sets:
                fields = commit(message, flags)
                fields.known("trailers", trailers)
                assert passes(parsed, fields) is evaluate(parsed, fields).passed, (
                    check,
                    message,
                    flags,
                    trailers,
                )
    unknown = Fields("git-commit")
    unknown.not_known("the editor opens to write it", "message", "subject", "trailers", "flags")
    assert passes(parsed, unknown) is None


def test_all_the_checks_on_a_field_at_once_agree_with_each_one() -> None:
    # The hook tests every check on a field with one `FieldChecks.all_pass` (lines and
    # lengths counted once): a value fails it exactly when it fails one of the checks,
    # or a command breaking a rule would run unstopped.
    texts = {
        "message": [
            "message single-line",
            "message lines-max 2",
            "message lines-max 3",
            "message max 10",
            "message max 4",
            "message no-emoji",
            "message contains fix",
            "message matches ^fix: ",
            "message not-matches WIP",
        ],
        "trailers": ["trailers lines-max 1", "trailers max 12", "trailers contains Signed"],
        "flags": ["flags forbid --no-verify", "flags forbid -n"],
    }
    values: dict[str, list[str | tuple[str, ...]]] = {
        "message": [
            "fix: x",
            "fix: x 🎉",
            "WIP fix\n\nbody",
            "a" * 11,
            "x\ny\nz",
            "",
            "fix\n" + "b" * 5,
        ],
        "trailers": [(), ("Signed-off-by: a",), ("A: b", "c: very long one")],
        "flags": [(), ("--no-verify",), ("-a", "--all")],
    }
    for name, checks in texts.items():
        parsed = [parse_check(text, ["git-commit"]) for text in checks]
        # Every subset of one, two and all of the field's checks.
        subsets = [[c] for c in parsed] + list(itertools.combinations(parsed, 2)) + [parsed]
        for subset in subsets:
            together = FieldChecks(list(subset))
            for value in values[name]:
                each = all(passes_value(check, value) for check in subset)
                assert together.all_pass(value) is each, ([c.text for c in subset], value)
