"""What every `hitl` subcommand module shares: the parser, the program name, config effects.

Its own module so that `cli.py` can import the modules of its subcommands (`agent_cli`,
`journal_cli`) by plain imports, and they can use these without importing `cli` back.
"""

from __future__ import annotations

import argparse
import sys

from hitl_tui.model import UsageError

PROG = "hitl"


class Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see '{self.prog} --help')")


def use_config(config) -> None:
    """What the rest of the command takes from the config beyond its arguments."""
    from hitl_tui import retention

    retention.use(config.journal_keep)  # `--config FILE` may not be the default file


def print_warnings(inbox) -> None:
    """Each configuration problem of the inbox's repositories once, on stderr: a repository
    whose project.md cannot be read is a warning, never a block (stdout stays the listing)."""
    from hitl_tui.textio import printable

    for warning in inbox.warnings:
        print(f"hitl: warning: {printable(warning)}", file=sys.stderr)
