"""The wire protocol between the daemon and its clients.

Every message travels in one frame on a Unix stream socket::

    +----------------------+------------------------------------+
    | length (4 bytes, BE) | body: `length` bytes of UTF-8 JSON  |
    +----------------------+------------------------------------+

The length is checked against `MAX_FRAME` before the body is read: a larger
frame is answered with a `frame_too_large` error and the connection is closed.
A connection carries any number of request/reply pairs, one at a time, until it
sends `subscribe`: from then on it carries only `Event` frames from the daemon.

Requests and replies are JSON objects tagged by their `type` field. They are
`msgspec.Struct`s collected in the unions `Request` and `Reply`, each with one
decoder built once. New fields always get defaults, so older clients keep
working; `PROTOCOL_VERSION` (in the `status` reply) rises when a change would
break one.

One exception serves the hook shim, which has no JSON library on its hot path:
the reply to a `hook` request is a frame whose body is the exact bytes the agent
expects on stdout, possibly empty. It is never an error: any failure is an empty
body, because the hook must be silent when anything goes wrong.

See docs/protocol.md for an example of every message.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

import msgspec

from mented.memory import Memory, MemoryType

if TYPE_CHECKING:
    import socket

PROTOCOL_VERSION = 1
# Large enough for a hook event carrying a 1 MiB command, small enough that a
# careless client cannot make the daemon buffer much.
MAX_FRAME = 4 * 1024 * 1024
HEADER = struct.Struct(">I")

# --------------------------------------------------------------------- requests

# A path a request names (a working directory, a project, a file): one with a NUL byte,
# which no path can hold, is refused at decode as `bad_request`, before a system call
# would fail on it deep inside a request's work.
PathText = Annotated[str, msgspec.Meta(pattern=r"^[^\x00]*$")]


class _Request(msgspec.Struct, tag_field="type", forbid_unknown_fields=False, kw_only=True):
    pass


class StatusRequest(_Request, tag="status", kw_only=True):
    """Health, version and counters of the daemon."""


class StoreRequest(_Request, tag="store", kw_only=True):
    """Store a memory. A `trigger:<action>` tag makes it a rule for that action."""

    content: str
    memory_type: MemoryType = MemoryType.SEMANTIC
    tags: list[str] = []
    agent: str | None = None
    project: PathText | None = None
    checks: list[str] = []  # checks on the action's fields (mented.checks)


class GetRequest(_Request, tag="get", kw_only=True):
    """One memory by id (or by a unique short handle)."""

    id: str


class RecallRequest(_Request, tag="recall_for_action", kw_only=True):
    """The live rules for an action that the caller may see, newest first, at most `k`."""

    action: str
    agent: str | None = None
    cwd: PathText | None = None
    k: int = 6


class RecallFactsRequest(_Request, tag="recall", kw_only=True):
    """The live facts (memories that are no rule) best matching `query`'s words, by BM25.

    `agent`/`cwd` name the caller for visibility, as for `list`; `k` None: the
    config file's `[recall] k`.
    """

    query: str
    agent: str | None = None
    cwd: PathText | None = None
    k: int | None = None


class ReindexRequest(_Request, tag="reindex", kw_only=True):
    """Rebuild the indexes derived from the store: the recall index and the pinned rules'."""


class SupersedeRequest(_Request, tag="supersede", kw_only=True):
    """Replace a rule: the new one inherits tags and scope unless given."""

    id: str
    content: str
    tags: list[str] | None = None
    agent: str | None = None
    project: PathText | None = None
    checks: list[str] | None = None  # the new version's checks; None: the old one's


class HistoryRequest(_Request, tag="history", kw_only=True):
    """The whole supersession chain of a memory, oldest first."""

    id: str


class ForgetRequest(_Request, tag="forget", kw_only=True):
    """Remove a memory and its index entries."""

    id: str


class ListRequest(_Request, tag="list", kw_only=True):
    """Memories matching filters, newest first.

    With `action` set this is exactly `recall_for_action` (unless
    `include_superseded`). `agent`/`cwd` name the caller for visibility; when
    absent, no visibility filter applies on that axis.
    """

    action: str | None = None
    agent: str | None = None
    cwd: PathText | None = None
    tag: str | None = None
    memory_type: MemoryType | None = None
    rules_only: bool = False
    include_superseded: bool = False
    limit: int | None = None


class HookRequest(_Request, tag="hook", kw_only=True):
    """An agent's hook event, passed through verbatim by the shim.

    The reply is a raw frame: the bytes for the agent's stdout (see module doc).
    """

    agent: str
    # A test fire (`mentectl doctor`, `setup`: the shim with MENTED_TEST_FIRE=1): answered
    # as any other, logged as a test, and never counted as the user's activity.
    test: bool = False
    event: msgspec.Raw = msgspec.Raw(b"null")
    # When the caller stops waiting, in Unix seconds (the clock every process on the
    # machine shares): an answer the daemon cannot send before then is dropped, and
    # counts as handed over to nobody. None (a client older than this field): the
    # daemon counts `[hook] budget_ms` from when it read the request.
    deadline: float | None = None


class LogRequest(_Request, tag="log", kw_only=True):
    """The most recent hook fires, newest first, at most `n`, from the activity record
    (mented.activity); the daemon applies the filters (None: any).

    `session`: a session id or its first characters; `project`: an absolute directory,
    the fires run in it or under it; `action`: the fires that named it; `since`: Unix
    seconds. `include_tests`: with `mentectl doctor`'s and `setup`'s test fires, or
    without them (None, from a client older than the filters: with them, as before).
    """

    n: int = 20
    session: str | None = None
    agent: str | None = None
    project: PathText | None = None
    action: str | None = None
    since: float | None = None
    include_tests: bool | None = None


class ReloadRequest(_Request, tag="reload", kw_only=True):
    """Re-read the config file (action table, hook settings)."""


class ExportRequest(_Request, tag="export", kw_only=True):
    """Write every memory and forget in the portable format (docs/format.md).

    The daemon writes the file in `transfer/` under its data directory (the only
    place a sandboxed service may write) and names it in the reply; the client
    moves it where the user wants it.
    """


class ImportRequest(_Request, tag="import", kw_only=True):
    """Import a file in the portable format, all of it or nothing.

    `path` must be in `transfer/` under the daemon's data directory (the client
    copies the user's file there); `shown_as` names it in error messages.
    """

    path: PathText
    shown_as: str | None = None


class SyncRequest(_Request, tag="sync", kw_only=True):
    """Sync with the git remote now; with `init_remote`, first set sync up with it.

    Runs in a worker thread, with a timeout per git command: hooks are answered
    meanwhile. `init_remote` is any URL the user's git reaches (an absolute path
    for a local one: the daemon's working directory is not the client's).
    """

    init_remote: str | None = None
    # Point sync at another remote instead of syncing (`mentectl sync remote URL`);
    # answered with `status`, which names the new remote.
    set_remote: str | None = None
    # Only answer with `status` (`mentectl sync status`): nothing is synced.
    status: bool = False


class TrustRequest(_Request, tag="trust", kw_only=True):
    """Trust the current content of the `.mented/` folder of the project `dir` is in.

    Its rules are then handed to agents for commands run in that project, until a
    file there changes (which needs trusting again). `dir` is absolute.
    """

    dir: PathText


class ActionsRequest(_Request, tag="actions", kw_only=True):
    """The action table in force (what the hook matches with), for editors' completion."""


# What a subscriber may ask for; `dropped` is sent to every subscriber that falls behind.
EventKind = Literal["fire", "rule", "config"]
EVENT_KINDS: tuple[EventKind, ...] = get_args(EventKind)


class SubscribeRequest(_Request, tag="subscribe", kw_only=True):
    """Turn this connection into a stream of events (see `Event` and docs/protocol.md).

    `kinds`: which events (default all); `project`: an absolute directory, to get only
    the events that concern it (fires there, rules that apply there, batches, config).
    """

    kinds: list[EventKind] = msgspec.field(default_factory=lambda: list(EVENT_KINDS))
    project: PathText | None = None


class ReportRequest(_Request, tag="report", kw_only=True):
    """The record of whether rules are kept (mented.compliance), since `since_s` ago."""

    since_s: float = 7 * 86_400
    agent: str | None = None


class ShutdownRequest(_Request, tag="shutdown", kw_only=True):
    """Stop the daemon politely: the reply is sent, then the daemon exits."""


Request = (
    StatusRequest
    | StoreRequest
    | GetRequest
    | RecallRequest
    | SupersedeRequest
    | HistoryRequest
    | ForgetRequest
    | ListRequest
    | RecallFactsRequest
    | ReindexRequest
    | HookRequest
    | LogRequest
    | ReloadRequest
    | ExportRequest
    | ImportRequest
    | SyncRequest
    | TrustRequest
    | ActionsRequest
    | SubscribeRequest
    | ReportRequest
    | ShutdownRequest
)

# ---------------------------------------------------------------------- replies


class _Reply(msgspec.Struct, tag_field="type", kw_only=True):
    pass


class FireRecord(msgspec.Struct, kw_only=True):
    """One hook fire, as kept in the activity record (mented.activity).

    `rule_ids` are the rules visible for the command; `delivery` says what of
    them reached the model: `full` (the text of `full_ids`), `pointer` (one line
    naming rules the session already had) or `none`; `mode` how: `stop` (the
    command was stopped once, with the rules as the reason), `context`, or
    `none`; `why` says why, in words; `chars` counts what was handed over.
    """

    time: float
    agent: str
    session: str | None = None
    cwd: str | None = None
    command: str = ""
    actions: list[str] = []
    rule_ids: list[str] = []
    mode: str = "context"
    delivery: str = "full"
    why: str = ""
    chars: int = 0
    full_ids: list[str] = []
    latency_us: float = 0.0
    test: bool = False  # sent by `mentectl doctor` or `setup`, not by the user's agent


class PinnedOverCap(msgspec.Struct, kw_only=True, frozen=True):
    """Sessions that see more pinned rules than the cap allows: a session start leaves
    the oldest out (after a sync brought rules pinned elsewhere, or a lowered cap)."""

    sessions: str  # which: "every session", "sessions for codex in /work/a", ...
    live: int  # the live pinned rules they see
    chars: int  # their characters
    left_out: list[str]  # ids of the rules a session start leaves out, newest first


class Problem(msgspec.Struct, kw_only=True, frozen=True):
    """A degraded state the daemon runs in: rules still reach the agents, but not as set up.

    `kind` is stable for programs (`mented.problems` lists them; a client must show a
    kind it does not know by its words); `message` says what is wrong and what it
    costs; `fix` what to do; `since` when it was first noticed (epoch seconds).
    """

    kind: str
    message: str
    fix: str
    since: float


class StatusReply(_Reply, tag="status", kw_only=True):
    version: str
    protocol: int = PROTOCOL_VERSION
    pid: int
    uptime_s: float
    socket: str
    data_dir: str
    db_bytes: int = 0
    map_bytes: int = 0
    memories: int = 0
    live_rules: int = 0
    actions_with_rules: int = 0
    requests_served: int = 0
    p50_us: float | None = None
    p99_us: float | None = None
    # The longest the event loop was held by one task step (every request waits that
    # long): since the daemon started, the task that did it, and in the last minute or two.
    loop_lag_ms: float | None = None
    loop_lag_task: str | None = None
    loop_lag_recent_ms: float | None = None
    # The longest step since the previous `status` request (of any client), and its task.
    loop_lag_since_ms: float | None = None
    loop_lag_since_task: str | None = None
    last_hook_fire: FireRecord | None = None
    # Characters of rules handed to the model per agent session, on average since start.
    hook_chars_per_session: float | None = None
    hook_sessions: int = 0
    config: str | None = None
    # Set while the config file on disk is invalid: the daemon runs on the previous one.
    config_error: str | None = None
    # Set with `config_error`: the text of the config file the daemon runs on, so that
    # `mentectl explain` and `actions` show the table in force, not the broken file's.
    config_in_force: str | None = None
    socket_activated: bool = False
    # Who started the daemon: "systemd", "launchd", "mentectl" (`mentectl start`, detached),
    # "terminal" (typed in a shell: it ends with that terminal) or "other" (by hand, outside
    # a terminal); "unknown" from a daemon older than this field. A string, not a closed
    # set: a client must read a value it does not know yet.
    started_by: str = "unknown"
    # Sync over git: the remote (None: not set up), the last sync that worked, the
    # error of the last one when it failed (it is retried).
    sync_remote: str | None = None
    sync_last_ok: float | None = None
    sync_error: str | None = None
    # Files from the remote the last sync skipped (the first few, each with its
    # problem), and how many in all.
    sync_skipped: list[str] = []
    sync_skipped_total: int = 0
    # Rules with more than one current version (superseded on two machines while
    # apart): the ids of each one's current versions, newest first.
    forks: list[list[str]] = []
    # Projects met by the hook whose .mented/ rules are not served: not trusted (yet,
    # or since they changed), or unreadable; each with the reason and the command to run.
    untrusted_projects: list[str] = []
    # Set while facts cannot be recalled (the index could not be opened): why.
    recall_error: str | None = None
    # Fallbacks in force (session memory unavailable, built-in settings, a full data
    # directory, ...): each with what it costs and what to do. Empty when all is well.
    problems: list[Problem] = []
    # Connections subscribed to events (editors, `mentectl watch`).
    subscribers: int = 0
    # Pinned rules: how many are live (every scope), the cap per session, and the
    # sessions over it (each with the rules a session start leaves out).
    pinned_live: int = 0
    pinned_max_rules: int = 0
    pinned_max_chars: int = 0
    pinned_over_cap: list[PinnedOverCap] = []
    # The record of whether rules are kept, over the last 7 days (mented.compliance).
    checks_7d: ReportRow | None = None


class StoredReply(_Reply, tag="stored", kw_only=True):
    id: str


class MemoryReply(_Reply, tag="memory", kw_only=True):
    memory: Memory
    # For a project's committed rule (`memory.origin` "project"): the file it is
    # written in, where it is changed (mented only reads it).
    file: str | None = None
    # [memory.id] when a sync brought it from another machine (`mented.memory.origin_of`).
    synced: list[str] = []


class UntrustedProject(msgspec.Struct, kw_only=True):
    """A project whose committed rules are not served: not trusted yet, or unreadable."""

    root: str
    rules: int
    problem: str | None = None


class MemoriesReply(_Reply, tag="memories", kw_only=True):
    memories: list[Memory]
    # A `list` or `recall_for_action` with a `cwd` inside a project whose committed
    # rules are not served (so not in `memories`): which, to tell the user how to trust it.
    untrusted: UntrustedProject | None = None
    # The ids among `memories` that a sync brought from another machine: this
    # machine's own note (the store's `synced` index), not part of the records;
    # `mented.memory.origin_of` says what each memory's origin is.
    synced: list[str] = []


class SupersededReply(_Reply, tag="superseded", kw_only=True):
    id: str
    old: Memory


class ForgottenReply(_Reply, tag="forgotten", kw_only=True):
    id: str


class FactHit(msgspec.Struct, kw_only=True, frozen=True):
    """A fact found by topic and its BM25 score (higher is better; only comparable
    within one answer)."""

    memory: Memory
    score: float


class RecalledReply(_Reply, tag="recalled", kw_only=True):
    hits: list[FactHit]


class ReindexedReply(_Reply, tag="reindexed", kw_only=True):
    facts: int
    pinned: int
    seconds: float


class LogReply(_Reply, tag="log", kw_only=True):
    """The fires found, newest first. `more`: more matched than one answer holds (ask
    for fewer, or filter). `not_kept`: why the record is in the daemon's memory only
    (the last 500 fires, lost at a restart), or why some fires are missing from it;
    None when it is kept on disk."""

    fires: list[FireRecord]
    more: bool = False
    not_kept: str | None = None


class ExportedReply(_Reply, tag="exported", kw_only=True):
    """An export was written to `path` (in the data directory's `transfer/`)."""

    path: str
    memories: int
    forgotten: int


class ImportedReply(_Reply, tag="imported", kw_only=True):
    """What an import changed: records added, memories forgotten, records already here."""

    added: int
    forgotten: int
    unchanged: int
    # Rules in the file for actions this daemon does not know (they would never fire),
    # each a sentence with the closest known names.
    warnings: list[str] = []


class SyncedReply(_Reply, tag="synced", kw_only=True):
    """What a sync did: records of this machine written to the clone, memories added
    and forgotten from other machines, whether anything was pushed, and files from
    the remote that could not be read (skipped, each with its problem)."""

    remote: str
    written: int = 0
    added: int = 0
    forgotten: int = 0
    pushed: bool = False
    skipped: list[str] = []


class TrustedReply(_Reply, tag="trusted", kw_only=True):
    """The project whose rules are now trusted: its root, its rules, their digest."""

    root: str
    rules: list[Memory]
    digest: str


class ActionSummary(msgspec.Struct, kw_only=True, frozen=True):
    """An action in force: its name and what it is ("" when nobody said)."""

    name: str
    description: str = ""


class ActionsReply(_Reply, tag="actions", kw_only=True):
    """The action table in force, sorted by name."""

    actions: list[ActionSummary]


class SubscribedReply(_Reply, tag="subscribed", kw_only=True):
    """The subscription is on: what it gets. Event frames follow, until either side closes."""

    kinds: list[EventKind]
    project: str | None = None


class ReportRow(msgspec.Struct, kw_only=True):
    """The counts of one rule version (or one agent) in the record of whether rules are kept.

    `share_passed_first`: of the commands checked, those that passed at the first attempt.
    """

    key: str  # the rule's id, or the agent's name
    content: str = ""  # the rule's text (for a rule mented still has)
    actions: list[str] = []
    handed: int = 0
    checked: int = 0
    passed_first: int = 0
    passed: int = 0
    stopped: int = 0
    let_through: int = 0
    told: int = 0
    # A rule without checks, after the hook stopped a command to hand it over: the next
    # command was another one (the model changed it), or the same one again.
    retry_changed: int = 0
    retry_same: int = 0
    failed_after: int = 0  # failed a check on what the command did, once it ran
    share_passed_first: float | None = None


class ReportReply(_Reply, tag="report", kw_only=True):
    since: float  # Unix time of the window's start
    rules: list[ReportRow] = []
    agents: list[ReportRow] = []
    total: ReportRow


class OkReply(_Reply, tag="ok", kw_only=True):
    message: str = ""


class ErrorReply(_Reply, tag="error", kw_only=True):
    """A typed error. `code` is stable for programs; `message` is for people."""

    code: str
    message: str


Reply = (
    StatusReply
    | StoredReply
    | MemoryReply
    | MemoriesReply
    | SupersededReply
    | ForgottenReply
    | RecalledReply
    | ReindexedReply
    | LogReply
    | ExportedReply
    | ImportedReply
    | SyncedReply
    | TrustedReply
    | ActionsReply
    | SubscribedReply
    | ReportReply
    | OkReply
    | ErrorReply
)


# ----------------------------------------------------------------------- events


class _Event(msgspec.Struct, tag_field="kind", kw_only=True):
    """An event frame on a subscription: `type` is always "event", `kind` says which."""

    type: Literal["event"] = "event"
    time: float  # Unix seconds


class FireEvent(_Event, tag="fire", kw_only=True):
    """A hook fire that named at least one action; the fields as in `FireRecord`
    (`command` and `cwd` cut as the fire log cuts them), plus the rules' handles."""

    agent: str
    session: str | None = None
    cwd: str | None = None
    command: str = ""
    actions: list[str] = []
    rule_ids: list[str] = []
    handles: list[str] = []
    mode: str = "none"
    delivery: str = "none"


RuleChange = Literal["added", "superseded", "forgotten", "imported", "synced"]


class RuleEvent(_Event, tag="rule", kw_only=True):
    """A change of the memories: one memory (`added`, `superseded`, `forgotten`), or a
    batch (`imported`, `synced`: only the counts `added` and `forgotten`).

    Fields that do not belong to the change are left out of the frame (UNSET), not null.
    `content` is cut to `MAX_EVENT_TEXT` characters, saying how many more there were.
    """

    change: RuleChange
    id: str | msgspec.UnsetType = msgspec.UNSET
    handle: str | msgspec.UnsetType = msgspec.UNSET
    actions: list[str] | msgspec.UnsetType = msgspec.UNSET
    project: str | msgspec.UnsetType | None = msgspec.UNSET
    agent: str | msgspec.UnsetType | None = msgspec.UNSET
    content: str | msgspec.UnsetType = msgspec.UNSET
    replaces: str | msgspec.UnsetType | None = msgspec.UNSET
    added: int | msgspec.UnsetType = msgspec.UNSET
    forgotten: int | msgspec.UnsetType = msgspec.UNSET


class ConfigEvent(_Event, tag="config", kw_only=True):
    """The config file was reloaded; `error` set: it was invalid, the previous one stays."""

    config: str | None = None
    error: str | None = None


class DroppedEvent(_Event, tag="dropped", kw_only=True):
    """The last frame to a subscriber that fell behind: it is dropped and must subscribe again."""

    message: str


Event = FireEvent | RuleEvent | ConfigEvent | DroppedEvent
# Rule content in an event is cut to this many characters (a rule may hold 64 KiB).
MAX_EVENT_TEXT = 4096


class ErrorCode:
    """The values of `ErrorReply.code`."""

    BAD_FRAME = "bad_frame"  # the body is not JSON, or not an object with a known `type`
    UNKNOWN_REQUEST = "unknown_request"  # `type` names no request this daemon knows
    BAD_REQUEST = "bad_request"  # a known request with missing or wrongly typed fields
    FRAME_TOO_LARGE = "frame_too_large"
    NOT_FOUND = "not_found"
    # The id names a rule a project commits in its .mented/ folder: changed in that file.
    PROJECT_RULE = "project_rule"
    INVALID = "invalid"  # a value the store refuses (bad action name, empty content, ...)
    CONFLICT = "conflict"  # e.g. superseding a rule that was already superseded
    BUSY = "busy"  # too many connections at once: this one is refused, retry shortly
    # The store's own failures, none of them a bug of the daemon:
    STORE_FULL = "store_full"  # no room to write (disk full, quota); reads go on, nothing lost
    STORE_DAMAGED = "store_damaged"  # a page or record of the data file is unreadable
    STORE_FAILED = "store_failed"  # the store is unusable (I/O error, ...): the daemon exits
    SYNC_FAILED = "sync_failed"  # git could not sync (remote down, push rejected...): retried
    RECALL_UNAVAILABLE = "recall_unavailable"  # the recall index cannot be used; rules work
    INTERNAL = "internal"  # a bug in the daemon


# ------------------------------------------------------------------- encoding

_encoder = msgspec.json.Encoder()
request_decoder = msgspec.json.Decoder(Request)

if TYPE_CHECKING:
    reply_decoder: msgspec.json.Decoder[Reply]
    event_decoder: msgspec.json.Decoder[Event]

# The clients' decoders, made when first imported (`__getattr__`): the daemon only
# encodes replies and events, and the reply decoder alone took 7 ms of its start-up.
_LAZY_DECODERS: dict[str, Any] = {"reply_decoder": Reply, "event_decoder": Event}


def __getattr__(name: str) -> object:
    kind = _LAZY_DECODERS.get(name)
    if kind is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    decoder = globals()[name] = msgspec.json.Decoder(kind)
    return decoder


def frame(body: bytes) -> bytes:
    """Prefix `body` with its length."""
    return HEADER.pack(len(body)) + body


def encode(message: _Request | _Reply | _Event) -> bytes:
    """One message as a complete frame."""
    return frame(_encoder.encode(message))


class FrameTooLargeError(ValueError):
    """A frame header announces a body over `MAX_FRAME` bytes."""

    def __init__(self, length: int) -> None:
        super().__init__(f"frame of {length} bytes exceeds the maximum of {MAX_FRAME}")
        self.length = length


class IncompleteFrameError(ConnectionResetError):
    """The other end closed the connection before a whole frame arrived."""


def recv_frame(sock: socket.socket) -> bytes:
    """Read one frame from a blocking socket and return its body.

    The announced length is checked before the body is read. The socket's
    timeout, if any, applies to each receive. (The hook shim has its own copy:
    it imports nothing but the standard library, and reads under a deadline.)

    Raises:
        IncompleteFrameError: the connection ended before the whole frame (a
            `ConnectionResetError`, so callers that handle a lost connection need
            nothing more).
        FrameTooLargeError: the header announces more than `MAX_FRAME` bytes.
    """
    (length,) = HEADER.unpack(_recv_exactly(sock, HEADER.size))
    if length > MAX_FRAME:
        raise FrameTooLargeError(length)
    return _recv_exactly(sock, length)


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        # At most 1 MiB per call: `recv(n)` allocates n bytes up front.
        chunk = sock.recv(min(size - len(data), 1 << 20))
        if not chunk:
            raise IncompleteFrameError("the other end closed the connection before a whole frame")
        data += chunk
    return bytes(data)


def decode_request(body: bytes) -> Request | ErrorReply:
    """The request in `body`, or the typed error that answers it."""
    try:
        return request_decoder.decode(body)
    except msgspec.ValidationError as exc:
        text = str(exc)
        if "`$.type`" in text or "missing required field `type`" in text:
            code = ErrorCode.UNKNOWN_REQUEST
            message = f"unknown request type ({text}); see docs/protocol.md for the types"
        elif "Expected `object`" in text and "at `" not in text:
            code, message = ErrorCode.BAD_FRAME, f"a request must be a JSON object: {text}"
        elif text.startswith("Expected `str` matching regex") and " - at `" in text:
            where = text.rpartition(" - at ")[2]  # the only pattern is PathText's
            code = ErrorCode.BAD_REQUEST
            message = f"invalid request: a path cannot hold a NUL byte (at {where})"
        else:
            code, message = ErrorCode.BAD_REQUEST, f"invalid request: {text}"
        return ErrorReply(code=code, message=message)
    except msgspec.DecodeError as exc:
        return ErrorReply(code=ErrorCode.BAD_FRAME, message=f"request is not valid JSON: {exc}")
    except RecursionError:
        # msgspec stops at a nesting depth of about 1000 (e.g. `[[[[...` in a hook's
        # event or an ignored field) with RecursionError, which is not a DecodeError.
        return ErrorReply(
            code=ErrorCode.BAD_FRAME, message="request is not valid JSON: nested too deeply"
        )
