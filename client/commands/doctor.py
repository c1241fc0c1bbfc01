"""`mentectl doctor` checks each link from the agent to the rules; `mentectl setup` makes them.

The chain, in the order doctor walks it: the config file is valid; the daemon
answers; the service is installed and enabled (where there is a service
manager); for each agent, the hook is installed and its interpreter and shim
exist; and a sample `git commit` event, fed to the installed hook command the
way the agent runs it (a shell, the event JSON on stdin), comes back within the
hook's time budget, silent on stderr, and reaches the daemon.

Doctor runs no command line it reads from a file. A settings file (a project's
`.claude/settings.json` comes with a `git clone`) may hold an entry that only looks
like mented's; only the exact command line `hooks install` writes for this
installation is test-fired, built here and compared with the file's. Any other
entry is reported, not run (docs/security.md).

Every failed link names the fix. `setup` installs what is missing (the
service, or a detached daemon where there is no service manager; the hook),
then runs doctor and shows how to add a first rule.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from mented import __version__, paths
from mented.actions import load_table_in_force
from mented.agents import AGENTS, Agent
from mented.agents.pretooluse import pretooluse_event
from mented.protocol import (
    FireRecord,
    ListRequest,
    LogReply,
    LogRequest,
    MemoriesReply,
    StatusReply,
)
from mented.words import counted
from mented_client.agents import client_of
from mented_client.agents.base import DEFAULT_TIMEOUT_S, hook_command, status_needs
from mented_client.agents.findings import HookCheck
from mented_client.commands import hooks, mcp
from mented_client.commands.output import CommandError, escape_controls, print_json
from mented_client.commands.service import (
    START_TIMEOUT_S,
    already_running,
    answering,
    install_service,
    start_detached,
)
from mented_client.commands.status import (
    OVER_CAP_FIX,
    describe_fork,
    describe_over_cap,
    skipped_summary,
    started_by,
)
from mented_client.connection import Client, DaemonError, NotRunningError, ProtocolError
from mented_client.service_manager import Manager, detect, no_manager_reason

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from mented.config import Config

State = Literal["ok", "warn", "fail", "skip"]
SAMPLE_COMMAND = "git commit -m 'mented doctor: test fire'"
SAMPLE_ACTION = "git-commit"
TEST_FIRE_ENV = "MENTED_TEST_FIRE"  # read by the shim (client/shim.py)
FIRST_RULE = (
    "mentectl rule add git-commit "
    "'Commit messages: one line, a conventional prefix (feat:, fix:, docs:), no emojis'"
)


@dataclass
class Check:
    """One link of the chain: its state, what was found, and what to do about it."""

    link: str
    state: State
    detail: str
    fix: str | None = None


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    doctor = subparsers.add_parser(
        "doctor",
        parents=[common],
        help="check each link from the agent's hook to the rules, and say what to fix",
        description="Exit 0 when every link works, 1 when one fails.",
    )
    doctor.set_defaults(handler=run_doctor)

    setup = subparsers.add_parser(
        "setup",
        parents=[common],
        help="set mented up for an agent: service, hook, checks",
        description="Installs and starts the service (or a detached daemon where there is no "
        "service manager), installs the agent's hook, registers the MCP server, runs "
        "`mentectl doctor` and shows how to add a first rule. Safe to run again.",
    )
    setup.add_argument(
        "agent", choices=sorted(AGENTS), metavar="AGENT", help=", ".join(sorted(AGENTS))
    )
    setup.add_argument(
        "--no-service",
        action="store_true",
        help="run a detached daemon instead of installing a service",
    )
    setup.set_defaults(handler=run_setup)


# ------------------------------------------------------------------- checks


def check_config() -> tuple[Check, Config | None]:
    path = paths.config_path()
    config, table, problem = load_table_in_force(path)
    if problem:
        return (
            Check(
                "config",
                "fail",
                problem,
                fix=f"edit {path}, then `mentectl reload`; until then the daemon keeps the "
                "settings it had (one started meanwhile runs on the built-in settings)",
            ),
            None,
        )
    where = f"{path}" if path.exists() else f"{path} (absent: built-in defaults)"
    actions = counted(len(table.names()), "action")
    return Check("config", "ok", f"{where}: valid, {actions}"), config


def check_daemon(socket: Path, manager: Manager | None) -> tuple[Check, StatusReply | None]:
    status = answering(socket, timeout=2.0)
    if status is None:
        if manager is not None and manager.installed():
            fix = f"`mentectl service start`; if it fails, see {_service_log(manager)}"
        else:
            fix = "`mentectl start` (or `mentectl setup claude-code` to install the service)"
        return Check("daemon", "fail", f"nothing answers on {socket}", fix=fix), None
    detail = f"pid {status.pid}, version {status.version}, socket {socket}"
    if status.socket_activated:
        detail += " (socket-activated)"
    how = started_by(status)
    if how:
        detail += f", started {how}"
    if status.version != __version__:
        return (
            Check(
                "daemon",
                "warn",
                f"{detail}: it runs version {status.version}, this mentectl is {__version__}",
                fix="`mentectl restart` to run the installed version",
            ),
            status,
        )
    if status.data_dir != str(paths.data_dir()):
        return (
            Check(
                "daemon",
                "warn",
                f"{detail}: it serves {status.data_dir}, mentectl expects {paths.data_dir()}",
                fix=f"make ${paths.DATA_DIR_ENV} the same for the daemon and for mentectl",
            ),
            status,
        )
    return Check("daemon", "ok", detail), status


def _service_log(manager: Manager) -> str:
    if manager.name == "systemd":
        return "`journalctl --user -u mented`"
    return str(paths.state_dir() / "mented.log")


def check_service(socket: Path, manager: Manager | None, status: StatusReply | None) -> Check:
    """Whether something keeps the daemon running: the service, else what started it."""
    in_terminal = status is not None and status.started_by == "terminal"
    if manager is None:
        none_here = f"no service manager here ({no_manager_reason()})"
        if status is not None and in_terminal:
            return Check(
                "service",
                "warn",
                f"{none_here}; the daemon (pid {status.pid}) runs in a terminal and stops when "
                "that terminal closes",
                fix="`mentectl restart` runs it detached instead (it then outlives the terminal)",
            )
        how = started_by(status) if status is not None else None
        running = (
            f"the daemon was started {how}" if how else "`mentectl start` runs the daemon detached"
        )
        return Check(
            "service",
            "skip",
            f"{none_here}: {running}; nothing starts it by itself at login",
        )
    if not manager.installed():
        detail = (
            f"mented is not installed as a {manager.name} service: nothing starts it at login "
            "or restarts it after a crash"
        )
        if in_terminal:
            detail += "; the daemon runs in a terminal and stops when that terminal closes"
        return Check(
            "service",
            "warn",
            detail,
            fix="`mentectl service install` (it replaces a daemon running detached or in a "
            "terminal)",
        )
    interpreter = manager.interpreter()
    if interpreter is not None and not interpreter.exists():
        return Check(
            "service",
            "fail",
            f"the {manager.name} service runs {interpreter}, which no longer exists",
            fix="`mentectl service install` (rewrites it with this interpreter)",
        )
    if not manager.enabled():
        return Check(
            "service",
            "fail",
            f"the {manager.name} service is installed but not enabled",
            fix="`mentectl service install` (enables it)",
        )
    if manager.socket_path() != socket:
        return Check(
            "service",
            "warn",
            f"the service listens on {manager.socket_path()}, mentectl and hooks use {socket}",
            fix=f"unset ${paths.SOCKET_ENV} (or set it to {manager.socket_path()})",
        )
    if status is not None and status.started_by in {"mentectl", "terminal", "other"}:
        return Check(
            "service",
            "warn",
            f"the {manager.name} service is installed, but the daemon answering (pid "
            f"{status.pid}) is not the service's: it runs {started_by(status)}",
            fix="`mentectl stop`, then `mentectl service start`",
        )
    return Check("service", "ok", f"{manager.name}: installed and enabled")


@dataclass(frozen=True)
class FireTarget:
    """Where a test fire should land, and how fast."""

    socket: Path
    daemon_up: bool
    budget_ms: int
    protocol: int | None = None  # the daemon's protocol version, when it answered


def this_installation(socket: Path) -> tuple[dict[tuple[str, str], str], Check | None]:
    """The command line `hooks install` writes for each agent and event, on this machine.

    The only command lines doctor runs: one found in a settings file is not run unless
    it is exactly one of these (a project's file is the repository's, and a command
    that only looks like mented's would run whatever the repository chose).
    """
    expected = {}
    try:
        for name, agent in AGENTS.items():
            for event in agent.hook_events:
                expected[name, event] = hook_command(agent, None, str(socket), event)
    except CommandError as exc:
        return {}, Check(
            "hooks",
            "warn",
            f"cannot tell the hook command of this installation, so none is test-fired: {exc}",
        )
    return expected, None


def own_command(
    agent: Agent,
    settings: str,
    hook: HookCheck,
    expected: dict[tuple[str, str], str],
    socket: Path,
) -> str | None:
    """The command line `hooks install` writes here that `hook` holds; None: it holds another.

    In any file, the default one (`expected`, from `this_installation`); in the user's
    own settings file also the one written with `--python` (the user chose that
    interpreter; a project's file did not).
    """
    ours = expected.get((agent.name, hook.event))
    if ours is not None and hook.command == ours:
        return ours
    if Path(settings) != agent.settings_path() or not hook.interpreter:
        return None
    try:
        chosen = hook_command(agent, hook.interpreter, str(socket), hook.event)
    except CommandError:
        return None
    return chosen if hook.command == chosen else None


def not_this_installation(name: str, settings: str, hook: HookCheck) -> Check:
    """An entry that runs mented's shim but not with this installation's command line."""
    why = "not the command line this installation's `hooks install` writes"
    if not hook.guarded:
        why += (
            " (it has the form of older installs, which exits 2, and the agent then blocks "
            "the command, once mented is uninstalled or moved)"
        )
    runs = hook.command if len(hook.command) <= 200 else hook.command[:200] + "..."
    user_file = Path(settings) == AGENTS[name].settings_path()
    fix = (
        f"`mentectl hooks install {name}` rewrites it"
        if user_file
        else f"if the entry is yours, `mentectl hooks install {name} --settings "
        f"{shlex.quote(settings)}` rewrites it; one the project committed runs what the "
        "project chose"
    )
    return Check(
        f"hook {name} {hook.event}",
        "warn",
        f"{settings}: {why}, so doctor does not run it (runs: {runs})",
        fix=fix,
    )


def check_hooks(target: FireTarget, status: StatusReply | None = None) -> list[Check]:
    checks: list[Check] = []
    fires: list[tuple[Agent, str, float]] = []
    installed = False
    needs = status_needs(str(target.socket))
    expected, unknown = this_installation(target.socket)
    if unknown is not None:
        checks.append(unknown)
    for name, agent in sorted(AGENTS.items()):
        found = client_of(name).doctor(target, status, needs, expected)
        installed = installed or found.installed
        checks.extend(found.checks)
        if found.fire is not None:
            fires.append((agent, *found.fire))
    # A filtered install has one handler per condition: the same verdict, said once.
    checks = list({(c.link, c.state, c.detail, c.fix): c for c in checks}.values())
    if not installed and not any(check.state == "fail" for check in checks):
        checks.append(
            Check(
                "hooks",
                "fail",
                "no agent has the mented hook: nothing hands rules over",
                fix="`mentectl setup claude-code` (or codex)",
            )
        )
    for agent, command, seconds in fires:
        checks.append(check_fire(agent, command, seconds, target))
    return checks


def sample_event(session: str, cwd: Path, agent: Agent | None = None) -> bytes:
    """The event `agent` (default: Claude Code's shape) sends before a `git commit`."""
    if agent is not None:
        return agent.sample_event(SAMPLE_COMMAND, cwd=str(cwd), session=session)
    return pretooluse_event(
        SAMPLE_COMMAND, cwd=str(cwd), session=session, tool_use_id=f"toolu_{session}"
    )


def check_fire(agent: Agent, command: str, timeout_s: float, target: FireTarget) -> Check:
    """Run the installed hook command as the agent would, on a sample commit event.

    `command` is this installation's own command line (`this_installation`), which the
    settings file was found to hold: never a command line read from a file.
    """
    link = f"fire {agent.name}"
    session = f"mented-doctor-{os.getpid()}-{time.time_ns()}"
    started = time.perf_counter()
    try:
        result = subprocess.run(  # noqa: S602 - the agent runs it through a shell too
            command,
            shell=True,
            input=sample_event(session, Path.cwd(), agent),
            env=os.environ | {TEST_FIRE_ENV: "1"},  # the shim marks it: not the user's fire
            capture_output=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Check(
            link,
            "fail",
            f"the hook did not return within {timeout_s:g} s",
            fix=f"`mentectl hooks install {agent.name}`",
        )
    elapsed_ms = (time.perf_counter() - started) * 1000
    took = f"{elapsed_ms:.0f} ms"
    # Kiro CLI's stop is exit status 2 with the rules on stderr (the shim's block).
    blocked = agent.blocks_by_exit and result.returncode == 2 and not result.stdout
    if (result.returncode != 0 or result.stderr) and not blocked:
        said = result.stderr.decode(errors="replace").strip()[:300]
        return Check(
            link,
            "fail",
            f"the hook exited {result.returncode}"
            + (f" and printed to stderr: {said}" if said else ""),
            fix=f"`mentectl hooks install {agent.name}`",
        )
    if result.stdout:
        try:
            json.loads(result.stdout)
        except ValueError:
            return Check(
                link,
                "fail",
                f"the hook printed something that is not JSON: {result.stdout[:200]!r}",
                fix="`mentectl restart`",
            )
    if elapsed_ms > target.budget_ms:
        return Check(
            link,
            "fail",
            f"the hook took {took}, over the {target.budget_ms} ms budget doctor checks "
            "($MENTED_HOOK_BUDGET_MS, else [hook] budget_ms; the shim itself stops at "
            "$MENTED_HOOK_BUDGET_MS, default 250 ms, and the agent then gets nothing)",
            fix="`mentectl status` shows the daemon's latency; `mentectl hooks install "
            f"{agent.name}` rewrites a slow interpreter path",
        )
    if not target.daemon_up:
        return Check(
            link,
            "warn",
            f"the hook returned in {took}, silent: the daemon is down",
            fix="see the daemon line above",
        )
    fire = find_fire(target.socket, session)
    if fire is None:
        return Check(
            link,
            "fail",
            f"the hook returned in {took} but did not reach the daemon on {target.socket}",
            fix=f"the hook and mentectl must use the same socket: check ${paths.SOCKET_ENV} "
            f"in the agent's environment, then `mentectl hooks install {agent.name}`",
        )
    rules = len(fire.rule_ids)
    what = (
        f"{counted(rules, 'rule')} for {SAMPLE_ACTION} handed over"
        if rules
        else f"no rule for {SAMPLE_ACTION} yet"
    )
    return Check(link, "ok", f"a sample `git commit` came back in {took}: {what}")


def find_fire(socket: Path, session: str) -> FireRecord | None:
    """The daemon's record of a test fire of `session`; None when it has none."""
    try:
        with Client(socket, connect_timeout=2.0, timeout=2.0) as client:
            reply = client.expect(LogRequest(n=50, session=session, include_tests=True), LogReply)
    except (NotRunningError, ProtocolError, DaemonError):
        return None
    return next((fire for fire in reply.fires if fire.session == session), None)


def run_checks(socket: Path) -> list[Check]:
    """Every link, in order."""
    manager = detect()
    config_check, config = check_config()
    daemon_check, status = check_daemon(socket, manager)
    checks = [config_check, daemon_check, check_service(socket, manager, status)]
    if status is not None:
        checks.append(check_rules(socket, status))
        checks += check_pinned(status)
        checks += check_sync(status)
        checks += check_problems(status)
    budget = int(os.environ.get("MENTED_HOOK_BUDGET_MS") or 0) or (
        config.hook.budget_ms if config else 250
    )
    protocol = status.protocol if status is not None else None
    checks += check_hooks(FireTarget(socket, status is not None, budget, protocol), status)
    checks += check_mcp()
    return checks


def check_rules(socket: Path, status: StatusReply) -> Check:
    """Whether every stored rule names an action of the daemon's table (else it never fires)."""
    try:
        with Client(socket, connect_timeout=2.0, timeout=10.0) as client:
            rules = client.expect(ListRequest(rules_only=True), MemoriesReply).memories
    except (NotRunningError, ProtocolError, DaemonError) as exc:
        return Check("rules", "warn", f"could not list the rules: {exc}")
    table = load_table_in_force(Path(status.config) if status.config else None).table
    orphans: dict[str, int] = {}
    for rule in rules:
        for action in rule.actions:
            if action not in table:
                orphans[action] = orphans.get(action, 0) + 1
    if not orphans:
        live = counted(len(rules), "live rule")
        return Check("rules", "ok", f"{live}, each for an action mented knows")
    named = ", ".join(
        f"{action} ({counted(count, 'rule')})" for action, count in sorted(orphans.items())
    )
    first = min(orphans)
    return Check(
        "rules",
        "warn",
        f"rules for actions that are not in the config, which never fire: {named}",
        fix=f"add the action back to the config, or see them with `mentectl rule list --action "
        f"{first}` and `mentectl rule forget ID`",
    )


def check_pinned(status: StatusReply) -> list[Check]:
    """Pinned rules over the cap (a sync brought more, or the cap was lowered): the
    session start leaves some out, which the user should know and decide."""
    if not status.pinned_live:
        return []
    if not status.pinned_over_cap:
        cap = f"{counted(status.pinned_max_rules, 'rule')} and {status.pinned_max_chars} characters"
        return [Check("pinned", "ok", f"{counted(status.pinned_live, 'live rule')}, within {cap}")]
    return [
        Check(
            "pinned",
            "warn",
            describe_over_cap(over, status.pinned_max_rules, status.pinned_max_chars),
            fix=OVER_CAP_FIX,
        )
        for over in status.pinned_over_cap
    ]


PROJECT_FIX = (
    "read the project's .mented/ files; if one is named above as broken, fix or remove it "
    "(ask the repository's maintainers); then `mentectl trust DIR`"
)


def check_sync(status: StatusReply) -> list[Check]:
    """Sync over git (when set up), and each fork: a rule superseded on two machines apart."""
    checks = []
    if status.sync_remote is not None:
        if status.sync_error:
            checks.append(
                Check(
                    "sync",
                    "warn",
                    f"{status.sync_remote}: the last sync failed: {status.sync_error} "
                    "(local rules are kept; it is retried)",
                    fix="`mentectl sync` to retry now and see the error",
                )
            )
        else:
            checks.append(Check("sync", "ok", f"with {status.sync_remote}"))
        if status.sync_skipped_total:
            checks.append(
                Check(
                    "sync",
                    "warn",
                    skipped_summary(status),
                    fix="remove those files from the remote (they were not written by mented)",
                )
            )
    checks.extend(
        # A broken file is refused by `trust` until it is fixed: the fix says both steps.
        Check("project", "warn", f"rules not handed to agents: {why}", fix=PROJECT_FIX)
        for why in status.untrusted_projects
    )
    for tips in status.forks:
        fix = f"`mentectl rule supersede {tips[0]} TEXT` (the new text replaces every version)"
        checks.append(Check("fork", "warn", describe_fork(tips), fix=fix))
    return checks


def check_problems(status: StatusReply) -> list[Check]:
    """The daemon's fallbacks in force (`StatusReply.problems`): rules still reach the
    agents, but not as set up, so each is a failed link until it is over."""
    return [
        Check(problem.kind.replace("_", " "), "fail", problem.message, fix=problem.fix)
        for problem in status.problems
    ]


def check_mcp() -> list[Check]:
    """Whether each agent starts mented's MCP server: optional, so never a failure if absent."""
    checks = []
    # This interpreter as `mcp install` writes it in (resolved outside a venv).
    here = {sys.executable, os.path.realpath(sys.executable)}
    for agent in sorted(AGENTS):
        found = mcp.mcp_registration(agent)
        link = f"mcp {agent}"
        if AGENTS[agent].mcp.how == "none":  # nothing to register (pi)
            checks.append(Check(link, "skip", found.where))
        elif found.problem:
            # A broken entry of ours fails; an unreadable file of the agent's only warns.
            state: State = "fail" if found.registered else "warn"
            fix = f"`mentectl mcp install {agent}`"
            checks.append(Check(link, state, f"{found.where}: {found.problem}", fix=fix))
        elif not found.supported:
            checks.append(Check(link, "skip", f"not offered: {found.where}"))
        elif not found.registered:
            why = f"not registered in {found.where} (the agent cannot remember rules itself)"
            checks.append(Check(link, "skip", why, fix=mcp.install_fix(agent)))
        elif found.command and found.command[0] in here and not mcp.sdk_installed():
            checks.append(Check(link, "warn", mcp.SDK_MISSING, fix="pip install 'mented[mcp]'"))
        else:
            checks.append(Check(link, "ok", f"registered in {found.where}"))
    return checks


def print_checks(checks: list[Check], summary: str | None = None) -> None:
    """The checks, one line each with its fix, then `summary` (default: how many broke)."""
    marks = {"ok": "ok  ", "warn": "warn", "fail": "FAIL", "skip": "--  "}
    width = max(len(check.link) for check in checks)
    for check in checks:
        # A detail quotes what was found: a settings file's command, the daemon's words.
        detail = escape_controls(check.detail, keep_lines=False)
        print(f"{marks[check.state]}  {check.link:<{width}}  {detail}")
        if check.fix and check.state != "ok":
            print(f"      {'':<{width}}  fix: {escape_controls(check.fix, keep_lines=False)}")
    failed = sum(check.state == "fail" for check in checks)
    if summary is not None:
        print(summary)
    elif failed:
        print(f"{counted(failed, 'link')} broken: see the fix under each FAIL.")
    else:
        print("Every link works.")


def run_doctor(args: argparse.Namespace) -> int:
    checks = run_checks(paths.socket_path(args.socket))
    failed = any(check.state == "fail" for check in checks)
    if args.json:
        print_json({"ok": not failed, "checks": [asdict(check) for check in checks]})
    else:
        print_checks(checks)
    return 1 if failed else 0


# -------------------------------------------------------------------- setup


def setup_daemon(args: argparse.Namespace) -> None:
    """The service where there is a manager, else a detached daemon."""
    socket = paths.socket_path(args.socket)
    manager = None if args.no_service else detect()
    why = "--no-service" if args.no_service else ""
    if manager is not None:
        try:
            status = install_service(manager, socket=socket, on_demand=False)
        except CommandError as exc:
            # The hook needs a daemon, not a service: fall back to a detached one.
            for step in manager.done:
                print(f"  {step}")
            print(f"  could not install the {manager.name} service: {exc}")
            why = f"the {manager.name} service could not be installed"
        else:
            print(f"Installed mented as a {manager.name} service (it starts at login):")
            for step in manager.done:
                print(f"  {step}")
            if status is not None:
                print(f"  mented is running (pid {status.pid})")
            return
    running = answering(socket)
    if running is not None:
        print(already_running(running, socket, service_manager=False))
        return
    why = why or no_manager_reason()
    status = start_detached(socket, explicit_socket=args.socket, timeout=START_TIMEOUT_S)
    print(
        f"Started mented detached (pid {status.pid}); no service installed ({why}), so "
        "run `mentectl start` after a reboot."
    )


def setup_hook(args: argparse.Namespace) -> None:
    """The agent's hook in its user settings."""
    hooks.run_install(
        argparse.Namespace(
            agent=args.agent,
            socket=args.socket,
            settings=None,
            project=None,
            python=None,
            timeout=DEFAULT_TIMEOUT_S,
            json=False,
        )
    )


def setup_mcp(args: argparse.Namespace) -> None:
    """The MCP server, so the agent can remember and supersede rules itself."""
    try:
        message = mcp.install_mcp(args.agent, socket=args.socket)
    except CommandError as exc:
        # Optional: the hook hands rules over without it, so setup goes on.
        message = f"not registered: {exc}"
    print("\n".join(f"  {line}" for line in escape_controls(message).split("\n")))


# The steps of `mentectl setup`, in order: a title and a function of the parsed
# arguments that prints what it did and raises CommandError when it cannot.
# `doctor` and the first-rule hint always come last.
SETUP_STEPS: tuple[tuple[str, Callable[[argparse.Namespace], None]], ...] = (
    ("the daemon", setup_daemon),
    ("the hook", setup_hook),
    ("the MCP server", setup_mcp),
)


def run_setup(args: argparse.Namespace) -> int:
    if args.json:
        return _setup_as_json(args)
    agent = AGENTS[args.agent]
    for number, (title, step) in enumerate(SETUP_STEPS, start=1):
        print(f"{number}. {title}")
        _run_step(args, title, step)
    print(f"{len(SETUP_STEPS) + 1}. checking every link (`mentectl doctor`)")
    checks = run_checks(paths.socket_path(args.socket))
    next_step = expected_next_step(agent, checks)
    print_checks(checks, summary=next_step)
    if any(check.state == "fail" for check in checks):
        return 1
    but = "" if next_step is None else ", but for that step"
    print(
        f"\nmented is set up for {agent.title}{but}. Add a first rule; it reaches the agent the "
        f"next time it runs the action:\n  {FIRST_RULE}\n"
        "`mentectl rule list` shows your rules, `mentectl log` the hook's recent fires."
    )
    return 0


def expected_next_step(agent: Agent, checks: list[Check]) -> str | None:
    """Right after setup, hooks the agent has not been told to trust yet are the next step
    (only the user can take it), not a broken link: those checks become warnings, and
    this says what to do. None when that is not all that fails."""
    # The agents that run a hook only once the user has trusted it say how (setup cannot).
    step = client_of(agent.name).trust_step()
    failed = [check for check in checks if check.state == "fail"]
    if step is None or not failed:
        return None
    if not all(
        check.link.startswith(f"hook {agent.name} ") and check.fix == step for check in failed
    ):
        return None
    for check in failed:
        check.state = "warn"
    return (
        f"One step left, and only you can take it: {agent.title} runs mented's hooks once you "
        f"trust them ({counted(len(failed), 'entry', 'entries')} above): {step}. "
        "Then `mentectl doctor` shows them working."
    )


def _run_step(
    args: argparse.Namespace, title: str, step: Callable[[argparse.Namespace], None]
) -> None:
    try:
        step(args)
    except CommandError as exc:
        raise CommandError(f"setup stopped at {title}: {exc}", status=exc.status) from exc


def _setup_as_json(args: argparse.Namespace) -> int:
    """`setup --json`: the same steps, what each said, and the checks, as one document."""
    steps = []
    for title, step in SETUP_STEPS:
        said = io.StringIO()
        with _stdout_to_stderr(), contextlib.redirect_stdout(said):
            _run_step(args, title, step)
        steps.append({"step": title, "said": said.getvalue().splitlines()})
    checks = run_checks(paths.socket_path(args.socket))
    next_step = expected_next_step(AGENTS[args.agent], checks)
    failed = any(check.state == "fail" for check in checks)
    print_json(
        {
            "ok": not failed,
            "agent": args.agent,
            "steps": steps,
            "checks": [asdict(check) for check in checks],
            "next_step": next_step,
            "first_rule": None if failed else FIRST_RULE,
        }
    )
    return 1 if failed else 0


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """File descriptor 1 on stderr meanwhile: what a step's child processes print (a
    service manager's tools) must not break the one JSON document on stdout."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
