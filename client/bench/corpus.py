"""What the figures are measured with: commands as agents send them, rules, the agent's event.

The commands are real agent commands: most name no action, the rest are the ones
rules exist for (heredoc commits, PR bodies, wrapped and chained commands).
"""

from __future__ import annotations

from mented.agents.pretooluse import pretooluse_event

AGENT = "claude-code"
CWD = "/home/dev/src/webapp"
RULES_PER_REPLY = 6  # `k`, and the rules each probed action has at every size

HEREDOC_COMMIT = """git add mented/store.py tests/test_store.py && git commit -m "$(cat <<'EOF'
fix(store): grow the map before a bulk import fills it

Doubling on MapFullError retried the whole transaction for every batch.
Grow once up front from the batch size instead.

Co-Authored-By: Claude <noreply@anthropic.com>
EOF
)\""""

PR_BODY = "\n".join(
    [
        "## Summary",
        "",
        *(
            f"- {line}"
            for line in (
                "Grow the LMDB map before a bulk import instead of retrying on MapFullError.",
                "Import in batches of 20,000 memories, one durable transaction each.",
                "Report progress every tenth of the import on stderr.",
                "Keep the trigger index ordered newest first across batches.",
                "Refuse an import whose items name an unusable action, naming the item.",
            )
        ),
        "",
        "## Why",
        "",
        "Importing a million memories retried the whole transaction every time the map",
        "doubled, so the import took minutes instead of seconds and held the write lock",
        "the whole time. Hooks kept answering (reads do not wait for the writer), but",
        "`mentectl rule add` stalled behind the import.",
        "",
        "## Test plan",
        "",
        "- [x] `pytest tests/test_store.py -q`",
        "- [x] `mentectl bench --quick`: bulk import figure before and after",
        "- [x] imported a 1M-memory store, restarted the daemon, checked `mentectl status`",
        "- [ ] run the full benchmark on a quiet machine and update docs/benchmarks.md",
        "",
        "Closes #6. Follow-up: a streaming import from JSON lines (#17).",
    ]
)
LONG_PR_CREATE = (
    "git push -u origin HEAD && gh pr create --base main "
    "--title 'store: grow the map before a bulk import' "
    f"--body \"$(cat <<'EOF'\n{PR_BODY}\nEOF\n)\""
)

# Commands as agents send them: most name no action; the rest are the ones rules exist for.
CORPUS: tuple[str, ...] = (
    "ls -la",
    "git status",
    "git diff --stat",
    "git log --oneline -20",
    "cat src/app/main.py",
    "grep -rn 'def handle' src/ | head -20",
    "find . -name '*.py' -not -path './.venv/*' | xargs wc -l | sort -n | tail",
    "python -m pytest tests/test_store.py -q -x",
    "npm test -- --watch=false",
    "npm run build 2>&1 | tail -30",
    "cd frontend && npm run lint",
    "rg -n 'TODO|FIXME' --type py",
    "sed -n '120,180p' src/server.py",
    "ruff check . && mypy src",
    "docker compose ps",
    "curl -sS http://localhost:8080/health | jq .",
    "echo \"git commit -m 'not a commit'\"",
    "git config commit.gpgsign false",
    'for f in tests/*.py; do python -m pytest "$f" -q || break; done',
    "if [ -f package.json ]; then npm ci; fi",
    "make -j4 && ./build/app --version",
    "kubectl get pods -n staging -o wide",
    "tail -n 200 /var/log/app.log | grep -i error",
    "python - <<'PY'\nimport json, sys\nprint(json.load(open('package.json'))['version'])\nPY",
    "git add -A && git commit -m 'fix: handle empty config file'",
    'git commit -am "chore: bump version to 1.4.2"',
    "git -c commit.gpgsign=false commit -m 'wip'",
    "cd repo && git commit --amend --no-edit",
    HEREDOC_COMMIT,
    "git push origin HEAD",
    "git push --force-with-lease origin feature/login",
    "git checkout -b fix/login-timeout",
    "git switch -c feat/export-csv",
    "git rebase -i HEAD~3",
    "git merge --no-ff feature/login",
    "git tag -a v1.4.2 -m 'release 1.4.2'",
    "gh pr create --fill",
    "gh pr create --title 'Fix login timeout' --body \"$(cat <<'EOF'\n## Summary\n"
    '- raise the timeout\n\n## Test plan\n- [x] pytest\nEOF\n)"',
    "gh pr merge 42 --squash --delete-branch",
    "gh release create v1.4.2 --generate-notes",
    "npm install --save-dev vitest",
    "pip install -e '.[test]'",
    "uv pip install httpx",
    "cargo add serde --features derive",
    "npm publish --access public",
    "docker push ghcr.io/acme/webapp:1.4.2",
    "sudo -u deploy git push origin main",
    "bash -c 'cd /srv/app && git pull && git commit -am sync'",
    "git add . && git commit -m 'feat: csv export' && git push -u origin HEAD && "
    "gh pr create --fill",
    "timeout 60 npm ci && npm run build && npm test",
    LONG_PR_CREATE,
)

_RULE_TEXTS = (
    "Commit messages: a single line, a conventional prefix (fix:, feat:, chore:), no emoji.",
    "Never add a Co-Authored-By trailer or any mention of an AI assistant to a commit.",
    "Run the test suite (`make test`) and make sure it passes before committing.",
    "Keep the subject line under 72 characters and write it in the imperative mood.",
    "Do not commit generated files (dist/, *.lock changes) together with source changes.",
    "Reference the issue number at the end of the subject, e.g. `fix: login timeout (#42)`.",
    "Never force-push to main or release branches; use --force-with-lease on your own branch.",
    "Pull requests: fill in the template; link the issue; request review from @platform.",
)


def rule_text(number: int, action: str) -> str:
    return f"{_RULE_TEXTS[number % len(_RULE_TEXTS)]} (rule {number} for {action})"


def hook_event(command: str, tool_use_id: str, session: str | None = None) -> bytes:
    """A Claude Code PreToolUse event for a Bash command, as its hook reads it on stdin.

    Each event is a session of its own: the first matching command of a session
    is handed every rule (later ones get a one-line pointer), and that is the
    answer measured.
    """
    return pretooluse_event(
        command,
        cwd=CWD,
        session=session or f"bench-{tool_use_id}",
        tool_use_id=tool_use_id,
        # What Claude Code sends besides: the daemon reads past them, as it must.
        transcript_path="/home/dev/.claude/projects/webapp/bench.jsonl",
        permission_mode="default",
        tool_input={"command": command, "description": "benchmark command"},
    )
