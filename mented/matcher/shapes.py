"""Command-shape matching: which actions of the table a program's words perform."""

from __future__ import annotations

import fnmatch
from typing import TYPE_CHECKING

from mented.actions import ANY_WORD
from mented.matcher.options import _parse_arguments, _scan_options
from mented.matcher.results import ShapeMatch

if TYPE_CHECKING:
    from mented.actions import ActionTable, ProgramSpec, Shape


def _match_shapes(
    table: ActionTable, program: str, argv: list[str]
) -> tuple[tuple[ShapeMatch, ...], str, tuple[Shape, ...]]:
    """The actions `argv` performs, why none (or ""), and the shape each matched by."""
    rules = table.shapes_for(program)
    if not rules:
        return (), f"no action involves {program!r}", ()
    spec = table.program(program)
    first = _first_word(spec, argv)
    found: list[ShapeMatch] = []
    shapes: list[Shape] = []
    near = ""
    for action, shape in rules:
        if any(match.action == action for match in found):
            continue
        if (
            first is not None
            and shape.subcommand
            and not shape.options_with_value
            and not _word_matches(shape.subcommand[0], first)
        ):
            continue  # what `_shape_failure` would say, "subcommand X", at a fraction of it
        failure = _shape_failure(spec, shape, argv)
        if failure is None:
            found.append(ShapeMatch(action=action, shape=shape.describe()))
            shapes.append(shape)
        elif failure.startswith("!") and not near:
            near = f"{shape.describe()} [{action}]: {failure[1:]}"
    if found:
        return tuple(found), "", tuple(shapes)
    if near:
        return (), near, ()
    index, _ = _scan_options(argv, 0, spec.options_with_value)
    subcommand = argv[index] if index < len(argv) else ""
    if subcommand:
        return (), f"no action for {program} {subcommand!r}", ()
    return (), f"no action for {program} without a subcommand", ()


def _word_matches(expected: str | tuple[str, ...], word: str) -> bool:
    if isinstance(expected, str):
        return expected in (word, ANY_WORD)
    return word in expected or ANY_WORD in expected


def _first_word(spec: ProgramSpec, argv: list[str]) -> str | None:
    """The subcommand's first word as `_shape_failure` finds it for a shape with no
    options of its own; None when it would stop before (help asked, no word)."""
    index = 0
    while True:
        index, seen = _scan_options(argv, index, spec.options_with_value)
        if any(option in spec.help_flags for option, _ in seen):
            return None
        if index < len(argv) and any(argv[index].startswith(p) for p in spec.skip_prefixes):
            index += 1
            continue
        return argv[index] if index < len(argv) else None


def _shape_failure(spec: ProgramSpec, shape: Shape, argv: list[str]) -> str | None:
    """None when `argv` (the words after the program) has this shape, else why not.

    A reason starting with "!" means the subcommand matched and a condition failed.
    """
    extra = frozenset(shape.options_with_value)
    global_with_value = spec.options_with_value | extra if extra else spec.options_with_value
    index = 0
    matched: list[str] = []
    for expected in shape.subcommand:
        while True:
            index, seen = _scan_options(argv, index, global_with_value)
            if any(option in spec.help_flags for option, _ in seen):
                return "!asks for help"
            if index < len(argv) and any(argv[index].startswith(p) for p in spec.skip_prefixes):
                index += 1
                continue
            break
        if index >= len(argv):
            return "no subcommand"
        if not _word_matches(expected, argv[index]):
            return f"subcommand {argv[index]!r}"
        matched.append(argv[index])
        index += 1
    sub = spec.subcommands.get(" ".join(matched)) if matched else None
    with_value = (sub.options_with_value if sub else frozenset()) | extra
    if not shape.subcommand:
        with_value |= spec.options_with_value
    flags, positionals, values, paths = _parse_arguments(argv, index, with_value)
    if flags & spec.help_flags:
        return "!asks for help"
    if shape.any_flag and not flags.intersection(shape.any_flag):
        return f"!needs one of {', '.join(shape.any_flag)}"
    if shape.no_flag:
        present = sorted(flags.intersection(shape.no_flag))
        if present:
            return f"!has {', '.join(present)}"
    if len(positionals) < shape.min_positionals:
        return f"!needs {shape.min_positionals} positional argument(s), has {len(positionals)}"
    if shape.max_positionals is not None and len(positionals) > shape.max_positionals:
        return (
            f"!takes at most {shape.max_positionals} positional argument(s), has {len(positionals)}"
        )
    if shape.positional_starts_with is not None and not any(
        word.startswith(shape.positional_starts_with) for word in positionals
    ):
        return f"!needs an argument starting with {shape.positional_starts_with!r}"
    if shape.positional_matches is not None and not any(
        fnmatch.fnmatchcase(word, shape.positional_matches) for word in positionals
    ):
        return f"!needs an argument like {shape.positional_matches!r}"
    if shape.no_positional_matches is not None:
        unwanted = [w for w in positionals if fnmatch.fnmatchcase(w, shape.no_positional_matches)]
        if unwanted:
            return f"!has the argument {unwanted[0]!r}"
    if shape.last_positional_matches is not None and not (
        positionals and fnmatch.fnmatchcase(positionals[-1], shape.last_positional_matches)
    ):
        return f"!needs a last argument like {shape.last_positional_matches!r}"
    if shape.paths_after_double_dash and not paths:
        return "!needs paths after --"
    if shape.any_value and not values.intersection(shape.any_value):
        return f"!needs one of {', '.join(shape.any_value)}"
    if shape.no_value:
        present = sorted(values.intersection(shape.no_value))
        if present:
            return f"!has {', '.join(present)}"
    return None
