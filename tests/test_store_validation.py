"""What a memory must be to be stored (`mented.store.validation`)."""

from __future__ import annotations

from typing import Any

import pytest

from mented.memory import MAX_CONTENT_BYTES, InvalidInputError
from mented.store import Store, StoreItem

# ----------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"content": ""}, "content cannot be empty"),
        ({"content": " \n\t "}, "content cannot be empty"),
        ({"content": "x" * (MAX_CONTENT_BYTES + 1)}, f"limit is {MAX_CONTENT_BYTES} bytes"),
        ({"content": "é" * (MAX_CONTENT_BYTES // 2 + 1)}, "limit is"),  # bytes, not characters
        ({"tags": ["trigger:"]}, "action name cannot be empty"),
        ({"tags": ["trigger:   "]}, "action name cannot be empty"),
        ({"tags": ["trigger:git commit"]}, "whitespace or control characters"),
        ({"tags": ["trigger:git\x07commit"]}, "whitespace or control characters"),
        ({"tags": ["trigger:" + "a" * 65]}, "the limit is 64"),
        ({"tags": [""]}, "tag cannot be empty"),
        ({"tags": "trigger:git-commit"}, "list of strings"),
        ({"memory_type": "opinion"}, "use one of: episodic, semantic"),
        ({"agent": "  "}, "agent name cannot be blank"),
        ({"agent": "a\nb"}, "control characters"),
        ({"project": "work/app"}, "must be an absolute path"),
        ({"project": ""}, "cannot be blank"),
    ],
)
def test_invalid_input_is_refused_with_a_clear_message(
    store: Store, kwargs: dict[str, Any], message: str
) -> None:
    arguments: dict[str, Any] = {"content": "a rule"} | kwargs
    content = arguments.pop("content")

    with pytest.raises(InvalidInputError, match=message):
        store.store(content, **arguments)
    assert store.stats().memories == 0


def test_store_many_is_all_or_nothing_and_names_the_bad_item(store: Store) -> None:
    items = [StoreItem(content="fine"), StoreItem(content="also fine"), StoreItem(content=" ")]

    with pytest.raises(InvalidInputError, match="item 2: memory content cannot be empty"):
        store.store_many(items)
    assert store.stats().memories == 0
