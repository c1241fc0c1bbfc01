"""A scripted model behind the two wire formats the real agents speak, on loopback.

The end-to-end tests run Claude Code and Codex CLI for real; only the model is
ours. This server answers

- `POST /v1/messages` (Anthropic Messages API, streaming SSE), which Claude Code
  calls when `ANTHROPIC_BASE_URL` points here, and
- `POST /v1/responses` (OpenAI Responses API, streaming SSE), which Codex calls
  through a custom `model_provider` whose `base_url` points here,
- `POST /v1/chat/completions` (OpenAI Chat Completions, streaming SSE or one JSON
  answer), which Copilot CLI calls through its custom provider
  (`COPILOT_PROVIDER_BASE_URL`) and Qwen Code through `OPENAI_BASE_URL`,
- `POST /v1beta/models/MODEL:streamGenerateContent?alt=sse` (and `:generateContent`,
  `:countTokens`; the Gemini API), which Gemini CLI calls when
  `GOOGLE_GEMINI_BASE_URL` points here,

with the moves of a `Script`: run these shell commands one after the other; when
a command comes back as an error (a hook's deny, or a command that failed), run
the same command again, a bounded number of times; after the last one, answer a
final text. Every request body is recorded, so that a test can see where
mented's text sat in the conversation, and a callback runs before each answer
(e.g. to note how many commits the repository had when the model was asked, or
to supersede a rule between two commits).

Requests that are not the main conversation (Claude Code's side calls: title,
quota, ...) get a short text and are recorded apart. Stdlib only: it runs in a
thread of the test process.

Wire formats, as the agents' own test suites use them: Claude Code reads
`message_start`, `content_block_start` / `_delta` / `_stop`, `message_delta`,
`message_stop`; a `tool_use` block carries its input as `input_json_delta`
fragments. Codex reads `response.created`, `response.output_item.done` (a
`function_call` item with `call_id`, `name`, `arguments` as a JSON string, or an
assistant `message`) and `response.completed`. Copilot CLI reads
`chat.completion.chunk` deltas (`content`, or `tool_calls` with `id`, `function.name`
and `arguments` as a JSON string), a `finish_reason`, then `data: [DONE]`. Gemini
CLI reads `GenerateContentResponse` chunks: a candidate whose `content.parts` hold
`text` or a `functionCall` (`id`, `name`, `args`); its tool results come back as
`functionResponse` parts with the same `id`.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Self

FINAL_TEXT = "All done."
MAX_WAITS = 30  # times the script waits for an MCP server before it gives up
SIDE_TEXT = "ok"


@dataclass
class ToolResult:
    """What came back for the model's last tool call."""

    call_id: str
    text: str
    is_error: bool


@dataclass
class Turn:
    """One main-conversation request, as the server saw it."""

    index: int
    api: str  # "anthropic", "responses", "chat" or "gemini"
    body: dict[str, Any]
    result: ToolResult | None  # the result of the model's previous tool call, if any
    reply: str = ""  # "tool: <command>" or "text: <text>"
    probe: object = None  # what the script's `probe` returned when the request came in

    def conversation(self) -> list[Any]:
        """The conversation items: `messages` (Claude Code, Copilot CLI) or `input` (Codex)."""
        key = {"responses": "input", "gemini": "contents"}.get(self.api, "messages")
        items = self.body.get(key)
        return list(items or [])

    def conversation_text(self) -> str:
        """Every string in the conversation items, one per line (no system prompt, no tools)."""
        return "\n".join(_strings(self.conversation()))


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


@dataclass(frozen=True)
class McpCall:
    """A move of the script that calls an MCP tool instead of running a command.

    `tool` is the server's own name for it (`supersede_rule`); the call names the
    tool as the agent offers it (Claude Code and Codex: `mcp__mented__supersede_rule`).
    """

    tool: str
    arguments: dict[str, Any]

    def __str__(self) -> str:
        return f"{self.tool}({json.dumps(self.arguments)})"


@dataclass
class Script:
    """The scripted model: run `commands` in order, retrying one that came back an error.

    Attributes:
        commands: the shell commands, one tool call each (or an `McpCall`).
        max_retries: how many times one command is run again after an error result.
        probe: called as each main request comes in, before the answer; its value is
            kept on the `Turn` (e.g. the number of commits in the repository then).
        before_command: called with the index of a command right before the model
            first asks to run it (e.g. supersede a rule between two commits).
    """

    commands: list[str | McpCall]
    max_retries: int = 2
    probe: Callable[[], object] | None = None
    before_command: Callable[[int], None] | None = None
    _next: int = field(default=0, init=False)  # the index of the next command to run
    _retries: int = field(default=0, init=False)  # of the current command, so far
    _again: int = field(default=0, init=False)  # times the current move waits (`again`)

    def again(self) -> None:
        """Make the move just made the next one too, whatever its result (not a retry)."""
        self._again += 1
        if self._again > MAX_WAITS:
            raise LookupError(f"the agent's MCP server was still not up after {MAX_WAITS} waits")

    def waited(self) -> None:
        """The move that waited is made: go on with the next ones."""
        self._again = 0

    def next_move(self, result: ToolResult | None) -> tuple[str, str | McpCall]:
        """("tool", command) or ("text", final text), given the last tool call's result."""
        if self._again:
            return "tool", self.commands[self._next - 1]
        if result is not None and result.is_error and self._retries < self.max_retries:
            self._retries += 1
            return "tool", self.commands[self._next - 1]
        if self._next >= len(self.commands):
            return "text", FINAL_TEXT
        self._retries = 0
        if self.before_command is not None:
            self.before_command(self._next)
        self._next += 1
        return "tool", self.commands[self._next - 1]


@dataclass
class Recording:
    turns: list[Turn] = field(default_factory=list)
    side_requests: list[dict[str, Any]] = field(default_factory=list)
    other_paths: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class ModelServer:
    """The server; `with ModelServer(script) as server:` serves on `server.base_url`."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.recording = Recording()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._last_call_id: str | None = None
        handler = type("Handler", (_Handler,), {"model": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    @property
    def turns(self) -> list[Turn]:
        return self.recording.turns

    # ----------------------------------------------------------------- the model

    def answer(self, api: str, body: dict[str, Any]) -> list[dict[str, Any]] | None:
        """The SSE events answering `body`, or None for a side request."""
        with self._lock:
            if not _is_main(api, body):
                self.recording.side_requests.append(body)
                return None
            result = _last_result(api, body, self._last_call_id)
            turn = Turn(index=len(self.recording.turns), api=api, body=body, result=result)
            if self.script.probe is not None:
                turn.probe = self.script.probe()
            self.recording.turns.append(turn)
            kind, value = self.script.next_move(result)
            turn.reply = f"{kind}: {value}"
            if kind == "text":
                self._last_call_id = None
                return _TEXT[api](value)
            call_id = f"call_{next(self._ids)}"
            self._last_call_id = call_id
            if isinstance(value, McpCall):
                if _waits_for_mcp(api, value, body.get("tools") or []):
                    self.script.again()  # the same call once the server is up
                else:
                    self.script.waited()
                return _mcp_call(api, call_id, value, body.get("tools") or [])
            assert isinstance(value, str)
            if api == "anthropic":
                return _anthropic_tool_use("toolu_" + call_id, value, body.get("tools") or [])
            if api == "chat":
                return _chat_tool_call(call_id, value, body.get("tools") or [])
            if api == "gemini":
                return _gemini_shell_call(call_id, value)
            return _responses_shell_call(call_id, value, body.get("tools") or [])


class _Handler(BaseHTTPRequestHandler):
    model: ClassVar[ModelServer]
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
        pass

    def do_GET(self) -> None:
        self.model.recording.other_paths.append(f"GET {self.path}")
        self._send(404, b'{"error": "not found"}', "application/json")

    def do_HEAD(self) -> None:
        self._send(200, b"", "text/plain")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        path = self.path.split("?", 1)[0]
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        if path.endswith("/v1/messages"):
            api = "anthropic"
        elif path.endswith("/responses"):
            api = "responses"
        elif path.endswith("/chat/completions"):
            api = "chat"
        elif path.endswith(":countTokens"):
            self._send(200, b'{"totalTokens": 10}', "application/json")
            return
        elif path.endswith(("GenerateContent", "generateContent")):
            api = "gemini"
        else:
            self.model.recording.other_paths.append(f"POST {self.path}")
            self._send(404, b'{"error": "not found"}', "application/json")
            return
        try:
            events = self.model.answer(api, body)
        # A broken script or callback must show in the test, not leave the agent waiting.
        except Exception as exc:  # noqa: BLE001
            self.model.recording.errors.append(repr(exc))
            self._send(500, json.dumps({"error": repr(exc)}).encode(), "application/json")
            return
        if events is None:
            events = _TEXT[api](SIDE_TEXT)
            if api == "anthropic" and not body.get("stream"):
                self._send(
                    200, json.dumps(_anthropic_message(SIDE_TEXT)).encode(), "application/json"
                )
                return
        if api == "gemini":
            if path.endswith(":streamGenerateContent"):
                self._send(200, _gemini_sse(events), "text/event-stream")
            else:
                self._send(200, json.dumps(events[0]).encode(), "application/json")
            return
        if api == "chat":
            if body.get("stream"):
                self._send(200, _chat_sse(events), "text/event-stream")
            else:
                self._send(200, json.dumps(_chat_completion(events)).encode(), "application/json")
            return
        self._send(200, _sse(events), "text/event-stream")

    def _send(self, status: int, payload: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        self.wfile.write(payload)


def _sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(
        f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode() for event in events
    )


# ------------------------------------------------------------------ Anthropic

_USAGE = {
    "input_tokens": 10,
    "output_tokens": 1,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 0,
}


def _is_main(api: str, body: dict[str, Any]) -> bool:
    """Is `body` the agent's conversation (it offers a shell tool), not a side call?"""
    tools = [tool for tool in body.get("tools") or [] if isinstance(tool, dict)]
    if api == "anthropic":  # Claude Code's shell tool, or pi's
        return bool({"Bash", PI_SHELL_TOOL} & {tool.get("name") for tool in tools})
    if api == "chat":
        return bool(_chat_tools(tools) & set(CHAT_SHELL_TOOLS))
    if api == "gemini":
        return GEMINI_SHELL_TOOL in {
            declaration.get("name")
            for tool in tools
            for declaration in tool.get("functionDeclarations") or []
        }
    return bool({tool.get("name") for tool in tools} & set(_SHELL_TOOLS))


def _anthropic_message(text: str) -> dict[str, Any]:
    return {
        "id": "msg_side",
        "type": "message",
        "role": "assistant",
        "model": "mock-model",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": _USAGE,
    }


def _anthropic_frame(blocks: list[list[dict[str, Any]]], stop_reason: str) -> list[dict[str, Any]]:
    start = {**_anthropic_message(""), "id": "msg_mock", "content": [], "stop_reason": None}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for block in blocks:
        events.extend(block)
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": 5},
        }
    )
    events.append({"type": "message_stop"})
    return events


def _anthropic_text(text: str) -> list[dict[str, Any]]:
    block = [
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": 0},
    ]
    return _anthropic_frame([block], "end_turn")


PI_SHELL_TOOL = "bash"  # pi's shell tool, on the Anthropic API (`command` only)


def _anthropic_tool_use(
    tool_use_id: str, command: str, tools: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    offered = {tool.get("name") for tool in tools if isinstance(tool, dict)}
    name = "Bash" if "Bash" in offered else PI_SHELL_TOOL
    shell_input = {"command": command}
    if name == "Bash":
        shell_input["description"] = "Run the command"
    return _anthropic_call(tool_use_id, name, json.dumps(shell_input))


def _anthropic_call(tool_use_id: str, name: str, arguments: str) -> list[dict[str, Any]]:
    block = [
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": tool_use_id, "name": name, "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": arguments},
        },
        {"type": "content_block_stop", "index": 0},
    ]
    return _anthropic_frame([block], "tool_use")


# ------------------------------------------------------------------ Responses

# Codex's shell tools and how each takes a command line.
_SHELL_TOOLS: dict[str, Callable[[str], dict[str, Any]]] = {
    "shell_command": lambda command: {"command": command},
    "exec_command": lambda command: {"cmd": command},
    "shell": lambda command: {"command": ["bash", "-lc", command]},
}


def _responses_frame(item: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"type": "response.created", "response": {"id": "resp_mock"}},
        {"type": "response.output_item.done", "item": item},
        {
            "type": "response.completed",
            "response": {
                "id": "resp_mock",
                "usage": {
                    "input_tokens": 10,
                    "input_tokens_details": None,
                    "output_tokens": 5,
                    "output_tokens_details": None,
                    "total_tokens": 15,
                },
            },
        },
    ]


def _responses_text(text: str) -> list[dict[str, Any]]:
    item = {
        "type": "message",
        "role": "assistant",
        "id": "msg_mock",
        "content": [{"type": "output_text", "text": text}],
    }
    return _responses_frame(item)


def _responses_shell_call(call_id: str, command: str, tools: list[Any]) -> list[dict[str, Any]]:
    offered = [tool.get("name") for tool in tools if isinstance(tool, dict)]
    name = next(name for name in _SHELL_TOOLS if name in offered)
    item = {
        "type": "function_call",
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(_SHELL_TOOLS[name](command)),
    }
    return _responses_frame(item)


# ------------------------------------------------------------------ MCP tools


# Claude Code's tool for MCP servers still connecting when `claude -p` asks the model.
WAIT_FOR_MCP = "WaitForMcpServers"
# What the script runs meanwhile where the agent has no such tool (Codex).
WAIT_COMMAND = "sleep 1"


def _offered(tools: list[Any]) -> list[str]:
    return [tool["name"] for tool in tools if isinstance(tool, dict) and "name" in tool]


def _mcp_tool(call: McpCall, tools: list[Any]) -> tuple[str, str | None] | None:
    """The name the agent offers the MCP tool by, and its namespace (Codex: the
    server's tools in a `namespace` tool `mcp__SERVER`); None while not offered."""
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        name = tool.get("name")
        if tool.get("type") == "namespace":
            if call.tool in _offered(tool.get("tools") or []):
                return call.tool, str(name)
        elif isinstance(name, str) and name.endswith("__" + call.tool):
            return name, None
    return None


def _waits_for_mcp(api: str, call: McpCall, tools: list[Any]) -> bool:
    """Whether the MCP tool is not offered yet: its server is still starting."""
    if _mcp_tool(call, tools) is not None:
        return False
    return api == "responses" or (api == "anthropic" and WAIT_FOR_MCP in _offered(tools))


def _mcp_call(api: str, call_id: str, call: McpCall, tools: list[Any]) -> list[dict[str, Any]]:
    """A call of the MCP tool `call.tool`, under the name the agent offers it by; while
    its server is still starting, what a model does meanwhile (wait, or something else)."""
    found = _mcp_tool(call, tools)
    if found is None and api == "anthropic" and WAIT_FOR_MCP in _offered(tools):
        return _anthropic_call("toolu_" + call_id, WAIT_FOR_MCP, "{}")
    if found is None and api == "responses":
        return _responses_shell_call(call_id, WAIT_COMMAND, tools)
    if found is None:
        raise LookupError(f"the agent offers no MCP tool {call.tool!r}: {_offered(tools)}")
    name, namespace = found
    arguments = json.dumps(call.arguments)
    if api == "anthropic":
        return _anthropic_call("toolu_" + call_id, name, arguments)
    if api == "responses":
        item = {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}
        return _responses_frame({**item, "namespace": namespace} if namespace else item)
    raise LookupError(f"MCP calls are scripted for Claude Code and Codex only, not {api!r}")


# ------------------------------------------------------------------ Chat Completions

CHAT_SHELL_TOOLS = ("bash", "run_shell_command")  # Copilot CLI's, Qwen Code's


def _chat_tools(tools: list[Any]) -> set[str]:
    return {(tool.get("function") or {}).get("name") for tool in tools if isinstance(tool, dict)}


def _chat_chunk(delta: dict[str, Any], finish_reason: str | None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-mock",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "mock-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def _chat_text(text: str) -> list[dict[str, Any]]:
    return [
        _chat_chunk({"role": "assistant", "content": text}, None),
        _chat_chunk({}, "stop"),
    ]


def _chat_tool_call(call_id: str, command: str, tools: list[Any]) -> list[dict[str, Any]]:
    offered = _chat_tools(tools)
    call = {
        "index": 0,
        "id": call_id,
        "type": "function",
        "function": {
            "name": next(name for name in CHAT_SHELL_TOOLS if name in offered),
            "arguments": json.dumps({"command": command, "description": "Run the command"}),
        },
    }
    return [
        _chat_chunk({"role": "assistant", "content": None, "tool_calls": [call]}, None),
        _chat_chunk({}, "tool_calls"),
    ]


def _chat_sse(chunks: list[dict[str, Any]]) -> bytes:
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    last = {**chunks[-1], "usage": usage}
    return (
        b"".join(f"data: {json.dumps(chunk)}\n\n".encode() for chunk in [*chunks[:-1], last])
        + b"data: [DONE]\n\n"
    )


def _chat_completion(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """The same answer as one (non-streaming) `chat.completion`."""
    message: dict[str, Any] = {"role": "assistant", "content": None}
    finish_reason = "stop"
    for chunk in chunks:
        choice = chunk["choices"][0]
        message.update({k: v for k, v in choice["delta"].items() if v is not None})
        finish_reason = choice["finish_reason"] or finish_reason
    return {
        "id": "chatcmpl-mock",
        "object": "chat.completion",
        "created": 0,
        "model": "mock-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


# ------------------------------------------------------------------ Gemini API

GEMINI_SHELL_TOOL = "run_shell_command"  # Gemini CLI's shell tool


def _gemini_answer(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {
                "promptTokenCount": 10,
                "candidatesTokenCount": 5,
                "totalTokenCount": 15,
            },
            "modelVersion": "mock-model",
        }
    ]


def _gemini_text(text: str) -> list[dict[str, Any]]:
    return _gemini_answer([{"text": text}])


def _gemini_shell_call(call_id: str, command: str) -> list[dict[str, Any]]:
    args = {"command": command, "description": "Run the command"}
    return _gemini_answer(
        [{"functionCall": {"id": call_id, "name": GEMINI_SHELL_TOOL, "args": args}}]
    )


def _gemini_sse(chunks: list[dict[str, Any]]) -> bytes:
    return b"".join(f"data: {json.dumps(chunk)}\r\n\r\n".encode() for chunk in chunks)


_TEXT: dict[str, Callable[[str], list[dict[str, Any]]]] = {
    "gemini": _gemini_text,
    "anthropic": _anthropic_text,
    "responses": _responses_text,
    "chat": _chat_text,
}

# ------------------------------------------------------------------ results

# Codex's tool output for a hook's deny, and for a command that failed.
_CODEX_ERROR = re.compile(r"Command blocked by|Process exited with code [1-9]")
# Gemini CLI's tool result for a hook's deny, and for a command that failed.
_GEMINI_ERROR = re.compile(r"Tool execution blocked|Exit Code: [1-9]")
# Qwen Code's tool result for a command that ran and succeeded; a hook's deny comes
# back as the reason alone.
_QWEN_RAN = re.compile(r"^Command: .*^Exit Code: 0$", re.MULTILINE | re.DOTALL)
# Copilot CLI's tool result for a hook's deny, and for a command that failed; opencode's
# for a plugin's stop is the error's message alone: mented's own words.
_COPILOT_ERROR = re.compile(
    r"Denied by preToolUse hook|exit(?:ed with)? code [1-9]|^mented stopped this \w+ once"
)


def _last_result(api: str, body: dict[str, Any], call_id: str | None) -> ToolResult | None:
    """The result of the tool call `call_id` in the request's conversation, if it is there."""
    if call_id is None:
        return None
    if api == "anthropic":
        for message in body.get("messages") or []:
            content = message.get("content")
            if message.get("role") != "user" or not isinstance(content, list):
                continue
            for block in content:
                if block.get("type") == "tool_result" and block.get("tool_use_id") == (
                    "toolu_" + call_id
                ):
                    text = "\n".join(_strings(block.get("content")))
                    return ToolResult(call_id, text, bool(block.get("is_error")))
        return None
    if api == "chat":
        names = {
            call.get("id"): (call.get("function") or {}).get("name")
            for message in body.get("messages") or []
            for call in message.get("tool_calls") or []
            if isinstance(call, dict)
        }
        for message in body.get("messages") or []:
            if message.get("role") == "tool" and message.get("tool_call_id") == call_id:
                text = "\n".join(_strings(message.get("content")))
                if names.get(call_id) == "run_shell_command":  # Qwen Code
                    return ToolResult(call_id, text, _QWEN_RAN.search(text) is None)
                return ToolResult(call_id, text, _COPILOT_ERROR.search(text) is not None)
        return None
    if api == "gemini":
        for content in body.get("contents") or []:
            for part in content.get("parts") or []:
                response = part.get("functionResponse") if isinstance(part, dict) else None
                if response and response.get("id") == call_id:
                    text = "\n".join(_strings(response.get("response")))
                    return ToolResult(call_id, text, _GEMINI_ERROR.search(text) is not None)
        return None
    for item in body.get("input") or []:
        if item.get("type") == "function_call_output" and item.get("call_id") == call_id:
            text = "\n".join(_strings(item.get("output")))
            return ToolResult(call_id, text, _CODEX_ERROR.search(text) is not None)
    return None
