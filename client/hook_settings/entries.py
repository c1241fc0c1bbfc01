"""Our hook entries in an agent's settings file: where they are, and how they are found.

The file layout we edit (Claude Code's `settings.json`, Codex's `hooks.json`)::

    {"hooks": {"PreToolUse": [{"matcher": "Bash",
                               "hooks": [{"type": "command", "command": "...", "timeout": 5,
                                          "if": "Bash(*git*commit*)",
                                          "statusMessage": "mented: ..."}, ...]},
                              {"matcher": "^(?:mcp__.*__create_pull_request|...)$",
                               "hooks": [{... the same command}]}],
               "SessionStart": [{"matcher": "clear|compact|resume|startup",
                                 "hooks": [{... the same command}]}]}}

Other agents lay the file out otherwise (`mented.agents.pretooluse.SettingsLayout`):
Copilot CLI and Cursor list the entries themselves under the event, in a file
with `"version": 1` (`{"hooks": {"PreToolUse": [{"type": "command", "bash": ...}]}}`);
Copilot's command is in `bash`, Gemini CLI's time limit in milliseconds. The
same splicing serves all of them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mented.agents.pretooluse import SettingsLayout
from mented_client.hook_settings.command import is_mented_command
from mented_client.hook_settings.json_text import SettingsError, _Node, _root

# Claude Code's and Codex's layout: matcher groups, `command`, `timeout` in seconds.
NESTED = SettingsLayout()


def _ours(layout: SettingsLayout) -> frozenset[str]:
    """The fields of our entry that an install rewrites; others are only added when missing."""
    fields = {"type", layout.command_key, "if"}
    if layout.timeout_key is not None:
        fields.add(layout.timeout_key)
    return frozenset(fields)


@dataclass(frozen=True)
class MentedEntry:
    """One of our hook entries in a settings file."""

    event: str  # the key under `hooks`: PreToolUse, SessionStart
    group: int  # index in hooks.<event>
    hook: int  # index in that group's hooks
    command: str
    timeout: object
    matcher: str | None = None  # the group's matcher
    handler: dict[str, Any] = field(default_factory=dict, compare=False)  # the hook as written


def _hooks_object(root: _Node, path: Path) -> _Node | None:
    hooks = root.member("hooks")
    if hooks is not None and hooks.kind != "object":
        raise SettingsError(f"{path}: `hooks` is not a JSON object; fix it by hand first")
    return hooks


def _event_list(root: _Node, path: Path, event: str) -> _Node | None:
    hooks = _hooks_object(root, path)
    if hooks is None:
        return None
    groups = hooks.member(event)
    if groups is None:
        return None
    if groups.kind != "array":
        raise SettingsError(f"{path}: `hooks.{event}` is not a JSON array; fix it by hand first")
    return groups


def find_entries(
    text: str, path: Path, shim_path: Path | None = None, layout: SettingsLayout = NESTED
) -> list[MentedEntry]:
    """Our hook entries in the settings `text`, under any event, in file order.

    In a flat layout (`layout.nested` false) an entry's `hook` is -1: it is the
    event list's item `group` itself.
    """
    root = _root(text, path)
    hooks = _hooks_object(root, path)
    if hooks is None:
        return []
    doc = json.loads(text)["hooks"]
    found = []
    key = layout.command_key
    for event in dict.fromkeys(name for name, _, _ in hooks.members):
        if _event_list(root, path, event) is None:
            continue
        if not layout.nested:
            for g, hook in enumerate(doc[event]):
                if isinstance(hook, dict) and is_mented_command(hook.get(key), shim_path):
                    matcher = hook.get("matcher")
                    found.append(
                        MentedEntry(
                            event,
                            g,
                            -1,
                            hook[key],
                            hook.get(layout.timeout_key) if layout.timeout_key else None,
                            matcher if isinstance(matcher, str) else None,
                            hook,
                        )
                    )
            continue
        for g, group in enumerate(doc[event]):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(handlers, list):
                continue
            matcher = group.get("matcher")
            for h, hook in enumerate(handlers):
                if isinstance(hook, dict) and is_mented_command(hook.get(key), shim_path):
                    found.append(
                        MentedEntry(
                            event,
                            g,
                            h,
                            hook[key],
                            hook.get(layout.timeout_key) if layout.timeout_key else None,
                            matcher if isinstance(matcher, str) else None,
                            hook,
                        )
                    )
    return found


def missing_events(entries: list[MentedEntry], events: list[str]) -> list[str]:
    """The events in `events` none of our `entries` is listed under (an older install)."""
    have = {entry.event for entry in entries}
    return [event for event in events if event not in have]


def _entry_node(root: _Node, path: Path, entry: MentedEntry) -> tuple[_Node, _Node | None]:
    """The event's group list and the hooks list of the group holding `entry` (None: flat)."""
    groups = _event_list(root, path, entry.event)
    assert groups is not None
    if entry.hook < 0:
        return groups, None
    group = groups.items[entry.group]
    hooks = group.member("hooks")
    assert hooks is not None
    return groups, hooks


def _handler_node(root: _Node, path: Path, entry: MentedEntry) -> _Node:
    """The entry's own object."""
    groups, hooks = _entry_node(root, path, entry)
    return groups.items[entry.group] if hooks is None else hooks.items[entry.hook]


def _our_words(key: str, value: object) -> bool:
    """Whether `value` is a status message an older install wrote (it names mented): it is
    replaced, where the user's own is kept."""
    return key == "statusMessage" and isinstance(value, str) and value.startswith("mented:")
