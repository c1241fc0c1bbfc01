"""The service manager's files for mented: systemd user units and the launchd plist.

`mentectl service install` renders them with absolute paths (the interpreter
mented is installed in, the data directory, ...). The copies in the
repository's `systemd/` and `launchd/` directories are these templates with the
placeholders left in, for installing by hand; a test keeps them identical.
"""

from __future__ import annotations

import plistlib
import re
from pathlib import Path
from typing import Any

PYTHON = "@PYTHON@"
DATA_DIR = "@DATA_DIR@"
SOCKET = "@SOCKET@"
LOG_FILE = "@LOG_FILE@"

SYSTEMD_SOCKET_UNIT = "mented.socket"
SYSTEMD_SERVICE_UNIT = "mented.service"
LAUNCHD_LABEL = "dev.mented.daemon"
LAUNCHD_SOCKET_NAME = "Listeners"  # mented.service.LAUNCHD_SOCKET_NAME asks for this key

SOCKET_TEMPLATE = """\
# mented.socket: systemd holds mented's listening socket and starts
# mented.service on the first connection (socket activation). While mented
# starts or restarts, connections wait in this socket's queue instead of being
# refused: a hook call in that gap is answered if mented is back within the
# hook's time budget, and otherwise stays silent (the command runs untouched).
#
# Installed by `mentectl service install`; by hand, see README.md here.

[Unit]
Description=mented socket (action rules for AI coding agents)

[Socket]
# %t is $XDG_RUNTIME_DIR (/run/user/<uid>): the socket mented, mentectl and the
# hook shim use by default. If you change it, set MENTED_SOCKET to match.
ListenStream=%t/mented/mented.sock
# Only you may connect (mented also checks the peer's uid on each connection).
SocketMode=0600
# The mented/ directory systemd creates for the socket is private too.
DirectoryMode=0700
# No stale socket file once the socket unit is stopped.
RemoveOnStop=yes

[Install]
WantedBy=sockets.target
"""

SERVICE_TEMPLATE = f"""\
# mented.service: the mented daemon, supervised by systemd. It is started by
# mented.socket on the first connection and, once enabled, at login, so that
# the first hook call already finds it warm.
#
# `mentectl service install` writes this file with {PYTHON} replaced by the
# absolute path of the interpreter mented is installed in (a virtualenv's
# python is kept as is: resolving it would lose the virtualenv) and {DATA_DIR}
# by the data directory. By hand, see README.md here.

[Unit]
Description=mented: action rules for AI coding agents
# mented takes over the socket that mented.socket holds (LISTEN_FDS).
Requires=mented.socket
After=mented.socket

[Service]
# mented sends READY=1 once it serves, RELOADING=1 ... READY=1 around a reload
# and STOPPING=1 when it shuts down.
Type=notify
ExecStart={PYTHON} -m mented.daemon --data-dir {DATA_DIR}
# SIGHUP re-reads the config file (a bad file leaves the previous settings in
# force); `systemctl --user reload mented` waits until mented is ready again.
ExecReload=kill -HUP $MAINPID
# A crash is restarted after a second. A clean exit (`mentectl stop`, or the idle
# exit set by [daemon] idle_timeout_s) is not: the socket starts mented again
# on the next connection.
Restart=on-failure
RestartSec=1
# mented lets requests in flight finish for up to 5 s when it stops.
TimeoutStopSec=15
# Logs (JSON lines on stderr) go to the journal: journalctl --user -u mented

# Hardening: the data directory is the one place mented writes (the socket is
# systemd's), it speaks only over Unix sockets and runs no programs. In user
# units systemd applies the file-system options through a user namespace where
# the kernel allows one (systemd 253 and later; older ones ignore them there).
UMask=0077
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=read-only
ReadWritePaths=-{DATA_DIR}
PrivateTmp=yes
RestrictAddressFamilies=AF_UNIX
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
MemoryDenyWriteExecute=yes
SystemCallArchitectures=native
SystemCallFilter=@system-service
SystemCallErrorNumber=EPERM

[Install]
# Enabled: started at login. `Also=` enables the socket along with it.
WantedBy=default.target
Also=mented.socket
"""


def systemd_quote(value: str, *, command_line: bool = False) -> str:
    """`value` as one word of a unit file setting, its `%` (and in a command line `$`) literal."""
    value = value.replace("%", "%%")
    if command_line:
        value = value.replace("$", "$$")
    if re.fullmatch(r"[\w./@+:,=%-]+", value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def systemd_units(python: str | Path, data_dir: str | Path) -> dict[str, str]:
    """The unit files' names and texts, for this interpreter and data directory."""
    values = {
        PYTHON: systemd_quote(str(python), command_line=True),
        f"-{DATA_DIR}": systemd_quote(f"-{data_dir}"),
        DATA_DIR: systemd_quote(str(data_dir), command_line=True),
    }
    lines = []
    for line in SERVICE_TEMPLATE.splitlines(keepends=True):
        if not line.startswith("#"):  # the comments keep naming the placeholders
            for placeholder, value in values.items():
                line = line.replace(placeholder, value)  # noqa: PLW2901 - rewritten on purpose
        lines.append(line)
    return {SYSTEMD_SOCKET_UNIT: SOCKET_TEMPLATE, SYSTEMD_SERVICE_UNIT: "".join(lines)}


def launchd_agent(
    *,
    python: str | Path,
    data_dir: str | Path,
    socket_path: str | Path,
    log_file: str | Path,
    on_demand: bool,
) -> dict[str, Any]:
    """The LaunchAgent as a dict (see launchd.plist(5)).

    `on_demand`: launchd holds the socket and starts mented on the first
    connection (mented takes the socket over with launch_activate_socket).
    Otherwise always on: started at login and kept alive, binding its own socket.
    """
    agent: dict[str, Any] = {
        "Label": LAUNCHD_LABEL,
        "ProgramArguments": [
            str(python),
            "-m",
            "mented.daemon",
            "--socket",
            str(socket_path),
            "--data-dir",
            str(data_dir),
        ],
        "StandardOutPath": str(log_file),
        "StandardErrorPath": str(log_file),
        "ProcessType": "Interactive",  # hook calls wait on it: no background throttling
    }
    if on_demand:
        agent["Sockets"] = {
            LAUNCHD_SOCKET_NAME: {
                "SockPathName": str(socket_path),
                "SockPathMode": 0o600,
                "SockType": "stream",
                "SockFamily": "Unix",
            }
        }
    else:
        agent["RunAtLoad"] = True
        agent["KeepAlive"] = True
    return agent


def launchd_plist(
    *,
    python: str | Path = PYTHON,
    data_dir: str | Path = DATA_DIR,
    socket_path: str | Path = SOCKET,
    log_file: str | Path = LOG_FILE,
    on_demand: bool,
) -> bytes:
    """The LaunchAgent plist file (XML); with no paths given, the template."""
    agent = launchd_agent(
        python=python,
        data_dir=data_dir,
        socket_path=socket_path,
        log_file=log_file,
        on_demand=on_demand,
    )
    return plistlib.dumps(agent, fmt=plistlib.FMT_XML, sort_keys=False)
