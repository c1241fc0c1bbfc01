"""The `Matcher`: the actions a command performs, explained, within the budgets; never raises."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from mented.git_aliases import NO_ALIASES, Aliases
from mented.matcher.analysis import _Analysis
from mented.matcher.cache import CACHE_BYTES, _cache_key, _MatchCaches
from mented.matcher.clock import _Clock
from mented.matcher.heredocs import _without_heredoc_bodies
from mented.matcher.limits import MATCH_CPU_BUDGET_S, MAX_COMMAND_CHARS, MAX_HEREDOC_SCAN_CHARS
from mented.matcher.results import Explanation, MatchedCommand

if TYPE_CHECKING:
    from mented.actions import ActionTable


class Matcher(_MatchCaches):
    """Names the actions in shell commands, with one action table and the hook's cache."""

    def __init__(self, table: ActionTable, cache_bytes: int = CACHE_BYTES) -> None:
        self.table = table
        super().__init__(cache_bytes)

    def actions_in(
        self, command: str, *, deadline: float | None = None, aliases: Aliases = NO_ALIASES
    ) -> tuple[str, ...]:
        """The actions `command` performs, de-duplicated, in command order. Never raises.

        Args:
            command: the shell command.
            deadline: a `time.monotonic()` value after which the answer is of no use
                (the hook's shim has given up by then): matching stops there, and an
                answer cut short by it is not cached.
            aliases: the user's git aliases where the command runs (`git_aliases`).
        """
        # None only from a match that may give up (`quick_actions_in`).
        return self._answer(command, deadline, MATCH_CPU_BUDGET_S, aliases, may_give_up=False) or ()

    def quick_actions_in(
        self,
        command: str,
        cpu_budget_s: float,
        *,
        deadline: float | None = None,
        aliases: Aliases = NO_ALIASES,
    ) -> tuple[str, ...] | None:
        """`actions_in`, if matching takes under `cpu_budget_s` of CPU; else None.

        For the event loop: it answers ordinary commands at once, and leaves a slow
        one (None, nothing cached) to `actions_in` in a worker thread.
        """
        return self._answer(command, deadline, cpu_budget_s, aliases, may_give_up=True)

    def _answer(
        self,
        command: str,
        deadline: float | None,
        cpu_budget_s: float,
        aliases: Aliases,
        *,
        may_give_up: bool,
    ) -> tuple[str, ...] | None:
        """The hook's answer, from the cache or matched and cached unless cut short by the
        deadline; `may_give_up`: None (nothing cached) when the CPU budget ran out."""
        if not isinstance(command, str) or len(command) > MAX_HEREDOC_SCAN_CHARS:
            return ()
        key = _cache_key(command, aliases)
        cached = self._cached(key)
        if cached is not None:
            return cached
        explanation, clock = self._explain(
            command, deadline, cpu_budget_s=cpu_budget_s, aliases=aliases
        )
        if may_give_up and clock is not None and (clock.out_of_time or clock.bashlex_cut):
            return None
        if clock is None or not clock.late:
            self._remember(key, explanation)
        return explanation.actions

    def explain(
        self, command: str, *, deadline: float | None = None, aliases: Aliases = NO_ALIASES
    ) -> Explanation:
        """Every simple command in `command` and what it performs. Never raises.

        Within the same time budget as `actions_in` (see the module docstring).
        """
        return self._explain(command, deadline, aliases=aliases, as_given=True)[0]

    def matched_commands(
        self, command: str, *, deadline: float | None = None, aliases: Aliases = NO_ALIASES
    ) -> tuple[MatchedCommand, ...]:
        """Each simple command in `command` that performs an action, with its words.

        For `mented.fields` (what a commit's message is), within the same time budget
        as `actions_in`; kept by the command's digest in an LRU bounded by the characters
        of its words (`MATCHED_CACHE_CHARS`), unless cut short. Never raises.
        """
        if not isinstance(command, str) or len(command) > MAX_HEREDOC_SCAN_CHARS:
            return ()
        key = _cache_key(command, aliases)
        seen: list[MatchedCommand] = []
        kept = self._kept_matched(key)
        if kept is not None:
            return kept
        _, clock = self._explain(command, deadline, aliases=aliases, on_match=seen.append)
        self._keep_matched(key, seen, clock)
        return tuple(seen)

    def _explain(  # noqa: PLR0913 - the options of one match
        self,
        command: str,
        deadline: float | None,
        cpu_budget_s: float = MATCH_CPU_BUDGET_S,
        *,
        aliases: Aliases = NO_ALIASES,
        as_given: bool = False,
        on_match: Callable[[MatchedCommand], None] | None = None,
    ) -> tuple[Explanation, _Clock | None]:
        """The explanation, and the clock that timed it (None: there was nothing to time).

        `as_given`: show each word as the command gave it, not as rewritten for bashlex
        (`explain`; the hook needs only the actions).
        """
        if not isinstance(command, str):
            return Explanation(actions=(), parser="none", notes=("not a string",)), None
        clock = _Clock(deadline, cpu_budget_s)
        given_command = command
        stripped_note = None
        if len(command) > MAX_COMMAND_CHARS:
            # Heredoc bodies are data: without them, a long commit message still commits.
            stripped = (
                _without_heredoc_bodies(command, clock)
                if len(command) <= MAX_HEREDOC_SCAN_CHARS
                else command
            )
            if len(stripped) > MAX_COMMAND_CHARS:
                without = (
                    f" ({len(stripped)} without its heredoc bodies)"
                    if len(stripped) < len(command)
                    else ""
                )
                return Explanation(
                    actions=(),
                    parser="none",
                    notes=(
                        f"command is {len(command)} characters long{without}; commands over "
                        f"{MAX_COMMAND_CHARS} are not analyzed",
                    ),
                    too_long=len(stripped),
                ), clock
            stripped_note = (
                f"heredoc bodies (data) left out before the analysis: the command is "
                f"{len(command)} characters, {len(stripped)} without them (the cap is "
                f"{MAX_COMMAND_CHARS})"
            )
            command = stripped
        if not command.strip():
            return Explanation(actions=(), parser="none", notes=("empty command",)), None
        kept: list[MatchedCommand] | None = None
        if on_match is None and self.keep_matched and not as_given:
            kept = []
            on_match = kept.append
        analysis = _Analysis(self.table, clock, aliases)
        analysis.as_given = as_given
        analysis.on_match = on_match
        if stripped_note is not None:
            analysis.note(stripped_note)
        try:
            parser = analysis.run(command, via=(), shell_depth=0)
        except Exception as exc:  # noqa: BLE001 - the matcher never raises; say what broke
            return Explanation(
                actions=(),
                parser="none",
                notes=(f"internal error while matching: {type(exc).__name__}: {exc}",),
            ), clock
        if clock.late:
            analysis.note("matching stopped at the caller's deadline: the rest was not analyzed")
        elif clock.out_of_time:
            analysis.note(
                f"matching stopped at its time budget ({MATCH_CPU_BUDGET_S * 1000:.0f} ms of "
                "CPU): the rest of the command was not analyzed"
            )
        if kept is not None:
            self._keep_matched(_cache_key(given_command, aliases), kept, clock)
        return Explanation(
            actions=tuple(analysis.actions),
            commands=tuple(analysis.commands),
            parser=parser,
            fallback_used=analysis.fallback_used,
            notes=tuple(analysis.notes),
        ), clock
