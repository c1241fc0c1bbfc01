"""The matcher: which actions a shell command performs, and why."""

from __future__ import annotations

import faulthandler
import gc
import hashlib
import json
import os
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import bashlex
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mented import git_aliases
from mented.actions import load_action_table
from mented.config import Config
from mented.cputime import own_cpu_time
from mented.git_aliases import Aliases, GitAliases
from mented.matcher import (
    MATCH_CPU_BUDGET_S,
    MAX_COMMAND_CHARS,
    MAX_SHELL_DEPTH,
    Explanation,
    Matcher,
)

DATA = Path(__file__).parent / "data"


def rows(name: str) -> list[Any]:
    lines = (DATA / name).read_text(encoding="utf-8").splitlines()
    return [pytest.param(row, id=row["command"][:60]) for row in map(json.loads, lines)]


@pytest.fixture(scope="module")
def matcher() -> Matcher:
    return Matcher(load_action_table(Config()))


def matcher_for(actions: dict[str, Any]) -> Matcher:
    return Matcher(load_action_table(Config(path=Path("/cfg/config.toml"), actions=actions)))


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


# ------------------------------------------------------------ the table is data


def test_a_user_action_fires_with_its_own_global_options() -> None:
    matcher = matcher_for(
        {
            "deploy": {
                "description": "roll out",
                "shapes": [
                    {
                        "program": "deployctl",
                        "subcommand": ["apply"],
                        "options_with_value": ["-n", "--namespace"],
                    }
                ],
            }
        }
    )
    assert matcher.actions_in("deployctl -n prod apply -f app.yaml") == ("deploy",)
    assert matcher.actions_in("deployctl -n apply get pods") == ()
    assert matcher.actions_in("deployctl get pods") == ()


def test_a_list_of_alternatives_holding_any_word_takes_any_word() -> None:
    matcher = matcher_for(
        {
            "migrate": {
                "description": "change the schema",
                "shapes": [{"program": "dbctl", "subcommand": [["migrate", "*"], "apply"]}],
            }
        }
    )
    assert matcher.actions_in("dbctl migrate apply") == ("migrate",)
    assert matcher.actions_in("dbctl schema apply") == ("migrate",)
    assert matcher.actions_in("dbctl schema plan") == ()


def test_a_shape_added_to_a_built_in_action_fires_it() -> None:
    matcher = matcher_for(
        {"git-commit": {"shapes": [{"program": "but", "subcommand": ["commit"]}]}}
    )
    assert matcher.actions_in("but commit -m x") == ("git-commit",)
    assert matcher.actions_in("git commit -m x") == ("git-commit",)


def test_a_switched_off_built_in_never_fires() -> None:
    matcher = matcher_for({"docker-push": {"enabled": False}})
    assert matcher.actions_in("docker push app && git push") == ("git-push",)


def test_user_actions_come_after_built_ins_within_one_command() -> None:
    matcher = matcher_for({"any-push": {"shapes": [{"program": "git", "subcommand": ["push"]}]}})
    assert matcher.actions_in("git push -f") == ("git-push", "git-push-force", "any-push")


def test_shape_conditions_from_config() -> None:
    matcher = matcher_for(
        {
            "release-branch": {
                "shapes": [
                    {
                        "program": "git",
                        "subcommand": ["push"],
                        "positional_starts_with": "release/",
                        "no_flag": ["--dry-run", "-n"],
                    }
                ]
            },
            "workspace-add": {
                "shapes": [{"program": "yarn", "subcommand": ["workspace", "*", "add"]}]
            },
        }
    )
    assert "release-branch" in matcher.actions_in("git push origin release/1.2")
    assert "release-branch" not in matcher.actions_in("git push -n origin release/1.2")
    assert "release-branch" not in matcher.actions_in("git push origin main")
    assert matcher.actions_in("yarn workspace web add react") == ("workspace-add",)
    assert matcher.actions_in("yarn workspace web remove react") == ()


# ------------------------------------------------------------------- limits


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


# -------------------------------------------------------------------- cache


def test_a_repeated_command_is_answered_from_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    matcher = Matcher(load_action_table(Config()))
    matched: list[str] = []
    match = matcher._explain

    def counting(command: str, deadline: float | None, **kwargs: Any) -> tuple[Explanation, object]:
        matched.append(command)
        return match(command, deadline, **kwargs)

    monkeypatch.setattr(matcher, "_explain", counting)
    assert matcher.actions_in("git commit -m cached") == ("git-commit",)
    assert matcher.actions_in("git commit -m cached") == ("git-commit",)
    assert matched == ["git commit -m cached"]


def test_the_cache_is_bounded_in_bytes_whatever_the_commands_length() -> None:
    limit = 64 * 1024
    matcher = Matcher(load_action_table(Config()), cache_bytes=limit)
    matcher.actions_in("git push")  # regexes compiled, bashlex warm: not counted
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        # Each 8 KiB long (read by the fallback tokenizer, quickly); each kept as a digest.
        for number in range(600):
            assert matcher.actions_in(f"git push origin {'x' * 8192}{number}") == ("git-push",)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert matcher.cache_bytes <= limit
    # What the cache counts is what it holds: its entries' weight is measured, not guessed.
    assert held <= 1.25 * limit, held


def test_the_cache_keeps_the_most_recently_used() -> None:
    matcher = Matcher(load_action_table(Config()), cache_bytes=3 * 256)
    for command in ("git push a", "git push b", "git push a", "git push c", "git push d"):
        matcher.actions_in(command)
    assert matcher.cache_bytes <= 3 * 256
    hits = {
        command: matcher._cache.get(_digest(command)) is not None
        for command in ("git push a", "git push b", "git push d")
    }
    assert hits == {"git push a": True, "git push b": False, "git push d": True}


def _digest(command: str) -> bytes:
    return hashlib.blake2b(command.encode(), digest_size=16).digest()


# -------------------------------------------------------------- time budget

# Commands that took bashlex from a third of a second to seconds (issue 12): a word of
# backtick substitutions, a chain of redirections, and fifteen `bash -c` strings of them.
HOSTILE = {
    "backticks": '"' + "`x`" * 2700 + '"',
    "redirections": "x" + ">y" * 4000,
    "fifteen bash -c strings": " ; ".join(
        "bash -c " + json.dumps("x" + ">y" * 4000) for _ in range(15)
    ),
    "fifteen bash -c strings of backticks": " ; ".join(
        "bash -c " + json.dumps("`x`" * 2700) for _ in range(15)
    ),
}


@contextmanager
def slow_collections(cpu_s: float) -> Iterator[None]:
    """Every garbage collection takes `cpu_s` of this thread's CPU, as a full one of a
    large heap does (41-126 ms measured in the daemon)."""

    def burn(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            until = time.thread_time() + cpu_s
            while time.thread_time() < until:
                pass

    gc.callbacks.append(burn)
    try:
        yield
    finally:
        gc.callbacks.remove(burn)


def test_a_collection_inside_a_match_does_not_use_up_its_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A collection of 80 ms of CPU landing in bashlex made the match give up at its
    # 50 ms and name no action: that command got no rules.
    matcher = Matcher(load_action_table(Config()), cache_bytes=0)
    parse = bashlex.parse

    def collecting(source: str) -> object:
        with slow_collections(0.080):
            gc.collect()
        return parse(source)

    monkeypatch.setattr(bashlex, "parse", collecting)
    explanation = matcher.explain("git add -A && git commit -m 'fix: x' && git push")
    assert explanation.actions == ("git-commit", "git-push")
    assert explanation.parser == "bashlex"
    assert not any("budget" in note or "bashlex" in note for note in explanation.notes)


def cpu_seconds(call: Callable[[], object]) -> float:
    """The CPU `call` took of this thread, as the budget counts it (collections left out)."""
    started = own_cpu_time()
    call()
    return own_cpu_time() - started


@pytest.mark.parametrize("command", list(HOSTILE.values()), ids=list(HOSTILE))
def test_a_hostile_command_costs_at_most_the_time_budget(command: str) -> None:
    matcher = Matcher(load_action_table(Config()), cache_bytes=0)
    explanation: list[Explanation] = []
    spent = cpu_seconds(lambda: explanation.append(matcher.explain(command)))
    # Cut at the budget, give or take a checkpoint (a few hundred microseconds); the
    # margin is for a busy machine. Unbounded, each took 0.4 to 4 seconds.
    assert spent < 3 * MATCH_CPU_BUDGET_S, spent
    assert_well_formed(explanation[0])
    assert explanation[0].fallback_used
    assert any("time budget" in note or "ms" in note for note in explanation[0].notes)


def test_an_action_before_a_hostile_string_is_still_named() -> None:
    matcher = Matcher(load_action_table(Config()), cache_bytes=0)
    command = "git push; " + HOSTILE["fifteen bash -c strings"]
    assert matcher.actions_in(command) == ("git-push",)


def test_a_passed_deadline_stops_matching_and_is_not_cached() -> None:
    matcher = Matcher(load_action_table(Config()))
    command = "echo " + "word " * 3000 + "&& git push"
    late: list[tuple[str, ...]] = []
    spent = cpu_seconds(lambda: late.append(matcher.actions_in(command, deadline=0.0)))
    assert late == [()]
    assert spent < MATCH_CPU_BUDGET_S
    # The cut answer was not kept: without a deadline the whole command is read.
    assert matcher.actions_in(command) == ("git-push",)
    explanation = matcher.explain(command, deadline=0.0)
    assert any("deadline" in note for note in explanation.notes)


def test_ordinary_commands_are_not_cut() -> None:
    matcher = Matcher(load_action_table(Config()), cache_bytes=0)
    body = "some text with `git push` and $(npm publish) in it\n" * 200
    command = f"git add -A && git commit -F - <<'EOF'\n{body}EOF\ngh pr create --fill"
    explanation = matcher.explain(command)
    assert explanation.actions == ("git-commit", "pr-create")
    assert not any("budget" in note or "deadline" in note for note in explanation.notes)


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


def assert_well_formed(explanation: Explanation) -> None:
    assert isinstance(explanation, Explanation)
    assert set(explanation.actions) <= set(FUZZ_MATCHER.table.names())
    # The matcher turns its own bugs into a note rather than raising: fail on those here.
    assert not any(note.startswith("internal error") for note in explanation.notes)


FUZZ_MATCHER = Matcher(load_action_table(Config()), cache_bytes=0)


# ------------------------------------------------------------------ git aliases


@pytest.fixture
def git_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home with a ~/.gitconfig of aliases, and no system or XDG config in the way."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    (home / ".gitconfig").write_text(
        '[user]\n\tname = x\n[alias]\n\tci = commit -v\n\tpf = "push --force-with-lease"  # mine\n'
        "[include]\n\tpath = ~/.gitaliases\n"
    )
    (home / ".gitaliases").write_text("[alias]\n\tpub = !npm publish\n")
    return home


def test_git_aliases_from_the_users_config_files(
    matcher: Matcher, git_home: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text("[core]\n\tbare = false\n[alias]\n\tsh = push\n")
    (repo / "src").mkdir()
    aliases = GitAliases().for_directory(str(repo / "src"))
    assert matcher.actions_in("git ci -m x", aliases=aliases) == ("git-commit",)
    assert matcher.actions_in("git pf", aliases=aliases) == ("git-push", "git-push-force")
    assert matcher.actions_in("git pub", aliases=aliases) == ("package-publish",)
    assert matcher.actions_in("git sh origin main", aliases=aliases) == ("git-push",)
    # Outside the repository its alias is not in force; the user's still are.
    outside = GitAliases().for_directory(str(tmp_path))
    assert matcher.actions_in("git sh origin main", aliases=outside) == ()
    assert matcher.actions_in("git ci -m x", aliases=outside) == ("git-commit",)
    (step,) = matcher.explain("git ci -m x", aliases=aliases).commands
    assert step.via == ("git alias ci = commit -v",)


def test_git_aliases_are_cached_until_a_config_file_changes(
    git_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    reads: list[Path] = []
    real_read = git_aliases._read

    def counting(path: Path) -> str | None:
        reads.append(path)
        return real_read(path)

    monkeypatch.setattr(git_aliases, "_read", counting)
    lookup = GitAliases()
    first = lookup.for_directory(str(repo))
    assert first.table == {
        "ci": "commit -v",
        "pf": "push --force-with-lease",
        "pub": "!npm publish",
    }
    read_once = len(reads)
    assert lookup.for_directory(str(repo)) is first
    assert len(reads) == read_once  # nothing read again
    # A repository appears (git init), then the user adds an alias to it.
    (repo / ".git").mkdir()
    (repo / ".git" / "config").write_text("[alias]\n\tsh = push\n")
    assert lookup.for_directory(str(repo)).table["sh"] == "push"
    (git_home / ".gitconfig").write_text("[alias]\n\tci = status\n")
    assert lookup.for_directory(str(repo)).table["ci"] == "status"


def test_git_alias_lookup_costs_little_next_to_matching(
    matcher: Matcher, git_home: Path, tmp_path: Path
) -> None:
    # The hook looks the aliases up for every command that mentions git: a cached
    # lookup (a few stats) must stay small next to matching the command itself.
    deep = tmp_path / "repo" / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (tmp_path / "repo" / ".git").mkdir()
    lookup = GitAliases()
    lookup.for_directory(str(deep))
    # CPU time of this thread (its stats' system time included): what each costs,
    # whatever else the machine runs.
    rounds = 300
    started = time.thread_time()
    for _ in range(rounds):
        lookup.for_directory(str(deep))
    lookup_s = (time.thread_time() - started) / rounds
    uncached = Matcher(matcher.table, cache_bytes=0)
    started = time.thread_time()
    for _ in range(rounds):
        uncached.actions_in("git ci -m 'fix the parser' && git push origin HEAD")
    match_s = (time.thread_time() - started) / rounds
    assert lookup_s < match_s * 2, (lookup_s, match_s)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[alias]\n\tco = checkout\n", {"co": "checkout"}),
        (
            '[Alias]\n  LG = "log --graph ; --oneline" ; comment\n',
            {"lg": "log --graph ; --oneline"},
        ),
        ("[alias]\n\tx = one \\\n two\n", {"x": "one  two"}),
        (
            '[alias] st = status\n[alias "sub"]\n\tno = push\n[core]\n\tci = commit\n',
            {"st": "status"},
        ),
        ("[alias]\n\tflag\n", {"flag": "true"}),
    ],
)
def test_git_config_reader(text: str, expected: dict[str, str]) -> None:
    assert git_aliases.parse_config(text)[0] == expected


def test_git_alias_lookup_never_blocks_nor_fails_on_odd_places(
    git_home: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    os.mkfifo(repo / ".git" / "config")  # opened as is, it would block the daemon
    lookup = GitAliases()
    assert lookup.for_directory(str(repo)).table["ci"] == "commit -v"
    assert lookup.for_directory("/" + "s" * 100_000).table["ci"] == "commit -v"
    assert lookup.for_directory("/tmp/a\0b").table["ci"] == "commit -v"


def test_shapes_on_option_values_and_positional_counts_in_the_users_config() -> None:
    matcher = matcher_for(
        {
            "deploy": {
                "description": "deploy",
                "shapes": [
                    {
                        "program": "curl",
                        "any_value": ["-X=POST"],
                        "positional_matches": "*/deploy",
                        "options_with_value": ["-X"],
                    },
                    {"program": "make", "max_positionals": 0},
                ],
            }
        }
    )
    assert matcher.actions_in("curl -X POST https://ci/deploy") == ("deploy",)
    assert matcher.actions_in("curl -X GET https://ci/deploy") == ()
    assert matcher.actions_in("curl -X POST https://ci/status") == ()
    assert matcher.actions_in("make -j4") == ("deploy",)
    assert matcher.actions_in("make test") == ()
    (step,) = matcher.explain("make test").commands
    assert "takes at most 0 positional argument(s), has 1" in step.reason
