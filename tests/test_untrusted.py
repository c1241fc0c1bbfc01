"""The one reader of places mented does not own: links, pipes, devices, huge and deep files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mented.untrusted import (
    Refused,
    check_nesting,
    list_names,
    open_directory,
    owned_by_user,
    read_file,
    shown,
)


def test_a_regular_file_is_read(tmp_path: Path) -> None:
    (tmp_path / "rules.jsonl").write_bytes(b'{"action": "git-commit", "text": "x"}\n')
    assert read_file(tmp_path / "rules.jsonl", limit=1024).startswith(b'{"action"')


def test_a_symlink_is_refused_and_its_target_named(tmp_path: Path) -> None:
    secret = tmp_path / "bashrc"
    secret.write_text("export X=1\n")
    (tmp_path / "rules.jsonl").symlink_to(secret)
    with pytest.raises(Refused, match=r"symbolic link \(to .*bashrc\)"):
        read_file(tmp_path / "rules.jsonl", limit=1024)


def test_a_device_is_refused_without_reading_it() -> None:
    with pytest.raises(Refused, match="character device"):
        read_file("/dev/zero", limit=1024)


def test_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "rules.jsonl")
    with pytest.raises(Refused, match="named pipe"):
        read_file(tmp_path / "rules.jsonl", limit=1024)


def test_a_file_over_the_limit_is_refused_not_cut(tmp_path: Path) -> None:
    (tmp_path / "big.jsonl").write_bytes(b"x" * 2048)
    with pytest.raises(Refused, match="2048 bytes, over the 1024-byte limit"):
        read_file(tmp_path / "big.jsonl", limit=1024)


def test_a_missing_file_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_file(tmp_path / "none.jsonl", limit=1024)


def test_a_linked_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / ".mented").symlink_to(tmp_path / "real")
    with pytest.raises(Refused, match="symbolic link"):
        open_directory(tmp_path / ".mented")


def test_listing_keeps_regular_files_and_names_the_rest(tmp_path: Path) -> None:
    folder = tmp_path / ".mented"
    folder.mkdir()
    (folder / "b.jsonl").write_text("")
    (folder / "a.jsonl").write_text("")
    (folder / "notes.txt").write_text("")
    (folder / "link.jsonl").symlink_to("/etc/passwd")
    os.mkfifo(folder / "pipe.jsonl")
    (folder / "dir.jsonl").mkdir()
    with open(os.fsencode(folder) + b"/bad-\xff.jsonl", "wb"):  # noqa: PTH123 - a bytes name
        pass
    fd = open_directory(folder)
    try:
        listing = list_names(fd, suffixes=(".jsonl",))
    finally:
        os.close(fd)
    assert listing.names == ["a.jsonl", "b.jsonl"]
    refused = "\n".join(listing.refused)
    assert "link.jsonl: a symbolic link (to /etc/passwd)" in refused
    assert "pipe.jsonl: a named pipe" in refused
    assert "dir.jsonl: a directory" in refused
    assert "bad-\\xff.jsonl: the name is not UTF-8" in refused


def test_a_listed_links_target_is_named_escaped_and_cut(tmp_path: Path) -> None:
    """What a repository tried to reach is shown, never its terminal escapes, never 4 KiB."""
    (tmp_path / "clip.jsonl").symlink_to("/home/x/\x1b]52;c;ZXZpbA==\x07.ssh/id_ed25519")
    (tmp_path / "long.jsonl").symlink_to("/" + "a" * 3000)
    os.symlink(b"/tmp/bad-\xff", os.fsencode(tmp_path) + b"/bytes.jsonl")  # noqa: PTH211 - bytes
    fd = open_directory(tmp_path)
    try:
        refused = list_names(fd, suffixes=(".jsonl",)).refused
    finally:
        os.close(fd)
    clip, long, raw = (
        next(r for r in refused if r.startswith(n)) for n in ("clip", "long", "bytes")
    )
    assert "(to /home/x/\\x1b]52;c;ZXZpbA==\\x07.ssh/id_ed25519)" in clip
    assert "\x1b" not in clip and "\x07" not in clip
    assert "(to /aaa" in long and "...)" in long and len(long) < 400
    assert "(to /tmp/bad-\\xff)" in raw


def test_listing_stops_at_its_limit(tmp_path: Path) -> None:
    for number in range(10):
        (tmp_path / f"{number}.jsonl").write_text("")
    fd = open_directory(tmp_path)
    try:
        listing = list_names(fd, limit=4)
    finally:
        os.close(fd)
    assert len(listing.names) == 4
    assert listing.refused == ["more than 4 entries: the rest were not read"]


def test_deep_nesting_is_refused_before_a_parser_recurses() -> None:
    with pytest.raises(Refused, match=r"rules\.jsonl: nested more than 32 levels deep"):
        check_nesting(b"[" * 50_000 + b"]" * 50_000, shown_as="rules.jsonl")


def test_brackets_inside_strings_do_not_count() -> None:
    text = b'{"action": "git-commit", "text": "' + b"[{" * 100 + b'\\" [[["}'
    check_nesting(text)
    check_nesting(b"[" * 32 + b"]" * 32)


def test_another_users_or_world_writable_entry_is_not_the_users(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    assert owned_by_user(folder.stat())
    folder.chmod(0o777)
    assert not owned_by_user(folder.stat())
    if os.geteuid() == 0:
        os.chown(folder, 65534, 65534)
        folder.chmod(0o755)
        assert not owned_by_user(folder.stat())


def test_names_are_shown_with_terminal_escapes_made_visible() -> None:
    assert shown("rules\x1b]52;c;aGk=\x07.jsonl") == "rules\\x1b]52;c;aGk=\\x07.jsonl"
    assert shown("\u202etxt.jsonl") == "\\u202etxt.jsonl"
    assert shown(b"caf\xff") == "caf\\xff"
    assert shown("plain.jsonl") == "plain.jsonl"
