"""`mentectl export`, `import` and `sync`: memories that travel (docs/format.md).

The daemon reads and writes these files only inside its data directory (`transfer/`):
as a service it may be sandboxed away from the rest of the home directory. So
export asks the daemon for a file there and moves it where the user wants it;
import copies the user's file there first. The daemon checks the whole file
and imports it in one write: all of it, or nothing.

`mentectl sync` asks the daemon to sync over git (mented/sync.py): the daemon runs
the user's git in a clone under its data directory.
"""

from __future__ import annotations

import argparse
import os
import shutil
import stat
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import msgspec

from mented.protocol import (
    ExportedReply,
    ExportRequest,
    ImportedReply,
    ImportRequest,
    StatusReply,
    StatusRequest,
    SyncedReply,
    SyncRequest,
)
from mented.untrusted import describe_kind
from mented.words import counted
from mented_client.commands.output import CommandError, escape_controls, print_json
from mented_client.commands.status import sync_rows
from mented_client.connection import Client
from mented_client.progress import Progress

if TYPE_CHECKING:  # argparse's class is not subscriptable at run time
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]  # noqa: SLF001 - argparse's own type

# An export or import of a large store takes a while (seconds per 100,000 memories).
TRANSFER_TIMEOUT_S = 600.0


def register(subparsers: SubParsers, common: argparse.ArgumentParser) -> None:
    export = subparsers.add_parser(
        "export",
        parents=[common],
        help="write every memory (and every forget) in the portable format",
        description="The format is plain text, one record per line: see docs/format.md.",
    )
    export.add_argument(
        "--out",
        metavar="PATH",
        help="write to PATH (default: standard output; with --json, one JSON document: "
        "the file's header and its records, in a list)",
    )
    export.set_defaults(handler=run_export)

    imp = subparsers.add_parser(
        "import",
        parents=[common],
        help="read memories from an export; records already here are left as they are",
        description=(
            "The whole file is checked first: a bad line is named and nothing is imported. "
            "Importing the same file twice changes nothing."
        ),
    )
    imp.add_argument("path", help="a file written by `mentectl export` (or by hand, see docs)")
    imp.set_defaults(handler=run_import)

    sync = subparsers.add_parser(
        "sync",
        parents=[common],
        help="sync rules with other machines over git (pull, then push)",
        description=(
            "`mentectl sync init REMOTE` sets it up with a git remote (SSH, HTTPS or a local "
            "path; an empty repository is fine), then syncs; `mentectl sync` syncs now. Your "
            "git, with your config and credentials, runs in a clone under mented's data "
            "directory. `[sync]` in the config makes the daemon sync by itself."
        ),
    )
    sync.set_defaults(handler=run_sync, remote=None)
    verbs = sync.add_subparsers(dest="verb", metavar="VERB", required=False)
    init = verbs.add_parser("init", parents=[common], help="set sync up with a git remote")
    init.add_argument(
        "remote",
        help="a git URL, or the path of a bare repository: empty, or one mented synced before",
    )
    init.set_defaults(handler=run_sync)
    remote = verbs.add_parser(
        "remote",
        parents=[common],
        help="sync with another git remote from now on",
        description=(
            "The next sync fetches from and pushes to URL (checked as `sync init` checks "
            "one); the rules already here stay."
        ),
    )
    remote.add_argument("url", help="a git URL, or the path of a bare repository")
    remote.set_defaults(handler=run_sync_remote)
    status = verbs.add_parser(
        "status", parents=[common], help="the remote, the last sync and its problems"
    )
    status.set_defaults(handler=run_sync_status)


def run_export(args: argparse.Namespace) -> int:
    with Client(args.socket, timeout=TRANSFER_TIMEOUT_S) as client:
        reply = client.expect(ExportRequest(), ExportedReply)
    written = Path(reply.path)
    try:
        if args.out is None:
            with written.open("rb") as source:
                if args.json:
                    _write_as_one_document(source, reply, sys.stdout.buffer)
                else:
                    shutil.copyfileobj(source, sys.stdout.buffer)
            sys.stdout.flush()
        else:
            shutil.move(written, args.out)
    except OSError as exc:
        raise CommandError(f"cannot write the export: {exc}") from exc
    finally:
        written.unlink(missing_ok=True)
    if args.out is not None:
        if args.json:
            print_json({"path": args.out, "memories": reply.memories, "forgotten": reply.forgotten})
        else:
            memories = counted(reply.memories, "memory", "memories")
            print(f"exported {memories} and {counted(reply.forgotten, 'forget')} to {args.out}")
    return 0


def _open_export(source: Path) -> BinaryIO:
    """`source` opened for reading, when it is a file `export` could have written.

    Raises:
        CommandError: it does not exist, is not a regular file (a directory, a device
            such as /dev/null, a named pipe, which would never end), or is empty.
    """
    what = "give the file `mentectl export --out FILE` wrote"
    try:
        # O_NONBLOCK: a named pipe opens at once (and is refused below), never waits.
        fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise CommandError(f"{source}: no such file", status=2) from None
    except OSError as exc:
        raise CommandError(f"cannot read {source}: {exc.strerror or exc}", status=2) from exc
    info = os.fstat(fd)
    if stat.S_ISDIR(info.st_mode):
        os.close(fd)
        raise CommandError(f"{source} is a directory: {what}", status=2)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        kind = describe_kind(info.st_mode)
        raise CommandError(f"{source} is {kind}, not a regular file: {what}", status=2)
    if info.st_size == 0:
        os.close(fd)
        raise CommandError(f"{source} is empty: {what}", status=2)
    return os.fdopen(fd, "rb")


def _write_as_one_document(lines: BinaryIO, reply: ExportedReply, out: BinaryIO) -> None:
    """The export's JSON Lines as one JSON document, line by line (never all in memory):
    `{"memories": N, "forgotten": N, "header": {...}, "records": [{...}, ...]}`.

    Each line is a JSON object the daemon wrote (docs/format.md), copied as it is.
    """
    out.write(b'{"memories":%d,"forgotten":%d,"header":' % (reply.memories, reply.forgotten))
    header = lines.readline().strip()
    out.write((header or b"null") + b',"records":[')
    separator = b""
    for line in lines:
        record = line.strip()
        if record:
            out.write(separator + record)
            separator = b","
    out.write(b"]}\n")


def run_import(args: argparse.Namespace) -> int:
    source = Path(args.path)
    with (
        _open_export(source) as exported,
        Client(args.socket, timeout=TRANSFER_TIMEOUT_S) as client,
    ):
        data_dir = Path(client.expect(StatusRequest(), StatusReply).data_dir)
        transfer = data_dir / "transfer"
        transfer.mkdir(mode=0o700, parents=True, exist_ok=True)
        copy = transfer / f"import-{os.getpid()}-{uuid.uuid4().hex}.jsonl"
        try:
            with copy.open("xb") as out:
                shutil.copyfileobj(exported, out)
            with Progress(f"importing {source}", show=not args.json):
                reply = client.expect(
                    ImportRequest(path=str(copy), shown_as=str(source)), ImportedReply
                )
        except OSError as exc:
            raise CommandError(f"cannot copy {source} for mented to read: {exc}") from exc
        finally:
            copy.unlink(missing_ok=True)
    for warning in reply.warnings:
        print(f"mentectl: warning: {escape_controls(warning)}", file=sys.stderr)
    if args.json:
        print_json(
            {"added": reply.added, "forgotten": reply.forgotten, "unchanged": reply.unchanged}
        )
    else:
        print(
            f"imported {source}: {reply.added} added, {reply.forgotten} forgotten, "
            f"{reply.unchanged} already here"
        )
    return 0


def _remote_argument(remote: str) -> str:
    """A remote as the daemon must see it: a local path made absolute, a blank refused."""
    if not remote.strip():
        raise CommandError(
            "the remote is empty: give a git URL or the path of a bare repository, "
            "e.g. `mentectl sync init git@example.com:me/rules.git`",
            status=2,
        )
    if Path(remote).expanduser().exists():
        # A local path: the daemon runs elsewhere (its working directory is not ours).
        return str(Path(remote).expanduser().resolve())
    return remote


def run_sync(args: argparse.Namespace) -> int:
    remote = None if args.remote is None else _remote_argument(args.remote)
    with Client(args.socket, timeout=TRANSFER_TIMEOUT_S) as client:
        what = f"cloning {remote}" if remote else "syncing"
        with Progress(what, show=not args.json):
            reply = client.expect(SyncRequest(init_remote=remote), SyncedReply)
    if args.json:
        print_json(msgspec.to_builtins(reply))
        return 0
    pushed = "pushed" if reply.pushed else "nothing to push"
    print(
        f"synced with {reply.remote}: {counted(reply.written, 'record')} of this machine written, "
        f"{reply.added} added and {reply.forgotten} forgotten from others, {pushed}"
    )
    for problem in reply.skipped:
        print(f"skipped a file from the remote: {problem}", file=sys.stderr)
    return 0


def run_sync_remote(args: argparse.Namespace) -> int:
    url = _remote_argument(args.url)
    with Client(args.socket) as client:
        status = client.expect(SyncRequest(set_remote=url), StatusReply)
    if args.json:
        print_json({"remote": status.sync_remote})
    else:
        print(f"sync now uses {status.sync_remote}; `mentectl sync` syncs with it now")
    return 0


def run_sync_status(args: argparse.Namespace) -> int:
    with Client(args.socket) as client:
        status = client.expect(SyncRequest(status=True), StatusReply)
    if args.json:
        print_json(
            {
                "remote": status.sync_remote,
                "last_ok": status.sync_last_ok,
                "error": status.sync_error,
                "skipped": status.sync_skipped,
                "skipped_total": status.sync_skipped_total,
            }
        )
        return 0
    if status.sync_remote is None:
        print("sync is not set up: `mentectl sync init REMOTE` sets it up")
        return 0
    for label, text in sync_rows(status):
        if label == "sync":
            print(text)
    for problem in status.sync_skipped:
        print(f"skipped a file from the remote: {problem}")
    return 1 if status.sync_error else 0
