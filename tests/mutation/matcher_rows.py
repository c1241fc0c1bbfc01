"""The matcher's acceptance rows (tests/data/*.jsonl) in one process: exit 1 at the first
row a mutant breaks. For tests/mutation/hand_mutants.py: run it before the rest of the
matcher's tests (tests/test_matcher*.py), e.g.
`sh -c 'python tests/mutation/matcher_rows.py && pytest ...'`.
"""

import json
import sys
from pathlib import Path

from mented.actions import load_action_table
from mented.config import Config
from mented.matcher import Matcher

DATA = Path(__file__).parent.parent / "data"
ROWS = ("commands.jsonl", "more_commands.jsonl", "agent_commands.jsonl", "everyday_commands.jsonl")


def main() -> int:
    matcher = Matcher(load_action_table(Config()))
    for name in ROWS:
        for line in (DATA / name).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if "actions" in row and list(matcher.actions_in(row["command"])) != row["actions"]:
                print("row failed:", name, row["command"][:80])
                return 1
    print("rows ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
