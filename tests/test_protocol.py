"""The wire format: frames, tagged requests and replies, typed decode errors."""

from __future__ import annotations

import msgspec
import pytest

from mented.memory import Memory
from mented.protocol import (
    HEADER,
    ErrorCode,
    ErrorReply,
    GetRequest,
    HookRequest,
    ListRequest,
    MemoriesReply,
    RecallRequest,
    StatusRequest,
    StoreRequest,
    decode_request,
    encode,
    reply_decoder,
)


def test_frame_is_big_endian_length_then_json() -> None:
    data = encode(GetRequest(id="01ABC"))
    (length,) = HEADER.unpack(data[:4])
    assert length == len(data) - 4
    assert msgspec.json.decode(data[4:]) == {"type": "get", "id": "01ABC"}


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


def test_unknown_fields_are_ignored_so_newer_clients_work() -> None:
    assert decode_request(b'{"type": "status", "from_the_future": true}') == StatusRequest()


def test_every_example_in_docs_protocol_md_is_a_valid_message() -> None:
    import re
    from pathlib import Path

    from mented.protocol import request_decoder

    doc = (Path(__file__).parent.parent / "docs" / "protocol.md").read_text()
    examples = re.findall(r"```json\n(.*?)```", doc, flags=re.DOTALL)
    assert len(examples) >= 20
    kinds = set()
    for example in examples:
        body = example.encode()
        kind = msgspec.json.decode(body)["type"]
        decoders = (request_decoder, reply_decoder)
        decoded = [d.decode(body) for d in decoders if _decodes(d, body)]
        assert decoded, f"not a valid message: {example}"
        kinds.add(kind)
    request_types = {"status", "store", "get", "recall_for_action", "supersede", "history"}
    request_types |= {"forget", "list", "hook", "log", "reload", "shutdown"}
    assert request_types <= kinds


def _decodes(decoder: msgspec.json.Decoder, body: bytes) -> bool:  # type: ignore[type-arg]
    try:
        decoder.decode(body)
    except msgspec.ValidationError:
        return False
    return True
