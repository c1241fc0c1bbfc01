"""`mentectl hooks install/uninstall/status`: the user's settings file is theirs."""

from __future__ import annotations

import difflib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mented.agents.pretooluse import SESSION_START_MATCHER
from mented.paths import socket_path
from mented_client.cli import build_parser, main
from mented_client.commands import doctor
from mented_client.hook_settings import (
    command_argv,
    installed_shim,
    is_mented_command,
    is_native_executable,
    real_interpreter,
)

# A settings file as a user and Claude Code leave it: other keys, other hooks, 4-space indent.
EXISTING = """{
    "model": "opus",
    "permissions": {
        "allow": ["Bash(npm run test:*)", "Read(~/.zshrc)"],
        "deny": ["Bash(curl:*)"]
    },
    "hooks": {
        "PreToolUse": [
            {
                "matcher": "Edit|Write",
                "hooks": [{"type": "command", "command": "~/bin/check-edit.sh"}]
            }
        ],
        "PostToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "logger done"}]}
        ]
    },
    "env": {"FOO": "1"}
}
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    # The agents' own variables would send the settings elsewhere (see the CODEX_HOME test).
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.delenv("MENTED_SOCKET", raising=False)
    monkeypatch.chdir(tmp_path)
    return home


def mentectl(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def mentectl_exit(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`mentectl`, for a command line argparse refuses (it exits)."""
    try:
        status = main(list(args))
    except SystemExit as exc:
        status = int(exc.code or 0)
    out, err = capsys.readouterr()
    return status, out, err


def insertions(a: str, b: str) -> list[tuple[int, str]] | None:
    """The text `b` inserts into `a`, as (position in `a`, text) in order; None when `b`
    is not `a` with text inserted (by the alignment `difflib` finds).

    A character-level `SequenceMatcher` over whole settings files is quadratic (seconds
    for one file): here lines are aligned first, and only the lines that differ are
    compared character by character. An insertion next to text equal to its own
    ends (`},` before `}`) could go either way; each is slid as far right as it goes,
    and two that meet are one.
    """
    a_lines, b_lines = a.splitlines(keepends=True), b.splitlines(keepends=True)
    a_at = [0, *itertools.accumulate(map(len, a_lines))]
    b_at = [0, *itertools.accumulate(map(len, b_lines))]
    found: list[tuple[int, str]] = []
    lines = difflib.SequenceMatcher(None, a_lines, b_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in lines.get_opcodes():
        if tag == "equal":
            continue
        a1, a2, b1, b2 = a_at[i1], a_at[i2], b_at[j1], b_at[j2]
        chars = difflib.SequenceMatcher(None, a[a1:a2], b[b1:b2], autojunk=False)
        for op, k1, _, l1, l2 in chars.get_opcodes():
            if op not in ("equal", "insert"):
                return None
            if op == "insert":
                found.append((a1 + k1, b[b1 + l1 : b1 + l2]))
    # Slide each left as far as it goes (joining those that meet), then right.
    return _slid_right(_slid_left(found, a), a)


def _slid_left(found: list[tuple[int, str]], a: str) -> list[tuple[int, str]]:
    slid: list[tuple[int, str]] = []
    for position, inserted in found:
        at, text = position, inserted
        while at > (slid[-1][0] if slid else 0) and a[at - 1] == text[-1]:
            at, text = at - 1, a[at - 1] + text[:-1]
        if slid and slid[-1][0] == at:
            text = slid.pop()[1] + text
        slid.append((at, text))
    return slid


def _slid_right(found: list[tuple[int, str]], a: str) -> list[tuple[int, str]]:
    slid: list[tuple[int, str]] = []  # from the last
    for position, inserted in reversed(found):
        at, text = position, inserted
        while at < (slid[-1][0] if slid else len(a)) and a[at] == text[0]:
            at, text = at + 1, text[1:] + a[at]
        if slid and slid[-1][0] == at:
            text += slid.pop()[1]
        slid.append((at, text))
    return slid[::-1]


def our_hooks(path: Path, event: str = "PreToolUse") -> list[dict[str, Any]]:
    doc = json.loads(path.read_text())
    return [
        hook
        for group in doc.get("hooks", {}).get(event, [])
        for hook in group["hooks"]
        if is_mented_command(hook.get("command"))
    ]


def one_command(hooks: list[dict[str, Any]]) -> dict[str, Any]:
    """The first of `hooks`, which all run one command line (one handler per condition)."""
    assert hooks
    assert len({hook["command"] for hook in hooks}) == 1
    return hooks[0]


def test_fresh_install_creates_the_file_and_its_directory(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = mentectl(capsys, "hooks", "install", "claude-code")
    assert status == 0
    settings = home / ".claude" / "settings.json"
    assert "Installed" in out
    doc = json.loads(settings.read_text())
    shell, tools = doc["hooks"]["PreToolUse"]
    # Shell commands: one handler per command shape's words, filtered by Claude Code itself.
    assert shell["matcher"] == "Bash"
    conditions = [hook["if"] for hook in shell["hooks"]]
    assert "Bash(*git*commit*)" in conditions
    assert "Bash(*gh*pr*create*)" in conditions
    assert all(re.fullmatch(r"Bash\(\*[^()]+\*\)", condition) for condition in conditions)
    # The MCP tools the built-in actions name, in a group of their own, unfiltered.
    assert "mcp__.*__create_pull_request" in tools["matcher"]
    (hook,) = tools["hooks"]
    assert "if" not in hook
    assert one_command(shell["hooks"] + tools["hooks"]) == shell["hooks"][0]
    assert hook["type"] == "command"
    assert isinstance(hook["timeout"], int)
    assert hook["timeout"] >= 1
    python, isolated, no_site, shim, agent, socket = command_argv(hook["command"]).argv
    assert Path(python).is_absolute()
    assert is_native_executable(Path(python))
    assert (isolated, no_site, agent) == ("-I", "-S", "claude-code")
    assert Path(shim) == installed_shim()
    assert socket == str(socket_path())  # the default mentectl itself uses
    assert not (settings.parent / "settings.json.mented-bak").exists()  # nothing to back up


def test_existing_settings_are_kept_byte_for_byte(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(EXISTING)
    assert mentectl(capsys, "hooks", "install", "claude-code")[0] == 0
    after = settings.read_text()
    # Only insertions: every byte of the original file is still there, in order.
    found = insertions(EXISTING, after)
    assert found is not None
    inserted = [text for _, text in found]
    # Our groups under the PreToolUse and PostToolUse lists already there (the
    # second insertion runs on into the new SessionStart list).
    pretooluse, rest = inserted
    hooks = json.loads(after)["hooks"]
    ours = hooks["PreToolUse"][1:]
    assert ours[0]["matcher"] == "Bash"
    assert json.loads("[" + pretooluse.strip().lstrip(",") + "]") == ours
    assert hooks["PostToolUse"][0] == json.loads(EXISTING)["hooks"]["PostToolUse"][0]
    assert [group["matcher"] for group in hooks["PostToolUse"][1:]] == ["Bash"]
    assert rest.lstrip().startswith(",")
    assert hooks["SessionStart"] == [
        {"matcher": SESSION_START_MATCHER, "hooks": [our_hooks(settings, "SessionStart")[0]]}
    ]
    assert list(json.loads(after)) == ["model", "permissions", "hooks", "env"]
    assert (settings.parent / "settings.json.mented-bak").read_text() == EXISTING


def test_a_second_install_changes_nothing_and_says_so(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mentectl(capsys, "hooks", "install", "claude-code")
    settings = home / ".claude" / "settings.json"
    before = settings.read_bytes()
    stat = settings.stat()
    status, out, _ = mentectl(capsys, "hooks", "install", "claude-code")
    assert status == 0
    assert "nothing changed" in out
    assert settings.read_bytes() == before
    assert settings.stat().st_mtime_ns == stat.st_mtime_ns
    assert not (settings.parent / "settings.json.mented-bak").exists()


def test_an_outdated_entry_is_updated_in_place(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    old = f"/old/python3 -I -S {installed_shim()} claude-code"
    settings.write_text(
        json.dumps(
            {
                "hooks": {
                    "PreToolUse": [
                        {
                            "matcher": "Bash",
                            "hooks": [
                                {
                                    "type": "command",
                                    "command": old,
                                    "timeout": 30,
                                    "statusMessage": "rules",
                                }
                            ],
                        }
                    ]
                }
            }
        )
    )
    status, out, _ = mentectl(capsys, "hooks", "install", "claude-code")
    assert status == 0
    assert "Updated" in out
    hooks = our_hooks(settings)
    assert one_command(hooks)["command"] != old
    assert {hook["statusMessage"] for hook in hooks} == {"rules"}  # the user's own additions stay


def test_invalid_json_is_refused_and_left_untouched(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    broken = '{\n  "model": "opus",\n  "hooks": {,}\n}\n'
    settings.write_text(broken)
    status, _, err = mentectl(capsys, "hooks", "install", "claude-code")
    assert status != 0
    assert str(settings) in err
    assert "not valid JSON (line 3" in err
    assert "not changed" in err
    assert settings.read_text() == broken
    assert sorted(p.name for p in settings.parent.iterdir()) == ["settings.json"]


@pytest.mark.parametrize("document", ["[]", '{"hooks": []}', '{"hooks": {"PreToolUse": {}}}'])
def test_unexpected_layouts_are_refused(
    home: Path, capsys: pytest.CaptureFixture[str], document: str
) -> None:
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(document)
    status, _, err = mentectl(capsys, "hooks", "install", "claude-code")
    assert status != 0
    assert "by hand" in err or "JSON object" in err
    assert settings.read_text() == document


def test_uninstall_removes_only_ours(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(EXISTING)
    mentectl(capsys, "hooks", "install", "claude-code")
    backup = settings.parent / "settings.json.mented-bak"
    assert backup.read_text() == EXISTING
    status, out, _ = mentectl(capsys, "hooks", "uninstall", "claude-code")
    assert status == 0
    assert re.search(r"Removed \d+ mented hook entries", out)
    assert settings.read_text() == EXISTING
    # The install's backup holds nothing the file does not: it goes, and no new one is made.
    assert not backup.exists()
    assert "mented-bak" not in out
    status, out, _ = mentectl(capsys, "hooks", "uninstall", "claude-code")
    assert "nothing changed" in out
    assert settings.read_text() == EXISTING


def test_uninstall_keeps_other_hooks_in_our_group(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = home / ".claude" / "settings.json"
    mentectl(capsys, "hooks", "install", "claude-code")
    doc = json.loads(settings.read_text())
    doc["hooks"]["PreToolUse"][0]["hooks"].append({"type": "command", "command": "audit.sh"})
    settings.write_text(json.dumps(doc, indent=2))
    mentectl(capsys, "hooks", "uninstall", "claude-code")
    assert json.loads(settings.read_text()) == {
        "hooks": {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [{"type": "command", "command": "audit.sh"}]}
            ]
        }
    }


def test_uninstall_without_a_file(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = mentectl(capsys, "hooks", "uninstall", "codex")
    assert status == 0
    assert "nothing changed" in out
    assert not (home / ".codex").exists()


def test_project_install_writes_the_uncommitted_local_settings(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The hook names this machine's interpreter and socket: not in the file teams commit.
    project = tmp_path / "repo"
    project.mkdir()
    assert mentectl(capsys, "hooks", "install", "claude-code", "--project", str(project))[0] == 0
    assert our_hooks(project / ".claude" / "settings.local.json")
    assert not (project / ".claude" / "settings.json").exists()
    assert not (home / ".claude").exists()


@pytest.mark.parametrize(
    ("agent", "top"),
    [("claude-code", ".claude"), ("copilot-cli", ".github"), ("cursor", ".cursor")],
)
def test_project_uninstall_leaves_no_empty_directory_behind(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], agent: str, top: str
) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    (project / "app.py").write_text("print()\n")
    mentectl(capsys, "hooks", "install", agent, "--project", str(project))
    assert (project / top).is_dir()
    status, out, _ = mentectl(capsys, "hooks", "uninstall", agent, "--project", str(project))
    assert status == 0
    assert f"{top} was left empty: removed too" in out
    assert sorted(p.name for p in project.iterdir()) == ["app.py"]


def test_project_uninstall_keeps_a_directory_that_holds_something_else(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "repo"
    (project / ".claude" / "agents").mkdir(parents=True)
    mentectl(capsys, "hooks", "install", "claude-code", "--project", str(project))
    mentectl(capsys, "hooks", "uninstall", "claude-code", "--project", str(project))
    assert sorted(p.name for p in (project / ".claude").iterdir()) == ["agents"]


@pytest.mark.parametrize("verb", ["install", "uninstall"])
def test_project_install_refuses_a_missing_project_directory(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], verb: str
) -> None:
    missing = tmp_path / "no-such-repo"
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    for project in (missing, a_file):
        status, _, err = mentectl_exit(
            capsys, "hooks", verb, "claude-code", "--project", str(project)
        )
        assert status == 2
        assert f"project directory '{project}'" in err
        assert "is not a directory" in err
    assert not missing.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "notes.txt"]


def test_project_install_moves_an_older_entry_out_of_the_shared_file(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "repo"
    shared = project / ".claude" / "settings.json"
    shared.parent.mkdir(parents=True)
    shared.write_text(EXISTING)
    # What an install before the local file did.
    mentectl(capsys, "hooks", "install", "claude-code", "--settings", str(shared))
    assert our_hooks(shared)
    status, out, _ = mentectl(capsys, "hooks", "install", "claude-code", "--project", str(project))
    assert status == 0
    assert "Moved it out of" in out
    assert shared.read_text() == EXISTING
    assert our_hooks(project / ".claude" / "settings.local.json")  # all of them, moved


def test_status_and_uninstall_find_the_hook_in_both_project_files(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "repo"
    shared = project / ".claude" / "settings.json"
    local = project / ".claude" / "settings.local.json"
    shared.parent.mkdir(parents=True)
    shared.write_text(EXISTING)
    mentectl(capsys, "hooks", "install", "claude-code", "--settings", str(shared))
    mentectl(capsys, "hooks", "install", "claude-code", "--settings", str(local))
    monkeypatch.chdir(project)
    _, out, _ = mentectl(capsys, "hooks", "status")
    assert ".claude/settings.json: PreToolUse installed" in out
    assert ".claude/settings.local.json: PreToolUse installed" in out
    status, out, _ = mentectl(
        capsys, "hooks", "uninstall", "claude-code", "--project", str(project)
    )
    assert status == 0
    assert f"from {shared};" in out
    assert f"from {local};" in out
    assert shared.read_text() == EXISTING
    assert not local.exists()  # it held only the hook


def test_codex_project_install_says_there_is_no_uncommitted_file(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    status, out, _ = mentectl(capsys, "hooks", "install", "codex", "--project", str(project))
    assert status == 0
    assert our_hooks(project / ".codex" / "hooks.json")
    assert "no uncommitted variant" in out
    assert "mentectl hooks install codex" in out


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_project_install_says_when_git_would_commit_the_local_file(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    _, out, _ = mentectl(capsys, "hooks", "install", "claude-code", "--project", str(project))
    assert "git does not ignore .claude/settings.local.json" in out
    (project / ".gitignore").write_text(".claude/settings.local.json\n")
    mentectl(capsys, "hooks", "uninstall", "claude-code", "--project", str(project))
    _, out, _ = mentectl(capsys, "hooks", "install", "claude-code", "--project", str(project))
    assert "git does not ignore" not in out


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_project_install_runs_no_program_the_repository_config_names(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A `.git/config` brought along (a tarball, a shared volume) chooses programs git
    runs there: none of them runs, and the install still works and still advises."""
    project = tmp_path / "repo"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    marker = tmp_path / "MARKER"
    script = tmp_path / "evil.sh"
    script.write_text(f"#!/bin/sh\necho ran >> {marker}\n")
    script.chmod(0o755)
    with (project / ".git" / "config").open("a") as config:
        config.write(
            f"[core]\n\tfsmonitor = {script}\n\thooksPath = {tmp_path}\n"
            f"\tpager = {script}\n\tsshCommand = {script}\n"
            f"[diff]\n\texternal = {script}\n[credential]\n\thelper = !{script}\n"
            f'[filter "x"]\n\tclean = {script}\n\tsmudge = {script}\n\tprocess = {script}\n'
        )
    (project / ".gitattributes").write_text("* filter=x diff=x\n")
    for hook in ("post-index-change", "pre-commit", "post-checkout"):
        shutil.copy(script, tmp_path / hook)
    status, out, _ = mentectl(capsys, "hooks", "install", "claude-code", "--project", str(project))
    assert status == 0
    assert our_hooks(project / ".claude" / "settings.local.json")
    assert "git does not ignore .claude/settings.local.json" in out
    assert not marker.exists()


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_ignores_agrees_with_git(tmp_path: Path) -> None:
    """The ignore files read as git reads them: nested `.gitignore`, negation, a directory
    pattern, `info/exclude`, `core.excludesFile`, and a work tree in a subdirectory."""
    from mented_client.git_ignore import git_ignores

    project = tmp_path / "repo"
    (project / "sub" / "deep").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    global_ignore = tmp_path / "global-ignore"
    global_ignore.write_text("*.global\n")
    with (project / ".git" / "config").open("a") as config:
        config.write(f"[core]\n\texcludesFile = {global_ignore}\n")
    (project / ".gitignore").write_text("*.json\n!keep.json\nbuild/\n/rooted\n")
    (project / "sub" / ".gitignore").write_text("!sub.json\nlocal.*\n")
    (project / ".git" / "info" / "exclude").write_text("*.excluded\n")
    names = [
        "a.json",
        "keep.json",
        "sub/sub.json",
        "sub/deep/x.json",
        "sub/local.txt",
        "local.txt",
        "build/out.txt",
        "sub/build/out.txt",
        "rooted",
        "sub/rooted",
        "x.excluded",
        "sub/x.global",
        "plain.txt",
    ]
    for name in names:
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text("")
    done = subprocess.run(
        ["git", "-C", str(project), "check-ignore", "--no-index", "--", *names],
        capture_output=True,
        text=True,
        check=False,
    )
    by_git = set(done.stdout.split())
    mine = {name for name in names if git_ignores(project / name)}
    assert mine == by_git
    assert git_ignores(tmp_path / "elsewhere" / "x.json") is None


def test_codex_install_says_to_trust_the_hook(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = mentectl(capsys, "hooks", "install", "codex")
    assert status == 0
    hook = one_command(our_hooks(home / ".codex" / "hooks.json"))
    assert command_argv(hook["command"]).argv[-2] == "codex"
    assert "/hooks" in out
    assert "trust" in out


def test_explicit_settings_path_and_a_one_line_file(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = tmp_path / "custom.json"
    settings.write_text('{"a": 1}')
    mentectl(capsys, "hooks", "install", "codex", "--settings", str(settings))
    text = settings.read_text()
    assert "\n" not in text
    assert text.startswith('{"a": 1, "hooks": ')


def linked_settings(home: Path, tmp_path: Path) -> tuple[Path, Path]:
    """~/.claude/settings.json as a link into a dotfiles checkout holding `{}`: both paths."""
    dotfiles = tmp_path / "dotfiles" / "claude-settings.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text("{}\n")
    link = home / ".claude" / "settings.json"
    link.parent.mkdir()
    link.symlink_to(dotfiles)
    return link, dotfiles


def test_a_symlinked_settings_file_is_written_through_the_link(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    link, dotfiles = linked_settings(home, tmp_path)
    mentectl(capsys, "hooks", "install", "claude-code")
    assert link.is_symlink()
    assert our_hooks(dotfiles)


def test_codex_home_is_where_the_codex_hook_goes(
    home: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    codex_home = tmp_path / "codex-home"
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    mentectl(capsys, "hooks", "install", "codex")
    assert our_hooks(codex_home / "hooks.json")
    assert not (home / ".codex").exists()
    status, out, _ = mentectl(capsys, "hooks", "status")
    assert status == 1  # installed, but not trusted in Codex yet (test_codex_trust.py)
    assert f"{codex_home / 'hooks.json'}: PreToolUse installed, Codex will not run" in out


def test_the_socket_at_install_time_becomes_the_fallback_argument(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MENTED_SOCKET", "/run/custom/mented.sock")
    mentectl(capsys, "hooks", "install", "claude-code")
    hook = one_command(our_hooks(home / ".claude" / "settings.json"))
    assert command_argv(hook["command"]).argv[-2:] == ["claude-code", "/run/custom/mented.sock"]


def test_the_socket_option_becomes_the_fallback_argument(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MENTED_SOCKET", "/run/from-env/mented.sock")  # --socket wins, as always
    mentectl(capsys, "--socket", "/run/explicit/mented.sock", "hooks", "install", "claude-code")
    hook = one_command(our_hooks(home / ".claude" / "settings.json"))
    assert command_argv(hook["command"]).argv[-2:] == ["claude-code", "/run/explicit/mented.sock"]


def test_the_runtime_dir_at_install_time_is_written_in(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # An agent launched without XDG_RUNTIME_DIR still looks where the daemon listens.
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/4242")
    mentectl(capsys, "hooks", "install", "codex")
    hook = one_command(our_hooks(home / ".codex" / "hooks.json"))
    assert command_argv(hook["command"]).argv[-1] == "/run/user/4242/mented/mented.sock"


def test_another_socket_updates_the_entry_and_uninstall_still_finds_it(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = home / ".claude" / "settings.json"
    mentectl(capsys, "--socket", "/run/a/mented.sock", "hooks", "install", "claude-code")
    status, out, _ = mentectl(
        capsys, "--socket", "/run/b/mented.sock", "hooks", "install", "claude-code"
    )
    assert (status, out.splitlines()[0]) == (
        0,
        "Updated the mented hook for Claude Code in ~/.claude/settings.json.",
    )
    hook = one_command(our_hooks(settings))
    assert hook["command"].endswith(" claude-code /run/b/mented.sock; exit 0")
    _, out, _ = mentectl(capsys, "hooks", "status", "--json")
    (claude,) = json.loads(out)["claude-code"]
    assert claude["hooks"][0]["socket"] == "/run/b/mented.sock"
    assert "socket: /run/b/mented.sock" in mentectl(capsys, "hooks", "status")[1]
    status, out, _ = mentectl(capsys, "hooks", "uninstall", "claude-code")
    assert re.search(r"Removed \d+ mented hook entries", out)
    assert not settings.exists()  # the install created it


def test_setup_installs_the_hook_with_the_socket_option(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doctor.setup_hook(
        build_parser().parse_args(["--socket", "/run/setup/mented.sock", "setup", "claude-code"])
    )
    hook = one_command(our_hooks(home / ".claude" / "settings.json"))
    assert command_argv(hook["command"]).argv[-1] == "/run/setup/mented.sock"


def test_hooks_command_prints_what_install_writes(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, printed, _ = mentectl(capsys, "hooks", "command", "claude-code")
    mentectl(capsys, "hooks", "install", "claude-code")
    hook = one_command(our_hooks(home / ".claude" / "settings.json"))
    assert printed.strip() == hook["command"]


def test_status_reports_where_and_whether_it_still_works(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mentectl(capsys, "hooks", "install", "claude-code")
    status, out, _ = mentectl(capsys, "hooks", "status", "--json")
    assert status == 0
    report = json.loads(out)
    (claude,) = report["claude-code"]
    assert claude["settings"] == str(home / ".claude" / "settings.json")
    pretooluse = [h for h in claude["hooks"] if h["event"] == "PreToolUse"]
    (session_start,) = [h for h in claude["hooks"] if h["event"] == "SessionStart"]
    hook = pretooluse[0]
    assert {h["event"] for h in claude["hooks"]} == {"PreToolUse", "SessionStart", "PostToolUse"}
    assert hook["problems"] == session_start["problems"] == []
    assert claude["missing"] == claude["gaps"] == []
    assert report["codex"][0]["hooks"] == []
    # The interpreter and the shim move away (a Python upgrade, a reinstall elsewhere).
    settings = home / ".claude" / "settings.json"
    gone = "/nonexistent/python3 -I -S /nonexistent/mented_client/shim.py claude-code"
    settings.write_text(settings.read_text().replace(hook["command"], gone))
    status, out, _ = mentectl(capsys, "hooks", "status")
    assert status == 1
    assert "interpreter /nonexistent/python3 is missing" in out
    assert "shim /nonexistent/mented_client/shim.py is missing" in out


# ---------------------------------------------------------------- interpreter


def test_a_pyenv_style_shim_script_is_never_installed(tmp_path: Path) -> None:
    script = tmp_path / "python3"
    script.write_text('#!/usr/bin/env bash\nexec "$(pyenv which python3)" "$@"\n')
    script.chmod(0o755)
    resolved = real_interpreter(str(script))
    assert resolved != script
    assert is_native_executable(resolved)


def test_a_venv_python_resolves_to_its_binary() -> None:
    assert is_native_executable(real_interpreter())


@pytest.mark.parametrize(
    ("command", "ours"),
    [
        (f"/usr/bin/python3 -I -S {installed_shim()} claude-code", True),
        ("/py -I -S '/site packages/mented_client/shim.py' codex", True),
        ("/py -I -S /elsewhere/shim.py claude-code", False),
        ("/py /elsewhere/mented_client/shim.py", False),  # no agent after it
        ("~/bin/check-edit.sh", False),
        ("echo 'unbalanced", False),
        (None, False),
    ],
)
def test_recognising_our_entries(command: str | None, ours: bool) -> None:
    assert is_mented_command(command) is ours


def test_an_older_install_without_the_session_start_entry_is_reported_and_completed(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = home / ".claude" / "settings.json"
    mentectl(capsys, "hooks", "install", "claude-code")
    # What installs before the SessionStart entry wrote: PreToolUse only.
    doc = json.loads(settings.read_text())
    del doc["hooks"]["SessionStart"]
    del doc["hooks"]["PreToolUse"][0]["hooks"][0]["statusMessage"]
    older = json.dumps(doc, indent=2) + "\n"
    settings.write_text(older)
    status, out, _ = mentectl(capsys, "hooks", "status")
    assert status == 1
    assert (
        "~/.claude/settings.json: no SessionStart entry, so pinned rules are not handed over "
        "at session start, nor rules again after the context is compacted or cleared "
        "(an older install): "
        "run `mentectl hooks install claude-code` again"
    ) in out
    checks = doctor.check_hooks(doctor.FireTarget(home / "no.sock", daemon_up=False, budget_ms=250))
    (missing,) = [check for check in checks if "no SessionStart entry" in check.detail]
    assert missing.state == "warn"
    assert missing.fix is not None
    assert "`mentectl hooks install claude-code`" in missing.fix

    status, out, _ = mentectl(capsys, "hooks", "install", "claude-code")
    assert status == 0
    assert "Updated" in out
    doc = json.loads(settings.read_text())
    (session_start,) = doc["hooks"]["SessionStart"]
    assert session_start["matcher"] == SESSION_START_MATCHER
    assert (
        command_argv(session_start["hooks"][0]["command"]).argv
        == command_argv(doc["hooks"]["PreToolUse"][0]["hooks"][0]["command"]).argv
    )
    assert mentectl(capsys, "hooks", "status")[0] == 0
    # Again: idempotent.
    before = settings.read_bytes()
    assert "nothing changed" in mentectl(capsys, "hooks", "install", "claude-code")[1]
    assert settings.read_bytes() == before
    # Uninstall takes both entries and leaves no empty lists (nor the file it created) behind.
    mentectl(capsys, "hooks", "uninstall", "claude-code")
    assert not settings.exists()


def test_uninstall_keeps_the_users_own_session_start_hooks(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    theirs = {"matcher": "startup", "hooks": [{"type": "command", "command": "direnv export"}]}
    original = json.dumps({"hooks": {"SessionStart": [theirs]}}, indent=2) + "\n"
    settings.write_text(original)
    mentectl(capsys, "hooks", "install", "claude-code")
    doc = json.loads(settings.read_text())
    assert doc["hooks"]["SessionStart"][0] == theirs
    assert doc["hooks"]["SessionStart"][1]["matcher"] == SESSION_START_MATCHER
    mentectl(capsys, "hooks", "uninstall", "claude-code")
    assert settings.read_text() == original


# ------------------------------------------------- settings paths that are not files


def test_status_refuses_a_settings_path_that_leads_to_a_device(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").symlink_to("/dev/zero")  # cwd is tmp_path
    status, out, err = mentectl(capsys, "hooks", "status")
    assert status == 1
    # A project's file is not followed out of the project.
    assert ".claude/settings.json leads outside the project, to /dev/zero; it was not read" in out
    assert "Traceback" not in out + err
    checks = doctor.check_hooks(doctor.FireTarget(home / "no.sock", daemon_up=False, budget_ms=250))
    assert any("to /dev/zero" in check.detail and check.state == "fail" for check in checks)


def test_a_project_settings_file_that_is_a_pipe_is_refused_without_waiting(
    home: Path, tmp_path: Path
) -> None:
    """A named pipe in a project (a clone can carry one) hangs no one: a process that
    would wait for a writer is stopped by the test's timeout, and fails."""
    (tmp_path / ".claude").mkdir()
    os.mkfifo(tmp_path / ".claude" / "settings.json")  # cwd is tmp_path
    # A hook entry whose shim and interpreter are named pipes too (in a settings file
    # the project commits under another agent's name).
    (tmp_path / "vendor").mkdir()
    os.mkfifo(tmp_path / "vendor" / "shim.py")
    os.mkfifo(tmp_path / "vendor" / "python")
    command = f"{tmp_path}/vendor/python -I -S {tmp_path}/vendor/shim.py codex"
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "hooks.json").write_text(
        json.dumps(
            {"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": command}]}]}}
        )
    )
    env = {**os.environ, "HOME": str(home)}
    for verb in (["hooks", "status"], ["doctor"]):
        done = subprocess.run(
            [sys.executable, "-m", "mented_client.cli", *verb],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert ".claude/settings.json: a named pipe, not a regular file" in done.stdout, verb
        assert "Traceback" not in done.stdout + done.stderr


def test_a_named_pipe_is_refused_without_waiting_for_a_writer(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    os.mkfifo(settings)
    status, _, err = mentectl(capsys, "hooks", "install", "claude-code")
    assert status != 0
    assert f"{settings}: not a regular file (a named pipe)" in err


def test_a_huge_settings_file_is_refused_unread(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    with settings.open("wb") as handle:
        handle.truncate(64 * 1024 * 1024)  # sparse: no disk used
    status, _, err = mentectl(capsys, "hooks", "install", "claude-code")
    assert status != 0
    assert f"{settings}: over 4 MiB, too large for a settings file" in err
    assert settings.stat().st_size == 64 * 1024 * 1024
    status, out, _ = mentectl(capsys, "hooks", "status")
    assert "too large for a settings file" in out


def test_project_install_refuses_a_link_that_leads_outside_the_project(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project, elsewhere = tmp_path / "repo", tmp_path / "elsewhere"
    (project / ".claude").mkdir(parents=True)
    elsewhere.mkdir()
    outside = elsewhere / "settings.json"
    outside.write_text('{"model": "opus"}\n')
    (project / ".claude" / "settings.json").symlink_to(outside)
    for verb in ("install", "uninstall"):
        status, _, err = mentectl(capsys, "hooks", verb, "claude-code", "--project", str(project))
        assert status != 0
        assert f"leads outside the project, to {outside}" in err
        assert "nothing was written" in err
    assert outside.read_text() == '{"model": "opus"}\n'
    assert sorted(p.name for p in elsewhere.iterdir()) == ["settings.json"]


def test_project_install_refuses_a_dangling_link_out_of_the_project(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "repo"
    (project / ".codex").mkdir(parents=True)
    target = tmp_path / "elsewhere" / "deep" / "hooks.json"
    (project / ".codex" / "hooks.json").symlink_to(target)
    status, _, err = mentectl(capsys, "hooks", "install", "codex", "--project", str(project))
    assert status != 0
    assert f"leads outside the project, to {target}" in err
    assert not (tmp_path / "elsewhere").exists()


def test_project_install_refuses_a_linked_settings_directory_outside(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project, shared = tmp_path / "repo", tmp_path / "shared-claude"
    project.mkdir()
    shared.mkdir()
    (project / ".claude").symlink_to(shared)
    status, _, err = mentectl(capsys, "hooks", "install", "claude-code", "--project", str(project))
    assert status != 0
    assert f"to {shared / 'settings.local.json'}" in err
    assert list(shared.iterdir()) == []


def test_project_install_follows_a_link_that_stays_in_the_project(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "repo"
    (project / ".claude").mkdir(parents=True)
    (project / "config").mkdir()
    real = project / "config" / "claude.json"
    real.write_text('{"model": "opus"}\n')
    (project / ".claude" / "settings.local.json").symlink_to("../config/claude.json")
    assert mentectl(capsys, "hooks", "install", "claude-code", "--project", str(project))[0] == 0
    assert our_hooks(real)
    assert (project / ".claude" / "settings.local.json").is_symlink()


@pytest.mark.parametrize("verb", [("install", "claude-code"), ("command", "codex")])
def test_a_socket_path_over_the_limit_is_refused(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], verb: tuple[str, str]
) -> None:
    # One byte over the kernel's limit: the hook could never connect there.
    limit = 103 if sys.platform == "darwin" else 107
    base = str(tmp_path / "s") + "/"
    too_long = base + "x" * (limit + 1 - len(os.fsencode(base)))
    assert len(os.fsencode(too_long)) == limit + 1
    status, out, err = mentectl(capsys, "--socket", too_long, "hooks", *verb)
    assert status == 1
    assert f"is {limit + 1} bytes long; Unix sockets allow {limit}" in err
    assert "Choose a shorter path" in err
    assert out == ""
    assert not (home / ".claude").exists()
    # At the limit it is written in.
    at_limit = too_long[:-1]
    status, out, _ = mentectl(capsys, "--socket", at_limit, "hooks", *verb)
    assert status == 0
    assert at_limit in out


def test_uninstall_removes_the_file_the_install_created(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = home / ".claude" / "settings.json"
    mentectl(capsys, "hooks", "install", "claude-code")
    mentectl(capsys, "hooks", "install", "claude-code", "--timeout", "7")  # a backup of ours
    assert (settings.parent / "settings.json.mented-bak").exists()
    status, out, _ = mentectl(capsys, "hooks", "uninstall", "claude-code")
    assert status == 0
    assert "it held nothing else, so it is removed" in out
    # ~/.claude held nothing else either (the install created it): it goes too.
    assert not settings.parent.exists()
    assert home.exists()


def test_uninstall_keeps_a_backup_that_differs_from_the_file_and_says_so(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(EXISTING)
    mentectl(capsys, "hooks", "install", "claude-code")
    backup = settings.parent / "settings.json.mented-bak"
    # The user changes a setting after the install: the backup is no longer the file.
    settings.write_text(settings.read_text().replace('"model"', '"modelx"'))
    status, out, _ = mentectl(capsys, "hooks", "uninstall", "claude-code")
    assert status == 0
    assert backup.read_text() == EXISTING
    assert "settings.json.mented-bak, the copy saved when mented last changed the file" in out
    assert "kept" in out
    assert json.loads(settings.read_text())["modelx"]


def test_uninstall_keeps_a_backup_that_holds_the_users_settings(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(EXISTING)
    mentectl(capsys, "hooks", "install", "claude-code")
    backup = settings.parent / "settings.json.mented-bak"
    assert backup.read_text() == EXISTING
    # The user then emptied the file of everything but the hook.
    scratch = tmp_path / "scratch.json"
    mentectl(capsys, "hooks", "install", "claude-code", "--settings", str(scratch))
    settings.write_text(scratch.read_text())
    mentectl(capsys, "hooks", "uninstall", "claude-code")
    assert not settings.exists()
    assert backup.read_text() == EXISTING


def test_uninstall_leaves_a_linked_file_in_place(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings, dotfiles = linked_settings(home, tmp_path)
    mentectl(capsys, "hooks", "install", "claude-code")
    mentectl(capsys, "hooks", "uninstall", "claude-code")
    assert settings.is_symlink()
    assert json.loads(dotfiles.read_text()) == {}


@pytest.mark.parametrize("agent", ["gemini-cli", "copilot-cli", "cursor"])
def test_other_agents_project_install_says_the_file_is_the_shared_one(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], agent: str
) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    status, out, _ = mentectl(capsys, "hooks", "install", agent, "--project", str(project))
    assert status == 0
    assert "has no uncommitted project file that mented knows of" in out
    assert f"`mentectl hooks install {agent}`" in out


def test_an_older_session_start_matcher_is_reported_and_widened(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Installs made before pinned rules ran SessionStart only on clear|compact."""
    mentectl(capsys, "hooks", "install", "claude-code")
    settings = home / ".claude" / "settings.json"
    doc = json.loads(settings.read_text())
    doc["hooks"]["SessionStart"][0]["matcher"] = "clear|compact"
    doc["hooks"]["SessionStart"][0]["hooks"][0]["statusMessage"] = (
        "mented: context reset, rules will be handed over again"
    )
    settings.write_text(json.dumps(doc, indent=2) + "\n")
    status, out, _ = mentectl(capsys, "hooks", "status")
    assert status == 1
    assert "runs only on clear|compact (an older install), so pinned rules miss new sessions" in out
    assert mentectl(capsys, "hooks", "install", "claude-code")[0] == 0
    (session_start,) = json.loads(settings.read_text())["hooks"]["SessionStart"]
    assert session_start["matcher"] == SESSION_START_MATCHER
    assert session_start["hooks"][0]["statusMessage"] == "mented: your pinned rules"
    assert mentectl(capsys, "hooks", "status")[0] == 0


def test_a_session_start_matcher_the_user_shares_is_left_and_ours_moves_out(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mentectl(capsys, "hooks", "install", "claude-code")
    settings = home / ".claude" / "settings.json"
    doc = json.loads(settings.read_text())
    group = doc["hooks"]["SessionStart"][0]
    group["matcher"] = "clear|compact"
    theirs = {"type": "command", "command": "echo reset"}
    group["hooks"].append(theirs)
    settings.write_text(json.dumps(doc, indent=2) + "\n")
    assert mentectl(capsys, "hooks", "install", "claude-code")[0] == 0
    groups = json.loads(settings.read_text())["hooks"]["SessionStart"]
    assert groups[0] == {"matcher": "clear|compact", "hooks": [theirs]}
    assert groups[1]["matcher"] == SESSION_START_MATCHER
    assert [hook["command"] for hook in groups[1]["hooks"]] == [
        our_hooks(settings, "SessionStart")[0]["command"]
    ]
