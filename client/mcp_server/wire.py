"""What the MCP front (`mented_client.mcp_front`) answers before the SDK is imported.

Taken from the SDK itself: `python -m mented_client.mcp_server.wire` runs the
real server on pipes, asks it `initialize`, `tools/list` and `ping` with marks
where the id, the protocol version and the known actions go, and writes the
answers to `wire.json` with the names of the SDK's distributions they came from.
A test takes them again and compares: they must stay byte for byte the SDK's.
"""

from __future__ import annotations

import io
import json
import os
import threading
from importlib import metadata
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from mented import __version__
from mented_client import mcp_front

# What the answers depend on: the SDK, its types, and pydantic, which writes the schemas.
DISTRIBUTIONS = ("mcp", "mcp-types", "pydantic", "pydantic-core")


def serve_on(server: MCPServer, stdin_fd: int, stdout_fd: int) -> None:
    """Run `server` on these descriptors (JSON-RPC lines) until its stdin ends; closes both."""

    async def serve() -> None:
        stdin = anyio.wrap_file(io.TextIOWrapper(os.fdopen(stdin_fd, "rb"), encoding="utf-8"))
        stdout = anyio.wrap_file(io.TextIOWrapper(os.fdopen(stdout_fd, "wb"), encoding="utf-8"))
        async with stdin, stdout, stdio_server(stdin, stdout) as (read_stream, write_stream):
            lowlevel = server._lowlevel_server  # noqa: SLF001 - as MCPServer.run_stdio_async
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())

    anyio.run(serve)


def take_answers(server: MCPServer) -> dict[str, Any]:
    """`server`'s answers to `initialize`, `tools/list` and `ping`, with the marks in."""
    to_server, server_in = os.pipe()[::-1]
    server_out, from_server = os.pipe()
    thread = threading.Thread(target=serve_on, args=(server, server_in, from_server))
    thread.start()
    latest = HANDSHAKE_PROTOCOL_VERSIONS[-1]
    asks = [
        {
            "jsonrpc": "2.0",
            "id": mcp_front.ID,
            "method": "initialize",
            "params": {
                "protocolVersion": latest,
                "capabilities": {},
                "clientInfo": {"name": "mented", "version": __version__},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": mcp_front.ID, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": mcp_front.ID, "method": "ping"},
    ]
    with os.fdopen(to_server, "wb") as sending, os.fdopen(server_out, "rb") as answers:
        for ask in asks:
            sending.write(json.dumps(ask).encode() + b"\n")
        sending.flush()
        initialize, tools, ping = (answers.readline().decode().rstrip("\n") for _ in range(3))
        sending.close()
        thread.join()
    version = f'"protocolVersion":"{latest}"'
    assert initialize.count(version) == 1, initialize
    return {
        "mented": __version__,
        "sdk": [_dist_info(name) for name in DISTRIBUTIONS],
        "handshake_versions": list(HANDSHAKE_PROTOCOL_VERSIONS),
        "latest_handshake_version": latest,
        "initialize": initialize.replace(version, f'"protocolVersion":"{mcp_front.VERSION}"'),
        "tools": tools,
        "ping": ping,
    }


def _dist_info(name: str) -> str:
    """The name of `name`'s `dist-info` directory, as installers name it."""
    dist = metadata.distribution(name)
    return f"{dist.metadata['Name'].replace('-', '_').lower()}-{dist.version}.dist-info"


def main() -> None:
    from mented_client.mcp_server import marked_server  # noqa: PLC0415 - not at import: a cycle

    answers = take_answers(marked_server())
    mcp_front.WIRE.write_text(json.dumps(answers, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {mcp_front.WIRE}")


if __name__ == "__main__":
    main()
