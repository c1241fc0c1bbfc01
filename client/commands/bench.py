"""`mentectl bench`: measure mented on this machine (see `mented_client.bench`)."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from mented_client.commands.output import CommandError, print_json

if TYPE_CHECKING:
    from mented_client.bench import BenchResult


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    parser = subparsers.add_parser(
        "bench",
        parents=[common],
        help="measure the hook, lookups, scaling and writes on this machine",
        description="Starts daemons of its own on temporary sockets and data directories "
        "(nothing of yours is used: --socket is ignored), runs every benchmark, and prints "
        "a table (--json: the results as JSON). "
        "The full run loads a million memories and takes a few minutes.",
        epilog="Benchmarks of one part, run by hand (docs/benchmarks.md): "
        "python -m mented_client.bench {matcher,lookups,travel} --help",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smaller stores and fewer repetitions: under a minute",
    )
    # For the test suite: every section with tiny sizes; the figures mean nothing.
    parser.add_argument("--smoke", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", metavar="FILE.json", help="also write the results as JSON")
    parser.add_argument(
        "--markdown",
        metavar="FILE.md",
        help="also write the results page (e.g. docs/benchmarks.md)",
    )
    parser.set_defaults(handler=run_bench)


def _command_line(args: argparse.Namespace) -> str:
    """The command that produced the figures, as the results page shows it."""
    words = ["mentectl", "bench"]
    if args.smoke:
        words.append("--smoke")
    elif args.quick:
        words.append("--quick")
    if args.out:
        words += ["--out", args.out]
    if args.markdown:
        words += ["--markdown", args.markdown]
    return shlex.join(words)


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_bench(args: argparse.Namespace) -> int:
    # Heavy (the store, the matcher, bashlex): imported only when benchmarking.
    from mented_client import bench  # noqa: PLC0415

    plan = bench.PLANS["smoke" if args.smoke else "quick" if args.quick else "full"]
    _check_writable(args.out, args.markdown)
    try:
        result = bench.run(plan, command=_command_line(args), progress=_progress)
    except bench.BenchError as exc:
        raise CommandError(f"benchmark failed: {exc}") from exc
    except KeyboardInterrupt:
        # The helpers run in sessions of their own (the terminal's Ctrl-C reached only
        # us) and are stopped by now; a client thread that loses its daemon says nothing.
        threading.excepthook = lambda _args: None
        print(
            "mentectl: bench interrupted: its daemons are stopped, nothing was written",
            file=sys.stderr,
        )
        return 130
    _write_outputs(args, result)
    if args.json:
        print_json(result)
    else:
        print(bench.format_table(result))
    return 0


def _check_writable(*names: str | None) -> None:
    """Refuse an output path that cannot be written now, not after minutes of measuring."""
    for name in names:
        if name is None:
            continue
        folder = Path(name).absolute().parent
        if not folder.is_dir() or not os.access(folder, os.W_OK):
            raise CommandError(f"cannot write {name}: {folder} is not a writable directory")


# In the Markdown file, what follows this line is written by hand (other benchmarks'
# figures, e.g. `python -m mented_client.bench lookups`) and kept when the file is
# generated again.
KEPT_MARK = b"<!-- Written by hand from here on: `mentectl bench --markdown` keeps it. -->"


def _kept_part(path: Path) -> bytes:
    """The hand-written end of an existing Markdown file, from `KEPT_MARK` on."""
    try:
        old = path.read_bytes()
    except OSError:
        return b""
    at = old.find(KEPT_MARK)
    return b"" if at < 0 else b"\n" + old[at:]


def _write_outputs(args: argparse.Namespace, result: BenchResult) -> None:
    import msgspec  # noqa: PLC0415 - with the benchmark only

    from mented_client.bench import render_markdown  # noqa: PLC0415

    outputs = []
    if args.out:
        outputs.append((Path(args.out), msgspec.json.format(msgspec.json.encode(result)) + b"\n"))
    if args.markdown:
        markdown = Path(args.markdown)
        outputs.append((markdown, render_markdown(result).encode() + _kept_part(markdown)))
    for path, data in outputs:
        try:
            path.write_bytes(data)
        except OSError as exc:
            raise CommandError(f"cannot write {path}: {exc.strerror}") from exc
