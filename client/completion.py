"""Shell completion for mentectl (bash, zsh, fish), written from its parser.

`mentectl completion SHELL` prints the script; each shell's code finds the verb
typed so far (`mentectl rule add ...`: the words that name verbs, the values of
options that take one skipped), then offers that verb's subcommands, options,
or the choices of the option before the cursor (files when it has none). The
tables come from `parser_tree`: a new option or verb completes without a change
here.
"""

from __future__ import annotations

import shlex

from mented_client.parser_tree import Command

SHELLS = ("bash", "zsh", "fish")


def _words(items: list[str]) -> str:
    return " ".join(items)


def _tables(root: Command) -> dict[str, dict[str, str]]:
    """Per command key: its subcommands, options, options that take a value, the choices
    of its positional arguments; and per "key OPTION", that option's choices."""
    subs, opts, takes, choices, option_choices = {}, {}, {}, {}, {}
    for command in root.walk():
        key = command.key
        subs[key] = _words(list(command.commands))
        opts[key] = _words([s for option in command.options for s in option.strings])
        takes[key] = _words(
            [s for option in command.options if option.takes_value for s in option.strings]
        )
        choices[key] = _words([c for positional in command.positionals for c in positional.choices])
        for option in command.options:
            if option.choices:
                for string in option.strings:
                    option_choices[f"{key} {string}"] = _words(option.choices)
    return {
        "subs": subs,
        "opts": opts,
        "takes": takes,
        "choices": choices,
        "optchoices": option_choices,
    }


def _assoc(name: str, table: dict[str, str], declare: str) -> str:
    lines = [f"{declare} {name}=("]
    lines.extend(f"  [{shlex.quote(key)}]={shlex.quote(value)}" for key, value in table.items())
    lines.append(")")
    return "\n".join(lines)


_BASH = r"""
_mentectl() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local path=mentectl i w
    for ((i = 1; i < COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        if [[ " ${_mentectl_takes[$path]} " == *" $w "* ]]; then
            ((i++))
        elif [[ " ${_mentectl_subs[$path]} " == *" $w "* ]]; then
            path="$path $w"
        fi
    done
    if [[ " ${_mentectl_takes[$path]} " == *" $prev "* ]]; then
        local values=${_mentectl_optchoices["$path $prev"]}
        if [[ -n $values ]]; then
            COMPREPLY=($(compgen -W "$values" -- "$cur"))
        else
            COMPREPLY=($(compgen -f -- "$cur"))
        fi
    elif [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "${_mentectl_opts[$path]}" -- "$cur"))
    else
        COMPREPLY=($(compgen -W "${_mentectl_subs[$path]} ${_mentectl_choices[$path]}" -- "$cur"))
    fi
}
complete -F _mentectl mentectl
"""

_ZSH = r"""
_mentectl() {
    local cur=${words[CURRENT]} prev=${words[CURRENT-1]}
    local path=mentectl i w
    for ((i = 2; i < CURRENT; i++)); do
        w=${words[i]}
        if [[ " ${_mentectl_takes[$path]} " == *" $w "* ]]; then
            ((i++))
        elif [[ " ${_mentectl_subs[$path]} " == *" $w "* ]]; then
            path="$path $w"
        fi
    done
    if [[ " ${_mentectl_takes[$path]} " == *" $prev "* ]]; then
        local values=${_mentectl_optchoices[$path $prev]}
        if [[ -n $values ]]; then
            compadd -- ${=values}
        else
            _files
        fi
    elif [[ $cur == -* ]]; then
        compadd -- ${=_mentectl_opts[$path]}
    else
        compadd -- ${=_mentectl_subs[$path]} ${=_mentectl_choices[$path]}
    fi
}
compdef _mentectl mentectl
"""


def bash_script(root: Command) -> str:
    tables = _tables(root)
    head = "# bash completion for mentectl: `source <(mentectl completion bash)`"
    arrays = "\n".join(
        _assoc(f"_mentectl_{name}", table, "declare -gA") for name, table in tables.items()
    )
    return f"{head}\n{arrays}\n{_BASH.lstrip()}"


def zsh_script(root: Command) -> str:
    tables = _tables(root)
    head = (
        "#compdef mentectl\n"
        "# zsh completion for mentectl: `source <(mentectl completion zsh)` after compinit,\n"
        "# or save it as _mentectl in a directory of $fpath"
    )
    arrays = "\n".join(
        _assoc(f"_mentectl_{name}", table, "typeset -gA") for name, table in tables.items()
    )
    return f"{head}\n{arrays}\n{_ZSH.lstrip()}"


def _fish_switch(function: str, table: dict[str, str]) -> str:
    lines = [f"function {function}", "    switch $argv[1]"]
    for key, value in table.items():
        if value:
            lines += [f"        case {shlex.quote(key)}", f"            printf '%s\\n' {value}"]
    lines += ["    end", "end"]
    return "\n".join(lines)


_FISH_PATH = """
function __mentectl_path
    set -l path mentectl
    set -l skip 0
    for w in (commandline -opc)[2..-1]
        if test $skip = 1
            set skip 0
        else if contains -- $w (__mentectl_takes $path)
            set skip 1
        else if contains -- $w (__mentectl_subs $path)
            set path "$path $w"
        end
    end
    echo $path
end
"""


def fish_script(root: Command) -> str:
    tables = _tables(root)
    lines = [
        "# fish completion for mentectl: `mentectl completion fish | source`, or save it",
        "# as ~/.config/fish/completions/mentectl.fish",
        "complete -c mentectl -f",
        _fish_switch("__mentectl_subs", tables["subs"]),
        _fish_switch("__mentectl_takes", tables["takes"]),
        _FISH_PATH.strip(),
    ]
    for command in root.walk():
        at = shlex.quote(f"test (__mentectl_path) = {shlex.quote(command.key)}")
        for name, sub in command.commands.items():
            lines.append(
                f"complete -c mentectl -n {at} -a {shlex.quote(name)} -d {shlex.quote(sub.help)}"
            )
        lines.extend(
            f"complete -c mentectl -n {at} -a {shlex.quote(' '.join(positional.choices))}"
            for positional in command.positionals
            if positional.choices
        )
        for option in command.options:
            spec = []
            for string in option.strings:
                if string.startswith("--"):
                    spec.append(f"-l {shlex.quote(string[2:])}")
                elif len(string) == 2:
                    spec.append(f"-s {shlex.quote(string[1:])}")
                else:
                    spec.append(f"-o {shlex.quote(string[1:])}")
            if option.takes_value and option.choices:  # -x: its choices, no files
                spec.append(f"-x -a {shlex.quote(' '.join(option.choices))}")
            elif option.takes_value:  # a value, a file by default
                spec.append("-r -F")
            if option.help:
                spec.append(f"-d {shlex.quote(option.help)}")
            lines.append(f"complete -c mentectl -n {at} {' '.join(spec)}")
    return "\n".join(lines) + "\n"


def script(shell: str, root: Command) -> str:
    """The completion script for `shell` (one of `SHELLS`)."""
    return {"bash": bash_script, "zsh": zsh_script, "fish": fish_script}[shell](root)
