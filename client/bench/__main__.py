"""`python -m mented_client.bench PART`: the benchmarks run by hand, for work on one part.

`mentectl bench` measures what every user relies on and writes docs/benchmarks.md;
these measure one part in more depth, and their figures are copied into that page
below its hand-written mark:

- `matcher`  the matcher per command, over the acceptance rows too (`matcher.py`);
- `lookups`  facts recalled by topic, the recall index's build, a session start's
             pinned rules (`lookups.py`);
- `travel`   export, import and sync, and the hook with project rules (`travel.py`);
- `commands` the action table's recall and precision on the tldr pages' command
             examples, given a checkout of them (`command_corpus.py`);
- `startup`  a new daemon's first hook and the MCP server's first answers (`startup.py`);
- `looplag`  a bystander's hooks and the daemon's event loop under issue 22's attacks
             (`loop_lag.py`);
- `activity` the hook with the activity record on disk and without (`activity.py`).

Each takes its own options: `python -m mented_client.bench travel --help`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from mented_client.bench import (
    activity,
    command_corpus,
    lookups,
    loop_lag,
    matcher,
    startup,
    travel,
)

PARTS: dict[str, Callable[[Sequence[str]], int]] = {
    "matcher": matcher.main,
    "lookups": lookups.main,
    "travel": travel.main,
    "commands": command_corpus.main,
    "startup": startup.main,
    "looplag": loop_lag.main,
    "activity": activity.main,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mented_client.bench",
        description="The benchmarks run by hand; the full benchmark is `mentectl bench`.",
    )
    parser.add_argument("part", choices=PARTS, help="what to measure")
    parser.add_argument("options", nargs=argparse.REMAINDER, help="the part's own options")
    args = parser.parse_args(argv)
    return PARTS[args.part](args.options)


if __name__ == "__main__":
    sys.exit(main())
