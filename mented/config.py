"""The user's config file: hook settings, delivery modes, daemon settings, actions.

One TOML file (see `mented.paths.config_path`). Every section is optional::

    [hook]
    k = 6                      # rules per action handed to the agent
    max_context_chars = 4000   # cap on the text injected into the agent's context
    budget_ms = 250            # read only by `mentectl doctor` (see below), not by the hook
    dedupe_seconds = 5         # the same event twice within this long is answered once
    gate_session_ttl_s = 43200 # gate mode forgets a session this long after its last answer

    [delivery]
    git-commit = "gate"        # "context" (default) or "gate"

    [daemon]
    idle_timeout_s = 0         # with socket activation: exit after this long idle (0 = never)
    connection_idle_s = 60     # close a client connection idle for this long

    [actions.my-deploy]        # see docs/actions.md (mented.actions owns this part)
    ...

A bad file is reported with its path and line; the daemon keeps what it had.

`[hook] budget_ms` does not set the hook's deadline: the shim reads no config
file, and stops at `$MENTED_HOOK_BUDGET_MS` in the agent's environment (default
250 ms). `mentectl doctor` fails a sample hook call slower than
`$MENTED_HOOK_BUDGET_MS` in its own environment, else than this value; set it to
the deadline the agent's environment gives the shim. The daemon ignores it.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

DeliveryMode = Literal["context", "gate"]


class ConfigError(Exception):
    """The config file cannot be used; the message names the file (and line) and the fix."""


class HookSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    # Bounds keep a typo from silencing the hook for good (k = 0 fires nothing).
    k: Annotated[int, msgspec.Meta(ge=1, le=50)] = 6
    # Claude Code cuts context over 10,000 characters: stay under it with a margin.
    max_context_chars: Annotated[int, msgspec.Meta(ge=200, le=9500)] = 4000
    # Only `mentectl doctor`'s threshold: the shim reads no config (MENTED_HOOK_BUDGET_MS).
    budget_ms: Annotated[int, msgspec.Meta(ge=10, le=10_000)] = 250
    dedupe_seconds: Annotated[float, msgspec.Meta(ge=0, le=3600)] = 5.0
    gate_session_ttl_s: Annotated[float, msgspec.Meta(gt=0)] = 12 * 3600


class DaemonSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    idle_timeout_s: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    # 0 would drop every connection before reading it.
    connection_idle_s: Annotated[float, msgspec.Meta(gt=0, le=86_400)] = 60.0


class Config(msgspec.Struct, kw_only=True):
    """The settings in force. `actions` is the raw `[actions]` table for mented.actions."""

    path: Path | None = None
    hook: HookSettings = msgspec.field(default_factory=HookSettings)
    daemon: DaemonSettings = msgspec.field(default_factory=DaemonSettings)
    delivery: dict[str, DeliveryMode] = msgspec.field(default_factory=dict)
    actions: dict[str, Any] = msgspec.field(default_factory=dict)
    text: str = ""


def read_toml(path: Path) -> tuple[dict[str, Any], str]:
    """The parsed document and its text; a missing file is an empty document.

    Raises:
        ConfigError: the file cannot be read or is not valid TOML (with line and column).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}, ""
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the config file: {exc}") from exc
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    except RecursionError as exc:  # tomllib recurses on nested arrays and tables
        raise ConfigError(f"{path}: nested too deeply to be a mented config") from exc


def line_of(text: str, needle: str) -> int | None:
    """The 1-based line where `needle` first appears in `text`, for error messages."""
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return number
    return None


def load_config(path: Path | None) -> Config:
    """Read and validate the config file at `path` (None: built-in defaults only).

    Raises:
        ConfigError: the file is unreadable, not TOML, or a section has a bad value.
    """
    if path is None:
        return Config()
    doc, text = read_toml(path)
    sections: dict[str, Any] = {}
    for name, kind in (("hook", HookSettings), ("daemon", DaemonSettings)):
        try:
            sections[name] = msgspec.convert(doc.get(name, {}), kind)
        except msgspec.ValidationError as exc:
            line = line_of(text, f"[{name}]")
            where = f"{path}:{line}" if line else str(path)
            raise ConfigError(f"{where}: bad [{name}] section: {exc}") from exc
    try:
        delivery = msgspec.convert(doc.get("delivery", {}), dict[str, DeliveryMode])
    except msgspec.ValidationError as exc:
        line = line_of(text, "[delivery]")
        where = f"{path}:{line}" if line else str(path)
        raise ConfigError(
            f'{where}: bad [delivery] section: {exc}; each action maps to "context" or "gate"'
        ) from exc
    actions = doc.get("actions", {})
    if not isinstance(actions, dict):
        raise ConfigError(f"{path}: `actions` must be a table of actions, see docs/actions.md")
    return Config(
        path=path,
        hook=sections["hook"],
        daemon=sections["daemon"],
        delivery={name.strip().lower(): mode for name, mode in delivery.items()},
        actions=actions,
        text=text,
    )
