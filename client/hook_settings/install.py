"""Our hook entries spliced into a settings file: added, or updated where they stand.

Which groups, matchers and conditions: the agent's (`Agent.hook_groups`), from
the action table (mented/registration.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mented.agents.pretooluse import SettingsLayout
from mented_client.hook_settings.entries import (
    NESTED,
    MentedEntry,
    _event_list,
    _handler_node,
    _hooks_object,
    _our_words,
    _ours,
    find_entries,
)
from mented_client.hook_settings.json_text import (
    _insert_child,
    _Parser,
    _render,
    _root,
    _set_member,
)
from mented_client.hook_settings.removal import _remove_entries


def add_hook(
    text: str,
    path: Path,
    *,
    groups: dict[str, list[dict[str, Any]]],
    shim_path: Path | None,
    layout: SettingsLayout = NESTED,
) -> str:
    """`text` with our hooks installed (unchanged when they already are, exactly).

    `groups` maps each event to the agent's matcher groups holding our entries
    for it (`Agent.hook_groups`; in a flat `layout`, the entries themselves).
    Per event: when our entries there are laid out as `groups` says (the same
    matchers and conditions, in order), each one's command and timeout are
    written into it (an older interpreter or shim path is updated in place)
    with the fields it lacks; otherwise (the action table asks for other tools
    now) ours are removed and `groups` added, a field the user set on our first
    entry (their own `statusMessage`) carried over.

    Raises:
        SettingsError: the text is not a JSON object, or `hooks` is not laid out as expected.
    """
    if not text.strip():
        text = "{}\n"
    for name, value in layout.top.items():
        if _root(text, path).member(name) is None:
            text = _set_member(text, _root(text, path), name, value)
    for event, event_groups in groups.items():
        text = _add_event_hooks(text, path, event, event_groups, shim_path, layout=layout)
    if layout.enable is not None:
        text = _enable(text, path, *layout.enable)
    return text


def _enable(text: str, path: Path, name: str, member: str) -> str:
    """`name.member` set to true when missing; a value the user set stays."""
    root = _root(text, path)
    holder = root.member(name)
    if holder is None:
        return _set_member(text, root, name, {member: True})
    if holder.kind != "object" or holder.member(member) is not None:
        return text
    return _set_member(text, holder, member, True)


def _layout(matcher: object, hook: dict[str, Any]) -> tuple[object, object]:
    """What places an entry in the registration: its group's matcher and its condition."""
    return matcher, hook.get("if")


def _wanted(
    groups: list[dict[str, Any]], layout: SettingsLayout
) -> list[tuple[object, dict[str, Any]]]:
    """Each of our entries in `groups`, with the matcher that places it.

    Nested: `groups` are matcher groups holding the entries; flat: the entries
    themselves, each with its own matcher (if any).
    """
    if not layout.nested:
        return [(entry.get("matcher"), entry) for entry in groups]
    return [(group.get("matcher"), hook) for group in groups for hook in group["hooks"]]


def _add_event_hooks(  # noqa: PLR0913 - the file, and what goes where
    text: str,
    path: Path,
    event: str,
    groups: list[dict[str, Any]],
    shim_path: Path | None,
    *,
    layout: SettingsLayout,
) -> str:
    entries = [
        entry for entry in find_entries(text, path, shim_path, layout) if entry.event == event
    ]
    wanted = _wanted(groups, layout)
    if entries and [_layout(e.matcher, e.handler) for e in entries] == [
        _layout(matcher, hook) for matcher, hook in wanted
    ]:
        # From the last entry to the first, each from where one read of the file found
        # it: an edit moves only the text after it (a read per entry cost seconds).
        root = _root(text, path)
        starts = [_handler_node(root, path, entry).start for entry in entries]
        for entry, start, (_, hook) in reversed(list(zip(entries, starts, wanted, strict=True))):
            text = _update_entry(text, start, entry, hook, layout)
        return text
    ours = wanted[0][1] if wanted else {}
    first = entries[0].handler if entries else {}
    ours_fields = _ours(layout) | {"matcher"}
    kept = {
        key: value
        for key, value in first.items()
        if key not in ours_fields
        and key in ours
        and value != ours[key]
        and not _our_words(key, value)
    }
    text = _remove_entries(text, path, entries)
    for group in groups:
        if layout.nested:
            with_kept = {**group, "hooks": [{**hook, **kept} for hook in group["hooks"]]}
        else:
            with_kept = {**group, **kept}
        text = _add_group(text, path, event, with_kept)
    return text


def _update_entry(
    text: str, start: int, entry: MentedEntry, hook: dict[str, Any], layout: SettingsLayout
) -> str:
    """Our `hook` written into the installed `entry` (its object at `start`): our fields
    set, missing ones added."""
    for key, value in hook.items():
        # The command line and the timeout are ours; a field the user set
        # (their own `statusMessage`) stays, one they did not is added.
        if key in entry.handler and (
            entry.handler[key] == value
            or (key not in _ours(layout) and not _our_words(key, entry.handler[key]))
        ):
            continue
        text = _set_member(text, _Parser(text).value(start), key, value)
    return text


def _add_group(text: str, path: Path, event: str, group: dict[str, Any]) -> str:
    """`text` with `group` appended to `hooks.<event>`, creating what is missing."""
    root = _root(text, path)
    hooks = _hooks_object(root, path)
    if hooks is None:
        return _insert_child(
            text,
            root,
            lambda indent, unit: '"hooks": ' + _render({event: [group]}, indent, unit),
        )
    event_groups = _event_list(root, path, event)
    if event_groups is None:
        return _insert_child(
            text,
            hooks,
            lambda indent, unit: json.dumps(event) + ": " + _render([group], indent, unit),
        )
    return _insert_child(text, event_groups, lambda indent, unit: _render(group, indent, unit))


def has_setting(text: str, name: str, member: str) -> bool:
    """Whether the settings `text` sets `name.member` (to anything)."""
    try:
        doc = json.loads(text) if text.strip() else {}
    except ValueError:
        return False
    holder = doc.get(name) if isinstance(doc, dict) else None
    return isinstance(holder, dict) and member in holder
