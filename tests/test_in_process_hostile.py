"""A hostile file where mented's plugin goes (opencode, Kilo) or its extension (pi).

Whatever is at that path and is not the file mented wrote -- a symbolic link, a named
pipe, a huge file, a file of another user or one anyone may write -- `hooks install`
refuses with a message naming it, `hooks uninstall` and `mentectl uninstall` leave it
as it is, and `hooks status` says it is not mented's: nothing follows the link, opens
the pipe for good, reads the file whole or writes over it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from mented.agents.opencode import plugin_source
from mented.agents.pi import AGENT as PI
from mented_client.agents import extension_file
from mented_client.cli import main
from tests.test_opencode import home  # noqa: F401 - the fixture: HOME, XDG_CONFIG_HOME, socket

OURS = {"opencode": plugin_source, "kilo": plugin_source}


@pytest.fixture(autouse=True)
def _pi_in_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PI_CODING_AGENT_DIR", raising=False)


# The agents' folders in a home of the test's own (`tests.test_opencode.home`).
pytestmark = pytest.mark.usefixtures("home")


def place(agent: str) -> Path:
    home_dir = Path(os.environ["HOME"])
    return {
        "opencode": home_dir / ".config" / "opencode" / "plugins" / "mented.js",
        "kilo": home_dir / ".config" / "kilo" / "plugin" / "mented.js",
        "pi": home_dir / ".pi" / "agent" / "extensions" / "mented.ts",
    }[agent]


def a_link(path: Path) -> Callable[[], bool]:
    """A link to a file of the user's elsewhere; left: the link and that file as they were."""
    mine = path.parent.parent / "mine.js"
    mine.write_text("export const Mine = async () => ({})\n")
    path.symlink_to(mine)
    return lambda: path.is_symlink() and mine.read_text().startswith("export const Mine")


def a_fifo(path: Path) -> Callable[[], bool]:
    os.mkfifo(path)
    return path.is_fifo


def a_huge_file(path: Path) -> Callable[[], bool]:
    """Past any plugin's size, and starting as mented's would: still not read whole."""
    with path.open("wb") as handle:
        handle.write(b"// mented plugin for opencode\n")
        handle.truncate(8 * 1024 * 1024)
    return lambda: path.stat().st_size == 8 * 1024 * 1024


def anyones_file(agent: str) -> Callable[[Path], Callable[[], bool]]:
    """mented's own text, in a file anyone may write: someone else's to change."""

    def make(path: Path) -> Callable[[], bool]:
        text = extension_file.installed_text(PI, None) if agent == "pi" else OURS[agent]()
        path.write_text(text)
        path.chmod(0o666)
        return lambda: path.read_text() == text and path.stat().st_mode & 0o777 == 0o666

    return make


HOSTILE = {
    "a symbolic link": lambda agent: a_link,
    "a named pipe": lambda agent: a_fifo,
    "a huge file": lambda agent: a_huge_file,
    "a file anyone may write": anyones_file,
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
@pytest.mark.parametrize("agent", ["opencode", "kilo", "pi"])
def test_a_hostile_file_is_refused_named_and_left_as_it_is(
    agent: str, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = place(agent)
    path.parent.mkdir(parents=True)
    unchanged = HOSTILE[kind](agent)(path)
    assert main(["hooks", "install", agent]) == 1
    err = capsys.readouterr().err
    assert path.name in err
    assert "nothing was written" in err
    assert unchanged()
    assert main(["hooks", "status", agent]) == 1
    assert path.name in capsys.readouterr().out
    assert main(["hooks", "uninstall", agent]) == 0
    capsys.readouterr()
    assert main(["uninstall", agent]) == 0
    assert unchanged()
    assert path.parent.is_dir()  # its folder holds the user's file: it stays


def test_a_linked_plugin_folder_is_never_written_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    folder = place("pi").parent
    folder.parent.mkdir(parents=True)
    folder.symlink_to(elsewhere)
    assert main(["hooks", "install", "pi"]) == 1
    assert "is a symbolic link" in capsys.readouterr().err
    assert list(elsewhere.iterdir()) == []
