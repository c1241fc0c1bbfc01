"""What the matcher's test modules share: a matcher without a cache, a check of its answers."""

from __future__ import annotations

from mented.actions import load_action_table
from mented.config import Config
from mented.matcher import Explanation, Matcher


def assert_well_formed(explanation: Explanation) -> None:
    assert isinstance(explanation, Explanation)
    assert set(explanation.actions) <= set(FUZZ_MATCHER.table.names())
    # The matcher turns its own bugs into a note rather than raising: fail on those here.
    assert not any(note.startswith("internal error") for note in explanation.notes)


FUZZ_MATCHER = Matcher(load_action_table(Config()), cache_bytes=0)
