"""`mentectl rule ...` as a new user meets it: long rules, rules from a file or
standard input, a supersede that changes nothing, rules left without an action,
and the handles the agent shows."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import DaemonProcess


def add(daemon: DaemonProcess, *args: str, stdin: str | None = None) -> str:
    out = daemon.mentectl("rule", "add", *args, "--json", stdin=stdin).stdout
    return str(json.loads(out)["id"])


def content_of(daemon: DaemonProcess, rule_id: str) -> str:
    return str(json.loads(daemon.mentectl("rule", "show", rule_id, "--json").stdout)["content"])


def test_a_rule_too_long_to_hand_over_whole_is_warned_about_with_the_limit(
    daemon: DaemonProcess,
) -> None:
    short = daemon.mentectl("rule", "add", "git-tag", "sign tags")
    assert short.stderr == ""
    long_rule = "tags: " + "annotated, signed, with release notes. " * 150
    result = daemon.mentectl("rule", "add", "git-tag", long_rule)
    assert "added rule" in result.stdout
    assert "warning" in result.stderr
    assert "max_context_chars = 4000" in result.stderr
    assert "mentectl rule show" in result.stderr


def test_a_rule_is_read_from_standard_input_or_a_file(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    from_stdin = add(daemon, "git-commit", "-", stdin="first line\nsecond line\n")
    assert content_of(daemon, from_stdin) == "first line\nsecond line"
    rule_file = tmp_path / "rule.txt"
    rule_file.write_text("from a file\n", encoding="utf-8")
    from_file = add(daemon, "git-commit", "--file", str(rule_file))
    assert content_of(daemon, from_file) == "from a file"
    replaced = daemon.mentectl("rule", "supersede", from_file, "-", stdin="replaced\n")
    assert "replaces" in replaced.stdout

    both = daemon.mentectl("rule", "add", "git-commit", "x", "--file", str(rule_file), check=False)
    assert both.returncode == 2
    assert "once" in both.stderr
    rule_file.write_bytes(b"\xff\xfe not text")
    bad = daemon.mentectl("rule", "add", "git-commit", "--file", str(rule_file), check=False)
    assert bad.returncode == 2
    assert "not UTF-8" in bad.stderr
    empty = daemon.mentectl("rule", "add", "git-commit", "-", stdin="\n", check=False)
    assert empty.returncode == 2
    assert "empty" in empty.stderr


def test_superseding_a_rule_with_the_same_text_is_refused(daemon: DaemonProcess) -> None:
    first = add(daemon, "git-commit", "single line")
    same = daemon.mentectl("rule", "supersede", first, "single line", check=False)
    assert same.returncode != 0
    assert "already" in same.stderr
    history = json.loads(daemon.mentectl("rule", "history", first, "--json").stdout)["history"]
    assert len(history) == 1


def test_rules_of_an_action_removed_from_the_config_are_listed_and_named_by_doctor(
    daemon: DaemonProcess,
) -> None:
    ship_it = '[actions.ship-it]\nshapes = [{ program = "make", subcommand = ["ship"] }]\n'
    daemon.write_config(ship_it)
    daemon.reload()
    add(daemon, "ship-it", "ship from main only")
    daemon.write_config("")
    daemon.reload()

    listing = daemon.mentectl("rule", "list", "--action", "ship-it")
    assert "ship from main only" in listing.stdout
    assert "never fire" in listing.stderr
    unknown = daemon.mentectl("rule", "list", "--action", "shipit", check=False)
    assert unknown.returncode == 2

    doctor = daemon.mentectl("doctor", check=False)
    assert "ship-it" in doctor.stdout
    assert "1 rule" in doctor.stdout


def test_the_agents_handle_and_a_unique_start_of_the_id_name_a_rule(
    daemon: DaemonProcess,
) -> None:
    rule_id = add(daemon, "git-commit", "single line")
    handle = rule_id[-8:].lower()
    listing = daemon.mentectl("rule", "list").stdout
    assert f"[{handle}]" in listing
    assert content_of(daemon, f"[{handle}]") == "single line"
    assert content_of(daemon, handle) == "single line"
    assert content_of(daemon, rule_id[:20]) == "single line"
    assert content_of(daemon, rule_id[:20].lower()) == "single line"


def test_a_project_given_through_a_symlink_is_the_same_project(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    real = tmp_path / "real"
    (real / "src").mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(real)
    rule_id = add(daemon, "git-commit", "through the link", "--project", str(link))
    shown = json.loads(daemon.mentectl("rule", "show", rule_id, "--json").stdout)
    assert shown["project"] == str(real.resolve())
    for cwd in (real / "src", link / "src"):
        listed = daemon.mentectl("rule", "list", "--action", "git-commit", "--cwd", str(cwd))
        assert "through the link" in listed.stdout, cwd
    elsewhere = daemon.mentectl("rule", "list", "--action", "git-commit", "--cwd", str(tmp_path))
    assert "through the link" not in elsewhere.stdout
