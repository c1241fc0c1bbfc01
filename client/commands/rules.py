"""`mentectl rule ...`: add, list, show, supersede, trace and forget action rules.

`rule add --pinned TEXT` adds a pinned rule instead: no action, handed to the
agent at the start of every session, refused by the daemon past the cap
(mented.pinned); `rule list --pinned` lists them.

What a rule names is checked before it is stored, as the MCP server checks it:
the action against the daemon's action table (`mented.actions.check_action`), an
agent against the agents the hook serves and a project directory for existence
(`mented_client.scope`). A rule that could never fire is refused, with the fix.

The action table (`mented.actions`, with the config and path-pattern code under
it) is imported only by the verbs that use more of it than its names: `rule
list --action` asks the daemon for the names (`daemon_has_action`) and loads the
table only to explain a name it does not know; `--help` and plain `rule list`
never load it.
"""

from __future__ import annotations

import argparse
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from mented.agent_names import AGENT_NAMES
from mented.memory import (
    MAX_CONTENT_BYTES,
    PINNED_TAG,
    TRIGGER_PREFIX,
    InvalidInputError,
    Memory,
    MemoryType,
    normalize_action,
    origin_of,
    short_handle,
    trigger_tag,
)
from mented.protocol import (
    ForgetRequest,
    ForgottenReply,
    GetRequest,
    HistoryRequest,
    ListRequest,
    MemoriesReply,
    MemoryReply,
    RecallRequest,
    StoredReply,
    StoreRequest,
    SupersededReply,
    SupersedeRequest,
    UntrustedProject,
)
from mented.words import counted
from mented_client.commands.output import (
    CommandError,
    escape_controls,
    format_memory,
    print_json,
    untrusted_note,
)
from mented_client.connection import Client
from mented_client.scope import (
    agent_option,
    count_option,
    daemon_has_action,
    daemon_table,
    directory_option,
    project_option,
)

if TYPE_CHECKING:  # argparse's class is not subscriptable at run time
    from collections.abc import Collection, Sequence

    from mented.actions import TableInForce

    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]  # noqa: SLF001 - argparse's own type


def register(subparsers: SubParsers, common: argparse.ArgumentParser) -> None:
    rule = subparsers.add_parser(
        "rule",
        help="manage action rules (memories tagged trigger:<action>)",
        description="Action rules are handed to the agent right before it performs the action.",
    )
    verbs = rule.add_subparsers(dest="verb", metavar="VERB", required=True)

    add = verbs.add_parser("add", parents=[common], help="add a rule for an action")
    add.add_argument(
        "action",
        nargs="?",
        help="the action it governs, e.g. git-commit (see `mentectl actions`); "
        "with --pinned, the rule itself",
    )
    _text_options(add, "the rule, e.g. 'commit messages: single line, no emojis'")
    add.add_argument(
        "--pinned",
        action="store_true",
        help="a rule for everything the agent does (`rule add --pinned TEXT`), handed over at "
        "the start of every session; a handful at most ([pinned] in the config file)",
    )
    _scope_options(add)
    _check_option(add)
    add.add_argument(
        "--type",
        dest="memory_type",
        default=MemoryType.PROCEDURAL.value,
        choices=[t.value for t in MemoryType],
        help="memory type (default: procedural)",
    )
    add.add_argument(
        "--team",
        action="store_true",
        help=(
            "write it in this project's .mented/rules.jsonl, for you to commit and your "
            "team to share (`mentectl trust` makes it reach your agents)"
        ),
    )
    add.set_defaults(handler=run_add)

    listing = verbs.add_parser(
        "list",
        parents=[common],
        help="list rules, newest first",
        description=(
            "With --action (and without --all) this is the same lookup the hook makes "
            "(recall_for_action), for --agent and --cwd (unset: every agent's and every "
            "project's rules), at most 6 rules unless -k (the hook takes [hook] k, default 6)."
        ),
    )
    listing.add_argument("--action", help="only rules for this action, as the hook would fire them")
    listing.add_argument(
        "--agent", help="as seen by this agent (default: every agent's rules)", type=agent_option
    )
    listing.add_argument(
        "--cwd",
        type=directory_option,
        help="as seen from this directory (default: every project's rules)",
    )
    listing.add_argument(
        "-k", type=count_option, default=None, help="at most this many (with --action: 6)"
    )
    listing.add_argument("--all", action="store_true", help="also show superseded rules")
    listing.add_argument(
        "--pinned", action="store_true", help="only pinned rules (handed over at session start)"
    )
    listing.set_defaults(handler=run_list)

    show = verbs.add_parser("show", parents=[common], help="show one rule")
    show.add_argument("id", help="the rule's id or short handle")
    show.set_defaults(handler=run_show)

    supersede = verbs.add_parser(
        "supersede",
        parents=[common],
        help="replace a rule; the old one stops firing at once and stays in the history",
    )
    supersede.add_argument("id", help="the id or short handle of the rule to replace")
    _text_options(supersede, "the new rule")
    supersede.add_argument(
        "--agent",
        type=agent_option,
        help="scope the new version to this agent (default: the old one's)",
    )
    supersede.add_argument(
        "--project",
        metavar="DIR",
        type=project_option,
        help="scope the new version to DIR and below (default: the old one's)",
    )
    _check_option(supersede, new_version=True)
    supersede.set_defaults(handler=run_supersede)

    history = verbs.add_parser("history", parents=[common], help="a rule's versions, oldest first")
    history.add_argument("id", help="the id or short handle of any version")
    history.set_defaults(handler=run_history)

    forget = verbs.add_parser("forget", parents=[common], help="delete a rule for good")
    forget.add_argument("id", help="the rule's id or short handle")
    forget.set_defaults(handler=run_forget)


def _check_option(parser: argparse.ArgumentParser, *, new_version: bool = False) -> None:
    replace = (
        "; the new version's checks replace the old one's (without --check it keeps them)"
        if new_version
        else ""
    )
    parser.add_argument(
        "--check",
        action="append",
        dest="checks",
        metavar="CHECK",
        help="a check on the command's fields, tested before it runs, e.g. "
        "'subject max 72', 'message no-emoji', 'flags forbid --no-verify' "
        f"(repeatable; docs/checks.md){replace}",
    )
    if new_version:
        parser.add_argument(
            "--no-checks", action="store_true", help="the new version has no checks"
        )


def _scope_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--agent",
        type=agent_option,
        help=f"only this agent sees it ({' or '.join(sorted(AGENT_NAMES))})",
    )
    parser.add_argument(
        "--project",
        metavar="DIR",
        type=project_option,
        help="only commands run in DIR or below it see it (an existing directory)",
    )


def _text_options(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument(
        "text",
        nargs="?",
        help=f"{help_text}; `-` reads it from standard input",
    )
    parser.add_argument(
        "--file",
        metavar="PATH",
        help="read the rule from this file (UTF-8) instead; for long or multi-line rules",
    )


def rule_text(args: argparse.Namespace) -> str:
    """The rule text: the argument, standard input (`-`) or `--file`, never empty.

    Raises:
        CommandError: none or both were given, the file cannot be read, the text is
            not UTF-8 or is blank.
    """
    if (args.text is None) == (args.file is None):
        raise CommandError(
            "give the rule as an argument, as `-` (standard input) or with --file PATH, once",
            status=2,
        )
    # Read at most one byte past the limit: a file of 5 MiB (or /dev/zero) is refused
    # here with its size, never sent (over the frame limit it read as "not running").
    if args.file is not None:
        source = args.file
        try:
            with Path(args.file).open("rb") as file:
                data = file.read(MAX_CONTENT_BYTES + 1)
        except OSError as exc:
            raise CommandError(
                f"cannot read the rule from {args.file}: {exc.strerror}", status=2
            ) from exc
    elif args.text == "-":
        source = "standard input"
        data = sys.stdin.buffer.read(MAX_CONTENT_BYTES + 1)
    else:
        return str(args.text)
    if len(data) > MAX_CONTENT_BYTES:
        size = _size_of(args.file)
        raise CommandError(
            f"the rule in {source} is {size or 'more than ' + str(MAX_CONTENT_BYTES)} bytes; "
            f"the limit is {MAX_CONTENT_BYTES} bytes. Keep a rule short, or split it into "
            "several rules.",
            status=2,
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CommandError(
            f"the rule in {source} is not UTF-8 text ({exc.reason} at byte {exc.start})", status=2
        ) from exc
    text = text.strip()
    if not text:
        raise CommandError(f"the rule in {source} is empty", status=2)
    return text


def _size_of(path: str | None) -> int | None:
    """The size of the regular file `path`, or None (standard input, a device)."""
    if path is None:
        return None
    try:
        info = Path(path).stat()
    except OSError:
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


def _checked_action(in_force: TableInForce, action: str) -> str:
    """`action` normalized, if the daemon's action table has it (see `check_action`)."""
    from mented.actions import check_action  # noqa: PLC0415 - see the module docstring

    try:
        return check_action(in_force.table, action, problem=in_force.problem)
    except InvalidInputError as exc:
        raise CommandError(f"{exc} `mentectl actions` lists them.", status=2) from exc


def _warn_if_cut(
    text: str, actions: Sequence[str], in_force: TableInForce, *, replaces: bool = False
) -> None:
    """Say so when the hook will hand `text` over cut: it is longer than its room.

    `replaces`: the rule supersedes another (its line may name the one it replaces).
    """
    from mented.handover import longest_whole_rule  # noqa: PLC0415 - as the action table

    max_chars = in_force.config.hook.max_context_chars
    length = len(text.strip().replace("\n", "\n  "))
    for action in actions:
        limit = longest_whole_rule(
            action, max_chars=max_chars, table=in_force.table, replaces=replaces
        )
        if length > limit:
            print(
                f"mentectl: warning: this rule is {length} characters; the hook hands at most "
                f"{limit} of a {action} rule to the agent ([hook] max_context_chars = "
                f"{max_chars}), so the agent will see it cut, with a pointer to "
                "`mentectl rule show`. Shorten it, or split it into several rules.",
                file=sys.stderr,
            )
            return


def _print_memories(
    args: argparse.Namespace,
    key: str,
    memories: list[Memory],
    untrusted: UntrustedProject | None = None,
    synced: Collection[str] = (),
) -> None:
    """The rules, and (on standard error) a note when a project's rules here are not used.

    `synced`: the ids a sync brought from another machine (the reply's `synced`).
    """
    if args.json:
        document: dict[str, object] = {key: [_with_origin(memory, synced) for memory in memories]}
        if untrusted is not None:
            document["untrusted"] = msgspec.to_builtins(untrusted)
        print_json(document)
        return
    if not memories:
        print("no rules")
    for memory in memories:
        print(format_memory(memory, synced=synced))
    if untrusted is not None:
        print(untrusted_note(untrusted), file=sys.stderr)


def _with_origin(memory: Memory, synced: Collection[str]) -> dict[str, object]:
    """A memory as `--json` prints it: its fields, and `from` (yours, team or synced)."""
    document: dict[str, object] = msgspec.to_builtins(memory)
    document["from"] = origin_of(memory, synced)
    return document


def run_add_pinned(args: argparse.Namespace) -> int:
    """`rule add --pinned TEXT`: the text comes where the action would (or `-`, --file)."""
    if args.text is not None:
        raise CommandError(
            "a pinned rule governs no action: give only its text, "
            "`mentectl rule add --pinned 'answer in British English'`",
            status=2,
        )
    args.text = args.action
    text = rule_text(args)
    with Client(args.socket) as client:
        reply = client.expect(
            StoreRequest(
                content=text,
                memory_type=MemoryType(args.memory_type),
                tags=[PINNED_TAG],
                agent=args.agent,
                project=args.project,
            ),
            StoredReply,
        )
    if args.json:
        print_json({"id": reply.id, "handle": short_handle(reply.id)})
    else:
        print(
            f"pinned rule [{short_handle(reply.id)}] (id {reply.id}): handed over at the start "
            "of every session"
        )
    return 0


def run_add(args: argparse.Namespace) -> int:
    if args.pinned:
        if args.checks:
            raise CommandError(
                "a pinned rule governs no action, so it has no fields to check: leave out --check",
                status=2,
            )
        if args.team:
            raise CommandError(
                "a pinned rule cannot be a team rule yet: leave out --team", status=2
            )
        return run_add_pinned(args)
    if args.action is None:
        raise CommandError(
            "give the action and the rule: `mentectl rule add ACTION TEXT` "
            "(or `--pinned TEXT` for a rule that holds for everything)",
            status=2,
        )
    if args.team:
        return _add_team(args)
    text = rule_text(args)
    with Client(args.socket) as client:
        in_force = daemon_table(client)
        action = _checked_action(in_force, args.action)
        reply = client.expect(
            StoreRequest(
                content=text,
                memory_type=MemoryType(args.memory_type),
                tags=[trigger_tag(action)],
                agent=args.agent,
                project=args.project,
                checks=args.checks or [],
            ),
            StoredReply,
        )
    _warn_if_cut(text, [action], in_force)
    if args.json:
        print_json({"id": reply.id, "handle": short_handle(reply.id)})
    else:
        # The handle is what the agent reads before the rule, and what `rule show` takes.
        print(f"added rule [{short_handle(reply.id)}] for {action} (id {reply.id})")
    _warn_if_unregistered(in_force, action)
    return 0


def _warn_if_unregistered(in_force: TableInForce, action: str) -> None:
    """Say so when an installed hook is not registered for `action`'s commands: the rule
    would never reach that agent until the hook is installed again."""
    # Only after a rule was added: the installers' code is not for the other verbs.
    from mented_client.commands.hooks import registration_warnings  # noqa: PLC0415

    for warning in registration_warnings(in_force, [action]):
        print(f"mentectl: warning: {escape_controls(warning)}", file=sys.stderr)


def run_list(args: argparse.Namespace) -> int:
    with Client(args.socket) as client:
        action = daemon_has_action(client, args.action) if args.action else None
        if args.action and action is None:  # not in force: its rules, or why it is no action
            in_force = daemon_table(client)
            orphans = _orphaned_rules(client, args, in_force)
            if orphans is not None:
                _print_memories(args, "rules", orphans)
                return 0
            action = _checked_action(in_force, args.action)
        if args.pinned:
            request: RecallRequest | ListRequest = ListRequest(
                agent=args.agent,
                cwd=args.cwd,
                tag=PINNED_TAG,
                include_superseded=args.all,
                limit=args.k,
            )
        elif action and not args.all:
            request = RecallRequest(
                action=action, agent=args.agent, cwd=args.cwd, k=6 if args.k is None else args.k
            )
        else:
            request = _rules_request(args, action)
        reply = client.expect(request, MemoriesReply)
    _print_memories(args, "rules", reply.memories, reply.untrusted, reply.synced)
    return 0


def _rules_request(args: argparse.Namespace, action: str | None) -> ListRequest:
    """`rule list`'s request for the rules of `action` (None: of every action)."""
    return ListRequest(
        action=action,
        agent=args.agent,
        cwd=args.cwd,
        rules_only=True,
        include_superseded=args.all,
        limit=args.k,
    )


def _orphaned_rules(
    client: Client, args: argparse.Namespace, in_force: TableInForce
) -> list[Memory] | None:
    """The stored rules for `--action` when it is no longer an action (None: it is one).

    An action removed from the config leaves its rules behind; they never fire,
    but the user must be able to see them, to move or forget them.
    """
    from mented.actions import check_action  # noqa: PLC0415 - see the module docstring

    try:
        check_action(in_force.table, args.action, problem=in_force.problem)
    except InvalidInputError:
        pass
    else:
        return None
    try:
        name = normalize_action(args.action.removeprefix(TRIGGER_PREFIX))
    except InvalidInputError as exc:
        raise CommandError(str(exc), status=2) from exc
    memories = client.expect(_rules_request(args, name), MemoriesReply).memories
    if not memories:
        return None  # nothing stored either: the usual refusal, with suggestions
    print(
        f"mentectl: warning: {name!r} is not an action in the config in force, so these "
        "rules never fire: add the action back to the config, or `mentectl rule forget ID`.",
        file=sys.stderr,
    )
    return memories


def run_show(args: argparse.Namespace) -> int:
    with Client(args.socket) as client:
        reply = client.expect(GetRequest(id=args.id), MemoryReply)
        memory = reply.memory
        # Its history holds every version kept: a link to any other was forgotten. A
        # project's rule has no history here (its file's is in the repository).
        kept = (
            {m.id for m in client.expect(HistoryRequest(id=memory.id), MemoriesReply).memories}
            if reply.file is None
            else {memory.id}
        )
    if args.json:
        links = [memory.supersedes, memory.superseded_by, *memory.merges]
        gone = [link for link in links if link is not None and link not in kept]
        document = {**_with_origin(memory, reply.synced), "forgotten_links": gone}
        if reply.file is not None:
            document["file"] = reply.file
        print_json(document)
    else:
        print(format_memory(memory, verbose=True, kept=kept, synced=reply.synced))
        if reply.file is not None:
            print(
                f"this is a project rule from {escape_controls(reply.file, keep_lines=False)}: "
                "edit that file (shared with the team) to change it"
            )
    return 0


def run_supersede(args: argparse.Namespace) -> int:
    text = rule_text(args)
    if args.no_checks and args.checks:
        raise CommandError("give --check or --no-checks, not both", status=2)
    checks = [] if args.no_checks else args.checks
    with Client(args.socket) as client:
        reply = client.expect(
            SupersedeRequest(
                id=args.id,
                content=text,
                agent=args.agent,
                project=args.project,
                checks=checks,
            ),
            SupersededReply,
        )
        new = client.expect(GetRequest(id=reply.id), MemoryReply).memory
        _warn_if_cut(text, new.actions, daemon_table(client), replaces=True)
    if args.json:
        print_json({"id": reply.id, "superseded": reply.old.id, "merged": list(new.merges)})
    elif new.merges:
        replaced = ", ".join([reply.old.id, *new.merges[:-1]]) + f" and {new.merges[-1]}"
        print(
            f"rule {reply.id} replaces {replaced}, which no longer fire: the fork "
            f"({counted(len(new.merges) + 1, 'current version')}) is settled"
        )
    else:
        print(f"rule {reply.id} replaces {reply.old.id}, which no longer fires")
    return 0


def run_history(args: argparse.Namespace) -> int:
    with Client(args.socket) as client:
        reply = client.expect(HistoryRequest(id=args.id), MemoriesReply)
    if args.json:
        _print_memories(args, "history", reply.memories, synced=reply.synced)
        return 0
    kept = {memory.id for memory in reply.memories}
    for memory in reply.memories:
        print(format_memory(memory, kept=kept, synced=reply.synced))
    current = [memory for memory in reply.memories if memory.is_live]
    if len(current) > 1:
        handles = ", ".join(short_handle(memory.id) for memory in current)
        print(
            f"{counted(len(current), 'current version')} ({handles}): a fork, superseded "
            f"apart on two machines; settle it with `mentectl rule supersede "
            f"{short_handle(current[-1].id)} TEXT`"
        )
    elif not current:
        print("no version fires: the current one was forgotten")
    return 0


def run_forget(args: argparse.Namespace) -> int:
    with Client(args.socket) as client:
        memory = client.expect(GetRequest(id=args.id), MemoryReply).memory
        reply = client.expect(ForgetRequest(id=memory.id), ForgottenReply)
        before = memory.supersedes if memory.is_live else None
        rest: list[Memory] = []
        if before is not None:  # what is left of its rule
            rest = client.expect(HistoryRequest(id=before), MemoriesReply).memories
    if args.json:
        print_json({"id": reply.id})
        return 0
    print(f"forgot {reply.id}")
    if before is not None:
        current = [short_handle(version.id) for version in rest if version.is_live]
        if current:
            print(f"the rule's current version: {', '.join(current)}")
        else:
            # Forget drops the rule: the version it replaced is not handed over again.
            print(
                f"no version of this rule fires now; the one it replaced, "
                f"{short_handle(before)}, stays retired (`mentectl rule history "
                f"{short_handle(before)}`); to use its text again, add it as a new rule"
            )
    return 0


def _add_team(args: argparse.Namespace) -> int:
    if args.project:
        raise CommandError("a team rule applies to its whole project: leave out --project", 2)
    with Client(args.socket) as client:
        in_force = daemon_table(client)
        action = _checked_action(in_force, args.action)
    # Only `rule add --team` writes a project's rules file: the team code (and the store's
    # record format under it) costs the other verbs a third of their start-up.
    from mented_client.commands.team import add_team_rule  # noqa: PLC0415 - see above

    if args.checks:
        # The checks' parser needs the matcher (a quarter of a second): only here.
        from mented.checks import rule_checks  # noqa: PLC0415 - see above
        from mented.memory import InvalidInputError  # noqa: PLC0415

        try:
            rule_checks(args.checks, [trigger_tag(action)], in_force.table)
        except InvalidInputError as exc:
            raise CommandError(str(exc), status=2) from None
    path = add_team_rule(action, rule_text(args), args.agent, args.checks or [])
    if args.json:
        print_json({"file": str(path), "action": action})
    else:
        print(
            f"added a rule for {action} to {path}: commit it to share it, and run "
            "`mentectl trust` for it to reach your agents here"
        )
    _warn_if_unregistered(in_force, action)
    return 0
