"""Kilo Code CLI (`kilo`, npm `@kilocode/cli`): opencode's fork, mented's opencode plugin.

Kilo is opencode with its own names (Kilo-Org/kilocode, `packages/opencode/`): the same
plugin API and hooks (`tool.execute.before` and `after`,
`experimental.chat.system.transform`, the `event` hook), the same tools, so the same
plugin and the same events (`mented.agents.opencode`), with the agent's name written in
as `kilo`. Only the folders differ, from Kilo's source:

- `src/global/index.ts`: `const app = "kilo"`, so `Global.Path.config` is
  `$XDG_CONFIG_HOME/kilo`, else `~/.config/kilo`;
- `src/config/paths.ts` `directories`: that folder, then `.kilocode` and `.kilo` from the
  project up, `~/.kilocode`, `~/.kilo` and `$KILO_CONFIG_DIR`; each one's plugins are
  `{plugin,plugins}/*.{ts,js}`, as in opencode. Kilo's documents name `plugin/`.

So `hooks install kilo` writes `~/.config/kilo/plugin/mented.js` (`--project DIR`:
`DIR/.kilo/plugin/mented.js`). Not run against the Kilo binary here (npm `@kilocode/cli`
7.8.1 ships it in per-platform packages, and it needs a model).
"""

from __future__ import annotations

import dataclasses

from mented.agents.opencode import AGENT as OPENCODE
from mented.agents.pretooluse import McpSettings

AGENT = dataclasses.replace(
    OPENCODE,
    name="kilo",
    title="Kilo Code CLI",
    config_root_name="kilo",
    config_dir_name=".config/kilo",
    settings_name="plugin/mented.js",
    plugin_folder="plugin",
    project_settings_file=".kilo/plugin/mented.js",
    no_project_local_file=(
        "Kilo has no uncommitted project folder: DIR/.kilo/plugin/mented.js names this "
        "machine's socket, so keep it out of git (add it to .git/info/exclude), or install "
        "for your user instead (`mentectl hooks install kilo`)."
    ),
    mcp=McpSettings(
        how="by-hand",
        file_name="kilo.json",
        note="add it by hand as the member `mcp.mented` of ~/.config/kilo/kilo.json, "
        '{"type": "local", "command": [...]}, with this command',
    ),
)
