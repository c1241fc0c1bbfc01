"""`mentectl status` and `mentectl rule ...` against a real daemon."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mented.agents.pretooluse import pretooluse_event
from mented.memory import short_handle
from tests.conftest import DaemonProcess


def add(daemon: DaemonProcess, action: str, text: str, *scope: str) -> str:
    out = daemon.mentectl("rule", "add", action, text, *scope, "--json").stdout
    return str(json.loads(out)["id"])


def listed(daemon: DaemonProcess, *args: str) -> list[str]:
    out = daemon.mentectl("rule", "list", *args, "--json").stdout
    return [rule["content"] for rule in json.loads(out)["rules"]]


def test_status_reports_a_running_daemon(daemon: DaemonProcess) -> None:
    result = daemon.mentectl("status")
    assert "running" in result.stdout
    assert str(daemon.socket) in result.stdout
    data = json.loads(daemon.mentectl("status", "--json").stdout)
    assert data["running"] is True
    assert data["pid"] == daemon.proc.pid  # type: ignore[union-attr]
    assert data["protocol"] == 1


def test_status_exits_1_with_one_line_reason_when_not_running(daemon: DaemonProcess) -> None:
    daemon.stop()
    result = daemon.mentectl("status", check=False)
    assert result.returncode == 1
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert "not running" in result.stderr


def test_add_list_supersede_history_forget(daemon: DaemonProcess) -> None:
    first = add(daemon, "git-commit", "single line")
    add(daemon, "pr-create", "draft PRs")
    assert listed(daemon, "--action", "git-commit") == ["single line"]
    assert sorted(listed(daemon)) == ["draft PRs", "single line"]

    out = json.loads(daemon.mentectl("rule", "supersede", first, "two lines", "--json").stdout)
    assert out["superseded"] == first
    assert listed(daemon, "--action", "git-commit") == ["two lines"]
    assert listed(daemon, "--action", "git-commit", "--all") == ["two lines", "single line"]

    history = json.loads(daemon.mentectl("rule", "history", out["id"], "--json").stdout)
    assert [m["content"] for m in history["history"]] == ["single line", "two lines"]

    shown = json.loads(daemon.mentectl("rule", "show", first, "--json").stdout)
    assert shown["superseded_by"] == out["id"]

    daemon.mentectl("rule", "forget", out["id"])
    assert listed(daemon, "--action", "git-commit") == []


def test_list_with_action_is_recall_for_action(daemon: DaemonProcess, tmp_path: Path) -> None:
    app = tmp_path / "app"
    app.mkdir()
    add(daemon, "git-commit", "everyone")
    add(daemon, "git-commit", "codex only", "--agent", "codex")
    add(daemon, "git-commit", "app only", "--project", str(app))
    for n in range(8):
        add(daemon, "git-push", f"push rule {n}")

    as_claude = listed(daemon, "--action", "git-commit", "--agent", "claude-code", "--cwd", "/")
    assert as_claude == ["everyone"]
    in_app = listed(daemon, "--action", "git-commit", "--agent", "codex", "--cwd", str(app / "src"))
    assert in_app == ["app only", "codex only", "everyone"]
    assert len(listed(daemon, "--action", "git-push")) == 6  # k defaults to 6, as the hook
    assert listed(daemon, "--action", "git-push", "-k", "2") == ["push rule 7", "push rule 6"]


def test_errors_go_to_stderr_with_nonzero_exit(daemon: DaemonProcess) -> None:
    bad_action = daemon.mentectl("rule", "add", "git commit", "x", check=False)
    assert bad_action.returncode != 0
    assert "whitespace" in bad_action.stderr
    missing = daemon.mentectl("rule", "show", "01JZZZZZZZZZZZZZZZZZZZZZZZ", check=False)
    assert missing.returncode == 1
    assert missing.stdout == ""
    assert "not_found" in missing.stderr


def test_text_output_is_readable(daemon: DaemonProcess) -> None:
    rule_id = add(daemon, "git-commit", "single line")
    out = daemon.mentectl("rule", "list", "--action", "git-commit").stdout
    assert rule_id in out
    assert "single line" in out
    assert "git-commit" in out


def test_status_is_unhealthy_while_the_config_file_is_invalid(daemon: DaemonProcess) -> None:
    daemon.write_config("[hook]\nk = 'six'\n")
    assert daemon.mentectl("reload", check=False).returncode != 0
    result = daemon.mentectl("status", check=False)
    assert result.returncode == 1
    assert "unhealthy" in result.stderr
    assert str(daemon.config_path) in result.stderr
    assert json.loads(daemon.mentectl("status", "--json", check=False).stdout)["healthy"] is False
    daemon.write_config("[hook]\nk = 3\n")
    daemon.mentectl("reload")
    assert daemon.mentectl("status").returncode == 0


def test_socket_and_json_work_before_or_after_the_verb(daemon: DaemonProcess) -> None:
    env_free = {k: v for k, v in daemon.env.items() if k != "MENTED_SOCKET"}
    for argv in (
        ["--socket", str(daemon.socket), "--json", "status"],
        ["status", "--json", "--socket", str(daemon.socket)],
    ):
        result = subprocess.run(
            [sys.executable, "-m", "mented_client.cli", *argv],
            env=env_free,
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(result.stdout)["socket"] == str(daemon.socket)


# ------------------------------------------------- rules that could never fire


def test_a_blank_action_is_refused_in_whole_sentences(daemon: DaemonProcess) -> None:
    result = daemon.mentectl("rule", "add", " ", "one line", check=False)
    assert result.returncode == 2
    assert "use e.g. 'git-commit'. `mentectl actions` lists them." in result.stderr


def test_an_unknown_action_is_refused_with_the_closest_known_ones(daemon: DaemonProcess) -> None:
    result = daemon.mentectl("rule", "add", "git-comit", "one line", check=False)
    assert result.returncode == 2
    assert "'git-comit' is not an action mented knows" in result.stderr
    assert "Did you mean: git-commit" in result.stderr
    listing = daemon.mentectl("rule", "list", "--action", "git-comit", check=False)
    assert listing.returncode == 2
    assert "Did you mean: git-commit" in listing.stderr
    assert listed(daemon, "--all") == []  # nothing was stored


def test_an_action_from_the_daemons_config_file_is_known(daemon: DaemonProcess) -> None:
    daemon.write_config(
        '[actions.deploy]\nshapes = [{ program = "make", subcommand = ["deploy"] }]\n'
    )
    daemon.reload()
    add(daemon, "Deploy", "announce it in #ops first")
    assert listed(daemon, "--action", "deploy") == ["announce it in #ops first"]


def test_an_unknown_agent_is_refused_naming_the_known_ones(daemon: DaemonProcess) -> None:
    result = daemon.mentectl("rule", "add", "git-commit", "x", "--agent", "claude", check=False)
    assert result.returncode == 2
    assert "unknown agent 'claude'" in result.stderr
    assert "claude-code" in result.stderr and "codex" in result.stderr
    assert listed(daemon, "--all") == []


@pytest.mark.parametrize("directory", ["", "  ", "/nonexistent/project"])
def test_a_blank_or_missing_project_is_refused(daemon: DaemonProcess, directory: str) -> None:
    result = daemon.mentectl("rule", "add", "git-commit", "x", "--project", directory, check=False)
    assert result.returncode == 2
    assert "project directory" in result.stderr
    assert listed(daemon, "--all") == []  # not stored, and above all not stored unscoped


def test_a_relative_project_is_made_absolute(daemon: DaemonProcess, tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    add_relative = ["rule", "add", "git-commit", "x", "--project", "app/../app/", "--json"]
    result = subprocess.run(
        [sys.executable, "-m", "mented_client.cli", *add_relative],
        env=daemon.env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    rule_id = json.loads(result.stdout)["id"]
    shown = json.loads(daemon.mentectl("rule", "show", rule_id, "--json").stdout)
    assert shown["project"] == str(tmp_path / "app")


def test_supersede_can_rescope_the_new_version(daemon: DaemonProcess, tmp_path: Path) -> None:
    app = tmp_path / "app"
    app.mkdir()
    old = add(daemon, "git-commit", "single line")
    daemon.mentectl(
        "rule", "supersede", old, "single line, in app", "--agent", "codex", "--project", str(app)
    )
    assert listed(daemon, "--action", "git-commit", "--agent", "codex", "--cwd", str(app)) == [
        "single line, in app"
    ]
    assert (
        listed(daemon, "--action", "git-commit", "--agent", "claude-code", "--cwd", str(app)) == []
    )
    assert listed(daemon, "--action", "git-commit", "--agent", "codex", "--cwd", "/") == []
    refused = daemon.mentectl("rule", "supersede", old, "y", "--agent", "claud", check=False)
    assert refused.returncode == 2
    assert "unknown agent 'claud'" in refused.stderr


def test_status_reports_counts_sizes_latency_and_the_last_hook_fire(
    daemon: DaemonProcess,
) -> None:
    add(daemon, "git-commit", "single line")
    add(daemon, "git-commit", "no emojis")
    add(daemon, "pr-create", "drafts first")
    event = pretooluse_event("git commit -m 'fix: x'", cwd="/tmp", session="s1")
    with daemon.client() as client:
        assert b"single line" in client.hook("claude-code", event)
    data = json.loads(daemon.mentectl("status", "--json").stdout)
    assert (data["memories"], data["live_rules"], data["actions_with_rules"]) == (3, 3, 2)
    assert 0 < data["db_bytes"] <= data["map_bytes"]
    assert 0 < data["p50_us"] <= data["p99_us"]
    assert data["requests_served"] >= 4
    assert data["last_hook_fire"]["actions"] == ["git-commit"]
    assert data["last_hook_fire"]["command"] == "git commit -m 'fix: x'"
    text = daemon.mentectl("status").stdout
    assert "3 (3 live rules for 2 actions)" in text
    assert "claude-code: git-commit" in text


# ------------------------------------------- what reaches the terminal is text

# What a terminal acts on instead of showing, each with the escape mentectl shows.
TERMINAL_CONTROLS = {
    "\x1b[2J": "\\x1b[2J",  # ESC: clear the screen
    "\x1b]52;c;aGVsbG8=\x07": "\\x1b]52;c;aGVsbG8=\\x07",  # OSC 52: write the clipboard
    "\x07": "\\x07",  # BEL
    "\r": "\\r",  # CR: overwrite the line
    "\u202e": "\\u202e",  # RLO: show the rest right to left
    "\u2066": "\\u2066",  # LRI, another bidi control
    "\x9b": "\\x9b",  # CSI in one C1 character
}
HOSTILE = " ".join(f"<{raw}>" for raw in TERMINAL_CONTROLS)


def assert_escaped(out: str, *, what: str) -> None:
    for raw, escaped in TERMINAL_CONTROLS.items():
        assert raw not in out, f"{what} printed {raw!r} raw"
        assert f"<{escaped}>" in out, f"{what} did not show {raw!r} as {escaped}"


def test_rule_text_reaches_the_terminal_escaped_and_keeps_its_lines(
    daemon: DaemonProcess,
) -> None:
    rule_id = add(daemon, "git-commit", f"first line {HOSTILE}\nsecond line\tend")
    for argv in (["rule", "list"], ["rule", "list", "--action", "git-commit"]):
        out = daemon.mentectl(*argv).stdout
        assert_escaped(out, what=" ".join(argv))
        assert "\n    second line\tend\n" in out  # indented under its rule, as its first line
    out = daemon.mentectl("rule", "show", rule_id).stdout
    assert_escaped(out, what="rule show")
    assert "\nsecond line\tend\n" in out
    out = daemon.mentectl("rule", "history", rule_id).stdout
    assert_escaped(out, what="rule history")
    # --json stays exact: the same text comes back.
    assert listed(daemon) == [f"first line {HOSTILE}\nsecond line\tend"]
    shown = daemon.mentectl("rule", "show", rule_id, "--json").stdout
    assert "\x1b" not in shown
    assert json.loads(shown)["content"] == f"first line {HOSTILE}\nsecond line\tend"


def test_explain_shows_the_command_and_the_rules_escaped(daemon: DaemonProcess) -> None:
    add(daemon, "git-commit", f"first line {HOSTILE}\nsecond line")
    out = daemon.mentectl("explain", f"git commit -m 'x{HOSTILE}' --author=\x1b[2J").stdout
    assert "-> git-commit" in out
    assert_escaped(out, what="explain")
    command_and_rules, _, fields = out.partition("\nfields of git-commit:")
    assert command_and_rules.count("\\x1b[2J") == 3, "the quoted word, the bare word and the rule"
    assert "\\x1b[2J" in fields  # the message, escaped too
    assert "\n      second line\n" in out  # its own line, indented under its rule


def test_log_shows_what_came_with_the_event_escaped(daemon: DaemonProcess) -> None:
    add(daemon, "git-commit", "single line")
    command = f"git commit -m 'x{HOSTILE}'\necho second line"
    event = pretooluse_event(command, cwd=f"/tmp/{HOSTILE}", session=f"s1\nforged {HOSTILE}")
    with daemon.client() as client:
        assert b"single line" in client.hook("claude-code", event)
    out = daemon.mentectl("log").stdout
    assert_escaped(out, what="log")
    assert "\necho second line\n" in out, "a command keeps its own lines"
    assert "session s1\\nforged" in out, "a session id stays on its line"
    fires = json.loads(daemon.mentectl("log", "--json").stdout)["fires"]
    assert (fires[0]["command"], fires[0]["cwd"]) == (command, f"/tmp/{HOSTILE}")


def test_a_long_heredoc_commit_fires_and_a_command_over_the_cap_shows_in_the_log(
    daemon: DaemonProcess,
) -> None:
    from mented.matcher import MAX_COMMAND_CHARS

    # The daemon drops a hook request at its deadline (`[hook] budget_ms`, 250 ms of
    # wall clock from receipt): a busy machine can pass that while a 180 KB event is
    # read and decoded. This test is about the heredoc, not the deadline: give it all.
    daemon.write_config("[hook]\nbudget_ms = 10000\n")
    daemon.reload()
    add(daemon, "git-commit", "single line")
    body = "a line of the release notes\n" * (MAX_COMMAND_CHARS // 20)
    heredoc = f"cat > NOTES.md <<'MSG'\n{body}MSG\ngit add NOTES.md && git commit -m 'docs: x'"
    too_long = "echo " + "y " * (MAX_COMMAND_CHARS // 2) + "&& git commit -m x"
    with daemon.client() as client:
        assert b"single line" in client.hook(
            "claude-code", pretooluse_event(heredoc, cwd="/tmp", session="a")
        )
        assert (
            client.hook("claude-code", pretooluse_event(too_long, cwd="/tmp", session="b")) == b""
        )
    out = daemon.mentectl("log").stdout
    assert (
        f"why: not analyzed: {len(too_long)} characters (without heredoc bodies), over the cap "
        f"of {MAX_COMMAND_CHARS}" in out
    )
    fires = json.loads(daemon.mentectl("log", "--json").stdout)["fires"]
    assert [fire["actions"] for fire in fires] == [[], ["git-commit"]]


def test_list_by_action_names_the_daemons_actions_only(daemon: DaemonProcess) -> None:
    daemon.write_config(
        '[actions.ship-it]\nshapes = [{ program = "make", subcommand = ["ship"] }]\n'
    )
    daemon.reload()
    add(daemon, "ship-it", "tag first")
    assert listed(daemon, "--action", "TRIGGER:Ship-It") == ["tag first"]

    # Removed from the config: its rules are still listed, with why they never fire.
    daemon.write_config("")
    daemon.reload()
    orphans = daemon.mentectl("rule", "list", "--action", "ship-it")
    assert "tag first" in orphans.stdout
    assert "not an action in the config in force" in orphans.stderr

    typo = daemon.mentectl("rule", "list", "--action", "git-comit", check=False)
    assert typo.returncode == 2
    assert "Did you mean: git-commit" in typo.stderr


def test_rule_add_prints_the_handle_the_agent_sees(daemon: DaemonProcess) -> None:
    added = daemon.mentectl("rule", "add", "git-commit", "Commit messages: one line.").stdout
    rule_id = json.loads(daemon.mentectl("rule", "list", "--json").stdout)["rules"][0]["id"]
    handle = rule_id[-8:].lower()
    assert added == f"added rule [{handle}] for git-commit (id {rule_id})\n"
    # The handle is how the agent sees it, and what `rule show` takes.
    assert "Commit messages: one line." in daemon.mentectl("rule", "show", handle).stdout
    pinned = json.loads(daemon.mentectl("rule", "add", "--pinned", "Be brief.", "--json").stdout)
    assert pinned["handle"] == pinned["id"][-8:].lower()


def stop_reason(daemon: DaemonProcess, session: str, command: str = "git commit -m x") -> str:
    with daemon.client() as client:
        out = client.hook("claude-code", pretooluse_event(command, cwd="/tmp", session=session))
    return str(json.loads(out)["hookSpecificOutput"]["permissionDecisionReason"])


def test_the_cut_warning_at_rule_add_agrees_with_what_the_hook_hands_over(
    daemon: DaemonProcess,
) -> None:
    from mented.actions import load_action_table
    from mented.config import Config
    from mented.handover import longest_whole_rule

    limit = longest_whole_rule(
        "git-commit", max_chars=4000, table=load_action_table(Config()), replaces=False
    )
    # The least room a new rule gets: a stop, after earlier rules of this session,
    # with an older new rule left out beside it.
    older = daemon.mentectl("rule", "add", "git-commit", "older: " + "o" * 5000)
    assert f"hands at most {limit} of a git-commit rule" in older.stderr
    stop_reason(daemon, "a", "git commit -m 1")
    add(daemon, "git-commit", "filler one: " + "f" * 5000)
    whole = daemon.mentectl("rule", "add", "git-commit", "w" * limit)
    assert "warning" not in whole.stderr
    exact = stop_reason(daemon, "a", "git commit -m 2")
    assert "w" * limit + "\n" in exact  # whole: no cut, no pointer
    assert "(cut;" not in exact
    assert "(1 older rule for `git-commit` left out" in exact

    add(daemon, "git-commit", "filler two: " + "f" * 5000)
    over = daemon.mentectl("rule", "add", "git-commit", "c" * (limit + 1))
    assert (
        f"mentectl: warning: this rule is {limit + 1} characters; the hook hands at most "
        f"{limit} of a git-commit rule to the agent" in over.stderr
    )
    cut = stop_reason(daemon, "a", "git commit -m 3")
    assert "c" * 100 in cut
    assert "c" * (limit + 1) not in cut
    assert "(cut; `mentectl rule show" in cut
    assert "(1 older rule for `git-commit` left out" in cut


def test_two_long_rules_stop_with_the_newest_cut_and_the_log_says_so(
    daemon: DaemonProcess,
) -> None:
    # Issue 23 item 2: the stop read only "(2 older rules ... left out)", `log` said
    # RULES 0 of 2: the command was stopped for nothing.
    add(daemon, "git-commit", "first: " + "a" * 5000)
    newest = add(daemon, "git-commit", "second: " + "b" * 5000)
    reason = stop_reason(daemon, "s")
    assert f"[{short_handle(newest)}] second: bbbb" in reason
    assert f"`mentectl rule show {short_handle(newest)}` shows it whole" in reason
    assert "(1 older rule for `git-commit` left out" in reason
    assert "first: " not in reason
    log = daemon.mentectl("log").stdout
    assert " 1 of 2 " in log
    assert "0 of 2" not in log
