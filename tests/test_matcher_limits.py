"""The matcher's caps: nesting, length, heredoc bodies, shell strings."""

from __future__ import annotations

import json

import pytest

from mented.actions import load_action_table
from mented.config import Config
from mented.git_aliases import Aliases
from mented.matcher import MAX_COMMAND_CHARS, MAX_SHELL_DEPTH, Matcher


@pytest.fixture(scope="module")
def matcher() -> Matcher:
    return Matcher(load_action_table(Config()))


def test_shell_strings_are_followed_to_a_bounded_depth(matcher: Matcher) -> None:
    command = "git push"
    for _ in range(MAX_SHELL_DEPTH):
        command = "bash -c " + json.dumps(command)
    assert matcher.actions_in(command) == ("git-push",)
    deeper = matcher.explain("bash -c " + json.dumps(command))
    assert deeper.actions == ()
    assert any("nested over" in command.reason for command in deeper.commands)


def test_a_git_alias_that_runs_itself_is_followed_to_the_same_depth(matcher: Matcher) -> None:
    # `git loop` with `loop = !git loop`: the hook must still answer, saying where it
    # stopped, as for nested `bash -c` strings (not "internal error", not a hang).
    aliases = Aliases.of({"loop": "!git loop", "p1": "!git p2", "p2": "!git push"})
    assert matcher.actions_in("git p1", aliases=aliases) == ("git-push",)
    explanation = matcher.explain("git loop", aliases=aliases)
    assert explanation.actions == ()
    assert not any("internal error" in note for note in explanation.notes)
    reasons = [command.reason for command in explanation.commands]
    assert reasons.count("the alias runs a shell command: analyzed below") == MAX_SHELL_DEPTH
    assert reasons[-1] == f"command strings nested over {MAX_SHELL_DEPTH} deep are not analyzed"


def test_a_command_of_exactly_the_cap_is_analyzed_as_given(matcher: Matcher) -> None:
    command = "git push; echo " + "x" * (MAX_COMMAND_CHARS - len("git push; echo "))
    assert len(command) == MAX_COMMAND_CHARS
    explanation = matcher.explain(command)
    assert explanation.actions == ("git-push",)
    assert explanation.too_long is None
    assert not any("heredoc" in note for note in explanation.notes), explanation.notes


def test_an_overlong_command_is_not_analyzed_and_says_so(matcher: Matcher) -> None:
    explanation = matcher.explain("git push; " + "x" * MAX_COMMAND_CHARS)
    assert explanation.actions == ()
    assert explanation.parser == "none"
    assert "not analyzed" in explanation.notes[0]


def test_heredoc_bodies_are_left_out_of_a_command_over_the_cap(matcher: Matcher) -> None:
    body = "- fixed a thing\n" * (MAX_COMMAND_CHARS // 10)
    command = f"git commit -F - <<'MSG'\nfeat: release\n{body}MSG\ngit push"
    assert len(command) > MAX_COMMAND_CHARS
    explanation = matcher.explain(command)
    assert explanation.actions == ("git-commit", "git-push")
    assert explanation.too_long is None
    assert any("heredoc bodies (data) left out" in note for note in explanation.notes)
    assert matcher.actions_in(command) == ("git-commit", "git-push")
    assert matcher.too_long(command) is None
    # Inside a substitution, and with `<<-`, too.
    nested = f'git commit -m "$(cat <<-EOF\n{body}\tEOF\n)"'
    assert matcher.actions_in(nested) == ("git-commit",)
    # `<<` inside quotes opens no heredoc: nothing is left out, and it stays too long.
    quoted = f"echo '<<MSG'\n{body}MSG\ngit push"
    assert matcher.actions_in(quoted) == ()
    assert matcher.too_long(quoted) == len(quoted)
    refused = matcher.explain(quoted)
    assert refused.too_long == len(quoted)
    assert "not analyzed" in refused.notes[0]


def test_explain_shows_a_rewritten_word_as_the_command_gave_it(matcher: Matcher) -> None:
    command = "git commit -m \"$(cat <<'MSG'\nfeat: x\nMSG\n)\" && echo $((1+2))"
    explanation = matcher.explain(command)
    assert explanation.parser == "bashlex"
    assert explanation.commands[0].words == (
        "git",
        "commit",
        "-m",
        "$(cat <<'MSG'\nfeat: x\nMSG\n)",
    )
    assert explanation.commands[-1].words == ("echo", "$((1+2))")


def test_deep_nesting_is_skipped_not_crashed(matcher: Matcher) -> None:
    explanation = matcher.explain("git push && echo " + "$(" * 3000 + "git tag v1" + ")" * 3000)
    assert explanation.actions == ("git-push",)
    assert any("nested" in note for note in explanation.notes)


def test_a_long_command_uses_the_fallback_and_still_finds_actions(matcher: Matcher) -> None:
    # It takes 10-20 ms of the 50 ms budget; a full collection of the test run's heap
    # falling inside it (40 ms here) is not charged to it (mented.cputime).
    explanation = matcher.explain("echo " + "word " * 3000 + "&& git commit -m x")
    assert explanation.parser == "fallback"
    assert explanation.actions == ("git-commit",)


def test_a_command_with_a_large_heredoc_is_parsed_by_bashlex(matcher: Matcher) -> None:
    body = "some text with `git push` and $(npm publish) in it\n" * 2000
    explanation = matcher.explain(f"cat > notes.md <<'EOF'\n{body}EOF\ngit commit -m x")
    assert explanation.parser == "bashlex"
    assert explanation.actions == ("git-commit",)
