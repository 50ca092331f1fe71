"""`hitl restart`, and the restart `hitl answer` runs once an answer is written (`[[loop]]`).

The answer is written whatever the restart does: a restart that fails or hangs is one line on
stderr naming its log, and `hitl answer` still exits 0 (`hitl restart ID` retries it). The
answer waiting for its loop (`resume.json`) is then *restart failed*, with why and the log, for
`hitl status` and the app, until a restart succeeds.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from hitl_tui.cli.base import PROG, Parser, open_inbox, resolve
from hitl_tui.loops.commands import Ran, loop_for, shown
from hitl_tui.model import Block, UsageError
from hitl_tui.textio import printable

if TYPE_CHECKING:
    from hitl_tui.answers.service import Answered


def build_restart() -> argparse.ArgumentParser:
    p = Parser(
        prog=f"{PROG} restart",
        description="Run the restart command of the [[loop]] that covers a block's repository\n"
        "(from your config only), in that repository, and say how it went.",
        epilog="examples:\n"
        "  hitl restart shop\n"
        "  hitl restart billing/T-007 ~/loops\n\n"
        "TARGET may also be an answered block waiting for its loop ('hitl status'): it\n"
        "waits again, with a new deadline; if the restart fails it is 'restart failed'.\n"
        "The command's output is kept in the state folder (loops/*.log).\n"
        "exit codes: 0 it ran and exited 0; 1 it failed, hung (timeout_seconds), was not\n"
        "found, or was refused (a value it needs holds a control character); 2 bad usage,\n"
        "no such block, or no [[loop]] restart covers its repository.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", metavar="TARGET", help="block file, repository, or id")
    p.add_argument("paths", nargs="*", metavar="PATH", help="where to look (default: config)")
    p.add_argument("--config", metavar="FILE", help="TOML config file")
    return p


def run_restart(args: argparse.Namespace) -> int:
    from hitl_tui.answers import service
    from hitl_tui.config import load_config

    config = load_config(args.config)
    _config, inbox = open_inbox(args, config)
    waiting = None
    try:
        block = resolve(args, inbox)[1]
    except UsageError:
        # An answered block waiting for its loop (`hitl status`): by id, journal entry or key.
        waiting = inbox.resumes.get(args.target) if inbox.resumes is not None else None
        if waiting is None:
            raise
        block = waiting.as_block()
    loop = loop_for(config.loops, block)
    if loop is None or loop.restart is None:
        raise UsageError(
            f"{block.id}: no [[loop]] with a restart covers {block.repo} "
            "(see the README: Restarting loops)"
        )
    record = waiting.id if waiting is not None else None
    ran, again = service.run_restart(block, loop, inbox.resumes, record, waits_again=True)
    say_ran(block, ran)
    if not ran.ok:
        return 1
    if again is not None:
        print(
            printable(
                f"{block.id}: waiting for the loop again, until "
                f"{again.deadline.astimezone().strftime('%H:%M:%S')} "
                f"(restart {again.restarts})"
            )
        )
    return 0


def say_ran(block: Block, ran: Ran) -> None:
    """How the restart for `block` went, on stdout / stderr (a refused one: the one line
    naming the value, on stderr)."""
    if ran.refused:
        print(f"hitl: {ran.problem}", file=sys.stderr)
        return
    where = f" (output: {ran.log})" if ran.log else ""
    if ran.ok:
        print(printable(f"{block.id}: restarted: {shown(ran.argv)}"))
        return
    print(
        printable(f"hitl: {block.id}: restart failed ({ran.problem}): {shown(ran.argv)}{where}"),
        file=sys.stderr,
    )


def say_restarted(answered: Answered) -> None:
    """How the restart after `hitl answer` went (`service.restart_after`), if one ran."""
    if answered.ran is not None:
        say_ran(answered.plan.block, answered.ran)
