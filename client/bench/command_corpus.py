"""`python -m mented_client.bench commands TLDR_DIR`: the action table against real examples.

The corpus is the tldr pages (https://github.com/tldr-pages/tldr, CC BY 4.0): command
examples written by others, each under a one-line description. Every example on the
pages of the programs the table knows (git, gh, kubectl, npm, ...) is labelled with the
actions it performs *from its page and description alone* (`RULES` below: "Push ..." on
a git page is a push), never from what mented says. Where the labels and mented
disagreed, a person read the description and decided; those decisions are kept in
`command_corpus_reviewed.json`, keyed by a digest of the page and the example (the
examples themselves are not copied here). Placeholders that read as shell syntax
(`{{dev|production}}` becomes a pipeline) are left out.

It prints, per program, how many examples perform an action, and the table's recall
(examples that perform one and get one) and precision (examples given an action that
perform one), and the share whose actions are exactly right. docs/actions.md has the
figures, before and after a change to the table.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from mented.actions import load_action_table
from mented.config import Config
from mented.matcher import Matcher

if TYPE_CHECKING:
    from collections.abc import Sequence

_PROGRAM_WORDS = (
    "git gh glab hub docker docker-compose podman kubectl helm helmfile terraform tofu "
    "terragrunt pulumi npm yarn pnpm bun pip pip3 pipx uv poetry twine cargo gem go bundle "
    "composer conda mamba deno crane skopeo jj gt tea lerna mvn gradle pipenv"
)
PROGRAMS = _PROGRAM_WORDS.split()
_PAGE = re.compile(r"(" + "|".join(map(re.escape, PROGRAMS)) + r")(-[a-z0-9-]+)?")
_CHOICE = re.compile(r"\{\{\[([^|\]]*)\|[^\]]*\]\}\}")  # {{[-m|--message]}}: the first
_PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}")  # {{path/to/file}}: its words
_SHELL_LIKE = ("|server|", "|production|", "|tag|rev")  # alternatives a shell would run


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


_LOOKS_ONLY = _rx(
    r"\b(list|show|display|print|view|dry[- ]run|help|check whether|inspect|search|status|"
    r"preview|diff|simulate|without (actually )?(installing|applying|publishing|pushing|"
    r"committing)|abort|cancel|quit|outdated|version of|info)\b"
)
# (action, the pages it can be on, a description saying it is done, one saying it is not)
RULES: tuple[tuple[str, re.Pattern[str], re.Pattern[str], re.Pattern[str] | None], ...] = (
    (
        "git-commit",
        _rx(
            r"^(git-commit|git-am|git-cherry-pick|git-revert|hub-commit|git-squash|"
            r"git-release|git-magic|jj-commit|jj-describe|npm-version|bun-pm-version|gt|git|hub|jj)$"
        ),
        _rx(
            r"\b(commit (the )?(staged|all|files|changes|with)|create (a |an )?(new )?commit|"
            r"make a commit|amend|commits? .*(message|staged)|record changes|apply (a |the )?"
            r"(patch|commits?)|cherry-pick|revert|reword|squash .* into|release|(bump|increment|"
            r"set) .*version|describe|commit)\b"
        ),
        None,
    ),
    (
        "git-push",
        _rx(
            r"^(git-push|git-subtree|git-svn|git-flow|jj-git-push|jj-git|git-release|"
            r"git-magic|git-create-branch|gt|hub|git)$"
        ),
        _rx(r"\b(push|publish|submit|dcommit|send .* to (the )?remote)\b"),
        _rx(r"\bpull\b(?! request)"),
    ),
    (
        "git-push-force",
        _rx(r"^(git-push|git-delete-branch|git-delete-tag|git)$"),
        _rx(r"\b(force|delete .* remote|remote .* delete|mirror|prune)\b"),
        None,
    ),
    (
        "git-merge",
        _rx(
            r"^(git-merge|git-merge-into|git-feature|git-flow|git-subtree|git-pull|"
            r"git-graft|git)$"
        ),
        _rx(r"\b(merge|finish|graft)\b"),
        _rx(r"\b(abort|merge base|merge-base|list|branches that)\b"),
    ),
    (
        "git-rebase",
        _rx(r"^(git-rebase|git-pull|git-svn|git-p4|git-psykorebase|jj-rebase|git)$"),
        _rx(r"\brebase|\breapply\b"),
        _rx(r"\babort\b"),
    ),
    (
        "git-tag",
        _rx(
            r"^(git-tag|git-release|git-flow|npm-version|bun-pm-version|jj-tag-set|"
            r"jj-tag)$"
        ),
        _rx(r"\b(create|tag|release|bump|version)\b"),
        _rx(r"\b(list|delete|verify|remove)\b"),
    ),
    (
        "git-branch-create",
        _rx(
            r"^(git-branch|git-checkout|git-switch|git-create-branch|"
            r"git-feature|git-flow|git-worktree|git-subtree|jj-bookmark|hub-branch|gt|git-fresh-branch)$"
        ),
        _rx(r"\b(create|new branch|start|fresh branch)\b"),
        _rx(r"\b(list|delete|remove|rename|switch to an existing)\b"),
    ),
    (
        "pr-create",
        _rx(
            r"^(gh-pr|gh-pr-create|glab-mr|glab-mr-create|hub|git-pull-request|git-pr|"
            r"git-mr|tea|gt|gh-api|gh)$"
        ),
        _rx(
            r"\b(create|open|submit) .*(pull|merge) request|\bpull request\b.*\bcreate\b|"
            r"^create a (pull|merge) request"
        ),
        None,
    ),
    (
        "pr-merge",
        _rx(r"^(gh-pr|gh-pr-merge|glab-mr|glab-mr-merge|tea|gh)$"),
        _rx(r"\bmerge\b.*\b(pull|merge) request|\bmerge the (pr|mr)\b|^merge\b"),
        _rx(r"\b(list|view|check)\b"),
    ),
    (
        "release-create",
        _rx(r"^(gh-release|glab-release|tea|gh)$"),
        _rx(r"\bcreate\b.*\brelease\b|\brelease\b.*\bcreate\b|^create a (new )?release"),
        None,
    ),
    (
        "issue-create",
        _rx(r"^(gh-issue|gh-issue-create|glab-issue|hub-issue|tea|gh)$"),
        _rx(r"\b(create|open|new)\b.*\bissue\b"),
        _rx(r"\b(list|view|close|reopen)\b"),
    ),
    (
        "package-install",
        _rx(
            r"^(npm|npm-install|npm-ci|npm-update|npm-audit|npm-it|"
            r"npm-install-test|npm-install-ci-test|pnpm|yarn|pip|pip3|pip-install|pipx|uv|uv-add|"
            r"uv-sync|uv-pip|uv-tool|poetry|poetry-add|poetry-install|poetry-update|poetry-sync|"
            r"poetry-self|cargo|cargo-add|cargo-install|cargo-update|cargo-binstall|go-get|go-install|"
            r"go|gem|bundle|bun|bun-add|bun-install|bun-i|bun-update|composer|conda|conda-install|"
            r"conda-create|conda-update|mamba|deno|pipenv|pulumi-install|pulumi-plugin|gh-extension)$"
        ),
        _rx(
            r"\b(install|add|upgrade|update|sync|require)\b.*\b(package|dependenc|module|librar|"
            r"crate|gem|extension|plugin|tool|binar|application|requirement|environment|version|"
            r"lock|project)|\binstall\b|\badd (a |the )?dependenc|\bupgrade\b|\bupdate (all|the|a)?"
            r"\s*(installed|outdated)?\s*(package|dependenc|gem|module)"
        ),
        _rx(
            r"\b(uninstall|remove|list|show|search|dry|outdated|locate|lockfile only)\b|"
            r"\b(python|interpreter) version|install(ed)? (python|shell completion)"
        ),
    ),
    (
        "package-publish",
        _rx(
            r"^(npm-publish|npm|pnpm|yarn|cargo-publish|cargo|twine|"
            r"poetry-publish|poetry|uv-publish|uv|gem|bun-publish|bun|lerna|mvn-deploy|mvn|gradle)$"
        ),
        _rx(r"\b(publish|upload|deploy|push .* (gem|package)|release)\b"),
        _rx(r"\b(dry|unpublish|list|test pypi? *without)\b"),
    ),
    (
        "docker-push",
        _rx(
            r"^(docker|docker-image|podman|podman-image|docker-compose|crane-push|"
            r"crane-copy|crane-cp|crane|skopeo|docker-buildx.*)$"
        ),
        _rx(r"\bpush|\bcopy .* (to|between) (a |the )?registr|\bupload .* registr"),
        _rx(r"\bpull\b"),
    ),
    (
        "infra-deploy",
        _rx(
            r"^(terraform.*|tofu.*|terragrunt|kubectl.*|helm.*|helmfile|pulumi.*|"
            r"docker-service|docker-stack)$"
        ),
        _rx(
            r"\b(apply|destroy|deploy|install|upgrade|uninstall|rollback|roll back|create|delete|"
            r"replace|patch|scale|edit|expose|run|autoscale|label|annotate|cordon|uncordon|drain|"
            r"taint|set|update|import|restart|undo|pause|resume|remove|up)\b"
        ),
        _rx(
            r"\b(list|show|get|describe|view|dry[- ]run|status|plan|preview|diff|history|validate|"
            r"format|init|output|lint|template|search|explain|logs?|watch|print|version|login|"
            r"logout|config|completion|untaint)\b"
        ),
    ),
    (
        "discard-changes",
        _rx(
            r"^(git-reset|git-clean|git-checkout|git-restore|git-stash|"
            r"git-checkout-index|git-sync|git-undo|git-clear|git-clear-soft|git-reset-file|git)$"
        ),
        _rx(
            r"\b(discard|throw away|remove untracked|delete untracked|reset .* (hard|working)|"
            r"revert .* (changes|files?) to|restore|drop|clear|overwrite|undo .* changes|"
            r"sync .* remote)\b"
        ),
        _rx(r"\b(dry|interactive(ly)? .* show|list|staged only|unstage)\b"),
    ),
)
_ALWAYS_LOOKED_AT = frozenset({"git-push-force", "infra-deploy"})


@dataclass(frozen=True)
class Example:
    page: str
    description: str
    command: str

    @property
    def program(self) -> str:
        return self.page.split("-", 1)[0] if self.page != "docker-compose" else self.page

    @property
    def key(self) -> str:
        return hashlib.sha1(f"{self.page}\0{self.command}".encode()).hexdigest()[:12]  # noqa: S324 - a name, not a secret


def examples(tldr: Path) -> list[Example]:
    """Every example on the pages of the programs the table knows, placeholders filled."""
    found = []
    for folder in ("common", "linux"):
        for page in sorted((tldr / "pages" / folder).glob("*.md")):
            if not _PAGE.fullmatch(page.stem):
                continue
            description = ""
            for line in page.read_text(encoding="utf-8").splitlines():
                if line.startswith("- "):
                    description = line[2:].rstrip(":")
                elif line.startswith("`") and line.endswith("`") and description:
                    command = _PLACEHOLDER.sub(r"\1", _CHOICE.sub(r"\1", line[1:-1]))
                    found.append(Example(page.stem, description, command))
                    description = ""
    return found


def label(example: Example) -> list[str]:
    """The actions an example performs, from its page and description alone."""
    actions = []
    for action, pages, done, not_done in RULES:
        if not pages.search(example.page) or not done.search(example.description):
            continue
        if not_done is not None and not_done.search(example.description):
            continue
        if action not in _ALWAYS_LOOKED_AT and _LOOKS_ONLY.search(example.description):
            continue
        actions.append(action)
    return actions


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mented_client.bench commands", description=__doc__.splitlines()[0]
    )
    parser.add_argument("tldr", type=Path, help="a checkout of tldr-pages/tldr")
    parser.add_argument("--json", action="store_true", help="the figures as JSON")
    args = parser.parse_args(argv)
    reviewed_text = (
        resources.files("mented_client.bench")
        .joinpath("command_corpus_reviewed.json")
        .read_text(encoding="utf-8")
    )
    reviewed: dict[str, list[str] | None] = json.loads(reviewed_text)
    matcher = Matcher(load_action_table(Config()), cache_bytes=0)
    counts: dict[str, Counter[str]] = {}
    for example in examples(args.tldr):
        if any(marker in example.command for marker in _SHELL_LIKE):
            continue
        expected = reviewed.get(example.key, label(example))
        if expected is None:
            continue  # left out by the review
        named = set(matcher.actions_in(example.command))
        tally = counts.setdefault(example.program, Counter())
        tally["examples"] += 1
        tally["perform"] += bool(expected)
        tally["named"] += bool(named)
        tally["found"] += bool(expected) and bool(named)
        tally["exact"] += bool(expected) and named == set(expected)
        tally["false"] += not expected and bool(named)
    total: Counter[str] = sum(counts.values(), Counter())
    rows = {**dict(sorted(counts.items())), "all": total}
    if args.json:
        print(json.dumps({name: dict(tally) for name, tally in rows.items()}, indent=2))
        return 0
    print("| program | examples | perform an action | recall | precision | exact |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, tally in rows.items():
        if not tally["perform"] and not tally["named"]:
            continue
        recall = tally["found"] / tally["perform"] if tally["perform"] else 1.0
        precision = (tally["named"] - tally["false"]) / tally["named"] if tally["named"] else 1.0
        exact = tally["exact"] / tally["perform"] if tally["perform"] else 1.0
        print(
            f"| {name} | {tally['examples']} | {tally['perform']} | {recall:.0%} "
            f"| {precision:.0%} | {exact:.0%} |"
        )
    return 0
