"""The daemon side of the tools: one short connection per call, errors the model can act on."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from mcp.server.mcpserver.exceptions import ToolError

from mented.actions import TableInForce, check_action
from mented.memory import InvalidInputError, MemoryType
from mented.protocol import Request, StoredReply, StoreRequest
from mented_client.connection import Client, DaemonError, NotRunningError, ProtocolError
from mented_client.scope import daemon_table
from mented_client.scope import project_dir as resolve_project_dir

T = TypeVar("T")


@dataclass(frozen=True)
class Bridge:
    """What the tools share: where the daemon is, and who and where the agent is."""

    socket_path: Path | None
    agent: str
    cwd: str

    def talk(self, exchange: Callable[[Client], T], *, timeout: float = 10.0) -> T:
        """`exchange` with the daemon on one connection, its errors turned into tool errors."""
        try:
            with Client(
                self.socket_path, connect_timeout=min(timeout, 2.0), timeout=timeout
            ) as client:
                return exchange(client)
        except NotRunningError as exc:
            raise ToolError(
                f"{exc}. The rules are safe on disk; retry this call once the daemon is up."
            ) from exc
        except DaemonError as exc:
            raise ToolError(f"mented refused: {exc.message}") from exc
        except ProtocolError as exc:
            raise ToolError(f"{exc}; is `mentectl status` healthy?") from exc

    def request(self, message: Request, kind: type[T], *, timeout: float = 10.0) -> T:
        """One request to the daemon, its errors turned into tool errors the model can act on."""
        reply: T = self.talk(lambda client: client.expect(message, kind), timeout=timeout)
        return reply

    def table_in_force(self, *, timeout: float = 10.0) -> TableInForce:
        """The daemon's action table (read from the config file the daemon uses)."""
        in_force: TableInForce = self.talk(daemon_table, timeout=timeout)
        return in_force

    def check_action(self, action: str, in_force: TableInForce) -> str:
        """`action` normalized, or a tool error naming the closest known actions."""
        try:
            return check_action(in_force.table, action, problem=in_force.problem)
        except InvalidInputError as exc:
            raise ToolError(f"{exc} Or store the text with `remember` as a plain memory.") from exc

    def project_dir(self, directory: str | None) -> str:
        """An absolute project directory: `directory` (relative to ours), else our cwd."""
        if not directory:
            return self.cwd
        try:
            path: str = resolve_project_dir(directory, base=self.cwd)
        except InvalidInputError as exc:
            raise ToolError(str(exc)) from exc
        return path

    def store(  # noqa: PLR0913 - a memory's fields and the tool's scope flags
        self,
        content: str,
        memory_type: MemoryType,
        tags: list[str],
        *,
        this_project_only: bool,
        project_dir: str | None,
        this_agent_only: bool,
        checks: list[str] | None = None,
    ) -> tuple[str, str | None, str | None]:
        """Store a memory scoped as the tool was asked; returns (id, agent, project)."""
        agent = self.agent if this_agent_only else None
        # Naming a directory says which project the memory is for.
        project = self.project_dir(project_dir) if this_project_only or project_dir else None
        request = StoreRequest(
            content=content,
            memory_type=memory_type,
            tags=tags,
            agent=agent,
            project=project,
            checks=checks or [],
        )
        return self.request(request, StoredReply).id, agent, project

    def describe_reach(self, action: str, agent: str | None, project: str | None) -> str:
        who = agent or "every agent"
        where = f"in {project} or below it" if project else "in any directory"
        return f"{who} will be shown it right before each `{action}` command run {where}."
