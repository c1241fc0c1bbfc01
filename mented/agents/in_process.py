"""An agent that runs mented in its own process: a plugin file of ours, not a hook entry.

Some agents have no process hook but load plugins (pi's extensions): for them
`mentectl hooks install` writes a file that mented ships (package data of
`mented_client`) into the agent's plugin folder, and that file speaks mented's
protocol on the socket itself. The adapter still decodes the events that file
sends and renders what it reads back, as for any agent; what differs is only
where the file goes, described here, and how mentectl installs it
(`mented_client.agents.in_process`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mented.agents.pretooluse import PreToolUseAgent


@dataclass(frozen=True, kw_only=True)
class InProcessAgent(PreToolUseAgent):
    """An agent served by a plugin file of mented's in its plugin folder.

    Attributes:
        extension_resource: the shipped file, in the `mented_client` package.
        extension_name: its name in the agent's plugin folder.
        extensions_dir: the user's plugin folder, inside the agent's config directory.
        project_extensions_dir: a project's plugin folder, inside the project.
    """

    extension_resource: str
    extension_name: str
    extensions_dir: str
    project_extensions_dir: str

    def settings_path(self) -> Path:
        """The user-level plugin file (where `hooks install` writes ours)."""
        return self.config_dir() / self.extensions_dir / self.extension_name

    def project_settings_path(self, project: Path) -> Path:
        return project / self.project_extensions_dir / self.extension_name

    def project_install_paths(self, project: Path) -> list[Path]:
        return [self.project_settings_path(project)]

    @property
    def hook_events(self) -> list[str]:
        """None: there is no hook entry, and no shim command line to write or test-fire."""
        return []
