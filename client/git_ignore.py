"""Whether git ignores a file, read from the ignore files themselves: git is not run.

`mentectl hooks install AGENT --project DIR` tells the user when git would commit the
file it wrote (it names this machine's interpreter and socket). Asking git
(`git check-ignore`) runs git inside DIR, and a repository's `.git/config` chooses
programs git starts there: `core.fsmonitor` runs its command as the user on any
index read, whatever was asked (an extracted tarball, a shared volume or a
devcontainer brings its own `.git/config`). So the answer is read from the files git
reads (gitignore(5)), lowest precedence first, the last match deciding:

- `core.excludesFile` (the system and global config, then the repository's own),
  else `$XDG_CONFIG_HOME/git/ignore` (`~/.config/git/ignore`);
- `$GIT_COMMON_DIR/info/exclude`;
- each `.gitignore` from the top of the work tree down to the file's directory.

Each is read as mented reads what it does not own (`mented.untrusted.read_file`: no
link followed, as git itself no longer follows a symlinked `.gitignore`; regular
files only; at most `MAX_IGNORE_BYTES`), and matched with pathspec's git rules.
Not read: `includeIf` configs (git_aliases says why) and `$GIT_DIR` set in the
environment. The answer is only ever advice in a note.
"""

from __future__ import annotations

import os
from pathlib import Path

from pathspec import GitIgnoreSpec

from mented.git_aliases import config_file_values, find_repository, global_config_files
from mented.untrusted import Refused, read_file

MAX_IGNORE_BYTES = 1024 * 1024


def git_ignores(path: Path) -> bool | None:
    """Whether git would ignore `path` (a file, absolute); None: it is in no repository."""
    repository = find_repository(path.parent)
    if repository is None:
        return None
    root = repository.work_tree
    try:
        relative = path.relative_to(root)
    except ValueError:
        return None
    sources: list[tuple[Path, Path]] = [  # (ignore file, directory its patterns start at)
        (_excludes_file(repository.common_dir / "config"), root),
        (repository.common_dir / "info" / "exclude", root),
    ]
    directory = root
    sources.append((directory / ".gitignore", directory))
    for part in relative.parts[:-1]:
        directory /= part
        sources.append((directory / ".gitignore", directory))
    verdict = False
    for ignore_file, base in sources:
        spec = _spec(ignore_file)
        if spec is None:
            continue
        result = spec.check_file(path.relative_to(base).as_posix())
        if result.include is not None:
            verdict = result.include
    return verdict


def _excludes_file(repository_config: Path) -> Path:
    """`core.excludesFile` as git reads it (the last value wins), else its default."""
    values = [
        value
        for config in [*global_config_files(), repository_config]
        for value in config_file_values(config, "core.excludesfile")
    ]
    if values and values[-1]:
        return Path(values[-1]).expanduser()
    xdg = os.environ.get("XDG_CONFIG_HOME")
    home = Path(os.environ.get("HOME") or Path("~").expanduser())
    return (Path(xdg) if xdg else home / ".config") / "git" / "ignore"


def _spec(ignore_file: Path) -> GitIgnoreSpec | None:
    try:
        data = read_file(ignore_file, limit=MAX_IGNORE_BYTES)
    except (FileNotFoundError, NotADirectoryError, Refused):
        return None
    except OSError:
        return None
    return GitIgnoreSpec.from_lines(data.decode("utf-8", "replace").splitlines())
