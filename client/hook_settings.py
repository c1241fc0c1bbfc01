"""Installing the hook: its command line, and our entry in an agent's JSON settings file.

The command line runs the stdlib-only shim with the real interpreter binary (see
`real_interpreter`): a pyenv or asdf shim script costs ~150 ms per command
before Python even starts. It does so only while both files exist, and else exits
0 (`guarded_command`): the agents take a failing hook as a refusal, and a removed
mented must never block a command. `command_argv` reads both that form and the
plain one of older installs.

A project's settings file is the repository's: `read_project_settings` reads it
without leaving the project, non-blocking, only a regular file, bounded.

A settings file is the user's: it holds their other hooks, permissions and
whatever else, in the order and layout they (or their agent) wrote. So we do
not load-and-dump it. We locate the spans of the few JSON values we change and
splice new text in, indented like its neighbours: every byte outside our entry
stays as it was, and uninstalling after installing gives the original file back.

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

Which groups, matchers and conditions: the agent's (`Agent.hook_groups`), from
the action table (mented/registration.py).

Our entries are recognised by their command: it runs the shim (see `is_mented_command`).

The agents whose MCP config is JSON (Gemini CLI, Copilot CLI, Cursor, Qwen Code)
get mented's MCP server the same way: the member `mcpServers.mented` spliced in
and out (`with_mcp_server`, `without_mcp_server`).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shlex
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mented.agents.pretooluse import PreToolUseAgent, SettingsLayout
from mented.untrusted import Refused, describe_kind, read_file, shown
from mented_client.files import backup_path, display_path, remove_file, write_atomically

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

# Claude Code's and Codex's layout: matcher groups, `command`, `timeout` in seconds.
NESTED = SettingsLayout()

# First bytes of a native executable: ELF, Mach-O (32/64 bit, both byte orders), fat Mach-O.
_BINARY_MAGIC = (
    b"\x7fELF",
    b"\xfe\xed\xfa\xce",
    b"\xfe\xed\xfa\xcf",
    b"\xce\xfa\xed\xfe",
    b"\xcf\xfa\xed\xfe",
    b"\xca\xfe\xba\xbe",
)
SHIM_MARKER = b"mented hook shim"
# A settings file is a few KiB; past this it is not one (and is not read into memory).
MAX_SETTINGS_BYTES = 4 * 1024 * 1024


def _ours(layout: SettingsLayout) -> frozenset[str]:
    """The fields of our entry that an install rewrites; others are only added when missing."""
    fields = {"type", layout.command_key, "if"}
    if layout.timeout_key is not None:
        fields.add(layout.timeout_key)
    return frozenset(fields)


class SettingsError(Exception):
    """The settings file cannot be used as it is; the message says why and what to do."""


# ------------------------------------------------------------ JSON with positions


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


# ----------------------------------------------------------------- text layout


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


# ------------------------------------------------------------ the command line


def is_native_executable(path: Path) -> bool:
    """Whether `path` is a binary the kernel runs directly (not a `#!` script)."""
    return _file_start(path, 4) in _BINARY_MAGIC


def real_interpreter(executable: str | None = None) -> Path:
    """The binary behind `executable` (default: this interpreter), resolving symlinks.

    A venv's `python` is a symlink to a real binary; a pyenv or asdf shim is a
    shell script that finds one on every call, at a cost of ~150 ms.

    Raises:
        SettingsError: no native binary found; the message suggests `--python`.
    """
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    names = (f"python{version}", f"python{sys.version_info.major}", "python")
    candidates = [Path(os.path.realpath(executable or sys.executable))] + [
        Path(os.path.realpath(Path(prefix) / "bin" / name))
        for prefix in (sys.base_prefix, sys.base_exec_prefix)
        for name in names
    ]
    for candidate in candidates:
        if is_native_executable(candidate):
            return candidate
    raise SettingsError(
        f"cannot find the real Python binary behind {executable or sys.executable} "
        "(it looks like a shim script, which would add ~150 ms to every command); "
        "pass --python /absolute/path/to/python3"
    )


def guarded_command(argv: Sequence[str], *, notice: str | None = None) -> str:
    """The installed command line: `argv` run only while its interpreter and shim exist.

    `argv` is the shim's (`interpreter -I -S shim AGENT SOCKET`). The agents run the
    line through a shell (Claude Code and Gemini CLI `bash -c`, Codex `$SHELL -lc`,
    Copilot CLI its `bash` field), and most read a failed hook as a refusal (exit 2
    blocks the command in Claude Code and Gemini CLI; Codex and Copilot CLI block on
    any failure to start). So two builtin tests come first: while both files exist the
    shell `exec`s the interpreter (no extra process, as before); once either is gone
    (`pip uninstall`, a deleted venv, a moved clone) the line exits 0 having printed
    nothing, or `notice` (an answer the agent shows the user) when one is given.
    The syntax is POSIX sh that bash, zsh and fish also read.
    """
    interpreter, shim = argv[0], argv[3]
    run = f"exec {shlex.join(argv)}"
    tests = f"[ -f {shlex.quote(shim)} ] && [ -x {shlex.quote(interpreter)} ]"
    fallback = "exit 0" if notice is None else f"printf '%s\\n' {shlex.quote(notice)}; exit 0"
    return f"{tests} && {run}; {fallback}"


# The shell operators a hook command line may hold, between the words that run.
_OPERATORS = frozenset({";", "&&", "||", "|", "&"})


@dataclass(frozen=True)
class HookArgv:
    """What an installed hook command line runs: its words, and whether it is guarded."""

    argv: list[str]
    guarded: bool  # `guarded_command`'s form: it exits 0 once the files are gone


def command_argv(command: object) -> HookArgv | None:
    """The program and arguments a hook command line runs (None: not a command line).

    Both forms are read: `guarded_command`'s (the words after `exec`), and the plain
    `interpreter -I -S shim ...` that older installs wrote (up to the first operator,
    such as Copilot CLI's ` || true`).
    """
    if not isinstance(command, str):
        return None
    read = _read_argv(command)
    return None if read is None else HookArgv(list(read[0]), read[1])


# Every handler of one install runs the same command line: a settings file with
# hundreds of them asks for the same words hundreds of times (a few, kept).
@functools.lru_cache(maxsize=16)
def _read_argv(command: str) -> tuple[tuple[str, ...], bool] | None:
    """`command_argv`'s words and guard, read once per command line."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        return None
    guarded = bool(tokens) and tokens[0] == "["
    if guarded:
        if "exec" not in tokens:
            return None
        tokens = tokens[tokens.index("exec") + 1 :]
    words = []
    for token in tokens:
        if token in _OPERATORS:
            break
        words.append(token)
    return (tuple(words), guarded) if words else None


def installed_shim() -> Path:
    """The shim file of the installed `mented_client` package."""
    spec = importlib.util.find_spec("mented_client.shim")
    if spec is None or spec.origin is None:
        raise SettingsError("cannot find mented_client/shim.py: is mented installed?")
    return Path(spec.origin).resolve()


# ------------------------------------------------------------- our entries


def is_mented_command(command: object, shim_path: Path | None = None) -> bool:
    """Whether a hook command runs mented's shim.

    It does when one argument is a file named `shim.py` followed by the agent name,
    and that file is `shim_path`, or lives in the `mented_client` package, or
    (when it still exists) starts with the shim's marker comment.
    """
    if not isinstance(command, str) or "shim.py" not in command:
        return False
    run = command_argv(command)
    if run is None:
        return False
    for arg in run.argv[:-1]:  # the shim's path is followed by the agent name
        path = Path(arg)
        if path.name != "shim.py":
            continue
        if shim_path is not None and path == shim_path:
            return True
        if path.parent.name == "mented_client":
            return True
        if SHIM_MARKER in _file_start(path, 256):
            return True
    return False


def _file_start(path: Path, size: int) -> bytes:
    """The first `size` bytes of a regular file; b"" for anything else.

    The path comes from a settings file, maybe a project's: a named pipe there must
    not hang the caller (O_NONBLOCK), nor a device be read (fstat).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        return os.read(fd, size)
    except OSError:
        return b""
    finally:
        os.close(fd)


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


def _our_words(key: str, value: object) -> bool:
    """Whether `value` is a status message an older install wrote (it names mented): it is
    replaced, where the user's own is kept."""
    return key == "statusMessage" and isinstance(value, str) and value.startswith("mented:")


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


def has_setting(text: str, name: str, member: str) -> bool:
    """Whether the settings `text` sets `name.member` (to anything)."""
    try:
        doc = json.loads(text) if text.strip() else {}
    except ValueError:
        return False
    holder = doc.get(name) if isinstance(doc, dict) else None
    return isinstance(holder, dict) and member in holder


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


# -------------------------------------------------------- the MCP server's entry

# Where the agents with a JSON MCP config (`McpSettings.how` "json") list their servers,
# and the name mented's server has there (and in every agent's configuration).
MCP_SERVERS = "mcpServers"
MCP_SERVER_NAME = "mented"


def _servers(text: str, path: Path) -> tuple[_Node, _Node | None]:
    """The root object and its `mcpServers` object (None when there is none)."""
    root = _root(text, path)
    servers = root.member(MCP_SERVERS)
    if servers is not None and servers.kind != "object":
        raise SettingsError(f"{path}: `{MCP_SERVERS}` is not a JSON object; fix it by hand first")
    return root, servers


def mcp_server(text: str, path: Path, name: str) -> dict[str, Any] | None:
    """The entry `mcpServers.<name>` in the settings `text`; None when there is none.

    Raises:
        SettingsError: the text is not a JSON object, or the entry is not an object.
    """
    _, servers = _servers(text, path)
    if servers is None or servers.member(name) is None:
        return None
    entry = json.loads(text)[MCP_SERVERS][name]
    if not isinstance(entry, dict):
        raise SettingsError(
            f"{path}: `{MCP_SERVERS}.{name}` is not a JSON object; fix or remove it by hand first"
        )
    return entry


def with_mcp_server(text: str, path: Path, name: str, entry: dict[str, Any]) -> str:
    """`text` with `entry`'s members written into `mcpServers.<name>` (unchanged when they are).

    Members of an existing entry that `entry` does not name (the user's `env`,
    `timeout`, `trust`) stay; every other byte of the file too.

    Raises:
        SettingsError: the text is not a JSON object, or `mcpServers` or our entry
            is not an object.
    """
    if not text.strip():
        text = "{}\n"
    current = mcp_server(text, path, name)
    root, servers = _servers(text, path)
    if servers is None:
        return _insert_child(
            text,
            root,
            lambda indent, unit: (
                json.dumps(MCP_SERVERS) + ": " + _render({name: entry}, indent, unit)
            ),
        )
    if current is None:
        return _insert_child(
            text,
            servers,
            lambda indent, unit: json.dumps(name) + ": " + _render(entry, indent, unit),
        )
    for key, value in entry.items():
        if key in current and current[key] == value:
            continue
        _, servers = _servers(text, path)
        assert servers is not None
        node = servers.member(name)
        assert node is not None
        text = _set_member(text, node, key, value)
    return text


def without_mcp_server(text: str, path: Path, name: str) -> str:
    """`text` without `mcpServers.<name>`, and without `mcpServers` when that was all it held.

    Raises:
        SettingsError: the text is not a JSON object, or `mcpServers` is not an object.
    """
    if not text.strip():
        return text
    root, servers = _servers(text, path)
    if servers is None:
        return text
    names = [key for key, _, _ in servers.members]
    if name not in names:
        return text
    for index in reversed([i for i, key in enumerate(names) if key == name]):
        text = _remove_child(text, _servers(text, path)[1] or servers, index)
    root, servers = _servers(text, path)
    if servers is not None and not servers.members:
        text = _remove_child(text, root, [k for k, _, _ in root.members].index(MCP_SERVERS))
    return text


def without_mented(
    text: str, path: Path, agent: PreToolUseAgent, *, enable_added: bool | None = None
) -> str:
    """`text` without anything of mented's the agent's files hold: its hook entries
    (`remove_hooks`), and its MCP server's entry when `path` is the agent's JSON MCP
    config."""
    text = remove_hooks(text, path, None, agent.layout, enable_added=enable_added)[0]
    if agent.mcp.how == "json" and path == agent.mcp_config_path():
        text = without_mcp_server(text, path, MCP_SERVER_NAME)
    return text


def holds_nothing(text: str | None) -> bool:
    """Whether a settings text holds nothing at all: missing, blank, or `{}`."""
    if text is None or not text.strip():
        return True
    try:
        return bool(json.loads(text) == {})
    except ValueError:
        return False


def unchanged_except(before: str, after: str, path: Path, ours: set[str]) -> None:
    """Check an edit: every top-level member but `ours` is as it was.

    Raises:
        SettingsError: some other member changed (the edit would lose the user's
            settings); the file is left alone.
    """
    old, new = json.loads(before or "{}"), json.loads(after or "{}")
    others = (set(old) | set(new)) - ours
    changed = sorted(key for key in others if old.get(key) != new.get(key))
    if changed:
        raise SettingsError(
            f"{path}: removing mented's entries would change {', '.join(changed)}; "
            "the file was not changed: remove them by hand"
        )


# ------------------------------------------------------------------ the file


def read_settings(path: Path) -> str | None:
    """The file's text, or None when it does not exist.

    Only a regular file is read, and only up to `MAX_SETTINGS_BYTES`: a settings
    path that leads to a device (`/dev/zero`), a pipe or a huge file is refused
    with a message instead of being read without end.

    Raises:
        SettingsError: it exists but is not a regular file, is too large, or
            cannot be read as UTF-8 text.
    """
    try:
        # O_NONBLOCK: opening a named pipe nobody writes to returns at once.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read it: {exc.strerror or exc}") from exc
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SettingsError(
                f"{path}: not a regular file ({describe_kind(info.st_mode)}); a settings file "
                "must be a JSON file: remove or replace it, then run this again"
            )
        data = handle.read(MAX_SETTINGS_BYTES + 1)
    if len(data) > MAX_SETTINGS_BYTES:
        raise SettingsError(
            f"{path}: over {MAX_SETTINGS_BYTES // (1024 * 1024)} MiB, too large for a settings "
            "file; check what it holds (move it aside if it is not yours), then run this again"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SettingsError(f"{path}: cannot read it: not UTF-8 text ({exc})") from exc


def read_project_settings(path: Path, project: Path) -> str | None:
    """A project's settings file (`path` inside `project`), read as mented reads what it
    does not own (`mented.untrusted.read_file`); None when it does not exist.

    A project comes with a `git clone`: its files are the repository's. A link that
    leads out of the project (to `~/.ssh/...`, `/dev/zero`) is refused, not followed;
    one that stays inside is the project's own layout (a shared config directory).
    The file itself is opened without following a link, non-blocking, and only a
    regular file of at most `MAX_SETTINGS_BYTES` is read.

    Raises:
        SettingsError: it leads out of the project, is not a regular file, is too
            large, or cannot be read as UTF-8 text.
    """
    target = outside_link(path, project)
    if target is not None:
        raise SettingsError(
            f"{shown(str(path))} leads outside the project, to {shown(str(target))}; it was "
            "not read: mented reads a project's settings only inside the project"
        )
    try:
        data = read_file(os.path.realpath(path), limit=MAX_SETTINGS_BYTES, shown_as=str(path))
    except FileNotFoundError:
        return None
    except Refused as exc:
        raise SettingsError(str(exc)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SettingsError(f"{shown(str(path))}: cannot read it: not UTF-8 text ({exc})") from None


def read_settings_at(path: Path, project: Path | None) -> str | None:
    """`read_project_settings` for a file inside `project`, else `read_settings` (the
    user's own file, which may be a link into a dotfiles checkout)."""
    if project is not None and path.is_relative_to(project):
        return read_project_settings(path, project)
    return read_settings(path)


def settle_backup(
    path: Path, result: str | None, without_ours: Callable[[str], str]
) -> Path | None:
    """After mented's entries were taken out of `path`: its backup, unless it is redundant.

    A backup (`<file>.mented-bak`, written by an install) is there to give the
    user back what they had. It holds nothing of theirs that the file does not
    when, with mented's entries taken out of both (`without_ours`: its hooks and
    its MCP server's entry), it is the file as it is now (`result`; None when
    the file is gone), byte for byte: then it is deleted. Otherwise (the user
    changed the file since, or the backup cannot be read as settings) it stays,
    and is returned so the user can be told.
    """
    saved = backup_path(path.resolve() if path.is_symlink() else path)
    try:
        kept = read_settings(saved)
        if kept is None:
            return None
        left = without_ours(kept)
        now = without_ours(result) if result and result.strip() else None
    except (SettingsError, ValueError):
        return saved if saved.exists() else None
    if left == now or (holds_nothing(left) and holds_nothing(now)):
        saved.unlink(missing_ok=True)
        return None
    return saved


def backup_kept(backup: Path) -> str:
    """What to tell the user about a backup that stays after an uninstall (`settle_backup`)."""
    return (
        f"{display_path(backup)}, the copy saved when mented last changed the file, differs "
        "from it (it may hold changes of yours): kept; delete it when you do not need it"
    )


def write_without_ours(  # noqa: PLR0913 - the file, its two texts, and what may change
    path: Path,
    before: str,
    after: str,
    ours: set[str],
    agent: PreToolUseAgent,
    *,
    up_to: Path | None,
    enable_added: bool | None = None,
) -> tuple[Path | None, list[Path] | None]:
    """Put `after` (the file's text `before`, mented's part taken out) in place at `path`.

    Every member but `ours` must be as it was (`unchanged_except`). A file left
    holding nothing is removed, with the directories that leaves empty up to
    `up_to`; a symlinked file (a dotfiles checkout) is written instead. The
    install's backup goes once it is redundant (`settle_backup`).

    Returns: the backup kept (None: there is none), and the directories removed
        with the file (None: the file stays, written).

    Raises:
        SettingsError: some other member would change; the file is left alone.
        OSError: it cannot be written or removed.
    """
    unchanged_except(before, after, path, ours)
    gone = holds_nothing(after) and not path.is_symlink()
    backup = settle_backup(
        path,
        None if gone else after,
        lambda kept: without_mented(kept, path, agent, enable_added=enable_added),
    )
    if gone:
        return backup, remove_file(path, up_to=up_to)
    write_atomically(path, after)
    return backup, None


def outside_link(path: Path, root: Path) -> Path | None:
    """Where `path` leads when a symlink on the way takes it out of `root`, else None.

    Follows every link, a dangling one too (to where it would create the file).
    """
    target = Path(os.path.realpath(path))
    return None if target.is_relative_to(os.path.realpath(root)) else target
