"""A full disk under the data directory: every request answers a documented code.

docs/protocol.md documents `store_full`, `sync_failed` and `recall_unavailable`; a raw
OSError answered as `internal` tells the user nothing they can act on. The data
directory is put on a small tmpfs (`small_tmpfs`: skipped where it cannot be mounted),
filled with a file, and each request that writes is tried.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from mented.agents.pretooluse import pretooluse_event
from mented.protocol import (
    ErrorCode,
    ExportRequest,
    RecallFactsRequest,
    ReindexRequest,
    Request,
    StatusReply,
    StatusRequest,
    SyncRequest,
    TrustRequest,
)
from mented_client.connection import DaemonError
from tests.conftest import DaemonProcess
from tests.reliability import record_figures

ALLOWED = {
    "recall": {ErrorCode.RECALL_UNAVAILABLE},
    "trust": {ErrorCode.STORE_FULL},
    "sync": {ErrorCode.SYNC_FAILED},
    "reindex": {ErrorCode.STORE_FULL, ErrorCode.RECALL_UNAVAILABLE},
    "export": {ErrorCode.STORE_FULL},
}


def fill(directory: Path) -> Path:
    """Fill the file system of `directory` to the last byte; the filler, to remove."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (65536, 4096, 1):
            while True:
                try:
                    os.write(fd, b"\0" * size)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
                    break
    finally:
        os.close(fd)
    return filler


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_full_disk_answers_documented_codes_and_loses_nothing(
    daemon: DaemonProcess, small_tmpfs: Path, tmp_path: Path
) -> None:
    daemon.stop()
    daemon.data_dir = small_tmpfs / "data"
    daemon.env["MENTED_DATA_DIR"] = str(daemon.data_dir)
    daemon.start()
    for n in range(20):
        daemon.mentectl("rule", "add", "git-commit", f"rule {n}")
    daemon.mentectl("remember", "the staging database is on port 5433", check=False)
    remote = tmp_path / "rules.git"
    subprocess.run(["git", "init", "--quiet", "--bare", "-b", "main", str(remote)], check=True)
    daemon.mentectl("sync", "init", str(remote))
    project = tmp_path / "project"
    (project / ".mented").mkdir(parents=True)
    (project / ".mented" / "rules.jsonl").write_text('{"action":"git-push","text":"never force"}\n')
    subprocess.run(["git", "init", "--quiet", str(project)], check=True)
    daemon.mentectl("rule", "add", "git-commit", "one more, to sync")

    filler = fill(small_tmpfs)
    requests: dict[str, Request] = {
        "recall": RecallFactsRequest(query="staging database"),
        "trust": TrustRequest(dir=str(project)),
        "sync": SyncRequest(),
        "reindex": ReindexRequest(),
        "export": ExportRequest(),
    }
    codes = {}
    with daemon.client(timeout=60) as client:
        for name, request in requests.items():
            try:
                client.request(request)
            except DaemonError as exc:
                codes[name] = exc.code
                assert exc.code in ALLOWED[name], (name, exc.code, exc.message)
                assert "internal error" not in exc.message
            else:
                codes[name] = "ok"
        status = client.expect(StatusRequest(), StatusReply)
        # a bystander's hook still gets the user's rules on the full disk
        event = pretooluse_event("git commit -m x", cwd="/tmp", session="bystander")
        assert b"rule 19" in client.hook("claude-code", event)
    record_figures("full_disk_codes", **{k: str(v) for k, v in codes.items()})
    assert status.sync_error  # the failed sync is shown
    assert status.memories >= 21  # nothing acknowledged lost

    filler.unlink()
    listed = daemon.mentectl("rule", "list", "--action", "git-commit", "-k", "100").stdout
    assert all(f"rule {n}" in listed for n in range(20))
    assert "synced with" in daemon.mentectl("sync").stdout
    # With room again, the next hook uses the session memory again: nothing is degraded.
    with daemon.client() as client:
        client.hook("claude-code", pretooluse_event("git commit -m y", cwd="/tmp", session="after"))
    assert daemon.mentectl("status").stdout.count("FAILING") == 0
