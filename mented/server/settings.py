"""The config file: loaded at start (the built-in settings when invalid), checked, reloaded."""

from __future__ import annotations

from mented.actions import load_action_table
from mented.config import Config, ConfigError, load_config
from mented.first_answers import file_stamp
from mented.log import log
from mented.matcher import Matcher
from mented.problems import CONFIG_DEFAULTS, config_defaults
from mented.server.workers import _Workers

_PREVIOUS_IN_FORCE = "(the previous configuration stays in force)"
_ON_DEFAULTS = (
    "(mented started on the built-in settings instead; fix the file, then `mentectl reload`)"
)


class _Settings(_Workers):
    """The settings in force, and the config file they came from."""

    def reload(self) -> str | None:
        """Re-read the config file; keep the current settings when it is bad.

        Returns:
            None when reloaded, else the error message (also logged).
        """
        if self.options.on_reloading:
            self.options.on_reloading()
        error = self._reload_config()
        self.config_error = error
        config = self.options.config_path
        self.events.publish_config(str(config) if config else None, error)
        if self.options.on_reloaded:
            self.options.on_reloaded(error)
        return error

    def _load_settings_or_defaults(self) -> tuple[Config, Matcher]:
        """The config file's settings; the built-in ones when the file is invalid.

        A daemon that refused to start over its config file would leave every agent
        without rules until someone noticed: a service manager restarting it (after
        a crash, at login) would only fail again. So it starts on the built-in
        settings, says why in `status` (unhealthy) and `doctor`, and `reload`
        applies the file once it is fixed. (`mentectl restart` checks the file
        first and leaves a running daemon alone when it is invalid.)
        """
        try:
            return self._load_settings()
        except ConfigError as exc:
            log.error("config_invalid_using_defaults", error=str(exc))
            self._on_defaults = True
            self.config_error = f"{exc} {_ON_DEFAULTS}"
            self.problems.note(CONFIG_DEFAULTS, *config_defaults(self.options.config_path))
            config = Config(path=self.options.config_path)
            return config, Matcher(load_action_table(config))

    def _in_force(self) -> str:
        """What serves while the file on disk is invalid, for its error message."""
        return _ON_DEFAULTS if self._on_defaults else _PREVIOUS_IN_FORCE

    def _load_settings(self) -> tuple[Config, Matcher]:
        """The config file and the matcher built from its action table.

        Raises:
            ConfigError: the file is unreadable or invalid.
        """
        self._config_stamp = file_stamp(self.options.config_path)
        config = load_config(self.options.config_path)
        return config, Matcher(load_action_table(config))

    def _check_config_on_disk(self) -> None:
        """Notice a config file edited since it was loaded and say whether it is valid.

        Only checked, not applied: applying is `reload`'s job (SIGHUP, `mentectl reload`).
        """
        stamp = file_stamp(self.options.config_path)
        if stamp == self._config_stamp:
            return
        self._config_stamp = stamp
        try:
            load_action_table(load_config(self.options.config_path))
        except ConfigError as exc:
            self.config_error = f"{exc} {self._in_force()}"
        else:
            self.config_error = None

    def _reload_config(self) -> str | None:
        try:
            config, matcher = self._load_settings()
        except ConfigError as exc:
            log.error("reload_failed", error=str(exc))
            return f"{exc} {self._in_force()}"
        except Exception as exc:  # noqa: BLE001 - a reload (SIGHUP too) must never end the daemon
            log.exception("reload_failed")
            return f"cannot reload the configuration: {exc!r} {self._in_force()}"
        self._on_defaults = False
        self.problems.clear(CONFIG_DEFAULTS)
        self.config = config
        self.matcher = matcher
        self.syncer.timeout_s = config.sync.timeout_s
        self.syncer.max_fetch_bytes = config.sync.max_fetch_mib << 20
        self._wake_sync.set()
        self.hooks.reconfigure(matcher, config)
        self.activity.reconfigure(config.activity)
        log.info("reloaded", config=str(self.options.config_path))
        return None
