"""The action table: which command shapes perform which action, and what programs look like.

Everything here is data read from TOML: the built-ins shipped in `actions.toml`
next to this module, merged with the `[actions]` section of the user's config
file. The user can add actions, add shapes to a built-in action (or replace its
shapes with `replace = true`), and switch a built-in off with `enabled = false`::

    [actions.deploy]
    description = "roll out to production"
    shapes = [{ program = "kubectl", subcommand = ["apply"], options_with_value = ["-n"] }]

    [actions.git-commit]                  # one more way to commit
    shapes = [{ program = "gitbutler", subcommand = ["commit"] }]

    [actions.docker-push]
    enabled = false

Per-program knowledge (global options and their arity, wrappers such as `sudo`
or `bash -c`) is built-in data too; `mented.matcher` is the code that reads it.
A table that cannot be used raises `ConfigError` naming the file, line and action.

Everything that takes an action name from a person or a model (`mentectl rule
add`, `mentectl explain`, `mentectl doctor`, the MCP server) loads the table
with `load_table_in_force` and checks the name with `check_action`, so they
agree on what is known and say it the same way.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

import msgspec

from mented.config import (
    DEFAULT_DELIVERY_KEY,
    Config,
    ConfigError,
    line_of,
    line_of_key,
    load_config,
)
from mented.memory import InvalidInputError, action_from_input, normalize_action
from mented.path_patterns import path_pattern_problem

BUILTIN = "built-in"
BUILTIN_FILE = "actions.toml"

# A subcommand word that matches any one word (`yarn workspace * add`).
ANY_WORD = "*"
SUGGESTIONS = 3  # close matches offered for an unknown action name


class Shape(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One way of writing a command that performs an action (see docs/actions.md)."""

    program: str
    subcommand: tuple[str | tuple[str, ...], ...] = ()
    any_flag: tuple[str, ...] = ()
    no_flag: tuple[str, ...] = ()
    min_positionals: int = 0
    max_positionals: int | None = None
    positional_starts_with: str | None = None
    positional_matches: str | None = None
    no_positional_matches: str | None = None
    last_positional_matches: str | None = None
    paths_after_double_dash: bool = False
    any_value: tuple[str, ...] = ()
    no_value: tuple[str, ...] = ()
    options_with_value: tuple[str, ...] = ()
    # The add-on package that installs the command (`git create-branch`: git-extras);
    # such shapes are left out with `[matching] git_add_ons = false`.
    add_on: str | None = None

    def describe(self) -> str:
        """The shape as a person would write it: `git push (with one of -f, --force)`."""
        words = [self.program]
        words.extend(word if isinstance(word, str) else "|".join(word) for word in self.subcommand)
        conditions = []
        if self.any_flag:
            conditions.append(f"with one of {', '.join(self.any_flag)}")
        if self.no_flag:
            conditions.append(f"without {', '.join(self.no_flag)}")
        if self.min_positionals:
            plural = "s" if self.min_positionals > 1 else ""
            conditions.append(f"with {self.min_positionals} positional argument{plural}")
        if self.max_positionals == 0:
            conditions.append("with no positional arguments")
        elif self.max_positionals is not None:
            conditions.append(f"with at most {self.max_positionals} positional arguments")
        if self.positional_starts_with:
            conditions.append(f"with an argument starting with {self.positional_starts_with!r}")
        if self.positional_matches:
            conditions.append(f"with an argument like {self.positional_matches!r}")
        if self.no_positional_matches:
            conditions.append(f"with no argument like {self.no_positional_matches!r}")
        if self.last_positional_matches:
            conditions.append(f"with a last argument like {self.last_positional_matches!r}")
        if self.paths_after_double_dash:
            conditions.append("with paths after --")
        if self.any_value:
            conditions.append(f"with one of {', '.join(self.any_value)}")
        if self.no_value:
            conditions.append(f"without {', '.join(self.no_value)}")
        if self.add_on:
            conditions.append(f"{self.add_on} add-on")
        text = " ".join(words)
        return f"{text} ({'; '.join(conditions)})" if conditions else text


class Action(msgspec.Struct, frozen=True, kw_only=True):
    """An action in force: its shapes, and where each one came from."""

    name: str
    description: str
    source: str
    shapes: tuple[Shape, ...]
    shape_sources: tuple[str, ...]
    phrase: str = ""  # how the hook names it to the model; "" for the default
    tools: tuple[str, ...] = ()  # MCP tools that perform it: "server/tool" globs
    paths: tuple[str, ...] = ()  # file edits that perform it: .gitignore-style patterns
    # A user's action's own fields, for checks: (name, how it is read), see FIELD_SPECS.
    fields: tuple[tuple[str, str], ...] = ()

    def triggers(self) -> tuple[str, ...]:
        """Every trigger, as a person would write it: shapes, `tool ...`, `edit ...`."""
        return (
            *(shape.describe() for shape in self.shapes),
            *(f"MCP tool {tool}" for tool in self.tools),
            *(f"file edit {path}" for path in self.paths),
        )


class SubcommandSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    options_with_value: frozenset[str] = frozenset()


class ProgramSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """What a program's command line looks like, so its subcommand can be found."""

    options_with_value: frozenset[str] = frozenset()
    help_flags: frozenset[str] = frozenset()
    skip_prefixes: tuple[str, ...] = ()
    subcommands: dict[str, SubcommandSpec] = {}
    # A program that runs another's commands (hub runs git's): it performs that
    # program's actions too, with its shapes and options (see `_runs_as`).
    runs_as: str | None = None


WrapperKind = Literal["wrapper", "shell", "eval", "interpreter"]


class WrapperSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """A command that runs another command (`sudo`, `env`, `bash -c`, `python -m`)."""

    kind: WrapperKind = "wrapper"
    names: tuple[str, ...] = ()
    names_pattern: str | None = None
    options_with_value: frozenset[str] = frozenset()
    no_command_flags: frozenset[str] = frozenset()
    assignments: bool = False
    positionals: int = 0
    string_options: frozenset[str] = frozenset()
    split_string_options: frozenset[str] = frozenset()
    option_prefixes: tuple[str, ...] = ("-",)
    command_flag: str | None = None
    module_option: str | None = None
    appends_input: bool = False
    replace_options: frozenset[str] = frozenset()


class _ActionEntry(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """An `[actions.NAME]` table as written, built-in or the user's."""

    description: str | None = None
    phrase: str | None = None  # e.g. "the pull request you are about to open"
    enabled: bool = True
    replace: bool = False
    shapes: list[Shape] = []
    tools: list[str] = []
    paths: list[str] = []
    fields: dict[str, str] = {}


# How a user's action declares a field (`fields = { env = "option -e --env" }`): the value
# of the last of these options given, the Nth positional argument after the subcommand,
# all of them (a list), every option given (a list).
FIELD_SPECS = ("option OPTION...", "positional N", "positionals", "flags")
_FIELD_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
_FIELD_SPEC = re.compile(
    r"option( -{1,2}[A-Za-z0-9][A-Za-z0-9_-]*)+|positional [1-9][0-9]?|positionals|flags"
)


def _fields_problem(fields: dict[str, str]) -> str | None:
    """What is wrong with a user's action's `fields`, or None."""
    for name, spec in fields.items():
        if not _FIELD_NAME.fullmatch(name) or name == "path":
            return (
                f"field {name!r}: a field's name is a lower-case word (letters, digits, _; "
                "at most 32), and not `path` (the field of file edits)"
            )
        if not isinstance(spec, str) or not _FIELD_SPEC.fullmatch(spec):
            return (
                f"field {name!r} = {spec!r}: say how the command gives it, one of "
                f"{', '.join(repr(kind) for kind in FIELD_SPECS)}; e.g. "
                f'{name} = "option -e --env" or {name} = "positional 1"'
            )
    return None


class _BuiltinFile(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    actions: dict[str, _ActionEntry]
    programs: dict[str, ProgramSpec] = {}
    wrappers: dict[str, WrapperSpec] = {}


_NO_PROGRAM = ProgramSpec()


class ActionTable:
    """The effective actions, with the program and wrapper knowledge the matcher needs."""

    def __init__(
        self,
        actions: Iterable[Action],
        *,
        programs: Mapping[str, ProgramSpec],
        wrappers: Mapping[str, WrapperSpec],
        disabled: Mapping[str, str] | None = None,
    ) -> None:
        self._actions = {action.name: action for action in actions}
        self._descriptions = MappingProxyType(
            {action.name: action.description for action in self._actions.values()}
        )
        self._programs = dict(programs)
        self._disabled = dict(disabled or {})
        by_program: dict[str, list[tuple[str, Shape]]] = {}
        for action in self._actions.values():
            for shape in action.shapes:
                by_program.setdefault(shape.program, []).append((action.name, shape))
        self._by_program = {name: tuple(rules) for name, rules in by_program.items()}
        self._wrappers: dict[str, WrapperSpec] = {}
        self._pattern_wrappers: list[tuple[re.Pattern[str], WrapperSpec]] = []
        for key, spec in wrappers.items():
            for name in spec.names or (key,):
                self._wrappers[name] = spec
            if spec.names_pattern:
                self._pattern_wrappers.append((re.compile(spec.names_pattern), spec))

    def names(self) -> list[str]:
        """The effective action names, sorted."""
        return sorted(self._actions)

    def source_of(self, action: str) -> str:
        """Where an action comes from: "built-in", or the config file that defines it.

        Raises:
            KeyError: no such action in force.
        """
        return self._actions[action].source

    def __contains__(self, name: object) -> bool:
        """Whether `name` (normalized) is an action in force."""
        return name in self._actions

    def descriptions(self) -> Mapping[str, str]:
        """What each action is, by name ("" when neither the built-ins nor the user said)."""
        return self._descriptions

    def phrase_of(self, name: str) -> str:
        """How the hook names an action to the model, e.g. "the git commit you are about to run".

        The table's `phrase` when it has one, else one made from the name; an
        action not in force gets the made-up one too.
        """
        action = self._actions.get(name)
        if action is not None and action.phrase:
            return action.phrase
        return f"the {name.replace('-', ' ')} you are about to run"

    def actions(self) -> tuple[Action, ...]:
        """The effective actions in table order (built-ins first, in file order)."""
        return tuple(self._actions.values())

    def disabled(self) -> dict[str, str]:
        """Built-in actions switched off, with the config file that did it."""
        return dict(self._disabled)

    def get(self, name: str) -> Action | None:
        """The action in force by that name, or None."""
        return self._actions.get(name)

    def shapes_for(self, program: str) -> tuple[tuple[str, Shape], ...]:
        """(action, shape) pairs for a program, in table order."""
        return self._by_program.get(program, ())

    def program(self, name: str) -> ProgramSpec:
        return self._programs.get(name, _NO_PROGRAM)

    def wrapper(self, name: str) -> WrapperSpec | None:
        spec = self._wrappers.get(name)
        if spec is not None:
            return spec
        for pattern, pattern_spec in self._pattern_wrappers:
            if pattern.fullmatch(name):
                return pattern_spec
        return None


# ------------------------------------------------------------ names in force


class TableInForce(NamedTuple):
    """A config file, its action table, and why the file could not be used (if so)."""

    config: Config
    table: ActionTable
    problem: str | None  # set: the file is unusable and `table` holds the built-ins only


def load_table_in_force(path: Path | None, *, text: str | None = None) -> TableInForce:
    """The config file at `path` (None: defaults) and its action table; never raises.

    `text`: the file's text as a running daemon loaded it (see `load_config`).
    When the file is unusable this is the built-in table and `problem` says why.
    A running daemon keeps the table it had and sends its text (`daemon_table`);
    without a daemon the built-ins are the closest a client can get to it.
    Whoever needs the file to be valid checks `problem`.
    """
    try:
        config = load_config(path, text=text)
        return TableInForce(config, load_action_table(config), None)
    except ConfigError as exc:
        config = Config()
        return TableInForce(config, load_action_table(config), str(exc))


def check_action(table: ActionTable, action: str, *, problem: str | None = None) -> str:
    """`action` normalized (a `trigger:` prefix dropped), when it is an action in `table`.

    Args:
        table: the action table in force.
        action: the name as a person or a model wrote it.
        problem: why the config file could not be used (`TableInForce.problem`), to
            explain why a custom action is missing.

    Raises:
        InvalidInputError: not a usable name, or not one the hook ever names (a rule
            for it would never fire); the message offers the closest known names.
    """
    try:
        name = action_from_input(action)
    except InvalidInputError as exc:
        # Callers add a sentence after it ("`mentectl actions` lists them."): end this one.
        message = str(exc)
        raise InvalidInputError(message if message.endswith(".") else message + ".") from None
    if name in table:
        return name
    known = table.names()
    import difflib  # noqa: PLC0415 - a suggestion only: not on a start's path

    close = difflib.get_close_matches(name, known, n=SUGGESTIONS, cutoff=0.5)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    broken = (
        f" (The config file cannot be used, so only the built-in actions are known: {problem})"
        if problem
        else ""
    )
    raise InvalidInputError(
        f"{action!r} is not an action mented knows, so a rule for it would never fire.{hint}"
        f" Known actions: {', '.join(known)}.{broken} For a command that performs none of"
        " these, define a new action under [actions.<name>] in mented's config file (see"
        " docs/actions.md) and run `mentectl reload`."
    )


# --------------------------------------------------------------------- loading


def load_action_table(config: Config) -> ActionTable:
    """The built-in table merged with the user's `[actions]` section.

    Raises:
        ConfigError: an action or shape in the config file is unusable; the message
            names the file, the line and the action.
    """
    builtin = _builtin()
    source = str(config.path) if config.path is not None else "config"
    merged: dict[str, Action] = {action.name: action for action in builtin.actions}
    disabled: dict[str, str] = {}
    seen: dict[str, str] = {}
    for raw_name, raw_entry in config.actions.items():
        where = _where(config, raw_name)
        try:
            name = normalize_action(str(raw_name))
        except InvalidInputError as exc:
            raise ConfigError(f"{where}: action {raw_name!r}: {exc}") from exc
        if name in seen:
            raise ConfigError(
                f"{where}: action {raw_name!r} is defined twice "
                f"(also as {seen[name]!r}); names are compared in lower case"
            )
        seen[name] = str(raw_name)
        entry = _convert_entry(raw_entry, where, raw_name)
        _apply_user_entry(
            merged, disabled, name=name, entry=entry, source=source, where=where, raw_name=raw_name
        )
    _check_delivery_actions(config, merged, disabled)
    actions: Iterable[Action] = merged.values()
    if not config.matching.git_add_ons:
        actions = [_without_add_ons(action) for action in actions]
    return ActionTable(
        actions,
        programs=builtin.programs,
        wrappers=builtin.wrappers,
        disabled=disabled,
    )


def _without_add_ons(action: Action) -> Action:
    kept = [
        (shape, source)
        for shape, source in zip(action.shapes, action.shape_sources, strict=True)
        if shape.add_on is None
    ]
    return msgspec.structs.replace(
        action,
        shapes=tuple(shape for shape, _ in kept),
        shape_sources=tuple(source for _, source in kept),
    )


def _runs_as(shapes: Iterable[Shape], programs: Mapping[str, ProgramSpec]) -> tuple[Shape, ...]:
    """`shapes` with, after each shape of a program that another runs (`runs_as`: hub
    runs git's commands), its copy for that other program: `hub push` is a `git push`.

    Copies in the built-in table, not a lookup at match time, so that everything
    that reads the shapes (the matcher, `mentectl actions`, the agents' hook
    filters) sees them. A user's own shapes are theirs: they are not copied.
    """
    runners: dict[str, list[str]] = {}
    for name, spec in programs.items():
        if spec.runs_as:
            runners.setdefault(spec.runs_as, []).append(name)
    given = tuple(shapes)
    own = {(shape.program, shape.subcommand) for shape in given}
    result: list[Shape] = []
    for shape in given:
        result.append(shape)
        if shape.add_on is not None:
            continue  # `hub sync` is hub's own command, not git-extras' one
        result.extend(
            msgspec.structs.replace(shape, program=runner)
            for runner in runners.get(shape.program, ())
            if (runner, shape.subcommand) not in own
        )
    return tuple(result)


def _check_delivery_actions(
    config: Config, merged: dict[str, Action], disabled: dict[str, str]
) -> None:
    """Refuse a `[delivery]` line for an action that is nowhere in the table (a typo).

    A switched-off built-in may keep its line: it applies again once switched on.
    """
    named = [("delivery", name) for name in config.delivery.actions]
    named += [("checks", name) for name in config.checks.actions]  # `[checks]` likewise
    for section, name in named:
        if name in merged or name in disabled:
            continue
        # `default` is a [delivery] key too (`defualt = "context"` is one mistyped).
        known = [DEFAULT_DELIVERY_KEY if section == "delivery" else "mode", *merged]
        import difflib  # noqa: PLC0415 - a suggestion only: not on a start's path

        close = difflib.get_close_matches(name, known, n=SUGGESTIONS, cutoff=0.5)
        hint = f"; did you mean: {', '.join(close)}?" if close else ""
        line = line_of_key(config.text, section, name)
        path = str(config.path) if config.path is not None else "config"
        where = f"{path}:{line}" if line else path
        raise ConfigError(
            f"{where}: [{section}] names {name!r}, which is not an action{hint} "
            "(`mentectl actions` lists them)"
        )


def _apply_user_entry(  # noqa: PLR0913 - one merge step, its inputs spelled out
    merged: dict[str, Action],
    disabled: dict[str, str],
    *,
    name: str,
    entry: _ActionEntry,
    source: str,
    where: str,
    raw_name: str,
) -> None:
    existing = merged.get(name)
    if not entry.enabled:
        if existing is None and not entry.shapes:
            raise ConfigError(
                f"{where}: action {raw_name!r}: `enabled = false` switches off a built-in "
                f"action, and there is no built-in {name!r}; built-ins are: "
                f"{', '.join(_builtin_names())}"
            )
        merged.pop(name, None)
        disabled[name] = source
        return
    if existing is None:
        if entry.replace:
            raise ConfigError(
                f"{where}: action {raw_name!r}: `replace = true` only applies to a built-in "
                "action; remove it for a new action"
            )
        if not (entry.shapes or entry.tools or entry.paths):
            raise ConfigError(
                f"{where}: action {raw_name!r} has no shapes, tools or paths; add e.g. "
                'shapes = [{ program = "make", subcommand = ["deploy"] }], '
                'tools = ["github/create_deployment"] or paths = ["deploy/**"]'
            )
        merged[name] = Action(
            name=name,
            description=entry.description or "",
            phrase=entry.phrase or "",
            source=source,
            shapes=tuple(entry.shapes),
            shape_sources=(source,) * len(entry.shapes),
            tools=tuple(entry.tools),
            paths=tuple(entry.paths),
            fields=tuple(entry.fields.items()),
        )
        return
    if entry.fields and existing.source == BUILTIN:
        raise ConfigError(
            f"{where}: action {raw_name!r}: a built-in action has its own fields "
            '(docs/actions.md, "Fields of an action"); declare fields on your own actions'
        )
    if entry.replace:
        shapes, sources = tuple(entry.shapes), (source,) * len(entry.shapes)
        tools, paths = tuple(entry.tools), tuple(entry.paths)
        action_source = source
    else:
        shapes = existing.shapes + tuple(entry.shapes)
        sources = existing.shape_sources + (source,) * len(entry.shapes)
        tools = existing.tools + tuple(t for t in entry.tools if t not in existing.tools)
        paths = existing.paths + tuple(p for p in entry.paths if p not in existing.paths)
        action_source = existing.source
    if not (shapes or tools or paths):
        raise ConfigError(
            f"{where}: action {raw_name!r}: `replace = true` with no shapes, tools or paths "
            "leaves the action unable to fire; use `enabled = false` to switch it off"
        )
    merged[name] = Action(
        name=name,
        description=entry.description or existing.description,
        phrase=entry.phrase or existing.phrase,
        source=action_source,
        shapes=shapes,
        shape_sources=sources,
        tools=tools,
        paths=paths,
        fields=tuple(entry.fields.items())
        if entry.replace
        else existing.fields
        + tuple(item for item in entry.fields.items() if item[0] not in dict(existing.fields)),
    )


def _convert_entry(raw: Any, where: str, raw_name: str) -> _ActionEntry:  # noqa: ANN401 - raw TOML
    if not isinstance(raw, dict):
        raise ConfigError(
            f"{where}: action {raw_name!r} must be a table, e.g. "
            f'[actions.{raw_name}] with shapes = [{{ program = "git", subcommand = ["commit"] }}]'
        )
    try:
        entry = msgspec.convert(raw, _ActionEntry)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{where}: action {raw_name!r}: {_explain_validation(exc)}") from exc
    for number, shape in enumerate(entry.shapes, start=1):
        problem = _shape_problem(shape)
        if problem:
            raise ConfigError(f"{where}: action {raw_name!r}, shape {number}: {problem}")
    problem = _trigger_problem(entry.tools, entry.paths) or _fields_problem(entry.fields)
    if problem:
        raise ConfigError(f"{where}: action {raw_name!r}: {problem}")
    return entry


def _trigger_problem(
    tools: Iterable[str], paths: Iterable[str], *, builtin: bool = False
) -> str | None:
    """What is wrong with an action's tool and path triggers, or None."""
    for tool in tools:
        server, _, name = tool.partition("/")
        if not server or not name or "/" in name or any(ch.isspace() for ch in tool):
            return (
                f"tool {tool!r} must be SERVER/TOOL, the MCP server's name and the tool's, "
                "either may be a glob: 'github/create_pull_request', '*/merge_pull_request'"
            )
    for path in paths:
        if not path.strip() or path.startswith("!"):
            return (
                f"path {path!r} must be a pattern of the files whose edits perform the action, "
                "as in .gitignore, relative to the project root: 'db/migrations/**', "
                "'CHANGELOG.md'"
            )
        problem = path_pattern_problem(path, bounds_only=builtin)
        if problem:
            return f"path {path!r}: {problem}"
    return None


def _explain_validation(exc: msgspec.ValidationError) -> str:
    message = str(exc)
    if "unknown field" in message:
        message += (
            "; an action takes description, phrase, enabled, replace, shapes, tools and paths; "
            "a shape takes "
            "program, subcommand, any_flag, no_flag, min_positionals, "
            "positional_starts_with and options_with_value"
        )
    return message


def _shape_problem(shape: Shape) -> str | None:
    """What is wrong with a shape, or None."""
    if not shape.program or any(ch.isspace() for ch in shape.program):
        return f"program {shape.program!r} must be one word, e.g. 'git'"
    if "/" in shape.program:
        base = shape.program.rsplit("/", 1)[-1]
        return f"program {shape.program!r}: programs are matched by basename; write {base!r}"
    for word in shape.subcommand:
        alternatives = (word,) if isinstance(word, str) else word
        if not alternatives:
            return "a subcommand word given as a list needs at least one alternative"
        for alternative in alternatives:
            if not alternative or any(ch.isspace() for ch in alternative):
                return (
                    f"subcommand word {alternative!r} must be one word; write "
                    'subcommand = ["pr", "create"] for `gh pr create`'
                )
    for field in ("any_flag", "no_flag", "options_with_value"):
        for flag in getattr(shape, field):
            if not flag.startswith("-") or len(flag) < 2 or "=" in flag:
                return f"{field} entry {flag!r} must be an option such as '-f' or '--force'"
    for field in ("any_value", "no_value"):
        for pair in getattr(shape, field):
            option, equals, value = pair.partition("=")
            if not option.startswith("-") or len(option) < 2 or not equals or not value:
                return f"{field} entry {pair!r} must be an option and its value, such as '-X=POST'"
    if shape.min_positionals < 0:
        return "min_positionals cannot be negative"
    if shape.max_positionals is not None and shape.max_positionals < shape.min_positionals:
        return "max_positionals cannot be below min_positionals (nor negative)"
    for field in ("positional_matches", "no_positional_matches", "last_positional_matches"):
        if getattr(shape, field) == "":
            return f"{field} cannot be empty"
    if shape.positional_starts_with is not None and not shape.positional_starts_with:
        return "positional_starts_with cannot be empty"
    return None


def _where(config: Config, raw_name: str) -> str:
    """`path:line` of an action's definition in the config file, or just the path."""
    path = str(config.path) if config.path is not None else "config"
    candidates = (
        f"[actions.{raw_name}]",
        f'[actions."{raw_name}"]',
        f"[[actions.{raw_name}.shapes]]",
        f"actions.{raw_name}",
        f'"{raw_name}"',
        f"{raw_name} =",
        raw_name,
    )
    for needle in candidates:
        line = line_of(config.text, needle)
        if line is not None:
            return f"{path}:{line}"
    return path


@functools.cache
def _builtin() -> _BuiltinTable:
    """The built-in table, once per process: as checked and kept by an earlier start
    (`mented.action_cache`), else read and checked now."""
    from mented import action_cache  # noqa: PLC0415 - not for the names alone

    here = Path(__file__)
    # The table, and the code that reads it: a change to either is another table.
    sources = (here.with_name(BUILTIN_FILE), here, here.with_name("memory.py"))
    return action_cache.cached(_BuiltinTable, _read_builtin, sources)


def _read_builtin() -> _BuiltinTable:
    """The built-in table, read and checked."""
    # Only when the table kept by `action_cache` is missing or stale: importlib.resources
    # (tempfile, shutil...) is a twentieth of what the first hook after a start waits for.
    import tomllib  # noqa: PLC0415 - as importlib.resources
    from importlib import resources  # noqa: PLC0415

    text = resources.files("mented").joinpath(BUILTIN_FILE).read_text(encoding="utf-8")
    try:
        document = msgspec.convert(tomllib.loads(text), _BuiltinFile)
    except (tomllib.TOMLDecodeError, msgspec.ValidationError) as exc:  # a packaging bug
        raise ConfigError(f"the built-in {BUILTIN_FILE} is broken: {exc}") from exc
    actions = []
    for raw_name, entry in document.actions.items():
        name = normalize_action(raw_name)
        for shape in entry.shapes:
            problem = _shape_problem(shape)
            if problem:
                raise ConfigError(f"the built-in {BUILTIN_FILE}, action {name!r}: {problem}")
        problem = _trigger_problem(entry.tools, entry.paths, builtin=True)
        if problem:
            raise ConfigError(f"the built-in {BUILTIN_FILE}, action {name!r}: {problem}")
        shapes = _runs_as(entry.shapes, document.programs)
        actions.append(
            Action(
                name=name,
                description=entry.description or "",
                phrase=entry.phrase or "",
                source=BUILTIN,
                shapes=shapes,
                shape_sources=(BUILTIN,) * len(shapes),
                tools=tuple(entry.tools),
                paths=tuple(entry.paths),
            )
        )
    return _BuiltinTable(
        actions=tuple(actions),
        programs=_with_runs_as(document.programs),
        wrappers=document.wrappers,
    )


def _with_runs_as(programs: dict[str, ProgramSpec]) -> dict[str, ProgramSpec]:
    """Each program that runs another's commands takes that program's options too."""
    result = dict(programs)
    for name, spec in programs.items():
        target = programs.get(spec.runs_as) if spec.runs_as else None
        if target is None:
            continue
        result[name] = msgspec.structs.replace(
            spec,
            options_with_value=spec.options_with_value | target.options_with_value,
            help_flags=spec.help_flags | target.help_flags,
            subcommands={**target.subcommands, **spec.subcommands},
        )
    return result


def _builtin_names() -> list[str]:
    return [action.name for action in _builtin().actions]


class _BuiltinTable(msgspec.Struct, frozen=True, kw_only=True):
    actions: tuple[Action, ...]
    programs: dict[str, ProgramSpec]
    wrappers: dict[str, WrapperSpec]
