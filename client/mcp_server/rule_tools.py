"""The tools for rules handed over right before an action, and for changing any rule.

`remember_rule` stores one, `rules_for_action` and `list_rules` find them,
`supersede_rule`, `rule_history` and `forget_rule` change one or show its past.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from mented.memory import MemoryType, short_handle, trigger_tag
from mented.protocol import (
    ForgetRequest,
    ForgottenReply,
    GetRequest,
    HistoryRequest,
    ListRequest,
    MemoriesReply,
    MemoryReply,
    RecallRequest,
    SupersededReply,
    SupersedeRequest,
)
from mented.words import counted
from mented_client.commands.output import describe_scope
from mented_client.mcp_server.bridge import Bridge
from mented_client.mcp_server.schema import (
    ChecksArg,
    ForgetResult,
    HistoryResult,
    ProjectDirArg,
    RuleIdArg,
    RuleList,
    StoredRule,
    SupersedeResult,
    ThisAgentArg,
    ThisProjectArg,
    rule_view,
)

LIST_LIMIT = 100  # rules per `list_rules` answer by default: enough to find one, not a flood


def add_remember_rule(server: MCPServer, bridge: Bridge, known_text: str) -> None:
    """`remember_rule`: a rule for an action, checked against the known actions."""

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
Where the rule can be tested on the command, add `checks` (e.g. ["message single-line", \
"message no-emoji"]): mented then stops a command that breaks it, with the reason.
If a rule for the same thing exists already (you were shown it, or rules_for_action \
lists it), call supersede_rule instead, or both versions keep firing.
Known actions: {known_text}.""",
        annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=False),
    )
    def remember_rule(  # noqa: PLR0913, PLR0917 - the tool's arguments
        action: Annotated[
            str, Field(description="the action the rule governs, e.g. 'git-commit'", min_length=1)
        ],
        rule: Annotated[str, Field(description="the rule, in the user's terms", min_length=1)],
        this_project_only: ThisProjectArg = False,
        project_dir: ProjectDirArg = None,
        this_agent_only: ThisAgentArg = False,
        checks: ChecksArg = None,
    ) -> StoredRule:
        name = bridge.check_action(action, bridge.table_in_force())
        memory_id, rule_agent, project = bridge.store(
            rule,
            MemoryType.PROCEDURAL,
            [trigger_tag(name)],
            this_project_only=this_project_only,
            project_dir=project_dir,
            this_agent_only=this_agent_only,
            checks=checks,
        )
        return StoredRule(
            handle=short_handle(memory_id),
            id=memory_id,
            action=name,
            scope=describe_scope(rule_agent, project),
            note=bridge.describe_reach(name, rule_agent, project),
        )


def add_rules_for_action(server: MCPServer, bridge: Bridge, known_names: str) -> None:
    """`rules_for_action`: the rules the hook would hand over here for an action."""

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
            f"{counted(count, 'rule')} fire for `{name}` for {bridge.agent} "
            f"in {where}, newest first (the hook shows at most {k})."
            if count
            else f"No rule fires for `{name}` for {bridge.agent} in {where}."
        )
        return RuleList(rules=[rule_view(m) for m in reply.memories], note=note)


def add_list_rules(server: MCPServer, bridge: Bridge) -> None:
    """`list_rules`: every stored rule, newest first."""

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
            note=f"{counted(count, 'rule')} {what}{more}, newest first.",
        )


def add_supersede_rule(server: MCPServer, bridge: Bridge) -> None:
    """`supersede_rule`: a new version of a rule; the old one stops firing."""

    @server.tool(
        title="Replace a rule",
        description="""\
Replace a rule with a new version when the user changes their mind: the old version \
stops being handed to you at once, and stays in the rule's history.
Example: the user says "we switched from squash merges to rebase" while you were shown \
"- [q3x9k2mz] Merge PRs with squash" -> supersede_rule(rule_id="q3x9k2mz", \
new_rule="Merge PRs with rebase, never squash").
The new version keeps the old one's action, scope and checks (give `checks` to replace \
them). Answers with the new handle and the old text.""",
        annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=False),
    )
    def supersede_rule(
        rule_id: RuleIdArg,
        new_rule: Annotated[str, Field(description="the rule as it is now", min_length=1)],
        checks: ChecksArg = None,
    ) -> SupersedeResult:
        reply = bridge.request(
            SupersedeRequest(id=rule_id, content=new_rule, checks=checks), SupersededReply
        )
        new_handle = short_handle(reply.id)
        merged = bridge.request(GetRequest(id=reply.id), MemoryReply).memory.merges
        note = f"The old version no longer fires; rule_history(rule_id={new_handle!r}) shows both."
        if merged:
            others = ", ".join(map(short_handle, merged))
            note = (
                f"The old version and the other current ones ({others}) no longer fire: the "
                f"fork is settled; rule_history(rule_id={new_handle!r}) shows them all."
            )
        return SupersedeResult(
            new_handle=new_handle,
            new_id=reply.id,
            new_content=new_rule,
            old_handle=short_handle(reply.old.id),
            old_id=reply.old.id,
            old_content=reply.old.content,
            actions=list(reply.old.actions),
            note=note,
        )


def add_rule_history(server: MCPServer, bridge: Bridge) -> None:
    """`rule_history`: every version of a rule, oldest first."""

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
        live = [short_handle(memory.id) for memory in reply.memories if memory.is_live]
        note = (
            f"{count} versions, oldest first; only the last one fires."
            if count > 1
            else "This rule was never superseded."
        )
        if len(live) > 1:
            note = (
                f"{count} versions, oldest first; {len(live)} of them are current ("
                f"{', '.join(live)}): it was superseded apart on two machines. Superseding "
                "one of them settles it."
            )
        elif not live:
            note = f"{count} versions, oldest first; none fires: the current one was forgotten."
        current = live[-1] if live else versions[-1].handle
        return HistoryResult(versions=versions, current=current, note=note)


def add_forget_rule(server: MCPServer, bridge: Bridge) -> None:
    """`forget_rule`: delete a rule (or any memory) for good."""

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
