"""`hitl restart`, and the restart `hitl answer` runs once an answer is written (`[[loop]]`).

The answer is written whatever the restart does: a restart that fails or hangs is one line on
stderr naming its log, and `hitl answer` still exits 0 (`hitl restart ID` retries it). The
answer waiting for its loop (`resume.json`) is then *restart failed*, with why and the log, for
`hitl status` and the app, until a restart succeeds.
"""

from __future__ import annotations

import argparse
import os
import sys

from hitl_tui.cli.base import PROG, Parser, open_inbox, resolve
from hitl_tui.loops.commands import Loop, Ran, logs_dir, loop_for, run_command, shown
from hitl_tui.model import Block, UsageError
from hitl_tui.textio import printable


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
    ran = restart(block, loop)
    if waiting is not None and inbox.resumes is not None and not ran.ok:
        record_failure(inbox.resumes, waiting.id, ran)
    if not ran.ok:
        return 1
    if waiting is not None and inbox.resumes is not None:
        again = inbox.resumes.restarted(waiting.id)
        if again is not None:
            print(
                printable(
                    f"{block.id}: waiting for the loop again, until "
                    f"{again.deadline.astimezone().strftime('%H:%M:%S')} "
                    f"(restart {again.restarts})"
                )
            )
    return 0


def restart(block: Block, loop: Loop) -> Ran:
    """Run the loop's restart for `block`, saying on stdout / stderr how it went (a refused
    one: the one line naming the value, on stderr)."""
    assert loop.restart is not None
    ran = run_command("restart", loop.restart, block, loop.timeout, logs_dir())
    if ran.refused:
        print(f"hitl: {ran.problem}", file=sys.stderr)
        return ran
    where = f" (output: {ran.log})" if ran.log else ""
    if ran.ok:
        print(printable(f"{block.id}: restarted: {shown(ran.argv)}"))
        return ran
    print(
        printable(f"hitl: {block.id}: restart failed ({ran.problem}): {shown(ran.argv)}{where}"),
        file=sys.stderr,
    )
    return ran


def record_failure(book, record_id: str, ran: Ran) -> None:
    """The answer `record_id` waits for a loop whose restart failed: `resume.json` says so
    (`hitl status`, the app). Never raises: the operator's view only."""
    try:
        book.restart_failed(
            record_id, ran.problem or "failed", os.fsdecode(ran.log) if ran.log else None
        )
    except Exception:
        pass


def after_answer(
    block: Block, loops: tuple[Loop, ...], skip: bool, entry: str | None = None
) -> str | None:
    """Once `hitl answer` wrote (journal `entry`): restart the block's loop unless `skip`; the
    hint to print instead of the source's own ("Restart the loop ...") when it ran, else None
    (a refused restart ran nothing: the source's hint stands). A restart that failed, or was
    refused, is kept with the answer waiting for its loop."""
    loop = loop_for(loops, block)
    if skip or loop is None or loop.restart is None:
        return None
    ran = restart(block, loop)
    if not ran.ok:
        from hitl_tui.loops.records import key_of
        from hitl_tui.loops.resume import ResumeBook

        try:
            book = ResumeBook.for_state()
            record = book.get(entry or key_of(block))
        except Exception:
            record = None
        if record is not None and record.is_open and record.key == key_of(block):
            record_failure(book, record.id, ran)
    return None if ran.refused else ""
