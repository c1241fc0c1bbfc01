"""Codex CLI: mented's hook entries in `hooks.json` (`SettingsHooks`), and Codex's trust.

Codex runs a hook only once the user has trusted it in its `/hooks` view, and keeps
that trust in its config.toml by the entry's place in hooks.json
(`mented_client.codex_trust`): an uninstall takes those records out with the
entries, and `setup` names trusting them as the step left to the user.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mented.agents.codex import AGENT, TRUST_FIX
from mented_client import codex_trust
from mented_client.agents.settings_hooks import SettingsHooks

if TYPE_CHECKING:
    from pathlib import Path


class CodexHooks(SettingsHooks):
    """Codex's hook entries, and the trust Codex keeps in them."""

    trust_records = "Codex's trust entries"

    def trust_keys(self, places: list[Path]) -> set[str]:
        return {key for path in places for key in codex_trust.mented_state_keys(path)}

    def user_trust_keys(self) -> set[str]:
        """The user's hooks.json as Codex names it in its keys (`$CODEX_HOME` resolved)."""
        return codex_trust.mented_state_keys()

    def forget_trust(self, keys: set[str]) -> list[str]:
        return codex_trust.forget_trust(keys)

    def trust_step(self) -> str | None:
        return TRUST_FIX


CLIENT = CodexHooks(AGENT)
