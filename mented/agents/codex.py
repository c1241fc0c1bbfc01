"""Codex CLI: `PreToolUse` and `SessionStart` command hooks in `hooks.json`, as Claude Code.

Settings: `~/.codex/hooks.json` (user; `$CODEX_HOME/hooks.json` when that is set)
or `<project>/.codex/hooks.json` (loaded only when the project is trusted).

Besides shell commands (`tool_name` "Bash"), Codex runs `PreToolUse` for its
file edits, `tool_name` "apply_patch" with the patch text as
`tool_input.command` (its matcher also takes the aliases "Write" and "Edit"),
and for MCP tools, `mcp__SERVER__TOOL` with the tool's arguments as
`tool_input` (codex-rs core/src/tools/hook_names.rs, handlers/apply_patch.rs,
handlers/mcp.rs). A command handler has no condition of its own (no `if`):
every shell command starts the hook.

Codex runs a hook it does not manage only once the user has trusted it in its
`/hooks` view, and skips it without a word when it is not trusted yet or has
changed since. This module repeats Codex's rule so that `mentectl hooks status`
and `mentectl doctor` can say so, and so that tests can pre-trust a hook in a
temporary `CODEX_HOME` (`trusted_hash`, `state_key`, `trust_config_toml`).

The rule, from codex-rs (hooks/src/engine/discovery.rs `command_hook_hash`,
config/src/fingerprint.rs `version_for_toml`, hooks/src/lib.rs `hook_key`) and
checked against the hashes Codex CLI 0.171 reports (`codex app-server`,
`hooks/list`):

- what is hashed is the entry's normalized identity::

      {"event_name": "pre_tool_use", "matcher": "Bash",
       "hooks": [{"type": "command", "command": "...", "timeout": 5, "async": false,
                  "statusMessage": "..."}]}

  `timeout` defaults to 600 and is at least 1, `async` defaults to false,
  `statusMessage` and `additionalContextLimit` appear only when set, `matcher`
  only when set on an event that uses matchers; `commandWindows` is left out
  (on Unix) and so is anything else in the group;
- serialized as compact JSON with the object keys sorted, non-ASCII as UTF-8;
- hashed with SHA-256, written `sha256:<hex>`;
- recorded in `$CODEX_HOME/config.toml` as
  `[hooks.state."<hooks.json path>:<event label>:<group index>:<hook index>"]`
  `trusted_hash = "sha256:..."` (and `enabled = false` when the user turned it off).
  The path is `$CODEX_HOME` resolved through symlinks, else `$HOME/.codex` as is.

`PostToolUse` (matcher `Bash`) is where a commit whose message was unknown
before it ran is checked (mented.afterchecks): its input is the `PreToolUse` one
with `tool_response` (post-tool-use.command.input.schema.json), its answer
`hookSpecificOutput.additionalContext` (post-tool-use.command.output.schema.json,
both embedded in the 0.171 binary), seen in the next model request.

MCP servers: `[mcp_servers.NAME]` tables (`command`, `args`) in the same
`config.toml`; `codex mcp list` lists them. Codex starts them with a minimal
environment (HOME, PATH, USER, ...; no XDG_RUNTIME_DIR, no MENTED_SOCKET).
"""

from __future__ import annotations

import enum
import hashlib
import json
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mented import paths
from mented.agents.pretooluse import (
    POST_TOOL_USE,
    EntryTrust,
    InstalledEntry,
    McpSettings,
    PreToolUseAgent,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

TRUST_FIX = (
    "open Codex, type `/hooks`, review the mented entry and trust it "
    "(Codex skips an untrusted hook without a word)"
)


def entry_trust(entry: InstalledEntry) -> EntryTrust:
    """Whether Codex will run one of our entries, and the step that fixes it when not."""
    verdict = hook_trust(entry)
    if verdict.runs:
        return EntryTrust(str(verdict.trust))
    if verdict.trust is Trust.DISABLED:
        fix = "open Codex, type `/hooks` and turn the mented entry back on"
    elif verdict.trust is Trust.UNKNOWN:
        fix = f"check the file, then {TRUST_FIX}"
    else:
        fix = TRUST_FIX
    return EntryTrust(
        str(verdict.trust),
        f"Codex will not run its {entry.event} entry: {verdict.trust} ({verdict.detail})",
        fix,
    )


AGENT = PreToolUseAgent(
    pinned_rules=True,
    name="codex",
    title="Codex CLI",
    config_dir_env="CODEX_HOME",
    config_dir_name=".codex",
    settings_name="hooks.json",
    project_settings_file=".codex/hooks.json",
    patch_tools=frozenset({"apply_patch"}),
    post_tool_event=POST_TOOL_USE,
    no_project_local_file=(
        "Codex reads a project's hooks only from .codex/hooks.json and .codex/config.toml "
        "and has no uncommitted variant, so this file names this machine's interpreter and "
        "socket: keep it out of git (add it to .git/info/exclude), or install for your user "
        "instead (`mentectl hooks install codex`, which covers every project)."
    ),
    install_note=(
        "Codex runs a hook it does not manage only after you trust it: open Codex, type "
        "`/hooks`, review the mented entries and trust them (again after any change)."
    ),
    entry_trust=entry_trust,
    mcp=McpSettings(how="codex-toml", file_name="config.toml", list_command="codex mcp list"),
)

# The events whose `matcher` Codex dispatches on; on the others it is ignored,
# and left out of the hash (hooks/src/lib.rs `HOOK_EVENT_NAMES_WITH_MATCHERS`).
_EVENTS_WITH_MATCHERS = frozenset(
    {
        "PreToolUse",
        "PermissionRequest",
        "PostToolUse",
        "PreCompact",
        "PostCompact",
        "SessionStart",
        "SubagentStart",
        "SubagentStop",
    }
)
_DEFAULT_TIMEOUT_S = 600


def event_key_label(event: str) -> str:
    """Codex's label for a hook event in state keys and hashes: `PreToolUse` -> `pre_tool_use`."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", event).lower()


def trusted_hash(event: str, handler: Mapping[str, object], matcher: str | None = None) -> str:
    """The `trusted_hash` Codex records when the user trusts this command hook.

    Args:
        event: the event the hook is listed under in hooks.json (`PreToolUse`).
        handler: the hook object as written in hooks.json (`{"type": "command", ...}`).
        matcher: the `matcher` of its group, if it has one.

    Raises:
        ValueError: the handler is not a command hook Codex would load.
    """
    command = handler.get("command")
    if handler.get("type") != "command" or not isinstance(command, str) or not command.strip():
        raise ValueError("not a command hook with a command")
    timeout = handler.get("timeout")  # 0.171 ignores `timeoutSec` (a later alias)
    if timeout is None:
        timeout = _DEFAULT_TIMEOUT_S
    if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 0:
        raise ValueError(f"timeout {timeout!r} is not a whole number of seconds")
    is_async = handler.get("async", False)
    if not isinstance(is_async, bool):
        raise ValueError(f"async {is_async!r} is not true or false")  # noqa: TRY004 - one error kind for "Codex cannot load it"
    hook: dict[str, object] = {
        "type": "command",
        "command": command,
        "timeout": max(1, timeout),
        "async": is_async,
    }
    for name in ("statusMessage", "additionalContextLimit"):
        if handler.get(name) is not None:
            hook[name] = handler[name]
    identity: dict[str, object] = {"event_name": event_key_label(event), "hooks": [hook]}
    if matcher is not None and event in _EVENTS_WITH_MATCHERS:
        identity["matcher"] = matcher
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    try:
        data = text.encode()
    except UnicodeEncodeError as exc:  # a lone surrogate: Codex cannot read the file either
        raise ValueError("the hook holds text that is not valid Unicode") from exc
    return "sha256:" + hashlib.sha256(data).hexdigest()


def state_key(hooks_json: Path | str, event: str, group: int, hook: int) -> str:
    """The key of a hook's entry under `hooks.state` in Codex's config.toml.

    `hooks_json` is the file's path as Codex names it (see `user_hooks_path`).
    """
    return f"{hooks_json}:{event_key_label(event)}:{group}:{hook}"


def codex_home() -> Path:
    """Codex's home as Codex names it: `$CODEX_HOME` resolved, else `$HOME/.codex` as is."""
    override = os.environ.get("CODEX_HOME")
    if override:
        return Path(os.path.realpath(override))
    return paths.home() / ".codex"


def user_hooks_path() -> Path:
    """The user-level hooks.json as Codex names it in its state keys."""
    return codex_home() / "hooks.json"


def config_toml_path() -> Path:
    """Where Codex keeps the user's hook state (trust and on/off)."""
    return codex_home() / "config.toml"


def trust_states(hooks_json: Path) -> dict[str, str]:
    """The `hooks.state` key and trusted hash of every command hook in `hooks_json`.

    For tests that pre-trust hooks in a temporary `CODEX_HOME`; `hooks_json`
    must be named as Codex names it (`user_hooks_path()`).
    """
    doc = json.loads(hooks_json.read_text(encoding="utf-8"))
    states = {}
    for event, groups in (doc.get("hooks") or {}).items():
        for g, group in enumerate(groups):
            for h, handler in enumerate(group.get("hooks") or []):
                if isinstance(handler, dict) and handler.get("type") == "command":
                    key = state_key(hooks_json, event, g, h)
                    states[key] = trusted_hash(event, handler, group.get("matcher"))
    return states


def trust_config_toml(hooks_json: Path) -> str:
    """config.toml text that trusts every command hook in `hooks_json`, to append to the file.

    Example: `config.write_text(config.read_text() + trust_config_toml(user_hooks_path()))`.
    """
    return "".join(
        f"\n[hooks.state.{json.dumps(key)}]\ntrusted_hash = {json.dumps(value)}\n"
        for key, value in trust_states(hooks_json).items()
    )


# ------------------------------------------------------------------ the verdict


class Trust(enum.StrEnum):
    """Whether Codex will run a hook entry."""

    TRUSTED = "trusted"
    UNTRUSTED = "not trusted yet"
    CHANGED = "changed since it was trusted"
    DISABLED = "turned off in Codex"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class HookTrust:
    """Codex's view of one entry: the verdict, the state key it looked up, and why."""

    trust: Trust
    key: str
    detail: str

    @property
    def runs(self) -> bool:
        return self.trust is Trust.TRUSTED


def _key_sources(hooks_json: Path) -> list[str]:
    """The names Codex may give `hooks_json`: as given, and with its folder resolved.

    Codex resolves `$CODEX_HOME` but not `~/.codex`, and names a project's file
    after the directory it was started in.
    """
    # Lexically, as Codex does: `..` goes, symlinks stay (Path has no such operation).
    given = Path(os.path.abspath(hooks_json))  # noqa: PTH100
    resolved = Path(os.path.realpath(given.parent)) / given.name
    return list(dict.fromkeys(str(path) for path in (given, resolved)))


def entry_state_keys(hooks_json: Path, event: str, group: int, hook: int) -> list[str]:
    """Every `hooks.state` key under which Codex may keep this entry's trust (each name
    Codex may give `hooks_json`)."""
    return [state_key(source, event, group, hook) for source in _key_sources(hooks_json)]


def read_hook_states(config_toml: Path) -> dict[str, dict[str, object]]:
    """The `hooks.state` table of Codex's config.toml (keys trimmed, as Codex reads them).

    Raises:
        OSError: the file cannot be read (a missing file is no state: `{}`).
        ValueError: it is not valid TOML.
    """
    try:
        with config_toml.open("rb") as handle:
            config = tomllib.load(handle)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(str(exc)) from exc
    hooks = config.get("hooks")
    state = hooks.get("state") if isinstance(hooks, dict) else None
    if not isinstance(state, dict):
        return {}
    return {
        key.strip(): value
        for key, value in state.items()
        if isinstance(value, dict) and key.strip()
    }


def hook_trust(entry: InstalledEntry, *, config_toml: Path | None = None) -> HookTrust:
    """Whether Codex will run `entry`, going by the hook state in `config_toml`.

    `config_toml` defaults to the user's (`config_toml_path()`), the only one
    Codex takes hook state from.
    """
    config_toml = config_toml or config_toml_path()
    keys = [
        state_key(source, entry.event, entry.group, entry.hook)
        for source in _key_sources(entry.settings)
    ]
    try:
        current = trusted_hash(entry.event, entry.handler, entry.matcher)
    except ValueError as exc:
        return HookTrust(Trust.UNKNOWN, keys[0], f"Codex cannot load this entry: {exc}")
    try:
        states = read_hook_states(config_toml)
    except (OSError, ValueError) as exc:
        return HookTrust(Trust.UNKNOWN, keys[0], f"cannot read {config_toml}: {exc}")
    found = [(key, states[key]) for key in keys if key in states]
    for key, state in found:
        if state.get("enabled") is False:
            return HookTrust(Trust.DISABLED, key, f"turned off in {config_toml}")
    for key, state in found:
        if state.get("trusted_hash") == current:
            return HookTrust(Trust.TRUSTED, key, f"trusted in {config_toml}")
    if any(isinstance(state.get("trusted_hash"), str) for _, state in found):
        key = found[0][0]
        return HookTrust(Trust.CHANGED, key, f"the entry changed since it was trusted ({key})")
    return HookTrust(Trust.UNTRUSTED, keys[0], f"no trust recorded for it in {config_toml}")
