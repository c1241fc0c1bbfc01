"""The share of corpus pieces `mentectl adopt` puts where a reviewer would (docs/adopt.md).

Usage: python tests/data/adopt/measure.py DIR, DIR holding the files corpus-labels.json names.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mented.actions import load_table_in_force
from mented.adopt import PinnedRoom, classify, path_action_name, split, vocabulary
from mented.adopt_sources import read_source


def main() -> int:
    directory = Path(sys.argv[1])
    labels = json.loads((Path(__file__).parent / "corpus-labels.json").read_text())
    vocab = vocabulary(load_table_in_force(None).table)
    got: dict[tuple[str, int], tuple[str, str]] = {}
    for name in labels["files"]:
        source = read_source(directory / name)
        action = path_action_name(name, source.globs) if source.globs else ""
        room = PinnedRoom(5, 1200)  # the default cap, per file
        for piece in split(source.text, file=name, first_line=source.first_line):
            proposal = classify(
                piece, vocab, room, globs=source.globs, always=source.always, path_action=action
            )
            to = proposal.to
            if to in {"action", "path"}:
                to = f"{to}:{','.join(proposal.actions)}"
            got[name, piece.line] = (to, " ".join(piece.text.split())[:90])
    right: dict[str, int] = {}
    total: dict[str, int] = {}
    for name, line, want in labels["labels"]:
        group = labels["files"][name].get("set", "tuned")
        total[group] = total.get(group, 0) + 1
        to, text = got.pop((name, line), ("(no piece)", ""))
        if to in want:
            right[group] = right.get(group, 0) + 1
        else:
            print(f"miss {name}:{line}: {to}, reviewer: {' or '.join(want)}: {text}")
    for (name, line), (to, text) in sorted(got.items()):
        print(f"unlabelled {name}:{line}: {to}: {text}")
    for group, count in total.items():
        share = 100 * right.get(group, 0) / count
        hits = right.get(group, 0)
        print(f"{group}: {hits} of {count} pieces ({share:.0f}%) where a reviewer put them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
