"""`hitl listen [PATH...]`: the notices and the Telegram bot, with no terminal (a server, a
`systemd --user` unit). It watches the repositories as the app does, sends each new block and
each answer not resumed on the `[notify]` channels, and runs the `[telegram]` bot (when this
hitl holds its poller claim; otherwise it says who does, and takes over when that one ends).
SIGTERM and SIGINT end it cleanly (exit 0).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

from hitl_tui.cli.base import PROG, Parser, add_common, open_inbox, print_warnings
from hitl_tui.model import UsageError

#: Seconds between two looks for answers whose loop is past its deadline.
LATE_EVERY = 15.0

EPILOG = """\
It runs until SIGTERM or SIGINT (Ctrl+C), and logs one line per event on stderr (the
token of [telegram] is never printed). Only one hitl polls a bot: a second one says which
process does (pid, host, since) and waits for its turn. The notices of [notify] are
claimed like the app's: one per block across every hitl of the operator.

config:
  [telegram]
  token_env = "HITL_TELEGRAM_TOKEN"   # the bot token, from the environment only
  chat_id = 123456789                 # the only chat that may answer
  allowed_user_ids = [42]             # optional, in a group: who may answer
  api = "https://api.telegram.org"    # or a self-hosted Bot API server
"""


def build_listen() -> argparse.ArgumentParser:
    p = Parser(
        prog=f"{PROG} listen",
        description="Run the notices and the Telegram bot without a terminal: new blocks "
        "sent, taps and replies written as answers.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common(p)
    return p


def log(line: str) -> None:
    from hitl_tui.textio import printable

    print(f"hitl listen: {printable(line)}", file=sys.stderr, flush=True)


def run_listen(args: argparse.Namespace) -> int:
    from hitl_tui.config import load_config
    from hitl_tui.loops import notices

    config = load_config(args.config)
    channels = notices.channels(config.notify, os.environ)
    if config.telegram is None and not channels:
        raise UsageError(
            "nothing to listen for: the config has no [telegram] table and no [notify] "
            "channel (desktop, command, webhook)"
        )
    if config.telegram is not None:
        config.telegram.token(os.environ)  # refused before anything starts
    config, inbox = open_inbox(args, config)
    print_warnings(inbox)
    runner = None
    if config.telegram is not None:
        from hitl_tui.telegram.bot import start_bot

        runner = start_bot(
            config.telegram,
            inbox,
            config.loops,
            config.operator_name(),
            os.environ,
            log=lambda line: log(f"telegram: {line}"),
        )
    repos = len(inbox.workspace.repos)
    telegram = "" if runner is None else f"; telegram: {runner.state[1]}"
    log(
        f"watching {repos} repositor{'y' if repos == 1 else 'ies'}, "
        f"{len(inbox.blocks)} open{telegram}"
    )
    import asyncio  # here: `hitl list` and the other commands start without it

    try:
        asyncio.run(_listen(inbox, config, runner))
    finally:
        if runner is not None:
            runner.stop()
        notices.stop_all()
    log("stopped")
    return 0


async def _listen(inbox, config, runner) -> None:
    import asyncio

    from hitl_tui.inbox.watch import watch_inbox
    from hitl_tui.loops import notices

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    cfg = config.notify

    def notice(make, shared) -> None:
        if not cfg.wants(make.kind) or not notices.channels(cfg, os.environ):
            return

        def send() -> None:
            for line in notices.send_shared(shared, cfg):
                log(f"notice not sent: {line}")

        threading.Thread(target=send, name="hitl-notice", daemon=True).start()

    async def on_delta(delta) -> None:
        if runner is not None:
            runner.wake()
        if delta.added:
            notice(notices.new_blocks(delta.added), notices.shared_new(delta.added))

    async def deadlines() -> None:
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), LATE_EVERY)
            except TimeoutError:
                pass
            book = inbox.resumes
            if book is None or stop.is_set():
                continue
            try:
                late = await asyncio.to_thread(book.due)
            except Exception as exc:
                log(f"could not look at the answers waiting: {type(exc).__name__}")
                continue
            if late:
                notice(notices.not_resumed(late), notices.shared_late(late))
                if runner is not None:
                    runner.wake()

    def on_error(exc: Exception) -> None:
        log(f"watching hit an error (still watching): {type(exc).__name__}: {exc}")

    said_limit = False

    def on_limit(limit) -> None:
        # Past the kernel's limit on inotify watches: said once (the unit's journal shows it);
        # the repositories past it are polled all the same.
        nonlocal said_limit
        if limit is not None and not said_limit:
            said_limit = True
            log(limit.message())

    timer = asyncio.ensure_future(deadlines())
    try:
        while not stop.is_set():
            try:
                await watch_inbox(inbox, on_delta, stop, on_error=on_error, on_limit=on_limit)
            except Exception as exc:
                on_error(exc)
                try:
                    await asyncio.wait_for(stop.wait(), 2)
                except TimeoutError:
                    pass
    finally:
        stop.set()
        await timer
