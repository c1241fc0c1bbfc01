"""docs/config.md is what `mented.config_reference` writes from the code: it cannot drift."""

from __future__ import annotations

from pathlib import Path

import pytest

from mented.config import SECTIONS, Config
from mented.config_reference import MEANINGS, render_reference

PAGE = Path(__file__).resolve().parent.parent / "docs" / "config.md"


def test_docs_config_md_is_up_to_date() -> None:
    assert PAGE.read_text(encoding="utf-8") == render_reference(), (
        "docs/config.md is out of date: python -m mented.config_reference > docs/config.md"
    )


def test_the_page_shows_the_defaults_the_daemon_uses() -> None:
    defaults = Config()
    page = render_reference()
    assert f"| `k` | `{defaults.hook.k}` | whole number, >= 1 and <= 50 |" in page
    assert f"| `max_chars` | `{defaults.pinned.max_chars}` |" in page
    assert "| `after_change` | `false` | true or false |" in page
    assert "| `session_ttl_s` | `43200` | number, > 0 and <= 2592000 |" in page


def test_a_key_without_words_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    meanings = {section: dict(keys) for section, keys in MEANINGS.items()}
    del meanings["hook"]["k"]
    monkeypatch.setattr("mented.config_reference.MEANINGS", meanings)
    with pytest.raises(ValueError, match=r"\[hook\]: keys"):
        render_reference()


def test_a_section_not_on_the_page_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("mented.config_reference.CONFIG_SECTIONS", (*SECTIONS, "telemetry"))
    with pytest.raises(ValueError, match="telemetry"):
        render_reference()
