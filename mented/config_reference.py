"""docs/config.md, written from `mented.config`: every key, its default and its bounds.

The defaults and the bounds are read from the settings' types, so the page cannot
say other values than the daemon uses; what each key means is said here, and a
test fails when a key has no words or the page differs from what this writes.
Regenerate with `python -m mented.config_reference > docs/config.md`.
"""

from __future__ import annotations

import sys

import msgspec
import msgspec.inspect

from mented.config import MIN_SYNC_INTERVAL_S, Config
from mented.config import SECTIONS as CONFIG_SECTIONS

# What each key means, by section. The sections and their keys come from `Config`
# itself; a key without words here fails `render_reference` (and its test).
MEANINGS: dict[str, dict[str, str]] = {
    "hook": {
        "k": "rules per action handed to the agent",
        "max_context_chars": "cap on the text injected into the agent's context (Claude "
        "Code cuts context over 10,000 characters)",
        "budget_ms": "the deadline `mentectl doctor` checks a sample hook call against, "
        "and how long the daemon works on a hook request; the shim itself stops at "
        "`$MENTED_HOOK_BUDGET_MS` (default 250 ms): it reads no config file",
        "dedupe_seconds": "the same event twice within this long is answered once",
        "session_ttl_s": "a session's memory of what it was handed expires this long after "
        "its last hook (old name `gate_session_ttl_s`, still read)",
    },
    "daemon": {
        "idle_timeout_s": "with socket activation: exit after this long without a client "
        "(0: never)",
        "connection_idle_s": "close a client connection idle for this long",
    },
    "sync": {
        "interval_s": "sync by itself this often, after `mentectl sync init` (0: only on "
        f"`mentectl sync`; else at least {MIN_SYNC_INTERVAL_S:g})",
        "after_change": "sync a few seconds after a rule is added, superseded or forgotten",
        "timeout_s": "each git command (fetch, push) is stopped after this long",
        "max_fetch_mib": "a clone or fetch that would add more than this to the sync clone "
        "(a remote sending far more than records take) is stopped, and what it fetched "
        "removed",
    },
    "pinned": {
        "max_rules": "pinned rules a session start hands over, at most",
        "max_chars": "and their characters, at most (about 300 tokens by default)",
    },
    "recall": {"k": "facts `mentectl recall` and the MCP tool return by default"},
    "activity": {
        "on_disk": "keep the record of hook fires that `mentectl log` shows in the data "
        "directory (`activity.jsonl`, 0600), across restarts; false: only the last 500, in "
        "the daemon's memory",
        "max_fires": "fires kept, at most (the oldest go first; between half and all of "
        "this many are kept)",
        "max_age_days": "a fire older than this is never shown, and removed from disk",
        "max_mib": "MiB the record takes on disk, at most (a `mentectl log` reads it in a "
        "worker thread, newest first)",
    },
    "matching": {
        "git_add_ons": "name the commands of git add-ons (git-extras, git-flow, git-town): "
        "docs/actions.md lists them",
    },
}
# Sections the page says in words (`_TAIL`): no fixed keys.
_IN_WORDS = ("delivery", "checks", "actions")


def sections() -> list[tuple[str, msgspec.inspect.StructType]]:
    """The sections with fixed keys, in `Config`'s order, with their types.

    Raises:
        ValueError: a section of the config file is neither one of them nor said in
            words on the page.
    """
    config = msgspec.inspect.type_info(Config)
    assert isinstance(config, msgspec.inspect.StructType)
    found = [
        (field.name, field.type)
        for field in config.fields
        if isinstance(field.type, msgspec.inspect.StructType) and field.name not in _IN_WORDS
    ]
    missing = set(CONFIG_SECTIONS) - {name for name, _ in found} - set(_IN_WORDS)
    if missing:
        msg = f"sections {sorted(missing)} are not on the page"
        raise ValueError(msg)
    return found


_HEAD = """\
# Configuration reference

<!-- Written by `python -m mented.config_reference > docs/config.md` from mented/config.py;
     tests/test_config_reference.py fails when it is out of date. Do not edit by hand. -->

The config file is `$XDG_CONFIG_HOME/mented/config.toml` (else
`~/.config/mented/config.toml`; `--config` or `MENTED_CONFIG` name another). Every
section and every key is optional: what is left out takes the default below. A
value out of its bounds, an unknown key or an unknown section is refused with the
file's path and line; `mentectl reload` applies a fixed file.
"""

_TAIL = """\
## [delivery]

How rules reach the model: `default = "before"` (the default) or `"context"`, for
every action, and `ACTION = "before"` or `"context"` lines that override it for one
action (`git-push = "context"`). `before` stops the first matching command of a
session once, with the rules as the reason, where the agent shows hook context only
after the command ran; `context` never stops a command. `gate`, the old name of
`before`, is still read. See hooks/README.md, "Delivery".

## [checks]

What a rule's failed check does (docs/checks.md): `mode = "stop"` (the default) stops
the command with the reason, `"tell"` lets it run with the failed checks as context;
`ACTION = "stop"` or `"tell"` lines override it for one action. `max_stops = 3`
(a whole number, 0 to 100): stops of one action in one session for failed checks,
after which the next attempt is let through and recorded so, so that nothing loops.

## [actions]

Your own actions, or changes to the built-in ones: docs/actions.md.
"""


def _bounds(kind: msgspec.inspect.Type) -> str:
    words = []
    for name, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
        value = getattr(kind, name, None)
        if value is not None:
            words.append(f"{sign} {value:.10g}")
    kinds = {
        msgspec.inspect.IntType: "whole number",
        msgspec.inspect.FloatType: "number",
        msgspec.inspect.BoolType: "true or false",
    }
    what = next((word for cls, word in kinds.items() if isinstance(kind, cls)), "value")
    return what + (f", {' and '.join(words)}" if words else "")


def _default(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return f"{int(value)}"
    return str(value)


def render_reference() -> str:
    """The page, as docs/config.md holds it.

    Raises:
        ValueError: a key of a section has no meaning in `MEANINGS`, or a meaning
            names a key that is gone.
    """
    parts = [_HEAD]
    for section, info in sections():
        meanings = MEANINGS.get(section, {})
        names = [field.name for field in info.fields]
        if set(names) != set(meanings):
            msg = f"[{section}]: keys {sorted(names)}, meanings for {sorted(meanings)}"
            raise ValueError(msg)
        rows = ["| key | default | allowed | meaning |", "|---|---|---|---|"]
        rows.extend(
            f"| `{field.name}` | `{_default(field.default)}` | {_bounds(field.type)} | "
            f"{meanings[field.name]} |"
            for field in info.fields
        )
        parts.append(f"## [{section}]\n\n" + "\n".join(rows) + "\n")
    parts.append(_TAIL)
    return "\n".join(parts)


if __name__ == "__main__":
    sys.stdout.write(render_reference())
