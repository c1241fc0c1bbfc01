"""`mentectl adopt`: agent rule files read, split, classified, planned (mented.adopt)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from mented.actions import load_table_in_force
from mented.adopt import (
    Adopted,
    PinnedRoom,
    Proposal,
    classify,
    path_action_name,
    plan,
    propose_checks,
    split,
    vocabulary,
)
from mented.adopt_sources import (
    MAX_SOURCE_BYTES,
    find_sources,
    parse_front_matter,
    read_source,
)
from mented.protocol import ListRequest, MemoriesReply, RecallRequest
from mented.untrusted import Refused

FIXTURES = Path(__file__).parent / "data" / "adopt" / "fixtures" / "project"
VOCAB = vocabulary(load_table_in_force(None).table)


def proposals_of(path: Path, room: PinnedRoom | None = None) -> list[Proposal]:
    source = read_source(path)
    action = path_action_name(str(path), source.globs) if source.globs else ""
    room = room or PinnedRoom(5, 1200)
    found = []
    for piece in split(source.text, file=str(path), first_line=source.first_line):
        proposal = classify(
            piece, VOCAB, room, globs=source.globs, always=source.always, path_action=action
        )
        proposal.checks = propose_checks(proposal)
        found.append(proposal)
    return found


def summary(path: Path) -> list[tuple[int, str, tuple[str, ...]]]:
    return [(p.piece.line, p.to, p.actions) for p in proposals_of(path)]


# ------------------------------------------------------------------- the file kinds


def test_every_kind_of_file_is_found_in_a_project() -> None:
    found, refused = find_sources(FIXTURES, None)
    names = {str(path.relative_to(FIXTURES)) for path in found}
    assert names == {
        "CLAUDE.md",
        "AGENTS.md",
        "GEMINI.md",
        ".github/copilot-instructions.md",
        ".github/instructions/python.instructions.md",
        ".cursor/rules/frontend.mdc",
        ".cursor/rules/always.mdc",
        ".cursor/rules/docs.md",  # a .md where Cursor wants .mdc: read all the same
        ".claude/rules/api.md",
        ".windsurf/rules/migrations.md",
    }
    assert refused == []


def test_claude_md_pieces_go_to_their_actions_with_checks() -> None:
    proposals = proposals_of(FIXTURES / "CLAUDE.md")
    by_line = {p.piece.line: p for p in proposals}
    assert by_line[3].to == "skip"
    assert by_line[3].reason == "about the file itself"
    assert by_line[7].to == "fact"  # `make test` runs the whole suite
    commit = by_line[12]
    assert (commit.to, commit.actions) == ("action", ("git-commit",))
    assert commit.reason == "mentions 'commit message'"
    assert "subject max 72" in commit.checks
    assert any(c.startswith("subject matches ^(feat|fix") for c in commit.checks)
    assert by_line[13].checks == ("message no-emoji",)
    assert by_line[14].checks == ("message not-matches (?i)co-authored-by",)
    assert by_line[15].actions[0] == "git-push"
    assert (by_line[19].to, by_line[19].reason) == ("pinned", "short and general")


def test_agents_md_heading_and_phrases_decide_and_a_description_stays_a_fact() -> None:
    got = summary(FIXTURES / "AGENTS.md")
    assert got == [
        (5, "action", ("pr-create",)),  # "PR titles ... as commits": not a git-commit rule
        (6, "action", ("pr-create",)),
        (10, "action", ("package-install",)),
        (12, "fact", ()),  # describes the code, under "Dependencies": no rule
    ]


def test_copilot_files_global_and_apply_to_with_several_patterns() -> None:
    assert summary(FIXTURES / ".github/copilot-instructions.md") == [
        (3, "action", ("git-branch-create",))
    ]
    scoped = proposals_of(FIXTURES / ".github/instructions/python.instructions.md")
    assert [p.to for p in scoped] == ["path", "path"]
    # One string, two comma-separated patterns: both count, not only the first.
    assert scoped[0].paths == ("**/*.py", "tests/**/*.py")
    assert scoped[0].actions == ("edit-python",)


def test_cursor_globs_with_braces_always_apply_and_a_list_form() -> None:
    frontend = proposals_of(FIXTURES / ".cursor/rules/frontend.mdc")
    assert frontend[0].paths == ("src/**/*.ts", "src/**/*.tsx", "*.vue")
    assert frontend[0].reason == "the file applies to src/**/*.ts, src/**/*.tsx, *.vue"
    always = proposals_of(FIXTURES / ".cursor/rules/always.mdc")
    assert [(p.to, p.reason) for p in always] == [("pinned", "the file applies always")]
    docs = proposals_of(FIXTURES / ".cursor/rules/docs.md")
    assert docs[0].paths == ("docs/**/*.md", "*.rst")
    assert docs[0].piece.line == 6


def test_claude_rules_paths_and_windsurf_trigger_glob() -> None:
    api = proposals_of(FIXTURES / ".claude/rules/api.md")
    assert [(p.to, p.paths) for p in api] == [
        ("path", ("src/api/**/*.ts", "lib/**/*.js", "lib/**/*.mjs"))
    ]
    migrations = proposals_of(FIXTURES / ".windsurf/rules/migrations.md")
    assert migrations[0].paths == ("db/migrations/**",)
    assert migrations[0].actions == ("edit-migrations",)


@pytest.mark.parametrize(
    ("front", "expected"),
    [
        ('globs: "*.ts,*.tsx"', {"globs": "*.ts,*.tsx"}),
        ("globs: ['a/**', \"b/*.md\"]", {"globs": ["a/**", "b/*.md"]}),
        ("paths:\n  - 'x/**'\n  - y.py", {"paths": ["x/**", "y.py"]}),
        (
            "alwaysApply: true\ndescription: Some words: with a colon",
            {"alwaysApply": "true", "description": "Some words: with a colon"},
        ),
        ("applyTo: '**'", {"applyTo": "**"}),
    ],
)
def test_front_matter_forms(front: str, expected: dict[str, object]) -> None:
    parsed, body_start, notes = parse_front_matter(f"---\n{front}\n---\nbody\n")
    assert parsed == expected
    assert body_start == front.count("\n") + 3
    assert notes == []


def test_apply_to_everything_is_no_path_scope(tmp_path: Path) -> None:
    path = tmp_path / "all.instructions.md"
    path.write_text('---\napplyTo: "**"\n---\nUse tabs for indentation in every file.\n')
    assert read_source(path).globs == ()


def test_a_lead_in_is_carried_by_its_items_and_code_goes_with_its_piece(tmp_path: Path) -> None:
    path = tmp_path / "CLAUDE.md"
    path.write_text(
        "When committing:\n- use the imperative mood\n- reference the issue\n\n"
        "Run the tests with:\n```sh\nmake test\n```\n"
    )
    proposals = proposals_of(path)
    assert [(p.piece.text, p.to) for p in proposals] == [
        ("When committing:", "skip"),
        ("When committing: use the imperative mood", "action"),
        ("When committing: reference the issue", "action"),
        ("Run the tests with:\n```sh\nmake test\n```", "fact"),
    ]


def test_the_pinned_cap_turns_the_rest_into_facts(tmp_path: Path) -> None:
    path = tmp_path / "AGENTS.md"
    path.write_text("".join(f"- Always do thing number {n} well.\n" for n in range(4)))
    proposals = proposals_of(path, PinnedRoom(2, 1200))
    assert [p.to for p in proposals] == ["pinned", "pinned", "fact", "fact"]
    assert proposals[2].reason == "short and general, but the pinned cap is full"


# ------------------------------------------------------------------------ planning


def test_plan_adds_keeps_supersedes_and_reports_removed(tmp_path: Path) -> None:
    path = tmp_path / "CLAUDE.md"
    path.write_text("## Commits\n\n- single line subjects\n- no emojis in commit messages\n")
    first = proposals_of(path)
    done = [
        Adopted(f"id{i}", p.piece.digest, p.piece.slot, str(path), p.piece.line, p.piece.text)
        for i, p in enumerate(first)
    ]
    assert [item.change for item in plan(first, [], [str(path)]).items] == ["add", "add"]
    again = plan(proposals_of(path), done, [str(path)])
    assert [item.change for item in again.items] == ["unchanged", "unchanged"]
    assert again.removed == []

    path.write_text("## Commits\n\n- subjects of one line only\n")
    edited = plan(proposals_of(path), done, [str(path)])
    assert [(item.change, item.replaces) for item in edited.items] == [("supersede", "id0")]
    assert [gone.id for gone in edited.removed] == ["id1"]
    # A file that was not read this time loses nothing.
    assert plan([], done, ["/elsewhere/CLAUDE.md"]).removed == []


def test_a_piece_moved_down_the_file_is_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "CLAUDE.md"
    path.write_text("- never force push to main\n")
    first = proposals_of(path)[0].piece
    done = [Adopted("a", first.digest, first.slot, str(path), 1, first.text)]
    path.write_text("# Rules\n\nIntro words here for people.\n\n- never force push to main\n")
    changes = [item.change for item in plan(proposals_of(path), done, [str(path)]).items]
    assert changes == ["add", "unchanged"]


# ------------------------------------------------------------------ hostile inputs


def test_a_symlinked_rule_file_is_refused_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("- never push to main\n")
    (tmp_path / "CLAUDE.md").symlink_to(secret)
    with pytest.raises(Refused, match="symbolic link"):
        read_source(tmp_path / "CLAUDE.md")


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "AGENTS.md")
    with pytest.raises(Refused, match="named pipe"):
        read_source(tmp_path / "AGENTS.md")


def test_a_huge_file_and_a_non_utf8_file_are_refused(tmp_path: Path) -> None:
    huge = tmp_path / "CLAUDE.md"
    huge.write_bytes(b"- rule\n" * (MAX_SOURCE_BYTES // 7 + 1))
    with pytest.raises(Refused, match="byte limit"):
        read_source(huge)
    latin = tmp_path / "GEMINI.md"
    latin.write_bytes(b"- caf\xe9 rules\n")
    with pytest.raises(Refused, match="not UTF-8"):
        read_source(latin)


def test_a_symlinked_rules_directory_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.mdc").write_text("- a rule from elsewhere\n")
    project = tmp_path / "project"
    (project / ".cursor").mkdir(parents=True)
    (project / ".cursor" / "rules").symlink_to(elsewhere)
    found, refused = find_sources(project, None)
    assert found == []
    assert len(refused) == 1
    assert "symbolic link" in refused[0]


def test_deep_nesting_and_many_pieces_stay_bounded(tmp_path: Path) -> None:
    path = tmp_path / "CLAUDE.md"
    nested = "".join("  " * depth + "- level\n" for depth in range(300))
    quotes = ">" * 5000 + " quoted\n"
    front = "---\n" + "".join(" " * n + "k: v\n" for n in range(60)) + "---\n"
    many = "".join(f"\n- rule number {n} here\n" for n in range(800))
    path.write_text(front + nested + "\n" + quotes + many)
    source = read_source(path)
    assert any("left out" in note for note in source.notes)  # nested front matter lines
    notes: list[str] = []
    pieces = split(source.text, file=str(path), first_line=source.first_line, notes=notes)
    assert len(pieces) == 500
    assert notes == ["more than 500 pieces: the rest of the file was not read"]
    assert pieces[0].text.count("level") == 300  # one item, nested items inside it


def test_a_brace_bomb_is_left_out_with_a_note(tmp_path: Path) -> None:
    path = tmp_path / "bomb.mdc"
    path.write_text("---\nglobs: " + "{a,b}" * 20 + "\n---\n- keep it small please\n")
    source = read_source(path)
    assert source.globs == ()
    assert any("more than 64 patterns" in note for note in source.notes)


# ------------------------------------------------------------------ the command


def copy_project(root: Path) -> Path:
    project = root / "project"
    shutil.copytree(FIXTURES, project)
    (project / ".git").mkdir()
    return project


def adopt_json(daemon, project: Path, *args: str) -> dict[str, object]:
    result = daemon.mentectl("adopt", "--json", *args, cwd=project)
    document: dict[str, object] = json.loads(result.stdout)
    return document


def test_adopt_writes_exactly_what_it_showed_then_nothing_then_supersedes(daemon) -> None:
    project = copy_project(daemon.root)
    shown_only = daemon.mentectl("adopt", cwd=project)
    assert "nothing written: run again with --yes" in shown_only.stderr
    assert "CLAUDE.md:12" in shown_only.stdout
    assert "mentions 'commit message'" in shown_only.stdout
    assert "subject max 72" in shown_only.stdout
    listed = json.loads(daemon.mentectl("rule", "list", "--json").stdout)["rules"]
    assert listed == []  # nothing without --yes

    document = adopt_json(daemon, project, "--yes")
    pieces = [p for p in document["pieces"] if p["to"] != "skip"]  # type: ignore[union-attr]
    with daemon.client() as client:
        everything = client.expect(ListRequest(), MemoriesReply).memories
    assert sorted(m.content for m in everything) == sorted(p["text"] for p in pieces)
    by_text = {m.content: m for m in everything}
    commit = by_text["Commit messages: conventional commits, subject at most 72 characters"]
    assert commit.actions == ("git-commit",)
    assert "subject max 72" in commit.checks
    assert commit.project == str(project)
    assert f"adopted-from:{project}/CLAUDE.md:12" in commit.tags
    assert by_text["Always answer in British English."].is_pinned
    api = by_text["Every endpoint validates its input with zod."]
    assert api.actions == ("edit-api",)
    config = daemon.config_path.read_text()
    assert "[actions.edit-api]\n" in config
    assert 'paths = ["src/api/**/*.ts", "lib/**/*.js", "lib/**/*.mjs"]' in config
    explained = daemon.mentectl(
        "explain",
        "--tool",
        "Edit",
        "--path",
        str(project / "src/api/v1/users.ts"),
        "--cwd",
        str(project),
    ).stdout
    assert "Every endpoint validates its input with zod." in explained

    again = adopt_json(daemon, project, "--yes")
    changes = {p["change"] for p in again["pieces"]}  # type: ignore[union-attr]
    assert changes == {"unchanged", "skip"}
    with daemon.client() as client:
        assert len(client.expect(ListRequest(), MemoriesReply).memories) == len(everything)
    assert daemon.config_path.read_text() == config  # no second action table

    claude = project / "CLAUDE.md"
    claude.write_text(
        claude.read_text()
        .replace("at most 72 characters", "at most 50 characters")
        .replace("- Do not add Co-Authored-By trailers\n", "")
    )
    third = daemon.mentectl("adopt", "--yes", cwd=project).stdout
    assert "supersede" in third
    assert "removed from CLAUDE.md:14" in third
    assert "(`--prune` forgets it)" in third
    with daemon.client() as client:
        rules = client.expect(ListRequest(action="git-commit"), MemoriesReply).memories
    texts = [rule.content for rule in rules]
    assert "Commit messages: conventional commits, subject at most 50 characters" in texts
    assert commit.content not in texts  # superseded: no longer fires
    assert "Do not add Co-Authored-By trailers" in texts  # reported, not forgotten
    pruned = daemon.mentectl("adopt", "--yes", "--prune", cwd=project).stdout
    assert "forgot 1 removed one" in pruned
    with daemon.client() as client:
        rules = client.expect(ListRequest(action="git-commit"), MemoriesReply).memories
    assert "Do not add Co-Authored-By trailers" not in [rule.content for rule in rules]


def test_adopt_team_writes_the_project_file_and_needs_trust(daemon) -> None:
    project = copy_project(daemon.root)
    out = daemon.mentectl("adopt", "--team", "--yes", cwd=project).stdout
    assert "run `mentectl trust`" in out
    lines = [
        json.loads(line)
        for line in (project / ".mented" / "adopted.jsonl").read_text().splitlines()
    ]
    assert {
        "actions": ["git-commit"],
        "text": "Never use emojis in commit messages",
        "checks": ["message no-emoji"],
        "source": {
            "file": "CLAUDE.md",
            "line": 13,
            "digest": lines[1]["source"]["digest"],
            "slot": lines[1]["source"]["slot"],
        },
    } in lines
    assert all(
        line["source"]["file"] in {"CLAUDE.md", "AGENTS.md", ".github/copilot-instructions.md"}
        for line in lines
    )
    with daemon.client() as client:
        before = client.expect(RecallRequest(action="git-commit", cwd=str(project)), MemoriesReply)
    assert before.memories == []  # untrusted: served nothing
    assert before.untrusted is not None
    daemon.mentectl("trust", str(project))
    with daemon.client() as client:
        after = client.expect(
            RecallRequest(action="git-commit", cwd=str(project)), MemoriesReply
        ).memories
    assert "Never use emojis in commit messages" in [m.content for m in after]
    again = adopt_json(daemon, project, "--team", "--yes")
    assert {p["change"] for p in again["pieces"]} == {"unchanged", "skip"}  # type: ignore[union-attr]


def test_ask_takes_yes_no_fact_and_all(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from mented_client.commands import adopt

    path = tmp_path / "CLAUDE.md"
    path.write_text(
        "- never push to main\n- always use the imperative in commits\n"
        "- no emojis in commit messages\n- Prefer short replies to questions.\n"
    )
    items = plan(proposals_of(path), [], [str(path)]).items
    answers = iter(["n", "f", "a"])
    monkeypatch.setattr("builtins.input", lambda _: next(answers))
    chosen = adopt._ask(items)
    assert chosen is not None
    assert [item.proposal.piece.line for item in chosen] == [2, 3, 4]
    assert chosen[0].proposal.to == "fact"
    assert chosen[1].proposal.to == "action"


def test_rules_are_scoped_to_their_project_or_directory_and_yours_to_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mented_client.commands.adopt import scope_of

    monkeypatch.delenv("CODEX_HOME", raising=False)
    home = tmp_path / "home"
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "sub" / ".cursor" / "rules").mkdir(parents=True)
    loose = tmp_path / "notes"
    (loose / ".claude" / "rules").mkdir(parents=True)
    assert scope_of(home / ".claude" / "CLAUDE.md", home) is None
    assert scope_of(home / ".claude" / "rules" / "x.md", home) is None
    assert scope_of(home / ".gemini" / "GEMINI.md", home) is None
    assert scope_of(repo / "sub" / ".cursor" / "rules" / "a.mdc", home) == repo
    # Outside a repository: the directory it stands in, never every project.
    assert scope_of(loose / "AGENTS.md", home) == loose
    assert scope_of(loose / ".claude" / "rules" / "x.md", home) == loose


def test_two_files_of_one_name_with_other_globs_get_two_actions(tmp_path: Path) -> None:
    from mented_client.commands.adopt import _proposals, _Read

    cursor = tmp_path / ".cursor" / "rules"
    copilot = tmp_path / ".github" / "instructions"
    cursor.mkdir(parents=True)
    copilot.mkdir(parents=True)
    (cursor / "python.mdc").write_text("---\nglobs: src/**/*.py\n---\n- Type every function.\n")
    (copilot / "python.instructions.md").write_text(
        '---\napplyTo: "tests/**/*.py"\n---\n- Use pytest fixtures, not setUp.\n'
    )
    read = _Read()
    for path in (cursor / "python.mdc", copilot / "python.instructions.md"):
        read.sources.append((read_source(path), None, str(path)))
    in_force = load_table_in_force(None)
    proposals, _ = _proposals(read, in_force, PinnedRoom(5, 1200), checks=False)
    first, second = proposals
    assert first.actions == ("edit-python",)
    assert first.paths == ("src/**/*.py",)
    assert second.actions[0].startswith("edit-python-")
    assert second.paths == ("tests/**/*.py",)


def test_the_table_escapes_terminal_controls(tmp_path: Path, capsys) -> None:
    import argparse

    from mented_client.commands.adopt import _show

    path = tmp_path / "CLAUDE.md"
    path.write_text("- never push \x1b]0;owned\x07 to main\n")
    result = plan(proposals_of(path), [], [str(path)])
    _show(argparse.Namespace(json=False, prune=False), result, [], team=False)
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert "\x07" not in out
    assert "\\x1b" in out


def test_a_piece_the_daemon_refuses_is_named_and_the_rest_written(capsys) -> None:
    from mented.protocol import ErrorReply, StoreRequest
    from mented_client.commands.adopt import _write_store
    from mented_client.connection import DaemonError

    path = "/p/CLAUDE.md"
    pieces = split("- never push to main\n- always answer in British English\n", file=path)
    room = PinnedRoom(5, 1200)
    items = plan([classify(p, VOCAB, room) for p in pieces], [], [path]).items
    sent: list[str] = []

    class Refusing:
        def expect(self, request, kind):
            if isinstance(request, StoreRequest) and "pinned" in request.tags:
                raise DaemonError(ErrorReply(code="invalid", message="over the pinned cap"))
            sent.append(request.content)
            return kind(id="01ARZ3NDEKTSV4RRFFQ69G5FAV")

    failed: list[object] = []
    summary_line = _write_store(
        Refusing(),
        items,
        [],
        {path: None},
        load_table_in_force(None),
        failed,  # type: ignore[arg-type]
    )
    assert sent == ["never push to main"]
    assert summary_line == "adopted 1 new rule"
    assert len(failed) == 1
    assert "CLAUDE.md:2 not adopted: over the pinned cap" in capsys.readouterr().err


def test_on_a_terminal_each_piece_and_the_prune_are_asked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys
) -> None:
    import argparse

    from mented_client.commands import adopt

    path = tmp_path / "CLAUDE.md"
    path.write_text("- never push to main\n- no emojis in commit messages\n")
    proposals = proposals_of(path)
    gone = Adopted("01ARZ3NDEKTSV4RRFFQ69G5FAV", "d" * 16, "s" * 16, str(path), 9, "old rule")
    result = plan(proposals, [gone], [str(path)])
    assert result.removed == [gone]
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    answers = iter(["y", "n", "y"])
    monkeypatch.setattr("builtins.input", lambda _: next(answers))
    args = argparse.Namespace(json=False, yes=False, prune=True)
    chosen = adopt._accepted(args, result)
    assert [item.proposal.piece.text for item in chosen or []] == ["never push to main"]
    assert adopt._prune_confirmed(result) is True
    out = capsys.readouterr().out
    assert "-> action rule git-push (mentions 'push')" in out
    assert "check: message no-emoji" in out


def test_a_fifo_and_a_non_utf8_name_in_a_rules_folder_are_named_not_read(tmp_path: Path) -> None:
    rules = tmp_path / ".cursor" / "rules"
    rules.mkdir(parents=True)
    (rules / "good.mdc").write_text("- keep functions short\n")
    os.mkfifo(rules / "pipe.mdc")
    os.close(os.open(os.fsencode(rules) + b"/caf\xe9.mdc", os.O_CREAT | os.O_WRONLY, 0o644))
    found, refused = find_sources(tmp_path, None)
    assert found == [rules / "good.mdc"]
    assert any("pipe.mdc: a named pipe" in item for item in refused)
    assert any("caf\\xe9.mdc: the name is not UTF-8" in item for item in refused)


def test_a_path_with_no_rule_file_is_an_error_saying_why(tmp_path: Path, capsys) -> None:
    from mented_client.cli import main

    (tmp_path / "empty").mkdir()
    status = main(["adopt", str(tmp_path / "missing.md"), str(tmp_path / "empty")])
    err = capsys.readouterr().err
    assert status == 2
    assert "missing.md: no such file" in err
    assert "give a rule file or a project directory" in err
