"""The wire format: frames, tagged requests and replies, typed decode errors."""

from __future__ import annotations

import socket

import msgspec
import pytest

from mented.memory import Memory
from mented.protocol import (
    HEADER,
    MAX_FRAME,
    ErrorCode,
    ErrorReply,
    FrameTooLargeError,
    GetRequest,
    HookRequest,
    ListRequest,
    MemoriesReply,
    RecallRequest,
    StatusRequest,
    StoreRequest,
    decode_request,
    encode,
    frame,
    recv_frame,
    reply_decoder,
)


def test_frame_is_big_endian_length_then_json() -> None:
    data = encode(GetRequest(id="01ABC"))
    (length,) = HEADER.unpack(data[:4])
    assert length == len(data) - 4
    assert msgspec.json.decode(data[4:]) == {"type": "get", "id": "01ABC"}


def test_recv_frame_reads_one_whole_frame_however_it_arrives() -> None:
    first, second = frame(b'{"a":1}'), frame(b"")
    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.settimeout(5)
        data = first + second
        for start in range(0, len(data), 3):  # dripped in pieces, two frames back to back
            theirs.sendall(data[start : start + 3])
        assert recv_frame(ours) == b'{"a":1}'
        assert recv_frame(ours) == b""


@pytest.mark.parametrize("sent", [b"", b"\x00\x00", frame(b"0123456789")[:-1]])
def test_recv_frame_refuses_a_frame_cut_short(sent: bytes) -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.settimeout(5)
        theirs.sendall(sent)
        theirs.shutdown(socket.SHUT_WR)
        with pytest.raises(ConnectionResetError, match="closed"):
            recv_frame(ours)


def test_recv_frame_refuses_an_oversized_frame_before_its_body() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.settimeout(5)
        theirs.sendall(HEADER.pack(MAX_FRAME + 1))  # no body follows: it must not wait for one
        with pytest.raises(FrameTooLargeError, match=f"{MAX_FRAME + 1} bytes exceeds"):
            recv_frame(ours)


@pytest.mark.parametrize(
    "request_",
    [
        StatusRequest(),
        StoreRequest(content="x", tags=["trigger:git-commit"], agent="codex", project="/w"),
        RecallRequest(action="git-commit", agent="a", cwd="/w", k=3),
        ListRequest(action="git-push", include_superseded=True, limit=5),
    ],
)
def test_requests_round_trip(request_: object) -> None:
    assert decode_request(encode(request_)[4:]) == request_  # type: ignore[arg-type]


def test_hook_request_carries_the_raw_event_verbatim() -> None:
    body = b'{"type":"hook","agent":"claude-code","event":{"tool_name":"Bash","x":[1,2]}}'
    request = decode_request(body)
    assert isinstance(request, HookRequest)
    assert bytes(request.event) == b'{"tool_name":"Bash","x":[1,2]}'


def test_replies_round_trip() -> None:
    reply = MemoriesReply(memories=[Memory(id="01X", content="c", created_at=1.5)])
    assert reply_decoder.decode(encode(reply)[4:]) == reply


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", ErrorCode.BAD_FRAME),
        (b"[1, 2]", ErrorCode.BAD_FRAME),
        (b'{"type": "launch-missiles"}', ErrorCode.UNKNOWN_REQUEST),
        (b'{"no_type": 1}', ErrorCode.UNKNOWN_REQUEST),
        (b'{"type": "get"}', ErrorCode.BAD_REQUEST),
        (b'{"type": "get", "id": 7}', ErrorCode.BAD_REQUEST),
        (b'{"type": "recall_for_action", "action": "x", "k": "six"}', ErrorCode.BAD_REQUEST),
    ],
)
def test_bad_requests_get_typed_errors(body: bytes, code: str) -> None:
    reply = decode_request(body)
    assert isinstance(reply, ErrorReply)
    assert reply.code == code
    assert reply.message


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (b'{"type": "list", "cwd": "/home/u/p\\u0000x"}', "`$.cwd`"),
        (b'{"type": "recall", "query": "q", "cwd": "\\u0000"}', "`$.cwd`"),
        (b'{"type": "trust", "dir": "/p\\u0000/.."}', "`$.dir`"),
        (b'{"type": "import", "path": "/t/x\\u0000.jsonl"}', "`$.path`"),
        (b'{"type": "store", "content": "c", "project": "/p\\u0000"}', "`$.project`"),
        (b'{"type": "subscribe", "project": "/p\\u0000"}', "`$.project`"),
    ],
)
def test_a_path_with_a_nul_byte_is_a_bad_request_naming_the_field(body: bytes, where: str) -> None:
    # Before: it reached the store or a system call and came back as `internal`.
    reply = decode_request(body)
    assert isinstance(reply, ErrorReply)
    assert reply.code == ErrorCode.BAD_REQUEST
    assert reply.message == f"invalid request: a path cannot hold a NUL byte (at {where})"
    assert not isinstance(decode_request(body.replace(b"\\u0000", b"")), ErrorReply)


def test_unknown_fields_are_ignored_so_newer_clients_work() -> None:
    assert decode_request(b'{"type": "status", "from_the_future": true}') == StatusRequest()


def test_every_example_in_docs_protocol_md_is_a_valid_message() -> None:
    import re
    from pathlib import Path

    from mented.protocol import RuleEvent, event_decoder, request_decoder

    doc = (Path(__file__).parent.parent / "docs" / "protocol.md").read_text()
    examples = re.findall(r"```json\n(.*?)```", doc, flags=re.DOTALL)
    assert len(examples) >= 20
    kinds = set()
    events = set()
    for example in examples:
        body = example.encode()
        kind = msgspec.json.decode(body)["type"]
        decoders = (request_decoder, reply_decoder, event_decoder)
        decoded = [d.decode(body) for d in decoders if _decodes(d, body)]
        assert decoded, f"not a valid message: {example}"
        kinds.add(kind)
        if kind == "event":
            (event,) = decoded
            events.add(event.change if isinstance(event, RuleEvent) else type(event).__name__)
    request_types = {"status", "store", "get", "recall_for_action", "supersede", "history"}
    request_types |= {"forget", "list", "hook", "log", "reload", "shutdown"}
    request_types |= {"export", "exported", "import", "imported", "sync", "synced"}
    request_types |= {"trust", "trusted", "actions", "subscribe", "subscribed", "event"}
    assert request_types <= kinds
    assert events == {
        "FireEvent",
        "added",
        "superseded",
        "forgotten",
        "imported",
        "synced",
        "ConfigEvent",
        "DroppedEvent",
    }


def test_every_error_code_is_in_the_table_of_docs_protocol_md() -> None:
    from pathlib import Path

    doc = (Path(__file__).parent.parent / "docs" / "protocol.md").read_text()
    codes = {value for name, value in vars(ErrorCode).items() if name.isupper()}
    assert "store_full" in codes
    missing = {code for code in codes if f"| `{code}` |" not in doc}
    assert not missing, f"not documented in docs/protocol.md: {sorted(missing)}"


def _decodes(decoder: msgspec.json.Decoder, body: bytes) -> bool:  # type: ignore[type-arg]
    try:
        decoder.decode(body)
    except msgspec.ValidationError:
        return False
    return True
