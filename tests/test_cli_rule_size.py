"""`rule add --file` of a file over the limits: refused with its size before anything is sent."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import DaemonProcess


@pytest.mark.parametrize("size", [1_100_000, 5 * 1024 * 1024])
def test_a_rule_file_too_big_is_refused_with_its_size(
    daemon: DaemonProcess, tmp_path: Path, size: int
) -> None:
    big = tmp_path / "rule.txt"
    big.write_bytes(b"x" * size)
    refused = daemon.mentectl("rule", "add", "git-commit", "--file", str(big), check=False)
    assert refused.returncode == 2
    assert f"the rule in {big} is {size} bytes; the limit is 65536 bytes" in refused.stderr
    assert "not running" not in refused.stderr
    assert daemon.mentectl("rule", "list", "--json").stdout.count('"id"') == 0
