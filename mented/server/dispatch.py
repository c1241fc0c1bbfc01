"""The dispatch table: a request decoded, answered by its family's method, errors as replies."""

from __future__ import annotations

import errno
import functools
import os
import time
from typing import TYPE_CHECKING

from mented.activity import log_reply
from mented.first_answers import HOOK_PREFIX as _HOOK_PREFIX
from mented.log import log
from mented.memory import InvalidInputError
from mented.protocol import (
    HEADER,
    MAX_FRAME,
    ActionsRequest,
    ErrorCode,
    ErrorReply,
    ExportRequest,
    ForgetRequest,
    GetRequest,
    HistoryRequest,
    HookRequest,
    ImportRequest,
    ListRequest,
    LogRequest,
    RecallFactsRequest,
    RecallRequest,
    ReindexRequest,
    ReloadRequest,
    Reply,
    ReportRequest,
    Request,
    ShutdownRequest,
    StatusRequest,
    StoreRequest,
    SubscribeRequest,
    SupersedeRequest,
    SyncRequest,
    TrustRequest,
    decode_request,
    encode,
    frame,
)
from mented.server.facts import RecallUnavailableError
from mented.server.subscriptions import _Subscriptions
from mented.store import (
    ConflictError,
    NotFoundError,
    StoreDamagedError,
    StoreError,
    StoreFailedError,
    StoreFullError,
)
from mented.sync import SyncError
from mented.team import ProjectRuleError

if TYPE_CHECKING:
    from mented.server.transport import _Connection

_NO_ROOM_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


# Requests long by design (they walk the store or run git): their time is not the
# latency `status` reports, which is what a hook waits for (issue 23: a 60 s sync
# timeout once read as "p99 60184078 µs").
_UNTIMED = (SyncRequest, ImportRequest, ExportRequest, ReindexRequest)
# Requests that write to the store or read the recall index: they open Tantivy.
_USES_RECALL = (
    StoreRequest,
    SupersedeRequest,
    ForgetRequest,
    ImportRequest,
    SyncRequest,
    RecallFactsRequest,
    ReindexRequest,
)


# Requests that write to the store: one that succeeds shows there is room again.
_WRITES = (StoreRequest, SupersedeRequest, ForgetRequest, ImportRequest)


class _Dispatch(_Subscriptions):
    """One request body in, one reply frame out."""

    async def _dispatch(self, body: bytes, conn: _Connection) -> bytes:
        """The complete reply frame for one request body (`conn`: whose, for `subscribe`)."""
        received = time.monotonic()
        request = decode_request(body)
        conn.untimed = isinstance(request, _UNTIMED)
        if isinstance(request, HookRequest):
            return await self._answer_hook_request(request, received, conn)
        if isinstance(request, SubscribeRequest):
            return encode(self._subscribe(request, conn))
        if isinstance(request, ErrorReply):
            if body.startswith(_HOOK_PREFIX):
                # A hook envelope around stdin that was not JSON: the shim splices
                # stdin in unparsed, and a hook is answered with silence, never an error.
                return frame(b"")
            return encode(request)
        try:
            reply = await self._answer(request)
        except NotFoundError as exc:
            reply = ErrorReply(code=ErrorCode.NOT_FOUND, message=str(exc))
        except ProjectRuleError as exc:
            reply = ErrorReply(code=ErrorCode.PROJECT_RULE, message=str(exc))
        except ConflictError as exc:
            reply = ErrorReply(code=ErrorCode.CONFLICT, message=str(exc))
        except StoreFullError as exc:
            reply = ErrorReply(code=ErrorCode.STORE_FULL, message=str(exc))
            self._store_full = "the last write to the store found no room"
        except StoreDamagedError as exc:
            reply = ErrorReply(code=ErrorCode.STORE_DAMAGED, message=str(exc))
        except StoreFailedError as exc:
            reply = ErrorReply(code=ErrorCode.STORE_FAILED, message=str(exc))
            self._stop_for_store_failure()
        except SyncError as exc:
            reply = ErrorReply(code=ErrorCode.SYNC_FAILED, message=str(exc))
        except RecallUnavailableError as exc:
            reply = ErrorReply(code=ErrorCode.RECALL_UNAVAILABLE, message=str(exc))
        except (InvalidInputError, StoreError) as exc:
            reply = ErrorReply(code=ErrorCode.INVALID, message=str(exc))
        except OSError as exc:
            reply = self._os_error_reply(request, exc)
        except Exception as exc:  # noqa: BLE001 - a bug must cost one request, never the daemon
            log.exception("request_failed", request=type(request).__name__)
            reply = ErrorReply(code=ErrorCode.INTERNAL, message=f"internal error: {exc!r}")
        else:
            if isinstance(request, _WRITES):
                self._store_full = None  # it wrote: there is room again
        answer = encode(reply)
        if len(answer) - HEADER.size > MAX_FRAME:
            # Clients refuse a frame over MAX_FRAME, as the protocol promises them, so
            # sent whole (a listing of every memory of a big store) it would read as a
            # broken connection. Say what to ask for instead.
            answer = encode(
                ErrorReply(
                    code=ErrorCode.FRAME_TOO_LARGE,
                    message=f"the answer would be {len(answer) - HEADER.size} bytes, over the "
                    f"{MAX_FRAME}-byte frame limit; ask for fewer (a limit, e.g. "
                    "`mentectl rule list -k 100`, or a filter)",
                )
            )
        return answer

    async def _answer(self, request: Request) -> Reply:
        """The dispatch table: each request to the method of its family that answers it."""
        if isinstance(request, _USES_RECALL):
            await self._open_recall_once()
            self._note_recall_use()
        match request:
            case RecallRequest():  # rule_reads.py
                return await self._answer_recall(request)
            case GetRequest(id=memory_id):
                return await self._get(memory_id)
            case ListRequest():
                return await self._list(request)
            case HistoryRequest(id=memory_id):
                return await self._history(memory_id)
            case ActionsRequest():
                return self._answer_actions()
            case StoreRequest():  # rule_writes.py
                return await self._answer_store(request)
            case SupersedeRequest():
                return await self._answer_supersede(request)
            case ForgetRequest(id=memory_id):
                return await self._answer_forget(memory_id)
            case TrustRequest(dir=directory):
                return await self._answer_trust(directory)
            case ExportRequest():  # travel.py
                return await self._scan(self._export)
            case ImportRequest(path=path, shown_as=shown_as):
                return await self._answer_import(path, shown_as)
            case SyncRequest():
                return await self._answer_sync(request)
            case RecallFactsRequest():  # facts.py
                return await self._recall_facts(request)
            case ReindexRequest():
                return await self._answer_reindex()
            case ReportRequest():  # fires.py
                return await self._answer_report(request)
            case LogRequest():
                return await self._scan(functools.partial(log_reply, self.activity, request))
            case StatusRequest():  # admin.py
                return self.status()
            case ReloadRequest():
                return self._answer_reload()
            case ShutdownRequest():
                return self._answer_shutdown()
            case _:  # HookRequest and SubscribeRequest are answered before (`_dispatch`)
                return ErrorReply(code=ErrorCode.UNKNOWN_REQUEST, message="unsupported request")

    def _os_error_reply(self, request: Request, exc: OSError) -> ErrorReply:
        """A file the request wrote beside the store (a trust record, an export, the
        recall index) failed: a full disk is `store_full`, as for the store itself."""
        if exc.errno not in _NO_ROOM_ERRNOS:
            log.exception("request_failed", request=type(request).__name__)
            return ErrorReply(code=ErrorCode.INTERNAL, message=f"internal error: {exc!r}")
        where = exc.filename or self.options.data_dir
        message = (
            f"cannot write {where}: {os.strerror(exc.errno).lower()}. Nothing acknowledged "
            f"was lost; free some space on the disk of {self.options.data_dir} and try again"
        )
        if isinstance(request, RecallFactsRequest):
            return ErrorReply(code=ErrorCode.RECALL_UNAVAILABLE, message=message)
        return ErrorReply(code=ErrorCode.STORE_FULL, message=message)
