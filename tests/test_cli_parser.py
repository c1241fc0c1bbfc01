"""mentectl's parser: a mistyped option shows its verb's usage; a mistyped name gets a
"did you mean"; `import` says what is wrong with a file it cannot take."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mented_client.cli import main
from mented_client.suggest import close_match


def usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    assert exited.value.code == 2
    return capsys.readouterr().err


def test_an_option_typo_after_a_verb_shows_that_verbs_usage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = usage_error(capsys, "rule", "list", "--acton", "git-commit")
    assert err.startswith("usage: mentectl rule list [-h]")
    assert "mentectl rule list: error: unrecognized arguments: --acton git-commit" in err
    assert "(did you mean '--action'?)" in err
    err = usage_error(capsys, "--json", "status", "--verbose")
    assert err.startswith("usage: mentectl status [-h]")
    assert "mentectl status: error: unrecognized arguments: --verbose" in err
    assert "did you mean" not in err


@pytest.mark.parametrize(
    "argv",
    [
        ("setup", "claude"),
        ("hooks", "install", "claude"),
        ("mcp", "install", "claude"),
        ("uninstall", "claude"),
    ],
)
def test_an_agents_short_name_gets_a_did_you_mean(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    err = usage_error(capsys, *argv)
    assert "invalid choice: 'claude' (did you mean 'claude-code'?)" in err


def test_a_mistyped_verb_gets_a_did_you_mean(capsys: pytest.CaptureFixture[str]) -> None:
    assert "invalid choice: 'stauts' (did you mean 'status'?)" in usage_error(capsys, "stauts")


def test_close_match_prefers_the_one_name_a_word_starts() -> None:
    assert close_match("claude", ["codex", "claude-code"]) == "claude-code"
    assert close_match("Codx", ["codex", "claude-code"]) == "codex"
    assert close_match("vim", ["codex", "claude-code"]) is None
    assert close_match("c", ["codex", "claude-code"]) is None  # two start so: none


def test_import_says_what_the_file_is_when_it_cannot_be_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    export = "give the file `mentectl export --out FILE` wrote"
    assert main(["import", os.devnull]) == 2
    err = capsys.readouterr().err
    assert f"{os.devnull} is a character device, not a regular file: {export}" in err
    assert "no such file" not in err
    empty = tmp_path / "rules.jsonl"
    empty.write_bytes(b"")
    assert main(["import", str(empty)]) == 2
    assert f"{empty} is empty: {export}" in capsys.readouterr().err
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert main(["import", str(fifo)]) == 2  # at once: a pipe nobody writes to is not read
    assert f"{fifo} is a named pipe, not a regular file" in capsys.readouterr().err
    assert main(["import", str(tmp_path / "nope")]) == 2
    assert f"{tmp_path / 'nope'}: no such file" in capsys.readouterr().err
