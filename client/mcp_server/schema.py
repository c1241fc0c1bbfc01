"""What the model sends and gets: the tools' shared arguments and their answers."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from mented.memory import Memory, short_handle
from mented_client.commands.output import describe_scope, format_time


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
    checks: list[str] = Field(
        default_factory=list, description="checks on the command, tested before it runs"
    )


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
    versions: list[RuleView] = Field(
        description="oldest first, each after the versions it replaces; the last one is current"
    )
    current: str = Field(description="handle of the newest current version")
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
        checks=list(memory.checks),
    )


ChecksArg = Annotated[
    list[str] | None,
    Field(
        description="checks mented tests on the command before it runs, each 'FIELD KIND "
        "[ARG]': e.g. 'subject max 72', 'message single-line', 'message no-emoji', "
        "'subject matches ^(feat|fix): ', 'flags forbid --no-verify' (docs/checks.md); "
        "git-commit has message, subject, body, trailers, flags; pr-create has title, "
        "body, base, head, draft",
    ),
]

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
