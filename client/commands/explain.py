"""`mentectl explain COMMAND` and `mentectl actions`: what the matcher sees, without guessing.

Both work without a daemon: they load the action table from a config file and
run the same matcher the daemon runs. `explain` uses the running daemon's config
file (the one it was started with, `--config` included) when a daemon answers,
so that it agrees with the hook; `actions` lists the config file's here. When a
daemon answers, `explain` also shows the rules the hook would hand over for the
actions found: to one agent (`--agent`, default claude-code, as for `mentectl
mcp`) running the command in one directory (`--cwd`, default the current one),
because the hook itself only ever answers one agent in one directory.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from mented import paths
from mented.actions import ActionTable, TableInForce, load_table_in_force
from mented.agents import AGENTS, DEFAULT_AGENT, ToolCall
from mented.edits import EditMatcher
from mented.git_aliases import NO_ALIASES, GitAliases
from mented.memory import Memory, short_handle
from mented.protocol import MemoriesReply, RecallRequest, UntrustedProject
from mented.tool_triggers import ToolMatcher
from mented_client.commands.output import (
    CommandError,
    escape_controls,
    format_memory,
    print_json,
    untrusted_note,
)
from mented_client.connection import Client, NotRunningError
from mented_client.scope import agent_option, daemon_table, directory_option, table_in_force

if TYPE_CHECKING:  # argparse's class is not subscriptable at run time
    from collections.abc import Iterator

    from mented.config import Config
    from mented.matcher import Explanation, MatchedCommand, SimpleCommand

    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]  # noqa: SLF001 - argparse's own type

# Short: explain is interactive, and a daemon that is not there should not slow it.
CONNECT_TIMEOUT = 0.2


def register(subparsers: SubParsers, common: argparse.ArgumentParser) -> None:
    explain = subparsers.add_parser(
        "explain",
        parents=[common],
        help="show which actions a shell command performs, and why",
        description=(
            "Parse COMMAND as the hook would: each simple command found, the action it "
            "performs and the shape that matched, or why nothing matched. With a running "
            "daemon, also the rules the hook would hand to AGENT running it in DIR. Quote the "
            "command, or put it after `--`; `-` reads it from standard input."
        ),
    )
    explain.add_argument(
        "shell_command",
        nargs=argparse.REMAINDER,
        metavar="COMMAND",
        help="the shell command: its words are joined, and every word after the first is part "
        "of it (`mentectl explain git commit -m x`), so give mentectl's options before it; "
        "leave it out with --tool",
    )
    explain.add_argument(
        "--tool",
        metavar="NAME",
        help="explain a call of this agent tool instead of a command, by --agent's name for "
        "it, in the event that agent's hook gets: an MCP tool (mcp__github__create_pull_request; "
        "github_create_pull_request for opencode) or a file-writing tool (Edit, Write; "
        "apply_patch for codex, edit for opencode and pi, write_file for gemini-cli) with --path",
    )
    explain.add_argument(
        "--path",
        action="append",
        default=[],
        metavar="PATH",
        help="a file the --tool call writes, relative to --cwd (repeatable)",
    )
    explain.add_argument(
        "--agent",
        type=agent_option,
        default=DEFAULT_AGENT,
        help=f"show the rules this agent would be handed (default: {DEFAULT_AGENT}); "
        "rules scoped to another agent are left out, as the hook leaves them out",
    )
    explain.add_argument(
        "--cwd",
        metavar="DIR",
        type=directory_option,
        help="as if the agent ran the command in DIR (default: the current directory); "
        "rules for other projects are left out",
    )
    _config_option(explain, "the running daemon's, else $MENTED_CONFIG, else the per-user path")
    explain.set_defaults(handler=run_explain)

    actions = subparsers.add_parser(
        "actions",
        parents=[common],
        help="list the action table in force and where each action comes from",
        description="Built-in actions, and those the config file adds, extends or switches off.",
    )
    _config_option(actions, "the running daemon's, else $MENTED_CONFIG, else the per-user path")
    actions.set_defaults(handler=run_actions)


def _config_option(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument("--config", metavar="PATH", help=f"the config file (default: {default})")


def _load(explicit: str | None) -> TableInForce:
    """The config file's table: `explicit`, else `$MENTED_CONFIG`, else the default."""
    return load_table_in_force(paths.config_path(explicit))


def _load_as_the_daemon(explicit: str | None, daemon: Client | None) -> TableInForce:
    """`explicit`'s table, else the running daemon's (its config file's), else `_load`'s."""
    if explicit:
        return _load(explicit)
    if daemon is not None:
        with contextlib.suppress(NotRunningError):  # gone meanwhile: the table here
            return daemon_table(daemon)
    return _load(None)


@contextlib.contextmanager
def _daemon(socket: str | None) -> Iterator[Client | None]:
    """One connection to the running daemon for all `explain` asks it (its table, then the
    rules): a daemon just started answers both before it imported trio (mented.first_answers),
    and waits a little for the second on a connection it answered; None: no daemon."""
    client = Client(socket, connect_timeout=CONNECT_TIMEOUT)
    try:
        client.connect()
    except NotRunningError:
        yield None
        return
    with client:
        yield client


def _usable(in_force: TableInForce) -> tuple[Config, ActionTable]:
    config, table, problem = in_force
    if problem:
        # The daemon would not run on this file either: explaining with the
        # built-ins instead would show a table that is nowhere in force.
        raise CommandError(problem)
    return config, table


# ---------------------------------------------------------------------- explain


def run_explain(args: argparse.Namespace) -> int:
    if args.tool or args.path:
        return run_explain_tool(args)
    words = args.shell_command[1:] if args.shell_command[:1] == ["--"] else args.shell_command
    if not words:
        raise CommandError(
            "give the shell command to explain, e.g. `mentectl explain git push`, "
            "or --tool NAME (with --path for an edit)",
            2,
        )
    command = sys.stdin.read() if words == ["-"] else " ".join(words)
    with _daemon(args.socket) as daemon:
        return _explain_command(args, command, daemon)


def _explain_command(args: argparse.Namespace, command: str, daemon: Client | None) -> int:
    config, table = _usable(_load_as_the_daemon(args.config, daemon))
    cwd = args.cwd or os.getcwd()  # noqa: PTH109 - lexical, like the hook's cwd
    aliases = GitAliases().for_directory(cwd) if "git" in command else NO_ALIASES
    # bashlex takes a quarter of a second to import: only `explain` pays for it.
    from mented.matcher import Matcher  # noqa: PLC0415

    matcher = Matcher(table)
    explanation = matcher.explain(command, aliases=aliases)
    rules = _rules(daemon, explanation.actions, agent=args.agent, cwd=cwd, k=config.hook.k)
    checked = fields_and_checks(
        table, matcher.matched_commands(command, aliases=aliases), rules, cwd
    )
    if args.json:
        document: dict[str, Any] = msgspec.to_builtins(explanation)
        document.update(_rules_document(rules))
        document["fields"] = checked
        document["agent"] = args.agent
        document["cwd"] = cwd
        print_json(document)
        return 0
    print(render_explanation(explanation, table))
    if explanation.actions:
        print()
        print(render_rules(rules, agent=args.agent, cwd=cwd))
    if checked:
        print()
        print(render_fields(checked))
    return 0


def fields_and_checks(
    table: ActionTable,
    commands: tuple[MatchedCommand, ...],
    rules: HookRules | None,
    cwd: str,
) -> list[dict[str, Any]]:
    """Per command and action: its fields (known or why not) and each rule's checks on them."""
    # Loaded with the matcher, which `explain` pays for anyway.
    from mented.checks import CheckError, evaluate, parse_check  # noqa: PLC0415
    from mented.fields import action_fields, fields_in  # noqa: PLC0415

    found = []
    for fields in fields_in(table, commands, list(action_fields(table)), cwd):
        outcomes = []
        for memory in rules.by_action.get(fields.action, []) if rules else []:
            for text in memory.checks:
                try:
                    outcome = evaluate(parse_check(text, (fields.action,), table), fields)
                except CheckError as exc:
                    outcomes.append(
                        {"rule": memory.id, "check": text, "outcome": "unusable", "said": str(exc)}
                    )
                    continue
                verdict = {True: "passed", False: "failed", None: "unknown"}[outcome.passed]
                outcomes.append(
                    {"rule": memory.id, "check": text, "outcome": verdict, "said": outcome.said}
                )
        found.append(
            {
                "action": fields.action,
                "fields": {
                    name: list(value) if isinstance(value, tuple) else value
                    for name, value in fields.values.items()
                },
                "unknown": fields.unknown,
                "checks": outcomes,
            }
        )
    return found


def render_fields(checked: list[dict[str, Any]]) -> str:
    """`fields_and_checks` for people: each field's value (cut) or why it is unknown."""
    lines = []
    for item in checked:
        lines.append(f"fields of {item['action']}:")
        for name, value in item["fields"].items():
            shown = ", ".join(value) if isinstance(value, list) else value
            lines.append(f"  {name + ':':<10}{_clip(repr(shown), 120)}")
        for name, why in item["unknown"].items():
            lines.append(f"  {name + ':':<10}unknown: {why}")
        for outcome in item["checks"]:
            said = f": {outcome['said']}" if outcome["said"] else ""
            lines.append(
                f"  check [{short_handle(outcome['rule'])}] {outcome['check']!r}: "
                f"{outcome['outcome']}{_clip(said, 200)}"
            )
    return _one_line_each(lines)


def run_explain_tool(args: argparse.Namespace) -> int:
    """`explain --tool NAME [--path PATH]...`: the actions a tool call performs, and why."""
    if not args.tool:
        raise CommandError("--path goes with --tool (e.g. --tool Edit --path db/x.sql)", 2)
    if args.shell_command:
        raise CommandError("give either a shell command or --tool, not both", 2)
    with _daemon(args.socket) as daemon:
        return _explain_tool(args, daemon)


def _explain_tool(args: argparse.Namespace, daemon: Client | None) -> int:
    config, table = _usable(_load_as_the_daemon(args.config, daemon))
    agent = AGENTS[args.agent]
    cwd = args.cwd or os.getcwd()  # noqa: PTH109 - lexical, like the hook's cwd
    # Built by the agent's adapter: the event its hook gets, in its own shape.
    call = agent.decode(agent.tool_event(args.tool, args.path, cwd=cwd))
    lines = []
    found: list[tuple[str, str]] = []  # action, why
    if not isinstance(call, ToolCall):
        edit = ", ".join(agent.file_edit_tools())
        reason = (
            f"{agent.title} sends no call of {args.tool!r} mented looks at: an MCP tool is "
            f"{agent.mcp_prefix}SERVER{agent.mcp_separator}TOOL, a file edit one of {edit} "
            "with --path"
        )
        if args.tool in agent.file_edit_tools() and not args.path:
            reason = f"{args.tool} writes a file: give it with --path"
        lines.append(f"no action: {reason}")
    elif call.mcp_tool:
        lines.append(f"MCP tool: {call.mcp_tool}")
        found = [
            (action, f"MCP tool {glob}")
            for action, glob in ToolMatcher(table).explain(call.mcp_tool)
        ]
    else:
        edits = EditMatcher(table)
        lines.append(f"file edit: {', '.join(edits.relative_path(p, cwd) for p in call.edited)}")
        found = [
            (action, f"file edit {pattern} ({path})")
            for action, pattern, path in edits.explain(call.edited, cwd)
        ]
    actions = tuple(dict.fromkeys(action for action, _ in found))
    if isinstance(call, ToolCall) and not found:
        lines.append("no action: no action names this tool call in `tools` or `paths`")
    rules = _rules(daemon, actions, agent=args.agent, cwd=cwd, k=config.hook.k)
    if args.json:
        print_json(
            {
                "tool": args.tool,
                "paths": args.path,
                "actions": list(actions),
                "matches": [{"action": action, "trigger": why} for action, why in found],
                **_rules_document(rules),
                "agent": args.agent,
                "cwd": cwd,
            }
        )
        return 0
    print(f"actions: {', '.join(actions) or '(none)'}")
    print(_one_line_each(lines + [f"   -> {action}: {why}" for action, why in found]))
    if actions:
        print()
        print(render_rules(rules, agent=args.agent, cwd=cwd))
    return 0


@dataclass(frozen=True)
class HookRules:
    """The rules the hook would hand over, per action, and a project's it would not use."""

    by_action: dict[str, list[Memory]]
    untrusted: UntrustedProject | None = None


def _rules(
    daemon: Client | None, actions: tuple[str, ...], *, agent: str, cwd: str, k: int
) -> HookRules | None:
    """The rules the hook would hand `agent` in `cwd` for each action; None with no daemon."""
    if daemon is None:
        return None
    try:
        by_action = {}
        untrusted = None
        for action in actions:
            reply = daemon.expect(
                RecallRequest(action=action, agent=agent, cwd=cwd, k=k), MemoriesReply
            )
            by_action[action] = reply.memories
            untrusted = reply.untrusted
        return HookRules(by_action, untrusted)
    except NotRunningError:
        return None


def _rules_document(rules: HookRules | None) -> dict[str, Any]:
    """`rules`, `daemon` and `untrusted` of `explain --json`."""
    return {
        "rules": None if rules is None else msgspec.to_builtins(rules.by_action),
        "daemon": rules is not None,
        "untrusted": None if rules is None else msgspec.to_builtins(rules.untrusted),
    }


def render_explanation(explanation: Explanation, table: ActionTable) -> str:
    lines = [f"actions: {', '.join(explanation.actions) or '(none)'}"]
    parser: str = explanation.parser
    if explanation.fallback_used and parser != "fallback":
        parser += " (the fallback tokenizer for part of it)"
    lines.append(f"parser:  {parser}")
    lines.extend(f"note:    {note}" for note in explanation.notes)
    for number, command in enumerate(explanation.commands, start=1):
        lines.append("")
        lines.extend(_render_command(number, command, table))
    return _one_line_each(lines)


def _render_command(number: int, command: SimpleCommand, table: ActionTable) -> list[str]:
    words = " ".join(_show_word(word) for word in command.words)
    lines = [f"{number}. {_clip(words)}"]
    if command.via:
        lines.append(f"   via:     {' > '.join(command.via)}")
    if command.program is not None:
        lines.append(f"   program: {command.program}")
    if command.parser == "fallback":
        lines.append("   parsed by the fallback tokenizer")
    for match in command.matches:
        source = table.source_of(match.action)
        origin = "" if source == "built-in" else f" (from {source})"
        lines.append(f"   -> {match.action}{origin}: {match.shape}")
    if not command.matches:
        lines.append(f"   no action: {command.reason}")
    return lines


def render_rules(rules: HookRules | None, *, agent: str, cwd: str) -> str:
    if rules is None:
        return "rules: the daemon is not running, so the rules are not shown"
    lines = [
        escape_controls(
            f"as the hook hands them to {agent} running the command in {cwd}:", keep_lines=False
        )
    ]
    for action, memories in rules.by_action.items():
        lines.append(
            f"rules for {escape_controls(action, keep_lines=False)}: {len(memories) or 'none'}"
        )
        lines.extend("  " + format_memory(memory).replace("\n", "\n  ") for memory in memories)
    if rules.untrusted is not None:
        lines.append(untrusted_note(rules.untrusted))
    return "\n".join(lines)


def _one_line_each(lines: list[str]) -> str:
    """`lines` joined, each kept to one line: what they quote is the command's or the config's."""
    return "\n".join(escape_controls(line, keep_lines=False) for line in lines)


def _show_word(word: str) -> str:
    if word and not any(ch.isspace() or ch in "'\"\\;&|()<>$`" for ch in word):
        return word
    return repr(word)


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---------------------------------------------------------------------- actions


def run_actions(args: argparse.Namespace) -> int:
    in_force = _load(args.config) if args.config else table_in_force(args.socket)
    config, table = _usable(in_force)
    if args.json:
        print_json(
            {
                "config": str(config.path) if config.path else None,
                "actions": [
                    {
                        "name": action.name,
                        "source": action.source,
                        "description": action.description,
                        "shapes": [
                            {"shape": shape.describe(), "source": source}
                            for shape, source in zip(
                                action.shapes, action.shape_sources, strict=True
                            )
                        ],
                        "tools": list(action.tools),
                        "paths": list(action.paths),
                        "triggers": list(action.triggers()),
                    }
                    for action in table.actions()
                ],
                "disabled": [
                    {"name": name, "source": source} for name, source in table.disabled().items()
                ],
            }
        )
        return 0
    print(render_actions(table))
    return 0


def render_actions(table: ActionTable) -> str:
    lines = []
    for action in table.actions():
        lines.append(f"{action.name}  [{action.source}]  {action.description}".rstrip())
        for shape, source in zip(action.shapes, action.shape_sources, strict=True):
            origin = "" if source == action.source else f"  [{source}]"
            lines.append(f"    {shape.describe()}{origin}")
        # Every other trigger: the MCP tools and the file edits that perform it.
        lines.extend(f"    {trigger}" for trigger in action.triggers()[len(action.shapes) :])
    for name, source in table.disabled().items():
        lines.append(f"{name}  [switched off in {source}]")
    return _one_line_each(lines)
