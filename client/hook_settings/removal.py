"""Our hook entries taken out of a settings file, with what only they needed."""

from __future__ import annotations

import json
from pathlib import Path

from mented.agents.pretooluse import SettingsLayout
from mented_client.hook_settings.entries import (
    NESTED,
    MentedEntry,
    _entry_node,
    _event_list,
    _hooks_object,
    find_entries,
)
from mented_client.hook_settings.json_text import _Node, _remove_child, _root, _set_member


def _remove_entries(text: str, path: Path, entries: list[MentedEntry]) -> str:
    """`text` without `entries` (`find_entries` found them in it), from one read of it.

    The same text as removing them one by one from the last (`_remove_child`), where
    a read of the file per entry cost seconds for hundreds of entries: a group left
    without hooks goes whole, and so does an entry with the text up to the next child
    that stays, or, with none after it, from the end of the child before it.
    """
    if not entries:
        return text
    root = _root(text, path)
    gone_groups: dict[int, set[int]] = {}  # id of an event's group list: its groups that go
    gone_hooks: dict[tuple[int, int], set[int]] = {}  # (list, group): the hooks that go
    lists: dict[int, _Node] = {}
    for entry in entries:
        groups, hooks = _entry_node(root, path, entry)
        lists[id(groups)] = groups
        if hooks is None:
            gone_groups.setdefault(id(groups), set()).add(entry.group)
        else:
            gone_hooks.setdefault((id(groups), entry.group), set()).add(entry.hook)
    cuts: list[tuple[int, int]] = []
    for (list_id, group), hooks_gone in gone_hooks.items():
        hooks = lists[list_id].items[group].member("hooks")
        assert hooks is not None
        if len(hooks_gone) == len(hooks.items):
            gone_groups.setdefault(list_id, set()).add(group)
        else:
            cuts += _cuts(hooks, hooks_gone)
    for list_id, groups_gone in gone_groups.items():
        cuts += _cuts(lists[list_id], groups_gone)
    kept, end = [], 0
    for start, stop in sorted(cuts):
        if start > end:
            kept.append(text[end:start])
        end = max(end, stop)
    return "".join([*kept, text[end:]])


def _cuts(container: _Node, gone: set[int]) -> list[tuple[int, int]]:
    """The spans `_remove_child` would cut for the children `gone`, removed from the last."""
    children = container.children()
    cuts = []
    for index in gone:
        after = next((i for i in range(index + 1, len(children)) if i not in gone), None)
        if after is not None:
            cuts.append((children[index][0], children[after][0]))
        elif index > 0:
            cuts.append((children[index - 1][1], children[index][1]))
        else:
            cuts.append((container.start + 1, container.end - 1))
    return cuts


def remove_hooks(
    text: str,
    path: Path,
    shim_path: Path | None,
    layout: SettingsLayout = NESTED,
    *,
    enable_added: bool | None = None,
) -> tuple[str, int]:
    """`text` without our hook entries (under every event), and how many were removed.

    A matcher group left without hooks goes; so do the event's list and `hooks`
    when our entries were all they held. The layout's `enable` setting goes when
    it is true and the install added it (`enable_added`, from
    `mented_client.added_settings`), or, with no record (None), with the last
    hook of the file; our name leaves the layout's `disabled` list (the agent
    wrote it there when the user turned our hook off). A hooks-only file
    (`layout.hooks_only`) left with nothing but the layout's `top` members comes
    back empty: the file is to be removed.
    """
    entries = find_entries(text, path, shim_path, layout)
    if not entries:
        return text, 0
    text = _remove_entries(text, path, entries)
    for event in dict.fromkeys(entry.event for entry in entries):
        root = _root(text, path)
        hooks = _hooks_object(root, path)
        groups = _event_list(root, path, event)
        if hooks is not None and groups is not None and not groups.items:
            text = _remove_child(text, hooks, [k for k, _, _ in hooks.members].index(event))
    root = _root(text, path)
    hooks = _hooks_object(root, path)
    if hooks is not None and not hooks.members:
        text = _remove_child(text, root, [k for k, _, _ in root.members].index("hooks"))
    no_hooks = _root(text, path).member("hooks") is None
    if layout.enable is not None and (enable_added or (enable_added is None and no_hooks)):
        text = _disable(text, path, *layout.enable)
    if layout.disabled is not None:
        text = _undisable(text, path, *layout.disabled)
    if no_hooks:
        doc = json.loads(text)
        if (
            layout.hooks_only
            and all(doc.get(k) == v for k, v in layout.top.items())
            and (set(doc) <= set(layout.top))
        ):
            return "", len(entries)
    return text, len(entries)


def _disable(text: str, path: Path, name: str, member: str) -> str:
    """`name.member` removed when it is true (and `name` with it when it held nothing else)."""
    root = _root(text, path)
    holder = root.member(name)
    if holder is None or holder.kind != "object":
        return text
    names = [k for k, _, _ in holder.members]
    if member not in names or json.loads(text)[name].get(member) is not True:
        return text
    if len(names) == 1:
        return _remove_child(text, root, [k for k, _, _ in root.members].index(name))
    return _remove_child(text, holder, names.index(member))


def _undisable(text: str, path: Path, name: str, member: str, ours: str) -> str:
    """`ours` out of the list `name.member` (and the list, then `name`, when left empty)."""
    root = _root(text, path)
    holder = root.member(name)
    listed = holder.member(member) if holder is not None and holder.kind == "object" else None
    if holder is None or listed is None or listed.kind != "array":
        return text
    values = json.loads(text[listed.start : listed.end])
    if ours not in values:
        return text
    left = [value for value in values if value != ours]
    if left:
        return _set_member(text, holder, member, left)
    names = [k for k, _, _ in holder.members]
    if len(names) == 1:
        return _remove_child(text, root, [k for k, _, _ in root.members].index(name))
    return _remove_child(text, holder, len(names) - 1 - names[::-1].index(member))
