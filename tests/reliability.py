"""Figures from the reliability tests, for docs/reliability.md.

When `MENTED_RELIABILITY_REPORT` names a file, each test appends what it did
(rounds, writes, fuzz cases, connections) to it as one JSON line;
bench/reliability_run.py sets it and prints the collected figures.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

REPORT_ENV = "MENTED_RELIABILITY_REPORT"


def record_figures(test: str, **figures: float | str) -> None:
    """Append `figures` under the name `test` when a report file was asked for."""
    target = os.environ.get(REPORT_ENV)
    if not target:
        return
    line = msgspec.json.encode({"test": test, **figures}) + b"\n"
    with Path(target).open("ab") as report:
        report.write(line)
