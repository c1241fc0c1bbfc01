"""`mentectl sync` and `import` against hostile input, on a real daemon with a bystander hook.

The remote is built by each test (a bare repository and an attacker's clone); a
bystander keeps firing the hook for `git commit` while the attack runs and must keep
getting the user's rule.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Self

import pytest

from mented.agents.pretooluse import pretooluse_event
from tests.conftest import DaemonProcess
from tests.reliability import record_figures, rss_kib
from tests.test_sync_hostile import GIT_ID, Attacker, a_record

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
RULE = "commit messages: single line"


class BystanderHook:
    """Fires the hook for `git commit` in a loop; every answer must carry the rule."""

    def __init__(self, daemon: DaemonProcess) -> None:
        self.daemon = daemon
        self.answers = 0
        self.worst_s = 0.0
        self.missing: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        assert self.answers > 0
        assert self.missing == [], self.missing[:1]

    def _run(self) -> None:
        session = 0
        while not self._stop.is_set():
            session += 1  # a new session each time: the rule is handed every time
            event = pretooluse_event("git commit -m x", cwd="/tmp", session=f"by-{session}")
            started = time.perf_counter()
            with self.daemon.client(timeout=30) as client:
                answer = client.hook("claude-code", event)
            self.worst_s = max(self.worst_s, time.perf_counter() - started)
            self.answers += 1
            if RULE.encode() not in answer:
                self.missing.append(answer)
            time.sleep(0.02)


def bare_remote(tmp_path: Path) -> Path:
    remote = tmp_path / "rules.git"
    subprocess.run(["git", "init", "--quiet", "--bare", "-b", "main", str(remote)], check=True)
    return remote


@needs_git
def test_a_remote_with_a_dev_zero_record_and_a_deep_one_is_skipped_and_named(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    daemon.mentectl("rule", "add", "git-commit", RULE)
    remote = bare_remote(tmp_path)
    daemon.mentectl("sync", "init", str(remote))
    attacker = Attacker(tmp_path, remote)
    records = attacker.work / "records" / "01JD"
    records.mkdir(parents=True, exist_ok=True)
    (records / "01JDQ8Z5K3M4N5P6Q7R8S9T0D1.json").symlink_to("/dev/zero")
    (records / "01JDQ8Z5K3M4N5P6Q7R8S9T0D2.json").write_bytes(b"[" * 1000 + b"]" * 1000)
    name, good = a_record("from the desk", "01JDQ8Z5K3M4N5P6Q7R8S9T0D3")
    (attacker.work / name).write_bytes(good)
    attacker.push()
    assert daemon.proc is not None
    before = rss_kib(daemon.proc.pid)

    with BystanderHook(daemon) as bystander:
        synced = daemon.mentectl("sync", check=False)
        again = daemon.mentectl("sync", check=False)  # and the next one works too
    grown = rss_kib(daemon.proc.pid) - before
    record_figures(
        "sync_dev_zero_and_deep_record",
        rss_growth_kib=grown,
        bystander_answers=bystander.answers,
        bystander_worst_ms=round(bystander.worst_s * 1000, 1),
    )
    assert synced.returncode == 0, synced.stderr
    assert again.returncode == 0, again.stderr
    assert "skipped a file from the remote: records/01JD/01JDQ8Z5K3M4N5P6Q7R8S9T0D1.json" in (
        synced.stderr
    )
    assert "01JDQ8Z5K3M4N5P6Q7R8S9T0D2.json: nested more than 32 levels deep" in synced.stderr
    listed = json.loads(daemon.mentectl("rule", "list", "--json").stdout)["rules"]
    assert sorted(rule["content"] for rule in listed) == [RULE, "from the desk"]
    status = daemon.mentectl("status").stdout
    assert "SKIPPED 2 file(s) from the remote" in status
    doctor = daemon.mentectl("doctor", check=False).stdout
    assert "SKIPPED 2 file(s) from the remote" in doctor
    assert grown < 64 * 1024  # the /dev/zero record is never read (it grew 1.1 GiB)


@needs_git
def test_a_symlinked_prefix_fails_sync_by_name_in_status_and_never_claims_synced(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    daemon.mentectl("rule", "add", "git-commit", RULE)
    remote = bare_remote(tmp_path)
    daemon.mentectl("sync", "init", str(remote))
    listed = subprocess.run(
        ["git", "-C", str(remote), "ls-tree", "--name-only", "main:records"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    prefix = listed[0]
    attacker = Attacker(tmp_path, remote)
    outside = daemon.home / ".ssh"
    outside.mkdir()
    shutil.rmtree(attacker.work / "records" / prefix)
    (attacker.work / "records" / prefix).symlink_to(outside)
    attacker.push()
    daemon.mentectl("sync")

    with BystanderHook(daemon):
        daemon.mentectl("rule", "add", "git-push", "never force")
        for _ in range(2):
            failed = daemon.mentectl("sync", check=False)
            assert failed.returncode == 1
            assert f"records/{prefix}: " in failed.stderr
            assert "synced with" not in failed.stdout
    assert list(outside.iterdir()) == []
    status = daemon.mentectl("status").stdout
    assert f"FAILING (the sync clone holds what mented never writes: records/{prefix}" in status
    sync_status = daemon.mentectl("sync", "status", check=False)
    assert sync_status.returncode == 1
    assert f"records/{prefix}" in sync_status.stdout


@needs_git
def test_sync_remote_changes_the_remote_and_status_and_doctor_name_the_new_one(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    daemon.mentectl("rule", "add", "git-commit", RULE)
    old = bare_remote(tmp_path)
    daemon.mentectl("sync", "init", str(old))
    new = tmp_path / "new.git"
    subprocess.run(["git", "init", "--quiet", "--bare", "-b", "main", str(new)], check=True)

    changed = daemon.mentectl("sync", "remote", str(new))
    assert f"sync now uses {new}" in changed.stdout
    assert f"{new}: last synced" in daemon.mentectl("status").stdout
    assert f"with {new}" in daemon.mentectl("doctor", check=False).stdout
    assert f"synced with {new}" in daemon.mentectl("sync").stdout
    pushed = subprocess.run(
        ["git", "-C", str(new), "ls-tree", "-r", "--name-only", "main"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "records/" in pushed
    assert f"{new}: last synced" in daemon.mentectl("sync", "status").stdout


def test_sync_init_of_a_blank_remote_is_refused_not_taken_as_this_directory(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    for blank in ("", "  "):
        refused = daemon.mentectl("sync", "init", blank, check=False, cwd=tmp_path)
        assert refused.returncode == 2
        assert "the remote is empty: give a git URL" in refused.stderr
    assert "sync is not set up" in daemon.mentectl("sync", "status").stdout


@needs_git
def test_a_sync_timeout_is_not_counted_as_hook_latency(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    daemon.mentectl("rule", "add", "git-commit", RULE)
    daemon.mentectl("sync", "init", str(bare_remote(tmp_path)))
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/rules.git"
        subprocess.run(
            ["git", "-C", str(daemon.data_dir / "sync"), *GIT_ID, "remote", "set-url", "origin",
             url], check=True,
        )  # fmt: skip
        daemon.write_config("[sync]\ntimeout_s = 3\n")
        daemon.reload()
        for _ in range(5):
            daemon.mentectl("rule", "list")
        failed = daemon.mentectl("sync", check=False)
        assert "the remote did not answer within 3 s" in failed.stderr
    finally:
        silent.close()
    status = json.loads(daemon.mentectl("status", "--json").stdout)
    assert status["p99_us"] < 3_000_000  # the 3 s the sync waited are not in it


def test_import_of_a_line_nested_50000_deep_is_invalid_with_file_and_line(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    deep = tmp_path / "deep.jsonl"
    deep.write_bytes(b'{"mented":"rules","format":1}\n' + b"[" * 50_000 + b"]" * 50_000 + b"\n")
    refused = daemon.mentectl("import", str(deep), "--json", check=False)
    assert refused.returncode == 1
    error = json.loads(refused.stdout)["error"]
    assert error["code"] == "invalid", error
    assert f"{deep}:2: nested more than 32 levels deep" in error["message"]


@pytest.mark.parametrize(
    ("content", "status", "said"),
    [
        # Refused by mentectl before it is sent: nothing in it at all.
        ("", 2, " is empty: give the file `mentectl export --out FILE` wrote"),
        # Refused by the daemon, which reads it: only blank lines.
        ("\n\n  \n", 1, ": empty, not a mented export"),
    ],
)
def test_import_of_an_empty_or_blank_file_is_not_a_mented_export(
    daemon: DaemonProcess, tmp_path: Path, content: str, status: int, said: str
) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text(content)
    refused = daemon.mentectl("import", str(empty), check=False)
    assert refused.returncode == status
    assert f"{empty}{said}" in refused.stderr


def test_import_of_rules_for_an_unknown_action_says_so_with_did_you_mean(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    typo = tmp_path / "typo.jsonl"
    typo.write_text(
        '{"mented":"rules","format":1}\n'
        '{"kind":"memory","id":"01JDQ8Z5K3M4N5P6Q7R8S9T0E1","created_at":1,'
        '"type":"procedural","tags":["trigger:git-comit"],"text":"single line"}\n'
        '{"kind":"memory","id":"01JDQ8Z5K3M4N5P6Q7R8S9T0E2","created_at":2,'
        '"type":"procedural","tags":["trigger:git-commit"],"text":"no emojis"}\n'
    )
    imported = daemon.mentectl("import", str(typo))
    assert "2 added" in imported.stdout
    assert (
        f"mentectl: warning: {typo}: 1 rule for 'git-comit', which is not an action mented "
        "knows, so it never fires. Did you mean: git-commit"
    ) in imported.stderr
    assert "git-commit'" not in imported.stderr  # the known action is not named as unknown
