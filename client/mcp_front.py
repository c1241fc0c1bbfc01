"""The first answers of `mentectl mcp`, given before the MCP SDK is imported.

The SDK takes seconds to import (pydantic, anyio, its types): an agent that opens
its first model request meanwhile has no mented tools, and Codex `exec` does not
wait for them. So `mentectl mcp` starts this front first, with nothing but the
standard library: it answers `initialize` and `ping` at once, and `tools/list`
as soon as it knows the action table in force (the daemon's, through
`use_table`), with the bytes the SDK would send, from `wire.json` beside the MCP
server (`python -m mented_client.mcp_server.wire` writes it; a test checks it
against the SDK). Everything else waits in order until the SDK's server is built;
then `hand_over` gives it the connection: the `initialize` it missed is replayed
to it (its answer, already given, is dropped) and every line passes through.

The shipped answers are used only with the SDK they were taken from (its
distributions' `dist-info` directories, looked up beside the `mcp` package) and
the same mented: with another, the front does not start and the SDK answers
everything, as before. Without the SDK it does not start either, so that
`mentectl mcp` says how to install it and writes nothing on the protocol channel.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:
    from collections.abc import Callable

    from mented.actions import ActionTable, TableInForce

WIRE = Path(__file__).with_name("mcp_server") / "wire.json"
ID = "@ID@"  # where an answer's id goes in `wire.json`
VERSION = "@PROTOCOL_VERSION@"  # the negotiated protocol version
KNOWN_TEXT = "@KNOWN_ACTIONS_TEXT@"  # the known actions, with what each is
KNOWN_NAMES = "@KNOWN_ACTION_NAMES@"  # their names alone
REPLAYED_ID = "mented-front-initialize"  # the id of the `initialize` replayed to the SDK
_MAX_LINE = 16 << 20  # a JSON-RPC line longer than this is the SDK's to refuse

_front: Front | None = None


def describe_actions(table: ActionTable) -> str:
    """The known actions for a tool description: `git-commit` (what it is), ..."""
    if not table.names():
        return "(none: is mented's action table installed?)"
    descriptions = table.descriptions()
    return "; ".join(
        f"{name} ({descriptions[name]})" if descriptions.get(name) else name
        for name in table.names()
    )


def startup_table(socket_path: str | Path | None) -> TableInForce:
    """The actions for the tool descriptions: the daemon's config if it answers, else ours.

    Briefly: the agent waits for the server to start, and a hung daemon must not stall it.
    """
    from mented.actions import load_table_in_force  # noqa: PLC0415 - not on the front's path
    from mented.paths import config_path  # noqa: PLC0415
    from mented_client.connection import (  # noqa: PLC0415
        Client,
        DaemonError,
        NotRunningError,
        ProtocolError,
    )
    from mented_client.scope import daemon_table  # noqa: PLC0415

    try:
        with Client(
            Path(socket_path) if socket_path else None, connect_timeout=1.0, timeout=1.0
        ) as client:
            return daemon_table(client)
    except (NotRunningError, DaemonError, ProtocolError):
        return load_table_in_force(config_path())


def json_text(text: str) -> str:
    """`text` as it appears inside a JSON string the SDK writes (UTF-8, escapes as JSON's)."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


def start() -> Front | None:
    """Start answering on stdin/stdout, if the shipped answers fit the installed SDK."""
    global _front  # noqa: PLW0603 - one front per process: it owns stdin
    wire = _load_wire()
    if wire is None:
        return None
    _front = Front(wire, sys.stdin.buffer, sys.stdout.buffer)
    _front.start()
    return _front


def active() -> Front | None:
    """The front started in this process, if any."""
    return _front


class Front:
    """Answers what it can on the connection until the SDK's server takes it over."""

    def __init__(self, wire: dict[str, Any], stdin: BinaryIO, stdout: BinaryIO) -> None:
        self._wire = wire
        self._stdin = stdin
        self._stdout = stdout
        self._lock = threading.Lock()  # guards what follows (taken before `_out_lock`)
        self._out_lock = threading.Lock()  # one line at a time on stdout
        self._waiting: list[bytes] = []  # lines for the SDK, in order
        self._tools_asked: list[Any] = []  # ids of `tools/list` waiting for the table
        self._listing: str | None = None  # the tools/list answer, once the table is known
        self._initialize: dict[str, Any] | None = None  # the request answered, to replay
        self._to_sdk: int | None = None  # the SDK's stdin, once handed over
        self._ended = False  # the client closed stdin
        self._thread = threading.Thread(target=self._read, name="mcp-front", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def use_table(self, in_force: TableInForce) -> None:
        """The action table in force is known: answer `tools/list`, now and from now on."""
        listing = (
            self._wire["tools"]
            .replace(KNOWN_TEXT, json_text(describe_actions(in_force.table)))
            .replace(KNOWN_NAMES, json_text(", ".join(in_force.table.names())))
        )
        with self._lock:
            self._listing = listing
            for request_id in self._tools_asked:
                self._write(_with_id(listing, request_id))
            self._tools_asked.clear()

    def hand_over(self, serve: Callable[[int, int], None]) -> None:
        """Run the SDK's server (`serve(stdin_fd, stdout_fd)`) on this connection until it ends."""
        to_sdk, sdk_in = os.pipe()[::-1]
        sdk_out, from_sdk = os.pipe()
        copier = threading.Thread(target=self._copy_from_sdk, args=(sdk_out,), daemon=True)
        copier.start()
        # What waited goes to the SDK from another thread: more than a pipe holds
        # would block until the SDK reads, and it reads once `serve` runs.
        threading.Thread(target=self._pass_on, args=(to_sdk,), daemon=True).start()
        try:
            serve(sdk_in, from_sdk)
        finally:
            copier.join(timeout=5)

    # ---------------------------------------------------------------- internals

    def _pass_on(self, to_sdk: int) -> None:
        """Replay `initialize` to the SDK, then what waited; from then on, every line."""
        with self._lock:
            if self._initialize is not None:
                replayed = dict(self._initialize, id=REPLAYED_ID)
                _write_all(to_sdk, json.dumps(replayed).encode() + b"\n")
            for line in self._waiting:
                _write_all(to_sdk, line)
            self._waiting.clear()
            # `tools/list` still waiting for the table: the SDK answers them.
            for request_id in self._tools_asked:
                ask = {"jsonrpc": "2.0", "id": request_id, "method": "tools/list"}
                _write_all(to_sdk, json.dumps(ask).encode() + b"\n")
            self._tools_asked.clear()
            self._to_sdk = to_sdk
            if self._ended:
                os.close(to_sdk)

    def _read(self) -> None:
        while line := self._stdin.readline(_MAX_LINE):
            with self._lock:
                if self._to_sdk is not None:
                    _write_all(self._to_sdk, line)
                    continue
                if not self._answer(line):
                    self._waiting.append(line)
        with self._lock:
            self._ended = True
            if self._to_sdk is not None:
                os.close(self._to_sdk)

    def _answer(self, line: bytes) -> bool:
        """Answer `line` here, if it is one of ours to answer; whether it was."""
        try:
            message = json.loads(line)
        except ValueError:
            return False
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return False
        request_id = message.get("id")
        if not isinstance(request_id, int | str) or isinstance(request_id, bool):
            return False
        method = message.get("method")
        if method == "initialize" and self._initialize is None:
            version = _negotiated(message.get("params"), self._wire)
            if version is None:
                return False  # params the SDK would refuse: its answer
            self._initialize = message
            self._write(_with_id(self._wire["initialize"], request_id).replace(VERSION, version))
            return True
        if self._initialize is None:
            return False  # before `initialize`, the SDK says what is wrong
        if method == "ping":
            self._write(_with_id(self._wire["ping"], request_id))
            return True
        if method == "tools/list" and not message.get("params"):
            if self._listing is None:
                self._tools_asked.append(request_id)
            else:
                self._write(_with_id(self._listing, request_id))
            return True
        return False

    def _write(self, text: str) -> None:
        with self._out_lock:
            self._stdout.write(text.encode() + b"\n")
            self._stdout.flush()

    def _copy_from_sdk(self, fd: int) -> None:
        with os.fdopen(fd, "rb") as lines:
            for line in lines:
                if _answers_replay(line):
                    continue  # `initialize` was answered already, by us
                with self._out_lock:
                    self._stdout.write(line)
                    self._stdout.flush()


def _with_id(template: str, request_id: int | str) -> str:
    return template.replace(f'"{ID}"', json.dumps(request_id, ensure_ascii=False), 1)


def _answers_replay(line: bytes) -> bool:
    if REPLAYED_ID.encode() not in line:
        return False
    try:
        message = json.loads(line)
    except ValueError:
        return False
    return isinstance(message, dict) and message.get("id") == REPLAYED_ID


def _negotiated(params: object, wire: dict[str, Any]) -> str | None:
    """The protocol version the SDK would answer `initialize` with; None for bad params."""
    if not isinstance(params, dict):
        return None
    requested = params.get("protocolVersion")
    client = params.get("clientInfo")
    if (
        not isinstance(requested, str)
        or not isinstance(params.get("capabilities"), dict)
        or not isinstance(client, dict)
        or not isinstance(client.get("name"), str)
        or not isinstance(client.get("version"), str)
    ):
        return None
    if requested in wire["handshake_versions"]:
        return requested
    latest: str = wire["latest_handshake_version"]
    return latest


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _load_wire() -> dict[str, Any] | None:
    """The shipped answers, if they were taken from the SDK installed here, for this mented."""
    from mented import __version__  # noqa: PLC0415 - mented's package: its version alone

    try:
        wire = json.loads(WIRE.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(wire, dict) or wire.get("mented") != __version__:
        return None
    import importlib.util  # noqa: PLC0415 - the interpreter has it loaded

    try:
        spec = importlib.util.find_spec("mcp")
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if len(locations) != 1:
        return None
    package = Path(locations[0])
    if not (package / "server" / "mcpserver" / "__init__.py").is_file():
        return None  # not the 2.x SDK: `mentectl mcp` says how to install it
    site = package.parent
    if not all((site / name).is_dir() for name in wire.get("sdk", ["?"])):
        return None  # another SDK than the answers were taken from
    return wire
