"""Installing the hook: its command line, and our entry in an agent's JSON settings file.

A settings file is the user's: it holds their other hooks, permissions and
whatever else, in the order and layout they (or their agent) wrote. So nothing
here loads and dumps it: the few values we change are spliced in and out of its
text, and every byte outside our entries stays as it was. One purpose a module:

- `command`: the hook's command line (the real interpreter, the guarded form that
  exits 0 once mented is gone) and reading one back: is it mented's?
- `json_text`: JSON text edited in place (where each value sits; splicing);
- `entries`: our entries in the file, their layouts, and finding them;
- `install`: adding our entries, or updating them where they stand;
- `removal`: taking them out, with what only they needed;
- `mcp`: mented's MCP server's entry in an agent's JSON settings;
- `settings_file`: reading a settings file safely (bounded, never out of a
  project), writing it back, and the install's backup.

Every public name stays importable from `mented_client.hook_settings`.
"""

from __future__ import annotations

from mented_client.hook_settings.command import (
    SHIM_MARKER,
    HookArgv,
    command_argv,
    guarded_command,
    installed_shim,
    is_mented_command,
    is_native_executable,
    real_interpreter,
)
from mented_client.hook_settings.entries import NESTED, MentedEntry, find_entries, missing_events
from mented_client.hook_settings.install import add_hook, has_setting
from mented_client.hook_settings.json_text import SettingsError
from mented_client.hook_settings.mcp import (
    MCP_SERVER_NAME,
    MCP_SERVERS,
    mcp_server,
    with_mcp_server,
    without_mcp_server,
)
from mented_client.hook_settings.removal import remove_hooks
from mented_client.hook_settings.settings_file import (
    MAX_SETTINGS_BYTES,
    backup_kept,
    holds_nothing,
    outside_link,
    read_project_settings,
    read_settings,
    read_settings_at,
    settle_backup,
    unchanged_except,
    without_mented,
    write_without_ours,
)

__all__ = [
    "MAX_SETTINGS_BYTES",
    "MCP_SERVERS",
    "MCP_SERVER_NAME",
    "NESTED",
    "SHIM_MARKER",
    "HookArgv",
    "MentedEntry",
    "SettingsError",
    "add_hook",
    "backup_kept",
    "command_argv",
    "find_entries",
    "guarded_command",
    "has_setting",
    "holds_nothing",
    "installed_shim",
    "is_mented_command",
    "is_native_executable",
    "mcp_server",
    "missing_events",
    "outside_link",
    "read_project_settings",
    "read_settings",
    "read_settings_at",
    "real_interpreter",
    "remove_hooks",
    "settle_backup",
    "unchanged_except",
    "with_mcp_server",
    "without_mcp_server",
    "without_mented",
    "write_without_ours",
]
