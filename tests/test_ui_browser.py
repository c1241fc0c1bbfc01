"""`mentectl ui` in a real browser: Debian's chromium, headless, over the DevTools protocol.

One daemon, one `mentectl ui` process and one browser for the module: the page is
opened at the address `mentectl ui` printed, as a user would. Every wait polls the
page with a generous deadline (no fixed sleeps). A screenshot of each page is saved
under $TMPDIR/mented-ui-screenshots/ (the path is printed; MENTED_UI_SCREENSHOTS
chooses another folder: docs/ui/ to refresh the docs' pictures).

Skipped, with the reason, where chromium is not installed (`.ci/run` installs it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mented.agents.pretooluse import pretooluse_event
from tests.cdp import Browser, find_chromium
from tests.conftest import PYTHON, DaemonProcess

pytest.importorskip("starlette", reason="the page's server is the optional extra mented[ui]")
pytest.importorskip("websockets", reason="the DevTools client needs websockets (the test extra)")
CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)"
)

SHIM = Path(__file__).resolve().parent.parent / "client" / "shim.py"
HOSTILE = '<img src=x onerror="window.pwned = 1"><script>window.pwned = 2</script>'
# A right-to-left override makes "txt.exe" read "exe.txt"; an escape character.
REORDERED = "name the file \u202eexe.txt and ring \x1b[5m"


@dataclass
class Session:
    daemon: DaemonProcess
    browser: Browser
    address: str
    shots: Path

    def mentectl(self, *args: str) -> str:
        return self.daemon.mentectl(*args).stdout

    def open(self, page: str) -> None:
        self.browser.evaluate(f"location.hash = {json.dumps(page)}")

    def shot(self, name: str) -> None:
        path = self.browser.screenshot(self.shots / f"{name}.png")
        print(f"screenshot: {path}")

    def js(self, expression: str) -> object:
        return self.browser.evaluate(expression)

    def wait(self, expression: str, timeout: float = 30.0) -> object:
        return self.browser.wait_for(expression, timeout)


def screenshots() -> Path:
    chosen = os.environ.get("MENTED_UI_SCREENSHOTS")
    folder = Path(chosen) if chosen else Path(tempfile.gettempdir()) / "mented-ui-screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    assert CHROMIUM is not None
    root = Path(tempfile.mkdtemp(prefix="md-uib-", dir="/tmp"))
    daemon = DaemonProcess(root)
    browser = Browser(CHROMIUM)
    ui: subprocess.Popen[str] | None = None
    try:
        daemon.start()
        daemon.mentectl("rule", "add", "git-commit", "commit messages: a single line")
        daemon.mentectl(
            "rule", "add", "git-commit", "commit subjects: at most 50 characters",
            "--check", "subject max 50",
        )  # fmt: skip
        daemon.mentectl("rule", "add", "git-push", "never push to main directly")
        daemon.mentectl("rule", "add", "pr-create", HOSTILE)
        daemon.mentectl("rule", "add", "pr-create", REORDERED)
        ui = subprocess.Popen(
            [PYTHON, "-m", "mented_client.cli", "ui"],
            env=daemon.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert ui.stdout is not None
        first = ui.stdout.readline()
        assert first.startswith("mented's page: http://127.0.0.1:"), first
        address = first.split(": ", 1)[1].strip()
        browser.start()
        browser.navigate(address)
        browser.wait_for("document.querySelectorAll('section.action').length > 0", 60)
        yield Session(daemon, browser, address, screenshots())
    finally:
        browser.close()
        if ui is not None:
            ui.terminate()
            ui.wait(timeout=30)
        if daemon.proc is not None:
            daemon.stop()
        shutil.rmtree(root, ignore_errors=True)


def card_of(text: str) -> str:
    """A JS expression: the rule card whose text holds `text` (null when none)."""
    return (
        "([...document.querySelectorAll('article.rule')].find((card) => "
        f"card.querySelector('.content').textContent === {json.dumps(text)}) || null)"
    )


def test_the_rules_page_groups_adds_and_supersedes_in_a_browser(session: Session) -> None:
    js, wait = session.js, session.wait
    # The token went into the cookie, out of the address bar, out of the page's reach.
    assert js("location.href") == session.address.split("?")[0]
    assert js("document.cookie") == ""
    # The real daemon's rules, grouped by action.
    groups = js(
        "Object.fromEntries([...document.querySelectorAll('section.action')].map((s) => "
        "[s.dataset.action, s.querySelectorAll('article.rule').length]))"
    )
    assert groups == {"git-commit": 2, "git-push": 1, "pr-create": 2}
    assert js(f"{card_of('commit subjects: at most 50 characters')}.textContent").endswith(
        "check: subject max 50HistorySupersedeForget"
    )
    # Rule text with HTML in it is text: no element made of it, no script run.
    assert js(f"{card_of(HOSTILE)} !== null")
    assert js("document.querySelectorAll('main img, main script').length") == 0
    assert js("window.pwned === undefined")
    # Characters that reorder or hide text are shown as escapes, as mentectl shows them.
    escaped = r"name the file \u202eexe.txt and ring \x1b[5m"
    assert js(f"{card_of(escaped)} !== null")

    # A rule added in the page, with mentectl's checks and words.
    js("document.getElementById('add-action').value = 'git-push'")
    js("document.getElementById('add-text').value = 'push: only with a green build'")
    js("document.getElementById('add-submit').click()")
    said = wait("(document.querySelector('#add-said .said') || {}).textContent")
    assert isinstance(said, str)
    assert said.startswith("added rule [")
    assert "push: only with a green build" in session.mentectl(
        "rule", "list", "--action", "git-push"
    )
    wait(f"{card_of('push: only with a green build')} !== null")
    # And a mistake, refused as mentectl refuses it.
    js("document.getElementById('add-text').value = '   '")
    js("document.getElementById('add-submit').click()")
    refused = wait("(document.querySelector('#add-said .said.error') || {}).textContent")
    assert refused == "mentectl: the rule is empty" or "empty" in str(refused)

    # Superseded in the page: its history is drawn as a line of two versions.
    old = "never push to main directly"
    js(f"{card_of(old)}.querySelector('.supersede-button').click()")
    js(f"{card_of(old)}.querySelector('.supersede-text').value = 'never push to main: open a PR'")
    js(f"{card_of(old)}.querySelector('form').requestSubmit()")
    new = "never push to main: open a PR"
    wait(f"{card_of(new)} !== null && {card_of(old)} === null")
    history = session.mentectl("rule", "list", "--action", "git-push", "--all")
    assert old in history
    assert new in history
    js(f"{card_of(new)}.querySelector('.history-button').click()")
    wait(f"{card_of(new)}.querySelectorAll('.history g.version').length === 2")
    versions = js(
        f"[...{card_of(new)}.querySelectorAll('.history g.version')].map((g) => "
        "[g.getAttribute('class'), g.querySelector('text').textContent])"
    )
    assert isinstance(versions, list)
    assert versions[0][0] == "version"
    assert versions[1][0] == "version live"
    assert versions[1][1].endswith(" current")
    assert js(f"{card_of(new)}.querySelectorAll('.history line.replaces').length") == 1
    js(f"{card_of(new)}.scrollIntoView()")
    session.shot("rules")


def version(
    ident: str, supersedes: str | None, *, merges: tuple[str, ...] = (), live: bool = False
):
    return {
        "id": ident * 26,
        "handle": ident * 8,
        "content": f"version {ident}",
        "created_at": 1_800_000_000,
        "supersedes": None if supersedes is None else supersedes * 26,
        "merges": [merged * 26 for merged in merges],
        "live": live,
        "forgotten_links": [],
    }


def test_a_fork_its_settling_and_a_synced_tip_are_drawn(session: Session) -> None:
    # Two machines superseded version a apart (b and c); d, superseding b, settles both.
    settled = [version("a", None), version("b", "a"), version("c", "a")]
    settled.append(version("d", "b", merges=("c",), live=True))
    draw = (
        "((found) => { const node = historyLine(found); document.body.append(node); "
        "const shown = { lanes: new Set([...node.querySelectorAll('circle')]"
        ".map((c) => c.getAttribute('cy'))).size, "
        "replaces: node.querySelectorAll('line.replaces').length, "
        "merges: node.querySelectorAll('line.merge').length, "
        "notes: [...node.querySelectorAll('.note')].map((p) => p.textContent), "
        "synced: [...node.querySelectorAll('g.version.synced')].map((g) => g.dataset.handle) }; "
        "node.remove(); return shown; })"
    )
    settled[2]["from"] = "synced"  # c came from the other machine
    found = {"versions": settled, "current": ["d" * 26], "fork": False}
    shown = session.js(f"{draw}({json.dumps(found)})")
    assert shown == {"lanes": 2, "replaces": 3, "merges": 1, "notes": [], "synced": ["c" * 8]}
    # Before d: two current versions, a fork, said so under the line.
    forked = {"versions": settled[:3], "current": ["b" * 26, "c" * 26], "fork": True}
    shown = session.js(f"{draw}({json.dumps(forked)})")
    assert isinstance(shown, dict)
    assert shown["lanes"] == 2
    assert shown["notes"][0].startswith("2 current versions: a fork")

    # On the Rules page, a tip of that fork brought by sync says both.
    tip = version("c", "a", live=True) | {
        "from": "synced", "fork": True, "scope": "everywhere", "checks": [],
    }  # fmt: skip
    badges = session.js(
        f"[...ruleCard({json.dumps(tip)}, 'git-commit').querySelectorAll('.badge')]"
        ".map((badge) => [badge.className, badge.textContent])"
    )
    assert badges == [["badge synced", "synced from another machine"], ["badge fork", "fork"]]
    mine = session.js(
        "[...document.querySelectorAll('article.rule .badge')].map((b) => b.textContent)"
    )  # the page's own rules, made with mentectl on this machine
    assert isinstance(mine, list)
    assert mine
    assert set(mine) == {"yours"}


def test_activity_kept_and_health_in_a_browser(session: Session) -> None:
    js, wait = session.js, session.wait
    session.open("#activity")
    wait("document.getElementById('live-state').textContent === 'live'")
    wait("document.getElementById('sessions') !== null")
    rows = "document.querySelectorAll('#live tbody tr.fire').length"
    before = js(rows)
    event = pretooluse_event(
        "git commit -m 'feat: a subject that is rather longer than fifty characters, by far'",
        cwd=str(session.daemon.root),
        session="browser-session",
        tool_use_id="toolu_browser",
    )
    started = time.monotonic()
    fired = subprocess.run(
        [PYTHON, "-I", "-S", str(SHIM), "claude-code"],
        input=event,
        env={"MENTED_SOCKET": str(session.daemon.socket), "MENTED_HOOK_BUDGET_MS": "3000"},
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert b"commit subjects" in fired.stdout  # the rules reached the agent
    wait(f"{rows} > {before}", timeout=30)
    seen_after = time.monotonic() - started
    print(f"the fire was on Activity {seen_after * 1000:.0f} ms after the shim started")
    live = js("document.querySelector('#live tbody tr.fire').textContent")
    assert isinstance(live, str)
    assert "claude-code" in live
    assert "git-commit" in live
    assert "stopped once" in live
    group = "document.querySelector('section.session[data-session=\"browser-session\"]')"
    wait(f"{group} !== null")
    why = js(f"{group}.querySelector('tbody td:nth-child(5)').textContent")
    assert why == "a check of its rules failed"  # why, in the daemon's words
    assert js(f"{group}.querySelectorAll('tr.fire').length") == 1
    session.shot("activity")

    session.open("#kept")
    wait("document.querySelectorAll('section.chart svg rect').length > 0")
    kept = js("document.querySelector('main').textContent")
    assert "commit subjects: at most 50 characters" in str(kept)
    session.shot("kept")

    session.open("#health")
    wait("document.querySelectorAll('section.health-group tr.check').length > 0", timeout=60)
    links = js(
        "[...document.querySelectorAll('section.health-group tr.check td:nth-child(2)')]"
        ".map((cell) => cell.textContent)"
    )
    assert isinstance(links, list)
    assert {"config", "daemon"} <= set(links)
    assert js("document.getElementById('sync').textContent").startswith("sync")  # type: ignore[union-attr]
    session.shot("health")
    assert not [line for line in session.browser.console if line.startswith("exception")]
