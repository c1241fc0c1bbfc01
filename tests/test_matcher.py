"""The matcher end to end: which actions a shell command performs, and why."""

from __future__ import annotations

import faulthandler
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mented.actions import load_action_table
from mented.config import Config
from mented.matcher import MAX_COMMAND_CHARS, Matcher
from tests.matcher_helpers import FUZZ_MATCHER, assert_well_formed

DATA = Path(__file__).parent / "data"


def rows(name: str) -> list[Any]:
    lines = (DATA / name).read_text(encoding="utf-8").splitlines()
    return [pytest.param(row, id=row["command"][:60]) for row in map(json.loads, lines)]


@pytest.fixture(scope="module")
def matcher() -> Matcher:
    return Matcher(load_action_table(Config()))


@pytest.mark.parametrize("row", rows("commands.jsonl"))
def test_acceptance_row(matcher: Matcher, row: dict[str, Any]) -> None:
    assert list(matcher.actions_in(row["command"])) == row["actions"], row.get("why", "")


@pytest.mark.parametrize("row", rows("more_commands.jsonl"))
def test_more_commands_row(matcher: Matcher, row: dict[str, Any]) -> None:
    assert list(matcher.actions_in(row["command"])) == row["actions"], row.get("why", "")


# Commands agents really run that were missed (issue 14), with look-alikes that do not act.
@pytest.mark.parametrize("row", rows("agent_commands.jsonl"))
def test_agent_commands_row(matcher: Matcher, row: dict[str, Any]) -> None:
    assert list(matcher.actions_in(row["command"])) == row["actions"], row.get("why", "")


# ------------------------------------------------------------------ explanations


def test_explain_names_each_simple_command_with_its_program_and_shape(matcher: Matcher) -> None:
    explanation = matcher.explain("cd repo && /usr/bin/git -C . push --force origin main")
    assert explanation.actions == ("git-push", "git-push-force")
    assert explanation.parser == "bashlex"
    cd, push = explanation.commands
    assert cd.words == ("cd", "repo")
    assert cd.matches == ()
    assert "cd" in cd.reason
    assert push.program == "git"
    assert [m.action for m in push.matches] == ["git-push", "git-push-force"]
    assert push.matches[1].shape.startswith("git push (with one of -f, --force")


def test_explain_says_why_a_shape_did_not_match(matcher: Matcher) -> None:
    (command,) = matcher.explain("git tag --list 'v1*'").commands
    assert command.matches == ()
    assert "git-tag" in command.reason
    assert "--list" in command.reason


def test_explain_shows_the_wrappers_peeled(matcher: Matcher) -> None:
    explanation = matcher.explain("sudo -u deploy bash -lc 'nice -n 5 git push'")
    outer, inner = explanation.commands
    assert outer.program == "bash"
    assert "command string" in outer.reason
    assert inner.via == ("sudo", "bash -c", "nice")
    assert inner.program == "git"
    assert explanation.actions == ("git-push",)


def test_explain_reports_the_fallback_parser(matcher: Matcher) -> None:
    explanation = matcher.explain("case $x in push) git push;; esac")
    assert explanation.actions == ("git-push",)
    assert explanation.parser == "fallback"
    assert explanation.fallback_used
    assert any("fallback" in note for note in explanation.notes)
    assert all(command.parser == "fallback" for command in explanation.commands)


def test_explain_notes_the_rewrites_made_for_bashlex(matcher: Matcher) -> None:
    explanation = matcher.explain("git commit -F- <<'EOF'\ngh pr create\nEOF")
    assert explanation.parser == "bashlex"
    assert explanation.actions == ("git-commit",)
    assert any("heredoc" in note for note in explanation.notes)


def test_the_program_of_an_expansion_is_unknown(matcher: Matcher) -> None:
    (command,) = matcher.explain('"$GIT" push').commands
    assert command.program is None
    assert "only known when the command runs" in command.reason


# ------------------------------------------------------------------ fuzzing

SHELL_ALPHABET = st.sampled_from(
    [
        *"abcgitpushcommt -=_/.~*?!#%:{}[],+",
        *("'", '"', "\\", "$", "`", "(", ")", "<", ">", "|", "&", ";", "\n", "\t"),
        *("$(", "$((", "<<", "<<'EOF'", "EOF", "EOF)", "[[", "]]", "${", "&&", "||", ";;"),
        *("case ", " in ", "for ", " do ", " done", "a=(", "$'", "<(", "((", "))"),
        *("git ", "push", "commit", "bash -c ", "sudo ", "eval ", "time ", "xargs ", "\x00", "é"),
    ]
)


@settings(
    max_examples=300,
    deadline=timedelta(seconds=10),  # a hang guard only, not a speed assertion
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.one_of(st.text(max_size=300), st.lists(SHELL_ALPHABET, max_size=200).map("".join)))
def test_random_input_never_raises(command: str) -> None:
    with hang_guard():
        explanation = FUZZ_MATCHER.explain(command)
    assert_well_formed(explanation)


ADVERSARIAL = {
    "1 MB word": "x" * (1 << 20),
    "1 MB of commands": "git push; " * (1 << 17),
    "just under the cap": "echo '" + "a " * (MAX_COMMAND_CHARS // 2 - 8),
    "thousands of nested $(": "$(" * 5000 + "git push" + ")" * 5000,
    "thousands of unclosed $(": "echo $(" * 5000,
    "thousands of nested backticks": "`" * 9999,
    "thousands of subshells": "(" * 5000 + "git push" + ")" * 5000,
    "unbalanced quotes": "'\"" * 20000,
    "many heredocs": "cat " + "<<EOF " * 5000 + "\n" + "x\n" * 1000,
    "many $((": "$((" * 10000,
    "many [[": "[[ " * 10000,
    "many arrays": "a=(" * 10000,
    "many ${": "${" * 10000,
    "many wrappers": "sudo env nice " * 5000 + "git push",
    "many evals": "eval " * 20000 + "git push",
    "nested bash -c": "bash -c '" * 1000,
    # Over the cap: read once for heredocs (their bodies are data) within the budgets.
    "a heredoc per line over the cap": "cat <<E\nx\nE\n" * 60000,
    "1 MB of <<": "<<" * (1 << 19),
    "thousands of heredocs over the cap": "cat " + "<<EOF " * 30000 + "\n" + "x\n" * 100000,
    "a long heredoc never closed": "cat <<EOF\n" + "x\n" * 100000 + "git push",
}


@pytest.mark.parametrize("command", list(ADVERSARIAL.values()), ids=list(ADVERSARIAL))
@settings(deadline=timedelta(seconds=10))
@given(prefix=st.sampled_from(["", "git push && ", "echo '"]))
def test_adversarial_input_completes(command: str, prefix: str) -> None:
    with hang_guard():
        explanation = FUZZ_MATCHER.explain(prefix + command)
    assert_well_formed(explanation)


@contextmanager
def hang_guard(seconds: float = 20) -> Iterator[None]:
    """End the whole test run, with a traceback, if the matcher hangs.

    A deadline only fails an example after it returns; a parser stuck in a loop
    (bashlex once grew a list for ever on an unclosed `${`) would never return and
    would eat the machine's memory meanwhile.
    """
    faulthandler.dump_traceback_later(seconds, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
