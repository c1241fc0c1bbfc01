"""`mentectl remember`, `recall` and `reindex`: facts, found by the words they contain.

A fact is a memory that is no rule ("the staging database is stg-db-2"): it is
not handed to the agent by an action or at session start, but found when asked
for, ranked by BM25 (mented.recall). `remember --replaces ID` supersedes an
older fact, which then stops being recalled and stays in its history
(`mentectl rule history ID`, which takes any memory).
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

import msgspec

from mented.memory import PINNED_TAG, TRIGGER_PREFIX, MemoryType
from mented.protocol import (
    RecalledReply,
    RecallFactsRequest,
    ReindexedReply,
    ReindexRequest,
    StoredReply,
    StoreRequest,
    SupersededReply,
    SupersedeRequest,
)
from mented.words import counted
from mented_client.commands.output import (
    CommandError,
    escape_controls,
    format_memory,
    print_json,
)
from mented_client.connection import Client
from mented_client.scope import agent_option, directory_option, project_option

if TYPE_CHECKING:  # argparse's class is not subscriptable at run time
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]  # noqa: SLF001 - argparse's own type

_FACT_TYPES = [MemoryType.SEMANTIC.value, MemoryType.EPISODIC.value, MemoryType.PREFERENCE.value]


def register(subparsers: SubParsers, common: argparse.ArgumentParser) -> None:
    remember = subparsers.add_parser(
        "remember",
        parents=[common],
        help="store a fact, found later by its words (`mentectl recall`)",
        description="Store a fact: a memory that is no rule, found by topic with "
        "`mentectl recall` or the MCP tool `recall`.",
    )
    remember.add_argument("text", help="the fact, e.g. 'the staging database is stg-db-2'")
    remember.add_argument(
        "--tag",
        dest="tags",
        action="append",
        default=[],
        metavar="TAG",
        help="a topic word to file it under (weighs more than its text); repeatable",
    )
    remember.add_argument(
        "--agent", type=agent_option, help="only this agent recalls it (default: every agent)"
    )
    remember.add_argument(
        "--project",
        metavar="DIR",
        type=project_option,
        help="only recalled in DIR or below it (an existing directory)",
    )
    remember.add_argument(
        "--type",
        dest="memory_type",
        default=MemoryType.SEMANTIC.value,
        choices=_FACT_TYPES,
        help="semantic (a fact, the default), episodic (something that happened), preference",
    )
    remember.add_argument(
        "--replaces",
        metavar="ID",
        help="supersede this fact (its id or handle): it is no longer recalled, and "
        "stays in its history",
    )
    remember.set_defaults(handler=run_remember)

    recall = subparsers.add_parser(
        "recall",
        parents=[common],
        help="the facts best matching some words, best first (BM25)",
        description="Find facts by their words, as the agent's MCP tool `recall` does. "
        "Every word counts; rarer words and tags count more.",
    )
    recall.add_argument("query", nargs="+", help="a few words, e.g. staging database")
    recall.add_argument(
        "-k", type=int, default=None, help="at most this many (default: [recall] k, 5)"
    )
    recall.add_argument(
        "--agent", type=agent_option, help="as this agent sees them (default: every agent's)"
    )
    recall.add_argument(
        "--cwd",
        type=directory_option,
        default=None,
        help="as seen from this directory (default: the current one; --everywhere: all)",
    )
    recall.add_argument(
        "--everywhere", action="store_true", help="facts of every project, not only this one's"
    )
    recall.set_defaults(handler=run_recall)

    reindex = subparsers.add_parser(
        "reindex",
        parents=[common],
        help="rebuild the recall index and the pinned rules' index from the store",
        description="The indexes are derived from the store and kept up to date by the "
        "daemon; this rebuilds them whole (after restoring the store from a backup, say).",
    )
    reindex.set_defaults(handler=run_reindex)


def run_remember(args: argparse.Namespace) -> int:
    for tag in args.tags:
        name = tag.strip().lower()
        if name.startswith(TRIGGER_PREFIX) or name == PINNED_TAG:
            raise CommandError(
                f"--tag {tag} would make this a rule: use `mentectl rule add` for rules",
                status=2,
            )
    with Client(args.socket) as client:
        if args.replaces:
            superseded = client.expect(
                SupersedeRequest(
                    id=args.replaces,
                    content=args.text,
                    tags=args.tags or None,
                    agent=args.agent,
                    project=args.project,
                ),
                SupersededReply,
            )
            new_id = superseded.id
        else:
            new_id = client.expect(
                StoreRequest(
                    content=args.text,
                    memory_type=MemoryType(args.memory_type),
                    tags=args.tags,
                    agent=args.agent,
                    project=args.project,
                ),
                StoredReply,
            ).id
    if args.json:
        print_json({"id": new_id} | ({"superseded": args.replaces} if args.replaces else {}))
    elif args.replaces:
        print(f"remembered {new_id}, replacing {escape_controls(args.replaces)}")
    else:
        print(f"remembered {new_id}")
    return 0


def run_recall(args: argparse.Namespace) -> int:
    if args.k is not None and args.k <= 0:
        raise CommandError(f"-k must be at least 1, not {args.k}", status=2)
    cwd = None if args.everywhere else (args.cwd or os.getcwd())  # noqa: PTH109 - lexical, like the hook's
    with Client(args.socket) as client:
        reply = client.expect(
            RecallFactsRequest(query=" ".join(args.query), agent=args.agent, cwd=cwd, k=args.k),
            RecalledReply,
        )
    if args.json:
        print_json({"hits": msgspec.to_builtins(reply.hits)})
        return 0
    if not reply.hits:
        print("no fact matches")
    for hit in reply.hits:
        print(f"{hit.score:7.2f}  {format_memory(hit.memory)}")
    return 0


def run_reindex(args: argparse.Namespace) -> int:
    with Client(args.socket, timeout=600.0) as client:
        reply = client.expect(ReindexRequest(), ReindexedReply)
    if args.json:
        print_json(msgspec.to_builtins(reply))
    else:
        print(
            f"reindexed {counted(reply.facts, 'fact')} and "
            f"{counted(reply.pinned, 'pinned rule')} "
            f"in {reply.seconds:.2f} s"
        )
    return 0
