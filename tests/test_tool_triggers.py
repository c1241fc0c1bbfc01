"""ToolMatcher: which actions an MCP tool call performs, by SERVER/TOOL pattern."""

from __future__ import annotations

from mented.actions import load_action_table
from mented.config import Config
from mented.tool_triggers import ToolMatcher


def test_the_forges_mcp_tools_perform_the_built_in_actions() -> None:
    tools = ToolMatcher(load_action_table(Config()))
    assert tools.actions_for("github/create_pull_request") == ("pr-create",)
    assert tools.actions_for("my-gitlab/create_merge_request") == ("pr-create",)
    assert tools.actions_for("github/merge_pull_request") == ("pr-merge",)
    assert tools.actions_for("github/create_issue") == ("issue-create",)
    assert tools.actions_for("github/list_pull_requests") == ()
    assert tools.actions_for("github/get_pull_request") == ()


def test_users_add_their_own_tools() -> None:
    config = Config(actions={"deploy": {"tools": ["k8s/apply_*"], "description": "deploy"}})
    tools = ToolMatcher(load_action_table(config))
    assert tools.actions_for("k8s/apply_manifest") == ("deploy",)
    assert tools.actions_for("k8s/get_pods") == ()


def test_a_tool_glob_matches_the_whole_name() -> None:
    config = Config(actions={"deploy": {"tools": ["k8s/apply_*"], "description": "deploy"}})
    tools = ToolMatcher(load_action_table(config))
    assert tools.actions_for("prod-k8s/apply_manifest") == ()  # another server's tool
    assert tools.actions_for("k8s/apply_manifest/extra") == ("deploy",)  # `*` takes `/` too
    assert tools.actions_for("xk8s/apply_manifest") == ()
    assert tools.explain("prod-k8s/apply_manifest") == []
