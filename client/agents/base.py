"""What `mentectl` does with one agent: install, remove and check mented's hook there.

A `ClientAgent` is the client's side of an agent (its adapter, `mented.agents`, is
the daemon's): the verbs `hooks install|uninstall|status|command`, `setup`,
`uninstall` and `doctor` ask it, and never branch on an agent's name. There is one
class per kind of install:

- `SettingsHooks` (`settings_hooks.py`): mented's entries in the agent's settings
  file (Claude Code, Codex, Gemini CLI, ...), and `HookFile` (`hook_file.py`): a hook
  that is an executable file of its own (Cline);
- `PluginFile` (`plugin_file.py`, opencode and Kilo) and `InProcessPlugin`
  (`extension_file.py`, pi): a file of mented's that the agent runs in its own
  process (what the two share: `in_process.py`).

Each agent's module (`mented_client.agents.<agent>`) picks its kind and names what
is its own (Codex's trust in its hooks). The places a hook was found are reported in
the shapes of `findings.py` (`SettingsPlace`, `HookCheck`), so that `hooks status`
and `doctor` read every kind alike; an agent whose files say more (pi's extension)
has its own.
"""

from __future__ import annotations

import abc
import argparse
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mented import paths
from mented.agents.pretooluse import EVENT_NAME, SESSION_START
from mented.git_aliases import GitAliases
from mented.registration import HookNeeds, hook_needs
from mented_client.agents.findings import (
    DoctorFindings,
    SettingsPlace,
    gaps_fix,
    gaps_problem,
    print_places,
)
from mented_client.commands.output import CommandError, print_json
from mented_client.files import display_path
from mented_client.hook_settings import (
    SettingsError,
    guarded_command,
    installed_shim,
    is_native_executable,
    outside_link,
    real_interpreter,
)
from mented_client.scope import table_in_force

if TYPE_CHECKING:
    from mented.agents import Agent
    from mented.protocol import StatusReply
    from mented_client.commands.doctor import FireTarget
    from mented_client.commands.mcp import Writer


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


def print_outcome(what: str, agent: Agent, path: Path, outcome: str) -> bool:
    """`hooks install`'s first line for `what` ("the mented hook", "mented's plugin") in
    `path`: nothing changed, or installed or updated. Whether it changed anything."""
    where = display_path(path)
    if outcome == "unchanged":
        # A sentence starts with a capital, but mented's name is written lowercase.
        start = what if what.startswith("mented") else what[:1].upper() + what[1:]
        print(f"{start} for {agent.title} is already in {where}; nothing changed.")
        return False
    verb = "Updated" if outcome == "updated" else "Installed"
    print(f"{verb} {what} for {agent.title} in {where}.")
    return True


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
        places = settings_paths(self.agent, args)
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

        found = self.places(extra, needs)
        print_places(self.agent, found)
        return any(place.broken for place in found)

    def registration_warnings(self, needs: HookNeeds) -> list[str]:
        """Each installed hook that misses tool calls of `needs`, with the fix."""
        warnings = []
        for place in self.places(None, needs):
            if place.gaps:
                where = display_path(Path(place.settings))
                fix = gaps_fix(self.agent, Path(place.settings))
                warnings.append(f"{where}: {gaps_problem(place.gaps)}: run {fix}")
        return warnings


# The agent's own limit on the hook process, a backstop only: the shim gives up
# after its budget (250 ms by default) on its own.
DEFAULT_TIMEOUT_S = 5


# --------------------------------------------------------------- the command line


def hook_command(
    agent: Agent, python: str | None = None, socket: str | None = None, event: str = EVENT_NAME
) -> str:
    """The shell command line the agent runs for each shell command (and for `event`).

    It runs the shim only while the interpreter and the shim exist, and else exits 0
    (`guarded_command`): a removed installation must never block the agent's commands.
    On `SessionStart`, an agent that shows a hook's `systemMessage` to the user is
    told instead that mented's hook no longer runs (`gone_notice`).

    Args:
        agent: the agent that runs it.
        python: the interpreter (default: the real binary behind this one).
        socket: mentectl's `--socket`; with `$MENTED_SOCKET` and the default it
            gives the socket written in as the shim's fallback argument.
        event: the event the entry is for.
    """
    try:
        interpreter = Path(python).absolute() if python else real_interpreter()
        shim = installed_shim()
    except SettingsError as exc:
        raise CommandError(str(exc)) from exc
    if python and not is_native_executable(interpreter):
        raise CommandError(f"{python} is not a native executable (a shim script?)")
    # The socket mentectl talks to is written in as the shim's fallback: an agent
    # started without this environment (a desktop launcher, an ssh session without
    # XDG_RUNTIME_DIR) would otherwise look in /tmp/mented-UID while the daemon
    # listens in /run/user/UID. $MENTED_SOCKET at run time still wins.
    fallback = paths.socket_path(socket).absolute()
    length = len(os.fsencode(fallback))
    if length > paths.MAX_SOCKET_PATH:
        # The shim could never connect to it, nor the daemon listen there.
        raise CommandError(
            f"socket path {fallback} is {length} bytes long; Unix sockets allow "
            f"{paths.MAX_SOCKET_PATH} on this system, so the hook could never reach mented; "
            "nothing was written. Choose a shorter path (`mentectl --socket PATH ...` or "
            "$MENTED_SOCKET), the same one the daemon uses (`mented --socket PATH`)."
        )
    argv = [str(interpreter), "-I", "-S", str(shim), agent.name, str(fallback)]
    notice = gone_notice(agent, shim) if event == SESSION_START and agent.user_notices else None
    return guarded_command(argv, notice=notice)


def gone_notice(agent: Agent, shim: Path) -> str:
    """What a session start shows the user once the hook's shim or interpreter is gone."""
    message = (
        f"mented: the hook no longer runs, {shim} or its Python is gone (mented uninstalled, "
        "its virtual environment deleted or its clone moved), so your rules are not handed "
        f"over. Install mented again and run `mentectl setup {agent.name}`, or remove the "
        f"hook entries that run shim.py from the {agent.title} settings."
    )
    return json.dumps({"systemMessage": message}, ensure_ascii=True)


def settings_paths(agent: Agent, args: argparse.Namespace) -> list[Path]:
    """The settings files a verb edits: where an install writes, then where older ones did.

    `--settings` and the user's file are one file. `--project` is the agent's
    local, uncommitted project file where it has one (the hook names this
    machine's interpreter and socket), then the shared project file that
    earlier installs wrote to: an install moves our entry out of it, an
    uninstall removes it from both.

    Raises:
        CommandError: a `--project` file is a symlink that leads out of the project
            (writing there would change a file the project does not own).
    """
    if getattr(args, "settings", None):
        return [Path(args.settings).expanduser().absolute()]
    project = getattr(args, "project", None)
    if not project:
        return [agent.settings_path()]
    found = agent.project_install_paths(project)
    for path in found:
        target = outside_link(path, project)
        if target is not None:
            raise CommandError(
                f"{path} leads outside the project, to {target}; nothing was written. "
                "Remove the link to keep the hook in the project, or pass "
                f"--settings {target} to edit that file on purpose."
            )
    return found


# ------------------------------------------------------------- the action table


def needs_in_force(socket: str | None) -> HookNeeds:
    """The tool calls the action table in force needs the hook for.

    Raises:
        CommandError: the config file cannot be used (registering from the
            built-ins alone would leave out the user's own tools, silently).
    """
    _, table, problem = table_in_force(socket)
    if problem:
        raise CommandError(f"{problem}; fix the config file, then run this again")
    return hook_needs(table, user_git_aliases())


def user_git_aliases() -> list[str]:
    """The names of the user's git aliases (system and global config), for the filter.

    A repository's own aliases are not known at install time: `git ALIAS` run
    there starts the hook only with `--all-commands` (see hooks/README.md).
    """
    return sorted(GitAliases().for_directory(str(paths.home())).table)


# ----------------------------------------------------------- checking


def cleanup_root(agent: Agent, path: Path, project: Path | None = None) -> Path | None:
    """The highest directory an uninstall may remove once it is empty, for the file `path`.

    The agent's config directory for its user file (`~/.gemini`), the project's
    top directory of the file for a project file (`.claude`, `.github`); none
    for a file named with `--settings`.
    """
    if path == agent.settings_path():
        return agent.config_dir()
    if project is not None and path.is_relative_to(project) and path != project:
        return project / path.relative_to(project).parts[0]
    return None


def status_needs(socket: str | None) -> HookNeeds | None:
    """The tool calls the table in force needs, to check registrations by; None: unusable."""
    _, table, problem = table_in_force(socket)
    return None if problem else hook_needs(table, user_git_aliases())
