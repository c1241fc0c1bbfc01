"""mented's MCP server: the agent's tools to remember, supersede and inspect the user's rules.

`mentectl mcp` runs it on stdio; the agent (Claude Code, Codex, ...) spawns it
once per session. It is a client of the daemon over the socket, like
`mentectl`: every tool call is one short connection, so a daemon restarted in
the middle of a session is simply found again. When the daemon is down, each
tool answers with an error saying how to start it, and the server keeps running.

Rules are memories tagged `trigger:<action>`. The action is checked against
the same action table the daemon uses (its built-ins plus the user's config
file, found through the daemon's status), because a rule for an action the hook
never names would never fire. The known actions are listed in the tool's
description and an unknown one is refused with the closest known names, by the
same check as `mentectl rule add` (`mented.actions.check_action`); a project
directory is resolved as `mentectl` resolves it (`mented_client.scope`).

Every answer names memories by their short handle (`mented.memory.short_handle`,
the same handle the hook shows next to each rule it injects), so the model can
go from "the rule you were just shown" to `supersede_rule` in one step. The
tools also accept full ids.

Built on the official MCP Python SDK (2.x, `mcp.server.mcpserver.MCPServer`),
an optional dependency (`pip install 'mented[mcp]'`): the daemon and the hook
never import it, and `mentectl` imports this module only for `mentectl mcp`.
Tool functions are synchronous; the SDK runs them on worker threads, so the
blocking socket client does not stall the stdio loop.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from mented import __version__
from mented.actions import ActionTable, TableInForce, check_action, load_table_in_force
from mented.agents import DEFAULT_AGENT
from mented.memory import (
    PINNED_TAG,
    TRIGGER_PREFIX,
    InvalidInputError,
    Memory,
    MemoryType,
    short_handle,
    trigger_tag,
)
from mented.paths import config_path as default_config_path
from mented.protocol import (
    ForgetRequest,
    ForgottenReply,
    GetRequest,
    HistoryRequest,
    ListRequest,
    MemoriesReply,
    MemoryReply,
    RecalledReply,
    RecallFactsRequest,
    RecallRequest,
    Request,
    StoredReply,
    StoreRequest,
    SupersededReply,
    SupersedeRequest,
)
from mented_client.commands.output import describe_scope, format_time
from mented_client.connection import Client, DaemonError, NotRunningError, ProtocolError
from mented_client.scope import daemon_table
from mented_client.scope import project_dir as resolve_project_dir

T = TypeVar("T")

SERVER_NAME = "mented"
LIST_LIMIT = 100  # rules per `list_rules` answer by default: enough to find one, not a flood

INSTRUCTIONS = """\
mented keeps the user's rules and hands each one to you right before you run the \
command it governs (a `trigger:<action>` rule, e.g. for git-commit, pr-create).
- The user states how something must be done ("from now on, commit messages are one \
line with a conventional prefix"): remember_rule with the action it governs.
- A fact or an event worth keeping that governs no particular command: remember; \
find facts later by their words with recall (e.g. before asking the user something \
they may have told you in an earlier session).
- A rule for everything you do, not one kind of command ("always answer in British \
English"): pin_rule. Pinned rules reach you at the start of every session; there is \
room for only a handful, so prefer remember_rule whenever the rule is about an action.
- The user changes their mind about an existing rule ("we switched from squash merges \
to rebase"): supersede_rule with the rule's handle (shown in brackets next to each rule \
mented hands you, or found with rules_for_action / list_rules). Do not add a second, \
contradicting rule: the old one would keep firing.
- "What was the old rule?": rule_history.
"""


# ------------------------------------------------------------------ answers


class RuleView(BaseModel):
    """One stored memory, as the tools show it."""

    handle: str = Field(description="short handle: pass it to supersede_rule, rule_history, ...")
    id: str = Field(description="the full id (the handle is its last characters)")
    content: str
    actions: list[str] = Field(description="the actions this is a rule for (empty: a memory)")
    kind: str = Field(description="memory type: procedural (rules), semantic (facts), ...")
    tags: list[str]
    scope: str = Field(description="who sees it: everywhere, or agent=... and/or project=...")
    created: str
    status: Literal["live", "superseded"]
    supersedes: str | None = Field(None, description="handle of the version this replaced")
    superseded_by: str | None = Field(None, description="handle of the version that replaced it")


class StoredRule(BaseModel):
    handle: str
    id: str
    action: str
    scope: str
    note: str


class StoredMemory(BaseModel):
    handle: str
    id: str
    kind: str
    tags: list[str]
    scope: str


class PinnedRule(BaseModel):
    handle: str
    id: str
    scope: str
    note: str


class RecalledFact(BaseModel):
    score: float = Field(description="BM25 relevance, higher is better (within this answer)")
    fact: RuleView


class RecallResult(BaseModel):
    facts: list[RecalledFact]
    note: str


class RuleList(BaseModel):
    rules: list[RuleView]
    note: str


class SupersedeResult(BaseModel):
    new_handle: str
    new_id: str
    new_content: str
    old_handle: str
    old_id: str
    old_content: str
    actions: list[str]
    note: str


class HistoryResult(BaseModel):
    versions: list[RuleView] = Field(description="oldest first; the last one is the current")
    current: str = Field(description="handle of the newest version")
    note: str


class ForgetResult(BaseModel):
    handle: str
    id: str
    content: str
    note: str


def rule_view(memory: Memory) -> RuleView:
    """A memory as the tools show it."""
    return RuleView(
        handle=short_handle(memory.id),
        id=memory.id,
        content=memory.content,
        actions=list(memory.actions),
        kind=str(memory.memory_type),
        tags=list(memory.tags),
        scope=describe_scope(memory.agent, memory.project),
        created=format_time(memory.created_at),
        status="live" if memory.is_live else "superseded",
        supersedes=short_handle(memory.supersedes) if memory.supersedes else None,
        superseded_by=short_handle(memory.superseded_by) if memory.superseded_by else None,
    )


# ------------------------------------------------------------ the daemon side


def describe_actions(table: ActionTable) -> str:
    """The known actions for a tool description: `git-commit` (what it is), ..."""
    if not table.names():
        return "(none: is mented's action table installed?)"
    descriptions = table.descriptions()
    return "; ".join(
        f"{name} ({descriptions[name]})" if descriptions.get(name) else name
        for name in table.names()
    )


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
    ) -> tuple[str, str | None, str | None]:
        """Store a memory scoped as the tool was asked; returns (id, agent, project)."""
        agent = self.agent if this_agent_only else None
        # Naming a directory says which project the memory is for.
        project = self.project_dir(project_dir) if this_project_only or project_dir else None
        request = StoreRequest(
            content=content, memory_type=memory_type, tags=tags, agent=agent, project=project
        )
        return self.request(request, StoredReply).id, agent, project

    def describe_reach(self, action: str, agent: str | None, project: str | None) -> str:
        who = agent or "every agent"
        where = f"in {project} or below it" if project else "in any directory"
        return f"{who} will be shown it right before each `{action}` command run {where}."


# ------------------------------------------------------------------ the server

RuleIdArg = Annotated[
    str,
    Field(
        description="the rule's short handle: the 8 characters in brackets next to the rule "
        "(e.g. 'q3x9k2mz'), or its full 26-character id",
        min_length=1,
    ),
]
ThisProjectArg = Annotated[
    bool,
    Field(description="only in this project: commands run in the project directory or below it"),
]
ProjectDirArg = Annotated[
    str | None,
    Field(
        description="the project directory, when it is not the current one "
        "(implies this_project_only)"
    ),
]
ThisAgentArg = Annotated[
    bool,
    Field(description="only for this agent (the user said it applies to you alone)"),
]


def make_server(
    *, agent: str = DEFAULT_AGENT, socket_path: str | Path | None = None, cwd: str | None = None
) -> MCPServer:
    """The MCP server with its tools, bridging to the daemon at `socket_path`.

    Args:
        agent: the agent this server serves: the scope of "this agent only", and
            whose view `rules_for_action` shows.
        socket_path: the daemon's socket (default: as `mentectl` finds it).
        cwd: the project directory of the session (default: the working directory).
    """
    bridge = Bridge(
        socket_path=Path(socket_path) if socket_path else None,
        agent=agent,
        cwd=os.path.abspath(cwd or os.getcwd()),  # noqa: PTH100, PTH109 - lexical, like the hook's cwd
    )
    in_force = _startup_table(bridge)
    # With what each action is, where the model picks one.
    known_text = describe_actions(in_force.table)
    known_names = ", ".join(in_force.table.names())
    server = MCPServer(
        SERVER_NAME,
        title="mented: the user's rules for actions",
        instructions=INSTRUCTIONS,
        version=__version__,
        log_level="WARNING",
    )

    @server.tool(
        title="Remember a rule for an action",
        description=f"""\
Store a rule about HOW the user wants an action done; mented hands it to you right \
before each command performing that action (e.g. before every `git commit`).
Call it when the user states a lasting preference or correction about a kind of \
command. Example: "from now on, commit messages are one line with a conventional \
prefix" -> remember_rule(action="git-commit", rule="Commit messages: a single line with \
a conventional prefix (feat:, fix:, ...), no emojis").
Write the rule so it reads on its own, without this conversation.
If a rule for the same thing exists already (you were shown it, or rules_for_action \
lists it), call supersede_rule instead, or both versions keep firing.
Known actions: {known_text}.""",
        annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=False),
    )
    def remember_rule(
        action: Annotated[
            str, Field(description="the action the rule governs, e.g. 'git-commit'", min_length=1)
        ],
        rule: Annotated[str, Field(description="the rule, in the user's terms", min_length=1)],
        this_project_only: ThisProjectArg = False,
        project_dir: ProjectDirArg = None,
        this_agent_only: ThisAgentArg = False,
    ) -> StoredRule:
        name = bridge.check_action(action, bridge.table_in_force())
        memory_id, rule_agent, project = bridge.store(
            rule,
            MemoryType.PROCEDURAL,
            [trigger_tag(name)],
            this_project_only=this_project_only,
            project_dir=project_dir,
            this_agent_only=this_agent_only,
        )
        return StoredRule(
            handle=short_handle(memory_id),
            id=memory_id,
            action=name,
            scope=describe_scope(rule_agent, project),
            note=bridge.describe_reach(name, rule_agent, project),
        )

    @server.tool(
        title="Remember a fact or an event",
        description="""\
Store a plain memory: a fact about the user, the project or the environment, or an \
episode worth recalling, that governs no particular command.
Example: "the staging database is rebuilt every Monday" -> remember(content="The \
staging database is rebuilt every Monday morning", kind="fact", tags=["staging"]).
For a rule about how to run a kind of command (commits, PRs, deploys), use \
remember_rule instead: only rules are handed to you at the moment of the action.""",
        annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=False),
    )
    def remember(  # noqa: PLR0913, PLR0917 - the parameters are the tool's schema
        content: Annotated[str, Field(description="the memory, readable on its own", min_length=1)],
        kind: Annotated[
            Literal["fact", "episode"],
            Field(description="fact: true for a while; episode: something that happened"),
        ] = "fact",
        tags: Annotated[
            list[str], Field(description="a few topic words, e.g. ['staging', 'database']")
        ] = [],  # noqa: B006 - pydantic copies defaults
        this_project_only: ThisProjectArg = False,
        project_dir: ProjectDirArg = None,
        this_agent_only: ThisAgentArg = False,
    ) -> StoredMemory:
        for tag in tags:
            if tag.strip().lower() == PINNED_TAG:
                raise ToolError(f"tag {tag!r} would pin this: use pin_rule(rule=...) for that")
            if tag.strip().lower().startswith(TRIGGER_PREFIX):
                raise ToolError(
                    f"tag {tag!r} would make this a rule: use remember_rule(action=..., rule=...)"
                    " so the action is checked against the ones mented knows"
                )
        memory_type = MemoryType.EPISODIC if kind == "episode" else MemoryType.SEMANTIC
        memory_id, memory_agent, project = bridge.store(
            content,
            memory_type,
            list(tags),
            this_project_only=this_project_only,
            project_dir=project_dir,
            this_agent_only=this_agent_only,
        )
        return StoredMemory(
            handle=short_handle(memory_id),
            id=memory_id,
            kind=str(memory_type),
            tags=list(tags),
            scope=describe_scope(memory_agent, project),
        )

    _add_lookup_tools(server, bridge)

    @server.tool(
        title="Rules the hook fires for an action",
        description=f"""\
The rules mented would hand you right before a command performing `action`, here \
(this agent, this project), exactly as the hook picks them: newest first, at most as \
many as the hook shows. Each has a handle for supersede_rule / rule_history / forget_rule.
Call it before adding a rule (is there one to supersede?) or when the user asks what \
their rules for something are. Example: rules_for_action(action="git-commit").
Known actions: {known_names}.""",
        annotations=ToolAnnotations(read_only_hint=True),
    )
    def rules_for_action(
        action: Annotated[str, Field(description="e.g. 'git-commit'", min_length=1)],
        project_dir: Annotated[
            str | None,
            Field(description="look from this directory instead of the current project"),
        ] = None,
    ) -> RuleList:
        in_force = bridge.table_in_force()
        name = bridge.check_action(action, in_force)
        k = in_force.config.hook.k
        where = bridge.project_dir(project_dir)
        reply = bridge.request(
            RecallRequest(action=name, agent=bridge.agent, cwd=where, k=k),
            MemoriesReply,
        )
        count = len(reply.memories)
        note = (
            f"{count} rule{'s' if count != 1 else ''} fire for `{name}` for {bridge.agent} "
            f"in {where}, newest first (the hook shows at most {k})."
            if count
            else f"No rule fires for `{name}` for {bridge.agent} in {where}."
        )
        return RuleList(rules=[rule_view(m) for m in reply.memories], note=note)

    @server.tool(
        title="List all rules",
        description="""\
Every stored rule, for every action, agent and project, newest first, with its \
scope and handle. Call it when the user asks what mented knows, or to find a rule \
whose action you do not know. Example: list_rules(), list_rules(action="pr-create"), \
list_rules(include_superseded=true) to see replaced versions too.""",
        annotations=ToolAnnotations(read_only_hint=True),
    )
    def list_rules(
        action: Annotated[
            str | None, Field(description="only rules for this action, e.g. 'git-commit'")
        ] = None,
        include_superseded: Annotated[
            bool, Field(description="also the old versions of superseded rules")
        ] = False,
        limit: Annotated[int, Field(description="at most this many", ge=1, le=1000)] = LIST_LIMIT,
    ) -> RuleList:
        name = None
        if action:
            name = bridge.check_action(action, bridge.table_in_force())
        reply = bridge.request(
            ListRequest(
                action=name,
                rules_only=True,
                include_superseded=include_superseded,
                limit=limit,
            ),
            MemoriesReply,
        )
        count = len(reply.memories)
        what = f"for `{name}`" if name else "for all actions"
        more = " (the limit: there may be more)" if count >= limit else ""
        return RuleList(
            rules=[rule_view(m) for m in reply.memories],
            note=f"{count} rule{'s' if count != 1 else ''} {what}{more}, newest first.",
        )

    @server.tool(
        title="Replace a rule",
        description="""\
Replace a rule with a new version when the user changes their mind: the old version \
stops being handed to you at once, and stays in the rule's history.
Example: the user says "we switched from squash merges to rebase" while you were shown \
"- [q3x9k2mz] Merge PRs with squash" -> supersede_rule(rule_id="q3x9k2mz", \
new_rule="Merge PRs with rebase, never squash").
The new version keeps the old one's action and scope. Answers with the new handle and \
the old text.""",
        annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=False),
    )
    def supersede_rule(
        rule_id: RuleIdArg,
        new_rule: Annotated[str, Field(description="the rule as it is now", min_length=1)],
    ) -> SupersedeResult:
        reply = bridge.request(SupersedeRequest(id=rule_id, content=new_rule), SupersededReply)
        new_handle = short_handle(reply.id)
        return SupersedeResult(
            new_handle=new_handle,
            new_id=reply.id,
            new_content=new_rule,
            old_handle=short_handle(reply.old.id),
            old_id=reply.old.id,
            old_content=reply.old.content,
            actions=list(reply.old.actions),
            note=f"The old version no longer fires; rule_history(rule_id={new_handle!r}) "
            "shows both.",
        )

    @server.tool(
        title="A rule's history",
        description="""\
Every version of a rule, oldest first, the current one last: what the rule was before \
it was superseded, and when. Call it when the user asks "what was the old rule?".
Example: rule_history(rule_id="q3x9k2mz") (any version's handle works).""",
        annotations=ToolAnnotations(read_only_hint=True),
    )
    def rule_history(rule_id: RuleIdArg) -> HistoryResult:
        reply = bridge.request(HistoryRequest(id=rule_id), MemoriesReply)
        versions = [rule_view(m) for m in reply.memories]
        if not versions:
            raise ToolError(f"no history for {rule_id!r}")
        count = len(versions)
        note = (
            f"{count} versions, oldest first; only the last one fires."
            if count > 1
            else "This rule was never superseded."
        )
        return HistoryResult(versions=versions, current=versions[-1].handle, note=note)

    @server.tool(
        title="Forget a rule",
        description="""\
Delete a rule (or any memory) for good: it stops firing and leaves no history. Only \
when the user asks to drop a rule entirely; when the rule changed, use supersede_rule \
so the old version stays in the history.
Example: forget_rule(rule_id="q3x9k2mz").""",
        annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True),
    )
    def forget_rule(rule_id: RuleIdArg) -> ForgetResult:
        memory = bridge.request(GetRequest(id=rule_id), MemoryReply).memory
        reply = bridge.request(ForgetRequest(id=memory.id), ForgottenReply)
        return ForgetResult(
            handle=short_handle(reply.id),
            id=reply.id,
            content=memory.content,
            note="Forgotten: it no longer fires and is gone from the history.",
        )

    return server


def _add_lookup_tools(server: MCPServer, bridge: Bridge) -> None:
    """The tools of the two other lookups: pinned rules and facts recalled by topic."""

    @server.tool(
        title="Pin a rule for every session",
        description="""\
Store a rule that holds for EVERYTHING you do, whatever the task; mented hands the \
pinned rules to you at the start of every session and after the context is compacted \
or cleared. Example: "always answer in British English" -> pin_rule(rule="Answer in \
British English").
There is room for only a handful (mented refuses past the cap and says how many there \
are): when the rule is about one kind of command (commits, pushes, deploys), use \
remember_rule, which hands it over right before that command.""",
        annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=False),
    )
    def pin_rule(
        rule: Annotated[str, Field(description="the rule, in the user's terms", min_length=1)],
        this_project_only: ThisProjectArg = False,
        project_dir: ProjectDirArg = None,
        this_agent_only: ThisAgentArg = False,
    ) -> PinnedRule:
        memory_id, rule_agent, project = bridge.store(
            rule,
            MemoryType.PROCEDURAL,
            [PINNED_TAG],
            this_project_only=this_project_only,
            project_dir=project_dir,
            this_agent_only=this_agent_only,
        )
        who = rule_agent or "every agent"
        where = f"in {project} or below it" if project else "anywhere"
        return PinnedRule(
            handle=short_handle(memory_id),
            id=memory_id,
            scope=describe_scope(rule_agent, project),
            note=f"{who} will be handed it at the start of every session {where}.",
        )

    @server.tool(
        title="Recall facts by topic",
        description="""\
Find remembered facts (stored with remember) by their words, best match first \
(BM25 ranking: every word counts, rarer words and tags count more), as seen from \
this project and agent. Call it when the user refers to something they told you \
before, or before asking them for a detail they may have given already.
Example: recall(query="staging database").""",
        annotations=ToolAnnotations(read_only_hint=True),
    )
    def recall(
        query: Annotated[
            str, Field(description="a few words about the topic, e.g. 'staging database'")
        ],
        k: Annotated[int, Field(description="at most this many facts", ge=1, le=50)] = 5,
        project_dir: Annotated[
            str | None,
            Field(description="look from this directory instead of the current project"),
        ] = None,
    ) -> RecallResult:
        where = bridge.project_dir(project_dir)
        reply = bridge.request(
            RecallFactsRequest(query=query, agent=bridge.agent, cwd=where, k=k), RecalledReply
        )
        count = len(reply.hits)
        note = (
            f"{count} fact{'s' if count != 1 else ''} for {query!r}, best first."
            if count
            else f"No remembered fact matches {query!r}."
        )
        return RecallResult(
            facts=[RecalledFact(score=hit.score, fact=rule_view(hit.memory)) for hit in reply.hits],
            note=note,
        )


def _startup_table(bridge: Bridge) -> TableInForce:
    """The actions for the tool descriptions: the daemon's config if it answers, else ours."""
    try:
        # Briefly: the agent waits for the server to start, and a hung daemon must not stall it.
        return bridge.table_in_force(timeout=1.0)
    except ToolError:
        return load_table_in_force(default_config_path())


def run(*, agent: str, socket_path: str | Path | None, cwd: str | None = None) -> None:
    """Serve on stdin/stdout until the client closes the connection."""
    make_server(agent=agent, socket_path=socket_path, cwd=cwd).run("stdio")
