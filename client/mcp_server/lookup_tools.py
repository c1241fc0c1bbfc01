"""The tools of the two other lookups: pinned rules, and facts recalled by topic.

`remember` stores a fact or an event (found again with `recall`); `pin_rule` a
rule handed over at the start of every session.
"""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from mented.memory import PINNED_TAG, TRIGGER_PREFIX, MemoryType, short_handle
from mented.protocol import RecalledReply, RecallFactsRequest
from mented.words import counted
from mented_client.commands.output import describe_scope
from mented_client.mcp_server.bridge import Bridge
from mented_client.mcp_server.schema import (
    PinnedRule,
    ProjectDirArg,
    RecalledFact,
    RecallResult,
    StoredMemory,
    ThisAgentArg,
    ThisProjectArg,
    rule_view,
)


def add_remember(server: MCPServer, bridge: Bridge) -> None:
    """`remember`: a fact or an event, not a rule."""

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


def add_pin_rule(server: MCPServer, bridge: Bridge) -> None:
    """`pin_rule`: a rule for everything, handed over at every session start."""

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


def add_recall(server: MCPServer, bridge: Bridge) -> None:
    """`recall`: remembered facts by their words, best first."""

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
            f"{counted(count, 'fact')} for {query!r}, best first."
            if count
            else f"No remembered fact matches {query!r}."
        )
        return RecallResult(
            facts=[RecalledFact(score=hit.score, fact=rule_view(hit.memory)) for hit in reply.hits],
            note=note,
        )
