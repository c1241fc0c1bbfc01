"""What `mentectl` prints of users' and events' text: control characters escaped, JSON exact."""

from __future__ import annotations

import json

import pytest

from mented_client.commands.output import escape_controls, fail, print_json

C0 = [chr(code) for code in range(0x20) if chr(code) not in "\n\t"]
C1 = [chr(code) for code in range(0x7F, 0xA0)]  # DEL, then CSI (0x9b), OSC (0x9d) among them
# The bidi controls of CVE-2021-42574 ("Trojan Source"): embeddings, overrides, isolates, marks.
BIDI = [*"\u202a\u202b\u202c\u202d\u202e", *"\u2066\u2067\u2068\u2069", *"\u200e\u200f\u061c"]
# Text a reader does not see: zero-width space and joiners, a BOM, and the tag characters
# that spell ASCII invisibly ("hidden" in tags), then the line and paragraph separators.
HIDDEN = ["\u200b", "\u200c", "\u200d", "\ufeff", *(chr(0xE0000 + ord(c)) for c in "hidden")]
SEPARATORS = ["\u2028", "\u2029"]


@pytest.mark.parametrize("char", C0 + C1 + BIDI + HIDDEN + SEPARATORS, ids=ascii)
def test_a_control_character_is_shown_as_its_escape(char: str) -> None:
    shown = escape_controls(f"a{char}b")
    assert shown == f"a{ascii(char)[1:-1]}b"
    assert shown.isascii()
    assert shown.isprintable()


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b]52;c;aGk=\x07", "\\x1b]52;c;aGk=\\x07"),
        ("ok\rfake", "ok\\rfake"),
        ("\u202eexe.txt", "\\u202eexe.txt"),
        ("\U000e0068\U000e0069", "\\U000e0068\\U000e0069"),
        ("lone \ud800 surrogate", "lone \\ud800 surrogate"),
    ],
)
def test_the_escapes_are_the_ones_python_writes(raw: str, shown: str) -> None:
    assert escape_controls(raw) == shown
    escape_controls(raw).encode()  # a lone surrogate, too, can now be written out


@pytest.mark.parametrize(
    "text",
    [
        "commit messages: single line, no emojis",
        "déjà vu, 中文, العربية, עברית, emoji 🎉 ✅",
        "C:\\path\\x1b is not ESC",  # backslashes are left alone
        "a\u00a0non-breaking space",
    ],
)
def test_printable_text_is_unchanged(text: str) -> None:
    assert escape_controls(text) == text
    assert escape_controls(text, keep_lines=False) == text


def test_a_texts_own_lines_and_tabs_stay_unless_it_must_fit_one_line() -> None:
    text = "first\tline\nsecond line\r\nthird"
    assert escape_controls(text) == "first\tline\nsecond line\\r\nthird"
    assert escape_controls(text, keep_lines=False) == "first\tline\\nsecond line\\r\\nthird"


def test_json_stays_exact_and_carries_no_control_character(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = "".join(C0 + C1 + BIDI + HIDDEN + SEPARATORS) + "\n\tend é 🎉"
    print_json({"content": text, "tags": [text]})
    out = capsys.readouterr().out
    assert json.loads(out) == {"content": text, "tags": [text]}
    assert escape_controls(out) == out, "only JSON's own newlines and spaces are left"


def test_an_error_message_is_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    assert fail("no memory with id '\x1b[2J'", status=3) == 3
    assert capsys.readouterr().err == "mentectl: no memory with id '\\x1b[2J'\n"
