"""A small Chrome DevTools protocol client: Debian's chromium, headless, for the page's tests.

One browser process, one page, driven over the page's websocket (`websockets`' sync
client): navigate, evaluate JavaScript, wait for a condition (polled, with a
deadline: no fixed sleeps), take a screenshot.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

CHROMIUM_NAMES = ("chromium", "chromium-browser")


def find_chromium() -> str | None:
    return next((path for name in CHROMIUM_NAMES if (path := shutil.which(name))), None)


class BrowserError(RuntimeError):
    """The browser did not start, or a DevTools call failed."""


class Browser:
    """A headless chromium with one page (`start`, then the page's calls, then `close`)."""

    def __init__(self, executable: str) -> None:
        self.executable = executable
        self.profile = Path(tempfile.mkdtemp(prefix="mented-chromium-"))
        self.proc: subprocess.Popen[bytes] | None = None
        self.ws: Any = None
        self._closing = contextlib.ExitStack()
        self._next_id = 0
        self.console: list[str] = []

    def start(self, timeout: float = 60.0) -> None:
        from websockets.sync.client import connect

        args = [
            self.executable,
            "--headless=new",
            "--remote-debugging-port=0",
            "--remote-debugging-address=127.0.0.1",
            f"--user-data-dir={self.profile}",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-gpu",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--metrics-recording-only",
            "--mute-audio",
            "--window-size=1200,900",
            "about:blank",
        ]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # chromium refuses to run as root with its sandbox
        self.proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while not port_file.exists() or not port_file.read_text().strip():
            if self.proc.poll() is not None:
                raise BrowserError(f"chromium exited with {self.proc.returncode}")
            if time.monotonic() > deadline:
                raise BrowserError(f"chromium did not open its DevTools port in {timeout:g} s")
            time.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as reply:
            targets = json.loads(reply.read())
        page = next(target for target in targets if target["type"] == "page")
        self.ws = self._closing.enter_context(
            connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=timeout)
        )
        self.call("Page.enable")
        self.call("Runtime.enable")

    def call(self, method: str, timeout: float = 60.0, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        ident = self._next_id
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            message = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if message.get("method") == "Runtime.consoleAPICalled":
                args = message["params"].get("args", [])
                self.console.append(" ".join(str(arg.get("value", "")) for arg in args))
            if message.get("method") == "Runtime.exceptionThrown":
                details = message["params"]["exceptionDetails"]
                self.console.append(f"exception: {details.get('exception', {}).get('description')}")
            if message.get("id") == ident:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result

    def navigate(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def evaluate(self, expression: str) -> Any:
        result = self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30.0) -> Any:
        """The value of `expression` once it is truthy, polled; BrowserError after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(BrowserError):
                value = self.evaluate(expression)
                if value:
                    return value
            if time.monotonic() > deadline:
                raise BrowserError(f"not true within {timeout:g} s: {expression}")
            time.sleep(0.05)

    def screenshot(self, path: Path) -> Path:
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._closing.close()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)
