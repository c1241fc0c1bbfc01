"""The config file: defaults, bounds that keep the hook alive, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from mented.config import ConfigError, DeliverySettings, load_config


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_a_missing_file_means_the_defaults(tmp_path: Path) -> None:
    config = load_config(tmp_path / "absent.toml")
    assert config.hook.k == 6
    assert config.hook.budget_ms == 250
    assert config.delivery == DeliverySettings(default="before", actions={})
    assert config.delivery.mode_of("git-commit") == "before"


def test_values_are_read(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            '[hook]\nk = 3\n\n[delivery]\ndefault = "context"\nGit-Commit = "before"\n\n'
            "[daemon]\nidle_timeout_s = 60\n",
        )
    )
    assert config.hook.k == 3
    assert config.delivery.mode_of("git-commit") == "before"
    assert config.delivery.mode_of("pr-create") == "context"
    assert config.daemon.idle_timeout_s == 60


def test_a_config_of_the_previous_version_still_works(tmp_path: Path) -> None:
    # 0.1 had `gate` per action (context was the default) and `gate_session_ttl_s`.
    config = load_config(
        write(tmp_path, '[hook]\ngate_session_ttl_s = 600\n\n[delivery]\ngit-push = "gate"\n')
    )
    assert config.delivery.mode_of("git-push") == "before"
    assert config.hook.session_ttl_s == 600


def test_the_old_and_new_name_of_one_setting_together_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "[hook]\nsession_ttl_s = 60\ngate_session_ttl_s = 600\n")
    with pytest.raises(ConfigError, match=f"{path}:3: .*keep `session_ttl_s` only"):
        load_config(path)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("[hook]\nk = 0\n", "k"),  # would fire nothing, ever
        ("[hook]\nmax_context_chars = 20000\n", "max_context_chars"),  # Claude Code cuts it
        ("[hook]\ndedupe_seconds = -1\n", "dedupe_seconds"),
        ("[daemon]\nconnection_idle_s = 0\n", "connection_idle_s"),  # would drop every client
        ("[daemon]\nconnection_idle_s = -5\n", "connection_idle_s"),
        ("[hook]\nbudget = 3\n", "budget"),  # a typo of budget_ms
    ],
)
def test_values_that_would_silence_the_hook_are_refused_with_file_and_line(
    tmp_path: Path, text: str, field: str
) -> None:
    path = write(tmp_path, "# my settings\n" + text)
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert f"{path}:3:" in str(error.value)  # the key's line, not its section's
    assert field in str(error.value)


@pytest.mark.parametrize("line", ['git-commit = "loud"', 'default = "stopped"', "default = 1"])
def test_bad_delivery_mode_says_what_is_allowed(tmp_path: Path, line: str) -> None:
    path = write(tmp_path, f"[delivery]\n{line}\n")
    with pytest.raises(ConfigError, match=f'{path}:2: bad .*"before" or "context"'):
        load_config(path)


def test_not_toml_and_absurd_nesting_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(write(tmp_path, "[hook\nk = 1\n"))
    with pytest.raises(ConfigError, match="nested too deeply"):
        load_config(write(tmp_path, "x = " + "[" * 5000 + "]" * 5000 + "\n"))


@pytest.mark.parametrize(
    ("text", "wanted"),
    [
        ("[hooks]\nk = 3\n", ":1: unknown section [hooks]; did you mean [hook]?"),
        ("k = 3\n", ":1: unknown section [k]"),
    ],
)
def test_an_unknown_section_is_refused_with_its_line(
    tmp_path: Path, text: str, wanted: str
) -> None:
    path = write(tmp_path, "# mine\n" + text)
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    assert str(refused.value).startswith(f"{path}{wanted.replace(':1:', ':2:')}")


@pytest.mark.parametrize(
    "text",
    [
        "[hook]\nk = 3\nmax_context_chars = 100\n",
        "[hook]\nk = 3\nmax_context_char = 4000\n",
        '[daemon]\nidle_timeout_s = 0\nconnection_idle_s = "x"\n',
        '[delivery]\ndefault = "before"\ngit-push = "later"\n',
    ],
)
def test_a_bad_key_is_reported_at_its_own_line(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    assert str(refused.value).startswith(f"{path}:3:")


def test_an_unknown_action_under_delivery_is_refused_with_its_line(tmp_path: Path) -> None:
    from mented.actions import load_action_table

    path = write(tmp_path, '[delivery]\ndefault = "before"\ngit-psuh = "context"\n')
    with pytest.raises(ConfigError) as refused:
        load_action_table(load_config(path))
    assert str(refused.value).startswith(f"{path}:3:")
    assert "git-push" in str(refused.value)
    # A switched-off built-in may keep its line.
    path.write_text('[delivery]\ndocker-push = "context"\n[actions.docker-push]\nenabled = false\n')
    load_action_table(load_config(path))


def test_a_mistyped_default_under_delivery_is_refused_with_a_suggestion(tmp_path: Path) -> None:
    from mented.actions import load_action_table

    path = write(tmp_path, '[hook]\nk = 3\n[delivery]\ndefualt = "context"\n')
    with pytest.raises(ConfigError) as refused:
        load_action_table(load_config(path))
    assert str(refused.value).startswith(f"{path}:4: [delivery] names 'defualt'")
    assert "did you mean: default?" in str(refused.value)


def test_pinned_and_recall_sections(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[pinned]\nmax_rules = 3\nmax_chars = 600\n\n[recall]\nk = 8\n")
    config = load_config(path)
    assert (config.pinned.max_rules, config.pinned.max_chars, config.recall.k) == (3, 600, 8)
    assert load_config(None).pinned.max_rules == 5
    path.write_text("[pinned]\nmax_rules = 0\n")
    with pytest.raises(ConfigError, match=r"bad \[pinned\] section"):
        load_config(path)
