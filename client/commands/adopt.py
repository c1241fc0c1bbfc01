"""`mentectl adopt [PATH...]`: the rules in CLAUDE.md, AGENTS.md, Cursor rules... become mented's.

With no PATH: the user's files (`~/.claude/CLAUDE.md`, `~/.claude/rules/`, Codex's
`AGENTS.md`, `~/.gemini/GEMINI.md`) and the current project's (mented.adopt_sources). Each
piece is proposed an action rule, a path rule, a pinned rule, a fact or a skip
(mented.adopt), shown as a table (`--json`: one document), and nothing is written until
the user accepts: `--yes` takes what was shown, a terminal asks per piece.

Written to the daemon, an adopted rule is scoped to the project its file is in (none for
the user's own files) and tagged with its source (`adopted:DIGEST`, `adopted-slot:SLOT`,
`adopted-from:FILE:LINE`), so that adopting again adds nothing for an unchanged piece,
supersedes the rule of a changed one, and names the rules whose piece is gone (`--prune`
forgets them). A path rule's action (`edit-NAME`, with the file's globs as its `paths`)
is appended to the config file the daemon runs on, which is then reloaded.

`--team` writes a project's action rules to its `.mented/adopted.jsonl` instead (the file
is rewritten whole; each line carries its `source`), which, like any team rule, reaches
the agents only once `mentectl trust` covers it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from mented.adopt import (
    Adopted,
    PinnedRoom,
    Plan,
    Planned,
    Proposal,
    adopted_from_tags,
    classify,
    path_action_name,
    plan,
    propose_checks,
    source_tags,
    split,
    vocabulary,
)
from mented.adopt_sources import Source, files_in, find_sources, read_source
from mented.memory import PINNED_TAG, InvalidInputError, MemoryType, short_handle, trigger_tag
from mented.protocol import (
    ForgetRequest,
    ForgottenReply,
    ListRequest,
    MemoriesReply,
    OkReply,
    ReloadRequest,
    StatusReply,
    StatusRequest,
    StoredReply,
    StoreRequest,
    SupersededReply,
    SupersedeRequest,
)
from mented.untrusted import Refused, shown
from mented.words import counted
from mented_client.commands.output import CommandError, escape_controls, print_json
from mented_client.connection import Client, DaemonError
from mented_client.scope import daemon_table

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mented.actions import TableInForce

    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]  # noqa: SLF001 - argparse's own type

TEAM_FILE = "adopted.jsonl"
TEXT_COLUMN = 60  # characters of a piece's text in the table


def register(subparsers: SubParsers, common: argparse.ArgumentParser) -> None:
    adopt = subparsers.add_parser(
        "adopt",
        parents=[common],
        help="turn the rules in CLAUDE.md, AGENTS.md, Cursor/Copilot/Claude rule files into "
        "mented rules (shown first; nothing is written without --yes or your choice)",
        description=(
            "Reads the agents' rule files (default: yours and this project's), splits them "
            "into pieces and proposes for each an action rule, a path rule, a pinned rule, "
            "a fact or a skip, with the reason. Adopting again adds nothing for unchanged "
            "pieces and supersedes the rules of changed ones. See docs/adopt.md."
        ),
    )
    adopt.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="a rule file, or a directory (a project, or a rules folder such as .cursor/rules)",
    )
    adopt.add_argument("--yes", action="store_true", help="adopt every piece as shown")
    adopt.add_argument(
        "--team",
        action="store_true",
        help="write this project's action rules to its .mented/adopted.jsonl, to commit "
        "(`mentectl trust` makes them reach your agents)",
    )
    adopt.add_argument(
        "--prune",
        action="store_true",
        help="forget the adopted rules whose piece is gone from its file",
    )
    adopt.add_argument(
        "--no-checks", action="store_true", help="propose no checks (docs/checks.md)"
    )
    adopt.set_defaults(handler=run_adopt)


@dataclass
class _Read:
    """The files read: each with the project it belongs to and the name recorded for it."""

    sources: list[tuple[Source, str | None, str]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def project_of(path: Path, home: Path | None) -> Path | None:
    """The repository `path` is in (the nearest directory above it with a `.git`), or None."""
    for parent in path.parents:
        if parent == home:
            return None
        if os.path.lexists(parent / ".git"):
            return parent
    return None


# Folders of rule files: a file in one belongs to the directory above it.
_RULE_FOLDERS = (".cursor/rules", ".claude/rules", ".windsurf/rules", ".github/instructions")


def scope_of(path: Path, home: Path) -> Path | None:
    """The directory an adopted rule from `path` is scoped to; None for the user's own files.

    The user's files (under `~/.claude`, `~/.codex` or `$CODEX_HOME`, `~/.gemini`) hold for
    every project. Any other file holds for its repository, or outside one for the
    directory it stands in (above its rules folder), never for everything.
    """
    codex = os.environ.get("CODEX_HOME")
    own = [home / ".claude", home / ".codex", home / ".gemini", *([Path(codex)] if codex else [])]
    if any(path.is_relative_to(folder) for folder in own):
        return None
    repository = project_of(path, home)
    if repository is not None:
        return repository
    directory = path.parent
    for folder in _RULE_FOLDERS:
        if directory.as_posix().endswith("/" + folder):
            return Path(directory.as_posix().removesuffix("/" + folder))
    return directory


def _read(args: argparse.Namespace, team_root: Path | None) -> _Read:
    home = Path.home()
    cwd = Path(os.getcwd())  # noqa: PTH109 - the user's directory, as given
    if args.paths:
        paths: list[Path] = []
        refused: list[str] = []
        for given in args.paths:
            path = Path(os.path.abspath(given))  # noqa: PTH100 - no link resolved
            if path.is_dir() and not path.is_symlink():
                found, more = files_in(path)
                paths.extend(found)
                refused.extend(more)
            else:
                paths.append(path)
    elif team_root is not None:
        paths, refused = find_sources(team_root, None)
    else:
        project = project_of(cwd / "x", home) or cwd
        paths, refused = find_sources(project, home)
    read = _Read(refused=list(refused))
    for path in dict.fromkeys(paths):
        try:
            source = read_source(path)
        except Refused as exc:
            read.refused.append(str(exc))
            continue
        owner = team_root if team_root is not None else scope_of(path, home)
        if team_root is not None:
            try:
                recorded = str(path.relative_to(team_root))
            except ValueError:
                read.refused.append(
                    f"{shown(str(path))}: not in the project {shown(str(team_root))}; "
                    "--team adopts only the project's own files"
                )
                continue
        else:
            recorded = str(path)
        read.sources.append((source, str(owner) if owner else None, recorded))
    return read


def _proposals(
    read: _Read, in_force: TableInForce, room: PinnedRoom, *, checks: bool
) -> tuple[list[Proposal], dict[str, str | None]]:
    """Each piece's proposal, and the project each recorded file belongs to."""
    from mented.path_patterns import path_pattern_problem  # noqa: PLC0415 - pathspec: only here

    vocab = vocabulary(in_force.table)
    names = {action.name: tuple(action.paths) for action in in_force.table.actions()}
    proposals: list[Proposal] = []
    projects: dict[str, str | None] = {}
    for source, project, recorded in read.sources:
        projects[recorded] = project
        globs = [glob for glob in source.globs if path_pattern_problem(glob) is None]
        for glob in source.globs:
            if glob not in globs:
                source.notes.append(f"glob {glob!r} is no usable path pattern: left out")
        action = ""
        if globs:
            # An action of that name with other paths (in force, or named earlier in this
            # run for another file) is not this file's: the name gets a suffix.
            action = path_action_name(recorded, globs)
            if names.get(action, tuple(globs)) != tuple(globs):
                action = path_action_name(recorded, globs, names)
            names[action] = tuple(globs)
        for note in source.notes:
            read.refused.append(f"{shown(recorded)}: {shown(note)}")
        pieces = split(source.text, file=recorded, first_line=source.first_line, notes=source.notes)
        for piece in pieces:
            proposal = classify(
                piece, vocab, room, globs=globs, always=source.always, path_action=action
            )
            if checks:
                proposal.checks = _usable_checks(proposal)
            proposals.append(proposal)
    return proposals, projects


def _usable_checks(proposal: Proposal) -> tuple[str, ...]:
    from mented.checks import rule_checks  # noqa: PLC0415 - the matcher: only with checks

    usable = []
    for check in propose_checks(proposal):
        try:
            rule_checks([check], [trigger_tag(a) for a in proposal.actions])
        except InvalidInputError:
            continue
        usable.append(check)
    return tuple(usable)


def run_adopt(args: argparse.Namespace) -> int:
    team_root = None
    if args.team:
        from mented_client.commands.team import project_root  # noqa: PLC0415 - --team only

        team_root = project_root(Path(os.getcwd()))  # noqa: PTH109 - the user's directory
    read = _read(args, team_root)
    if args.paths and not read.sources:
        reasons = "; ".join(escape_controls(r, keep_lines=False) for r in read.refused)
        reasons = reasons or "no CLAUDE.md, AGENTS.md, .md or .mdc file in them"
        raise CommandError(
            f"no rule file read from the PATHs given ({reasons}); give a rule file or a "
            "project directory",
            status=2,
        )
    with Client(args.socket) as client:
        in_force = daemon_table(client)
        existing = _team_existing(team_root) if team_root is not None else _store_existing(client)
        room = _pinned_room(client, in_force) if team_root is None else PinnedRoom(0, 0)
        proposals, projects = _proposals(read, in_force, room, checks=not args.no_checks)
        if team_root is not None:
            for proposal in proposals:
                _team_only(proposal)
        result = plan(proposals, existing, projects)
        _show(args, result, read.refused, team=team_root is not None)
        accepted = _accepted(args, result)
        if accepted is None:
            return 0
        pruned = result.removed if args.prune and (args.yes or _prune_confirmed(result)) else []
        if not accepted and not pruned:
            return 0
        if team_root is not None:
            path = _write_team(team_root, accepted, pruned)
            if not args.json:
                print(
                    f"wrote {counted(len(accepted), 'rule')} to {shown(str(path))}: commit it, "
                    "and run `mentectl trust` for it to reach your agents here"
                )
            return 0
        failed: list[Planned] = []
        written = _write_store(client, accepted, pruned, projects, in_force, failed)
    if not args.json:
        print(
            written + (f"; {counted(len(failed), 'piece')} not adopted (above)" if failed else "")
        )
    return 1 if failed else 0


def _team_only(proposal: Proposal) -> None:
    """In a team file only action rules fit: the others are skipped, saying why."""
    if proposal.to in {"pinned", "fact"}:
        proposal.reason = f"a {proposal.to} cannot be a team rule: adopt it without --team"
        proposal.to = "skip"
    elif proposal.to == "path":
        proposal.reason = "a path rule needs an action in your own config: adopt it without --team"
        proposal.to = "skip"


def _store_existing(client: Client) -> list[Adopted]:
    memories = client.expect(ListRequest(), MemoriesReply).memories
    found = [adopted_from_tags(m.id, m.tags, m.content) for m in memories]
    return [item for item in found if item is not None]


def _pinned_room(client: Client, in_force: TableInForce) -> PinnedRoom:
    settings = in_force.config.pinned
    pinned = client.expect(ListRequest(tag=PINNED_TAG), MemoriesReply).memories
    return PinnedRoom(
        settings.max_rules - len(pinned), settings.max_chars - sum(len(m.content) for m in pinned)
    )


# ------------------------------------------------------------------------------ showing


def _where(proposal: Proposal) -> str:
    if proposal.to in {"action", "path"}:
        return f"{proposal.to} rule {', '.join(proposal.actions)}"
    if proposal.to == "pinned":
        return "pinned rule"
    return proposal.to


def _show(args: argparse.Namespace, result: Plan, refused: Sequence[str], *, team: bool) -> None:
    if args.json:
        print_json(_document(result, refused))
        return
    for problem in refused:
        print(f"mentectl: warning: {escape_controls(problem, keep_lines=False)}", file=sys.stderr)
    if not result.items and not result.removed:
        print("no agent rule files found here (give a PATH: a CLAUDE.md, AGENTS.md, .mdc file)")
        return
    rows = [("SOURCE", "CHANGE", "TO", "WHY", "TEXT")]
    for item in result.items:
        proposal = item.proposal
        piece = proposal.piece
        text = " ".join(piece.text.split())
        if len(text) > TEXT_COLUMN:
            text = text[: TEXT_COLUMN - 3] + "..."
        rows.append(
            (
                f"{_short(piece.file)}:{piece.line}",
                item.change
                if item.replaces is None or item.change != "supersede"
                else f"supersede {short_handle(item.replaces)}"
                if not team
                else "supersede",
                _where(proposal),
                proposal.reason,
                text,
            )
        )
        rows.extend(("", "", "", "check", check) for check in proposal.checks)
    widths = [max(len(escape_controls(row[i], keep_lines=False)) for row in rows) for i in range(4)]
    for row in rows:
        cells = [escape_controls(cell, keep_lines=False) for cell in row]
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=False))
            + "  "
            + cells[4]
        )
    for gone in result.removed:
        print(
            f"removed from {escape_controls(_short(gone.file), keep_lines=False)}:{gone.line}: "
            f"[{short_handle(gone.id) if not team else gone.id}] "
            f"{escape_controls(' '.join(gone.text.split())[:TEXT_COLUMN], keep_lines=False)}"
            + ("" if args.prune else " (`--prune` forgets it)")
        )


def _short(path: str) -> str:
    """A path as shown: relative to the working directory when it is inside it."""
    cwd = os.getcwd() + os.sep  # noqa: PTH109 - shown as the user typed it
    return path.removeprefix(cwd) if path.startswith(cwd) else path


def _document(result: Plan, refused: Sequence[str]) -> dict[str, object]:
    return {
        "pieces": [
            {
                "file": item.proposal.piece.file,
                "line": item.proposal.piece.line,
                "text": item.proposal.piece.text,
                "digest": item.proposal.piece.digest,
                "to": item.proposal.to,
                "actions": list(item.proposal.actions),
                "paths": list(item.proposal.paths),
                "reason": item.proposal.reason,
                "checks": list(item.proposal.checks),
                "change": item.change,
                "replaces": item.replaces,
            }
            for item in result.items
        ],
        "removed": [
            {"id": gone.id, "file": gone.file, "line": gone.line, "text": gone.text}
            for gone in result.removed
        ],
        "refused": list(refused),
    }


# ----------------------------------------------------------------------------- choosing


def _accepted(args: argparse.Namespace, result: Plan) -> list[Planned] | None:
    """The planned changes the user accepts; None: nothing is to be written."""
    pending = [item for item in result.items if item.change in {"add", "supersede"}]
    if not pending and not (args.prune and result.removed):
        if not args.json:
            print("nothing to adopt: every piece is adopted already, or skipped")
        return None
    if args.yes:
        return pending
    if args.json or not (sys.stdin.isatty() and sys.stdout.isatty()):
        print(
            "nothing written: run again with --yes to adopt these as shown, or on a terminal "
            "to choose piece by piece",
            file=sys.stderr,
        )
        return None
    return _ask(pending) or []


def _prune_confirmed(result: Plan) -> bool:
    """On a terminal: whether to forget the rules whose piece is gone (listed above)."""
    if not result.removed:
        return False
    answer = _prompt(f"forget the {counted(len(result.removed), 'removed rule')} above? [y/N]: ")
    return answer == "y"


def _ask(pending: list[Planned]) -> list[Planned] | None:
    chosen: list[Planned] = []
    for index, item in enumerate(pending):
        proposal = item.proposal
        text = escape_controls(" ".join(proposal.piece.text.split())[:200], keep_lines=False)
        print(f"\n{_short(proposal.piece.file)}:{proposal.piece.line}: {text}")
        print(f"  -> {_where(proposal)} ({proposal.reason})")
        for check in proposal.checks:
            print(f"     check: {check}")
        answer = _prompt("  adopt it? [y]es, [n]o, as a [f]act, [a]ll the rest, [q]uit: ")
        if answer == "q":
            return chosen or None
        if answer == "a":
            return chosen + pending[index:]
        if answer == "f" and proposal.to != "fact":
            proposal.to, proposal.actions, proposal.paths, proposal.checks = "fact", (), (), ()
            proposal.reason = "your choice"
            chosen.append(item)
        elif answer == "y":
            chosen.append(item)
    return chosen or None


def _prompt(question: str) -> str:
    try:
        return input(question).strip().lower()[:1] or "n"
    except EOFError:
        return "q"


# ------------------------------------------------------------------------------ writing


def _memory_fields(proposal: Proposal) -> tuple[list[str], MemoryType]:
    tags = source_tags(proposal.piece)
    if proposal.to in {"action", "path"}:
        tags = [trigger_tag(action) for action in proposal.actions] + tags
        return tags, MemoryType.PROCEDURAL
    if proposal.to == "pinned":
        return [PINNED_TAG, *tags], MemoryType.PREFERENCE
    return tags, MemoryType.SEMANTIC


# The daemon's refusals of one piece (over the pinned cap, a check it refuses): the
# other pieces are written all the same, and the command exits 1.
_PIECE_ERRORS = frozenset({"invalid", "conflict", "not_found"})


def _write_one(client: Client, item: Planned, projects: dict[str, str | None]) -> None:
    proposal = item.proposal
    tags, memory_type = _memory_fields(proposal)
    text = proposal.piece.text
    if item.change == "supersede" and item.replaces is not None:
        client.expect(
            SupersedeRequest(
                id=item.replaces, content=text, tags=tags, checks=list(proposal.checks)
            ),
            SupersededReply,
        )
        return
    client.expect(
        StoreRequest(
            content=text,
            memory_type=memory_type,
            tags=tags,
            project=projects.get(proposal.piece.file),
            checks=list(proposal.checks),
        ),
        StoredReply,
    )


def _write_store(  # noqa: PLR0913, PLR0917 - what is written, and where failures go
    client: Client,
    accepted: Sequence[Planned],
    pruned: Sequence[Adopted],
    projects: dict[str, str | None],
    in_force: TableInForce,
    failed: list[Planned],
) -> str:
    _add_path_actions(client, accepted, in_force)
    added = superseded = 0
    for item in accepted:
        try:
            _write_one(client, item, projects)
        except DaemonError as exc:
            if exc.code not in _PIECE_ERRORS:
                raise
            piece = item.proposal.piece
            print(
                f"mentectl: warning: {escape_controls(_short(piece.file), keep_lines=False)}:"
                f"{piece.line} not adopted: {escape_controls(exc.message, keep_lines=False)}",
                file=sys.stderr,
            )
            failed.append(item)
            continue
        if item.change == "supersede":
            superseded += 1
        else:
            added += 1
    for gone in pruned:
        client.expect(ForgetRequest(id=gone.id), ForgottenReply)
    parts = [f"adopted {counted(added, 'new rule')}"]
    if superseded:
        parts.append(f"superseded {counted(superseded, 'changed one')}")
    if pruned:
        parts.append(f"forgot {counted(len(pruned), 'removed one')}")
    return ", ".join(parts)


def _add_path_actions(client: Client, accepted: Sequence[Planned], in_force: TableInForce) -> None:
    """Append an `[actions.edit-NAME]` table to the daemon's config for each new path action."""
    known = {action.name for action in in_force.table.actions()}
    wanted: dict[str, tuple[str, tuple[str, ...]]] = {}
    for item in accepted:
        proposal = item.proposal
        if proposal.to == "path" and proposal.actions[0] not in known:
            wanted[proposal.actions[0]] = (proposal.piece.file, proposal.paths)
    if not wanted:
        return
    status = client.expect(StatusRequest(), StatusReply)
    if not status.config:
        raise CommandError("the daemon names no config file: path rules cannot be added", 1)
    path = Path(status.config)
    blocks = []
    for name, (file, paths) in wanted.items():
        description = json.dumps(f"edit the files {file} applies to (mentectl adopt)")
        blocks.append(
            f"\n[actions.{name}]\ndescription = {description}\n"
            f"paths = [{', '.join(json.dumps(p) for p in paths)}]\n"
        )
    _append_config(path, "".join(blocks))
    client.expect(ReloadRequest(), OkReply)


def _append_config(path: Path, text: str) -> None:
    """Append `text` to the config file, and take it back if the file no longer loads."""
    from mented.actions import load_table_in_force  # noqa: PLC0415 - as in rules.py

    before = path.read_bytes() if path.exists() else None
    path.parent.mkdir(parents=True, exist_ok=True)
    separator = "\n" if before and not before.endswith(b"\n") else ""
    with path.open("a", encoding="utf-8") as file:
        file.write(separator + text)
    problem = load_table_in_force(path).problem
    if problem is not None:
        if before is None:
            path.unlink()
        else:
            path.write_bytes(before)
        raise CommandError(
            f"the path actions would make {shown(str(path))} invalid ({problem}); nothing "
            "was written: fix the file, or adopt the path-scoped files apart",
            1,
        )


# --------------------------------------------------------------------------- team files


class _TeamLine(msgspec.Struct, kw_only=True, omit_defaults=True):
    text: str
    actions: list[str] = []
    checks: list[str] = []
    source: dict[str, str | int] = {}


def _team_lines(root: Path) -> list[_TeamLine]:
    from mented.team import FOLDER  # noqa: PLC0415 - --team only
    from mented.untrusted import read_file  # noqa: PLC0415

    try:
        data = read_file(root / FOLDER / TEAM_FILE, limit=1 << 20)
    except FileNotFoundError:
        return []
    except Refused as exc:
        raise CommandError(f"cannot read the adopted team rules: {exc}", 1) from None
    lines = []
    decoder = msgspec.json.Decoder(_TeamLine)
    for number, raw in enumerate(data.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            lines.append(decoder.decode(raw))
        except msgspec.DecodeError as exc:
            raise CommandError(
                f"{shown(str(root / FOLDER / TEAM_FILE))}:{number}: {exc}; fix or remove the line",
                1,
            ) from None
    return lines


def _team_existing(root: Path) -> list[Adopted]:
    found = []
    for index, line in enumerate(_team_lines(root)):
        source = line.source
        found.append(
            Adopted(
                id=str(index),
                digest=str(source.get("digest", "")),
                slot=str(source.get("slot", "")),
                file=str(source.get("file", "")),
                line=int(source.get("line", 0)),
                text=line.text,
            )
        )
    return found


def _write_team(root: Path, accepted: Sequence[Planned], pruned: Sequence[Adopted]) -> Path:
    """Rewrite `.mented/adopted.jsonl` with the accepted pieces (replaced in place)."""
    from mented_client.commands.team import write_team_file  # noqa: PLC0415 - --team only

    lines: list[_TeamLine | None] = list(_team_lines(root))
    for gone in pruned:
        lines[int(gone.id)] = None
    for item in accepted:
        proposal = item.proposal
        piece = proposal.piece
        line = _TeamLine(
            text=piece.text,
            actions=list(proposal.actions),
            checks=list(proposal.checks),
            source={
                "file": piece.file,
                "line": piece.line,
                "digest": piece.digest,
                "slot": piece.slot,
            },
        )
        if item.change == "supersede" and item.replaces is not None:
            lines[int(item.replaces)] = line
        else:
            lines.append(line)
    data = b"".join(msgspec.json.encode(line) + b"\n" for line in lines if line is not None)
    return write_team_file(root, TEAM_FILE, data)
