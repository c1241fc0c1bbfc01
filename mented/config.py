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

    [pinned]
    max_rules = 5              # pinned rules a session start hands over, at most
    max_chars = 1200           # and their characters (about 300 tokens), at most

    [recall]
    k = 5                      # facts `mentectl recall` and the MCP tool return by default

    [daemon]
    idle_timeout_s = 0         # with socket activation: exit after this long idle (0 = never)
    connection_idle_s = 60     # close a client connection idle for this long

    [sync]                     # after `mentectl sync init REMOTE` (see docs/format.md)
    interval_s = 0             # sync by itself this often (0 = only on `mentectl sync`)
    after_change = false       # sync a few seconds after a rule is added, superseded, forgotten
    timeout_s = 60             # each git command (fetch, push) is stopped after this long
    max_fetch_mib = 256        # a clone or fetch that brings more is stopped and removed

    [activity]                 # the record of hook fires `mentectl log` reads (mented.activity)
    on_disk = true             # kept in the data directory (false: the last 500, in memory)
    max_fires = 20000          # at most this many fires are kept
    max_age_days = 30          # none older than this
    max_mib = 16               # in at most this many MiB

    [matching]
    git_add_ons = true         # name the commands of git add-ons (git-extras, git-flow, git-town)

    [actions.my-deploy]        # see docs/actions.md (mented.actions owns this part)
    ...

A bad file is reported with its path and the line of the bad key; an unknown section
(`[hooks]` for `[hook]`) or an unknown action under `[delivery]` is refused too. The
daemon keeps what it had.

`[hook] budget_ms` does not set the hook's deadline: the shim reads no config
file, and stops at `$MENTED_HOOK_BUDGET_MS` in the agent's environment (default
250 ms). `mentectl doctor` fails a sample hook call slower than
`$MENTED_HOOK_BUDGET_MS` in its own environment, else than this value; set it to
the deadline the agent's environment gives the shim. The daemon stops working on
a hook request this long after it received it (the shim has given up by then).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from mented.sync_fetch import MAX_FETCH_MIB

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


class PinnedSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The hard cap on pinned rules: they ride along with every session, so they stay few.

    A rule that would take a session past either bound is refused when added.
    """

    max_rules: Annotated[int, msgspec.Meta(ge=1, le=50)] = 5
    # Claude Code cuts context over 10,000 characters; a session start should cost little.
    max_chars: Annotated[int, msgspec.Meta(ge=100, le=9000)] = 1200


class RecallSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    k: Annotated[int, msgspec.Meta(ge=1, le=100)] = 5


class DaemonSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    idle_timeout_s: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    # 0 would drop every connection before reading it.
    connection_idle_s: Annotated[float, msgspec.Meta(gt=0, le=86_400)] = 60.0


class SyncSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    # Not more often than every 10 s: each sync runs git against the remote.
    interval_s: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    after_change: bool = False
    timeout_s: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 60.0
    # What one fetch may add to the sync clone (mented/sync_fetch.py).
    max_fetch_mib: Annotated[int, msgspec.Meta(ge=1, le=1024)] = MAX_FETCH_MIB

    def __post_init__(self) -> None:
        if 0 < self.interval_s < MIN_SYNC_INTERVAL_S:
            msg = f"interval_s must be 0 (off) or at least {MIN_SYNC_INTERVAL_S:g}"
            raise ValueError(msg)


MIN_SYNC_INTERVAL_S = 10.0


class ActivitySettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The record of hook fires (`mentectl log`, mented.activity): bounded three ways."""

    on_disk: bool = True
    max_fires: Annotated[int, msgspec.Meta(ge=100, le=1_000_000)] = 20_000
    max_age_days: Annotated[float, msgspec.Meta(gt=0, le=3650)] = 30.0
    # Read whole by a `log` request (in a worker thread): a few tens of MiB at most.
    max_mib: Annotated[int, msgspec.Meta(ge=1, le=256)] = 16


class MatchingSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """How commands are read: which optional parts of the action table are in force."""

    # `git create-branch`, `git flow feature finish`, ...: commands that add-on packages
    # (git-extras, git-flow, git-town) install; docs/actions.md lists them.
    git_add_ons: bool = True


class DeliverySettings(msgspec.Struct, kw_only=True):
    """How rules reach the model: a mode for every action, and per-action overrides."""

    default: DeliveryMode = "before"
    actions: dict[str, DeliveryMode] = msgspec.field(default_factory=dict)

    def mode_of(self, action: str) -> DeliveryMode:
        return self.actions.get(action, self.default)


CheckMode = Literal["stop", "tell"]
_CHECK_MODES: tuple[CheckMode, ...] = ("stop", "tell")
MAX_STOPS_LIMIT = 100


class CheckSettings(msgspec.Struct, kw_only=True):
    """What a failed check does (mented.prechecks): stop the command, or tell the model.

    `max_stops`: stops of one action in one session for failed checks, after which the
    next attempt is let through (and recorded so), so that nothing loops.
    """

    mode: CheckMode = "stop"
    actions: dict[str, CheckMode] = msgspec.field(default_factory=dict)
    max_stops: int = 3

    def mode_of(self, action: str) -> CheckMode:
        return self.actions.get(action, self.mode)


class Config(msgspec.Struct, kw_only=True):
    """The settings in force. `actions` is the raw `[actions]` table for mented.actions."""

    path: Path | None = None
    hook: HookSettings = msgspec.field(default_factory=HookSettings)
    daemon: DaemonSettings = msgspec.field(default_factory=DaemonSettings)
    sync: SyncSettings = msgspec.field(default_factory=SyncSettings)
    pinned: PinnedSettings = msgspec.field(default_factory=PinnedSettings)
    recall: RecallSettings = msgspec.field(default_factory=RecallSettings)
    activity: ActivitySettings = msgspec.field(default_factory=ActivitySettings)
    matching: MatchingSettings = msgspec.field(default_factory=MatchingSettings)
    delivery: DeliverySettings = msgspec.field(default_factory=DeliverySettings)
    checks: CheckSettings = msgspec.field(default_factory=CheckSettings)
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
    return parse_toml(text, path), text


def parse_toml(text: str, path: Path) -> dict[str, Any]:
    """The parsed document of the config file at `path`, whose text is `text`.

    Raises:
        ConfigError: not valid TOML (with line and column).
    """
    import tomllib  # noqa: PLC0415 - only with a config file: not for the built-in settings

    try:
        return tomllib.loads(text)
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


def load_config(path: Path | None, *, text: str | None = None) -> Config:
    """Read and validate the config file at `path` (None: built-in defaults only).

    `text`: the file's text as it was when a daemon loaded it (the daemon sends it
    while the file on disk is invalid), read instead of the file.

    Raises:
        ConfigError: the file is unreadable, not TOML, or a section has a bad value.
    """
    if path is None:
        return Config()
    if text is None:
        doc, text = read_toml(path)
    else:
        doc = parse_toml(text, path)
    _check_sections(doc, path, text)
    sections: dict[str, Any] = {}
    kinds: tuple[tuple[str, type[msgspec.Struct]], ...] = (
        ("hook", HookSettings),
        ("daemon", DaemonSettings),
        ("sync", SyncSettings),
        ("pinned", PinnedSettings),
        ("recall", RecallSettings),
        ("activity", ActivitySettings),
        ("matching", MatchingSettings),
    )
    for name, kind in kinds:
        section = doc.get(name, {})
        if name == "hook" and isinstance(section, dict):
            section = _renamed(section, path, text)
        try:
            sections[name] = msgspec.convert(section, kind)
        except msgspec.ValidationError as exc:
            key = _key_in_error(str(exc))
            where = _key_where(path, text, name, key) if key else _where(path, text, f"[{name}]")
            raise ConfigError(f"{where}: bad [{name}] section: {exc}") from exc
    actions = doc.get("actions", {})
    if not isinstance(actions, dict):
        raise ConfigError(f"{path}: `actions` must be a table of actions, see docs/actions.md")
    return Config(
        path=path,
        hook=sections["hook"],
        daemon=sections["daemon"],
        sync=sections["sync"],
        pinned=sections["pinned"],
        recall=sections["recall"],
        activity=sections["activity"],
        matching=sections["matching"],
        delivery=_delivery(doc.get("delivery", {}), path, text),
        checks=_checks(doc.get("checks", {}), path, text),
        actions=actions,
        text=text,
    )


# Every table the file may hold.
SECTIONS = (
    "hook",
    "delivery",
    "checks",
    "daemon",
    "sync",
    "pinned",
    "recall",
    "activity",
    "matching",
    "actions",
)


def _check_sections(doc: dict[str, Any], path: Path, text: str) -> None:
    """Refuse a top-level name that is none of `SECTIONS` (`[hooks]` for `[hook]`).

    Unknown keys inside a section are refused by its Struct; a whole unknown
    section would otherwise be read as nothing, silently.
    """
    for name in doc:
        if name in SECTIONS:
            continue
        import difflib  # noqa: PLC0415 - a suggestion only: not on a start's path

        close = difflib.get_close_matches(name, SECTIONS, n=1, cutoff=0.6)
        hint = f"; did you mean [{close[0]}]?" if close else ""
        line = line_of_key(text, None, name) or line_of(text, f"[{name}")
        where = f"{path}:{line}" if line else str(path)
        raise ConfigError(
            f"{where}: unknown section [{name}]{hint} "
            f"(the sections are {', '.join(f'[{s}]' for s in SECTIONS)})"
        )


def _key_in_error(message: str) -> str | None:
    """The key a msgspec error is about: `unknown field `kk`` or `- at `$.k``."""
    for marker in ("unknown field `", "at `$."):
        start = message.find(marker)
        if start != -1:
            key = message[start + len(marker) :].split("`", 1)[0]
            return key.split(".", 1)[0].split("[", 1)[0] or None
    return None


def line_of_key(text: str, section: str | None, key: str) -> int | None:
    """The 1-based line of `key = ...` inside `[section]` (None: at the top), or of `[key]`.

    Only what users write: plain keys on their own lines, and table headers. None
    when it is not found that way (the caller then names the section's line).
    """
    current: str | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line.startswith("["):
            current = line.strip("[]").strip().split(".", 1)[0].strip('"')
            if section is None and current == key:
                return number
            continue
        name = line.split("=", 1)[0].strip().strip('"')
        if "=" in line and current == section and name == key:
            return number
    return None


def _key_where(path: Path, text: str, section: str, key: str) -> str:
    """`path:line` of `key` in `[section]`, else of the section's header."""
    line = line_of_key(text, section, key)
    return f"{path}:{line}" if line else _where(path, text, f"[{section}]")


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
            where = _key_where(path, text, "delivery", key)
            raise ConfigError(
                f"{where}: bad [delivery] value {key} = {value!r}; "
                'each line maps an action (or `default`) to "before" or "context"'
            )
        name = key.strip().lower()
        if name == DEFAULT_DELIVERY_KEY:
            settings.default = mode
        else:
            settings.actions[name] = mode
    return settings


def _checks(section: object, path: Path, text: str) -> CheckSettings:
    """`[checks]`: `mode = MODE`, `max_stops = N` and `ACTION = MODE` lines."""
    where = _where(path, text, "[checks]")
    if not isinstance(section, dict):
        raise ConfigError(f"{where}: `checks` must be a table (mode, max_stops, ACTION = MODE)")
    settings = CheckSettings()
    for key, value in section.items():
        where = _key_where(path, text, "checks", key)
        if key == "max_stops":
            number = None if isinstance(value, bool) or not isinstance(value, int) else value
            if number is None or not 1 <= number <= MAX_STOPS_LIMIT:
                raise ConfigError(
                    f"{where}: bad [checks] max_stops = {value!r}; give a whole number "
                    f"from 1 to {MAX_STOPS_LIMIT} (stops of one action in a session, then the "
                    "command is let through)"
                )
            settings.max_stops = number
            continue
        if value not in _CHECK_MODES:
            raise ConfigError(
                f"{where}: bad [checks] value {key} = {value!r}; `mode` and each action "
                'take "stop" (a failed check stops the command) or "tell" (the model is told, '
                "the command runs)"
            )
        name = key.strip().lower()
        if name == "mode":
            settings.mode = value
        else:
            settings.actions[name] = value
    return settings
