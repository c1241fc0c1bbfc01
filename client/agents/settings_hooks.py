"""Agents whose hooks are entries in a settings file: mented's entries spliced in and out.

Claude Code, Codex, Gemini CLI, Copilot CLI, Cursor, Qwen Code, Crush, Factory Droid,
Augment Auggie and Kiro CLI each read their hooks from a JSON file (the layout of
each: the adapter's `SettingsLayout`). `hooks install` splices mented's entries in
(`mented_client.hook_settings`), one per event the agent's adapter names, for the
tool calls the action table needs; `hooks uninstall` takes exactly those out again;
`hooks status` and `doctor` find them by the shim they run and check that it and its
interpreter still exist. `HookFile` (`hook_file.py`) is the same for a hook that is a
file of its own.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mented.agents.pretooluse import (
    SESSION_START,
    SESSION_START_MATCHER,
    InstalledEntry,
    SettingsLayout,
)
from mented_client import added_settings
from mented_client.agents.base import (
    DEFAULT_TIMEOUT_S,
    PlacesAgent,
    Removal,
    cleanup_root,
    hook_command,
    install_report,
    needs_in_force,
    print_outcome,
    settings_paths,
)
from mented_client.agents.findings import (
    DoctorFindings,
    HookCheck,
    SettingsPlace,
    check_entry,
    gaps_fix,
    gaps_problem,
    missing_problem,
)
from mented_client.commands.output import CommandError, print_json
from mented_client.files import display_path, write_atomically
from mented_client.git_ignore import git_ignores
from mented_client.hook_settings import (
    MentedEntry,
    SettingsError,
    add_hook,
    backup_kept,
    find_entries,
    has_setting,
    installed_shim,
    missing_events,
    read_project_settings,
    read_settings,
    read_settings_at,
    remove_hooks,
    write_without_ours,
)

if TYPE_CHECKING:
    import argparse

    from mented.agents import Agent
    from mented.protocol import StatusReply
    from mented.registration import HookNeeds
    from mented_client.commands.doctor import FireTarget


class SettingsHooks(PlacesAgent):
    """An agent whose hooks are entries in its JSON settings file."""

    # ------------------------------------------------------------ hooks install

    def install(self, args: argparse.Namespace) -> int:
        agent = self.agent
        if args.timeout < 1:
            raise CommandError("--timeout must be at least 1 second", status=2)
        path, *older = settings_paths(agent, args)
        command = hook_command(agent, args.python, args.socket)
        session_command = hook_command(agent, args.python, args.socket, SESSION_START)
        needs = needs_in_force(args.socket)
        prefilter = not getattr(args, "all_commands", False)
        groups = with_session_command(
            agent.hook_groups(command, args.timeout, needs, prefilter=prefilter),
            agent,
            command,
            session_command,
        )
        try:
            previous = read_settings_at(path, args.project)
            layout = agent.layout
            before = find_entries(previous, path, installed_shim(), layout) if previous else []
            text = add_hook(
                previous or "",
                path,
                groups=groups,
                shim_path=installed_shim(),
                layout=layout,
            )
            changed = text != previous
            backup = write_atomically(path, text, backup=True) if changed else None
            if changed:
                note_added_settings(
                    path, layout, previous or "", text, installed_before=bool(before)
                )
            # An earlier install in the project's shared file would run the hook twice.
            moved = [
                (place, removal)
                for place in older
                if (
                    removal := self.remove(
                        place,
                        up_to=cleanup_root(agent, place, args.project),
                        project=args.project,
                    )
                ).removed
            ]
        except SettingsError as exc:
            raise CommandError(str(exc)) from exc
        except OSError as exc:
            raise CommandError(f"{path}: cannot write it: {exc}") from exc
        outcome = "unchanged" if not changed else "updated" if before or moved else "installed"
        trusted = changed and self._all_trusted(path, text)
        notes = [agent.install_note] if agent.install_note and changed and not trusted else []
        if trusted:
            notes.append(f"{agent.title} already trusts these entries: nothing to do there.")
        if args.project:
            notes.extend(project_notes(agent, path))
        if args.json:
            print_json(
                {
                    **install_report(agent, path, outcome),
                    "command": command,
                    "timeout": args.timeout,
                    "registered_for": agent.registration_summary(needs, prefilter=prefilter),
                    "every_command": not prefilter,
                    "backup": str(backup) if backup else None,
                    "moved_from": [str(place) for place, _ in moved],
                    "note": agent.install_note if agent.install_note in notes else None,
                    "notes": notes,
                }
            )
            return 0
        if print_outcome("the mented hook", agent, path, outcome):
            print(f"  runs: {command}")
            print(f"  for: {agent.registration_summary(needs, prefilter=prefilter)}")
            if backup:
                print(f"  previous file saved as {display_path(backup)}")
        for place, removal in moved:
            print(
                f"Moved it out of {display_path(place)}, the project's shared file "
                f"({removal.in_words()})."
            )
        for note in notes:
            print(note)
        return 0

    def _all_trusted(self, path: Path, text: str) -> bool:
        """Whether the agent already runs every entry of ours in `text` (Codex trusts its
        hooks one by one: an install that left them as they were needs no new trust)."""
        agent = self.agent
        if agent.entry_trust is None:
            return False
        entries = find_entries(text, path, installed_shim(), agent.layout)
        return bool(entries) and all(
            agent.entry_trust(
                InstalledEntry(path, e.event, e.group, e.hook, e.handler, e.matcher)
            ).problem
            is None
            for e in entries
        )

    # ---------------------------------------------------------- hooks uninstall

    def remove(
        self, path: Path, *, up_to: Path | None = None, project: Path | None = None
    ) -> Removal:
        """Take the agent's hook entries out of the settings file at `path`.

        A file left as an empty object (`{}`: the install created it, or it held
        nothing else), or a hooks-only file left without hooks, is removed rather
        than left behind, and so are the directories that leaves empty, up to
        `up_to` (`cleanup_root`). A symlinked file (a dotfiles checkout) stays,
        as `{}`.

        No backup is written: what goes is mented's own, and every other member of
        the file is checked to be as it was. The install's backup goes too once it
        holds nothing the file does not (`settle_backup`); one that differs stays.

        Raises:
            SettingsError: the file cannot be read as settings, or removing our
                entries would change anything else.
            OSError: it cannot be written.
        """
        agent = self.agent
        previous = read_settings_at(path, project)
        if not previous:
            return Removal()
        layout = agent.layout
        setting = ".".join(layout.enable) if layout.enable else None
        enable_added = added_settings.added_by_mented(path, setting) if setting else None
        text, removed = remove_hooks(
            previous, path, installed_shim(), layout, enable_added=enable_added
        )
        if not removed:
            return Removal()
        ours = {"hooks", *layout.top, *(layout.enable[:1] if layout.enable else ())}
        ours.update(layout.disabled[:1] if layout.disabled else ())
        backup, directories = write_without_ours(
            path, previous, text, ours, agent, up_to=up_to, enable_added=enable_added
        )
        if setting:
            # A record left behind only makes a later uninstall fall back to the old rule.
            with contextlib.suppress(OSError):
                added_settings.forget(path)
        if directories is not None:
            return Removal(removed, backup, deleted=True, directories=tuple(directories))
        return Removal(removed, backup)

    def uninstall_places(
        self, places: list[Path], project: Path | None
    ) -> list[tuple[Path, Removal]]:
        try:
            return [
                (
                    path,
                    self.remove(
                        path, up_to=cleanup_root(self.agent, path, project), project=project
                    ),
                )
                for path in places
            ]
        except SettingsError as exc:
            raise CommandError(str(exc)) from exc
        except OSError as exc:
            raise CommandError(f"cannot write the settings file: {exc}") from exc

    def uninstall_lines(
        self, places: list[Path], removals: list[tuple[Path, Removal]]
    ) -> list[str]:
        lines = []
        found = [(path, removal) for path, removal in removals if removal.removed]
        for path, removal in found:
            where = display_path(path)
            entries = "entry" if removal.removed == 1 else "entries"
            if removal.deleted:
                lines.append(
                    f"Removed {removal.removed} mented hook {entries} from {where}; it held "
                    "nothing else, so it is removed."
                )
                lines.extend(
                    f"  {display_path(directory)} was left empty: removed too"
                    for directory in removal.directories
                )
            else:
                lines.append(
                    f"Removed {removal.removed} mented hook {entries} from {where}; nothing "
                    "else changed."
                )
            if removal.backup:
                lines.append(f"  {backup_kept(removal.backup)}")
        if not found:
            where = " or ".join(display_path(path) for path in places)
            lines.append(f"No mented hook for {self.title} in {where}; nothing changed.")
        return lines

    # -------------------------------------------------------- reading a place

    def read(self, path: Path, project: Path | None) -> str | None:
        """The text of the file at `path` (a project's read as the project's: `project`);
        None when there is none.

        Raises:
            SettingsError: it cannot be read as the agent's file.
        """
        return read_settings_at(path, project)

    def entries(self, text: str | None, path: Path) -> list[MentedEntry]:
        """mented's entries in the file's `text`.

        Raises:
            SettingsError: the text is not the agent's settings.
        """
        if not text or not text.strip():
            return []
        return find_entries(text, path, installed_shim(), self.agent.layout)

    def has_hook(self, path: Path, project: Path | None) -> bool:
        """Whether the file at `path` holds an entry of mented's (any installation's)."""
        try:
            text = read_project_settings(path, project) if project else read_settings(path)
            return bool(text and text.strip() and find_entries(text, path, None, self.agent.layout))
        except SettingsError:
            return False

    def project_hooks(self, project: Path) -> list[Path]:
        return [
            path
            for path in self.agent.project_install_paths(project)
            if self.has_hook(path, project)
        ]

    def hook_for_user(self) -> bool:
        return self.has_hook(self.agent.settings_path(), None)

    # ------------------------------------------------------------- hooks status

    def places(self, extra: str | None, needs: HookNeeds | None = None) -> list[SettingsPlace]:
        agent = self.agent
        user = agent.settings_path()
        here = Path.cwd()
        found = [user, *agent.project_install_paths(here)]
        extra_path = Path(extra).expanduser().absolute() if extra else None
        if extra_path is not None:
            found.append(extra_path)
        places = []
        for path in dict.fromkeys(found):  # unique, in order
            try:
                # The user's file, and `extra` named on the command line, are theirs; the
                # directory's own files are the project's (a cloned repository's).
                text = self.read(path, None if path in (user, extra_path) else here)
            except SettingsError as exc:
                places.append(SettingsPlace(settings=str(path), exists=True, error=str(exc)))
                continue
            if text is None and path != user:
                continue
            place = SettingsPlace(settings=str(path), exists=text is not None)
            try:
                entries = self.entries(text, path)
            except SettingsError as exc:
                place.error = str(exc)
                entries = []
            place.hooks = [check_agent_entry(agent, path, entry) for entry in entries]
            place.missing = missing_events(entries, agent.hook_events) if entries else []
            if entries and needs is not None:
                place.gaps = agent.registration_gaps(
                    [
                        InstalledEntry(path, e.event, e.group, e.hook, e.handler, e.matcher)
                        for e in entries
                    ],
                    needs,
                )
            places.append(place)
        return places

    # ------------------------------------------------------------------ doctor

    def doctor(
        self,
        target: FireTarget,
        status: StatusReply | None,  # noqa: ARG002 - the shim's fire says what the daemon does
        needs: HookNeeds | None,
        expected: dict[tuple[str, str], str],
    ) -> DoctorFindings:
        from mented_client.commands.doctor import (  # noqa: PLC0415 - doctor imports this
            Check,
            not_this_installation,
            own_command,
        )

        agent, name = self.agent, self.name
        findings = DoctorFindings()
        checks = findings.checks
        places = self.places(None, needs)
        entries = [(place, hook) for place in places for hook in place.hooks]
        errors = [place for place in places if place.error]
        checks.extend(
            Check(
                f"hook {name}",
                "fail",
                f"{place.settings}: {place.error}",
                fix=f"fix the file, then `mentectl hooks install {name}`",
            )
            for place in errors
        )
        if not entries and not errors:
            checks.append(
                Check(
                    f"hook {name}",
                    "skip",
                    f"not installed for {agent.title}",
                    fix=f"`mentectl setup {name}` if you use {agent.title}",
                )
            )
        fire: tuple[str, object] | None = None
        for place, hook in entries:
            link = f"hook {name} {hook.event}"
            findings.installed = True
            ours = own_command(agent, place.settings, hook, expected, target.socket)
            if hook.problems:
                checks.append(
                    Check(
                        link,
                        "fail",
                        f"{place.settings}: {'; '.join(hook.problems)}",
                        fix=f"`mentectl hooks install {name}`",
                    )
                )
            elif hook.trust_problem:
                checks.append(
                    Check(link, "fail", f"{place.settings}: {hook.trust_problem}", hook.trust_fix)
                )
            elif expected and ours is None:
                checks.append(not_this_installation(name, place.settings, hook))
            else:
                trust = f" ({hook.trust})" if hook.trust else ""
                checks.append(Check(link, "ok", f"installed in {place.settings}{trust}"))
                # One sample fire per agent, with its tool event's command line: built
                # here (`own_command`), never read from the file.
                if ours is not None and (hook.event == agent.event_name or fire is None):
                    fire = (ours, hook.timeout)
        checks.extend(
            Check(
                f"hook {name}",
                "warn",
                f"{place.settings}: {missing_problem(place.missing)}",
                fix=f"`mentectl hooks install {name}` (it changes nothing else)",
            )
            for place in places
            if place.missing
        )
        checks.extend(
            Check(
                f"hook {name}",
                "warn",
                f"{place.settings}: {gaps_problem(place.gaps)}",
                fix=gaps_fix(agent, Path(place.settings)),
            )
            for place in places
            if place.gaps
        )
        if fire is not None:
            command, timeout = fire
            seconds = agent.layout.timeout_seconds(timeout) or DEFAULT_TIMEOUT_S
            findings.fire = (command, seconds)
        return findings


# ------------------------------------------------------------------- helpers


def with_session_command(
    groups: dict[str, list[dict[str, Any]]], agent: Agent, command: str, session_command: str
) -> dict[str, list[dict[str, Any]]]:
    """`groups` (`Agent.hook_groups`) with `session_command` in the `SessionStart` entries."""
    if session_command == command or SESSION_START not in groups:
        return groups
    key = agent.layout.command_key

    def swap(entry: dict[str, Any]) -> dict[str, Any]:
        return {**entry, key: session_command} if entry.get(key) == command else entry

    session = [
        {**group, "hooks": [swap(hook) for hook in group["hooks"]]}
        if agent.layout.nested
        else swap(group)
        for group in groups[SESSION_START]
    ]
    return {**groups, SESSION_START: session}


def note_added_settings(
    path: Path, layout: SettingsLayout, previous: str, text: str, *, installed_before: bool
) -> None:
    """Record whether the install added the layout's `enable` setting (`added_settings`).

    Found there with no record and mented's entries already in the file (an install
    older than the record): nothing is recorded, and the uninstall keeps the old rule.
    """
    if layout.enable is None:
        return
    setting = ".".join(layout.enable)
    added = not has_setting(previous, *layout.enable) and has_setting(text, *layout.enable)
    if not added and installed_before and added_settings.added_by_mented(path, setting) is None:
        return
    try:
        added_settings.note_install(path, setting, added=added)
    except OSError as exc:
        print(
            f"mentectl: cannot record in {display_path(added_settings.record_path())} that "
            f"mented set {setting} in {display_path(path)} ({exc.strerror or exc}): "
            "`hooks uninstall` will take it out only with the file's last hook",
            file=sys.stderr,
        )


def project_notes(agent: Agent, path: Path) -> list[str]:
    """What to know about a project install: the file is committed, or git would commit it."""
    if agent.project_local_file is None:
        return [
            agent.no_project_local_file
            or f"{agent.title} has no uncommitted project file that mented knows of, so this "
            "file names this machine's interpreter and socket: keep it out of git (add it to "
            f".git/info/exclude), or install for your user instead (`mentectl hooks install "
            f"{agent.name}`)."
        ]
    if git_ignores(path) is False:
        name = agent.project_local_file
        return [
            f"git does not ignore {name} in this repository: add it to .gitignore (or "
            ".git/info/exclude) so that this machine's paths are not committed."
        ]
    return []


def check_agent_entry(agent: Agent, path: Path, entry: MentedEntry) -> HookCheck:
    """`check_entry`, plus whether the agent itself will run the entry."""
    check = check_entry(entry)
    check.event = entry.event
    if agent.pinned_rules and entry.event == SESSION_START and entry.matcher is not None:
        missed = set(SESSION_START_MATCHER.split("|")) - set(entry.matcher.split("|"))
        if {"startup", "resume"} & missed:
            check.problems.append(
                f"runs only on {entry.matcher} (an older install), so pinned rules miss "
                "new sessions: install the hook again"
            )
    if agent.entry_trust is not None:
        verdict = agent.entry_trust(
            InstalledEntry(path, entry.event, entry.group, entry.hook, entry.handler, entry.matcher)
        )
        check.trust, check.trust_problem, check.trust_fix = (
            verdict.state,
            verdict.problem,
            verdict.fix,
        )
    return check
