"""`mentectl completion SHELL` and `mentectl man`: written from the parser itself."""

from __future__ import annotations

import argparse
import os
import time

from mented_client.completion import SHELLS


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    completion = subparsers.add_parser(
        "completion",
        help="print shell completion for mentectl (bash, zsh or fish)",
        description="bash: `source <(mentectl completion bash)` (in ~/.bashrc); zsh: "
        "`source <(mentectl completion zsh)` after compinit (in ~/.zshrc); fish: "
        "`mentectl completion fish > ~/.config/fish/completions/mentectl.fish`.",
    )
    completion.add_argument("shell", choices=SHELLS)
    completion.set_defaults(handler=run_completion)
    man = subparsers.add_parser(
        "man",
        help="print mentectl's manual page (read it with `mentectl man | man -l -`)",
    )
    man.set_defaults(handler=run_man)
    del common  # neither talks to the daemon


def run_completion(args: argparse.Namespace) -> int:
    from mented_client.cli import build_parser  # noqa: PLC0415 - every verb, only here
    from mented_client.completion import script  # noqa: PLC0415
    from mented_client.parser_tree import command_tree  # noqa: PLC0415

    print(script(args.shell, command_tree(build_parser())), end="")
    return 0


def run_man(args: argparse.Namespace) -> int:
    from mented_client.cli import build_parser  # noqa: PLC0415 - every verb, only here
    from mented_client.manpage import manpage  # noqa: PLC0415
    from mented_client.parser_tree import command_tree  # noqa: PLC0415

    del args
    # SOURCE_DATE_EPOCH: a reproducible page when packaged (reproducible-builds.org).
    stamp = time.gmtime(int(os.environ.get("SOURCE_DATE_EPOCH") or time.time()))
    print(manpage(command_tree(build_parser()), time.strftime("%Y-%m-%d", stamp)), end="")
    return 0
