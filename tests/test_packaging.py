"""What `pip install .` ships: every package and data file the code needs."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_every_package_directory_is_listed_for_installation() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    roots = {"mented": ROOT / "mented", "mented_client": ROOT / "client"}
    found = set()
    for name, root in roots.items():
        for init in root.rglob("__init__.py"):
            relative = init.parent.relative_to(root)
            found.add(".".join([name, *relative.parts]))
    assert found == listed, "pyproject.toml [tool.setuptools] packages must list every package"


def test_the_built_in_action_table_is_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "*.toml" in config["package-data"]["mented"]
    assert (ROOT / "mented" / "actions.toml").is_file()


def test_the_tables_read_at_start_are_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "*.json" in config["package-data"]["mented"]
    assert (ROOT / "mented" / "bashlex_tables.json").is_file()
    assert "*.json" in config["package-data"]["mented_client.mcp_server"]
    assert (ROOT / "client" / "mcp_server" / "wire.json").is_file()


def test_the_pi_extension_is_package_data() -> None:
    """`mentectl hooks install pi` copies it from the installed package."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "*.ts" in config["package-data"]["mented_client"]
    assert (ROOT / "client" / "pi_extension.ts").is_file()
