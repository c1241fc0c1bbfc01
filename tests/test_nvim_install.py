"""The Neovim plugin's native-package install, as editors/nvim/README.md says it.

Run with a stand-in `nvim` (the real one is not needed to see where things go):
the package lands under `$XDG_DATA_HOME`, and the `doc/tags` that `:helptags`
writes in the clone is ignored by git.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = REPO / "editors" / "nvim" / "README.md"


def native_snippet() -> str:
    section = README.read_text().split("### Native packages", 1)[1]
    match = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert match is not None
    return match.group(1)


def test_the_native_package_goes_under_xdg_data_home(tmp_path: Path) -> None:
    home, data, bin_dir = tmp_path / "home", tmp_path / "xdg-data", tmp_path / "bin"
    for folder in (home / "src", bin_dir):
        folder.mkdir(parents=True)
    (bin_dir / "nvim").write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$HOME/nvim-args"\n')
    (bin_dir / "nvim").chmod(0o755)
    # The clone is this checkout; the rest of the snippet as the README has it.
    script = native_snippet().replace(
        "git clone https://github.com/OWNER/mented ~/src/mented", f"ln -s {REPO} ~/src/mented"
    )
    env = {"HOME": str(home), "XDG_DATA_HOME": str(data), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    subprocess.run(["sh", "-e", "-c", script], env=env, check=True, timeout=30)
    link = data / "nvim" / "site" / "pack" / "mented" / "start" / "mented.nvim"
    assert link.is_symlink()
    assert (link / "plugin" / "mented.lua").is_file()
    assert not (home / ".local").exists()
    assert f"helptags {link}/doc" in (home / "nvim-args").read_text().splitlines()


def test_git_ignores_the_tags_file_helptags_writes() -> None:
    checked = subprocess.run(
        ["git", "-C", str(REPO), "check-ignore", "-q", "editors/nvim/doc/tags"],
        check=False,
        timeout=30,
    )
    assert checked.returncode == 0
