"""The command shapes of the action table, as the matcher reads them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mented.actions import load_action_table
from mented.config import Config
from mented.matcher import Matcher


def matcher_for(actions: dict[str, Any]) -> Matcher:
    return Matcher(load_action_table(Config(path=Path("/cfg/config.toml"), actions=actions)))


# ------------------------------------------------------------ the table is data


def test_a_user_action_fires_with_its_own_global_options() -> None:
    matcher = matcher_for(
        {
            "deploy": {
                "description": "roll out",
                "shapes": [
                    {
                        "program": "deployctl",
                        "subcommand": ["apply"],
                        "options_with_value": ["-n", "--namespace"],
                    }
                ],
            }
        }
    )
    assert matcher.actions_in("deployctl -n prod apply -f app.yaml") == ("deploy",)
    assert matcher.actions_in("deployctl -n apply get pods") == ()
    assert matcher.actions_in("deployctl get pods") == ()


def test_a_list_of_alternatives_holding_any_word_takes_any_word() -> None:
    matcher = matcher_for(
        {
            "migrate": {
                "description": "change the schema",
                "shapes": [{"program": "dbctl", "subcommand": [["migrate", "*"], "apply"]}],
            }
        }
    )
    assert matcher.actions_in("dbctl migrate apply") == ("migrate",)
    assert matcher.actions_in("dbctl schema apply") == ("migrate",)
    assert matcher.actions_in("dbctl schema plan") == ()


def test_a_shape_added_to_a_built_in_action_fires_it() -> None:
    matcher = matcher_for(
        {"git-commit": {"shapes": [{"program": "but", "subcommand": ["commit"]}]}}
    )
    assert matcher.actions_in("but commit -m x") == ("git-commit",)
    assert matcher.actions_in("git commit -m x") == ("git-commit",)


def test_a_switched_off_built_in_never_fires() -> None:
    matcher = matcher_for({"docker-push": {"enabled": False}})
    assert matcher.actions_in("docker push app && git push") == ("git-push",)


def test_user_actions_come_after_built_ins_within_one_command() -> None:
    matcher = matcher_for({"any-push": {"shapes": [{"program": "git", "subcommand": ["push"]}]}})
    assert matcher.actions_in("git push -f") == ("git-push", "git-push-force", "any-push")


def test_shape_conditions_from_config() -> None:
    matcher = matcher_for(
        {
            "release-branch": {
                "shapes": [
                    {
                        "program": "git",
                        "subcommand": ["push"],
                        "positional_starts_with": "release/",
                        "no_flag": ["--dry-run", "-n"],
                    }
                ]
            },
            "workspace-add": {
                "shapes": [{"program": "yarn", "subcommand": ["workspace", "*", "add"]}]
            },
        }
    )
    assert "release-branch" in matcher.actions_in("git push origin release/1.2")
    assert "release-branch" not in matcher.actions_in("git push -n origin release/1.2")
    assert "release-branch" not in matcher.actions_in("git push origin main")
    assert matcher.actions_in("yarn workspace web add react") == ("workspace-add",)
    assert matcher.actions_in("yarn workspace web remove react") == ()


def test_shapes_on_option_values_and_positional_counts_in_the_users_config() -> None:
    matcher = matcher_for(
        {
            "deploy": {
                "description": "deploy",
                "shapes": [
                    {
                        "program": "curl",
                        "any_value": ["-X=POST"],
                        "positional_matches": "*/deploy",
                        "options_with_value": ["-X"],
                    },
                    {"program": "make", "max_positionals": 0},
                ],
            }
        }
    )
    assert matcher.actions_in("curl -X POST https://ci/deploy") == ("deploy",)
    assert matcher.actions_in("curl -X GET https://ci/deploy") == ()
    assert matcher.actions_in("curl -X POST https://ci/status") == ()
    assert matcher.actions_in("make -j4") == ("deploy",)
    assert matcher.actions_in("make test") == ()
    (step,) = matcher.explain("make test").commands
    assert "takes at most 0 positional argument(s), has 1" in step.reason
