"""`mentectl trust [DIR]` and `mentectl rule add --team`: rules a project commits in `.mented/`.

A project's rules reach the agent only after you trusted their exact content
(mented/team.py). `rule add --team` writes a rule there for you to commit; the
daemon reads the files, this module only appends a line.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from mented.protocol import TrustedReply, TrustRequest
from mented.team import FOLDER, RULES_FILE
from mented.words import counted
from mented_client.commands.output import CommandError, format_memory, print_json
from mented_client.connection import Client

if TYPE_CHECKING:  # argparse's class is not subscriptable at run time
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]  # noqa: SLF001 - argparse's own type


def register(subparsers: SubParsers, common: argparse.ArgumentParser) -> None:
    trust = subparsers.add_parser(
        "trust",
        parents=[common],
        help="let the rules in a project's .mented/ folder reach your agents",
        description=(
            "Read the files in .mented/ first: their text goes into your agent's context. "
            "Trust covers their exact content; a change to them needs `mentectl trust` again."
        ),
    )
    trust.add_argument("dir", nargs="?", default=".", help="the project (default: here)")
    trust.set_defaults(handler=run_trust)


def run_trust(args: argparse.Namespace) -> int:
    directory = str(Path(args.dir).resolve())
    with Client(args.socket) as client:
        reply = client.expect(TrustRequest(dir=directory), TrustedReply)
    if args.json:
        print_json(msgspec.to_builtins(reply))
        return 0
    print(f"trusted {counted(len(reply.rules), 'rule')} in {reply.root}/{FOLDER}/:")
    for rule in reply.rules:
        print(format_memory(rule))
    return 0


def project_root(start: Path) -> Path:
    """The project `start` is in: the nearest directory with .mented/ or .git above it.

    Raises:
        CommandError: `start` is in no project.
    """
    for path in (start, *start.parents):
        if (path / FOLDER).is_dir() or (path / ".git").exists():
            return path
    raise CommandError(
        f"{start} is not inside a project (no {FOLDER}/ or .git/ here or above); "
        "run it in the repository the rule is for",
        status=2,
    )


def add_team_rule(
    action: str, text: str, agent: str | None, checks: list[str] | None = None
) -> Path:
    """Append the rule to `<project>/.mented/rules.jsonl`; the file it wrote."""
    if not text.strip():
        raise CommandError("a rule needs a text", status=2)
    root = project_root(Path(os.getcwd()))  # noqa: PTH109 - the user's directory, as given
    folder = root / FOLDER
    folder.mkdir(exist_ok=True)
    path = folder / RULES_FILE
    line: dict[str, str | list[str]] = {"action": action, "text": text}
    if agent:
        line["agent"] = agent
    if checks:
        line["checks"] = checks
    existing = path.read_bytes() if path.exists() else b""
    with path.open("ab") as out:
        if existing and not existing.endswith(b"\n"):
            out.write(b"\n")
        out.write(msgspec.json.encode(line) + b"\n")
    return path
