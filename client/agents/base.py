"""What `mentectl` does with one agent: install, remove and check mented's hook there.

A `ClientAgent` is the client's side of an agent (its adapter, `mented.agents`, is
the daemon's): the verbs `hooks install|uninstall|status|command`, `setup`,
`uninstall` and `doctor` ask it, and never branch on an agent's name. There is one
class per kind of install:

- `SettingsHooks` (`settings_hooks.py`): mented's entries in the agent's settings
  file (Claude Code, Codex, Gemini CLI, ...), and `HookFile` (`hook_file.py`): a hook
  that is an executable file of its own (Cline);
- `PluginFile` and `InProcessPlugin` (`in_process.py`): a plugin file of mented's
  that the agent runs in its own process (opencode and Kilo; pi).

Each agent's module (`mented_client.agents.<agent>`) picks its kind and names what
is its own (Codex's trust in its hooks). The places a hook was found are reported in
the shapes below (`SettingsPlace`, `HookCheck`), so that `hooks status` and `doctor`
read every kind alike; an agent whose files say more (pi's extension) has its own.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from mented.agents.pretooluse import EVENT_NAME

if TYPE_CHECKING:
    import argparse

    from mented.agents import Agent
    from mented.protocol import StatusReply
    from mented.registration import HookNeeds
    from mented_client.commands.doctor import Check, FireTarget
    from mented_client.commands.mcp import Writer


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


@dataclass(frozen=True)
class Removal:
    """What taking our entries out of one settings file did."""

    removed: int = 0
    backup: Path | None = None  # an older copy beside the file, kept: it differs from it
    deleted: bool = False  # the file held nothing else, and is gone
    directories: tuple[Path, ...] = ()  # directories left empty by that, removed too

    def in_words(self) -> str:
        entries = "entry" if self.removed == 1 else "entries"
        if self.deleted:
            return f"{self.removed} mented hook {entries} removed; it held nothing else and is gone"
        return f"{self.removed} mented hook {entries} removed, nothing else changed"


@dataclass
class DoctorFindings:
    """`doctor`'s lines for one agent, whether a hook of it is installed, and the command
    line to test-fire (built by this installation, never read from a file) with its
    time limit in seconds."""

    checks: list[Check] = field(default_factory=list)
    installed: bool = False
    fire: tuple[str, float] | None = None


def install_report(agent: Agent, path: Path, outcome: str, **more: object) -> dict[str, object]:
    """`hooks install --json`'s document: the agent, the file, what the install did
    ("installed", "updated" or "unchanged"), then what the kind of install adds."""
    return {
        "agent": agent.name,
        "settings": str(path),
        "outcome": outcome,
        "changed": outcome != "unchanged",
        **more,
    }


class ClientAgent(abc.ABC):
    """The client's side of one agent: what each verb does with mented's hook there."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    @property
    def name(self) -> str:
        return self.agent.name

    @property
    def title(self) -> str:
        return self.agent.title

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    # ------------------------------------------------------------ hooks install

    @abc.abstractmethod
    def install(self, args: argparse.Namespace) -> int:
        """`mentectl hooks install AGENT` (and `setup`'s hook step); the exit status."""

    def refuse_command(self) -> Exception | None:
        """Why `hooks command` has no line to print for this agent; None: it has one."""
        return None

    # ----------------------------------------------------------- trust, setup

    # What the agent's records of its trust in mented's entries are called, in messages.
    trust_records = "the agent's trust entries"

    def trust_keys(self, places: list[Path]) -> set[str]:  # noqa: ARG002 - most agents keep none
        """The agent's own records of its trust in mented's entries in `places` (Codex's),
        found before they go; none for an agent that runs its hooks untold."""
        return set()

    def user_trust_keys(self) -> set[str]:
        """`trust_keys` of the user's own file, as the agent names it."""
        return self.trust_keys([self.agent.settings_path()])

    def forget_trust(self, keys: set[str]) -> list[str]:  # noqa: ARG002 - see `trust_keys`
        """Take the records `trust_keys` found out of the agent's config; what was done."""
        return []

    def trust_step(self) -> str | None:
        """The step only the user can take after an install (trusting the hooks in the
        agent), for `setup`; None when the agent runs them untold."""
        return None

    # ------------------------------------------------------------- uninstall

    def mcp_writer(self) -> Writer | None:
        """How mentectl registers its MCP server with this agent, where the agent's module
        has a way of its own (Claude Code's CLI); None: the one its adapter's
        `McpSettings.how` names (`mented_client.commands.mcp.WRITERS`)."""
        return None

    def undo_mcp(self) -> str:
        """`mentectl uninstall AGENT`'s MCP step: what was done.

        Raises:
            CommandError: the agent's MCP configuration cannot be edited.
        """
        from mented_client.commands import mcp  # noqa: PLC0415 - it imports this package

        return mcp.uninstall_mcp(self.name)

    @abc.abstractmethod
    def project_hooks(self, project: Path) -> list[Path]:
        """The files in `project` that hold mented's hook for this agent."""

    @abc.abstractmethod
    def hook_for_user(self) -> bool:
        """Whether the user's own file holds mented's hook."""

    def set_up_for_user(self) -> bool:
        """Whether the user's files still hold mented's hook or its MCP server."""
        from mented_client.commands import mcp  # noqa: PLC0415 - it imports this package

        return self.hook_for_user() or mcp.mcp_registration(self.name).registered

    # ------------------------------------------------ hooks uninstall and status

    @abc.abstractmethod
    def uninstall(self, args: argparse.Namespace) -> int:
        """`mentectl hooks uninstall AGENT`; the exit status."""

    @abc.abstractmethod
    def undo_user(self) -> tuple[list[str], list[str]]:
        """`mentectl uninstall AGENT`'s hook step: mented's hook out of the user's own
        file; what was done and what failed, one line each."""

    @abc.abstractmethod
    def status(self, extra: str | None, needs: HookNeeds | None) -> tuple[object, bool]:
        """`hooks status --json`'s document for the agent, and whether something is broken
        (`extra`: a file named with `--settings`, looked at too)."""

    @abc.abstractmethod
    def print_status(self, extra: str | None, needs: HookNeeds | None) -> bool:
        """`hooks status` lines for the agent; whether something is broken."""

    @abc.abstractmethod
    def registration_warnings(self, needs: HookNeeds) -> list[str]:
        """Each installed hook that misses tool calls of `needs`, with the fix."""

    # ------------------------------------------------------------------ doctor

    @abc.abstractmethod
    def doctor(
        self,
        target: FireTarget,
        status: StatusReply | None,
        needs: HookNeeds | None,
        expected: dict[tuple[str, str], str],
    ) -> DoctorFindings:
        """`doctor`'s checks of this agent's hook (`expected`: the command lines this
        installation writes, by agent and event)."""


class PlacesAgent(ClientAgent):
    """An agent whose hook is found in files reported as `SettingsPlace`s: the verbs
    built on finding, removing and describing those."""

    @abc.abstractmethod
    def uninstall_places(
        self, places: list[Path], project: Path | None
    ) -> list[tuple[Path, Removal]]:
        """Take mented's hook out of each of `places`; what each removal did.

        Raises:
            CommandError: a file cannot be read as the agent's, or cannot be written.
        """

    @abc.abstractmethod
    def uninstall_lines(
        self, places: list[Path], removals: list[tuple[Path, Removal]]
    ) -> list[str]:
        """What `uninstall_places` did, for people."""

    def uninstall(self, args: argparse.Namespace) -> int:
        """`mentectl hooks uninstall AGENT`; the exit status."""
        from mented_client.commands import hooks  # noqa: PLC0415 - it imports this package
        from mented_client.commands.output import CommandError, print_json  # noqa: PLC0415

        places = hooks.settings_paths(self.agent, args)
        project = getattr(args, "project", None)
        # Found first: the records name the entries by their place in the file.
        trusted = self.trust_keys(places)
        removals = self.uninstall_places(places, project)
        try:
            untrusted = self.forget_trust(trusted) if trusted else []
        except CommandError as exc:
            raise CommandError(f"the hook is removed, but not {self.trust_records}: {exc}") from exc
        found = [(path, removal) for path, removal in removals if removal.removed]
        if args.json:
            first = found[0] if found else (places[0], Removal())
            print_json(
                {
                    "agent": self.name,
                    "settings": str(first[0]),
                    "removed": sum(removal.removed for _, removal in removals),
                    "backup": str(first[1].backup) if first[1].backup else None,
                    "files": [
                        {
                            "settings": str(path),
                            "removed": removal.removed,
                            "backup": str(removal.backup) if removal.backup else None,
                            "deleted": removal.deleted,
                            "directories_removed": [str(d) for d in removal.directories],
                        }
                        for path, removal in removals
                    ],
                    "trust_removed": untrusted,
                }
            )
            return 0
        for line in self.uninstall_lines(places, removals) + untrusted:
            print(line)
        return 0

    def undo_user(self) -> tuple[list[str], list[str]]:
        """`mentectl uninstall AGENT`'s hook step: mented's hook out of the user's own
        file; what was done and what failed, one line each."""
        from mented_client.commands.output import CommandError  # noqa: PLC0415

        places = [self.agent.settings_path()]
        trusted = self.user_trust_keys()
        try:
            done = self.uninstall_lines(places, self.uninstall_places(places, None))
        except CommandError as exc:
            return [], [f"hook: {exc}"]
        try:
            done += self.forget_trust(trusted)
        except CommandError as exc:
            return done, [f"{self.trust_records}: {exc}"]
        return done, []

    @abc.abstractmethod
    def places(self, extra: str | None, needs: HookNeeds | None = None) -> list[SettingsPlace]:
        """The user's file, this directory's project files and `extra`, as found.

        With `needs`, each place with our entries also says which of those tool
        calls none of them runs for (`gaps`).
        """

    def status(self, extra: str | None, needs: HookNeeds | None) -> tuple[object, bool]:
        """`hooks status --json`'s document for the agent, and whether something is broken."""
        import msgspec  # noqa: PLC0415 - only for the JSON form

        found = self.places(extra, needs)
        return msgspec.to_builtins(found), any(place.broken for place in found)

    def print_status(self, extra: str | None, needs: HookNeeds | None) -> bool:
        """`hooks status` lines for the agent; whether something is broken."""
        from mented_client.commands import hooks  # noqa: PLC0415 - it imports this package

        found = self.places(extra, needs)
        hooks.print_places(self.agent, found)
        return any(place.broken for place in found)

    def registration_warnings(self, needs: HookNeeds) -> list[str]:
        """Each installed hook that misses tool calls of `needs`, with the fix."""
        from mented_client.commands import hooks  # noqa: PLC0415 - it imports this package
        from mented_client.files import display_path  # noqa: PLC0415

        warnings = []
        for place in self.places(None, needs):
            if place.gaps:
                where = display_path(Path(place.settings))
                fix = hooks.gaps_fix(self.agent, Path(place.settings))
                warnings.append(f"{where}: {hooks.gaps_problem(place.gaps)}: run {fix}")
        return warnings
