"""Installing and driving mented as a per-user service: systemd --user or launchd.

`detect()` picks the manager this machine has: systemd when `systemctl --user`
reaches a user manager, launchd on macOS, none in a container or CI (then
`mentectl start` runs a detached daemon instead). `$MENTED_SERVICE_MANAGER`
(`systemd`, `launchd` or `none`) overrides the guess.

Every manager records what it did, step by step (`Manager.done`), in the words
of the command a user would type, so that mentectl can say exactly that.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from mented import paths
from mented_client import service_files
from mented_client.errors import CommandError
from mented_client.files import display_path, write_atomically
from mented_client.hook_settings import is_native_executable

MANAGER_ENV = "MENTED_SERVICE_MANAGER"
_COMMAND_TIMEOUT_S = 30.0


def daemon_interpreter() -> Path:
    """The interpreter that runs mented for the service and the MCP server: this one, absolute.

    In a virtualenv (pipx, uv tool, a project .venv) the venv's `python` is kept
    as it is: it is a symlink to the real binary, and resolving it would lose the
    venv and with it mented's dependencies. Outside one, symlinks are resolved
    (so that a `pyenv global` switch does not swap the interpreter under the
    service). Either way the file that runs must be a binary, not a shim script.

    Raises:
        CommandError: the interpreter is a script (a pyenv or asdf shim).
    """
    executable = Path(sys.executable).absolute()
    in_venv = sys.prefix != sys.base_prefix
    chosen = executable if in_venv else Path(os.path.realpath(executable))
    if not is_native_executable(Path(os.path.realpath(chosen))):
        raise CommandError(
            f"{chosen} is a script, not a Python binary (a pyenv or asdf shim?); run mentectl "
            "with the real interpreter, e.g. `$(pyenv which python) -m mented_client.cli ...`"
        )
    return chosen


@dataclass
class Manager:
    """What every service manager offers; the subclasses say how."""

    name: str = ""
    done: list[str] = field(default_factory=list)

    def socket_path(self) -> Path:
        """The socket the installed service listens on."""
        raise NotImplementedError

    def files(self) -> list[Path]:
        """The files `install` writes."""
        raise NotImplementedError

    def installed(self) -> bool:
        return all(path.is_file() for path in self.files())

    def enabled(self) -> bool:
        """Whether the service starts by itself (at login or on the first connection)."""
        raise NotImplementedError

    def active(self) -> bool:
        """Whether the service (or its socket) is up now."""
        raise NotImplementedError

    def install(self, *, python: Path, data_dir: Path, on_demand: bool) -> None:
        raise NotImplementedError

    def uninstall(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def restart(self) -> None:
        raise NotImplementedError

    def describe(self) -> str:
        """The manager's own view of the service, for `mentectl service status`."""
        raise NotImplementedError

    def interpreter(self) -> Path | None:
        """The interpreter the installed service runs, read back from its file."""
        raise NotImplementedError

    # ------------------------------------------------------------------ helpers

    def run(
        self, *argv: str, check: bool = True, record: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run a manager command; record it; raise a CommandError with its output on failure."""
        try:
            # cwd "/": mentectl may be typed in any directory (a cloned repository);
            # the manager needs none, and keeps none busy.
            result = subprocess.run(  # noqa: S603 - argv built here, no shell
                argv,
                capture_output=True,
                text=True,
                timeout=_COMMAND_TIMEOUT_S,
                check=False,
                cwd="/",
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise CommandError(f"`{shlex.join(argv)}` failed: {exc}") from exc
        if record:
            self.done.append(f"ran `{shlex.join(argv)}`")
        if check and result.returncode != 0:
            output = (result.stderr or result.stdout).strip()
            raise CommandError(
                f"`{shlex.join(argv)}` exited with status {result.returncode}"
                + (f": {output}" if output else "")
            )
        return result

    def write(self, path: Path, content: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        previous = path.read_bytes() if path.is_file() else None
        if previous == content:
            self.done.append(f"kept {display_path(path)} (unchanged)")
            return
        try:
            write_atomically(path, content)
        except OSError as exc:
            raise CommandError(f"cannot write {path}: {exc}") from exc
        self.done.append(f"{'updated' if previous is not None else 'wrote'} {display_path(path)}")

    def remove(self, path: Path) -> None:
        try:
            path.unlink()
        except FileNotFoundError:
            return
        self.done.append(f"removed {display_path(path)}")

    def make_private_dir(self, path: Path) -> None:
        if not path.is_dir():
            path.mkdir(mode=0o700, parents=True)
            self.done.append(f"created {display_path(path)}")


class Systemd(Manager):
    """systemd user units: mented.socket (activation) and mented.service."""

    def __init__(self) -> None:
        super().__init__(name="systemd")

    @staticmethod
    def unit_dir() -> Path:
        config = os.environ.get("XDG_CONFIG_HOME")
        return (Path(config) if config else paths.home() / ".config") / "systemd" / "user"

    def files(self) -> list[Path]:
        return [
            self.unit_dir() / service_files.SYSTEMD_SOCKET_UNIT,
            self.unit_dir() / service_files.SYSTEMD_SERVICE_UNIT,
        ]

    def socket_path(self) -> Path:
        # ListenStream=%t/mented/mented.sock, %t being the manager's $XDG_RUNTIME_DIR.
        runtime = os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
        return Path(runtime) / "mented" / paths.SOCKET_NAME

    def systemctl(
        self, *args: str, check: bool = True, record: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return self.run("systemctl", "--user", *args, check=check, record=record)

    def enabled(self) -> bool:
        result = self.systemctl(
            "is-enabled", service_files.SYSTEMD_SOCKET_UNIT, check=False, record=False
        )
        return result.stdout.strip() == "enabled"

    def active(self) -> bool:
        result = self.systemctl(
            "is-active", service_files.SYSTEMD_SOCKET_UNIT, check=False, record=False
        )
        return result.stdout.strip() == "active"

    def install(self, *, python: Path, data_dir: Path, on_demand: bool) -> None:
        socket_unit, service_unit = (
            service_files.SYSTEMD_SOCKET_UNIT,
            service_files.SYSTEMD_SERVICE_UNIT,
        )
        # The data directory must exist before the service starts: the unit makes
        # the rest of the home directory read-only for mented.
        self.make_private_dir(data_dir)
        for name, text in service_files.systemd_units(python, data_dir).items():
            self.write(self.unit_dir() / name, text.encode())
        self.systemctl("daemon-reload")
        self.systemctl("enable", "--now", socket_unit)
        if on_demand:
            self.systemctl("disable", service_unit)
            # A daemon started from the previous unit files runs on: replace it.
            self.systemctl("try-restart", service_unit)
        else:
            self.systemctl("enable", service_unit)
            self.systemctl("restart", service_unit)

    def uninstall(self) -> None:
        units = (service_files.SYSTEMD_SERVICE_UNIT, service_files.SYSTEMD_SOCKET_UNIT)
        if self.installed():
            self.systemctl("disable", "--now", *units)
        for path in self.files():
            self.remove(path)
        self.systemctl("daemon-reload")

    def start(self) -> None:
        self.systemctl(
            "start", service_files.SYSTEMD_SOCKET_UNIT, service_files.SYSTEMD_SERVICE_UNIT
        )

    def stop(self) -> None:
        # The socket too: otherwise the next connection starts mented again.
        self.systemctl(
            "stop", service_files.SYSTEMD_SERVICE_UNIT, service_files.SYSTEMD_SOCKET_UNIT
        )

    def restart(self) -> None:
        # The socket stays up: connections made meanwhile wait in its queue.
        self.systemctl("start", service_files.SYSTEMD_SOCKET_UNIT)
        self.systemctl("restart", service_files.SYSTEMD_SERVICE_UNIT)

    def describe(self) -> str:
        result = self.systemctl(
            "status",
            "--no-pager",
            "--lines=5",
            service_files.SYSTEMD_SOCKET_UNIT,
            service_files.SYSTEMD_SERVICE_UNIT,
            check=False,
            record=False,
        )
        return (result.stdout or result.stderr).rstrip()

    def interpreter(self) -> Path | None:
        service = self.unit_dir() / service_files.SYSTEMD_SERVICE_UNIT
        try:
            text = service.read_text()
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith("ExecStart="):
                words = shlex.split(line.removeprefix("ExecStart="))
                return Path(words[0].replace("%%", "%")) if words else None
        return None


class Launchd(Manager):
    """A LaunchAgent in ~/Library/LaunchAgents, in the user's GUI domain."""

    def __init__(self) -> None:
        super().__init__(name="launchd")

    @staticmethod
    def plist_path() -> Path:
        return paths.home() / "Library" / "LaunchAgents" / f"{service_files.LAUNCHD_LABEL}.plist"

    @property
    def target(self) -> str:
        return f"gui/{os.getuid()}/{service_files.LAUNCHD_LABEL}"

    @property
    def domain(self) -> str:
        return f"gui/{os.getuid()}"

    def files(self) -> list[Path]:
        return [self.plist_path()]

    def socket_path(self) -> Path:
        agent = self._read()
        arguments = agent.get("ProgramArguments") if agent else None
        if isinstance(arguments, list) and "--socket" in arguments[:-1]:
            return Path(arguments[arguments.index("--socket") + 1])
        return paths.socket_path()

    def _read(self) -> dict[str, object] | None:
        import plistlib  # noqa: PLC0415 - macOS only

        try:
            with self.plist_path().open("rb") as handle:
                agent = plistlib.load(handle)
        except (OSError, ValueError):
            return None
        return agent if isinstance(agent, dict) else None

    def loaded(self) -> bool:
        return (
            self.run("launchctl", "print", self.target, check=False, record=False).returncode == 0
        )

    def enabled(self) -> bool:
        return self.installed() and self.loaded()

    def active(self) -> bool:
        return self.loaded()

    def install(self, *, python: Path, data_dir: Path, on_demand: bool) -> None:
        socket_path = paths.socket_path()
        log_file = paths.state_dir() / "mented.log"
        self.make_private_dir(data_dir)
        self.make_private_dir(log_file.parent)
        # launchd binds an on-demand socket itself, in a directory that must exist.
        self.make_private_dir(socket_path.parent)
        plist = service_files.launchd_plist(
            python=python,
            data_dir=data_dir,
            socket_path=socket_path,
            log_file=log_file,
            on_demand=on_demand,
        )
        if self.loaded():
            self.run("launchctl", "bootout", self.target)
        self.write(self.plist_path(), plist)
        self.run("launchctl", "enable", self.target)
        self.run("launchctl", "bootstrap", self.domain, str(self.plist_path()))

    def uninstall(self) -> None:
        if self.loaded():
            self.run("launchctl", "bootout", self.target)
        self.remove(self.plist_path())

    def start(self) -> None:
        if not self.loaded():
            self.run("launchctl", "bootstrap", self.domain, str(self.plist_path()))
        self.run("launchctl", "kickstart", self.target)

    def stop(self) -> None:
        # bootout, not kill: an always-on agent is KeepAlive and would come straight back.
        self.run("launchctl", "bootout", self.target)

    def restart(self) -> None:
        if not self.loaded():
            self.start()
            return
        self.run("launchctl", "kickstart", "-k", self.target)

    def describe(self) -> str:
        result = self.run("launchctl", "print", self.target, check=False, record=False)
        return (result.stdout or result.stderr).rstrip()

    def interpreter(self) -> Path | None:
        agent = self._read()
        arguments = agent.get("ProgramArguments") if agent else None
        return Path(arguments[0]) if isinstance(arguments, list) and arguments else None


def _systemd_reachable() -> bool:
    if shutil.which("systemctl") is None:
        return False
    try:
        result = subprocess.run(
            ["systemctl", "--user", "show-environment"],  # noqa: S607 - found on PATH above
            capture_output=True,
            cwd="/",
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0


def detect() -> Manager | None:
    """The service manager to use here, or None when there is none (a container, CI)."""
    choice = os.environ.get(MANAGER_ENV, "").strip().lower()
    if choice == "none":
        return None
    if choice == "systemd" or (not choice and _systemd_reachable()):
        return Systemd()
    if choice == "launchd" or (
        not choice and sys.platform == "darwin" and shutil.which("launchctl")
    ):
        return Launchd()
    if choice:
        raise CommandError(f"{MANAGER_ENV}={choice!r}: expected systemd, launchd or none", status=2)
    return None


def no_manager_reason() -> str:
    """Why `detect()` found none, for messages."""
    if os.environ.get(MANAGER_ENV, "").strip().lower() == "none":
        return f"{MANAGER_ENV}=none"
    if sys.platform == "darwin":
        return "launchctl is not on PATH"
    if shutil.which("systemctl") is None:
        return "no systemctl on PATH"
    return "`systemctl --user` reaches no user service manager (a container?)"
