"""`mentectl watch` against a real daemon: lines for people, JSON for scripts, and how
it ends (Ctrl-C, a closed pipe, the daemon stopping, the daemon dropping it)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mented.agents.pretooluse import pretooluse_event
from mented.memory import short_handle
from mented.protocol import StatusReply, StatusRequest, StoredReply, StoreRequest
from tests.conftest import PYTHON, DaemonProcess, ctrl_c_reaches_children

COMMIT = "trigger:git-commit"


@contextmanager
def watching(daemon: DaemonProcess, *args: str) -> Iterator[subprocess.Popen[str]]:
    """`mentectl watch ARGS` running, subscribed; killed afterwards if it still runs."""
    with daemon.client() as client:
        before = client.expect(StatusRequest(), StatusReply).subscribers
    with ctrl_c_reaches_children():
        watch = subprocess.Popen(
            [PYTHON, "-m", "mented_client.cli", "watch", *args],
            env=daemon.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    try:
        deadline = time.monotonic() + 15
        with daemon.client() as client:
            while client.expect(StatusRequest(), StatusReply).subscribers == before:
                assert watch.poll() is None, watch.communicate()
                assert time.monotonic() < deadline, "mentectl watch never subscribed"
                time.sleep(0.05)
        yield watch
    finally:
        if watch.poll() is None:
            watch.kill()
        watch.communicate()


def store(daemon: DaemonProcess, content: str, project: str | None = None) -> str:
    with daemon.client() as client:
        request = StoreRequest(content=content, tags=[COMMIT], project=project)
        return client.expect(request, StoredReply).id


def hook(daemon: DaemonProcess, command: str, cwd: str, session: str = "s1") -> None:
    with daemon.client() as client:
        client.hook("claude-code", pretooluse_event(command, cwd=cwd, session=session))


def test_one_line_per_event_with_the_essentials_and_escaped(daemon: DaemonProcess) -> None:
    with watching(daemon) as watch:
        assert watch.stdout is not None
        rule = store(daemon, "single line\x1b]52;c;cGF5bG9hZA==\x07\nsecond line")
        hook(daemon, "git commit -m 'fix: x'\nrm -rf /tmp/x", cwd="/home/u/repo")
        daemon.reload()
        lines = [watch.stdout.readline() for _ in range(3)]
    added, fired, reloaded = lines
    assert f"rule     added [{short_handle(rule)}] git-commit: single line\\x1b]52;" in added
    assert added.endswith("\\x07 …\n")  # the first line of the content, the rest marked
    assert "\x1b" not in "".join(lines)
    assert "fire     claude-code in /home/u/repo: git-commit" in fired
    assert f"[{short_handle(rule)}] (stopped once)  $ git commit -m 'fix: x' …" in fired
    assert f"config   reloaded {daemon.config_path}" in reloaded


def test_json_lines_are_the_events_as_on_the_wire_and_filters_apply(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    with watching(daemon, "--json", "--kind", "rule", "--project", str(project)) as watch:
        assert watch.stdout is not None
        store(daemon, "not here", project=str(elsewhere))
        hook(daemon, "git commit -m x", cwd=str(project))  # a fire: not asked for
        here = store(daemon, "here", project=str(project))
        line = watch.stdout.readline()
    event = json.loads(line)
    assert event == {
        "type": "event",
        "kind": "rule",
        "time": event["time"],
        "change": "added",
        "id": here,
        "handle": short_handle(here),
        "actions": ["git-commit"],
        "project": str(project),
        "agent": None,
        "content": "here",
        "replaces": None,
    }


def test_ctrl_c_and_a_closed_pipe_end_it_quietly(daemon: DaemonProcess) -> None:
    with watching(daemon) as watch:
        watch.send_signal(signal.SIGINT)
        assert watch.wait(timeout=10) == 130
        assert watch.stderr is not None
        assert watch.stderr.read() == ""
    with watching(daemon, "--json") as watch:
        assert watch.stdout is not None
        store(daemon, "one")
        assert json.loads(watch.stdout.readline())["content"] == "one"
        watch.stdout.close()  # `| head -1`: the reader is gone; no event comes after
        assert watch.wait(timeout=10) == 128 + signal.SIGPIPE
        assert watch.stderr is not None
        assert watch.stderr.read() == ""


def test_says_how_to_start_the_daemon_when_it_is_not_running(daemon: DaemonProcess) -> None:
    daemon.stop()
    result = daemon.mentectl("watch", check=False)
    assert result.returncode == 1
    assert result.stdout == ""
    assert "mented is not running" in result.stderr
    assert "mentectl start" in result.stderr


def test_exits_non_zero_when_the_daemon_stops(daemon: DaemonProcess) -> None:
    with watching(daemon) as watch:
        daemon.stop()
        assert watch.wait(timeout=10) == 1
        assert watch.stderr is not None
        assert "mented closed the connection (it stopped)" in watch.stderr.read()


def test_says_it_was_dropped_and_exits_3_when_its_reader_falls_behind(
    daemon: DaemonProcess,
) -> None:
    store(daemon, "single line")
    with watching(daemon, "--json", "--kind", "fire") as watch:
        # Nobody reads its output: the pipe fills, then its socket, then its queue.
        with daemon.client() as client:
            for index in range(20_000):
                event = pretooluse_event(f"git commit -m {index}", cwd="/r", session=f"s{index}")
                client.hook("claude-code", event)
                if index % 100 == 0 and not client.expect(StatusRequest(), StatusReply).subscribers:
                    break
            else:
                raise AssertionError("never dropped")
        out, err = watch.communicate(timeout=30)
        assert watch.returncode == 3
    *fires, last = [json.loads(line) for line in out.splitlines()]
    assert fires
    assert all(fire["kind"] == "fire" for fire in fires)
    # With --json the stream ends with the error, as one more JSON line.
    assert last["error"]["code"] == "dropped"
    message = last["error"]["message"]
    assert "mented dropped this watch: this subscriber fell 1000 events behind" in message
    assert "events were missed" in message
    assert err == ""
