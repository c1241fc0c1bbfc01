"""What `mentectl` prints, and how it takes its arguments, as a new user meets it.

In-process where no daemon is needed (`main`), else through the real `mentectl`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from pathlib import Path

import pytest

from mented_client.cli import build_parser, main
from tests.conftest import PYTHON, DaemonProcess, isolated_env


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture
def offline(tmp_path: Path) -> list[str]:
    """A socket nobody listens on and an empty config file."""
    config = tmp_path / "config.toml"
    config.write_text("")
    return ["--socket", str(tmp_path / "nobody.sock"), "explain", "--config", str(config)]


def test_an_argument_that_is_not_utf8_is_refused_without_a_traceback(
    daemon: DaemonProcess,
) -> None:
    # Python hands undecodable bytes over as surrogates; the subprocess sends them as bytes.
    for args in (
        ("rule", "add", "git-commit", "caf\udce9"),
        ("rule", "show", "\udcff\udcfe1234"),
        ("explain", "--cwd", "/tmp/\udcff", "git push"),
    ):
        result = daemon.mentectl(*args, check=False)
        assert result.returncode == 2, args
        assert "Traceback" not in result.stderr
        assert "not valid UTF-8" in result.stderr


def test_a_reader_that_goes_away_ends_mentectl_quietly(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("")
    read_end, write_end = os.pipe()
    os.close(read_end)  # as `| head -1` does once it has its line
    try:
        result = subprocess.run(
            [PYTHON, "-m", "mented_client.cli", "actions", "--config", str(config)],
            env=isolated_env(tmp_path),
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert result.stderr == ""
    assert result.returncode == 141  # as a program ended by SIGPIPE


def test_explain_takes_the_rest_of_the_line_as_the_command(
    capsys: pytest.CaptureFixture[str], offline: list[str]
) -> None:
    status, out, err = run(capsys, *offline, "--json", "git", "commit", "-m", "x")
    assert (status, err) == (0, "")
    assert json.loads(out)["actions"] == ["git-commit"]
    status, out, _ = run(capsys, *offline, "--json", "--", "git", "push", "--force")
    assert "git-push-force" in json.loads(out)["actions"]
    status, _, err = run(capsys, *offline)
    assert status == 2
    assert "give the shell command" in err


def test_version_counts_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as version:
        main(["--version"])
    assert version.value.code == 0
    assert capsys.readouterr().out.startswith("mentectl ")
    for argv in (["rule", "list", "-k", "0"], ["rule", "list", "-k", "-1"], ["log", "-n", "0"]):
        with pytest.raises(SystemExit) as refused:
            main(argv)
        assert refused.value.code == 2
        assert "1 or more" in capsys.readouterr().err

    def verbs(parser: argparse.ArgumentParser, path: str) -> list[tuple[str, str | None]]:
        found = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found.append((f"{path} {name}", sub.description))
                    found += verbs(sub, f"{path} {name}")
        return found

    undescribed = [name for name, text in verbs(build_parser(), "mentectl") if not text]
    assert undescribed == []


def test_status_and_rule_list_as_a_user_reads_them(daemon: DaemonProcess) -> None:
    status = daemon.mentectl("status").stdout
    assert "last rules: none yet" in status
    assert "mentectl log" in status
    daemon.mentectl("rule", "add", "git-commit", "-", stdin="first line\nsecond line\n")
    listing = daemon.mentectl("rule", "list").stdout.splitlines()
    assert listing[1:] == ["    first line", "    second line"]


def test_explain_and_actions_use_the_daemons_table_while_the_file_is_invalid(
    daemon: DaemonProcess,
) -> None:
    daemon.write_config(
        '[actions.ship-it]\nshapes = [{ program = "make", subcommand = ["ship"] }]\n'
    )
    daemon.reload()
    daemon.write_config("[actions.ship-it\n")  # not TOML

    explained = daemon.mentectl("explain", "--json", "make ship")
    assert json.loads(explained.stdout)["actions"] == ["ship-it"]
    assert "config file is invalid" in explained.stderr
    actions = daemon.mentectl("actions")
    assert "ship-it" in actions.stdout
    assert "config file is invalid" in actions.stderr


def test_every_verb_is_found_without_importing_the_other_groups() -> None:
    from mented_client.commands import COMMAND_MODULES, VERBS, command_module

    registered = {}
    for name in COMMAND_MODULES:
        parser = argparse.ArgumentParser()
        subparsers = parser.add_subparsers()
        command_module(name).register(subparsers, argparse.ArgumentParser(add_help=False))
        registered |= dict.fromkeys(subparsers.choices, name)
    assert registered == VERBS  # a verb missing here would still work, only slower

    # The parser for one verb holds its group's verbs only, and parses like the full one.
    words = ["--socket", "/run/x.sock", "rule", "list", "--action", "git-commit"]
    (verbs,) = (
        a for a in build_parser(words)._actions if isinstance(a, argparse._SubParsersAction)
    )
    assert set(verbs.choices) == {"rule"}
    assert vars(build_parser(words).parse_args(words)) == vars(build_parser().parse_args(words))


# The agents' adapters and the action table (with pathspec under it): the daemon knows
# the table in force, and the rule verbs need only names of either.
_TABLE = ["mented.agents", "mented.actions", "pathspec"]


@pytest.mark.parametrize(
    ("argv", "loaded", "not_loaded"),
    [
        (["--version"], [], ["msgspec", "mented.protocol", "mented_client.commands.status"]),
        (["status"], ["mented_client.commands.status"], ["mented.agents", "mented.store"]),
        (["rule", "list"], ["mented_client.commands.rules"], ["mented.store", "lmdb", *_TABLE]),
        (["rule", "add", "--help"], ["mented_client.commands.rules"], _TABLE),
        (["rule", "list", "--action", "git-commit", "--agent", "codex"], [], _TABLE),
        # `mentectl ui`'s server and its web libraries: for that verb only, even with --help.
        (["--help"], ["mented_client.commands.ui"], ["mented_client.ui", "starlette", "uvicorn"]),
        (["ui", "--help"], ["mented_client.commands.ui"], ["mented_client.ui", "starlette"]),
        (["status"], [], ["mented_client.commands.ui", "starlette", "uvicorn"]),
    ],
)
def test_a_command_imports_what_it_runs_only(
    tmp_path: Path, argv: list[str], loaded: list[str], not_loaded: list[str]
) -> None:
    # What `mentectl --version` and `status` cost is mostly what they import.
    code = (
        "import sys, runpy; sys.argv = ['mentectl', *sys.argv[1:]]\n"
        "try:\n    runpy.run_module('mented_client.cli', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print(' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    env = isolated_env(tmp_path) | {"MENTED_SOCKET": str(tmp_path / "nobody.sock")}
    result = subprocess.run(
        [PYTHON, "-c", code, *argv], env=env, capture_output=True, text=True, check=False
    )
    modules = set(result.stderr.splitlines()[-1].split())
    assert set(loaded) <= modules
    assert not set(not_loaded) & modules, set(not_loaded) & modules


# ------------------------------------------------------- errors with --json


def json_error(stdout: str) -> dict[str, str]:
    """The `error` object of the one JSON document on stdout."""
    error: dict[str, str] = json.loads(stdout)["error"]
    assert set(error) == {"code", "message"}
    return error


def test_json_errors_are_one_document_on_stdout_without_a_daemon(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    nobody = ["--socket", str(tmp_path / "nobody.sock")]
    status, out, err = run(capsys, *nobody, "rule", "list", "--json")
    assert (status, err) == (1, "")
    error = json_error(out)
    assert error["code"] == "not_running"
    assert "mentectl start" in error["message"]

    # `status` keeps its document (`running`, `reason`) and adds the same `error`.
    status, out, err = run(capsys, *nobody, "status", "--json")
    assert (status, err) == (1, "")
    assert json.loads(out)["running"] is False
    assert json_error(out)["code"] == "not_running"

    # What the command refuses before asking the daemon: the usage status, 2.
    status, out, err = run(capsys, *nobody, "--json", "rule", "add", "git-commit")
    assert (status, err) == (2, "")
    error = json_error(out)
    assert error["code"] == "invalid_argument"
    assert error["message"].startswith("give the rule as an argument")

    # Without --json, the same failures stay one line on stderr.
    status, out, err = run(capsys, *nobody, "rule", "list")
    assert (status, out) == (1, "")
    assert err.startswith("mentectl: mented is not running")


def test_json_errors_carry_the_daemons_code(daemon: DaemonProcess) -> None:
    unknown = daemon.mentectl("rule", "show", "--json", "01ZZZZZZZZZZZZZZZZZZZZZZZZ", check=False)
    assert (unknown.returncode, unknown.stderr) == (1, "")
    assert json_error(unknown.stdout)["code"] == "not_found"
    short = daemon.mentectl("--json", "rule", "forget", "abc", check=False)
    assert json_error(short.stdout)["code"] == "invalid"
    assert "too short" in json_error(short.stdout)["message"]

    typo = daemon.mentectl("rule", "add", "git-comit", "x", "--json", check=False)
    assert (typo.returncode, typo.stderr) == (2, "")
    assert json_error(typo.stdout)["code"] == "invalid_argument"
    assert "Did you mean: git-commit" in json_error(typo.stdout)["message"]

    not_utf8 = daemon.mentectl("--json", "rule", "add", "git-commit", "caf\udce9", check=False)
    assert (not_utf8.returncode, json_error(not_utf8.stdout)["code"]) == (2, "invalid_argument")


def test_status_json_says_an_invalid_config_file_as_its_error(daemon: DaemonProcess) -> None:
    daemon.write_config("[hook\n")  # not TOML: the daemon runs on the one it loaded
    result = daemon.mentectl("status", "--json", check=False)
    assert (result.returncode, result.stderr) == (1, "")
    document = json.loads(result.stdout)
    assert (document["running"], document["healthy"]) == (True, False)
    assert json_error(result.stdout)["code"] == "config_invalid"


def test_usage_errors_stay_text_even_with_json(capsys: pytest.CaptureFixture[str]) -> None:
    # argparse refuses the words before it has read --json (docs: README, "Scripting").
    with pytest.raises(SystemExit) as exit_:
        main(["rule", "list", "--json", "--no-such-option"])
    captured = capsys.readouterr()
    assert (exit_.value.code, captured.out) == (2, "")
    assert "unrecognized arguments: --no-such-option" in captured.err
