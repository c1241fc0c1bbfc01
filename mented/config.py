"""The user's config file: hook settings, delivery modes, daemon settings, actions.

One TOML file (see `mented.paths.config_path`). Every section is optional::

    [hook]
    k = 6                      # rules per action handed to the agent
    max_context_chars = 4000   # cap on the text injected into the agent's context
    budget_ms = 250            # the shim's deadline, as its environment sets it (see below)
    dedupe_seconds = 5         # the same event twice within this long is answered once
    session_ttl_s = 43200      # a session's memory of what it was handed expires this long
                               # after its last hook (was `gate_session_ttl_s`, still read)

    [delivery]
    default = "before"         # "before" (the default) or "context", for every action
    git-push = "context"       # per action: overrides the default

A delivery of `before` makes the rules reach the model before the command runs:
through the agent's context channel where that arrives before the tool runs,
else by stopping the first matching command of a session once, with the rules
as the reason (see mented.delivery). `context` never stops a command: the
rules ride along as extra context, which Claude Code and Codex show the model
after the command ran. `gate`, the old name of `before`, is still read.

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
the deadline the agent's environment gives the shim. The daemon stops working on
a hook request this long after it received it (the shim has given up by then).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

DeliveryMode = Literal["before", "context"]
_DELIVERY_NAMES: dict[str, DeliveryMode] = {
    "before": "before",
    "context": "context",
    "gate": "before",
}
DEFAULT_DELIVERY_KEY = "default"  # the `[delivery]` key that sets the mode of every action


class ConfigError(Exception):
    """The config file cannot be used; the message names the file (and line) and the fix."""


class HookSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    # Bounds keep a typo from silencing the hook for good (k = 0 fires nothing).
    k: Annotated[int, msgspec.Meta(ge=1, le=50)] = 6
    # Claude Code cuts context over 10,000 characters: stay under it with a margin.
    max_context_chars: Annotated[int, msgspec.Meta(ge=200, le=9500)] = 4000
    # The shim reads no config (MENTED_HOOK_BUDGET_MS): `mentectl doctor`'s threshold, and
    # how long the daemon works on a hook request.
    budget_ms: Annotated[int, msgspec.Meta(ge=10, le=10_000)] = 250
    dedupe_seconds: Annotated[float, msgspec.Meta(ge=0, le=3600)] = 5.0
    session_ttl_s: Annotated[float, msgspec.Meta(gt=0, le=30 * 86_400)] = 12 * 3600


class DaemonSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    idle_timeout_s: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    # 0 would drop every connection before reading it.
    connection_idle_s: Annotated[float, msgspec.Meta(gt=0, le=86_400)] = 60.0


class DeliverySettings(msgspec.Struct, kw_only=True):
    """How rules reach the model: a mode for every action, and per-action overrides."""

    default: DeliveryMode = "before"
    actions: dict[str, DeliveryMode] = msgspec.field(default_factory=dict)

    def mode_of(self, action: str) -> DeliveryMode:
        return self.actions.get(action, self.default)


class Config(msgspec.Struct, kw_only=True):
    """The settings in force. `actions` is the raw `[actions]` table for mented.actions."""

    path: Path | None = None
    hook: HookSettings = msgspec.field(default_factory=HookSettings)
    daemon: DaemonSettings = msgspec.field(default_factory=DaemonSettings)
    delivery: DeliverySettings = msgspec.field(default_factory=DeliverySettings)
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
        section = doc.get(name, {})
        if name == "hook" and isinstance(section, dict):
            section = _renamed(section, path, text)
        try:
            sections[name] = msgspec.convert(section, kind)
        except msgspec.ValidationError as exc:
            raise ConfigError(
                f"{_where(path, text, f'[{name}]')}: bad [{name}] section: {exc}"
            ) from exc
    actions = doc.get("actions", {})
    if not isinstance(actions, dict):
        raise ConfigError(f"{path}: `actions` must be a table of actions, see docs/actions.md")
    return Config(
        path=path,
        hook=sections["hook"],
        daemon=sections["daemon"],
        delivery=_delivery(doc.get("delivery", {}), path, text),
        actions=actions,
        text=text,
    )


def _where(path: Path, text: str, needle: str) -> str:
    line = line_of(text, needle)
    return f"{path}:{line}" if line else str(path)


def _renamed(hook: dict[str, Any], path: Path, text: str) -> dict[str, Any]:
    """`[hook]` with the old name `gate_session_ttl_s` read as `session_ttl_s`."""
    if "gate_session_ttl_s" not in hook:
        return hook
    if "session_ttl_s" in hook:
        raise ConfigError(
            f"{_where(path, text, 'gate_session_ttl_s')}: [hook] sets both `session_ttl_s` and "
            "its old name `gate_session_ttl_s`; keep `session_ttl_s` only"
        )
    renamed = dict(hook)
    renamed["session_ttl_s"] = renamed.pop("gate_session_ttl_s")
    return renamed


def _delivery(section: object, path: Path, text: str) -> DeliverySettings:
    """`[delivery]`: `default = MODE` and `ACTION = MODE` lines, old `gate` read as `before`."""
    where = _where(path, text, "[delivery]")
    if not isinstance(section, dict):
        raise ConfigError(f"{where}: `delivery` must be a table of ACTION = MODE lines")
    settings = DeliverySettings()
    for key, value in section.items():
        mode = _DELIVERY_NAMES.get(value) if isinstance(value, str) else None
        if mode is None:
            raise ConfigError(
                f"{_where(path, text, key)}: bad [delivery] value {key} = {value!r}; "
                'each line maps an action (or `default`) to "before" or "context"'
            )
        name = key.strip().lower()
        if name == DEFAULT_DELIVERY_KEY:
            settings.default = mode
        else:
            settings.actions[name] = mode
    return settings
