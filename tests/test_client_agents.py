"""The client's agent modules: one per agent the daemon serves, each of its kind of install."""

from __future__ import annotations

from pathlib import Path

import pytest

from mented.agents import AGENTS, module_of
from mented_client.agents import client_of
from mented_client.agents.base import ClientAgent
from mented_client.agents.extension_file import InProcessPlugin
from mented_client.agents.hook_file import HookFile
from mented_client.agents.plugin_file import PluginFile
from mented_client.agents.settings_hooks import SettingsHooks
from mented_client.cli import main
from mented_client.commands.output import CommandError

CLIENT_DIR = Path(__file__).parent.parent / "client" / "agents"
# The modules of the package that serve no one agent: the kinds of install and their base.
KINDS = {
    "__init__",
    "base",
    "settings_hooks",
    "hook_file",
    "in_process",
    "plugin_file",
    "extension_file",
    "findings",
}


def test_every_agent_has_exactly_one_client_module_and_no_module_serves_none() -> None:
    modules = {path.stem for path in CLIENT_DIR.glob("*.py")} - KINDS
    assert sorted(modules) == sorted(module_of(name) for name in AGENTS)
    assert "kilo" in modules
    assert "kiro_cli" in modules


# The kind of install of the agents that have no settings entries; the others' is SettingsHooks.
KIND_OF = {"cline-cli": HookFile, "opencode": PluginFile, "kilo": PluginFile, "pi": InProcessPlugin}


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_the_registry_gives_each_agent_its_own_client_of_its_kind_of_install(name: str) -> None:
    client = client_of(name)
    assert isinstance(client, ClientAgent)
    assert client.agent is AGENTS[name]
    assert client.name == name
    kinds = {SettingsHooks, HookFile, PluginFile, InProcessPlugin}
    kind = next(cls for cls in type(client).__mro__ if cls in kinds)
    assert kind is KIND_OF.get(name, SettingsHooks)
    assert isinstance(client, HookFile) == bool(AGENTS[name].hook_file)


def test_an_agent_mented_does_not_serve_has_no_client() -> None:
    with pytest.raises(KeyError):
        client_of("no-such-agent")


def test_kilo_is_opencodes_plugin_in_kilos_folder() -> None:
    kilo, opencode = client_of("kilo"), client_of("opencode")
    assert type(kilo) is type(opencode) is PluginFile
    assert kilo.agent.settings_path() != opencode.agent.settings_path()
    assert kilo.agent.settings_path().parts[-3:] == ("kilo", "plugin", "mented.js")


def test_claude_code_and_codex_register_the_mcp_server_their_own_way() -> None:
    own = {name for name in AGENTS if client_of(name).mcp_writer() is not None}
    assert own == {"claude-code", "codex"}
    assert {AGENTS[name].mcp.how for name in own} == {"claude-cli", "codex-toml"}


def test_only_codex_names_a_trust_step_for_setup() -> None:
    steps = {name: client_of(name).trust_step() for name in AGENTS}
    assert {name for name, step in steps.items() if step} == {"codex"}


@pytest.mark.parametrize("name", ["opencode", "kilo", "pi"])
def test_an_in_process_agent_has_no_hook_command_line(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    refused = client_of(name).refuse_command()
    assert isinstance(refused, CommandError)
    assert refused.status == 2
    assert main(["hooks", "command", name]) == 2
    assert f"mentectl hooks install {name}" in capsys.readouterr().err


def test_a_settings_agent_prints_its_hook_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert client_of("claude-code").refuse_command() is None
    assert main(["hooks", "command", "claude-code"]) == 0
    assert "shim.py claude-code" in capsys.readouterr().out


# What `hooks install` says first, installing and then installing again, per kind of install.
SAID_BY_INSTALL = {
    "gemini-cli": (
        "Installed the mented hook for Gemini CLI in ~/.gemini/settings.json.",
        "The mented hook for Gemini CLI is already in ~/.gemini/settings.json; nothing changed.",
    ),
    "opencode": (
        "Installed mented's plugin for opencode in ~/.config/opencode/plugins/mented.js.",
        "mented's plugin for opencode is already in ~/.config/opencode/plugins/mented.js; "
        "nothing changed.",
    ),
    "pi": (
        "Installed mented's extension for pi in ~/.pi/agent/extensions/mented.ts.",
        "mented's extension for pi is already in ~/.pi/agent/extensions/mented.ts; "
        "nothing changed.",
    ),
}


@pytest.mark.parametrize("agent", sorted(SAID_BY_INSTALL))
def test_an_install_says_what_it_wrote_and_an_install_again_that_nothing_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], agent: str
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("GEMINI_CLI_HOME", "MENTED_SOCKET", "XDG_CONFIG_HOME", "PI_CODING_AGENT_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    for said in SAID_BY_INSTALL[agent]:
        assert main(["hooks", "install", agent]) == 0
        assert capsys.readouterr().out.splitlines()[0] == said
