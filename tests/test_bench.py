"""`mentectl bench`: a tiny run of every benchmark, checked for shape and sanity, not speed."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mented_client.bench import plugin
from mented_client.commands.bench import KEPT_MARK
from tests.conftest import isolated_env

SECTIONS = (
    "machine",
    "matcher",
    "hook",
    "hook_request",
    "concurrency",
    "writes",
    "recall",
    "recall_floors",
    "memory",
    "targets",
)
SUMMARY_KEYS = {"n", "p50_us", "p99_us", "min_us", "max_us", "mean_us"}


def summaries(node: Any, path: str = "$") -> list[tuple[str, dict[str, Any]]]:
    """Every timing summary in the result, with where it is."""
    found = []
    if isinstance(node, dict):
        if set(node) == SUMMARY_KEYS:
            return [(path, node)]
        for key, value in node.items():
            found += summaries(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += summaries(value, f"{path}[{index}]")
    return found


def positive(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


def mentectl_bench(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`mentectl bench --smoke ARGS` as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "mented_client.cli", "bench", "--smoke", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_smoke_run_writes_every_section_with_sane_figures(short_tmp: Path) -> None:
    out = short_tmp / "bench.json"
    page = short_tmp / "benchmarks.md"
    env = isolated_env(short_tmp)
    hand_written = KEPT_MARK.decode() + "\n\n## Figures of another benchmark\n"
    page.write_text("# An older run\n\n" + hand_written)
    done = mentectl_bench(env, "--out", str(out), "--markdown", str(page))
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    text = page.read_text()
    assert "An older run" not in text
    assert text.endswith("\n" + hand_written)  # the hand-written part is kept

    assert all(section in result for section in SECTIONS)
    timings = summaries(result)
    assert len(timings) > 20
    for where, summary in timings:
        assert summary["n"] >= 1, where
        assert all(positive(summary[key]) for key in SUMMARY_KEYS - {"n"}), (where, summary)
        assert summary["min_us"] <= summary["p50_us"] <= summary["p99_us"] <= summary["max_us"]

    hook = {case["name"]: case for case in result["hook"]["cases"]}
    assert set(hook) == {"no match", "commit, 6 rules", "heredoc commit", "daemon down"}
    assert all(positive(case["ratio"]) for case in hook.values())
    assert hook["commit, 6 rules"]["stdout_bytes"] > 0  # the rules reached the agent
    assert hook["heredoc commit"]["stdout_bytes"] > 0
    assert hook["no match"]["stdout_bytes"] == 0
    assert hook["daemon down"]["stdout_bytes"] == 0
    assert "shim.py claude-code" in result["hook"]["command_line"]

    assert [size["memories"] for size in result["recall"]] == [100, 1000]
    assert all(positive(size["requests_per_s"]) for size in result["recall"])
    assert [floor["name"] for floor in result["recall_floors"]] == ["trio", "plain"]
    assert result["recall_placements"][0] in {"one core", "unpinned"}
    assert [size["memories"] for size in result["memory"]] == [100, 1000]
    assert all(positive(size["rss_bytes"]) for size in result["memory"])
    assert [level["clients"] for level in result["concurrency"]] == [1, 4]
    assert all(positive(level["per_second"]) for level in result["concurrency"])
    writes = result["writes"]
    assert positive(writes["durable_adds_per_s"])
    assert positive(writes["bulk_per_s"])
    assert writes["bulk_memories"] == 1100
    assert result["targets"]
    assert all(isinstance(target["met"], bool) for target in result["targets"])

    text = page.read_text()
    assert "mentectl bench --smoke" in text
    assert "| **2. recall_for_action, one connection** |" in text
    assert "## What bounds each figure" in text
    assert "targets" in done.stdout  # the table on stdout
    check_startup(result, text)
    check_loop_lag(result, text)
    # Its own daemons, sockets and stores only: the user's paths stay untouched.
    assert not Path(env["MENTED_SOCKET"]).exists()
    assert not Path(env["MENTED_DATA_DIR"]).exists()


def test_an_unwritable_output_is_refused_before_measuring(short_tmp: Path) -> None:
    missing = short_tmp / "missing" / "bench.json"
    done = mentectl_bench(isolated_env(short_tmp), "--out", str(missing))
    assert done.returncode == 1
    assert "is not a writable directory" in done.stderr
    assert "matcher:" not in done.stderr  # no benchmark ran


def by_hand(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m mented_client.bench ARGS`, as docs/benchmarks.md says to run it."""
    return subprocess.run(
        [sys.executable, "-m", "mented_client.bench", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_matcher_benchmark_by_hand_reads_the_acceptance_rows(short_tmp: Path) -> None:
    done = by_hand(isolated_env(short_tmp), "matcher", "--rounds", "1")
    assert done.returncode == 0, done.stderr
    assert "cache miss, commands < 1 KiB" in done.stdout
    assert "not found" not in done.stdout  # tests/data/commands.jsonl was measured too


def test_the_lookups_and_travel_benchmarks_by_hand_run_tiny(short_tmp: Path) -> None:
    env = isolated_env(short_tmp)
    lookups = by_hand(env, "lookups", "--sizes", "100", "--queries", "5")
    assert lookups.returncode == 0, lookups.stderr
    assert "100 facts: recall p50" in lookups.stdout
    assert "session start:" in lookups.stdout
    travel = by_hand(env, "travel", "--memories", "50", "--sync-base", "20")
    assert travel.returncode == 0, travel.stderr
    assert "| sync bringing 1,000 new records from another machine |" in travel.stdout


def test_an_unknown_part_is_refused_with_the_known_ones(short_tmp: Path) -> None:
    done = by_hand(isolated_env(short_tmp), "bogus")
    assert done.returncode == 2
    assert "matcher" in done.stderr
    assert "travel" in done.stderr


def check_startup(result: dict[str, Any], text: str) -> None:
    """The daemon's first hook and the MCP server's first answers, beside bare trio."""
    startup = result["startup"]
    assert set(startup) == {
        "bare_trio",
        "ready",
        "first_hook",
        "first_hook_own_socket",
        "explain",
        "mcp_initialize",
        "mcp_tools",
    }
    assert "## Start-up" in text
    assert "| first hook after a start (socket activation), full answer |" in text
    assert "| first hook after a start (own socket), full answer |" in text
    assert "| `mentectl explain` on a stopped daemon (socket activation), rules shown |" in text
    assert {target["figure"] for target in result["targets"]} >= {
        "first hook after a start (socket activation)",
        "MCP server answers initialize",
    }


def check_loop_lag(result: dict[str, Any], text: str) -> None:
    """Issue 22's attacks, each with the bystander's hooks answered (with their rule)."""
    attacks = result["loop_lag"]
    assert [attack["attack"] for attack in attacks] == [
        "reindex",
        "hidden facts",
        "path pattern",
        "slow clients",
    ]
    for attack in attacks:
        assert attack["quiet"]["n"] == 20
        assert attack["during"]["n"] >= 1
        assert positive(attack["loop_lag_ms"])
    assert "## Loop lag under attack" in text
    assert "| reindex | `reindex` of 200 facts, 3 `recall`s |" in text
    assert "event loop held, slow clients" in {target["figure"] for target in result["targets"]}


def test_the_plugin_benchmarks_handler_rows_time_each_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MENTED_BENCH_PAUSE_MS", "0")
    times = plugin._handler_times(tmp_path, 3)
    assert list(times) == list(plugin.COMMANDS.values())
    assert all(len(samples) == 3 and min(samples) > 0 for samples in times.values())
