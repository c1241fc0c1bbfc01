"""`mentectl ui`'s server: its refusals, and what its requests answer (issue 29).

One real daemon and one real server (uvicorn, on a free port of 127.0.0.1, in a
thread of this process) for the module; requests are made with http.client, so the
`Host`, `Origin` and `Cookie` headers are exactly the ones given. The page in a
real browser is tests/test_ui_browser.py's.
"""

from __future__ import annotations

import http.client
import json
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the page's server is the optional extra mented[ui]")
uvicorn = pytest.importorskip(
    "uvicorn", reason="the page's server is the optional extra mented[ui]"
)

from mented.agents.pretooluse import pretooluse_event  # noqa: E402
from mented_client.commands.output import CommandError  # noqa: E402
from mented_client.ui import app as ui_app  # noqa: E402
from mented_client.ui.guard import CSP  # noqa: E402
from tests.conftest import DaemonProcess, run_mentectl  # noqa: E402
from tests.test_sync import Machine  # noqa: E402

STATIC = Path(ui_app.__file__).parent / "static"
HOSTILE = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2"> & "quotes"'


@dataclass
class Page:
    """The server under test, and the daemon behind it."""

    daemon: DaemonProcess
    port: int
    token: str
    activity: ui_app.Activity

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def cookie(self) -> str:
        return f"mented_ui_{self.port}={self.token}"

    def request(
        self,
        method: str,
        path: str,
        *,
        body: object = None,
        headers: dict[str, str] | None = None,
        cookie: bool = True,
    ) -> tuple[int, dict[str, str], bytes]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        sent = {"Host": self.host}
        if cookie:
            sent["Cookie"] = self.cookie
        if body is not None:
            sent["Content-Type"] = "application/json"
            sent["Origin"] = f"http://{self.host}"
        sent |= headers or {}
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body))
        try:
            connection.request(method, path, body=data, headers=sent)
            reply = connection.getresponse()
            return reply.status, {k.lower(): v for k, v in reply.getheaders()}, reply.read()
        finally:
            connection.close()

    def json(self, path: str) -> dict[str, object]:
        status, _, body = self.request("GET", path)
        assert status == 200, body
        found: dict[str, object] = json.loads(body)
        return found

    def mentectl(self, *args: str) -> str:
        return self.daemon.mentectl(*args).stdout


@pytest.fixture(scope="module")
def page() -> Iterator[Page]:
    root = Path(tempfile.mkdtemp(prefix="md-ui-", dir="/tmp"))
    daemon = DaemonProcess(root)
    server: uvicorn.Server | None = None
    thread: threading.Thread | None = None
    # The server runs doctor and mentectl in this process: with the daemon's environment.
    with pytest.MonkeyPatch.context() as patch:
        for name, value in daemon.env.items():
            patch.setenv(name, value)
        try:
            daemon.start()
            listening = ui_app.listen(0)
            port = listening.getsockname()[1]
            token = secrets.token_urlsafe(32)
            app = ui_app.make_app(daemon.socket, token=token, port=port)
            server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
            thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]})
            thread.start()
            deadline = time.monotonic() + 60
            while not server.started:
                assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
                time.sleep(0.01)
            yield Page(daemon, port, token, app.app.state.activity)  # type: ignore[attr-defined]
        finally:
            if server is not None and thread is not None:
                server.should_exit = True
                thread.join(timeout=30)
            if daemon.proc is not None:
                daemon.stop()
            shutil.rmtree(root, ignore_errors=True)


# ------------------------------------------------------------------- refusals


@pytest.mark.parametrize("path", ["/", "/static/app.js", "/api/rules", "/api/events"])
def test_a_request_without_the_token_is_refused(page: Page, path: str) -> None:
    status, headers, body = page.request("GET", path, cookie=False)
    assert status == 401
    assert b"open the address `mentectl ui` printed" in body
    assert headers["content-security-policy"] == CSP
    wrong = page.request(
        "GET", path, headers={"Cookie": f"mented_ui_{page.port}=guess"}, cookie=False
    )
    assert wrong[0] == 401
    assert page.request("GET", f"{path}?token=guess", cookie=False)[0] == 401


def test_the_token_is_kept_in_a_strict_httponly_cookie_and_leaves_the_address(page: Page) -> None:
    status, headers, _ = page.request("GET", f"/?token={page.token}&x=1", cookie=False)
    assert status == 303
    assert headers["location"] == "/?x=1"  # the token is out of the address bar
    cookie = headers["set-cookie"]
    assert cookie.startswith(f"{page.cookie};")
    assert "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie
    status, headers, body = page.request("GET", "/")
    assert status == 200
    assert b'<script src="/static/app.js"' in body


def test_the_redirect_stays_on_this_server(page: Page) -> None:
    status, headers, _ = page.request(
        "GET", f"//attacker.example/x?token={page.token}", cookie=False
    )
    assert status == 303
    assert headers["location"] == "/attacker.example/x"


@pytest.mark.parametrize(
    "host",
    [
        "attacker.example",
        "attacker.example:{port}",
        "localhost:{port}",
        "127.0.0.1",
        "127.0.0.1:1",
        "",
    ],
)
def test_a_foreign_host_is_refused_even_with_the_token(page: Page, host: str) -> None:
    # DNS rebinding: a page on the attacker's name, which resolves to 127.0.0.1.
    shown = host.format(port=page.port)
    status, _, body = page.request("GET", "/api/rules", headers={"Host": shown})
    assert status == 403
    assert f"served as {page.host} only" in body.decode()
    assert (
        page.request("GET", f"/?token={page.token}", headers={"Host": shown}, cookie=False)[0]
        == 403
    )


def rules_text(page: Page) -> str:
    return page.mentectl("rule", "list")


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Origin": "http://attacker.example"}, 403),
        ({"Origin": "null"}, 403),
        ({"Origin": "http://localhost:{port}"}, 403),
        ({"Origin": ""}, 403),
        ({"Content-Type": "text/plain"}, 415),  # what a cross-site form can send
        ({"Content-Type": "application/x-www-form-urlencoded"}, 415),
    ],
)
def test_a_cross_origin_or_form_post_changes_nothing(
    page: Page, headers: dict[str, str], status: int
) -> None:
    text = f"never from elsewhere {secrets.token_hex(4)}"
    sent = {name: value.format(port=page.port) for name, value in headers.items()}
    body = {"action": "git-push", "text": text}
    got, _, said = page.request("POST", "/api/rule/add", body=body, headers=sent)
    assert got == status, said
    assert text not in rules_text(page)


def test_a_huge_or_deeply_nested_body_is_refused_and_the_page_goes_on(page: Page) -> None:
    huge = b'{"action": "git-push", "text": "' + b"x" * (1 << 20) + b'"}'
    assert page.request("POST", "/api/rule/add", body=huge)[0] == 413
    nested = b"[" * 100_000 + b"]" * 100_000
    assert page.request("POST", "/api/rule/add", body=nested)[0] == 400
    assert page.request("GET", "/api/rules")[0] == 200


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
def test_a_change_is_a_post_only(page: Page, method: str) -> None:
    text = f"only by post {secrets.token_hex(4)}"
    query = f"/api/rule/add?action=git-push&text={text.replace(' ', '+')}"
    status, _, _ = page.request(method, query)
    assert status == 405
    assert text not in rules_text(page)


def test_every_answer_has_a_strict_content_security_policy(page: Page) -> None:
    for path in ("/", "/static/app.js", "/static/style.css", "/api/rules", "/nowhere"):
        _, headers, _ = page.request("GET", path)
        assert headers["content-security-policy"] == CSP
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "no-referrer"
    assert "'unsafe-inline'" not in CSP
    assert "script-src 'self';" in CSP
    assert "default-src 'none';" in CSP


def test_the_page_builds_its_text_as_text_never_as_html() -> None:
    script = (STATIC / "app.js").read_text()
    for sink in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "Function(",
    ):
        assert sink not in script
    html = (STATIC / "index.html").read_text()
    assert all("src=" in tag for tag in re.findall(r"<script[^>]*>", html))  # no inline script
    assert not re.search(r"\son\w+=", html)  # no inline handlers
    # Nothing fetched from a network (the SVG namespace is a name, not a fetch).
    addresses = set(re.findall(r"https?://[^\s\"'`]*", html + script))
    assert addresses == {"http://www.w3.org/2000/svg"}
    assert "<style" not in html


# ------------------------------------------------------------------ what it answers


def test_rule_text_with_html_comes_back_as_json_text(page: Page) -> None:
    page.mentectl("rule", "add", "git-tag", HOSTILE)
    status, headers, body = page.request("GET", "/api/rules")
    assert status == 200
    assert headers["content-type"] == "application/json"
    found = json.loads(body)
    (tags,) = [group for group in found["actions"] if group["action"] == "git-tag"]
    assert [rule["content"] for rule in tags["rules"]] == [HOSTILE]


def test_a_rule_added_in_the_page_is_mentectls_with_its_words(page: Page) -> None:
    status, _, body = page.request(
        "POST",
        "/api/rule/add",
        body={"action": "git-push", "text": "-", "checks": "flags forbid --force\n"},
    )
    said = json.loads(body)
    assert status == 200, said
    assert re.fullmatch(r"added rule \[\w{8}\] for git-push \(id \w{26}\)\n", said["stdout"])
    listed = page.mentectl("rule", "list", "--action", "git-push")
    assert "    -\n    check: flags forbid --force" in listed  # the text `-`, not standard input

    # A mistake is refused with mentectl's own message, word for word.
    status, _, body = page.request(
        "POST", "/api/rule/add", body={"action": "gti-push", "text": "x"}
    )
    assert status == 422
    cli = run_mentectl(["rule", "add", "gti-push", "x"], env=page.daemon.env)
    assert json.loads(body) == {"status": cli.returncode, "stdout": "", "stderr": cli.stderr}
    assert "Did you mean: git-push" in cli.stderr
    # And argparse's refusals, without the usage lines the form stands for.
    status, _, body = page.request(
        "POST", "/api/rule/add", body={"action": "git-push", "text": "x", "agent": "nobody-agent"}
    )
    assert status == 422
    assert json.loads(body)["stderr"].startswith("usage: ") is False
    assert "argument --agent" in json.loads(body)["stderr"]


def test_superseding_and_forgetting_in_the_page_as_mentectl(page: Page) -> None:
    page.mentectl("rule", "add", "release-create", "release notes: a list")
    (rule,) = next(
        group["rules"]
        for group in page.json("/api/rules")["actions"]  # type: ignore[attr-defined]
        if group["action"] == "release-create"
    )
    status, _, body = page.request(
        "POST", "/api/rule/supersede", body={"id": rule["handle"], "text": "release notes: prose"}
    )
    said = json.loads(body)
    assert status == 200, said
    assert (
        said["stdout"]
        == f"rule {said['stdout'].split()[1]} replaces {rule['id']}, which no longer fires\n"
    )
    history = page.json(f"/api/history?id={rule['id']}")
    versions = history["versions"]
    assert [v["content"] for v in versions] == ["release notes: a list", "release notes: prose"]  # type: ignore[index]
    assert versions[1]["supersedes"] == rule["id"]  # type: ignore[index]
    assert history["current"] == [versions[1]["id"]]  # type: ignore[index]

    status, _, body = page.request("POST", "/api/rule/forget", body={"id": versions[1]["id"]})  # type: ignore[index]
    assert status == 200
    assert json.loads(body)["stdout"].startswith(f"forgot {versions[1]['id']}")  # type: ignore[index]
    assert "release notes" not in page.mentectl("rule", "list")
    # Unknown ids: the daemon's refusal, as mentectl says it.
    status, _, body = page.request("POST", "/api/rule/forget", body={"id": "zzzzzzzz"})
    assert status == 422
    assert json.loads(body)["stderr"].startswith("mentectl: mented refused: ")


def fire(
    page: Page,
    command: str,
    session: str,
    cwd: str = "/tmp",
    *,
    test: bool = False,
) -> None:
    event = pretooluse_event(
        command, cwd=cwd, session=session, tool_use_id=f"toolu_{secrets.token_hex(4)}"
    )
    with page.daemon.client() as client:
        client.hook("claude-code", event, test=test)


def test_activity_is_grouped_by_session_and_filtered(page: Page) -> None:
    page.mentectl("rule", "add", "git-commit", "commit messages: one line")
    fire(page, "git commit -m 'fix: a'", "session-a", cwd="/tmp/project-a")
    fire(page, "git commit -m 'fix: b'", "session-b", cwd="/tmp/project-b")
    fire(page, "git commit -m 'fix: c'", "session-a", cwd="/tmp/project-a")
    fire(page, "git commit -m 'fix: d'", "doctor-sample", test=True)  # not the user's

    found = page.json("/api/log")
    sessions = {group["session"]: group for group in found["sessions"]}  # type: ignore[attr-defined]
    assert "doctor-sample" not in sessions
    assert [fire["command"] for fire in sessions["session-a"]["fires"]] == [
        "git commit -m 'fix: c'",
        "git commit -m 'fix: a'",
    ]
    first = sessions["session-a"]["fires"][-1]
    assert first["delivered"] == "stopped once"  # the first commit of a session
    assert first["why"]
    assert sessions["session-a"]["fires"][0]["delivered"] == "pointer"

    only = page.json("/api/log?session=session-b")
    assert [group["session"] for group in only["sessions"]] == ["session-b"]  # type: ignore[attr-defined]
    here = page.json("/api/log?project=/tmp/project-a")
    assert {fire["cwd"] for fire in here["fires"]} == {"/tmp/project-a"}  # type: ignore[attr-defined]
    assert not page.json("/api/log?agent=codex")["fires"]
    assert not page.json("/api/log?action=git-push")["fires"]
    assert len(page.json("/api/log?action=git-commit")["fires"]) >= 3  # type: ignore[arg-type]


def test_kept_is_the_report_per_day(page: Page) -> None:
    page.mentectl("rule", "add", "pr-create", "PR titles: short", "--check", "title max 20")
    for number in range(2):
        fire(
            page,
            f"gh pr create --title 'a title that is long, {number}' --body x",
            f"kept-{number}",
        )
    report = json.loads(page.mentectl("report", "--json"))
    found = page.json("/api/kept?days=3")
    assert found["days"] == 3
    by_id = {rule["id"]: rule for rule in found["rules"]}  # type: ignore[attr-defined]
    for row in report["rules"]:
        days = by_id[row["key"]]["days"]
        assert len(days) == 3
        assert [day["start"] for day in days] == sorted(day["start"] for day in days)
        # Everything happened today: the last day holds the report's counts.
        for name in ("handed", "checked", "passed_first", "stopped", "let_through"):
            assert days[-1][name] == row[name]
            assert days[0][name] == days[1][name] == 0
    assert any(row["stopped"] for row in report["rules"])


def test_health_is_what_doctor_checks(page: Page) -> None:
    doctor = json.loads(page.daemon.mentectl("doctor", "--json", check=False).stdout)
    found = page.json("/api/health")
    shown = [(c["link"], c["state"]) for g in found["groups"] for c in g["checks"]]  # type: ignore[attr-defined]
    assert sorted(shown) == sorted((c["link"], c["state"]) for c in doctor["checks"])
    names = [group["name"] for group in found["groups"]]  # type: ignore[attr-defined]
    assert names[0] == "mented"
    assert "claude-code" in names  # by agent
    assert found["ok"] is doctor["ok"]


# ------------------------------------------------------------------ the command


def test_without_the_extra_mentectl_ui_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    from mented_client.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "starlette" else real(name, *a),
    )
    assert main(["ui"]) == 1
    assert "`mentectl ui` needs starlette, which is not installed: pip install 'mented[ui]'" in (
        capsys.readouterr().err
    )


def test_a_port_in_use_is_refused_with_what_to_do() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(CommandError, match=f"cannot listen on 127.0.0.1:{port}: .*--port"):
            ui_app.listen(port)


def test_it_stops_once_the_page_has_been_closed_a_while() -> None:
    stopped = threading.Event()
    listening = ui_app.listen(0)
    port = listening.getsockname()[1]
    app = ui_app.make_app(None, token="t", port=port, idle_s=0.05, on_idle=stopped.set)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]})
    thread.start()
    try:
        assert stopped.wait(timeout=60)
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def test_an_open_event_stream_keeps_the_page_alive() -> None:
    activity = ui_app.Activity()
    activity.last -= 3600
    activity.streams = 1
    assert activity.idle_for() == 0.0
    activity.streams = 0
    assert activity.idle_for() >= 3600


def open_stream(page: Page) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    connection = http.client.HTTPConnection("127.0.0.1", page.port, timeout=60)
    connection.request("GET", "/api/events", headers={"Host": page.host, "Cookie": page.cookie})
    return connection, connection.getresponse()


def next_data(reply: http.client.HTTPResponse) -> dict[str, object]:
    """The next `data:` of the stream that is no greeting."""
    event = ""
    while True:
        line = reply.readline().decode()
        assert line, "the stream ended"
        if line.startswith("event: "):
            event = line.removeprefix("event: ").strip()
        elif line.startswith("data: ") and event != "hello":
            found: dict[str, object] = json.loads(line.removeprefix("data: "))
            return found
        elif line == "\n":
            event = ""


def test_the_event_stream_carries_a_fire_as_it_happens(page: Page) -> None:
    page.mentectl("rule", "add", "git-merge", "merges: no fast-forward")
    connection, reply = open_stream(page)
    try:
        assert reply.status == 200
        assert reply.getheader("content-type", "").startswith("text/event-stream")
        assert reply.readline() == b"retry: 2000\n"
        assert reply.readline() == b"\n"
        assert reply.readline() == b"event: hello\n"  # subscribed: what follows is live
        reply.readline()
        fire(page, "git merge --ff feature", "stream-session")
        event = next_data(reply)
        while event["kind"] != "fire":  # a rule event may come first
            event = next_data(reply)
        assert event["session"] == "stream-session"
        assert event["actions"] == ["git-merge"]
        assert event["delivered"] == "stopped once"
    finally:
        connection.close()


def test_a_few_pages_at_most_hold_the_event_stream(page: Page) -> None:
    deadline = time.monotonic() + 60
    while page.activity.streams:  # the last test's stream, until the server saw it close
        assert time.monotonic() < deadline
        time.sleep(0.01)
    opened = [open_stream(page) for _ in range(ui_app.MAX_STREAMS)]
    try:
        for _, reply in opened:
            assert reply.status == 200
            assert reply.readline() == b"retry: 2000\n"
        status, _, body = page.request("GET", "/api/events")
        assert status == 429
        assert b"too many pages open" in body
    finally:
        for connection, _ in opened:
            connection.close()

    # Each closed page is noticed: its stream ends, and so does its daemon subscription.
    def pumps() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "mented-ui-events"]

    while page.activity.streams or pumps():
        assert time.monotonic() < deadline + 60
        time.sleep(0.01)


def test_open_keeps_the_token_out_of_the_browsers_command_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Any local user reads a process's arguments (`ps`): the browser gets a private file.
    import webbrowser

    opened: list[str] = []
    done = threading.Event()

    def record(url: str) -> bool:
        opened.append(url)
        done.set()
        return True

    monkeypatch.setattr(webbrowser, "open", record)
    address = "http://127.0.0.1:8765/?token=the-secret"
    folder = ui_app._open_in_browser(address)
    try:
        assert done.wait(timeout=60)
        (url,) = opened
        assert "the-secret" not in url
        page = Path(url.removeprefix("file://"))
        assert page.parent == folder
        assert folder.stat().st_mode & 0o777 == 0o700
        assert page.stat().st_mode & 0o777 == 0o600
        assert f'url={address}"' in page.read_text()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_each_rule_says_whether_it_is_yours_a_teams_or_synced(page: Page) -> None:
    project = page.daemon.root / "team-project"
    (project / ".git").mkdir(parents=True)
    added = page.daemon.mentectl("rule", "add", "--team", "git-tag", "tags: vX.Y.Z", cwd=project)
    assert "added a rule for git-tag" in added.stdout

    found = page.json(f"/api/rules?cwd={project}")
    assert found["cwd"] == str(project)
    assert "1 project rule in" in str(found["untrusted"])  # mentectl's own note
    assert "mentectl trust" in str(found["untrusted"])
    page.mentectl("trust", str(project))
    found = page.json(f"/api/rules?cwd={project}")
    assert found["untrusted"] is None
    (tags,) = [group for group in found["actions"] if group["action"] == "git-tag"]  # type: ignore[attr-defined]
    team = [rule for rule in tags["rules"] if rule["content"] == "tags: vX.Y.Z"]
    assert [rule["from"] for rule in team] == ["team"]
    # Without a directory, every project's own rules: not a project's committed ones.
    everywhere = page.json("/api/rules")["actions"]
    assert all(rule["from"] == "yours" for g in everywhere for rule in g["rules"])  # type: ignore[attr-defined]

    # A rule made on another machine, brought by sync: "synced" (the page's daemon's
    # own index of what sync imported); superseded here, the new version is yours.
    if shutil.which("git") is None:
        pytest.skip("the synced origin needs git")
    remote = page.daemon.root / "rules.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(remote)], check=True)
    desk = Machine(page.daemon.root / "desk", remote)
    try:
        made = desk.store.store("pushes: never on Fridays", tags=["trigger:git-push"])
        desk.sync.sync(desk.store)
    finally:
        desk.store.close()
    page.mentectl("rule", "add", "git-push", "pushes: with a green build")
    page.mentectl("sync", "init", str(remote))
    by_text = {
        rule["content"]: rule
        for group in page.json("/api/rules")["actions"]  # type: ignore[attr-defined]
        for rule in group["rules"]
    }
    assert by_text["pushes: never on Fridays"]["from"] == "synced"
    assert by_text["pushes: never on Fridays"]["fork"] is False
    assert by_text["pushes: with a green build"]["from"] == "yours"
    assert {rule["from"] for text, rule in by_text.items() if text != made.content} == {"yours"}
    status, _, body = page.request(
        "POST", "/api/rule/supersede", body={"id": made.id, "text": "pushes: not on Fridays"}
    )
    assert status == 200, body
    history = page.json(f"/api/history?id={made.id}")["versions"]
    assert [(v["content"], v["from"]) for v in history] == [  # type: ignore[attr-defined]
        ("pushes: never on Fridays", "synced"),
        ("pushes: not on Fridays", "yours"),
    ]
