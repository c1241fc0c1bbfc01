"""mented: a per-user daemon that hands AI coding agents the user's action rules.

General layout (imports point downward; nothing imports upward):

- `memory.py`    the memory record, ids, trigger-tag rules. Imports nothing of ours.
- `paths.py`     where the socket, data, config and logs live.
- `untrusted.py` the one reader of places mented does not own (no link, bounded).
- `config.py`    the user's config file (hook settings, delivery modes, actions).
- `log.py`       structlog set-up: JSON lines on stderr, readable on a terminal.
- `store/`       the LMDB store: records, the trigger index, supersession,
                 the one visibility predicate. Knows nothing of agents' formats;
                 its `__init__` maps its layers (environment up to bulk import).
- `path_patterns.py` .gitignore patterns matched in linear time; why one is refused.
- `actions.py`   the action table (built-ins in `actions.toml` + the user's config).
- `edits.py`     the actions an edit of a file performs, by the table's path patterns.
- `cputime.py`   a thread's CPU time without its garbage collections (budgets).
- `matcher/`     names the actions a shell command performs (bashlex + fallback);
                 its `__init__` maps its modules: lexer, walk, shapes, cache.
- `protocol.py`  frames and the tagged request/reply structs on the wire.
- `agents/`      one module per agent: decode its hook event, render its output.
- `agent_names.py` the agents' names alone, for clients that check `--agent`.
- `sessions.py`  what each agent session was handed (kept across restarts).
- `handover.py`  the words the model reads: rules in full, or a one-line pointer.
- `team.py`      a project's committed rules (`.mented/`): found, read untrusted, trusted.
- `team_reads.py` the daemon's reads of those off its event loop, within a deadline.
- `git_commits.py` the commit a command just made, read from `.git` (git is not run).
- `afterchecks.py` after a command ran: the checks unknown before, on what it did.
- `hooks.py`     a hook request end to end: event -> actions -> rules -> bytes.
- `events.py`    the event hub: hook fires, rule changes, reloads pushed to subscribers.
- `activity.py`  the record of hook fires `mentectl log` reads (kept across restarts).
- `service.py`   service-manager glue: socket activation, sd_notify, launchd.
- `listener.py`  the listening socket: private directory, 0600 from birth.
- `peercred.py`  the peer's uid on a Unix socket (the daemon and its clients check it).
- `lockfile.py`  one daemon per data directory (`flock`, naming the holder).
- `first_answers.py` the first hooks after a start, answered before trio is imported.
- `server/`      the trio server: accept, frame, dispatch, reply; its `__init__` maps
                 its layers (lifecycle, transport, the dispatch table, one module
                 per request family: rules, hooks, facts, travel, status).
- `daemon.py`    `mented`'s command line: parses arguments, answers the first hooks,
                 then runs the server (trio is imported only then).
"""

__version__ = "0.1.0"
