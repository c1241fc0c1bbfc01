"""Adopting the rules users already have: agent rule files split into pieces, each put somewhere.

`mentectl adopt` (mented_client/commands/adopt.py) reads the files the agents read
(mented.adopt_sources), and this module, with no I/O of its own, decides:

1. `split` cuts a file's Markdown body into rule-sized *pieces*: a list item (with the
   items nested in it), a paragraph, a table; a fenced code block goes with the piece it
   follows, else is skipped. A paragraph ending in `:` that leads into a list is put in
   front of each item ("When committing: use the imperative").
2. `classify` proposes where each piece goes, deterministically, with the reason shown:
   - a *path rule* when its file is scoped to globs (the globs become the `paths` of an
     `edit-NAME` action, so that the rule fires when the agent edits a matching file);
   - an *action rule* when it names an action of the table: a command of one of the
     action's shapes ("mentions `git push`"), one of the phrases in `ACTION_PHRASES`
     ("mentions 'commit message'"), or the heading it stands under ("heading 'Commits'");
   - a *pinned rule* when it is short, general (an always/never/prefer kind of sentence
     with no code in it, or its file says `alwaysApply`) and the pinned cap has room;
   - a *fact* (recalled by topic) otherwise, or *skip*: too short, a heading's lone
     code block, a note about the file itself, too long for a rule.
3. `propose_checks` adds checks (mented.checks) where the text states something checkable:
   "at most 72 characters", "conventional commits", "no emojis", "never --no-verify".
4. `plan` compares the proposals with what was adopted before (each adopted rule carries
   tags `adopted:DIGEST`, `adopted-slot:SLOT` and `adopted-from:FILE:LINE`): an unchanged
   piece adds nothing, a changed one supersedes the rule adopted from its place, and a
   rule whose piece is gone from a file read is reported as removed.

A piece's *digest* is of its text with blanks collapsed; its *slot* is of its file, the
headings above it and its position under them: where it stands, whatever it says.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from mented.actions import ActionTable

Destination = Literal["action", "path", "pinned", "fact", "skip"]
Change = Literal["add", "supersede", "unchanged", "skip"]

ADOPTED_TAG = "adopted:"
SLOT_TAG = "adopted-slot:"
FROM_TAG = "adopted-from:"
MAX_TAG_CHARS = 256

MAX_PIECES = 500  # of one file; the rest are noted, not read
MAX_PIECE_CHARS = 1500  # longer is no rule: skipped, with the way out
MAX_ATTACHED_CODE_CHARS = 600  # a code block longer than this stays apart (skipped)
MAX_LEAD_IN_CHARS = 100
PINNED_MAX_CHARS = 160  # a pinned candidate is a sentence or two
MIN_WORDS = 3

# Phrases that name an action, beyond the commands of its shapes: (action, pattern, shown).
ACTION_PHRASES: tuple[tuple[str, str, str], ...] = (
    ("git-push-force", r"force[- ]push\w*|push\s+--force\S*|--force-with-lease", "force push"),
    ("git-commit", r"commit messages?|commit subjects?|commit titles?", "commit message"),
    ("git-commit", r"conventional commits?", "conventional commits"),
    ("git-commit", r"co-authored-by", "Co-Authored-By"),
    ("git-commit", r"(?:before|when|after|while) committing", "committing"),
    ("git-commit", r"(?<![\w-])commit(?:s|ting)?\b", "commit"),  # weak: see WEAK_PHRASES
    ("pr-create", r"(?i:pull requests?|merge requests?)|\bPRs?\b|\bMRs?\b", "pull request"),
    (
        "git-branch-create",
        r"branch(?:es)? names?|branch naming|new branch(?:es)?|"
        r"\bname (?:your |the |new )?branch(?:es)?\b",
        "branch name",
    ),
    (
        "git-push",
        r"(?:before|when) pushing|\bpush(?:ing)? (?:to|your|the|changes|commits)\b|"
        r"(?:do not|don't|never) push\b",
        "push",
    ),
    ("git-rebase", r"\brebas(?:e|ing)\b", "rebase"),
    ("git-tag", r"\bgit tags?\b|\btagging\b|version tags?", "tag"),
    ("release-create", r"\breleases?\b(?! notes? file)", "release"),
    (
        "package-install",
        r"\bdependenc(?:y|ies)\b|(?:add|install)(?:ing)? (?:a |new )?packages?",
        "dependencies",
    ),
    ("package-publish", r"\bpublish(?:ing)? (?:to|the|a) (?:npm|pypi|registry|package)", "publish"),
    ("infra-deploy", r"\bdeploy(?:s|ing|ment)?\b", "deploy"),
    ("docker-push", r"docker push|push(?:ing)? (?:the )?images?", "push images"),
    (
        "discard-changes",
        r"\breset --hard|git clean|\bclean -f|discard(?:ing)? (?:local )?changes",
        "discard",
    ),
    ("issue-create", r"(?:open|file|create)(?:ing)? (?:an |new )?issues?\b|issue titles?", "issue"),
)
# Phrases that name an action only in a piece that instructs (`_DIRECTIVE`): "key
# dependencies: plumpy, kiwipy" describes, "ask before adding a dependency" instructs.
WEAK_PHRASES = frozenset({"commit", "dependencies", "release", "deploy", "tag", "issue"})
# Heading words that put the pieces under them under an action.
HEADING_WORDS: tuple[tuple[str, str], ...] = (
    ("git-commit", r"(?<![\w-])commit"),
    ("pr-create", r"(?i:pull request|merge request)|\bPRs?\b"),
    ("git-branch-create", r"\bbranch"),
    ("release-create", r"\breleas"),
    ("package-install", r"dependenc|packages?\b"),
    ("infra-deploy", r"deploy"),
    ("git-push", r"\bpush"),
)
_GENERAL = re.compile(
    r"^(?:always|never|do not|don't|dont|avoid|prefer|use|be|keep|ask|answer|respond|reply|"
    r"write|make sure|you must|must|only|no)\b",
    re.IGNORECASE,
)
_ABOUT_FILE = re.compile(
    r"\bthis (?:file|document)\b.*\b(?:provides|gives|contains|guidance|instructions)\b|"
    r"\bguidance to (?:claude|codex|gemini|copilot|ai)|^see (?:also )?\[",
    re.IGNORECASE,
)
_WORD = re.compile(r"[\w'-]+")
# A paragraph that instructs (a list item under a heading is taken as one).
_DIRECTIVE = re.compile(
    r"\b(?:always|never|must|should|do not|don't|avoid|prefer|make sure|ensure|only)\b|^\W*(?:use|"
    r"keep|write|run|ask|add|put|name|include|follow|start|end|limit|commit|create|open|mark)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Piece:
    """One rule-sized piece of a file: where it stands and what it says."""

    file: str  # as recorded (absolute, or relative to the project for --team)
    line: int
    text: str
    headings: tuple[str, ...]
    slot: str
    digest: str
    lead_in: str = ""
    code_only: bool = False
    leads: bool = False  # a paragraph ending in `:` that the items below it carry
    item: bool = False  # a list item (else a paragraph, a table or code)


@dataclass
class Proposal:
    """Where a piece goes, and why."""

    piece: Piece
    to: Destination
    reason: str
    actions: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()


@dataclass(frozen=True)
class Adopted:
    """A rule adopted before, as the planner needs it (from the store or a team file)."""

    id: str
    digest: str
    slot: str
    file: str
    line: int
    text: str


@dataclass
class Planned:
    """A proposal and what accepting it changes."""

    proposal: Proposal
    change: Change
    replaces: str | None = None  # the id of the adopted rule it supersedes


@dataclass
class Plan:
    """What `adopt` would do: each piece, and the adopted rules whose piece is gone."""

    items: list[Planned] = field(default_factory=list)
    removed: list[Adopted] = field(default_factory=list)


def digest_of(text: str) -> str:
    """The digest of a piece's text, blanks collapsed: 16 hex digits of SHA-256."""
    return hashlib.sha256(" ".join(text.split()).encode()).hexdigest()[:16]


def _slot_of(file: str, headings: Sequence[str], ordinal: int) -> str:
    key = "\x00".join([file, *headings, str(ordinal)])
    return hashlib.sha256(key.encode()).hexdigest()[:16]


# ----------------------------------------------------------------------------- splitting

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d{1,3}[.)])\s+(?:\[[ xX]\]\s+)?(.*)$")


_CONDITION = re.compile(
    r"^\W*(?:when|before|after|if|while|for|on|in)\b|commit|push|pull request|\bPRs?\b|branch|"
    r"release|deploy|tag|merge|rebase|dependenc",
    re.IGNORECASE,
)


@dataclass
class _Block:
    kind: Literal["para", "item", "table", "code"]
    line: int
    lines: list[str]
    headings: tuple[str, ...]
    code: list[str] = field(default_factory=list)


def split(
    text: str, *, file: str, first_line: int = 1, notes: list[str] | None = None
) -> list[Piece]:
    """The pieces of a Markdown body, in file order (at most `MAX_PIECES`).

    Linear in the text: nesting (lists, quotes) is never recursed into, a nested item
    belongs to the top-level item above it.
    """
    blocks = _blocks(text, first_line)
    pieces: list[Piece] = []
    ordinals: dict[tuple[str, ...], int] = {}
    lead_in = ""
    lead_headings: tuple[str, ...] | None = None
    for block in blocks:
        body = "\n".join(block.lines).strip()
        code = "\n".join(block.code).strip()
        if block.kind == "item" and lead_headings == block.headings:
            context = lead_in
        else:
            context = ""
            lead_in, lead_headings = "", None
        leads = block.kind == "para" and body.endswith(":") and len(body) <= MAX_LEAD_IN_CHARS
        if leads:
            # Only a lead-in that says when ("When committing:") goes in front of its items;
            # "A list of rules you must follow:" would only lengthen each of them.
            lead_in = body if _CONDITION.search(body) else ""
            lead_headings = block.headings
        text_of = body if not code else f"{body}\n{code}".strip()
        if context and block.kind == "item":
            text_of = f"{context} {text_of}"
        if not text_of:
            continue
        ordinal = ordinals.get(block.headings, 0)
        ordinals[block.headings] = ordinal + 1
        pieces.append(
            Piece(
                file=file,
                line=block.line,
                text=text_of,
                headings=block.headings,
                slot=_slot_of(file, block.headings, ordinal),
                digest=digest_of(text_of),
                lead_in=context,
                code_only=block.kind == "code",
                leads=leads and not code,
                item=block.kind == "item",
            )
        )
        if len(pieces) >= MAX_PIECES:
            if notes is not None:
                notes.append(f"more than {MAX_PIECES} pieces: the rest of the file was not read")
            break
    return pieces


def _blocks(text: str, first_line: int) -> list[_Block]:  # noqa: PLR0915 - one pass, one state
    blocks: list[_Block] = []
    headings: list[tuple[int, str]] = []
    current: _Block | None = None
    fence: str | None = None
    code_target: _Block | None = None
    in_comment = False
    blank_before = True

    def heading_path() -> tuple[str, ...]:
        return tuple(title for _, title in headings)

    def close() -> None:
        nonlocal current
        if current is not None:
            blocks.append(current)
        current = None

    for index, raw in enumerate(text.split("\n")):
        number = first_line + index
        line = raw.rstrip()
        if fence is not None:
            if line.strip().startswith(fence):
                if code_target is not None:
                    code_target.code.append(line.strip())
                fence = None
                code_target = None
            elif code_target is not None:
                code_target.code.append(raw)
            continue
        if in_comment:
            in_comment = "-->" not in line
            continue
        if line.lstrip().startswith("<!--"):
            in_comment = "-->" not in line
            continue
        fenced = _FENCE.match(line)
        if fenced:
            fence = fenced.group(1)
            code_target = _code_target(current, blocks, blank_before)
            if code_target is None:
                close()
                code_target = _Block("code", number, [], heading_path())
                blocks.append(code_target)
            code_target.code.append(line.strip())
            blank_before = False
            continue
        heading = _HEADING.match(line)
        if heading:
            close()
            level = len(heading.group(1))
            while headings and headings[-1][0] >= level:
                headings.pop()
            headings.append((level, heading.group(2)))
            blank_before = True
            continue
        if not line.strip():
            if current is not None and current.kind != "item":
                close()
            blank_before = True
            continue
        item = _ITEM.match(line)
        if item and (len(item.group(1)) < 2 or current is None or current.kind != "item"):
            close()
            current = _Block("item", number, [item.group(2)], heading_path())
        elif line.lstrip().startswith("|"):
            if current is None or current.kind != "table":
                close()
                current = _Block("table", number, [], heading_path())
            current.lines.append(line.strip())
        elif (
            current is not None
            and current.kind == "item"
            and blank_before
            and not raw[:1].isspace()
        ):
            close()
            current = _Block("para", number, [line.strip()], heading_path())
        elif current is not None:
            current.lines.append(line.strip() if current.kind != "item" else line)
        else:
            current = _Block("para", number, [line.strip()], heading_path())
        blank_before = False
    close()
    return _closed_code(blocks)


def _code_target(current: _Block | None, blocks: list[_Block], blank_before: bool) -> _Block | None:
    """The piece a fenced block opening here belongs with: the one just before it."""
    before = current if current is not None else (blocks[-1] if blocks else None)
    if before is None or before.kind == "code":
        return None
    if blank_before and not "\n".join(before.lines).rstrip().endswith(":"):
        return None
    return before


def _closed_code(blocks: list[_Block]) -> list[_Block]:
    """Each block with its code, but a code block too long to go with a rule stands apart."""
    result: list[_Block] = []
    for block in blocks:
        if block.kind != "code" and len("\n".join(block.code)) > MAX_ATTACHED_CODE_CHARS:
            result.append(block)
            result.append(_Block("code", block.line, [], block.headings, block.code))
            block.code = []
            continue
        result.append(block)
    return result


# ------------------------------------------------------------------------- classifying


@dataclass(frozen=True)
class Vocabulary:
    """What names each action: its commands (from the table's shapes) and phrases."""

    commands: tuple[tuple[str, re.Pattern[str], str], ...]  # (action, pattern, shown)
    phrases: tuple[tuple[str, re.Pattern[str], str], ...]
    headings: tuple[tuple[str, re.Pattern[str]], ...]
    names: frozenset[str]


def vocabulary(table: ActionTable) -> Vocabulary:
    """The words of `table`'s actions: `git push`, `gh pr create`, `npm install`..."""
    names = frozenset(action.name for action in table.actions())
    commands: list[tuple[str, re.Pattern[str], str]] = []
    for action in table.actions():
        shown_seen: set[str] = set()
        for shape in action.shapes:
            first = shape.subcommand[0] if shape.subcommand else None
            words = [shape.program]
            if isinstance(first, str):
                words.append(first)
            elif first:
                words.append(first[0])
            if len(words) < 2 or shape.add_on:  # a bare program names no action
                continue
            shown = " ".join(words)
            if shown in shown_seen:
                continue
            shown_seen.add(shown)
            rest = shape.subcommand[1:2]
            if rest and isinstance(rest[0], str):
                shown = f"{shown} {rest[0]}"
            pattern = r"(?<![\w-])" + r"\s+".join(map(re.escape, shown.split())) + r"(?![\w-])"
            commands.append((action.name, re.compile(pattern), shown))
        # A user's own action is named by its name ("my-deploy").
        if action.source != "built-in" and "-" in action.name:
            commands.append(
                (action.name, re.compile(rf"\b{re.escape(action.name)}\b"), action.name)
            )
    # Longer commands first: `git push --force` before `git push`.
    commands.sort(key=lambda item: -len(item[2]))
    phrases = tuple(
        (name, _compiled(pattern), shown)
        for name, pattern, shown in ACTION_PHRASES
        if name in names
    )
    headings = tuple((name, _compiled(pattern)) for name, pattern in HEADING_WORDS if name in names)
    return Vocabulary(tuple(commands), phrases, headings, names)


def _compiled(pattern: str) -> re.Pattern[str]:
    """A phrase's pattern, case-insensitive unless it spells an abbreviation (`PR`) itself."""
    return re.compile(pattern if "(?i:" in pattern else f"(?i:{pattern})")


@dataclass
class PinnedRoom:
    """How much the pinned cap still takes: rules and characters."""

    rules: int
    chars: int

    def take(self, text: str) -> bool:
        if self.rules <= 0 or len(text) > self.chars:
            return False
        self.rules -= 1
        self.chars -= len(text)
        return True


def path_action_name(file: str, globs: Sequence[str], names: Iterable[str] = ()) -> str:
    """The `edit-NAME` action a path-scoped file's rules are for, named by the file."""
    stem = file.rsplit("/", 1)[-1].lower()
    for suffix in (".instructions.md", ".mdc", ".md"):
        stem = stem.removesuffix(suffix)
    slug = re.sub(r"[^a-z0-9]+", "-", stem).strip("-")[:40] or "files"
    name = f"edit-{slug}"
    if name in set(names):
        digest = hashlib.sha256("\x00".join(globs).encode()).hexdigest()[:4]
        name = f"{name}-{digest}"
    return name


def classify(  # noqa: PLR0913 - a piece and what its file says
    piece: Piece,
    vocab: Vocabulary,
    room: PinnedRoom,
    *,
    globs: Sequence[str] = (),
    always: bool = False,
    path_action: str = "",
) -> Proposal:
    """Where `piece` goes, and why (see the module docstring)."""
    text = piece.text
    words = len(_WORD.findall(text))
    if piece.code_only:
        return Proposal(piece, "skip", "a code block on its own")
    if piece.leads:
        return Proposal(piece, "skip", "leads into the list below (its items carry it)")
    if len(text) > MAX_PIECE_CHARS:
        return Proposal(
            piece, "skip", f"{len(text)} characters: too long for one rule; split it in the file"
        )
    if words < MIN_WORDS:
        return Proposal(piece, "skip", f"{words} word{'s' if words != 1 else ''}: too short")
    if _ABOUT_FILE.search(text):
        return Proposal(piece, "skip", "about the file itself")
    if globs:
        return Proposal(
            piece,
            "path",
            f"the file applies to {', '.join(globs[:3])}{', ...' if len(globs) > 3 else ''}",
            actions=(path_action,),
            paths=tuple(globs),
        )
    actions, reason = _actions_named(text, vocab)
    if not actions and (piece.lead_in or piece.item or _DIRECTIVE.search(text)):
        for title in reversed(piece.headings):
            actions = tuple(name for name, pattern in vocab.headings if pattern.search(title))[:1]
            if actions:
                reason = f"heading {title[:40]!r}"
                break
    if actions:
        return Proposal(piece, "action", reason, actions=actions)
    general = always or (
        len(text) <= PINNED_MAX_CHARS and "`" not in text and bool(_GENERAL.match(_bare(text)))
    )
    if general and len(text) <= PINNED_MAX_CHARS:
        if room.take(text):
            why = "the file applies always" if always else "short and general"
            return Proposal(piece, "pinned", why)
        return Proposal(piece, "fact", "short and general, but the pinned cap is full")
    return Proposal(piece, "fact", "names no action: recalled by topic")


def _bare(text: str) -> str:
    """The piece's text without its lead-in, emphasis and a leading label (`**Style**:`)."""
    text = text.replace("**", "").replace("__", "").lstrip("*_ ")
    return re.sub(r"^[\w ]{1,30}:\s+", "", text)


def _actions_named(text: str, vocab: Vocabulary) -> tuple[tuple[str, ...], str]:
    """The actions the text names (at most 3, in the order found) and the first reason."""
    found: dict[str, tuple[int, str]] = {}
    for name, pattern, shown in vocab.commands:
        match = pattern.search(text)
        if match and name not in found:
            found[name] = (match.start(), f"mentions `{shown}`")
    directive = bool(_DIRECTIVE.search(text))
    for name, pattern, shown in vocab.phrases:
        match = pattern.search(text)
        if match and shown in WEAK_PHRASES and not directive:
            continue
        if match and name not in found:
            found[name] = (match.start(), f"mentions {shown!r}")
    if "git-push-force" in found:
        found.pop("git-push", None)
    weak = found.get("git-commit")
    if weak is not None and weak[1] == "mentions 'commit'" and len(found) > 1:
        found.pop("git-commit")
    ordered = sorted(found.items(), key=lambda item: item[1][0])[:3]
    if not ordered:
        return (), ""
    return tuple(name for name, _ in ordered), ordered[0][1][1]


# ----------------------------------------------------------------------------- checks

_CONVENTIONAL = r"^(feat|fix|docs|style|refactor|perf|test|build|ci|chore|revert)(\(.+\))?!?: "
_LIMIT = re.compile(
    r"(?:at most|no (?:more|longer) than|max(?:imum)?(?: of)?|under|less than|fewer than|"
    r"up to|within|<=?|≤)\s*(\d{2,3})\s*(?:characters|chars|char\b|columns)",
    re.IGNORECASE,
)
_LIMIT_AFTER = re.compile(
    r"(\d{2,3})[- ](?:characters?|chars?)\s+(?:max(?:imum)?|limit)", re.IGNORECASE
)
_NO_EMOJI = re.compile(
    r"\b(?:no|never|without|avoid|don't|do not)\b[^.\n]{0,30}\bemojis?\b|\bemoji-free\b",
    re.IGNORECASE,
)
_SINGLE_LINE = re.compile(r"\b(?:single|one)[- ]line\b", re.IGNORECASE)
_NO_VERIFY = re.compile(r"--no-verify")
_NEGATED = re.compile(r"\b(?:never|do not|don't|must not|avoid|no)\b", re.IGNORECASE)
_COAUTHOR = re.compile(r"co-authored-by", re.IGNORECASE)
_TITLE_WORDS = re.compile(
    r"\b(?:subject|summary|title|first line|header|headline)\b", re.IGNORECASE
)


def propose_checks(proposal: Proposal) -> tuple[str, ...]:
    """The checks `proposal`'s text states, for the fields its actions have."""
    from mented.fields import FIELDS  # noqa: PLC0415 - the fields' table: only with actions

    if proposal.to != "action":
        return ()
    text = proposal.piece.text
    checks: list[str] = []
    for action in proposal.actions:
        fields = FIELDS.get(action, ())
        title = "subject" if "subject" in fields else "title" if "title" in fields else None
        limit = _LIMIT.search(text) or _LIMIT_AFTER.search(text)
        if limit and title:
            field_name = title
            if (
                "body" in fields
                and re.search(r"\bbody\b|wrap", text, re.IGNORECASE)
                and not _TITLE_WORDS.search(text)
            ):
                field_name = "body"
            checks.append(f"{field_name} max {int(limit.group(1))}")
        if title and re.search(
            r"conventional commits?|conventional[- ]prefix", text, re.IGNORECASE
        ):
            checks.append(f"{title} matches {_CONVENTIONAL}")
        if _NO_EMOJI.search(text):
            checks.extend(f"{name} no-emoji" for name in ("message", "title") if name in fields)
        if "message" in fields and _SINGLE_LINE.search(text) and not _TITLE_WORDS.search(text):
            checks.append("message single-line")
        if "flags" in fields and _NO_VERIFY.search(text) and _NEGATED.search(text):
            checks.append("flags forbid --no-verify")
        if "message" in fields and _COAUTHOR.search(text) and _NEGATED.search(text):
            checks.append("message not-matches (?i)co-authored-by")
    return tuple(dict.fromkeys(checks))


# ----------------------------------------------------------------------------- planning


def adopted_from_tags(memory_id: str, tags: Iterable[str], text: str) -> Adopted | None:
    """The adoption record of a stored memory, from its tags (None: it was not adopted)."""
    digest = slot = file = ""
    line = 0
    for tag in tags:
        if tag.startswith(ADOPTED_TAG):
            digest = tag[len(ADOPTED_TAG) :]
        elif tag.startswith(SLOT_TAG):
            slot = tag[len(SLOT_TAG) :]
        elif tag.startswith(FROM_TAG):
            file, _, number = tag[len(FROM_TAG) :].rpartition(":")
            line = int(number) if number.isdigit() else 0
    if not digest:
        return None
    return Adopted(memory_id, digest, slot, file, line, text)


def source_tags(piece: Piece) -> list[str]:
    """The tags that record where an adopted rule comes from (see `adopted_from_tags`)."""
    origin = f"{FROM_TAG}{piece.file}:{piece.line}"
    if len(origin) > MAX_TAG_CHARS:  # a very deep path: keep its end, which names the file
        origin = FROM_TAG + "..." + origin[-(MAX_TAG_CHARS - len(FROM_TAG) - 3) :]
    return [f"{ADOPTED_TAG}{piece.digest}", f"{SLOT_TAG}{piece.slot}", origin]


def plan(proposals: Sequence[Proposal], existing: Sequence[Adopted], files: Iterable[str]) -> Plan:
    """What accepting `proposals` changes, given the rules adopted before from `files`."""
    read = set(files)
    mine = [item for item in existing if item.file in read]
    by_digest: dict[tuple[str, str], Adopted] = {(a.file, a.digest): a for a in mine}
    by_slot: dict[tuple[str, str], Adopted] = {(a.file, a.slot): a for a in mine}
    claimed: set[str] = set()
    result = Plan()
    for proposal in proposals:
        piece = proposal.piece
        if proposal.to == "skip":
            result.items.append(Planned(proposal, "skip"))
            continue
        same = by_digest.get((piece.file, piece.digest))
        if same is not None and same.id not in claimed:
            claimed.add(same.id)
            result.items.append(Planned(proposal, "unchanged", same.id))
            continue
        there = by_slot.get((piece.file, piece.slot))
        if there is not None and there.id not in claimed:
            claimed.add(there.id)
            result.items.append(Planned(proposal, "supersede", there.id))
            continue
        result.items.append(Planned(proposal, "add"))
    result.removed = [item for item in mine if item.id not in claimed]
    return result
