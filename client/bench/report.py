"""The figures for people: a table for the terminal, and docs/benchmarks.md."""

from __future__ import annotations

from dataclasses import dataclass

from mented_client.bench.corpus import LONG_PR_CREATE, RULES_PER_REPLY
from mented_client.bench.runner import BenchResult
from mented_client.bench.timing import Summary
from mented_client.hook_settings import command_argv


def _duration(micros: float) -> str:
    if micros >= 1_000_000:
        return f"{micros / 1_000_000:.2f} s"
    if micros >= 10_000:
        return f"{micros / 1000:.1f} ms"
    if micros >= 1000:
        return f"{micros / 1000:.2f} ms"
    return f"{micros:.0f} us"


def _difference(micros: float) -> str:
    """A signed difference of durations: "+1.20 ms", "-80 us"."""
    return ("+" if micros >= 0 else "-") + _duration(abs(micros))


def _bytes(count: int) -> str:
    return f"{count / 1e6:.1f} MB"


@dataclass(frozen=True)
class Row:
    """One line of the results table."""

    section: str
    figure: str
    time: Summary | None
    note: str


def rows(result: BenchResult) -> list[Row]:
    """The results table, one row per figure, grouped by section."""
    hook = result.hook
    table = [
        Row(
            "1. hook, spawn to exit",
            "bare interpreter (-I -S -c pass)",
            hook.bare,
            f"1.00x, {hook.rounds} rounds",
        )
    ]
    table += [
        Row(
            "1. hook, spawn to exit",
            case.name,
            case.time,
            f"{case.ratio:.2f}x, {case.stdout_bytes} bytes out",
        )
        for case in hook.cases
    ]
    recall = "2. recall_for_action, one connection"
    primary, *other = result.recall_placements
    for size in result.recall:
        table.append(
            Row(
                recall,
                f"{size.memories:,} memories, {primary}",
                size.round_trip,
                f"{size.ratio_to_smallest:.2f}x, {size.requests_per_s:,.0f} req/s",
            )
        )
        if size.round_trip_two_cores is not None:
            table.append(
                Row(
                    recall,
                    f"{size.memories:,} memories, {other[0]}",
                    size.round_trip_two_cores,
                    "client and daemon on different cores",
                )
            )
        table.append(
            Row(recall, f"{size.memories:,} memories, in-process", size.in_process, "no socket")
        )
    for floor in result.recall_floors:
        work = "same loop, no work: " + ("trio" if floor.name == "trio" else "the socket")
        table.append(Row(recall, f"floor: {floor.name} echo, {primary}", floor.round_trip, work))
        if floor.round_trip_two_cores is not None:
            table.append(
                Row(
                    recall,
                    f"floor: {floor.name} echo, {other[0]}",
                    floor.round_trip_two_cores,
                    work,
                )
            )
    request = result.hook_request
    table += [
        Row(
            "3. hook request in the daemon",
            "matcher cache cold",
            request.cold,
            f"daemon's part p50 {_duration(request.daemon_cold.p50_us)}",
        ),
        Row(
            "3. hook request in the daemon",
            "matcher cache warm",
            request.warm,
            f"daemon's part p50 {_duration(request.daemon_warm.p50_us)}",
        ),
        Row(
            "3. hook request in the daemon",
            "floor: trio echo server",
            request.floor_trio,
            "same loop, no work: trio",
        ),
        Row(
            "3. hook request in the daemon",
            "floor: plain echo server",
            request.floor_plain,
            "same loop, no work: the socket",
        ),
    ]
    table += [
        Row(
            "4. concurrency, hook requests",
            f"{level.clients} client{'s' if level.clients > 1 else ''}",
            level.time,
            f"{level.per_second:,.0f} req/s",
        )
        for level in result.concurrency
    ]
    writes = result.writes
    table += [
        Row(
            "5. writes",
            "durable single add",
            writes.durable_add,
            f"{writes.durable_adds_per_s:,.0f} adds/s",
        ),
        Row(
            "5. writes",
            "bulk import (store_many)",
            None,
            f"{writes.bulk_per_s:,.0f} memories/s, {writes.bulk_batch:,} per txn",
        ),
    ]
    table += [
        Row(
            "6. daemon memory and start",
            f"{size.memories:,} memories, cold start",
            size.cold_start,
            f"RSS {_bytes(size.rss_bytes)} (anon {_bytes(size.anon_bytes)}), "
            f"db {_bytes(size.db_bytes)}",
        )
        for size in result.memory
    ]
    matcher = result.matcher
    table += [
        Row(
            "7. matcher alone",
            f"cache miss, {matcher.under_1k} commands < 1 KiB",
            matcher.miss,
            f"heredoc commit p50 {_duration(matcher.heredoc_miss_us)}, "
            f"slowest command p50 {_duration(matcher.slowest_miss_us)}",
        ),
    ]
    if matcher.miss_over_1k is not None:
        table.append(
            Row(
                "7. matcher alone",
                f"cache miss, {matcher.over_1k} command{'s' if matcher.over_1k > 1 else ''} "
                ">= 1 KiB",
                matcher.miss_over_1k,
                "a PR body in a heredoc",
            )
        )
    table.append(Row("7. matcher alone", "cache hit", matcher.hit, ""))
    return table


def _cells(row: Row) -> list[str]:
    if row.time is None:
        return [row.figure, "", "", "", "", row.note]
    time = row.time
    return [
        row.figure,
        _duration(time.p50_us),
        _duration(time.p99_us),
        _duration(time.min_us),
        _duration(time.max_us),
        row.note,
    ]


_HEADINGS = ["figure", "p50", "p99", "min", "max", ""]


def format_table(result: BenchResult) -> str:
    """The results as a plain-text table, then the targets, for a terminal."""
    lines = [
        f"mented {result.mented} bench ({result.plan}), {result.seconds:.0f} s: "
        f"{result.machine.cpu}, {result.machine.cores} cores, {result.machine.python}, "
        f"load {result.machine.load_before[0]:.2f} -> {result.machine.load_after[0]:.2f}",
    ]
    body = [_cells(row) for row in rows(result)]
    widths = [max(len(cells[i]) for cells in [_HEADINGS, *body]) for i in range(5)]

    def line(cells: list[str]) -> str:
        text = "  " + cells[0].ljust(widths[0])
        text += "".join(
            "  " + cell.rjust(width) for cell, width in zip(cells[1:5], widths[1:5], strict=True)
        )
        return (text + "  " + cells[5]).rstrip()

    section = ""
    lines.append(line(_HEADINGS))
    for row, cells in zip(rows(result), body, strict=True):
        if row.section != section:
            section = row.section
            lines.append(section)
        lines.append(line(cells))
    lines.append("targets")
    lines.extend(
        f"  {'met ' if target.met else 'MISS'}  {target.figure}: {target.measured} "
        f"(target {target.target})"
        for target in result.targets
    )
    return "\n".join(lines)


def _markdown_table(result: BenchResult) -> list[str]:
    lines = [
        "| figure | p50 | p99 | min | max | |",
        "|---|--:|--:|--:|--:|---|",
    ]
    section = ""
    for row in rows(result):
        if row.section != section:
            section = row.section
            lines.append(f"| **{section}** | | | | | |")
        cells = [cell.replace("|", "\\|") for cell in _cells(row)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _paragraphs(result: BenchResult) -> list[str]:
    """One paragraph per figure: what bounds it, with this run's numbers."""
    hook = result.hook
    cases = {case.name: case for case in hook.cases}
    no_match, commit = cases["no match"], cases["commit, 6 rules"]
    down = cases["daemon down"]
    recall_small, recall_large = result.recall[0], result.recall[-1]
    floors = {floor.name: floor.round_trip for floor in result.recall_floors}
    request = result.hook_request
    writes = result.writes
    single, busiest = result.concurrency[0], result.concurrency[-1]
    heaps = sorted(size.anon_bytes for size in result.memory)
    memory_small, memory_large = result.memory[0], result.memory[-1]
    matcher = result.matcher
    return [
        "**1. The hook** is bounded by interpreter start. Every shell command the agent "
        f"runs spawns `<real python3> -I -S shim.py`; the bare interpreter alone "
        f"takes {_duration(hook.bare.p50_us)} here, and the hook's median differs from it by "
        f"{_difference(no_match.time.p50_us - hook.bare.p50_us)} for a command that names no "
        f"action and {_difference(commit.time.p50_us - hook.bare.p50_us)} for a commit that "
        f"gets 6 rules ({commit.stdout_bytes} bytes of context). The shim's part is compiling "
        "and running a stdlib-only file (it imports nothing that is not built in; compiling "
        "its source is about a millisecond), reading stdin, one connect/send/receive on the "
        "Unix socket (with a check that the daemon runs as the same user), and the daemon's "
        "answer (section 3); it ends with `os._exit`, skipping "
        "the interpreter shutdown that the bare interpreter goes through, which pays back "
        "part of that. With the daemon down the connect "
        f"fails at once ({_difference(down.time.p50_us - hook.bare.p50_us)}): the agent never "
        "waits for a daemon that is not there. The processes are spawned "
        "directly (no shell); a shell in front adds the same cost to the hook and to the bare "
        "interpreter. The spawns are interleaved in shuffled order, round by round, so "
        "machine noise hits both sides of each ratio alike.",
        "**2. `recall_for_action`** is an LMDB `set_range` on the trigger index and one "
        "`next()` plus a msgpack decode per rule, so it does not grow with the store: "
        f"in-process it takes {_duration(recall_small.in_process.p50_us)} at "
        f"{recall_small.memories:,} memories and {_duration(recall_large.in_process.p50_us)} "
        f"at {recall_large.memories:,} (B-tree depth grows with the logarithm of the size). "
        f"Over the socket ({result.recall_placements[0]}) the same lookup takes "
        f"{_duration(recall_small.round_trip.p50_us)}. "
        "Most of that is not the lookup: in the same loop, a trio echo server that does no "
        f"work answers in {_duration(floors['trio'].p50_us)} and a blocking stdlib one in "
        f"{_duration(floors['plain'].p50_us)}, so trio's scheduling (a task woken per "
        "request, a cancel scope for the idle timeout, a checkpoint per send and receive) "
        "costs more than LMDB does. The daemon's "
        f"{_difference(recall_small.round_trip.p50_us - floors['trio'].p50_us)} over the trio "
        "floor is the lookup itself, decoding the request and encoding 6 memories as JSON "
        "(msgspec: a few microseconds), and the server's own Python per request (framing, "
        "dispatch, the latency figures kept for `mentectl status`). Each size has its own daemon "
        "and they are asked in turn on persistent connections, so the ratio "
        f"({recall_large.ratio_to_smallest:.2f}x from {recall_small.memories:,} to "
        f"{recall_large.memories:,}) is measured side by side. Every probed action has at "
        "least 6 rules at every size, so each reply carries the same 6 rules." + _two_cores(result),
        "**3. A full hook request** pays for a new connection (accept, a new trio task, the "
        "peer-credential check), decoding the agent's event, matching the command, the "
        "lookup and rendering the agent's JSON. The daemon's own part (from its fire log) is "
        f"{_duration(request.daemon_warm.p50_us)} when the matcher has seen the command and "
        f"{_duration(request.daemon_cold.p50_us)} when it has not: the difference is "
        "bashlex parsing the command (section 7). The rest of the "
        f"{_duration(request.warm.p50_us)} (warm) is the connection: a trio echo server asked "
        f"the same way in the same loop takes {_duration(request.floor_trio.p50_us)}, a "
        f"blocking stdlib one {_duration(request.floor_plain.p50_us)}. Accepting a connection "
        "in trio (a new task, registering and unregistering the socket with epoll, waiting "
        "for the client to close) is the largest single cost of a warm hook request.",
        "**4. Concurrency**: one trio thread answers every request, so throughput is bounded "
        "by the daemon's CPU time per request, most of it accepting the connection "
        f"(section 3): {single.per_second:,.0f} requests/s with {single.clients} client, "
        f"{busiest.per_second:,.0f} with {busiest.clients}. More clients add queueing, seen "
        f"in the p99 ({_duration(single.time.p99_us)} with {single.clients} client, "
        f"{_duration(busiest.time.p99_us)} with {busiest.clients}). The clients are threads "
        "of the benchmark process, each opening a connection per request as the shim does; "
        f"on {result.machine.cores} cores they compete with the daemon for the CPU.",
        "**5. Writes**: a single add is acknowledged only after LMDB's commit has been "
        f"flushed to disk (fsync), so its {_duration(writes.durable_add.p50_us)} median is "
        "the disk's flush latency plus a worker-thread hop; it is the figure to watch on "
        "slow disks. A bulk import (`Store.store_many`) pays one flush per transaction of "
        f"{writes.bulk_batch:,} memories and is bounded by validating each memory, msgpack "
        "encoding and the B-tree inserts (record, handle, trigger key, counters): "
        f"{writes.bulk_per_s:,.0f} memories/s.",
        "**6. Memory and start**: the daemon's own heap (anonymous memory: the interpreter, "
        "trio, msgspec, bashlex, the action table) stays at "
        + (
            _bytes(heaps[0])
            if _bytes(heaps[0]) == _bytes(heaps[-1])
            else f"{_bytes(heaps[0])}-{_bytes(heaps[-1])}"
        )
        + " at every size; "
        "the rest of the resident size is LMDB's memory-mapped file, pages the kernel can "
        f"drop and re-read at will ({_bytes(memory_large.rss_bytes)} resident in all with a "
        f"{_bytes(memory_large.db_bytes)} database). Cold start to ready "
        f"({_duration(memory_small.cold_start.p50_us)}) is interpreter start plus imports "
        "(trio, msgspec, lmdb, bashlex, structlog), loading the action table and opening the "
        "store, which does not read the data: it does not grow with the store.",
        "**7. The matcher** parses with bashlex, a pure-Python parser, so a cache miss costs "
        f"{_duration(matcher.miss.p50_us)} at the median over {matcher.under_1k} real agent "
        "commands under 1 KiB, and grows with the command's length"
        + (
            f" ({_duration(matcher.miss_over_1k.p50_us)} for a PR description of "
            f"{len(LONG_PR_CREATE.encode()):,} bytes in a heredoc)"
            if matcher.miss_over_1k is not None
            else ""
        )
        + ". Commands holding what bashlex rejects (a heredoc inside `$(...)`) are first "
        "scanned by the matcher's own lexer, which empties heredoc bodies (they are data), "
        f"and then parsed: a Claude-style heredoc commit takes "
        f"{_duration(matcher.heredoc_miss_us)}. A hit is a dictionary lookup "
        f"({_duration(matcher.hit.p50_us)}): agents repeat commands, and the daemon's matcher "
        "keeps the recent ones.",
    ]


def _two_cores(result: BenchResult) -> str:
    """What moving the client and the daemon to different cores changed, if measured."""
    first, *other = result.recall_placements
    floors = {floor.name: floor for floor in result.recall_floors}
    plain, daemon = floors["plain"], result.recall[0]
    if not other or plain.round_trip_two_cores is None or daemon.round_trip_two_cores is None:
        return ""
    return (
        f" The client and the daemons run pinned to {first} (the figure the targets use), and "
        f"then the same way on {other[0]}: there each request has to wake the other core, "
        "which slows the plain socket echo "
        f"({_duration(plain.round_trip.p50_us)} -> "
        f"{_duration(plain.round_trip_two_cores.p50_us)}) as well as the daemon "
        f"({_duration(daemon.round_trip.p50_us)} -> "
        f"{_duration(daemon.round_trip_two_cores.p50_us)}): how fast a core wakes is the "
        "machine's (power states, a hypervisor), not mented's. Unpinned, the scheduler "
        "picks one placement or the other from run to run."
    )


def _session_cost_section(result: BenchResult) -> list[str]:
    if not result.session_cost:
        return []
    return [
        "## Session cost",
        "",
        "Characters of mented text handed to the model in one agent session, with "
        f"{RULES_PER_REPLY} rules for `git-commit` and the default delivery (the first commit "
        "stopped once with the rules, its retry given nothing, later commits a one-line "
        "pointer). Each stop costs the model one extra turn. Measured in process; "
        "`docs/agents-e2e.md` has the same with the real Claude Code and Codex (and what "
        "the context-only delivery of 0.1 cost: the full text on every commit).",
        "",
        "| commits | mented characters | full texts | stops (extra model turns) |",
        "|--:|--:|--:|--:|",
        *(
            f"| {cost.commits} | {cost.chars:,} | {cost.full_texts} | {cost.stops} |"
            for cost in result.session_cost
        ),
        "",
    ]


def _startup_section(result: BenchResult) -> list[str]:
    if result.startup is None:
        return []
    from mented_client.bench.startup import render  # noqa: PLC0415 - its own table

    return [
        "## Start-up",
        "",
        "From spawning the process, interleaved rounds: a new daemon answering `status` on "
        "its own socket, the first hook's full answer on a socket that listened before the "
        "daemon started (as under socket activation: what the first command after a start "
        "waits; the hook's budget is 250 ms), and `mentectl mcp` answering `initialize` "
        "and `tools/list` (its front answers them before the MCP SDK is imported).",
        "",
        *render(result.startup),
        "",
    ]


def _loop_lag_section(result: BenchResult) -> list[str]:
    if not result.loop_lag:
        return []
    from mented_client.bench.loop_lag import render  # noqa: PLC0415 - its own table

    return [
        "## Loop lag under attack",
        "",
        "Issue 22's attacks, each against a daemon of its own, while a bystander sends "
        "commit hooks (one connection each, as the shim does; each must get its rule): the "
        "longest event-loop step the daemon measured (every request waits that long at "
        "most) while 20 quiet hooks ran, then while the attack ran, and the bystander's "
        "round trips.",
        "",
        *render(result.loop_lag),
        "",
    ]


def _portable_command_line(command_line: str) -> str:
    """The hook's command line with this machine's paths named by what they are."""
    run_words = command_argv(command_line)
    words = run_words.argv if run_words is not None else []
    if len(words) < 4:
        return command_line
    named = ["<real python3>", *words[1:3], "<mented_client>/shim.py", *words[4:]]
    if len(named) > 5 and named[5].startswith("/"):
        named[5] = "<socket>"
    return " ".join(named)


def render_markdown(result: BenchResult) -> str:
    """docs/benchmarks.md: the machine, the command, the table, the targets, the reasons."""
    machine = result.machine
    # The load after includes the benchmark's own work: only the load before tells of others.
    loaded = machine.load_before[0] > 0.5 * machine.cores
    lines = [
        "# Benchmarks",
        "",
        "<!-- Generated by `mentectl bench --markdown`: do not edit the figures by hand. -->",
        "",
        f"Produced by `{result.command}` (mented {result.mented}, plan `{result.plan}`, "
        f"{result.seconds:.0f} s) on {result.started}.",
        "",
        f"- CPU: {machine.cpu}, {machine.cores} cores",
        f"- OS: {machine.os}",
        f"- Python: {machine.python}",
        f"- Load average (1 min) before and after: {machine.load_before[0]:.2f}, "
        f"{machine.load_after[0]:.2f}"
        + (
            " (the machine was busy with other work: absolute times are noisy, the "
            "interleaved ratios much less so)"
            if loaded
            else ""
        ),
        "",
        "Times are medians, p99, min and max over the repetitions, measured on the calling "
        "side. Ratios compare medians measured interleaved in the same loop. Round trips of "
        "tens of microseconds also measure how fast an idle core wakes up (power states, and "
        "in a virtual machine the hypervisor), so between runs they vary more than the ratios "
        "do; the echo-server floors in sections 2 and 3 are measured alongside for that reason.",
        "",
        *_markdown_table(result),
        "",
        "## Targets",
        "",
        "| figure | target | measured | |",
        "|---|---|---|---|",
        *(
            f"| {target.figure} | {target.target} | {target.measured} | "
            f"{'met' if target.met else '**missed**'} |"
            for target in result.targets
        ),
        "",
        *_session_cost_section(result),
        *_startup_section(result),
        *_loop_lag_section(result),
        "## What bounds each figure",
        "",
    ]
    for paragraph in _paragraphs(result):
        lines += [paragraph, ""]
    lines += [
        "## Reproduce",
        "",
        "```",
        "mentectl bench                      # the full run: a few minutes on 2 cores",
        "mentectl bench --quick              # under a minute",
        "mentectl bench --out results.json   # the figures as JSON as well",
        "mentectl bench --markdown docs/benchmarks.md",
        "```",
        "",
        f"The hook command line measured: `{_portable_command_line(result.hook.command_line)}`",
        "",
    ]
    return "\n".join(lines)
