"""Fields of an action: what a command that performs it carries, read from the parsed command.

A rule's checks (`mented.checks`) test fields, never the command line: the message
of `git commit -m "fix: x" -m "body"` is `fix: x\\n\\nbody`, as git would record it,
whatever wrappers, `sh -c` strings or `&&` chains stand around it. The words come
from the matcher (`Matcher.matched_commands`): each word as the program receives
it, a `$(cat <<'EOF' ... EOF)` substitution as its heredoc's body, and a heredoc
fed to the command as its standard input.

A field the command does not carry is *unknown*, with the reason: the editor will
open (`git commit` with no message, `--amend` alone), the message is another
commit's (`-C`, `--no-edit`), standard input that is not a heredoc (`-F -`), a word
only the running shell knows (`$msg`), a file outside the working tree. An unknown
field is never guessed and never fails a check.

`FIELDS` says which fields each built-in action has (docs/actions.md); a check on
a field its action does not have is refused when the rule is written.

Files named by the command (`-F msg.txt`, `--body-file`) are read only inside the
working tree of the command's directory, with `mented.untrusted.read_file`: no link
followed, regular files only, at most `MAX_FILE_BYTES`, the user's own.
"""

# ruff: noqa: PTH117, PTH118, PTH119, PTH120
# (string paths on the hook path, as mented.team uses: no Path objects)
from __future__ import annotations

import functools
import os
import re
from typing import TYPE_CHECKING

import msgspec

from mented import untrusted
from mented.matcher.options import _read_option, _scan_options
from mented.matcher.shapes import _shape_failure, _word_matches

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from mented.actions import ActionTable, Shape
    from mented.matcher import MatchedCommand

# A message file read for a check: larger is unknown (git messages are small).
MAX_FILE_BYTES = 64 * 1024
# Directories looked through upward for the working tree's `.git`.
MAX_TREE_DEPTH = 64

FieldValue = str | tuple[str, ...]

# The fields of each built-in action, in the order `explain` shows them.
FIELDS: dict[str, tuple[str, ...]] = {
    "git-commit": ("message", "subject", "body", "trailers", "flags"),
    "pr-create": ("title", "body", "base", "head", "draft"),
    "git-branch-create": ("branch",),
    "git-tag": ("tag", "message", "flags"),
    "git-push": ("remote", "refs", "flags"),
    "git-push-force": ("remote", "refs", "flags"),
    "package-install": ("packages", "flags"),
    "release-create": ("tag", "title", "notes"),
}
# What each field is, for `explain` and the refusal of a check on a missing field.
LIST_FIELDS = frozenset({"trailers", "flags", "refs", "packages", "path"})
# The field of an action that file edits perform: each file edited, relative to its
# project root (as its `paths` patterns match it; a list, `MAX_PATHS_PER_EDIT` at most).
EDIT_FIELDS = ("path",)


@functools.lru_cache(maxsize=8)
def action_fields(table: ActionTable) -> dict[str, tuple[str, ...]]:
    """The fields of each action in force that has any: a built-in's (`FIELDS`), those a
    user's action declares (`fields = {...}`, docs/actions.md), and `path` for an action
    that file edits perform."""
    found: dict[str, tuple[str, ...]] = {}
    for action in table.actions():
        names = FIELDS.get(action.name, ()) + tuple(name for name, _ in action.fields)
        if action.paths:
            names += EDIT_FIELDS
        if names:
            found[action.name] = names
    return found


# Options taking a value that the action table does not list (it needs them only to
# find subcommands): here they say where a value is.
_MORE_WITH_VALUE: dict[tuple[str, str], frozenset[str]] = {
    ("hub", "pull-request"): frozenset(
        {"-m", "--message", "-F", "--file", "-b", "--base", "-h", "--head", "-a", "-M", "-l", "-r"}
    ),
}
_UNKNOWN = "\0unknown"  # stands for a word only the running shell knows
_TRAILER = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*: \S")
# Long names of short flags, so that `flags forbid --no-verify` also sees `-n`.
_LONG_FLAGS: dict[str, dict[str, str]] = {
    "commit": {
        "-n": "--no-verify",
        "-a": "--all",
        "-s": "--signoff",
        "-S": "--gpg-sign",
        "-e": "--edit",
        "-p": "--patch",
        "-q": "--quiet",
        "-v": "--verbose",
        "-i": "--include",
        "-o": "--only",
    },
    "push": {
        "-f": "--force",
        "-d": "--delete",
        "-u": "--set-upstream",
        "-n": "--dry-run",
        "-q": "--quiet",
        "-v": "--verbose",
    },
    "tag": {"-a": "--annotate", "-s": "--sign", "-f": "--force", "-e": "--edit"},
}


class Fields(msgspec.Struct):
    """The fields one command gives an action: known values, and why the others are not."""

    action: str
    values: dict[str, FieldValue] = msgspec.field(default_factory=dict)
    unknown: dict[str, str] = msgspec.field(default_factory=dict)
    from_file: bool = False  # a field was read from a file (it may change: not cached)
    # The fields asked for (None: all): the others are not worked out, and a file
    # only they would need is not read.
    wanted: frozenset[str] | None = None

    def wants(self, *names: str) -> bool:
        return self.wanted is None or not self.wanted.isdisjoint(names)

    def known(self, name: str, value: FieldValue) -> None:
        self.values[name] = value
        self.unknown.pop(name, None)

    def not_known(self, why: str, *names: str) -> None:
        for name in names:
            self.values.pop(name, None)
            self.unknown.setdefault(name, why)


class _Parsed(msgspec.Struct):  # made for every command checked: not frozen (slower to make)
    """The words after an action's subcommand: options (name, value) and positionals."""

    subcommand: tuple[str, ...]
    options: list[tuple[str, str | None]]
    positionals: list[str]
    global_options: list[tuple[str, str | None]]
    names: frozenset[str] = frozenset()  # of the options given


def fields_of(
    table: ActionTable,
    action: str,
    command: MatchedCommand,
    cwd: str | None,
    only: frozenset[str] | None = None,
) -> Fields | None:
    """The fields `command` gives `action` (of them, `only` these when given); None for
    an action with no fields known."""
    names = action_fields(table).get(action)
    if names is None:
        return None
    fields = Fields(action, wanted=only)
    if only is not None:
        names = tuple(name for name in names if name in only)
    argv = [_UNKNOWN if word is None else word for word in command.args]
    shape = None
    for name, matched in zip(command.actions, command.shapes, strict=False):
        if name == action:
            shape = matched
    in_force = table.get(action)
    declared = in_force.fields if in_force is not None else ()
    more = _declared_options(declared) if declared else frozenset()
    parsed = _parse(table, action, command.program, argv, shape, more_with_value=more)
    if parsed is None:
        fields.not_known("mented does not know this form of the command", *names)
        return fields
    reader = _Reader(cwd, parsed.global_options, command.stdin)
    extract = _EXTRACTORS.get(action)
    if extract is not None and action in FIELDS:
        extract(fields, command.program, parsed, reader)
    if "path" in names:
        fields.not_known("a shell command edits no file mented can name", "path")
    if declared:
        _declared_fields(fields, parsed, declared)
    fields.from_file = reader.used
    for name in names:
        if name not in fields.values and name not in fields.unknown:
            fields.not_known("the command does not say", name)
    if None not in command.args and (command.stdin is None or _UNKNOWN not in command.stdin):
        return fields  # no word only the running shell knows: every value is known
    for name, value in list(fields.values.items()):
        if _has_unknown(value):
            fields.not_known("only known when the command runs (a variable or substitution)", name)
    return fields


def _has_unknown(value: FieldValue) -> bool:
    if isinstance(value, str):
        return _UNKNOWN in value
    return any(_UNKNOWN in item for item in value)


# ------------------------------------------------------------------ parsing


def _parse(  # noqa: PLR0913 - the command, and what is known of its shape
    table: ActionTable,
    action: str,
    program: str,
    argv: list[str],
    matched: Shape | None = None,
    *,
    more_with_value: frozenset[str] = frozenset(),
) -> _Parsed | None:
    """`argv` read by the shape of `action` it has: `matched`, the one the matcher found
    (not looked for again), else the first of the table's that fits."""
    spec = table.program(program)
    shapes = [(action, matched)] if matched is not None else table.shapes_for(program)
    for name, shape in shapes:
        if name != action or (matched is None and _shape_failure(spec, shape, argv) is not None):
            continue
        extra = frozenset(shape.options_with_value)
        # Unions only where there is something to add: each one copies the set.
        global_with_value = spec.options_with_value | extra if extra else spec.options_with_value
        index = 0
        global_options: list[tuple[str, str | None]] = []
        words: list[str] = []
        for expected in shape.subcommand:
            while True:
                index, seen = _scan_options(argv, index, global_with_value)
                global_options.extend(seen)
                if index < len(argv) and any(argv[index].startswith(p) for p in spec.skip_prefixes):
                    index += 1
                    continue
                break
            if index >= len(argv) or not _word_matches(expected, argv[index]):
                return None
            words.append(argv[index])
            index += 1
        joined = " ".join(words)
        sub = spec.subcommands.get(joined) if words else None
        with_value = sub.options_with_value if sub else frozenset()
        for more in (extra, _MORE_WITH_VALUE.get((program, joined)), more_with_value):
            if more:
                with_value = with_value | more
        options, positionals = _arguments(argv, index, with_value)
        names = frozenset(option for option, _ in options)
        return _Parsed(tuple(words), options, positionals, global_options, names)
    return None


def _arguments(
    argv: Sequence[str], index: int, with_value: frozenset[str]
) -> tuple[list[tuple[str, str | None]], list[str]]:
    options: list[tuple[str, str | None]] = []
    positionals: list[str] = []
    while index < len(argv):
        word = argv[index]
        if word == "--":
            positionals.extend(argv[index + 1 :])
            break
        if len(word) > 1 and word[0] == "-":
            index, seen = _read_option(argv, index, with_value)
            options.extend(seen)
        else:
            positionals.append(word)
            index += 1
    return options, positionals


def _values(parsed: _Parsed, *names: str) -> list[str | None]:
    if parsed.names.isdisjoint(names):
        return []
    return [value for option, value in parsed.options if option in names]


def _has(parsed: _Parsed, *names: str) -> bool:
    return not parsed.names.isdisjoint(names)


def _flags(parsed: _Parsed, subcommand: str) -> tuple[str, ...]:
    """Every option given, by name, with the long name of a short one next to it."""
    long_names = _LONG_FLAGS.get(subcommand, {})
    flags: dict[str, None] = {}
    for option, _ in parsed.options:
        flags.setdefault(option, None)
        if option in long_names:
            flags.setdefault(long_names[option], None)
    return tuple(flags)


def _declared_options(declared: tuple[tuple[str, str], ...]) -> frozenset[str]:
    """The options a user's action's fields name: each takes a value."""
    return frozenset(
        option for _, spec in declared if spec.startswith("option ") for option in spec.split()[1:]
    )


def _declared_fields(
    fields: Fields, parsed: _Parsed, declared: tuple[tuple[str, str], ...]
) -> None:
    """The fields a user's action declares (`mented.actions.FIELD_SPECS`), read from `parsed`."""
    for name, spec in declared:
        kind, _, rest = spec.partition(" ")
        if kind == "option":
            values = _values(parsed, *rest.split())
            if values and values[-1] is not None:
                fields.known(name, values[-1])
            else:
                fields.not_known(f"the command gives none of {rest}", name)
        elif kind == "positional":
            number = int(rest)
            if len(parsed.positionals) >= number:
                fields.known(name, parsed.positionals[number - 1])
            else:
                fields.not_known(f"the command has no argument {number}", name)
        elif kind == "positionals":
            fields.known(name, tuple(parsed.positionals))
        else:  # flags
            fields.known(name, _flags(parsed, ""))


def fields_of_edit(table: ActionTable, action: str, paths: Sequence[str]) -> Fields | None:
    """The fields a file edit gives `action` (`paths`: relative to their project roots)."""
    names = action_fields(table).get(action)
    if names is None:
        return None
    fields = Fields(action)
    if "path" in names and paths:
        fields.known("path", tuple(paths))
    fields.not_known("a file edit gives only the path", *(n for n in names if n != "path"))
    return fields


# ------------------------------------------------------------------- files


class _Reader:
    """Reads what `-F FILE` and `--body-file` name: inside the working tree only."""

    def __init__(
        self, cwd: str | None, global_options: list[tuple[str, str | None]], stdin: str | None
    ) -> None:
        self.stdin = stdin
        self.used = False  # a file was looked at
        self._cwd = cwd
        self._global_options = global_options

    @functools.cached_property
    def directory(self) -> str | None:
        """Where the command's files are: its directory, moved by `git -C DIR`."""
        cwd = self._cwd
        directory = cwd if cwd and os.path.isabs(cwd) else None
        for option, value in self._global_options:  # `git -C DIR`: relative to DIR
            if option == "-C" and directory is not None:
                directory = (
                    None if value is None or _UNKNOWN in value else os.path.join(directory, value)
                )
        return directory

    def read(self, path: str | None) -> tuple[str | None, str]:
        """The text of the file `path` names, or None and why not."""
        if path is None or _UNKNOWN in path:
            return None, "the file is only known when the command runs"
        if path == "-":
            if self.stdin is None:
                return None, "read from standard input, which is not a heredoc"
            return self.stdin, ""
        if self.directory is None:
            return None, "the command's directory is not known"
        self.used = True
        full = os.path.normpath(os.path.join(self.directory, path))
        tree = _working_tree(self.directory)
        if tree is None:
            return None, "not in a git working tree"
        parent = os.path.realpath(os.path.dirname(full))
        if os.path.commonpath([parent, tree]) != tree:
            return None, f"{untrusted.shown(path)} is outside the working tree"
        try:
            info = os.lstat(full)
            if info.st_uid != os.getuid():
                return None, f"{untrusted.shown(path)} is another user's file"
            data = untrusted.read_file(
                os.path.join(parent, os.path.basename(full)), limit=MAX_FILE_BYTES, shown_as=path
            )
        except FileNotFoundError:
            return None, f"{untrusted.shown(path)} does not exist (yet)"
        except (untrusted.Refused, OSError) as exc:
            return None, str(exc)
        try:
            return data.decode(), ""
        except UnicodeDecodeError:
            return None, f"{untrusted.shown(path)} is not UTF-8 text"


def _working_tree(directory: str) -> str | None:
    """The top of the git working tree holding `directory` (resolved), or None."""
    current = os.path.realpath(directory)
    for _ in range(MAX_TREE_DEPTH):
        if os.path.lexists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent
    return None


# -------------------------------------------------------------- messages


def git_cleanup(text: str) -> str:
    """A message as git's `whitespace` cleanup leaves it: trailing blanks cut, runs of
    empty lines made one, empty lines at the start and end dropped."""
    lines = [line.rstrip() for line in text.splitlines()]
    out: list[str] = []
    for line in lines:
        if not line and (not out or not out[-1]):
            continue
        out.append(line)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out)


def _message_parts(fields: Fields, message: str) -> None:
    """`message`, and its `subject`, `body` and `trailers` (those `fields` wants)."""
    fields.known("message", message)
    if not fields.wants("subject", "body", "trailers"):
        return
    paragraphs = message.split("\n\n")
    fields.known("subject", paragraphs[0].split("\n", 1)[0])
    if not fields.wants("body", "trailers"):
        return
    rest = paragraphs[1:]
    trailers: tuple[str, ...] = ()
    if rest:
        last = rest[-1].split("\n")
        if all(_TRAILER.match(line) for line in last):
            trailers = tuple(last)
            rest = rest[:-1]
    first_paragraph_rest = paragraphs[0].split("\n", 1)[1:]
    fields.known("body", "\n\n".join([*first_paragraph_rest, *rest]))
    fields.known("trailers", trailers)


def commit_fields(message: str) -> Fields:
    """The message fields of `git-commit` as a commit made with `message` has them
    (`mented.afterchecks`: the message read from the commit once it ran)."""
    fields = Fields("git-commit")
    _message_parts(fields, git_cleanup(message))
    return fields


def _git_message(fields: Fields, parsed: _Parsed, reader: _Reader, *, what: str) -> str | None:
    """The message a `git commit` or `git tag` gives, or None (said in `fields`)."""
    names = ("message", "subject", "body", "trailers") if what == "commit" else ("message",)
    if what == "commit":
        if _has(parsed, "-C", "--reuse-message", "-c", "--reedit-message"):
            fields.not_known("the message is another commit's (-C/-c)", *names)
            return None
        if _has(parsed, "--fixup", "--squash"):
            fields.not_known("git writes the message (--fixup/--squash)", *names)
            return None
    messages = _values(parsed, "-m", "--message")
    files = _values(parsed, "-F", "--file")
    if _has(parsed, "-e", "--edit"):
        fields.not_known("the editor opens on it (--edit)", *names)
        return None
    if files:
        if messages:
            fields.not_known("both -m and -F: git refuses the command", *names)
            return None
        text, why = reader.read(files[-1])
        if text is None:
            fields.not_known(why, *names)
            return None
        return git_cleanup(text)
    if not messages:
        if what == "commit" and _has(parsed, "--no-edit"):
            fields.not_known("the message is the amended commit's (--no-edit)", *names)
        elif what == "commit" and _has(parsed, "--amend"):
            fields.not_known("the editor opens on the amended commit's message", *names)
        elif what == "commit" or _has(
            parsed, "-a", "--annotate", "-s", "--sign", "-u", "--local-user"
        ):
            fields.not_known("the editor opens to write it", *names)
        else:
            fields.not_known("a lightweight tag has no message", *names)
        return None
    if any(message is None for message in messages):
        fields.not_known("-m without a value", *names)
        return None
    # Each -m is a paragraph of its own (git joins them with a blank line).
    message = "\n\n".join(git_cleanup(message or "") for message in messages)
    trailers = [value for value in _values(parsed, "--trailer") if value]
    if trailers:
        message += "\n\n" + "\n".join(_trailer_line(trailer) for trailer in trailers)
    return git_cleanup(message)


def _trailer_line(trailer: str) -> str:
    """`--trailer "Key: value"` or `--trailer key=value` as the line git adds."""
    separator = ":" if ":" in trailer else "="
    key, _, value = trailer.partition(separator)
    return f"{key.strip()}: {value.strip()}"


# ------------------------------------------------------------- extractors


def _git_commit(fields: Fields, program: str, parsed: _Parsed, reader: _Reader) -> None:
    del program
    if fields.wants("flags"):
        fields.known("flags", _flags(parsed, "commit"))
    if parsed.subcommand[:1] != ("commit",):
        fields.not_known(
            f"git {parsed.subcommand[0]} writes its own message",
            "message",
            "subject",
            "body",
            "trailers",
        )
        return
    if not fields.wants("message", "subject", "body", "trailers"):
        return  # no message read (nor the file it is in)
    message = _git_message(fields, parsed, reader, what="commit")
    if message is not None:
        _message_parts(fields, message)


def _git_tag(fields: Fields, program: str, parsed: _Parsed, reader: _Reader) -> None:
    del program
    fields.known("flags", _flags(parsed, "tag"))
    if parsed.positionals:
        fields.known("tag", parsed.positionals[0])
    message = _git_message(fields, parsed, reader, what="tag")
    if message is not None:
        fields.known("message", message)


def _git_branch(fields: Fields, program: str, parsed: _Parsed, reader: _Reader) -> None:
    del program, reader
    sub = parsed.subcommand[0]
    create = {"checkout": ("-b", "-B"), "switch": ("-c", "-C", "--create", "--force-create")}
    if sub in create:
        values = _values(parsed, *create[sub])
        if values and values[-1] is not None:
            fields.known("branch", values[-1])
    elif parsed.positionals:
        fields.known("branch", parsed.positionals[0])


def _git_push(fields: Fields, program: str, parsed: _Parsed, reader: _Reader) -> None:
    del program, reader
    fields.known("flags", _flags(parsed, "push"))
    if parsed.positionals:
        fields.known("remote", parsed.positionals[0])
        if parsed.positionals[1:]:
            fields.known("refs", tuple(parsed.positionals[1:]))
        else:
            fields.not_known("the configured push refs (none given)", "refs")
    else:
        fields.not_known("the branch's upstream (none given)", "remote", "refs")


def _package_install(fields: Fields, program: str, parsed: _Parsed, reader: _Reader) -> None:
    del program, reader
    fields.known("flags", tuple(dict.fromkeys(option for option, _ in parsed.options)))
    fields.known("packages", tuple(parsed.positionals))


def _pr_create(fields: Fields, program: str, parsed: _Parsed, reader: _Reader) -> None:
    if program == "gh" and parsed.subcommand[:1] == ("api",):
        _pr_create_api(fields, parsed)
        return
    if program == "hub":
        spelled = {"title": (), "body": (), "base": ("-b", "--base"), "head": ("-h", "--head")}
        draft = ("-d", "--draft")
        fill: tuple[str, ...] = ("--no-edit",)
    elif program == "glab":
        spelled = {
            "title": ("-t", "--title"),
            "body": ("-d", "--description"),
            "base": ("-b", "--target-branch"),
            "head": ("-s", "--source-branch"),
        }
        draft = ("--draft", "--wip")
        fill = ("-f", "--fill")
    else:
        spelled = {
            "title": ("-t", "--title"),
            "body": ("-b", "--body"),
            "base": ("-B", "--base"),
            "head": ("-H", "--head"),
        }
        draft = ("-d", "--draft")
        fill = ("-f", "--fill", "--fill-first", "--fill-verbose")
    fields.known("draft", "true" if _has(parsed, *draft) else "false")
    for name, options in spelled.items():
        values = _values(parsed, *options)
        if values and values[-1] is not None:
            fields.known(name, values[-1])
    if program == "hub":
        _hub_message(fields, parsed, reader)
    elif program == "gh":
        files = _values(parsed, "-F", "--body-file")
        if files:
            text, why = reader.read(files[-1])
            if text is None:
                fields.not_known(why, "body")
            else:
                fields.known("body", text)
    if _has(parsed, *fill):
        for name in ("title", "body"):
            if name not in fields.values:
                fields.not_known("taken from the commits (--fill)", name)
    for name in ("title", "body"):
        if name not in fields.values:
            fields.not_known("asked for when the command runs", name)
    for name in ("base", "head"):
        if name not in fields.values:
            fields.not_known("the repository's default (not given)", name)


def _hub_message(fields: Fields, parsed: _Parsed, reader: _Reader) -> None:
    messages = _values(parsed, "-m", "--message")
    files = _values(parsed, "-F", "--file")
    text: str | None = None
    if files:
        text, why = reader.read(files[-1])
        if text is None:
            fields.not_known(why, "title", "body")
            return
    elif messages and all(message is not None for message in messages):
        text = "\n\n".join(message or "" for message in messages)
    if text is not None:
        title, _, body = git_cleanup(text).partition("\n\n")
        fields.known("title", title)
        fields.known("body", body)


def _pr_create_api(fields: Fields, parsed: _Parsed) -> None:
    """`gh api repos/O/R/pulls -f title=... -f body=...`."""
    given: dict[str, str] = {}
    for option, value in parsed.options:
        if option in ("-f", "--raw-field", "-F", "--field") and value and "=" in value:
            key, _, text = value.partition("=")
            given[key] = text
    for name in ("title", "body", "base", "head"):
        if name in given:
            fields.known(name, given[name])
    fields.known("draft", "true" if given.get("draft") == "true" else "false")


def _release_create(fields: Fields, program: str, parsed: _Parsed, reader: _Reader) -> None:
    if parsed.positionals:
        fields.known("tag", parsed.positionals[0])
    title = ("-t", "--title") if program == "gh" else ("-n", "--name")
    notes = ("-n", "--notes") if program == "gh" else ("-N", "--notes")
    values = _values(parsed, *title)
    if values and values[-1] is not None:
        fields.known("title", values[-1])
    values = _values(parsed, *notes)
    if values and values[-1] is not None:
        fields.known("notes", values[-1])
    files = _values(parsed, "-F", "--notes-file")
    if files:
        text, why = reader.read(files[-1])
        if text is None:
            fields.not_known(why, "notes")
        else:
            fields.known("notes", text)


_EXTRACTORS = {
    "git-commit": _git_commit,
    "pr-create": _pr_create,
    "git-branch-create": _git_branch,
    "git-tag": _git_tag,
    "git-push": _git_push,
    "git-push-force": _git_push,
    "package-install": _package_install,
    "release-create": _release_create,
}


# ---------------------------------------------------------------- MCP tools


def fields_of_tool(action: str, arguments: dict[str, object]) -> Fields | None:
    """The fields an MCP tool call's arguments give `action` (a forge's pull request tool)."""
    if action != "pr-create":
        return None
    fields = Fields(action)
    aliases = {
        "title": ("title",),
        "body": ("body", "description"),
        "base": ("base", "target_branch"),
        "head": ("head", "source_branch"),
    }
    for name, keys in aliases.items():
        for key in keys:
            value = arguments.get(key)
            if isinstance(value, str):
                fields.known(name, value)
                break
        else:
            fields.not_known("the tool call does not say", name)
    draft = arguments.get("draft")
    fields.known("draft", "true" if draft is True or draft == "true" else "false")
    return fields


def fields_in(
    table: ActionTable,
    commands: Sequence[MatchedCommand],
    actions: Sequence[str],
    cwd: str | None,
    *,
    only: Mapping[str, frozenset[str]] | None = None,
) -> list[Fields]:
    """The fields of each of `actions` in each command that performs it, in command order
    (for an action in `only`, just those fields: the others stay unread)."""
    wanted = set(actions)
    found: list[Fields] = []
    for command in commands:
        for action in command.actions:
            if action in wanted:
                names = only.get(action) if only is not None else None
                fields = fields_of(table, action, command, cwd, names)
                if fields is not None:
                    found.append(fields)
    return found
