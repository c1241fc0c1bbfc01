"""`mentectl bench`: measure mented's promises on this machine and write the figures down.

The figures, numbered as in the results table (docs/benchmarks.md says what bounds each),
one module per thing measured:

1. `hook`          (`hook.py`) the installed hook command line, spawn to exit, against
                   the bare interpreter (`python -I -S -c pass`), interleaved round by
                   round: a command that names no action, a commit with 6 rules, a
                   Claude-style heredoc commit, and the same commit with the daemon down.
2. `recall`        (`recall.py`) `recall_for_action` on one persistent connection per
                   store size (1 thousand, 100 thousand, 1 million memories over about a
                   thousand actions), the sizes' daemons running side by side and asked in
                   turn, so that their ratio is measured interleaved; the same lookup
                   in-process.
3. `hook_request`  (`hook_request.py`) one hook request inside the daemon (decode, match,
                   look up, render) on a fresh connection each, the matcher's cache cold
                   and warm, interleaved.
4. `concurrency`   (`concurrency.py`) 1, 10, 100 clients (threads) sending hook requests
                   at once.
5. `writes`        (`writes.py`) durable single rule adds through the daemon; bulk import
                   (`store_many`, timed while `recall.py` fills its stores).
6. `memory`        (`memory.py`) each size's daemon: resident memory and cold start to ready.
7. `matcher`       (`matcher.py`) the matcher alone on a corpus of real agent commands
                   (`corpus.py`), cache miss and hit.

And `session_cost` (`session_cost.py`): the characters of mented text a session of
commits hands the model, in process.

Figures 2 and 3 come with floors: two echo servers that answer every frame at once,
one on trio and one on a blocking stdlib socket, asked in the same loops. They show
how much of a figure is the socket and trio rather than mented's own work.

`runner.py` runs them in the order 7, session cost, 1, 3, 4, 5, then 2 and 6 (the slow
store loading last), against daemons of its own (`processes.py`: `python -m
mented.daemon`) on sockets and data directories in a temporary directory under /tmp
(Unix socket paths are limited to ~107 bytes), removed at the end: nothing of the
user's (socket, data, config, agent settings) is used or touched. Stores are filled
with `Store.store_many` before their daemon starts. `plans.py` says how much of
everything a run does; `report.py` writes the terminal table and docs/benchmarks.md.

Times are taken on the calling side with `time.perf_counter_ns`. A `Summary`
(`timing.py`) holds the median, p99 (nearest rank), min, max and mean in microseconds.
Where a figure is held against a reference (the hook against the bare interpreter, the
1M store against the 1k one) both are measured interleaved in the same loop and the
ratio of their medians is reported: on a noisy machine the ratio is the figure that
counts.

Three more benchmarks are run by hand, for work on one part, and their figures are
written into docs/benchmarks.md below its hand-written mark:
`python -m mented_client.bench matcher|lookups|travel` (`__main__.py`).
"""

from mented_client.bench.plans import PLANS, Plan
from mented_client.bench.report import format_table, render_markdown
from mented_client.bench.runner import BenchResult, run
from mented_client.bench.timing import BenchError

__all__ = ["PLANS", "BenchError", "BenchResult", "Plan", "format_table", "render_markdown", "run"]
