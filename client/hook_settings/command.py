"""The hook's command line: the real interpreter, the guarded form, and reading it back.

The command line runs the stdlib-only shim with the real interpreter binary (see
`real_interpreter`): a pyenv or asdf shim script costs ~150 ms per command
before Python even starts. It does so only while both files exist, and else exits
0 (`guarded_command`): the agents take a failing hook as a refusal, and a removed
mented must never block a command. `command_argv` reads both that form and the
plain one of older installs; our entries are recognised by their command: it runs
the shim (`is_mented_command`).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shlex
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mented_client.hook_settings.json_text import SettingsError

if TYPE_CHECKING:
    from collections.abc import Sequence


# First bytes of a native executable: ELF, Mach-O (32/64 bit, both byte orders), fat Mach-O.
_BINARY_MAGIC = (
    b"\x7fELF",
    b"\xfe\xed\xfa\xce",
    b"\xfe\xed\xfa\xcf",
    b"\xce\xfa\xed\xfe",
    b"\xcf\xfa\xed\xfe",
    b"\xca\xfe\xba\xbe",
)


SHIM_MARKER = b"mented hook shim"


def is_native_executable(path: Path) -> bool:
    """Whether `path` is a binary the kernel runs directly (not a `#!` script)."""
    return _file_start(path, 4) in _BINARY_MAGIC


def real_interpreter(executable: str | None = None) -> Path:
    """The binary behind `executable` (default: this interpreter), resolving symlinks.

    A venv's `python` is a symlink to a real binary; a pyenv or asdf shim is a
    shell script that finds one on every call, at a cost of ~150 ms.

    Raises:
        SettingsError: no native binary found; the message suggests `--python`.
    """
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    names = (f"python{version}", f"python{sys.version_info.major}", "python")
    candidates = [Path(os.path.realpath(executable or sys.executable))] + [
        Path(os.path.realpath(Path(prefix) / "bin" / name))
        for prefix in (sys.base_prefix, sys.base_exec_prefix)
        for name in names
    ]
    for candidate in candidates:
        if is_native_executable(candidate):
            return candidate
    raise SettingsError(
        f"cannot find the real Python binary behind {executable or sys.executable} "
        "(it looks like a shim script, which would add ~150 ms to every command); "
        "pass --python /absolute/path/to/python3"
    )


def guarded_command(argv: Sequence[str], *, notice: str | None = None) -> str:
    """The installed command line: `argv` run only while its interpreter and shim exist.

    `argv` is the shim's (`interpreter -I -S shim AGENT SOCKET`). The agents run the
    line through a shell (Claude Code and Gemini CLI `bash -c`, Codex `$SHELL -lc`,
    Copilot CLI its `bash` field), and most read a failed hook as a refusal (exit 2
    blocks the command in Claude Code and Gemini CLI; Codex and Copilot CLI block on
    any failure to start). So two builtin tests come first: while both files exist the
    shell `exec`s the interpreter (no extra process, as before); once either is gone
    (`pip uninstall`, a deleted venv, a moved clone) the line exits 0 having printed
    nothing, or `notice` (an answer the agent shows the user) when one is given.
    The syntax is POSIX sh that bash, zsh and fish also read.
    """
    interpreter, shim = argv[0], argv[3]
    run = f"exec {shlex.join(argv)}"
    tests = f"[ -f {shlex.quote(shim)} ] && [ -x {shlex.quote(interpreter)} ]"
    fallback = "exit 0" if notice is None else f"printf '%s\\n' {shlex.quote(notice)}; exit 0"
    return f"{tests} && {run}; {fallback}"


# The shell operators a hook command line may hold, between the words that run.
_OPERATORS = frozenset({";", "&&", "||", "|", "&"})


@dataclass(frozen=True)
class HookArgv:
    """What an installed hook command line runs: its words, and whether it is guarded."""

    argv: list[str]
    guarded: bool  # `guarded_command`'s form: it exits 0 once the files are gone


def command_argv(command: object) -> HookArgv | None:
    """The program and arguments a hook command line runs (None: not a command line).

    Both forms are read: `guarded_command`'s (the words after `exec`), and the plain
    `interpreter -I -S shim ...` that older installs wrote (up to the first operator,
    such as Copilot CLI's ` || true`).
    """
    if not isinstance(command, str):
        return None
    read = _kept_argv(command) if len(command) <= _KEPT_COMMAND_CHARS else _read_argv(command)
    return None if read is None else HookArgv(list(read[0]), read[1])


# Every handler of one install runs the same command line: a settings file with
# hundreds of them asks for the same words hundreds of times. A few lines of a
# hook's length are kept (a project's file may hold longer ones: read each time).
_KEPT_COMMAND_CHARS = 4096


@functools.lru_cache(maxsize=16)
def _kept_argv(command: str) -> tuple[tuple[str, ...], bool] | None:
    """`_read_argv`, once per command line."""
    return _read_argv(command)


def _read_argv(command: str) -> tuple[tuple[str, ...], bool] | None:
    """`command_argv`'s words and guard."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        return None
    guarded = bool(tokens) and tokens[0] == "["
    if guarded:
        if "exec" not in tokens:
            return None
        tokens = tokens[tokens.index("exec") + 1 :]
    words = []
    for token in tokens:
        if token in _OPERATORS:
            break
        words.append(token)
    return (tuple(words), guarded) if words else None


def installed_shim() -> Path:
    """The shim file of the installed `mented_client` package."""
    spec = importlib.util.find_spec("mented_client.shim")
    if spec is None or spec.origin is None:
        raise SettingsError("cannot find mented_client/shim.py: is mented installed?")
    return Path(spec.origin).resolve()


def is_mented_command(command: object, shim_path: Path | None = None) -> bool:
    """Whether a hook command runs mented's shim.

    It does when one argument is a file named `shim.py` followed by the agent name,
    and that file is `shim_path`, or lives in the `mented_client` package, or
    (when it still exists) starts with the shim's marker comment.
    """
    if not isinstance(command, str) or "shim.py" not in command:
        return False
    run = command_argv(command)
    if run is None:
        return False
    for arg in run.argv[:-1]:  # the shim's path is followed by the agent name
        path = Path(arg)
        if path.name != "shim.py":
            continue
        if shim_path is not None and path == shim_path:
            return True
        if path.parent.name == "mented_client":
            return True
        if SHIM_MARKER in _file_start(path, 256):
            return True
    return False


def _file_start(path: Path, size: int) -> bytes:
    """The first `size` bytes of a regular file; b"" for anything else.

    The path comes from a settings file, maybe a project's: a named pipe there must
    not hang the caller (O_NONBLOCK), nor a device be read (fstat).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        return os.read(fd, size)
    except OSError:
        return b""
    finally:
        os.close(fd)
