"""The replies to `status` and `recall_for_action`, built from what the daemon holds.

One place for both, without trio: the trio server answers them (`mented.server`),
and so does the start-up phase before trio is imported (`mented.first_answers`),
where `mentectl explain` and `mentectl status` right after a start are answered.
Each passes its own counters; what only a running event loop measures (its lag,
subscribers) is `LoopFigures()` before there is one.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from mented import __version__
from mented.compliance import report_row
from mented.pinned import over_cap
from mented.problems import DATA_DIR_FULL, FULL_BELOW_BYTES, data_dir_full, free_bytes
from mented.protocol import MemoriesReply, Problem, RecallRequest, StatusReply, UntrustedProject

if TYPE_CHECKING:
    from collections.abc import Iterable

    from mented.compliance import ComplianceRecord
    from mented.config import Config
    from mented.hooks import HookHandler
    from mented.problems import Problems
    from mented.store import Store
    from mented.sync import GitSync
    from mented.team import ProjectRules, RuleLookup

# A recall that may hold this many rules is a scan: the trio server runs it off the
# event loop (and the first answers leave it to the trio server).
SCAN_ABOVE = 256


class LoopFigures(msgspec.Struct, frozen=True, kw_only=True):
    """What the trio server measures of its event loop, for `status` (none before it runs)."""

    lag_ms: float | None = None
    lag_task: str | None = None
    recent_ms: float | None = None
    since_ms: float | None = None
    since_task: str | None = None
    subscribers: int = 0


class Served(msgspec.Struct, frozen=True, kw_only=True):
    """The daemon's options and counters that `status` reports."""

    socket_path: Path
    data_dir: Path
    config_path: Path | None
    socket_activated: bool
    started_by: str
    started: float  # time.time() at start
    requests: int
    p50_us: float | None
    p99_us: float | None
    config_error: str | None = None
    recall_error: str | None = None


def status_reply(  # noqa: PLR0913 - what the reply reports on, each named at the call
    served: Served,
    loop: LoopFigures,
    *,
    config: Config,
    store: Store,
    hooks: HookHandler,
    compliance: ComplianceRecord,
    syncer: GitSync,
    projects: ProjectRules,
    problems: list[Problem],
) -> StatusReply:
    """The daemon's `status` (`problems`: `problems_now`'s)."""
    stats = store.stats()
    sync_state = syncer.state() if syncer.configured else None
    chars_per_session, sessions = hooks.chars_per_session()
    pinned = store.pinned_rules()
    week = compliance.summary(since=time.time() - 7 * 86_400).total
    return StatusReply(
        checks_7d=report_row("7d", week),
        version=__version__,
        pid=os.getpid(),
        uptime_s=time.time() - served.started,
        socket=str(served.socket_path),
        data_dir=str(served.data_dir),
        db_bytes=stats.db_bytes,
        map_bytes=stats.map_bytes,
        memories=stats.memories,
        live_rules=stats.live_rules,
        actions_with_rules=stats.actions_with_rules,
        requests_served=served.requests,
        p50_us=served.p50_us,
        p99_us=served.p99_us,
        loop_lag_ms=loop.lag_ms,
        loop_lag_task=loop.lag_task,
        loop_lag_recent_ms=loop.recent_ms,
        loop_lag_since_ms=loop.since_ms,
        loop_lag_since_task=loop.since_task,
        last_hook_fire=hooks.last_fire,
        hook_chars_per_session=chars_per_session,
        hook_sessions=sessions,
        config=str(served.config_path) if served.config_path else None,
        config_error=served.config_error,
        config_in_force=config.text if served.config_error else None,
        socket_activated=served.socket_activated,
        started_by=served.started_by,
        sync_remote=sync_state.remote if sync_state else None,
        sync_last_ok=sync_state.last_ok if sync_state else None,
        sync_error=sync_state.last_error if sync_state else None,
        sync_skipped=sync_state.skipped if sync_state else [],
        sync_skipped_total=sync_state.skipped_total if sync_state else 0,
        forks=[[tip.id for tip in fork.tips] for fork in store.forks()],
        untrusted_projects=projects.untrusted(),
        recall_error=served.recall_error,
        problems=problems,
        subscribers=loop.subscribers,
        pinned_live=len(pinned),
        pinned_max_rules=config.pinned.max_rules,
        pinned_max_chars=config.pinned.max_chars,
        pinned_over_cap=over_cap(pinned, config.pinned),
    )


def percentile(latencies_us: Iterable[float], fraction: float) -> float | None:
    """The latency below which `fraction` of `latencies_us` are (None: no request yet)."""
    ordered = sorted(latencies_us)
    if not ordered:
        return None
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def problems_now(problems: Problems, data_dir: Path, store_full: str | None) -> list[Problem]:
    """The fallbacks in force, the data directory's free space looked at now
    (`store_full`: why the last write found no room, while no write has worked since)."""
    free = free_bytes(data_dir)
    if free is not None and free < FULL_BELOW_BYTES:
        problems.note(DATA_DIR_FULL, *data_dir_full(data_dir, f"{free} bytes free"))
    elif store_full is not None:  # a quota, say: the file system has room
        problems.note(DATA_DIR_FULL, *data_dir_full(data_dir, store_full))
    else:
        problems.clear(DATA_DIR_FULL)
    return problems.current()


def recall_reply(rules: RuleLookup, store: Store, request: RecallRequest) -> MemoriesReply:
    """The live rules for an action that the caller may see (`recall_for_action`), once
    the projects of `request.cwd` are read (or were given up on)."""
    memories = rules.recall_for_action(
        request.action, agent=request.agent, cwd=request.cwd, k=request.k
    )
    return MemoriesReply(
        memories=memories,
        untrusted=untrusted_reply(rules, request.cwd),
        synced=store.synced_among(memories),  # sync's rules
    )


def untrusted_reply(rules: RuleLookup, cwd: str | None) -> UntrustedProject | None:
    """The project `cwd` is in, when its committed rules are not served (not trusted)."""
    project = rules.untrusted_project(cwd)
    if project is None:
        return None
    return UntrustedProject(root=project.root, rules=len(project.rules), problem=project.problem)
