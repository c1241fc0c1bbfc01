"""What `hooks status` and `doctor` find of a hook, in shapes every kind of install shares.

A `SettingsPlace` is one file where a hook may be, with a `HookCheck` for each of
mented's entries in it (its interpreter and shim still there, its socket); the
kinds of install (`base.ClientAgent`) report what they find in them, so that the
commands check and print every agent alike. `DoctorFindings` are `doctor`'s lines
for one agent.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from mented.agents.pretooluse import EVENT_NAME, SESSION_START
from mented_client.commands.output import escape_controls
from mented_client.files import display_path
from mented_client.hook_settings import MentedEntry, command_argv, is_native_executable

if TYPE_CHECKING:
    from mented.agents import Agent
    from mented_client.commands.doctor import Check


@dataclass
class HookCheck:
    """One installed entry and whether it can still run."""

    command: str
    timeout: object
    interpreter: str | None
    shim: str | None
    socket: str | None  # the shim's fallback when the agent's environment names none
    problems: list[str]  # fixed by installing again
    event: str = EVENT_NAME
    trust: str | None = None  # the agent's own verdict, where it has one (Codex)
    trust_problem: str | None = None  # why the agent will not run it
    trust_fix: str | None = None  # the step that makes it run
    # The line exits 0 once the shim or interpreter is gone (`guarded_command`); older
    # installs' did not (exit 2: the agent blocked every command).
    guarded: bool = True


@dataclass
class SettingsPlace:
    """One settings file and the mented entries in it."""

    settings: str
    exists: bool
    hooks: list[HookCheck] = field(default_factory=list)
    error: str | None = None
    missing: list[str] = field(default_factory=list)  # events without our entry (older install)
    # The tool calls the action table names that no installed entry runs for.
    gaps: list[str] = field(default_factory=list)

    @property
    def broken(self) -> bool:
        """Whether something here keeps rules from reaching the agent."""
        return (
            self.error is not None
            or bool(self.missing)
            or bool(self.gaps)
            or any(hook.problems or hook.trust_problem for hook in self.hooks)
        )


@dataclass
class DoctorFindings:
    """`doctor`'s lines for one agent, whether a hook of it is installed, and the command
    line to test-fire (built by this installation, never read from a file) with its
    time limit in seconds."""

    checks: list[Check] = field(default_factory=list)
    installed: bool = False
    fire: tuple[str, float] | None = None


def missing_problem(events: list[str]) -> str:
    """What a settings file without our entry for `events` lacks (an older install)."""
    what = {
        SESSION_START: "so pinned rules are not handed over at session start, nor rules "
        "again after the context is compacted or cleared"
    }
    return "; ".join(
        f"no {event} entry" + (f", {what[event]}" if event in what else "") for event in events
    )


def check_entry(entry: MentedEntry) -> HookCheck:
    """Whether the interpreter and the shim an entry runs still exist."""
    run = command_argv(entry.command)
    argv = run.argv if run is not None else []
    interpreter = Path(argv[0]) if argv else None
    at = next((i for i, arg in enumerate(argv) if Path(arg).name == "shim.py"), None)
    shim = None if at is None else Path(argv[at])
    # After the shim: the agent's name, then the fallback socket (older installs had none).
    socket = argv[at + 2] if at is not None and len(argv) > at + 2 else None
    problems = []
    if interpreter is None or not interpreter.exists():
        problems.append(f"interpreter {interpreter} is missing: reinstall the hook")
    elif not is_native_executable(interpreter.resolve()):
        problems.append(f"interpreter {interpreter} is a script (slow): reinstall the hook")
    if shim is None or not shim.is_file():
        problems.append(f"shim {shim} is missing: reinstall the hook")
    return HookCheck(
        command=entry.command,
        timeout=entry.timeout,
        interpreter=str(interpreter) if interpreter else None,
        shim=str(shim) if shim else None,
        socket=socket,
        problems=problems,
        guarded=run is not None and run.guarded,
    )


def gaps_problem(gaps: list[str]) -> str:
    """What a registration that misses these tool calls means."""
    return "the hook is not registered for " + "; ".join(gaps) + ", which the action table names"


def gaps_fix(agent: Agent, where: Path) -> str:
    """The step that registers the hook for what the table names, in that settings file."""
    user = where == agent.settings_path()
    option = "" if user else f" --settings {shlex.quote(str(where))}"
    fix = f"`mentectl hooks install {agent.name}{option}` again"
    if agent.entry_trust is not None:
        fix += ", then trust the changed entries in the agent (see its note)"
    return fix


def print_places(agent: Agent, places: list[SettingsPlace]) -> None:
    """`hooks status` lines for an agent's settings files."""
    name = agent.name
    print(f"{name} ({agent.title})")
    for place in places:
        where = escape_controls(display_path(Path(place.settings)), keep_lines=False)
        if place.error:
            print(f"  {where}: {escape_controls(place.error)}")
        elif not place.hooks:
            print(f"  {where}: not installed" + ("" if place.exists else " (no such file)"))
        shown: set[tuple[str, str | None]] = set()
        # One line per event and verdict: a filtered install has a handler per condition.
        lines: dict[str, int] = {}
        for hook in place.hooks:
            problems = [*hook.problems]
            if hook.trust_problem:
                problems.append(f"{hook.trust_problem}; to fix: {hook.trust_fix}")
            trust = f" ({hook.trust})" if hook.trust and not hook.trust_problem else ""
            said = escape_controls("; ".join(problems), keep_lines=False) or "ok"
            line = f"  {where}: {hook.event} installed{trust}, {said}"
            lines[line] = lines.get(line, 0) + 1
        for line, count in lines.items():
            print(line + (f" ({count} handlers)" if count > 1 else ""))
        for hook in place.hooks:
            if (hook.command, hook.socket) in shown:
                continue
            shown.add((hook.command, hook.socket))
            print(f"    runs: {escape_controls(hook.command, keep_lines=False)}")
            fallback = hook.socket or "the agent's $MENTED_SOCKET, else the default"
            print(f"    socket: {escape_controls(fallback, keep_lines=False)}")
        if place.missing:
            print(
                f"  {where}: {missing_problem(place.missing)} (an older install): "
                f"run `mentectl hooks install {name}` again"
            )
        if place.gaps:
            fix = gaps_fix(agent, Path(place.settings))
            said = escape_controls(gaps_problem(place.gaps), keep_lines=False)
            print(f"  {where}: {said}: run {fix}")
