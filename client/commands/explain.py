"""Placeholder: this group of verbs is being written (see the open issues)."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """No verbs yet."""
