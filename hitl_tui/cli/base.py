"""What every `hitl` subcommand module shares: the parser, the program name, config effects.

Its own module so that `cli.py` can import the modules of its subcommands (`agent_cli`,
`journal_cli`) by plain imports, and they can use these without importing `cli` back.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from hitl_tui.model import UsageError

PROG = "hitl"


class Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see '{self.prog} --help')")


def add_common(parser: argparse.ArgumentParser, paths: bool = True) -> None:
    """The PATH... every command that reads repositories takes, and --config."""
    if paths:
        parser.add_argument(
            "paths",
            nargs="*",
            metavar="PATH",
            help="repositories, or folders of repositories (default: config, else .)",
        )
    parser.add_argument("--config", metavar="FILE", help="TOML config file")


def use_config(config) -> None:
    """What the rest of the command takes from the config beyond its arguments."""
    from hitl_tui.journal import retention

    retention.use(config.journal_keep)  # `--config FILE` may not be the default file


def print_warnings(inbox) -> None:
    """Each configuration problem of the inbox's repositories once, on stderr: a repository
    whose project.md cannot be read is a warning, never a block (stdout stays the listing)."""
    from hitl_tui.textio import printable

    for warning in inbox.warnings:
        print(f"hitl: warning: {printable(warning)}", file=sys.stderr)


def repo_paths(args: argparse.Namespace, config) -> list[Path]:
    if args.paths:
        return [Path(p) for p in args.paths]
    if config.repos:
        return list(config.repos)
    return [Path.cwd()]


def open_inbox(args: argparse.Namespace, config=None):
    """(config, the inbox of the PATHs, scanned), knowing the config's remote backends."""
    from hitl_tui.config import load_config
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.loops.resume import ResumeBook

    config = config or load_config(args.config)
    use_config(config)
    inbox = Inbox.open(repo_paths(args, config), cached=True)
    inbox.use_remotes(config.remotes)
    inbox.use_resumes(ResumeBook.for_state(), config.loops)
    use_loop_warnings(inbox, config)
    return config, inbox


def use_loop_warnings(inbox, config) -> None:
    """The `[[loop]]` restarts that will fail on the inbox's repositories, among its
    warnings (`loops.restart_warnings`: stderr here, the header and a toast in the app)."""
    from hitl_tui.loops.commands import restart_warnings

    origin = config.path if config.path is not None else "config"
    inbox.config_warnings = restart_warnings(config.loops, inbox.workspace.repos, origin)


def resolve(args: argparse.Namespace, inbox):
    """(inbox, block) for TARGET: in the PATHs or the config, else (a path) in its own repo."""
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.inbox.workspace import is_repo

    try:
        return inbox, inbox.resolve(args.target)
    except UsageError:
        if args.paths or not os.path.lexists(args.target):  # a dangling link may be a block
            raise
        # A block file or repo named by path is found wherever it is: in the nearest folder up
        # that is a repository.
        where = Path(os.path.abspath(args.target))
        repo = next((f for f in [where, *where.parents] if f.is_dir() and is_repo(f)), None)
        if repo is None or repo in inbox.workspace.repos:
            raise
        own = Inbox.open([repo], cached=True)  # its ages as `list` shows them
        own.use_remotes(inbox.remotes)
        own.use_resumes(inbox.resumes, inbox.loops)
        return own, own.resolve(args.target)
