"""`mentectl explain` and `mentectl actions`, called in-process."""

from __future__ import annotations

import io
import json
import socket
import subprocess
from pathlib import Path

import pytest

from mented.agents import AGENTS
from mented.protocol import StatusRequest, encode
from mented_client.cli import _socket_option, main, wake_the_daemon
from tests.conftest import PYTHON, DaemonProcess, isolated_env


@pytest.fixture
def no_daemon(tmp_path: Path) -> list[str]:
    """Global options pointing at a socket nobody listens on."""
    return ["--socket", str(tmp_path / "nobody.sock")]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        '[actions.deploy]\ndescription = "roll out"\n'
        'shapes = [{ program = "make", subcommand = ["deploy"] }]\n\n'
        "[actions.docker-push]\nenabled = false\n",
        encoding="utf-8",
    )
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_explain_shows_each_command_its_action_and_shape(
    capsys: pytest.CaptureFixture[str], no_daemon: list[str], tmp_path: Path
) -> None:
    status, out, _ = run(
        capsys,
        *no_daemon,
        "explain",
        "--config",
        str(tmp_path / "none.toml"),
        "cd r && sudo git push -f && echo 'gh pr create'",
    )
    assert status == 0
    assert out.startswith("actions: git-push, git-push-force\n")
    assert "-> git-push-force: git push (with one of -f" in out
    assert "via:     sudo" in out
    assert "no action: no action involves 'echo'" in out
    assert "the daemon is not running" in out


def test_explain_json(
    capsys: pytest.CaptureFixture[str], no_daemon: list[str], tmp_path: Path
) -> None:
    status, out, _ = run(
        capsys,
        *no_daemon,
        "explain",
        "--json",
        "--config",
        str(tmp_path / "none.toml"),
        "git commit -m x && gh pr create --fill",
    )
    assert status == 0
    document = json.loads(out)
    assert document["actions"] == ["git-commit", "pr-create"]
    assert document["parser"] == "bashlex"
    assert [c["program"] for c in document["commands"]] == ["git", "gh"]
    assert document["commands"][0]["matches"] == [
        {"action": "git-commit", "shape": "git commit (without --dry-run)"}
    ]
    assert document["daemon"] is False
    assert document["rules"] is None


def test_explain_words_after_double_dash(
    capsys: pytest.CaptureFixture[str], no_daemon: list[str], tmp_path: Path
) -> None:
    argv = [*no_daemon, "explain", "--json", "--config", str(tmp_path / "none.toml")]
    status, out, _ = run(capsys, *argv, "--", "git", "tag", "-a", "v1", "-m", "release")
    assert status == 0
    assert json.loads(out)["actions"] == ["git-tag"]


def test_explain_reads_standard_input(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    no_daemon: list[str],
    tmp_path: Path,
) -> None:
    command = "git commit -F - <<'EOF'\nfeat: x\n\nthen `gh pr create`\nEOF\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(command))
    argv = [*no_daemon, "explain", "--json", "--config", str(tmp_path / "none.toml"), "-"]
    status, out, _ = run(capsys, *argv)
    assert status == 0
    assert json.loads(out)["actions"] == ["git-commit"]


def test_explain_says_when_the_fallback_parser_was_used(
    capsys: pytest.CaptureFixture[str], no_daemon: list[str], tmp_path: Path
) -> None:
    argv = [*no_daemon, "explain", "--config", str(tmp_path / "none.toml")]
    status, out, _ = run(capsys, *argv, "case $1 in p) git push;; esac")
    assert status == 0
    assert "parser:  fallback" in out
    assert "note:    used the fallback tokenizer" in out


def test_explain_uses_the_config_file(
    capsys: pytest.CaptureFixture[str], no_daemon: list[str], config: Path
) -> None:
    argv = [*no_daemon, "explain", "--config", str(config)]
    status, out, _ = run(capsys, *argv, "make deploy && docker push app")
    assert status == 0
    assert out.startswith("actions: deploy\n")
    assert f"-> deploy (from {config}): make deploy" in out


def test_explain_reads_mented_config_from_the_environment(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    no_daemon: list[str],
    config: Path,
) -> None:
    monkeypatch.setenv("MENTED_CONFIG", str(config))
    status, out, _ = run(capsys, *no_daemon, "explain", "--json", "make deploy")
    assert status == 0
    assert json.loads(out)["actions"] == ["deploy"]


def test_explain_uses_the_config_of_the_running_daemon(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    short_tmp: Path,
    tmp_path: Path,
    config: Path,
) -> None:
    monkeypatch.setenv("MENTED_CONFIG", str(tmp_path / "none.toml"))  # no `deploy` here
    daemon = DaemonProcess(short_tmp)
    daemon.start("--config", str(config))
    try:
        argv = ["--socket", str(daemon.socket), "explain", "make deploy"]
        status, out, _ = run(capsys, *argv)
        assert status == 0
        assert f"-> deploy (from {config}): make deploy" in out
        # Named explicitly, a config file still wins over the daemon's.
        named = [*argv[:-1], "--config", str(tmp_path / "none.toml"), argv[-1]]
        status, out, _ = run(capsys, *named)
        assert out.startswith("actions: (none)\n")
        # `actions` lists the daemon's table too, and --json says a daemon answered.
        status, out, _ = run(capsys, "--socket", str(daemon.socket), "actions", "--json")
        assert "deploy" in [action["name"] for action in json.loads(out)["actions"]]
        status, out, _ = run(capsys, "--socket", str(daemon.socket), "explain", "--json", "ls")
        assert json.loads(out)["daemon"] is True
    finally:
        daemon.stop()
    status, out, _ = run(capsys, "--socket", str(daemon.socket), "explain", "--json", "ls")
    assert (json.loads(out)["daemon"], json.loads(out)["rules"]) == (False, None)


def test_a_bad_config_is_an_error_naming_file_and_line(
    capsys: pytest.CaptureFixture[str], no_daemon: list[str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[hook]\nk = 2\n[actions.deploy]\nshapes = [{ prog = "make" }]\n')
    status, out, err = run(capsys, *no_daemon, "explain", "--config", str(bad), "make deploy")
    assert status == 1
    assert out == ""
    assert f"{bad}:3:" in err
    assert "'deploy'" in err


def test_actions_lists_the_table_and_where_each_action_comes_from(
    capsys: pytest.CaptureFixture[str], config: Path
) -> None:
    status, out, _ = run(capsys, "actions", "--config", str(config))
    assert status == 0
    assert (
        "git-commit  [built-in]  record changes to the repository\n"
        "    git commit (without --dry-run)\n" in out
    )
    assert f"deploy  [{config}]  roll out\n    make deploy" in out
    assert f"docker-push  [switched off in {config}]" in out


def test_actions_json(capsys: pytest.CaptureFixture[str], config: Path) -> None:
    status, out, _ = run(capsys, "actions", "--json", "--config", str(config))
    assert status == 0
    document = json.loads(out)
    names = [action["name"] for action in document["actions"]]
    assert names[0] == "git-commit"
    assert names[-1] == "deploy"
    assert "docker-push" not in names
    assert document["disabled"] == [{"name": "docker-push", "source": str(config)}]
    deploy = document["actions"][-1]
    assert deploy["shapes"] == [{"shape": "make deploy", "source": str(config)}]


def test_explain_shows_the_rules_a_running_daemon_would_hand_over(
    capsys: pytest.CaptureFixture[str], daemon: DaemonProcess
) -> None:
    daemon.mentectl("rule", "add", "git-commit", "commit messages: one line, no emoji")
    argv = ["--socket", str(daemon.socket), "explain", "--config", str(daemon.config_path)]
    status, out, _ = run(capsys, *argv, "git commit -m 'fix: x' && git status")
    assert status == 0
    assert "rules for git-commit: 1" in out
    assert "commit messages: one line, no emoji" in out

    status, out, _ = run(capsys, *argv[:-2], "--json", "--config", argv[-1], "git commit -m x")
    document = json.loads(out)
    assert document["daemon"] is True
    (rule,) = document["rules"]["git-commit"]
    assert rule["content"] == "commit messages: one line, no emoji"


def test_explain_shows_the_rules_of_one_agent_in_one_directory(
    capsys: pytest.CaptureFixture[str], daemon: DaemonProcess, tmp_path: Path
) -> None:
    app = tmp_path / "app"
    app.mkdir()
    daemon.mentectl("rule", "add", "git-commit", "everyone's rule")
    daemon.mentectl("rule", "add", "git-commit", "codex's rule", "--agent", "codex")
    daemon.mentectl("rule", "add", "git-commit", "app's rule", "--project", str(app))
    argv = ["--socket", str(daemon.socket), "explain", "--config", str(daemon.config_path)]

    def shown(*options: str) -> list[str]:
        status, out, _ = run(capsys, *argv, *options, "--json", "git commit -m x")
        assert status == 0
        return [rule["content"] for rule in json.loads(out)["rules"]["git-commit"]]

    assert shown("--cwd", str(tmp_path)) == ["everyone's rule"]  # claude-code by default
    assert shown("--agent", "codex", "--cwd", str(tmp_path)) == ["codex's rule", "everyone's rule"]
    assert shown("--cwd", str(app / "src")) == ["app's rule", "everyone's rule"]

    _, out, _ = run(capsys, *argv, "--agent", "codex", "--cwd", str(app), "git commit -m x")
    assert f"as the hook hands them to codex running the command in {app}:" in out
    assert "rules for git-commit: 3" in out


def test_explain_refuses_an_unknown_agent(
    capsys: pytest.CaptureFixture[str], no_daemon: list[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*no_daemon, "explain", "--agent", "claude", "git commit"])
    assert exited.value.code == 2
    assert "unknown agent 'claude'" in capsys.readouterr().err


def test_actions_shows_what_the_config_file_says_with_control_characters_escaped(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[actions.deploy]\ndescription = "roll out\\u001b]52;c;aGk=\\u0007\\u202e now"\n'
        'shapes = [{ program = "make", subcommand = ["deploy"] }]\n',
        encoding="utf-8",
    )
    status, out, _ = run(capsys, "actions", "--config", str(config))
    assert status == 0
    assert f"deploy  [{config}]  roll out\\x1b]52;c;aGk=\\x07\\u202e now\n" in out
    status, out, _ = run(capsys, "actions", "--json", "--config", str(config))
    assert json.loads(out)["actions"][-1]["description"] == "roll out\x1b]52;c;aGk=\x07\u202e now"
    assert "\x1b" not in out


# ---------------------------------------------------------- tool calls and triggers


@pytest.fixture
def triggers(tmp_path: Path) -> Path:
    path = tmp_path / "triggers.toml"
    path.write_text(
        '[actions.db-migration]\npaths = ["**/migrations/**"]\n\n'
        '[actions.pr-create]\ntools = ["gitea/open_pr"]\n',
        encoding="utf-8",
    )
    return path


def test_explain_a_file_edit_names_the_action_and_its_pattern(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, triggers: Path, no_daemon: list[str]
) -> None:
    (tmp_path / ".git").mkdir()
    argv = [*no_daemon, "explain", "--config", str(triggers), "--cwd", str(tmp_path)]
    status, out, _ = run(capsys, *argv, "--tool", "Edit", "--path", "db/migrations/0042_x.sql")
    assert status == 0
    assert out.startswith("actions: db-migration\n")
    assert "-> db-migration: file edit **/migrations/** (db/migrations/0042_x.sql)" in out
    status, out, _ = run(capsys, *argv, "--tool", "Edit", "--path", "src/app.py")
    assert out.startswith("actions: (none)\n")
    # Codex writes files with apply_patch: the same table, its own tool.
    status, out, _ = run(
        capsys, *argv, "--agent", "codex", "--tool", "apply_patch", "--path", "x/migrations/1.sql"
    )
    assert out.startswith("actions: db-migration\n")


def test_explain_an_mcp_tool_names_the_action_and_its_glob(
    capsys: pytest.CaptureFixture[str], triggers: Path, no_daemon: list[str]
) -> None:
    argv = [*no_daemon, "explain", "--config", str(triggers), "--tool"]
    status, out, _ = run(capsys, *argv, "mcp__github__create_pull_request", "--json")
    assert status == 0
    document = json.loads(out)
    assert document["actions"] == ["pr-create"]
    assert document["matches"] == [
        {"action": "pr-create", "trigger": "MCP tool */create_pull_request"}
    ]
    _, out, _ = run(capsys, *argv, "mcp__gitea__open_pr")
    assert "-> pr-create: MCP tool gitea/open_pr" in out
    _, out, _ = run(capsys, *argv, "Read")
    assert "no action: Claude Code sends no call of 'Read'" in out


def test_actions_shows_every_trigger(capsys: pytest.CaptureFixture[str], triggers: Path) -> None:
    status, out, _ = run(capsys, "actions", "--config", str(triggers))
    assert status == 0
    assert "    hub pull-request\n" in out
    assert "    MCP tool */create_pull_request\n" in out
    assert "    MCP tool gitea/open_pr\n" in out
    assert f"db-migration  [{triggers}]\n    file edit **/migrations/**" in out
    _, out, _ = run(capsys, "actions", "--json", "--config", str(triggers))
    migration = json.loads(out)["actions"][-1]
    assert migration["triggers"] == ["file edit **/migrations/**"]


def test_explain_wakes_a_daemon_started_on_demand_before_it_asks(short_tmp: Path) -> None:
    # The test holds the socket as a service manager does (socket activation): the
    # first connection is the wake-up, with nothing on it; then come the questions.
    path = short_tmp / "on-demand.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen()
        listener.settimeout(60)
        process = subprocess.Popen(
            [PYTHON, "-m", "mented_client.cli", "explain", "--socket", str(path), "git", "push"],
            env=isolated_env(short_tmp),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            woken, _ = listener.accept()
            with woken:
                woken.settimeout(60)
                assert woken.recv(64) == b""  # connected and closed: nothing asked
            asking, _ = listener.accept()
            with asking:
                asking.settimeout(60)
                assert asking.recv(64).startswith(encode(StatusRequest()))
        finally:
            process.kill()
            process.wait()


def test_the_wake_up_goes_to_the_socket_asked_for(short_tmp: Path) -> None:
    assert _socket_option(["explain", "--socket", "/a", "git", "--socket=/b", "x"]) == "/b"
    assert _socket_option(["--socket", "/a", "explain", "--", "--socket", "/c"]) == "/a"
    assert _socket_option(["explain", "git", "push"]) is None
    wake_the_daemon(str(short_tmp / "nothing-listens.sock"))  # no error: nothing to wake


# Each file-writing tool of each agent, by the agent's own name for it.
EDIT_TOOLS = [(name, tool) for name in AGENTS for tool in AGENTS[name].file_edit_tools()]


@pytest.fixture
def in_a_repo(tmp_path: Path, triggers: Path, no_daemon: list[str]) -> list[str]:
    """`explain` with the triggers, as if run at the top of a repository."""
    (tmp_path / ".git").mkdir()
    return [*no_daemon, "explain", "--config", str(triggers), "--cwd", str(tmp_path)]


@pytest.mark.parametrize(("agent", "tool"), EDIT_TOOLS)
def test_explain_a_file_edit_by_every_agents_own_tool(
    capsys: pytest.CaptureFixture[str], in_a_repo: list[str], agent: str, tool: str
) -> None:
    argv = in_a_repo
    status, out, _ = run(capsys, *argv, "--agent", agent, "--tool", tool, "--path", "db/m/1.sql")
    assert status == 0
    assert out.startswith("actions: (none)\nfile edit: db/m/1.sql\n")
    _, out, _ = run(
        capsys, *argv, "--agent", agent, "--tool", tool, "--path", "db/migrations/1.sql"
    )
    assert out.startswith("actions: db-migration\n"), out
    assert "-> db-migration: file edit **/migrations/** (db/migrations/1.sql)" in out


@pytest.mark.parametrize(
    ("agent", "tool"),
    [
        ("claude-code", "mcp__gitea__open_pr"),
        ("gemini-cli", "mcp_gitea_open_pr"),
        ("opencode", "gitea_open_pr"),
        ("kilo", "gitea_open_pr"),
        ("kiro-cli", "@gitea/open_pr"),
        ("crush", "mcp_gitea_open_pr"),
    ],
)
def test_explain_an_mcp_tool_by_the_agents_own_name_for_it(
    capsys: pytest.CaptureFixture[str], triggers: Path, no_daemon: list[str], agent: str, tool: str
) -> None:
    argv = [*no_daemon, "explain", "--config", str(triggers), "--agent", agent, "--tool", tool]
    status, out, _ = run(capsys, *argv)
    assert status == 0
    assert out.startswith("actions: pr-create\nMCP tool: gitea/open_pr\n"), out


def test_explain_an_mcp_tool_of_cursor_by_its_tool_name(
    capsys: pytest.CaptureFixture[str], triggers: Path, no_daemon: list[str]
) -> None:
    argv = [*no_daemon, "explain", "--config", str(triggers), "--agent", "cursor", "--tool"]
    _, out, _ = run(capsys, *argv, "create_pull_request")
    # Cursor's event names the tool, not its server.
    assert out.startswith("actions: pr-create\nMCP tool: /create_pull_request\n"), out


def test_explain_a_tool_pi_does_not_hand_over(
    capsys: pytest.CaptureFixture[str], triggers: Path, no_daemon: list[str]
) -> None:
    argv = [*no_daemon, "explain", "--config", str(triggers), "--agent", "pi", "--tool"]
    _, out, _ = run(capsys, *argv, "read", "--path", "db/migrations/1.sql")
    assert "no action: pi sends no call of 'read' mented looks at" in out
    _, out, _ = run(capsys, *argv, "edit")
    assert "no action: edit writes a file: give it with --path" in out


def _events_as_sent(repo: str) -> dict[str, tuple[str, bytes]]:
    """An edit of db/migrations/1.sql as each agent sends it to the hook (its plugin's,
    extension's or hook's own event), with the explain arguments for the same call."""
    path = f"{repo}/db/migrations/1.sql"
    return {
        "opencode": (
            "edit",
            json.dumps(
                {
                    "hook_event_name": "tool.execute.before",
                    "plugin": 1,
                    "session_id": "ses_oc",
                    "call_id": "call_oc",
                    "cwd": repo,
                    "tool": "edit",
                    "args": {"filePath": path, "oldString": "a", "newString": "b"},
                }
            ).encode(),
        ),
        "pi": (
            "write",
            json.dumps(
                {
                    "event": "tool_call",
                    "session_id": "ses_pi",
                    "cwd": repo,
                    "tool_name": "write",
                    "tool_call_id": "call_pi",
                    "input": {"path": path, "content": "create table x();"},
                }
            ).encode(),
        ),
        "gemini-cli": (
            "write_file",
            json.dumps(
                {
                    "session_id": "ses_gem",
                    "transcript_path": "",
                    "cwd": repo,
                    "hook_event_name": "BeforeTool",
                    "timestamp": "2026-01-01T00:00:00.000Z",
                    "tool_name": "write_file",
                    "tool_input": {"file_path": path, "content": "create table x();"},
                }
            ).encode(),
        ),
    }


def test_explain_names_the_rules_the_hook_of_each_agent_hands_over(
    capsys: pytest.CaptureFixture[str], short_tmp: Path, triggers: Path
) -> None:
    repo = short_tmp / "repo"
    (repo / ".git").mkdir(parents=True)
    daemon = DaemonProcess(short_tmp)
    daemon.config_path.write_text(triggers.read_text(encoding="utf-8"), encoding="utf-8")
    daemon.start()
    try:
        rule = "migrations: reviewed by the DBA first"
        daemon.mentectl("rule", "add", "db-migration", rule)
        daemon.mentectl("rule", "add", "db-migration", "codex only", "--agent", "codex")
        for agent, (tool, event) in _events_as_sent(str(repo)).items():
            argv = ["--socket", str(daemon.socket), "explain", "--json", "--agent", agent]
            argv += ["--tool", tool, "--path", "db/migrations/1.sql", "--cwd", str(repo)]
            status, out, _ = run(capsys, *argv)
            assert status == 0
            explained = json.loads(out)
            assert explained["actions"] == ["db-migration"], agent
            named = [memory["content"] for memory in explained["rules"]["db-migration"]]
            assert named == [rule], agent
            with daemon.client() as client:
                # The answer, as the agent reads it (a stop, the first time in a session).
                handed = client.hook(agent, event).decode()
            assert rule in handed, agent
            assert "codex only" not in handed, agent
    finally:
        daemon.stop()
