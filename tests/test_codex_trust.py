"""Codex's hook trust: the hash it records, and `hooks status` / `doctor` telling the user.

The expected hashes are what Codex CLI 0.171.0 itself reported as `currentHash`
(`codex app-server`, request `hooks/list`) for these exact hooks.json entries,
with CODEX_HOME=/tmp/ch1 and /tmp/ch2; a hook pre-trusted with `trusted_hash`
was then run by `codex exec` (its SessionStart hook fired).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mented.agents import codex
from mented.agents.pretooluse import InstalledEntry
from mented.paths import socket_path
from mented_client.cli import main
from mented_client.commands import doctor
from mented_client.hook_settings import command_argv

SHIM_COMMAND = (
    "/usr/bin/python3.11 -I -S '/a b/mented_client/shim.py' codex /run/user/1000/mented/mented.sock"
)

# (event, matcher, handler as written in hooks.json, currentHash from Codex 0.171.0)
CODEX_0_171_HASHES: list[tuple[str, str | None, dict[str, Any], str]] = [
    (
        "PreToolUse",
        "^Bash$",
        {"type": "command", "command": "echo hello", "timeout": 5, "statusMessage": "mented"},
        "sha256:2ba61cc1e5f38eeb89ab218500be8d088818abb1cab0dfbef556893276f5ea3e",
    ),
    (
        "SessionStart",
        "startup|resume",
        {"type": "command", "command": "echo hello"},
        "sha256:4f20b3731d9f9a626bac17004b138aa2f525aba2cb0e4b7b6d365c98aa87d137",
    ),
    (
        "PreToolUse",
        None,
        {"type": "command", "command": "no matcher", "timeout": 0},
        "sha256:11f050e507edd860175ceb8d49a88dd5ab424376a8f5d42dbfc56eec42a30c1e",
    ),
    (
        "PreToolUse",
        "",
        {"type": "command", "command": "empty matcher"},
        "sha256:d88ba93a23085e7faa6bcea1a6cf76cded00fcf409f350fb9fc5d17c3a237755",
    ),
    (
        "PreToolUse",
        "*",
        {"type": "command", "command": "star", "timeoutSec": 7},
        # Codex 0.171 ignores `timeoutSec` (listed at the default 600 s).
        "sha256:f9cf5d7454f3ab4b24187e5915408c5e2d95bc7ec7e61b9c1c07379d1caa791e",
    ),
    (
        "PreToolUse",
        "*",
        {
            "type": "command",
            "command": 'second "q" \\ \u00e9 \t tab \u0001 ctl / </>',
            "async": True,
        },
        "sha256:8ab0bc1441006149b780d6c926c2cfb1bf6e2bc5ded630c93206af4b2f8403b1",
    ),
    (
        "PreToolUse",
        "Bash",
        {
            "type": "command",
            "command": SHIM_COMMAND,
            "timeout": 5,
            "statusMessage": "mented: rules for this command",
            "commandWindows": "win",
        },
        "sha256:3249e6fccbcde48b344e170ececdd5cda145bff16de05940b1bd1c99d0f6eb59",
    ),
    (
        "PreToolUse",
        "Bash",
        {"type": "command", "command": "acl", "additionalContextLimit": 100},
        "sha256:8e93159ef00844257a4e283bfce7a079434e41bcc6f51d8794571a8717710e5d",
    ),
    (
        "PostCompact",
        "manual",
        {"type": "command", "command": "pc"},
        "sha256:83cd36d3cf69b16627998517d3037d52358b33a49e61e9219e79282089e2407b",
    ),
    (
        "SessionStart",
        None,
        {"type": "command", "command": "ss"},
        "sha256:12963c45bb2efddb001c607c8b80fbf8f2de41c482a49958ef735af040ed6843",
    ),
    (
        "UserPromptSubmit",
        "foo",  # not an event Codex matches on: the matcher is left out of the hash
        {"type": "command", "command": "ups"},
        "sha256:132d123ef00a4c9bd960f3d1f17f4f5ea7f130a2059240d444d9b3803bb76aa1",
    ),
]


@pytest.mark.parametrize(("event", "matcher", "handler", "expected"), CODEX_0_171_HASHES)
def test_the_hash_is_the_one_codex_records(
    event: str, matcher: str | None, handler: dict[str, Any], expected: str
) -> None:
    assert codex.trusted_hash(event, handler, matcher) == expected


def test_state_keys_name_the_file_the_event_and_the_positions() -> None:
    # As Codex 0.171 listed them (`key` in `hooks/list`).
    assert (
        codex.state_key(Path("/tmp/ch2/hooks.json"), "PreToolUse", 2, 1)
        == "/tmp/ch2/hooks.json:pre_tool_use:2:1"
    )
    assert (
        codex.state_key("/tmp/ch1/hooks.json", "SessionStart", 0, 0)
        == "/tmp/ch1/hooks.json:session_start:0:0"
    )


@pytest.mark.parametrize(
    "handler",
    [
        {"type": "prompt", "command": "x"},
        {"type": "command", "command": "  "},
        {"type": "command", "command": "x", "timeout": 1.5},
        {"type": "command", "command": "x", "async": "yes"},
    ],
)
def test_an_entry_codex_cannot_load_has_no_hash(handler: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"."):
        codex.trusted_hash("PreToolUse", handler, "Bash")


# ------------------------------------------------------------------ the verdicts

HANDLER = {"type": "command", "command": SHIM_COMMAND, "timeout": 5}


@pytest.fixture
def codex_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "codex-home"
    home.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(home))
    return home


def entry(home: Path, handler: dict[str, Any] | None = None) -> InstalledEntry:
    return InstalledEntry(home / "hooks.json", "PreToolUse", 0, 0, handler or HANDLER, "Bash")


def write_state(home: Path, key: str, **fields: object) -> None:
    lines = [f"[hooks.state.{json.dumps(key)}]"]
    lines += [f"{name} = {json.dumps(value)}" for name, value in fields.items()]
    (home / "config.toml").write_text('model = "x"\n\n' + "\n".join(lines) + "\n")


def test_no_config_means_not_trusted_yet(codex_home: Path) -> None:
    verdict = codex.hook_trust(entry(codex_home))
    assert verdict.trust is codex.Trust.UNTRUSTED
    assert verdict.key == f"{codex_home}/hooks.json:pre_tool_use:0:0"
    assert not verdict.runs


def test_a_matching_hash_is_trusted(codex_home: Path) -> None:
    key = f"{codex_home}/hooks.json:pre_tool_use:0:0"
    write_state(
        codex_home, f"  {key} ", trusted_hash=codex.trusted_hash("PreToolUse", HANDLER, "Bash")
    )
    verdict = codex.hook_trust(entry(codex_home))
    assert verdict.trust is codex.Trust.TRUSTED
    assert verdict.runs


def test_an_entry_changed_since_it_was_trusted(codex_home: Path) -> None:
    key = f"{codex_home}/hooks.json:pre_tool_use:0:0"
    write_state(codex_home, key, trusted_hash=codex.trusted_hash("PreToolUse", HANDLER, "Bash"))
    changed = {**HANDLER, "timeout": 6}
    verdict = codex.hook_trust(entry(codex_home, changed))
    assert verdict.trust is codex.Trust.CHANGED
    assert not verdict.runs


def test_a_trusted_entry_at_another_position_is_not_this_one(codex_home: Path) -> None:
    key = f"{codex_home}/hooks.json:pre_tool_use:1:0"
    write_state(codex_home, key, trusted_hash=codex.trusted_hash("PreToolUse", HANDLER, "Bash"))
    assert codex.hook_trust(entry(codex_home)).trust is codex.Trust.UNTRUSTED


def test_an_entry_turned_off_in_codex(codex_home: Path) -> None:
    key = f"{codex_home}/hooks.json:pre_tool_use:0:0"
    trusted = codex.trusted_hash("PreToolUse", HANDLER, "Bash")
    write_state(codex_home, key, trusted_hash=trusted, enabled=False)
    assert codex.hook_trust(entry(codex_home)).trust is codex.Trust.DISABLED


def test_an_unreadable_config_is_unknown(codex_home: Path) -> None:
    (codex_home / "config.toml").write_text("[hooks.state\nbroken")
    verdict = codex.hook_trust(entry(codex_home))
    assert verdict.trust is codex.Trust.UNKNOWN
    assert str(codex_home / "config.toml") in verdict.detail
    (codex_home / "config.toml").unlink()
    (codex_home / "config.toml").mkdir()
    assert codex.hook_trust(entry(codex_home)).trust is codex.Trust.UNKNOWN


def test_a_symlinked_codex_home_is_named_resolved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Codex canonicalizes $CODEX_HOME: the key names the real directory.
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    monkeypatch.setenv("CODEX_HOME", str(link))
    assert codex.user_hooks_path() == real / "hooks.json"
    key = f"{real}/hooks.json:pre_tool_use:0:0"
    write_state(real, key, trusted_hash=codex.trusted_hash("PreToolUse", HANDLER, "Bash"))
    assert codex.hook_trust(entry(link)).trust is codex.Trust.TRUSTED


def test_trust_config_toml_trusts_every_command_hook(codex_home: Path) -> None:
    hooks_json = codex_home / "hooks.json"
    hooks_json.write_text(
        json.dumps(
            {
                "hooks": {
                    "PreToolUse": [{"matcher": "Bash", "hooks": [HANDLER]}],
                    "SessionStart": [{"matcher": "clear|compact", "hooks": [HANDLER]}],
                }
            }
        )
    )
    (codex_home / "config.toml").write_text("model = 'x'\n" + codex.trust_config_toml(hooks_json))
    for event in ("PreToolUse", "SessionStart"):
        matcher = "Bash" if event == "PreToolUse" else "clear|compact"
        installed = InstalledEntry(hooks_json, event, 0, 0, HANDLER, matcher)
        assert codex.hook_trust(installed).trust is codex.Trust.TRUSTED


# ------------------------------------------------------------- what the user reads


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, codex_home: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("MENTED_SOCKET", raising=False)
    monkeypatch.chdir(tmp_path)
    return home


def mentectl(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    status = main(list(args))
    return status, capsys.readouterr().out


def test_status_says_codex_will_not_run_an_untrusted_hook_and_how_to_fix_it(
    home: Path, codex_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mentectl(capsys, "hooks", "install", "codex")
    status, out = mentectl(capsys, "hooks", "status", "codex")
    assert status == 1
    lines = [line for line in out.splitlines() if "hooks.json: " in line]
    assert len(lines) == 3
    for line, event in zip(lines, ("PreToolUse", "SessionStart", "PostToolUse"), strict=True):
        assert f"{event} installed, Codex will not run its {event} entry: not trusted yet" in line
        assert "open Codex, type `/hooks`, review the mented entry and trust it" in line
        assert "ok" not in line.split(", ", 1)[1].split()
    report = json.loads(mentectl(capsys, "hooks", "status", "--json")[1])
    assert [hook["trust"] for hook in report["codex"][0]["hooks"]] == ["not trusted yet"] * 3

    # The user trusts every entry in Codex's /hooks view.
    hooks_json = codex_home / "hooks.json"
    (codex_home / "config.toml").write_text(codex.trust_config_toml(hooks_json))
    status, out = mentectl(capsys, "hooks", "status")
    assert status == 0
    assert f"{hooks_json}: PreToolUse installed (trusted), ok" in out

    # An install with another timeout changes the entry: Codex asks again.
    mentectl(capsys, "hooks", "install", "codex", "--timeout", "7")
    status, out = mentectl(capsys, "hooks", "status")
    assert status == 1
    assert "Codex will not run its PreToolUse entry: changed since it was trusted" in out


def test_doctor_fails_an_untrusted_codex_hook_with_the_step_that_fixes_it(
    home: Path, codex_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mentectl(capsys, "hooks", "install", "codex")
    # The socket the install wrote in: doctor fires only this installation's command line.
    checks = doctor.check_hooks(doctor.FireTarget(socket_path(), daemon_up=False, budget_ms=250))
    trust = [check for check in checks if check.link.startswith("hook codex")]
    assert [check.state for check in trust] == ["fail", "fail", "fail"]
    for check in trust:
        assert "not trusted yet" in check.detail
        assert check.fix is not None
        assert "`/hooks`" in check.fix
        assert "trust it" in check.fix
    (codex_home / "config.toml").write_text(codex.trust_config_toml(codex_home / "hooks.json"))
    checks = doctor.check_hooks(doctor.FireTarget(socket_path(), daemon_up=False, budget_ms=250))
    trust = [check for check in checks if check.link.startswith("hook codex")]
    assert [check.state for check in trust] == ["ok", "ok", "ok"]
    assert all("(trusted)" in check.detail for check in trust)


def test_the_codex_entry_names_mented_in_its_status_message(
    home: Path, codex_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mentectl(capsys, "hooks", "install", "codex")
    doc = json.loads((codex_home / "hooks.json").read_text())
    for event in ("PreToolUse", "SessionStart"):
        (hook,) = doc["hooks"][event][0]["hooks"]
        assert hook["statusMessage"].startswith("mented:")
        assert command_argv(hook["command"]).argv[-2] == "codex"


def test_hooks_uninstall_codex_takes_out_codexs_trust_in_mented_and_keeps_the_users(
    home: Path, codex_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hooks_json = codex_home / "hooks.json"
    mine = {"type": "command", "command": "echo mine", "timeout": 5}
    hooks_json.write_text(
        json.dumps({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [mine]}]}})
    )
    own = codex.trust_config_toml(hooks_json)  # the user trusted their own hook
    mentectl(capsys, "hooks", "install", "codex")
    ours = codex.trust_config_toml(hooks_json).replace(own, "")
    assert ours.count("[hooks.state.") == 3  # then mented's PreToolUse, PostToolUse, SessionStart
    config = codex_home / "config.toml"
    user_config = '# mine\nmodel = "o4-mini"\n'
    config.write_text(user_config + own + ours)

    status, out = mentectl(capsys, "hooks", "uninstall", "codex")
    assert status == 0
    assert config.read_text() == user_config + own  # byte for byte, but mented's
    assert "Removed Codex's trust entries for mented's hooks from" in out
    assert codex.hook_trust(
        InstalledEntry(hooks_json, "PreToolUse", 0, 0, mine, "Bash")
    ).runs  # the user's hook is still trusted where it is

    # Nothing of mented's is left to remove: a second run says so and changes nothing.
    status, out = mentectl(capsys, "hooks", "uninstall", "codex", "--json")
    assert json.loads(out)["trust_removed"] == []
    assert config.read_text() == user_config + own


def test_hooks_uninstall_codex_removes_a_config_toml_that_held_only_mented_trust(
    home: Path, codex_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mentectl(capsys, "hooks", "install", "codex")
    config = codex_home / "config.toml"
    config.write_text(codex.trust_config_toml(codex_home / "hooks.json"))
    status, out = mentectl(capsys, "hooks", "uninstall", "codex")
    assert status == 0
    assert "it held only Codex's trust entries for mented's hooks" in out
    assert not config.exists()
    assert not codex_home.exists() or list(codex_home.iterdir()) == []
