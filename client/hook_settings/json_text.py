"""JSON text edited in place: where each value sits, and members and items spliced in and out.

A settings file is the user's: we do not load-and-dump it. We locate the spans of
the few JSON values we change and splice new text in, indented like its
neighbours: every byte outside our entry stays as it was, and uninstalling after
installing gives the original file back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable


class SettingsError(Exception):
    """The settings file cannot be used as it is; the message says why and what to do."""


@dataclass
class _Node:
    """A JSON value and where it sits in the text (`end` is exclusive)."""

    start: int
    end: int
    kind: str  # "object", "array" or "scalar"
    members: list[tuple[str, int, _Node]] = field(default_factory=list)  # key, key start, value
    items: list[_Node] = field(default_factory=list)

    def member(self, key: str) -> _Node | None:
        """The value of `key` (the last one, as json.loads reads duplicates)."""
        found = None
        for name, _, value in self.members:
            if name == key:
                found = value
        return found

    def children(self) -> list[tuple[int, int]]:
        """The (start, end) of each member or item, in order."""
        if self.kind == "object":
            return [(key_start, value.end) for _, key_start, value in self.members]
        return [(item.start, item.end) for item in self.items]


class _Parser:
    """Positions of the values in a JSON text already known to be valid."""

    def __init__(self, text: str) -> None:
        self.text = text

    def skip_ws(self, i: int) -> int:
        text = self.text
        while i < len(text) and text[i] in " \t\r\n":
            i += 1
        return i

    def value(self, i: int) -> _Node:
        text = self.text
        i = self.skip_ws(i)
        char = text[i]
        if char == "{":
            node = _Node(i, i, "object")
            i = self.skip_ws(i + 1)
            while text[i] != "}":
                key_start = i
                key_end = self.string_end(i)
                key = json.loads(text[key_start:key_end])
                i = self.skip_ws(key_end) + 1  # the colon
                value = self.value(i)
                node.members.append((key, key_start, value))
                i = self.skip_ws(value.end)
                if text[i] == ",":
                    i = self.skip_ws(i + 1)
            node.end = i + 1
            return node
        if char == "[":
            node = _Node(i, i, "array")
            i = self.skip_ws(i + 1)
            while text[i] != "]":
                item = self.value(i)
                node.items.append(item)
                i = self.skip_ws(item.end)
                if text[i] == ",":
                    i = self.skip_ws(i + 1)
            node.end = i + 1
            return node
        if char == '"':
            return _Node(i, self.string_end(i), "scalar")
        end = i
        while end < len(text) and text[end] not in ",]} \t\r\n":
            end += 1
        return _Node(i, end, "scalar")

    def string_end(self, i: int) -> int:
        text = self.text
        j = i + 1
        while text[j] != '"':
            j += 2 if text[j] == "\\" else 1
        return j + 1


def _parse(text: str) -> _Node:
    return _Parser(text).value(0)


def _line_indent(text: str, pos: int) -> str | None:
    """The whitespace before `pos` on its line, or None when `pos` does not start its line."""
    line_start = text.rfind("\n", 0, pos) + 1
    before = text[line_start:pos]
    if "\n" not in text or before.strip():
        return None
    return before


def _indent_unit(text: str) -> str:
    """The file's indentation step (two spaces when it shows none)."""
    widths = []
    for line in text.splitlines():
        stripped = line.lstrip(" \t")
        if stripped and len(stripped) < len(line):
            prefix = line[: len(line) - len(stripped)]
            if prefix.startswith("\t"):
                return "\t"
            widths.append(len(prefix))
    return " " * min(widths) if widths else "  "


def _render(value: Any, indent: str | None, unit: str) -> str:  # noqa: ANN401 - any JSON value
    if indent is None:
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, indent=unit).replace("\n", "\n" + indent)


def _splice(text: str, start: int, end: int, new: str) -> str:
    return text[:start] + new + text[end:]


def _insert_child(text: str, container: _Node, render: Callable[[str | None, str], str]) -> str:
    """Add a member or item at the end of `container`; `render(indent, unit)` gives its text."""
    unit = _indent_unit(text)
    children = container.children()
    if children:
        last_start, last_end = children[-1]
        indent = _line_indent(text, last_start)
        separator = ", " if indent is None else ",\n" + indent
        return _splice(text, last_end, last_end, separator + render(indent, unit))
    if "\n" not in text:  # a one-line file stays on one line
        inner = render(None, unit)
    else:
        line_start = text.rfind("\n", 0, container.start) + 1
        line = text[line_start : container.start]
        outer = line[: len(line) - len(line.lstrip(" \t"))]
        inner = "\n" + outer + unit + render(outer + unit, unit) + "\n" + outer
    return _splice(text, container.start + 1, container.end - 1, inner)


def _remove_child(text: str, container: _Node, index: int) -> str:
    children = container.children()
    start, end = children[index]
    if len(children) == 1:
        return _splice(text, container.start + 1, container.end - 1, "")
    if index < len(children) - 1:
        return _splice(text, start, children[index + 1][0], "")
    return _splice(text, children[index - 1][1], end, "")


def _set_member(text: str, obj: _Node, key: str, value: Any) -> str:  # noqa: ANN401
    current = obj.member(key)
    if current is not None:
        # A value written over several lines is replaced by one laid out the same way.
        key_start = next(start for name, start, node in obj.members if node is current)
        indent = _line_indent(text, key_start)
        spread = indent is not None and "\n" in text[current.start : current.end]
        rendered = _render(value, indent if spread else None, _indent_unit(text))
        return _splice(text, current.start, current.end, rendered)
    return _insert_child(
        text,
        obj,
        lambda indent, unit: json.dumps(key) + ": " + _render(value, indent, unit),
    )


def _root(text: str, path: Path) -> _Node:
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        raise SettingsError(
            f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "fix or move the file, then run this again. The file was not changed."
        ) from exc
    root = _parse(text)
    if root.kind != "object":
        raise SettingsError(f"{path}: the settings must be a JSON object; the file was not changed")
    return root
