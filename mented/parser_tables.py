"""bashlex's parser tables, read from a file instead of rebuilt at every start.

bashlex builds the LALR tables of its shell grammar with its copy of PLY's yacc
each time `bashlex.parser` is imported: 0.15 to 0.26 s, longer than a hook's whole
budget, paid by every start of the daemon and by `mentectl explain`. Its yacc has
no way to read them back, so `install()` (called before the first `import bashlex`)
hands bashlex's `yacc.yacc` tables built before:

1. `bashlex_tables.json`, shipped beside this module, built for the grammar of the
   bashlex mented is tested with (`python -m mented.parser_tables` writes it);
2. else (another bashlex) a copy in the user's cache directory
   (`$XDG_CACHE_HOME/mented/`, `~/Library/Caches/mented/` on macOS), written the
   first time that grammar's tables were built;
3. else bashlex builds them, as without mented (`BUILDS` counts it), and the copy
   in the cache is written for the next start.

Tables are used only for the grammar they were built for: the file names a digest
of the grammar (its rules, where they are defined, precedence, tokens), compared
with the one bashlex's parser module defines now. The format is JSON, never a
pickle (a pickle is code, run when read): it is decoded into typed integers and
strings and checked (every state and rule in range, every rule's function one of
bashlex's `p_` functions), so a damaged or hostile file costs a rebuild, never more.
The cache is read only from a directory owned by the user that no one else may
enter (0700), through `mented.untrusted.read_file` (no link followed, bounded).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import sys
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from mented import paths
from mented.untrusted import Refused, open_directory, read_file

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from importlib.machinery import ModuleSpec

SHIPPED = Path(__file__).with_name("bashlex_tables.json")
MAX_TABLES_BYTES = 1 << 20  # bashlex 0.18's tables take 90 KB
CACHE_PREFIX = "bashlex-tables-"

# Parser tables built (not read) in this process: 0 after a start that read them.
BUILDS = 0
# Why the tables were built rather than read (None: they were read, or not needed yet).
problem: str | None = None
_BUILD_ENV = "MENTED_BASHLEX_TABLES"  # "build": build them, write no cache (`main`)
_built: bytes | None = None  # the tables built in this process, encoded


class Tables(msgspec.Struct, frozen=True, kw_only=True):
    """An LALR parser's tables, as bashlex's yacc builds them (before bashlex patches them)."""

    grammar: str  # `grammar_digest` of the grammar they were built for
    productions: list[tuple[str, list[str], str | None]]  # rule name, right side, function
    action: dict[int, dict[str, int]]  # state -> token -> shift (>0), reduce (<0), accept (0)
    goto: dict[int, dict[str, int]]  # state -> rule name -> state


_decoder = msgspec.json.Decoder(Tables)


def grammar_digest(pdict: dict[str, Any]) -> str:
    """What decides the tables of the grammar in `pdict` (a parser module's namespace)."""
    rules = sorted(
        (name, value.__code__.co_firstlineno, value.__doc__ or "")
        for name, value in pdict.items()
        if name.startswith("p_") and isinstance(value, types.FunctionType)
    )
    described = [pdict.get("tokens"), pdict.get("precedence"), pdict.get("start"), rules]
    return hashlib.sha256(msgspec.json.encode(described)).hexdigest()


def cache_dir() -> Path:
    """The user's cache directory for mented."""
    if sys.platform == "darwin":
        return paths.home() / "Library" / "Caches" / "mented"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else paths.home() / ".cache"
    return base / "mented"


def decode_tables(data: bytes, pdict: dict[str, Any], digest: str) -> Tables:
    """The tables in `data`, checked against the grammar in `pdict`.

    Raises:
        ValueError: not tables for this grammar, or not consistent.
    """
    try:
        tables = _decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise ValueError(f"not parser tables: {exc}") from None
    if tables.grammar != digest:
        raise ValueError("built for another grammar (another bashlex)")
    states, rules = len(tables.action), len(tables.productions)
    if not rules or set(tables.action) != set(range(states)):
        raise ValueError("the states are not numbered from 0")
    for _, _, function in tables.productions:
        if function is not None and not (
            function.startswith("p_") and isinstance(pdict.get(function), types.FunctionType)
        ):
            raise ValueError(f"names a function bashlex does not define: {function!r}")
    for row in tables.action.values():
        for value in row.values():
            if value >= states or -value >= rules:
                raise ValueError(f"an action out of range: {value}")
    for state, row in tables.goto.items():
        if not 0 <= state < states or not all(0 <= value < states for value in row.values()):
            raise ValueError(f"a goto out of range in state {state}")
    return tables


def install() -> None:
    """Make bashlex's parser use tables built before; call before `import bashlex`.

    Does nothing when bashlex was imported already (its tables are built then).
    """
    if "bashlex.yacc" in sys.modules or any(
        isinstance(finder, _YaccFinder) for finder in sys.meta_path
    ):
        return
    sys.meta_path.insert(0, _YaccFinder())


class _YaccFinder:
    """Finds `bashlex.yacc` as the usual finders do, and patches it once it has run."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname != "bashlex.yacc":
            return None
        sys.meta_path.remove(self)
        import importlib.machinery  # noqa: PLC0415 - only here, and the interpreter has it loaded

        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run_module = loader.exec_module

        def exec_module(module: types.ModuleType) -> None:
            run_module(module)
            setattr(module, "yacc", _reading_tables(module, getattr(module, "yacc")))  # noqa: B009, B010 - bashlex's untyped module

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _reading_tables(yacc: types.ModuleType, build: Callable[..., Any]) -> Callable[..., Any]:
    """bashlex's `yacc.yacc`, for bashlex's own parser from tables built before."""

    def yacc_with_tables(*args: Any, **kwargs: Any) -> Any:  # noqa: ANN401 - untyped yacc
        # yacc finds the grammar in its caller's namespace: bashlex.parser's, at import.
        caller = sys._getframe(1).f_globals  # noqa: SLF001 - as yacc itself finds it
        module = sys.modules.get(str(caller.get("__name__")))
        kwargs.setdefault("module", module)
        if caller.get("__name__") != "bashlex.parser" or args or kwargs.get("start"):
            return build(*args, **kwargs)  # another grammar: as bashlex's yacc does
        return _bashlex_parser(yacc, build, caller, kwargs)

    return yacc_with_tables


def _bashlex_parser(
    yacc: types.ModuleType,
    build: Callable[..., Any],
    pdict: dict[str, Any],
    kwargs: dict[str, Any],
) -> Any:  # noqa: ANN401 - bashlex's yacc is untyped
    global BUILDS, problem, _built  # noqa: PLW0603 - what this process did, for tests
    digest = grammar_digest(pdict)
    found = _stored_tables(pdict, digest)
    if isinstance(found, Tables):
        parser = _parser_from(yacc, pdict, found)
        setattr(yacc, "parse", parser.parse)  # noqa: B010 - as yacc.yacc leaves it
        return parser
    problem = found
    BUILDS += 1
    parser = build(**kwargs)
    # Taken now: bashlex patches a few of the tables once yacc returns them.
    built = Tables(
        grammar=digest,
        productions=[(rule.name, list(rule.prod), rule.func) for rule in parser.productions],
        action={state: dict(row) for state, row in parser.action.items()},
        goto={state: dict(row) for state, row in parser.goto.items()},
    )
    _built = msgspec.json.encode(built)
    if os.environ.get(_BUILD_ENV) != "build":
        _write_cache(_built, digest)
    return parser


def _stored_tables(pdict: dict[str, Any], digest: str) -> Tables | str:
    """The tables of the shipped file, else of the user's cache; else why neither."""
    if os.environ.get(_BUILD_ENV) == "build":
        return f"{_BUILD_ENV}=build"
    try:
        return decode_tables(read_file(SHIPPED, limit=MAX_TABLES_BYTES), pdict, digest)
    except (OSError, Refused, ValueError) as exc:
        shipped = f"{SHIPPED.name}: {exc}"
    directory = cache_dir()
    try:
        fd = private_directory(directory)
    except (OSError, Refused) as exc:
        return f"{shipped}; cache: {exc}"
    try:
        data = read_file(_cache_name(digest), dir_fd=fd, limit=MAX_TABLES_BYTES)
        return decode_tables(data, pdict, digest)
    except FileNotFoundError:
        return f"{shipped}; not in {directory} yet"
    except (OSError, Refused, ValueError) as exc:
        return f"{shipped}; {directory}: {exc}"
    finally:
        os.close(fd)


def _parser_from(yacc: types.ModuleType, pdict: dict[str, Any], tables: Tables) -> Any:  # noqa: ANN401
    """bashlex's LR parser on `tables`, its rules bound to the functions in `pdict`."""
    productions = []
    for number, (name, right, function) in enumerate(tables.productions):
        production = yacc.Production(number, name, right, func=function)
        production.bind(pdict)
        productions.append(production)
    built = types.SimpleNamespace(
        lr_productions=productions, lr_action=tables.action, lr_goto=tables.goto
    )
    return yacc.LRParser(built, pdict.get("p_error"))


def _cache_name(digest: str) -> str:
    return f"{CACHE_PREFIX}{digest[:32]}.json"


def private_directory(directory: Path, *, create: bool = False) -> int:
    """`directory` opened, checked to be the user's own and closed to everyone else.

    Raises:
        Refused: it is not (another user's, or open to others: not read from).
        OSError: it cannot be opened (or made, with `create`).
    """
    if create:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = open_directory(directory)
    info = os.fstat(fd)
    if info.st_uid != os.geteuid() or stat.S_IMODE(info.st_mode) & 0o077:
        os.close(fd)
        raise Refused(
            f"{directory} is not private to you (owner uid {info.st_uid}, mode "
            f"{stat.S_IMODE(info.st_mode):o}): the cache is read only from a 0700 "
            "directory of yours"
        )
    return fd


def _write_cache(data: bytes, digest: str) -> None:
    """Keep `data` in the user's cache for the next start; quietly not, where it cannot be."""
    write_cached(_cache_name(digest), data)


def write_cached(name: str, data: bytes) -> None:
    """Write `data` as `name` in the user's private cache directory, whole or not at all.

    Quietly not, where it cannot be (a read-only home, a sandboxed service: the next
    start builds again): through a partial file renamed, never following a link.
    """
    try:
        fd = private_directory(cache_dir(), create=True)
    except (OSError, Refused):
        return
    partial = f".{name}.{os.getpid()}"
    try:
        out = os.open(
            partial,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
            dir_fd=fd,
        )
        with os.fdopen(out, "wb") as handle:
            handle.write(data)
        os.replace(partial, name, src_dir_fd=fd, dst_dir_fd=fd)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(partial, dir_fd=fd)
    finally:
        os.close(fd)


def main() -> None:
    """Write the shipped tables for the installed bashlex: `python -m mented.parser_tables`."""
    os.environ[_BUILD_ENV] = "build"
    install()
    import bashlex  # noqa: F401, PLC0415 - imported to build its tables

    if _built is None:
        raise SystemExit("bashlex was imported before its tables could be taken")
    SHIPPED.write_bytes(_built + b"\n")
    print(f"wrote {SHIPPED} ({len(_built)} bytes)")


if __name__ == "__main__":
    main()
