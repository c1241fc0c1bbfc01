"""`mentectl completion SHELL` and `mentectl man`, made from the parser, run for real."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from mented_client.commands import VERBS
from tests.conftest import PYTHON

MENTECTL = [PYTHON, "-m", "mented_client.cli"]


def printed(*args: str) -> str:
    return subprocess.run(
        [*MENTECTL, *args], capture_output=True, text=True, check=True, timeout=60
    ).stdout


def needs(shell: str) -> str:
    found = shutil.which(shell)
    if found is None:
        pytest.skip(f"{shell} is not installed here")
    return found


# (words typed, the current word's index) -> what must be offered, what must not.
CASES = [
    (["mentectl", "se"], {"setup", "service"}, {"status"}),
    (["mentectl", "rule", ""], {"add", "list", "supersede"}, {"setup"}),
    (["mentectl", "rule", "add", "--type", ""], {"procedural", "semantic"}, {"add"}),
    (["mentectl", "--socket", "/x", "setup", "c"], {"claude-code", "codex", "cursor"}, set()),
    (["mentectl", "rule", "list", "--a"], {"--action", "--agent", "--all"}, {"--type"}),
    (["mentectl", "completion", ""], {"bash", "zsh", "fish"}, set()),
]


def _bash(script: Path, words: list[str]) -> set[str]:
    array = " ".join(f"'{word}'" for word in words)
    code = (
        f"source {script}; COMP_WORDS=({array}); COMP_CWORD={len(words) - 1}; _mentectl; "
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    out = subprocess.run(
        [needs("bash"), "--norc", "-c", code],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return set(out.stdout.split())


def _zsh(script: Path, words: list[str]) -> set[str]:
    # compadd and compdef exist only inside zsh's completion system: stand-ins that
    # print what would be offered (compadd filters by the prefix itself).
    array = " ".join(f"'{word}'" for word in words)
    code = (
        "compdef() {}; compadd() { [[ $1 == -- ]] && shift; print -rl -- $@; }; "
        f"_files() {{ print FILES; }}; source {script}; words=({array}); "
        f"CURRENT={len(words)}; _mentectl"
    )
    out = subprocess.run(
        [needs("zsh"), "-f", "-c", code], capture_output=True, text=True, timeout=30, check=True
    )
    prefix = words[-1]
    return {word for word in out.stdout.split() if word.startswith(prefix)}


def _fish(script: Path, words: list[str]) -> set[str]:
    line = " ".join(words)
    code = f"source {script}; complete -C {line!r}"
    out = subprocess.run(
        [needs("fish"), "--no-config", "-c", code],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return {row.split("\t")[0] for row in out.stdout.splitlines()}


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_each_shell_completes_verbs_options_and_their_values(shell: str, tmp_path: Path) -> None:
    script = tmp_path / f"mentectl.{shell}"
    script.write_text(printed("completion", shell))
    offered_by = {"bash": _bash, "zsh": _zsh, "fish": _fish}[shell]
    for words, wanted, unwanted in CASES:
        offered = offered_by(script, words)
        assert wanted <= offered, (words, offered)
        assert not unwanted & offered, (words, offered)


def test_the_man_page_lists_every_verb_and_renders(tmp_path: Path) -> None:
    page = printed("man")
    for verb in VERBS:
        assert f'.SS "mentectl {verb}"' in page
    assert '.SS "mentectl rule add"' in page
    assert "\\-\\-action" in page
    if shutil.which("man") is None:
        return
    source = tmp_path / "mentectl.1"
    source.write_text(page)
    shown = subprocess.run(
        ["man", "-l", str(source)],
        capture_output=True,
        text=True,
        env=os.environ | {"MANPAGER": "cat", "MANWIDTH": "100"},
        timeout=60,
        check=True,
    )
    assert "mentectl - manage mented" in shown.stdout
    assert "warning" not in shown.stderr
