"""The real Claude Code, Codex, Copilot CLI, Gemini CLI and Qwen Code, from npm, on the mock model.

`tests/test_real_agents.py` uses these helpers; they are opt-in (the `agents`
marker, enabled by `MENTED_AGENT_TESTS=1`, which `.ci/run` sets when `npm` is
there), because they download the agents (~650 MB on first use) and run them.

- `install`: the agent's npm package at the pinned version, in a cache outside
  the checkout (`${XDG_CACHE_HOME:-~/.cache}/mented-tests/agents/`), installed
  once into a temporary directory and renamed into place, so that an interrupted
  install is never mistaken for a finished one.
- `AgentSession`: an agent with `HOME` (and `CLAUDE_CONFIG_DIR` / `CODEX_HOME`)
  in the daemon's temporary directory and mented's hook installed the way a user
  does it (`mentectl hooks install <agent>`; for Codex also trusted, as its
  `/hooks` view would); `run` is one non-interactive session (`claude -p`,
  `codex exec`, `copilot -p`, `gemini -p`, `qwen -p`) in a fresh git repository, with the
  mock model as its model.
- `mented_texts`: what of a request's conversation came from mented: the items
  (a tool result, a context block, a developer message) that carry its text.

`python -m tests.real_agents` runs the measurement test and prints the figures
for docs/agents-e2e.md.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import msgspec
import pytest

from mented.agents import codex
from tests.conftest import AGENT_TESTS_ENV, DaemonProcess, run_mentectl
from tests.model_server import ModelServer, Turn, _strings

REPORT_ENV = "MENTED_AGENT_REPORT"
RUN_TIMEOUT_S = 120
# The shim's budget: a loaded machine must not turn a slow answer into silence here
# (the budget itself is tested in tests/test_shim.py).
HOOK_BUDGET_MS = "3000"
# Every text mented hands an agent names it ("from mented", "mented stopped ...").
MENTED_MARK = "mented"


@dataclass(frozen=True)
class NpmAgent:
    """An agent as npm ships it, at the version mented's hooks were checked with."""

    name: str  # the name mented knows it by (`mentectl hooks install NAME`)
    package: str
    version: str
    binary: str

    @property
    def cache_name(self) -> str:
        return f"{self.package.lstrip('@').replace('/', '+')}@{self.version}"


CLAUDE_CODE = NpmAgent("claude-code", "@anthropic-ai/claude-code", "2.1.197", "claude")
CODEX = NpmAgent("codex", "@openai/codex", "0.171.0", "codex")
COPILOT_CLI = NpmAgent("copilot-cli", "@github/copilot", "1.0.102", "copilot")
GEMINI_CLI = NpmAgent("gemini-cli", "@google/gemini-cli", "0.61.0", "gemini")
QWEN_CODE = NpmAgent("qwen-code", "@qwen-code/qwen-code", "0.24.4", "qwen")
AGENTS = {agent.name: agent for agent in (CLAUDE_CODE, CODEX, COPILOT_CLI, GEMINI_CLI, QWEN_CODE)}
# pi runs mented's extension in its own process: tests/test_real_pi.py, its own module.
PI = NpmAgent("pi", "@mariozechner/pi-coding-agent", "0.73.1", "pi")
# Where each agent keeps its configuration under HOME, and the variable that moves it
# (set, so that mentectl and the agent agree; None: the agent reads HOME alone).
_CONFIG_DIRS = {
    CLAUDE_CODE: (".claude", "CLAUDE_CONFIG_DIR"),
    CODEX: (".codex", "CODEX_HOME"),
    COPILOT_CLI: (".copilot", "COPILOT_HOME"),
    GEMINI_CLI: (".gemini", None),
    QWEN_CODE: (".qwen", "QWEN_HOME"),
    PI: (".pi/agent", "PI_CODING_AGENT_DIR"),
}


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mented-tests" / "agents"


def install(agent: NpmAgent) -> Path:
    """The agent's executable, installed from npm into the cache unless it is there already.

    Skips the test, with npm's own words, when npm is missing or the install fails
    (no network): the agents are not part of the project.
    """
    target = cache_dir() / agent.cache_name
    binary = target / "node_modules" / ".bin" / agent.binary
    if binary.exists():
        return binary
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: cannot install the real agents")
    target.parent.mkdir(parents=True, exist_ok=True)
    # The test workers (pytest-xdist) that want the same agent wait for one install.
    with (target.parent / f"{agent.cache_name}.lock").open("wb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not binary.exists():
            _npm_install(npm, agent, target)
    return binary


def _npm_install(npm: str, agent: NpmAgent, target: Path) -> None:
    """Install the agent into a staging directory, then rename it to `target`."""
    staging = Path(tempfile.mkdtemp(prefix=".install-", dir=target.parent))
    spec = f"{agent.package}@{agent.version}"
    try:
        result = subprocess.run(
            [npm, "install", "--prefix", str(staging), "--no-audit", "--no-fund", spec],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if result.returncode != 0:
            pytest.skip(f"npm install {spec} failed: {result.stderr.strip()[-500:]}")
        try:
            staging.rename(target)
        except OSError:  # installed meanwhile by a run without the lock: keep that one
            if not (target / "node_modules" / ".bin" / agent.binary).exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def commit_count(repo: Path) -> int:
    """How many commits the repository's HEAD has (0 before the first)."""
    result = subprocess.run(
        ["git", "-C", str(repo), "rev-list", "--count", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return int(result.stdout.strip()) if result.returncode == 0 else 0


def make_repo(path: Path) -> Path:
    path.mkdir()
    for args in (
        ["init", "-q"],
        ["config", "user.name", "Test"],
        ["config", "user.email", "test@example.com"],
        ["config", "commit.gpgsign", "false"],
    ):
        subprocess.run(["git", "-C", str(path), *args], check=True)
    return path


# How each agent reports a hook that failed: Codex prints "hook: PreToolUse Failed";
# Claude Code keeps a `hook_non_blocking_error` record in the session's transcript;
# Copilot CLI denies the call "(hook errored)"; Gemini CLI and Qwen Code log "Hook
# execution failed"; pi prints "Extension error (PATH): ..." or "Failed to load extension".
HOOK_ERROR = re.compile(
    r"^hook: \w+ Failed|\"type\":\s*\"hook_\w*error\"|hook errored|Hook execution failed"
    r"|Extension error \(|Failed to load extension",
    re.MULTILINE,
)


@dataclass
class AgentRun:
    returncode: int
    stdout: str
    stderr: str
    transcript: str  # Claude Code's session transcript (JSON lines); empty for Codex
    seconds: float

    def hook_errors(self) -> list[str]:
        """What the agent reported about a hook that failed, wherever it reports it."""
        return [
            match.group(0)
            for text in (self.stdout, self.stderr, self.transcript)
            for match in HOOK_ERROR.finditer(text)
        ]


class AgentSession:
    """One agent, its private configuration with mented's hook in it, and a daemon.

    The daemon and the configuration serve several runs (one test each): every
    run of an agent is a new session for mented, in a new repository.
    """

    def __init__(self, agent: NpmAgent, binary: Path, daemon: DaemonProcess) -> None:
        self.agent = agent
        self.binary = binary
        self.daemon = daemon
        folder, variable = _CONFIG_DIRS[agent]
        self.config_variable = variable
        self.config_dir = daemon.home / folder
        self.config_dir.mkdir(parents=True)
        self.codex_trust = ""
        if variable is not None:
            # mentectl writes the hook where the agent reads it: the same variable.
            daemon.env[variable] = str(self.config_dir)
        daemon.mentectl("hooks", "install", agent.name)
        if agent is CODEX:
            self._trust_codex_hooks()
        if agent is GEMINI_CLI:
            self._gemini_settings()
        if agent is QWEN_CODE:
            self._qwen_settings()
        self._repos = 0
        self.repo = self.new_repo()
        self.mcp_table = ""  # Codex: mented's MCP server in config.toml, once registered
        self.allowed_tools = ["Bash"]  # Claude Code: what it may run without asking

    def register_mcp(self) -> None:
        """mented's MCP server, registered as `mentectl mcp install AGENT` does it
        (Claude Code and Codex); `unregister_mcp` takes it out again."""
        # `claude mcp add` for Claude Code: the agent's own command on PATH.
        env = {**self.daemon.env, "PATH": f"{self.binary.parent}{os.pathsep}{os.environ['PATH']}"}
        codex_config = self.config_dir / "config.toml"
        if self.agent is CODEX:  # kept apart: `environment` writes config.toml per run
            codex_config.write_text("", encoding="utf-8")
        result = run_mentectl(["mcp", "install", self.agent.name], env=env)
        assert result.returncode == 0, result.stdout + result.stderr
        if self.agent is CODEX:
            self.mcp_table = codex_config.read_text(encoding="utf-8")
        self.allowed_tools = ["Bash", "mcp__mented"]

    def unregister_mcp(self) -> None:
        env = {**self.daemon.env, "PATH": f"{self.binary.parent}{os.pathsep}{os.environ['PATH']}"}
        if self.agent is CLAUDE_CODE:
            run_mentectl(["mcp", "uninstall", self.agent.name], env=env)
        self.mcp_table = ""
        self.allowed_tools = ["Bash"]

    def _trust_codex_hooks(self) -> None:
        """Trust the installed entries as the user does in Codex's `/hooks` view.

        Codex skips an untrusted hook without a word; it records the trust as a hash
        of each entry under `hooks.state` in `$CODEX_HOME/config.toml`.
        """
        with mock.patch.dict(os.environ, {"CODEX_HOME": str(self.config_dir)}):
            self.codex_trust = codex.trust_config_toml(codex.user_hooks_path())
        assert "trusted_hash" in self.codex_trust, "no mented entry in Codex's hooks.json"

    def _gemini_settings(self) -> None:
        """API-key sign-in and no folder trust, next to the hooks mentectl installed.

        Without a chosen auth type `gemini -p` stops before asking the model; with
        folder trust on (the default) it runs no hook in an untrusted folder.
        """
        path = self.config_dir / "settings.json"
        settings = json.loads(path.read_text(encoding="utf-8"))
        security = settings.setdefault("security", {})
        security.setdefault("auth", {})["selectedType"] = "gemini-api-key"
        security.setdefault("folderTrust", {})["enabled"] = False
        path.write_text(json.dumps(settings, indent=2), encoding="utf-8")

    def _qwen_settings(self) -> None:
        """The OpenAI-compatible sign-in, no folder trust, nothing sent home, next to
        the hooks mentectl installed.

        Usage statistics on (the default) keep `qwen -p` seconds after its answer,
        trying to send them.
        """
        path = self.config_dir / "settings.json"
        settings = json.loads(path.read_text(encoding="utf-8"))
        security = settings.setdefault("security", {})
        security.setdefault("auth", {})["selectedType"] = "openai"
        security.setdefault("folderTrust", {})["enabled"] = False
        settings.setdefault("privacy", {})["usageStatisticsEnabled"] = False
        settings.setdefault("telemetry", {})["enabled"] = False
        general = settings.setdefault("general", {})
        general.update(disableAutoUpdate=True, disableUpdateNag=True)
        path.write_text(json.dumps(settings, indent=2), encoding="utf-8")

    def new_repo(self) -> Path:
        """A fresh repository for the next run."""
        self._repos += 1
        self.repo = make_repo(self.daemon.root / f"repo{self._repos}")
        return self.repo

    def environment(self, server: ModelServer) -> dict[str, str]:
        env = {
            k: v
            for k, v in self.daemon.env.items()
            if not k.startswith(_AGENT_VARIABLES) or k == self.config_variable
        }
        env["MENTED_HOOK_BUDGET_MS"] = HOOK_BUDGET_MS
        if self.agent is COPILOT_CLI:
            env.update(
                COPILOT_PROVIDER_BASE_URL=f"{server.base_url}/v1",
                COPILOT_PROVIDER_API_KEY="sk-mock",
                COPILOT_MODEL="mock-model",
                COPILOT_OFFLINE="true",
            )
        elif self.agent is GEMINI_CLI:
            env.update(
                GEMINI_API_KEY="mock-key",
                GOOGLE_GEMINI_BASE_URL=server.base_url,
                GEMINI_CLI_NO_RELAUNCH="true",
            )
        elif self.agent is PI:
            env.update(PI_OFFLINE="1", PI_TELEMETRY="0")
            (self.config_dir / "models.json").write_text(
                json.dumps({"providers": {"mock": _pi_provider(server.base_url)}}), encoding="utf-8"
            )
        elif self.agent is QWEN_CODE:
            env.update(
                OPENAI_API_KEY="sk-mock",
                OPENAI_BASE_URL=f"{server.base_url}/v1",
                OPENAI_MODEL="mock-model",
                # Run in this process: a relaunch (for --expose-gc) loads it all twice.
                QWEN_CODE_NO_RELAUNCH="true",
                QWEN_CODE_SUPPRESS_YOLO_WARNING="1",
            )
        elif self.agent is CLAUDE_CODE:
            env.update(
                ANTHROPIC_BASE_URL=server.base_url,
                ANTHROPIC_API_KEY="sk-ant-mock",
                CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                DISABLE_AUTOUPDATER="1",
                DISABLE_TELEMETRY="1",
                DISABLE_ERROR_REPORTING="1",
            )
        else:
            env["MOCK_MODEL_API_KEY"] = "sk-mock"
            config = _CODEX_CONFIG.format(base_url=server.base_url) + self.codex_trust
            config += "\n" + self.mcp_table
            (self.config_dir / "config.toml").write_text(config, encoding="utf-8")
        return env

    def run(self, server: ModelServer, prompt: str, *, resume: bool = False) -> AgentRun:
        """Run the agent once, non-interactively, in the repository, until it answers.

        `resume`: go on with the agent's most recent session instead of a new one.
        """
        if self.agent is CLAUDE_CODE:
            # As root, Claude Code refuses bypassPermissions: allow the one tool instead.
            args = ["-p", prompt, "--allowedTools", *self.allowed_tools]
            args += ["--model", "claude-sonnet-4-5"]
            args += ["--continue"] if resume else []
        elif self.agent is COPILOT_CLI:
            args = ["-p", prompt, "--allow-all-tools"] + (["--continue"] if resume else [])
        elif self.agent is PI:
            args = ["-p", "--provider", "mock", "--model", "mock-model", prompt]
            args += ["--continue"] if resume else []
        elif self.agent is GEMINI_CLI:
            args = ["-p", prompt, "--approval-mode", "yolo", "--model", "gemini-2.5-flash"]
            args += ["--resume", "latest"] if resume else []
        elif self.agent is QWEN_CODE:
            args = ["-p", prompt, "--approval-mode", "yolo"] + (["--continue"] if resume else [])
        else:
            args = ["exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
            args += ["resume", "--last", prompt] if resume else [prompt]
        started = time.monotonic()
        started_at = time.time()
        result = subprocess.run(
            [str(self.binary), *args],
            cwd=self.repo,
            env=self.environment(server),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
        seconds = time.monotonic() - started
        transcripts = [
            path.read_text(encoding="utf-8", errors="replace")
            for path in (self.config_dir / "projects").glob("*/*.jsonl")
            if path.stat().st_mtime >= started_at - 1
        ]
        return AgentRun(
            result.returncode, result.stdout, result.stderr, "".join(transcripts), seconds
        )


# Variables of the agents' own that must not leak from the test's environment.
_AGENT_VARIABLES = (
    "ANTHROPIC_",
    "OPENAI_",
    "CLAUDE_CODE_",
    "COPILOT_",
    "GEMINI_",
    "GOOGLE_",
    "GH_",
    "PI_",
    "QWEN_",
)


def _pi_provider(base_url: str) -> dict[str, object]:
    """The mock model as a custom provider of pi's `models.json` (its docs/models.md)."""
    return {
        "baseUrl": base_url,
        "api": "anthropic-messages",
        "apiKey": "sk-mock",
        "models": [{"id": "mock-model", "reasoning": False}],
    }


# Codex's own model-provider table; no retries, so that a server fault shows at once.
_CODEX_CONFIG = """\
model = "mock-model"
model_provider = "mock"

[model_providers.mock]
name = "mock model"
base_url = "{base_url}/v1"
wire_api = "responses"
env_key = "MOCK_MODEL_API_KEY"
request_max_retries = 0
stream_max_retries = 0
"""


# ------------------------------------------------------------- mented's text


def mented_texts(turn: Turn) -> list[str]:
    """The conversation items of `turn` that carry mented's text, as the model read them.

    Claude Code: a `tool_result` (a deny's reason) or a text block (the
    `<system-reminder>` carrying a hook's context). Codex: a `function_call_output`
    ("Command blocked by PreToolUse hook: ...") or a developer/user message.
    """
    found = []
    for item in turn.conversation():
        if not isinstance(item, dict):
            continue
        if turn.api == "gemini":  # Gemini CLI: a function response (or text) part
            found.extend(text for part in item.get("parts") or [] if (text := _gemini_text(part)))
            continue
        if turn.api == "chat":  # Copilot CLI, Qwen Code: a tool message or a user message
            content = item.get("content")
            if isinstance(content, list):  # Qwen Code: text parts
                content = [part.get("text") for part in content if isinstance(part, dict)]
            text = "\n".join(_strings(content))
            if item.get("role") in {"tool", "user"} and MENTED_MARK in text:
                found.append(text)
            continue
        parts = item.get("content") if turn.api == "anthropic" else [item]
        for part in parts if isinstance(parts, list) else []:
            text = _text_of(part)
            if text and MENTED_MARK in text:
                found.append(text)
    return found


# How each agent wraps a hook's text for the model (see docs/design.md, "Agents").
_WRAPPERS = (
    # Claude Code's context: a system reminder after the tool result.
    re.compile(
        r"<system-reminder>\s*PreToolUse:\w+ hook additional context: (.*?)\s*</system-reminder>",
        re.DOTALL,
    ),
    # Codex's deny: the reason inside its own sentence.
    re.compile(r"Command blocked by PreToolUse hook: (.*)\. Command: .*", re.DOTALL),
    # Copilot CLI's deny (the tool's result) and context (a user message after it).
    re.compile(r"Denied by preToolUse hook: (.*)", re.DOTALL),
    re.compile(r"Additional context from preToolUse hook:\n(.*)", re.DOTALL),
    # pi's context after a tool: a text part after the output (`mented_client/pi_extension.ts`).
    re.compile(r".*?\n\n(mented: the rules .*)", re.DOTALL),
    # Gemini CLI's deny (the tool's error) and AfterTool context (after the output).
    re.compile(r"Tool execution blocked: (.*)", re.DOTALL),
    re.compile(r"<hook_context>(.*)</hook_context>", re.DOTALL),
    # Qwen Code's PostToolUse context: after the shell tool's result.
    re.compile(r"Command: .*?\nProcess Group PGID: [^\n]*\n\n(.*)", re.DOTALL),
)


def mented_own_text(text: str) -> str:
    """`text` without the agent's wrapping: what mented itself wrote."""
    for wrapper in _WRAPPERS:
        if match := wrapper.fullmatch(text.strip()):
            return match.group(1)
    return text.strip()


# Gemini CLI appends an AfterTool hook's context to the command's output.
_GEMINI_CONTEXT = re.compile(r"<hook_context>.*?</hook_context>", re.DOTALL)


def _gemini_text(part: dict[str, object]) -> str:
    """Mented's text in a Gemini part: a deny's result, or the context after an output."""
    response = part.get("functionResponse")
    text = "\n".join(_strings(response.get("response") if isinstance(response, dict) else part))
    if MENTED_MARK not in text:
        return ""
    contexts = [c for c in _GEMINI_CONTEXT.findall(text) if MENTED_MARK in c]
    return "\n".join(contexts) if contexts else text


def _text_of(part: object) -> str:
    if not isinstance(part, dict):
        return ""
    kind = part.get("type")
    if kind == "text":
        return str(part.get("text", ""))
    if kind == "tool_result":
        content = part.get("content")
        if isinstance(content, list):
            return "\n".join(_text_of(block) for block in content)
        return str(content or "")
    if kind == "function_call_output":
        output = part.get("output")
        return output if isinstance(output, str) else msgspec.json.encode(output).decode()
    if kind == "message":
        return "\n".join(
            str(span.get("text", ""))
            for span in part.get("content") or []
            if isinstance(span, dict)
        )
    return ""


def record_figures(test: str, **figures: float | str) -> None:
    """Append `figures` under the name `test` when `MENTED_AGENT_REPORT` names a file."""
    target = os.environ.get(REPORT_ENV)
    if not target:
        return
    with Path(target).open("ab") as report:
        report.write(msgspec.json.encode({"test": test, **figures}) + b"\n")


def _main() -> int:
    """Run the measurement with the real agents and print the figures as a Markdown table."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "figures.jsonl"
        env = {**os.environ, AGENT_TESTS_ENV: "1", REPORT_ENV: str(report)}
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly"]
        command += ["-k", "session_cost", "tests/test_real_agents.py"]
        status = subprocess.run(command, env=env, check=False).returncode
        lines = report.read_bytes().splitlines() if report.exists() else []
    print(
        "| agent | commits | mented characters in the conversation (mented's own) "
        "| full rule texts | extra model turns |"
    )
    print("|---|--:|--:|--:|--:|")
    for line in lines:
        row = msgspec.json.decode(line)
        print(
            f"| {row['agent']} {row['version']} | {row['commits']} "
            f"| {row['chars']:,} ({row['own_chars']:,}) | {row['full_texts']} "
            f"| {row['extra_turns']} |"
        )
    return status


if __name__ == "__main__":
    sys.exit(_main())


def agent_session(name: str) -> Iterator[AgentSession]:
    """The agent `name` installed, with a daemon of its own, for a module's tests."""
    npm_agent = PI if name == PI.name else AGENTS[name]
    binary = install(npm_agent)
    root = Path(tempfile.mkdtemp(prefix="md-", dir="/tmp"))
    daemon = DaemonProcess(root)
    daemon.start()
    try:
        yield AgentSession(npm_agent, binary, daemon)
    finally:
        if daemon.proc is not None:
            daemon.stop()
        shutil.rmtree(root, ignore_errors=True)
