"""`hitl list --json --watch PATH...`: the machine side of a remote host (`wire` is the format).

Prints the whole list as one line, then one line per change the real watcher sees, and an
`alive` line every few seconds, until its stdin closes (the operator's ssh went away) or it is
interrupted. The operator's hitl runs it over ssh (`sources.ssh`); a script can too.

Only the PATHs' files are listed: the remote backends of this machine's config (GitHub) are the
operator's to poll, not this machine's.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from collections.abc import Callable

from hitl_tui.inbox.inbox import Delta, Inbox
from hitl_tui.sources.ssh import wire


def run_watch(inbox: Inbox, alive_every: float = wire.ALIVE_EVERY) -> int:
    """Stream `inbox` (scanned) to stdout until stdin closes; 0, or 1 if stdout went away."""
    out = sys.stdout.buffer
    try:
        return asyncio.run(_stream(inbox, out.write, out.flush, alive_every))
    except BrokenPipeError:
        return 1


def _encoder() -> Callable[[dict], bytes]:
    from hitl_tui.textio import json_encoder

    encode = json_encoder()
    return lambda data: (encode(data) + "\n").encode("utf-8", "surrogateescape")


async def _stream(inbox: Inbox, write, flush, alive_every: float) -> int:
    from hitl_tui.inbox.watch import watch_inbox

    encode = _encoder()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    gone = False

    def send(*events: dict) -> None:
        nonlocal gone
        if gone:
            return
        try:  # only ever called on the loop: one writer
            for event in events:
                write(encode(event))
            flush()
        except (BrokenPipeError, OSError, ValueError):
            gone = True  # the reader is gone: stop watching
            loop.call_soon_threadsafe(stop.set)

    def until_stdin_closes() -> None:
        # The raw descriptor, not sys.stdin: a daemon thread blocked in a buffered read
        # holds its lock, and the interpreter aborts at exit on it.
        try:
            while os.read(0, 65536):
                pass
        except OSError:
            pass
        with contextlib.suppress(RuntimeError):  # the loop has closed: we are exiting anyway
            loop.call_soon_threadsafe(stop.set)

    threading.Thread(target=until_stdin_closes, name="stdin", daemon=True).start()
    warnings = list(inbox.warnings)
    send(wire.list_event(inbox.sorted_blocks(), warnings))

    async def on_delta(delta: Delta) -> None:
        nonlocal warnings
        events = [{"event": "added", "block": wire.block_to_wire(b)} for b in delta.added]
        events += [{"event": "changed", "block": wire.block_to_wire(b)} for b in delta.changed]
        events += [wire.removed_event(key) for key in delta.removed]
        now = list(inbox.warnings)
        if now != warnings:
            warnings = now
            events.append({"event": "warnings", "warnings": now})
        if events:
            send(*events)

    async def heartbeat() -> None:
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), alive_every)
            except TimeoutError:
                send(wire.alive_event())

    said = False

    def on_limit(limit) -> None:
        # Past the kernel's limit on inotify watches: said once on stderr (the operator's ssh
        # shows it), and in the stream's warnings (the operator's app lists it).
        nonlocal said, warnings
        if limit is not None and not said:
            said = True
            with contextlib.suppress(OSError, ValueError):
                print(f"hitl: {limit.message()}", file=sys.stderr, flush=True)
        now = list(inbox.warnings)
        if now != warnings:
            warnings = now
            send({"event": "warnings", "warnings": now})

    beat = asyncio.ensure_future(heartbeat())
    try:
        await watch_inbox(inbox, on_delta, stop, on_limit=on_limit)
    finally:
        stop.set()
        await beat
    return 1 if gone else 0
