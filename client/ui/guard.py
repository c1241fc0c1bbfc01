"""The page's safety on a shared machine: one ASGI middleware in front of every request.

Any local user can connect to 127.0.0.1, and any web page the user opens can make
the browser send requests there. So, in this order:

1. `Host` must be this server's own `127.0.0.1:PORT`: a page on another name that
   resolves to 127.0.0.1 (DNS rebinding) is refused, token or not (403).
2. The secret token: given once in the printed address (`?token=...`), it is put in
   an HttpOnly SameSite=Strict cookie and the browser is sent to the same address
   without it (303), so that it leaves the address bar and the history. Every
   other request needs the cookie (else 401). The token is new each run.
3. A request that changes something is a POST (anything else but GET and HEAD is
   refused, 405) with `Origin` this server's own (a cross-site form or fetch sends
   its own, or none: 403) and a JSON body (a form cannot send one: 415). GET
   requests change nothing (their routes only read).
4. Every answer, refusals too, carries a strict Content-Security-Policy (scripts,
   styles and everything else from this server only, no inline script, no frames),
   `nosniff`, `no-referrer` and `no-store`.

Cookies are not kept apart by port: a page another local user serves on another
port of 127.0.0.1 gets this cookie if the browser opens it. The cookie's name has
the port in it (two `mentectl ui` do not take each other's) and its token dies
with this server (docs/security.md).
"""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode

from starlette.requests import cookie_parser

if TYPE_CHECKING:
    from collections.abc import Callable

    from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
)
TOKEN_PARAMETER = "token"  # noqa: S105 - the name of the address's parameter
READ_METHODS = frozenset({"GET", "HEAD"})


class Guard:
    """Wraps the app: refuses what does not come from this user's page (see the module)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str,
        port: int,
        on_request: Callable[[], None] | None = None,
    ) -> None:
        self.app = app
        self.token = token.encode()
        self.host = f"127.0.0.1:{port}"
        self.origin = f"http://{self.host}"
        self.cookie = f"mented_ui_{port}"
        self.on_request = on_request

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # no websockets here
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
            return
        headers = {name.decode("latin-1"): value for name, value in scope["headers"]}
        method = scope["method"]
        host = headers.get("host", b"").decode("latin-1")
        if host != self.host:
            await _refuse(
                send, 403, f"refused: this page is served as {self.host} only, not {host!r}"
            )
            return
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = [value for name, value in query if name == TOKEN_PARAMETER]
        if given:
            if method not in READ_METHODS or not self._is_token(given[-1].encode()):
                await _refuse(
                    send, 401, "refused: wrong token; open the address `mentectl ui` printed"
                )
                return
            await self._keep_token(scope, query, send)
            return
        if not self._has_cookie(headers.get("cookie", b"")):
            await _refuse(
                send,
                401,
                "refused: no token; open the address `mentectl ui` printed (with its token)",
            )
            return
        if method not in READ_METHODS:
            refusal = self._write_refusal(method, headers)
            if refusal is not None:
                await _refuse(send, *refusal)
                return
        if self.on_request is not None:
            self.on_request()
        await self.app(scope, receive, _with_headers(send))

    def _is_token(self, value: bytes) -> bool:
        return hmac.compare_digest(value, self.token)

    def _has_cookie(self, header: bytes) -> bool:
        cookies = cookie_parser(header.decode("latin-1"))
        value = cookies.get(self.cookie)
        return value is not None and self._is_token(value.encode("latin-1"))

    def _write_refusal(self, method: str, headers: dict[str, bytes]) -> tuple[int, str] | None:
        """Why a request that would change something is refused (None: it may go on)."""
        if method != "POST":
            return 405, f"refused: {method} changes nothing here; changes are POST requests"
        origin = headers.get("origin", b"").decode("latin-1")
        if origin != self.origin:
            return 403, f"refused: a change must come from {self.origin}, not {origin or 'nowhere'}"
        media = headers.get("content-type", b"").split(b";")[0].strip().lower()
        if media != b"application/json":
            return 415, "refused: a change is sent as application/json"
        return None

    async def _keep_token(self, scope: Scope, query: list[tuple[str, str]], send: Send) -> None:
        """The token in a cookie, and the same address without it (out of the address bar)."""
        rest = urlencode([(name, value) for name, value in query if name != TOKEN_PARAMETER])
        # One leading slash: `//host/...` would send the browser to another site.
        location = "/" + scope.get("path", "/").lstrip("/") + (f"?{rest}" if rest else "")
        cookie = (
            f"{self.cookie}={self.token.decode()}; Path=/; HttpOnly; SameSite=Strict"
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", location.encode()),
                    (b"set-cookie", cookie),
                    (b"content-length", b"0"),
                    *SECURITY_HEADERS,
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})


def _with_headers(send: Send) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            names = {name.lower() for name, _ in message.get("headers", [])}
            extra = [header for header in SECURITY_HEADERS if header[0] not in names]
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return sending


async def _refuse(send: Send, status: int, why: str) -> None:
    body = (why + "\n").encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
