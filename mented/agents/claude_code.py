"""Claude Code: a `PreToolUse` command hook with matcher `Bash`.

Settings: `~/.claude/settings.json` (user; `$CLAUDE_CONFIG_DIR/settings.json` when
that is set) or, for one project, `<project>/.claude/settings.local.json`: Claude
Code's file for one person's project settings, which teams do not commit (the
hook names this machine's interpreter and socket). `<project>/.claude/settings.json`,
the team's file, is where older installs wrote; it is still looked at.
Claude Code cuts context strings over 10,000 characters, and delivers a
PreToolUse `additionalContext` alongside the tool result, i.e. after the
command ran; only a deny reaches the model before it runs (gate mode).

Since 2.1.85 a hook handler may carry an `if` condition in permission-rule
syntax, and Claude Code starts the handler only when it matches (since 2.1.89
checked on each subcommand of a compound command, and a command it cannot parse
matches every condition). One rule per handler, `*` the only wildcard: so the
installer writes one handler per program, `Bash(*git *)`, and commands that
mention no such program start no process at all (mented/registration.py).
Older versions ignore `if` and run the hook for every command, as before.

`PostToolUse` (installed for the commands that can commit, with the same `if`
pre-filters) is where a commit whose message was unknown before it ran is checked
(mented.afterchecks). Its stdin is the `PreToolUse` event with
`hook_event_name` "PostToolUse" and `tool_response`; it runs after a tool that
succeeded (a failing one sends `PostToolUseFailure`, not installed), and its
`hookSpecificOutput.additionalContext` is "text injected into model context"
(the hooks reference shipped in 2.1.197), seen in the next model request.

MCP servers (user scope): `mcpServers` in `~/.claude.json` (`$CLAUDE_CONFIG_DIR/.claude.json`
when that is set), written through `claude mcp add --scope user`, because running
sessions rewrite that file all the time; `claude mcp list` lists them.
"""

from __future__ import annotations

from mented.agents.pretooluse import POST_TOOL_USE, McpSettings, PreToolUseAgent

AGENT = PreToolUseAgent(
    pinned_rules=True,
    name="claude-code",
    title="Claude Code",
    config_dir_env="CLAUDE_CONFIG_DIR",
    config_dir_name=".claude",
    settings_name="settings.json",
    project_settings_file=".claude/settings.json",
    project_local_file=".claude/settings.local.json",
    edit_tools=frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"}),
    shell_condition="Bash({})",
    post_tool_event=POST_TOOL_USE,
    user_notices=True,  # `systemMessage`: shown to the user, not the model
    mcp=McpSettings(
        how="claude-cli",
        file_name=".claude.json",
        beside_config_dir=True,
        list_command="claude mcp list",
    ),
)
