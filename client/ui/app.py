"""The page's server: a Starlette app (`make_app`) behind the guard, run by `serve`.

Reads are GET requests answered from the daemon (`data`); the rule verbs are POST
requests that run `mentectl rule ...`; `/api/events` is the daemon's event stream
as server-sent events, one daemon subscription per open page (a few at most).

`serve` listens on 127.0.0.1 only, on a free port unless one is given, prints the
address with its token, and stops with Ctrl-C, or once no page has asked anything
or held the event stream for `idle_s` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import json
import os
import secrets
import shutil
import socket as sockets
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from mented_client.connection import DaemonError, NotRunningError, ProtocolError
from mented_client.errors import CommandError
from mented_client.ui import data
from mented_client.ui.guard import Guard

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from starlette.requests import Request
    from starlette.types import ASGIApp

STATIC = {  # the page's files: name, media type
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
MAX_STREAMS = 4  # open pages' event streams: each holds a daemon connection and a thread
KEEPALIVE_S = 15.0  # a comment on a quiet stream, so a closed page is noticed
MAX_BODY = 256 * 1024  # a rule is at most 64 KiB (mented.memory): room for its JSON


@dataclass
class Activity:
    """When the page last asked something, and how many event streams are open."""

    last: float = field(default_factory=time.monotonic)
    streams: int = 0

    def seen(self) -> None:
        self.last = time.monotonic()

    def idle_for(self) -> float:
        return 0.0 if self.streams else time.monotonic() - self.last


def _static(name: str) -> bytes:
    return resources.files("mented_client.ui").joinpath("static", name).read_bytes()


def make_app(
    socket: str | Path | None,
    *,
    token: str,
    port: int,
    idle_s: float | None = None,
    on_idle: Callable[[], None] | None = None,
) -> ASGIApp:
    """The page's app for the daemon on `socket`, guarded by `token` on 127.0.0.1:`port`.

    With `idle_s` and `on_idle`, `on_idle` is called once nothing was asked (and no
    event stream was open) for `idle_s` seconds.
    """
    activity = Activity()

    async def page(request: Request) -> Response:
        name = request.path_params.get("name", "index.html")
        if name not in STATIC:
            return Response("not found\n", status_code=404, media_type="text/plain")
        return Response(_static(name), media_type=STATIC[name])

    def reading(fetch: Callable[[Request], dict[str, Any]]) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            try:
                found = await run_in_threadpool(fetch, request)
            except NotRunningError as exc:
                return JSONResponse({"error": str(exc), "code": "not_running"}, status_code=503)
            except DaemonError as exc:
                return JSONResponse({"error": exc.message, "code": exc.code}, status_code=502)
            except ProtocolError as exc:
                return JSONResponse({"error": str(exc), "code": "bad_reply"}, status_code=502)
            return JSONResponse(found)

        return endpoint

    def writing(words: Callable[[dict[str, Any]], tuple[list[str], str]]) -> Callable[..., Any]:
        async def endpoint(request: Request) -> Response:
            body = await _bounded_body(request)
            if body is None:
                return JSONResponse({"error": "the request is too large"}, status_code=413)
            try:
                form = json.loads(body)
            except (ValueError, RecursionError):  # RecursionError: nested past the stack
                return JSONResponse({"error": "the request is not JSON"}, status_code=400)
            if not isinstance(form, dict):
                return JSONResponse({"error": "the request is not a JSON object"}, status_code=400)
            argv, stdin_text = words(form)
            said = await run_in_threadpool(data.run_mentectl, socket, argv, stdin_text)
            return JSONResponse(said, status_code=200 if said["status"] == 0 else 422)

        return endpoint

    def log(request: Request) -> dict[str, Any]:
        params = request.query_params
        filters = {key: params[key] for key in data.LOG_FILTERS if params.get(key)}
        return data.log(socket, _number(params.get("n"), 100), filters)

    def kept(request: Request) -> dict[str, Any]:
        params = request.query_params
        return data.kept(socket, _number(params.get("days"), 14), params.get("agent") or None)

    async def events(_request: Request) -> Response:
        if activity.streams >= MAX_STREAMS:
            return JSONResponse({"error": "too many pages open"}, status_code=429)
        return StreamingResponse(_event_stream(socket, activity), media_type="text/event-stream")

    routes = [
        Route("/", page, methods=["GET"]),
        Route("/static/{name}", page, methods=["GET"]),
        Route(
            "/api/rules",
            reading(lambda request: data.rules(socket, request.query_params.get("cwd") or None)),
            methods=["GET"],
        ),
        Route(
            "/api/history",
            reading(lambda request: data.history(socket, request.query_params.get("id", ""))),
            methods=["GET"],
        ),
        Route("/api/actions", reading(lambda _: data.actions(socket)), methods=["GET"]),
        Route("/api/log", reading(log), methods=["GET"]),
        Route("/api/kept", reading(kept), methods=["GET"]),
        Route("/api/health", reading(lambda _: data.health(socket)), methods=["GET"]),
        Route("/api/events", events, methods=["GET"]),
        Route("/api/rule/add", writing(data.add_words), methods=["POST"]),
        Route("/api/rule/supersede", writing(data.supersede_words), methods=["POST"]),
        Route(
            "/api/rule/forget",
            writing(lambda form: (data.forget_words(form), "")),
            methods=["POST"],
        ),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        watch = None
        if idle_s is not None and on_idle is not None:
            watch = asyncio.get_running_loop().create_task(_watch_idle(activity, idle_s, on_idle))
        try:
            yield
        finally:
            if watch is not None:
                watch.cancel()

    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.activity = activity  # for the tests: how many streams are open
    return Guard(app, token=token, port=port, on_request=activity.seen)


def _number(text: str | None, default: int) -> int:
    try:
        return int(text) if text else default
    except ValueError:
        return default


async def _watch_idle(activity: Activity, idle_s: float, on_idle: Callable[[], None]) -> None:
    # A poll, not an event: idleness is the absence of one.
    while activity.idle_for() < idle_s:  # noqa: ASYNC110
        await asyncio.sleep(min(5.0, idle_s / 4))
    on_idle()


async def _event_stream(socket: str | Path | None, activity: Activity) -> AsyncIterator[str]:
    """The daemon's events as server-sent events; ends when the page goes or the daemon does."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    gone, reader_gone = os.pipe()

    def put(kind: str, value: object) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: the server stops
            loop.call_soon_threadsafe(queue.put_nowait, (kind, value))

    def pump() -> None:
        try:
            for event in data.events(socket, reader_gone, lambda: put("hello", None)):
                put("event", event)
            put("end", "mented closed the connection (it stopped)")
        except BrokenPipeError:
            pass  # the page went away: `gone` was closed
        except (ConnectionError, DaemonError) as exc:
            put("end", str(exc))
        finally:
            os.close(reader_gone)

    activity.streams += 1
    try:
        threading.Thread(target=pump, name="mented-ui-events", daemon=True).start()
        yield "retry: 2000\n\n"
        while True:
            try:
                kind, value = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
            except TimeoutError:
                yield ": still here\n\n"
                continue
            if kind == "hello":  # subscribed: from here on, every event comes
                yield f"event: hello\ndata: {json.dumps({'time': time.time()})}\n\n"
                continue
            if kind == "end":
                yield f"event: gone\ndata: {json.dumps({'error': value})}\n\n"
                return
            yield f"data: {json.dumps(value)}\n\n"
    finally:
        activity.streams -= 1
        activity.seen()  # the page closed now: the idle time counts from here
        os.close(gone)


def listen(port: int) -> sockets.socket:
    """A socket listening on 127.0.0.1:`port` (0: a free port).

    Raises:
        CommandError: the port is taken or may not be used.
    """
    sock = sockets.socket(sockets.AF_INET, sockets.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        raise CommandError(
            f"cannot listen on 127.0.0.1:{port}: {exc.strerror}; choose another port with "
            "--port, or leave it out for a free one",
            status=1,
        ) from exc
    sock.listen(64)
    sock.set_inheritable(True)
    return sock


def serve(
    socket: str | None,
    *,
    port: int = 0,
    open_browser: bool = False,
    idle_s: float = 600.0,
    as_json: bool = False,
) -> int:
    """Serve the page until Ctrl-C or `idle_s` seconds without it; the exit status."""
    import uvicorn  # noqa: PLC0415 - the server only

    listening = listen(port)
    port = listening.getsockname()[1]
    token = secrets.token_urlsafe(32)
    server: uvicorn.Server | None = None

    def stop() -> None:
        print(f"mentectl: no page was open for {idle_s / 60:g} minutes: stopping", file=sys.stderr)
        if server is not None:
            server.should_exit = True

    app = make_app(socket, token=token, port=port, idle_s=idle_s, on_idle=stop)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=2,
        ws="none",
    )
    server = uvicorn.Server(config)
    address = f"http://127.0.0.1:{port}/?token={token}"
    if as_json:  # one line, for a script that opens it
        print(json.dumps({"url": address, "port": port, "idle_s": idle_s}), flush=True)
    else:
        print(f"mented's page: {address}", flush=True)
        print(
            f"(keep the address to yourself: it opens your rules; Ctrl-C stops it, and so "
            f"does closing the page for {idle_s / 60:g} minutes)",
            flush=True,
        )
    opener = _open_in_browser(address) if open_browser else None
    try:
        server.run(sockets=[listening])
    finally:
        listening.close()
        if opener is not None:
            shutil.rmtree(opener, ignore_errors=True)
    return 0


def _open_in_browser(address: str) -> Path:
    """Open `address` in the user's browser without putting the token in its command line.

    Every local user can read a process's arguments (`ps`): the browser is given a file
    of this user's (0600, in a private folder) that sends it on to the address.
    Returns the folder, removed when the server stops.
    """
    import webbrowser  # noqa: PLC0415 - --open only

    folder = Path(tempfile.mkdtemp(prefix="mented-ui-"))  # 0700
    page = folder / "open.html"
    fd = os.open(page, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(
            '<!doctype html><meta charset="utf-8">'
            f'<meta http-equiv="refresh" content="0; url={html.escape(address)}">'
            f'<a href="{html.escape(address)}">mented</a>\n'
        )
    threading.Thread(target=webbrowser.open, args=(page.as_uri(),), daemon=True).start()
    return folder


async def _bounded_body(request: Request) -> bytes | None:
    """The request's body, read as it comes; None past `MAX_BODY` (not held whole)."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            return None
    return bytes(body)
