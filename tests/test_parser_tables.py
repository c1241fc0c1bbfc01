"""bashlex's parser tables: read at start, never rebuilt; a cache no one else can feed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import bashlex.parser
import msgspec
import pytest

from mented import parser_tables

PYTHON = sys.executable

# A fresh interpreter: counts bashlex's table builds (its yacc's `lr_parse_table`)
# while the daemon's modules are imported, then matches a command with them.
COUNT_BUILDS = """
import cProfile, json, pstats, sys
from pathlib import Path
shipped = sys.argv[1]
if shipped != "-":
    import mented.parser_tables
    mented.parser_tables.SHIPPED = Path(shipped)
profile = cProfile.Profile()
profile.enable()
import mented.server
profile.disable()
builds = sum(
    calls
    for (file, _, name), (calls, *_) in pstats.Stats(profile).stats.items()
    if name == "lr_parse_table" and file.endswith("yacc.py")
)
from mented.actions import load_action_table
from mented.config import Config
from mented.matcher import Matcher
actions = Matcher(load_action_table(Config())).actions_in(
    'cd src && git -c a=b commit -m "$(cat <<EOF\\nfix: x\\nEOF\\n)" | tee log'
)
print(json.dumps({"builds": builds, "actions": list(actions)}))
"""


def start(tmp_path: Path, shipped: Path | None = None) -> dict[str, object]:
    """What a fresh interpreter did importing the daemon: table builds, a command's actions."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    result = subprocess.run(
        [PYTHON, "-c", COUNT_BUILDS, str(shipped) if shipped else "-"],
        env=env,
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr.decode()
    found: dict[str, object] = json.loads(result.stdout)
    return found


def cached(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "cache" / "mented").glob("bashlex-tables-*.json"))


def test_the_daemon_starts_without_building_the_parser_tables(tmp_path: Path) -> None:
    # Issue 22, item 8: bashlex rebuilt them at every import (0.15-0.26 s of a start).
    assert start(tmp_path) == {"builds": 0, "actions": ["git-commit"]}
    assert cached(tmp_path) == []  # the shipped tables were enough: nothing written


def test_the_shipped_tables_are_the_ones_the_installed_bashlex_builds() -> None:
    # `python -m mented.parser_tables` writes them; a bashlex upgrade fails here first.
    build = (
        "import mented.parser_tables as tables; tables.install(); import bashlex; "
        "import sys; sys.stdout.buffer.write(tables._built)"
    )
    result = subprocess.run(
        [PYTHON, "-c", build],
        env=os.environ | {"MENTED_BASHLEX_TABLES": "build", "PYTHONHASHSEED": "12345"},
        capture_output=True,
        check=True,
        timeout=120,
    )
    assert result.stdout + b"\n" == parser_tables.SHIPPED.read_bytes()


def test_another_bashlex_builds_its_tables_once_then_reads_them_from_a_private_cache(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "not-shipped.json"
    assert start(tmp_path, missing) == {"builds": 1, "actions": ["git-commit"]}
    (written,) = cached(tmp_path)
    assert written.stat().st_mode & 0o777 == 0o600
    assert written.parent.stat().st_mode & 0o777 == 0o700
    assert start(tmp_path, missing) == {"builds": 0, "actions": ["git-commit"]}


def hostile_copies(good: bytes) -> dict[str, bytes]:
    doc = json.loads(good)
    out_of_range = json.loads(good)
    out_of_range["action"]["0"] = dict.fromkeys(out_of_range["action"]["0"], 99_999)
    foreign = json.loads(good)
    foreign["productions"][1][2] = "system"  # not one of bashlex's p_ functions
    other = dict(doc, grammar="0" * 64)
    return {
        "garbage": b"\x80\x04\x95 a pickle, say",
        "out of range": json.dumps(out_of_range).encode(),
        "a foreign function": json.dumps(foreign).encode(),
        "another grammar": json.dumps(other).encode(),
        "nested deep": b"[" * 100_000,
    }


@pytest.mark.parametrize(
    "kind", ["garbage", "out of range", "a foreign function", "another grammar", "nested deep"]
)
def test_a_damaged_or_hostile_table_file_is_refused(kind: str) -> None:
    pdict = vars(bashlex.parser)
    digest = parser_tables.grammar_digest(pdict)
    good = parser_tables.SHIPPED.read_bytes()
    assert parser_tables.decode_tables(good, pdict, digest).grammar == digest
    with pytest.raises(ValueError):
        parser_tables.decode_tables(hostile_copies(good)[kind], pdict, digest)


def test_a_hostile_cache_costs_a_rebuild_never_more(tmp_path: Path) -> None:
    missing = tmp_path / "not-shipped.json"
    start(tmp_path, missing)
    (written,) = cached(tmp_path)
    good = written.read_bytes()
    # A link to tables elsewhere is not followed (nor is a directory open to others read).
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_bytes(good)
    written.unlink()
    written.symlink_to(elsewhere)
    assert start(tmp_path, missing)["builds"] == 1
    assert not written.is_symlink()  # replaced by the tables just built
    written.parent.chmod(0o777)
    assert start(tmp_path, missing)["builds"] == 1  # not read from a directory others write
    written.parent.chmod(0o700)
    written.write_bytes(msgspec.json.encode({"grammar": "x"}))
    assert start(tmp_path, missing)["builds"] == 1
    assert start(tmp_path, missing)["builds"] == 0  # the rebuilt ones are good
