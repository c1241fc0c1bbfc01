"""opencode and Kilo: mented's plugin file in the agent's plugin folder, and no hook entry.

The plugin shipped in the package (`mented.agents.opencode`), with the agent's name
and the socket written in. It is mented's while it starts with the plugin's marker
line; then an install replaces it and an uninstall removes it. Anything else at its
path is the user's (see `in_process`).
"""

from __future__ import annotations

import errno
import json
import os
import socket as socket_module
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from mented import paths
from mented.agents.opencode import (
    PLUGIN_MARKER,
    PLUGIN_PROTOCOL,
    OpencodeAgent,
    plugin_protocol,
    plugin_source,
)
from mented.protocol import HookRequest, encode, recv_frame
from mented.untrusted import Refused, describe_kind, owned_by_user, read_file, shown
from mented.words import counted
from mented_client.agents.base import (
    PlacesAgent,
    Removal,
    cleanup_root,
    install_report,
    print_outcome,
    settings_paths,
)
from mented_client.agents.findings import DoctorFindings, HookCheck, SettingsPlace
from mented_client.agents.in_process import not_installed, sample_event
from mented_client.commands.output import CommandError, print_json
from mented_client.files import display_path, remove_file, write_atomically

if TYPE_CHECKING:
    import argparse

    from mented.protocol import StatusReply
    from mented.registration import HookNeeds
    from mented_client.commands.doctor import Check, FireTarget

# The plugin sees every tool call; the daemon tells which ones name an action.
REGISTERED_FOR = "every tool call (in the agent's process: no process started per call)"

# The plugin is a few KiB; a file over this at its path is not ours.
MAX_PLUGIN_BYTES = 256 * 1024
_AGENT_LINE = 'const AGENT = "opencode"'
_SOCKET_LINE = "const FALLBACK_SOCKET = null"


class PluginError(Exception):
    """The plugin's path holds something mented must not touch; the message says what."""


def plugin_text(agent: OpencodeAgent, socket: Path) -> str:
    """The plugin file as `hooks install` writes it: the agent and the fallback socket in."""
    source = plugin_source()
    assert _AGENT_LINE in source, "the shipped template's line"
    assert _SOCKET_LINE in source, "the shipped template's line"
    return source.replace(_AGENT_LINE, f"const AGENT = {json.dumps(agent.name)}").replace(
        _SOCKET_LINE, f"const FALLBACK_SOCKET = {json.dumps(str(socket))}"
    )


@dataclass(frozen=True)
class PluginFound:
    """What is at the plugin's path.

    `text` is the file's content when it is a regular file of the user's with the marker
    (mented's); `problem` says why anything else there is not mented's to touch.
    """

    path: Path
    exists: bool
    text: str | None = None
    problem: str | None = None

    @property
    def ours(self) -> bool:
        return self.text is not None

    @property
    def protocol(self) -> int | None:
        return plugin_protocol(self.text) if self.text is not None else None

    def socket(self) -> str | None:
        """The fallback socket written in at install; None when it names none."""
        for line in (self.text or "").splitlines():
            if line.startswith("const FALLBACK_SOCKET = "):
                value = json.loads(line.removeprefix("const FALLBACK_SOCKET = "))
                return value if isinstance(value, str) else None
        return None


def inspect_plugin(path: Path) -> PluginFound:
    """What is at `path`, read without following a link, bounded."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return PluginFound(path, exists=False)
    except OSError as exc:
        return PluginFound(path, True, problem=f"cannot look at it: {exc.strerror or exc}")
    where = shown(display_path(path))
    if stat.S_ISLNK(info.st_mode):
        target = shown(str(path.readlink()))
        return PluginFound(
            path,
            True,
            problem=f"{where} is a symbolic link (to {target}); mented does not write "
            "through links: remove the link, or point it at a file of your own",
        )
    if not stat.S_ISREG(info.st_mode):
        return PluginFound(
            path,
            True,
            problem=f"{where} is {describe_kind(info.st_mode)}, not a file mented wrote: "
            "move it away first",
        )
    if not owned_by_user(info):
        return PluginFound(
            path,
            True,
            problem=f"{where} belongs to uid {info.st_uid} (or others may write it), so it is "
            "not mented's: move it away first",
        )
    try:
        data = read_file(path, limit=MAX_PLUGIN_BYTES, shown_as=where)
    except (Refused, FileNotFoundError) as exc:
        return PluginFound(path, True, problem=f"{exc}")
    text = data.decode("utf-8", "replace")
    if not text.startswith(PLUGIN_MARKER):
        return PluginFound(
            path,
            True,
            problem=f"{where} is a file mented did not write; it is left as it is: rename "
            "it if you want mented's plugin there",
        )
    return PluginFound(path, True, text=text)


def write_plugin(path: Path, text: str) -> str:
    """Write the plugin at `path`: "installed", "updated" or "unchanged".

    Raises:
        PluginError: something that is not mented's is at `path`.
        OSError: it cannot be written.
    """
    found = inspect_plugin(path)
    if found.problem is not None:
        raise PluginError(f"{found.problem}; nothing was written")
    if found.text == text:
        return "unchanged"
    write_atomically(path, text, mode=0o644)
    return "updated" if found.exists else "installed"


def remove_plugin(path: Path, *, up_to: Path | None) -> tuple[bool, list[Path]]:
    """Remove mented's plugin at `path` (and the folders that leaves empty, up to `up_to`).

    Returns whether a plugin was removed, and the directories removed with it. A file
    that is not mented's stays, and is no error: there is nothing of ours to remove.

    Raises:
        OSError: it cannot be removed.
    """
    found = inspect_plugin(path)
    if not found.ours:
        return False, []
    try:
        return True, remove_file(path, up_to=up_to)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return False, []
        raise


class PluginFile(PlacesAgent):
    """An agent that loads mented's plugin (opencode, Kilo): the file, and nothing else."""

    agent: OpencodeAgent

    def __init__(self, agent: OpencodeAgent) -> None:
        super().__init__(agent)

    def install(self, args: argparse.Namespace) -> int:
        """Write the plugin into the agent's plugin folder (the user's, or `--project`'s)."""
        agent = self.agent
        path = settings_paths(agent, args)[0]
        socket = paths.socket_path(args.socket).absolute()
        text = plugin_text(agent, socket)
        try:
            outcome = write_plugin(path, text)
        except PluginError as exc:
            raise CommandError(str(exc)) from exc
        except OSError as exc:
            raise CommandError(f"{path}: cannot write it: {exc}") from exc
        notes = []
        if args.project and agent.no_project_local_file:
            notes.append(agent.no_project_local_file)
        if outcome != "unchanged":
            notes.append(f"New {agent.title} sessions load it; a running one does not.")
        if args.json:
            print_json(
                {
                    **install_report(agent, path, outcome),
                    "plugin": str(path),
                    "socket": str(socket),
                    "protocol": PLUGIN_PROTOCOL,
                    "registered_for": REGISTERED_FOR,
                    "notes": notes,
                }
            )
            return 0
        if print_outcome("mented's plugin", agent, path, outcome):
            print(f"  socket: {socket} (unless the agent's $MENTED_SOCKET names another)")
            print(f"  for: {REGISTERED_FOR}")
        for note in notes:
            print(note)
        return 0

    def refuse_command(self) -> Exception | None:
        return CommandError(
            f"{self.title} runs no hook command: it loads mented's plugin, which "
            f"`mentectl hooks install {self.name}` writes",
            status=2,
        )

    def uninstall_places(
        self, places: list[Path], project: Path | None
    ) -> list[tuple[Path, Removal]]:
        done = []
        for path in places:
            try:
                removed, directories = remove_plugin(
                    path, up_to=cleanup_root(self.agent, path, project)
                )
            except OSError as exc:
                raise CommandError(f"{path}: cannot remove it: {exc}") from exc
            done.append(
                (path, Removal(int(removed), deleted=removed, directories=tuple(directories)))
            )
        return done

    def uninstall_lines(
        self, places: list[Path], removals: list[tuple[Path, Removal]]
    ) -> list[str]:
        lines = []
        for path, removal in removals:
            if removal.removed:
                lines.append(f"Removed mented's plugin {display_path(path)}.")
                lines.extend(
                    f"  {display_path(directory)} was left empty: removed too"
                    for directory in removal.directories
                )
            else:
                found = inspect_plugin(path)
                if found.problem:
                    lines.append(f"{found.problem} (not mented's plugin: left as it is)")
        if not any(removal.removed for _, removal in removals):
            where = " or ".join(display_path(path) for path in places)
            lines.append(f"No mented plugin for {self.title} in {where}; nothing changed.")
        return lines

    def project_hooks(self, project: Path) -> list[Path]:
        return [
            path for path in self.agent.project_install_paths(project) if inspect_plugin(path).ours
        ]

    def hook_for_user(self) -> bool:
        return inspect_plugin(self.agent.settings_path()).ours

    def _place(self, path: Path, *, always: bool) -> SettingsPlace | None:
        """The plugin at `path` as `hooks status` reports a settings file; None when there
        is nothing there and `always` is false."""
        agent = self.agent
        found = inspect_plugin(path)
        if not found.exists and not always:
            return None
        result = SettingsPlace(settings=str(path), exists=found.exists)
        if found.problem is not None:
            if found.exists and not always:
                return None  # a file of the user's in a project: not ours, nothing to say
            result.error = found.problem
            return result
        if not found.ours:
            return result
        problems = []
        if found.text != plugin_text(agent, Path(found.socket() or "")):
            problems.append(
                f"an older version of mented's plugin (protocol {found.protocol}, this mentectl "
                f"ships {PLUGIN_PROTOCOL}): run `mentectl hooks install {agent.name}` again"
            )
        result.hooks = [
            HookCheck(
                command=f"plugin {path}",
                timeout=None,
                interpreter=None,
                shim=None,
                socket=found.socket(),
                problems=problems,
                event="plugin",
            )
        ]
        return result

    def places(self, extra: str | None, needs: HookNeeds | None = None) -> list[SettingsPlace]:  # noqa: ARG002 - the plugin sees every call: no gaps
        """The user's plugin, this directory's project plugin, and `extra`."""
        agent = self.agent
        found = [self._place(agent.settings_path(), always=True)]
        found.append(self._place(agent.project_settings_path(Path.cwd()), always=False))
        if extra:
            found.append(self._place(Path(extra).expanduser().absolute(), always=True))
        return [one for one in found if one is not None]

    def registration_warnings(self, needs: HookNeeds) -> list[str]:  # noqa: ARG002
        """None: the plugin hands every tool call to the daemon."""
        return []

    def doctor(
        self,
        target: FireTarget,
        status: StatusReply | None,  # noqa: ARG002 - the fire asks the daemon itself
        needs: HookNeeds | None,
        expected: dict[tuple[str, str], str],  # noqa: ARG002 - no command line to compare
    ) -> DoctorFindings:
        checks = check_plugin(self.agent, self.places(None, needs), target)
        return DoctorFindings(checks, installed=any(c.link.startswith("fire ") for c in checks))


def check_plugin(
    agent: OpencodeAgent, places: list[SettingsPlace], target: FireTarget
) -> list[Check]:
    """mented's plugin in the agent's folders: there, of this version, speaking the
    daemon's protocol, and a sample call through the socket it names answered in time."""
    from mented_client.commands.doctor import Check  # noqa: PLC0415 - doctor imports this

    link = f"hook {agent.name}"
    install = f"`mentectl hooks install {agent.name}`"
    checks = [
        Check(link, "fail", place.error, fix=f"then {install}") for place in places if place.error
    ]
    found = [(place, hook) for place in places for hook in place.hooks]
    if not found and not checks:
        return [not_installed(agent)]
    for place, hook in found:
        protocol = inspect_plugin(Path(place.settings)).protocol
        if target.protocol is not None and protocol != target.protocol:
            checks.append(
                Check(
                    link,
                    "fail",
                    f"{place.settings}: the plugin speaks protocol {protocol}, the daemon "
                    f"{target.protocol}, so the daemon may not read its calls",
                    fix=f"{install} (then restart {agent.title}); or `mentectl restart` when "
                    "the daemon is the older one",
                )
            )
        elif hook.problems:
            checks.append(Check(link, "fail", f"{place.settings}: {'; '.join(hook.problems)}"))
        else:
            checks.append(Check(link, "ok", f"plugin installed in {place.settings}"))
        socket = Path(os.environ.get(paths.SOCKET_ENV) or hook.socket or target.socket)
        checks.append(check_plugin_fire(agent, socket, target))
    return checks


def check_plugin_fire(agent: OpencodeAgent, socket: Path, target: FireTarget) -> Check:
    """A sample `git commit` call sent as the plugin sends it, on the socket it names."""
    from mented_client.commands.doctor import (  # noqa: PLC0415 - doctor imports this
        SAMPLE_ACTION,
        SAMPLE_COMMAND,
        Check,
        find_fire,
    )

    link = f"fire {agent.name}"
    if not target.daemon_up:
        return Check(link, "warn", "not sent: the daemon is down", fix="see the daemon line above")
    session, event = sample_event(agent, SAMPLE_COMMAND)
    request = HookRequest(
        agent=agent.name, test=True, event=msgspec.Raw(event), deadline=time.time() + 2.0
    )
    started = time.perf_counter()
    try:
        with socket_module.socket(socket_module.AF_UNIX, socket_module.SOCK_STREAM) as sock:
            sock.settimeout(2.0)
            sock.connect(str(socket))
            sock.sendall(encode(request))
            answer = recv_frame(sock)
    except (OSError, ValueError) as exc:
        return Check(
            link,
            "fail",
            f"the plugin's socket {socket} does not answer: {exc}",
            fix=f"the plugin and mentectl must use the same socket: `mentectl hooks install "
            f"{agent.name}` writes this one in",
        )
    took = f"{(time.perf_counter() - started) * 1000:.0f} ms"
    if answer and not answer.startswith(b"{"):
        return Check(
            link, "fail", f"the daemon answered something that is not JSON: {answer[:200]!r}"
        )
    fire = find_fire(socket, session)
    rules = len(fire.rule_ids) if fire is not None else 0
    what = (
        f"{counted(rules, 'rule')} for {SAMPLE_ACTION} handed over"
        if rules
        else f"no rule for {SAMPLE_ACTION} yet"
    )
    return Check(
        link, "ok", f"a sample `git commit` came back in {took}, no process started: {what}"
    )
