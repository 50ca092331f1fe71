"""One watcher for every repository: watchfiles over folders, never recursive.

A recursive watch costs one inotify watch per folder below it (a big `.git` or `node_modules`
costs thousands), and one watcher per repo runs out of inotify instances (128 per user on Linux).
So there is a single `awatch` over the exact folders the sources name (each repo's root, its task
folder, ...) plus the workspace roots, with `recursive=False`. When that set of folders changes
(a repo or task folder created or deleted) the watcher is restarted on the new set.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import watchfiles

from hitl_tui.inbox import Delta, Inbox

#: Milliseconds the Rust side waits for more events before yielding a batch.
STEP_MS = 15
#: Longest a burst of events is grouped before it is yielded anyway.
DEBOUNCE_MS = 150
#: How soon after (re)starting the watch the blocks are re-read once, to catch what changed
#: between the scan and the watch going live.
CATCH_UP_MS = 200
#: First-seen times learnt from file events are written at most this often (seconds), and
#: once more when the watch stops: a save at 5,000 blocks is milliseconds of the interpreter,
#: and after every batch it slowed the next event's way to the screen.
SINCE_SAVE_EVERY = 10.0


def _changed_since_scan(inbox: Inbox) -> list[Path]:
    """Block files that may have changed while the watch was starting: a stat each, no reads.

    Re-reading every file here would cost a second full scan (seconds at 5,000 blocks, all of
    it competing with the UI for the interpreter); a file's mtime says whether it was written
    after the scan began, and a block whose file is gone is handed over to be dropped.
    """
    since = inbox.scanned_at - 2.0  # mtime granularity and clock skew on network file systems
    paths: list[Path] = []
    with inbox.lock:
        keys = list(inbox.blocks)
    for _source, path in keys:
        if isinstance(path, Path) and not os.path.lexists(path):
            paths.append(path)
    for repo in inbox.workspace.repos:
        for source in inbox.sources:
            for path in source.block_files(repo):
                try:
                    if os.stat(path).st_mtime >= since:
                        paths.append(path)
                except OSError:
                    continue
    return paths


class _Aliases:
    """Names watchfiles can take for folders whose own name it cannot.

    watchfiles passes paths to Rust as UTF-8 strings, so a folder whose name has undecodable
    bytes (`caf\\xe9-shop`, a lone surrogate in Python) makes the whole watch fail, for every
    repository. Such a folder is opened and watched as `/proc/self/fd/N` (inotify follows the
    link to the folder itself), and the events' paths are mapped back. Where /proc is missing
    the folder is left unwatched (its blocks still show at start-up and on a rescan).
    """

    def __init__(self, dirs: list[Path]) -> None:
        self.names: list[str] = []
        self.back: dict[str, Path] = {}
        self.fds: list[int] = []
        for folder in dirs:
            name = os.fspath(folder)
            try:
                name.encode("utf-8")
            except UnicodeEncodeError:
                alias = self._alias(folder)
                if alias is None:
                    continue
                self.back[alias] = folder
                name = alias
            self.names.append(name)

    def _alias(self, folder: Path) -> str | None:
        try:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return None
        self.fds.append(fd)
        alias = f"/proc/self/fd/{fd}"
        return alias if os.path.isdir(alias) else None

    def path(self, name: str) -> Path:
        if self.back:
            for alias, folder in self.back.items():
                if name == alias:
                    return folder
                if name.startswith(alias + "/"):
                    return folder / name[len(alias) + 1 :]
        return Path(name)

    def close(self) -> None:
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds.clear()


def _accept(change: watchfiles.Change, path: str) -> bool:
    # Editors' and our own temp files never hold a block.
    name = path.rsplit("/", 1)[-1]
    return not (name.startswith(".hitl-tmp-") or name.endswith(("~", ".swp")))


async def watch_inbox(
    inbox: Inbox,
    on_delta: Callable[[Delta], Awaitable[None] | None],
    stop: asyncio.Event,
    on_ready: Callable[[list[Path]], None] | None = None,
    on_error: Callable[[Exception], None] | None = None,
) -> None:
    """Feed file events into `inbox` until `stop` is set; call `on_delta` for each change.

    Parsing runs in a thread so that a caller on an event loop (the TUI) stays responsive.
    """
    saver = _SinceSaver(inbox)
    try:
        await _watch_until(inbox, on_delta, stop, on_ready, on_error, saver)
    finally:
        saver.flush()


async def _watch_until(
    inbox: Inbox,
    on_delta: Callable[[Delta], Awaitable[None] | None],
    stop: asyncio.Event,
    on_ready: Callable[[list[Path]], None] | None,
    on_error: Callable[[Exception], None] | None,
    saver: _SinceSaver,
) -> None:
    while not stop.is_set():
        dirs = inbox.watch_dirs()
        restart = asyncio.Event()
        combined = _Either(stop, restart)
        if on_ready is not None:
            on_ready(dirs)
        if not dirs:
            # Nothing to watch yet (every path vanished): look again shortly.
            await asyncio.sleep(1.0)
            delta = await asyncio.to_thread(inbox.handle, list(inbox.workspace.paths))
            if delta:
                result = on_delta(delta)
                if asyncio.iscoroutine(result):
                    await result
                saver.soon()
            continue
        aliases = _Aliases(dirs)
        try:
            await _watch(inbox, dirs, aliases, on_delta, combined, restart, on_error, saver)
        finally:
            aliases.close()


async def _watch(
    inbox: Inbox,
    dirs: list[Path],
    aliases: _Aliases,
    on_delta: Callable[[Delta], Awaitable[None] | None],
    combined: _Either,
    restart: asyncio.Event,
    on_error: Callable[[Exception], None] | None,
    saver: _SinceSaver,
) -> None:
    """One watch over `dirs`, until it must restart on a new set of folders (or stop)."""
    caught_up = False
    async for changes in watchfiles.awatch(
        *aliases.names,
        watch_filter=_accept,
        recursive=False,
        step=STEP_MS,
        debounce=DEBOUNCE_MS,
        stop_event=combined,
        ignore_permission_denied=True,
        rust_timeout=CATCH_UP_MS,
        yield_on_timeout=True,
    ):
        paths = [aliases.path(p) for _, p in changes]
        first = not caught_up
        if first:
            # The watch is live now: re-read what may have changed while it was starting.
            paths += await asyncio.to_thread(_changed_since_scan, inbox)
            caught_up = True
        if not paths and not first:
            continue
        try:
            delta = await asyncio.to_thread(inbox.handle, paths) if paths else Delta()
            if first:
                # And every answer waiting for its loop: a commit made while the watch was
                # (re)starting has no event of its own.
                delta.waiting += (await asyncio.to_thread(inbox.check_waiting)).waiting
        except Exception as exc:  # a bug must not end live watching for every repo
            if on_error is not None:
                on_error(exc)
            continue
        if delta:
            result = on_delta(delta)
            if asyncio.iscoroutine(result):
                await result
            # Remembered first-seen times are written later, in the background: never on the
            # path from a file event to its row.
            saver.soon()
        if delta.rewatch or set(inbox.watch_dirs()) != set(dirs):
            restart.set()
            return


_BACKGROUND: set[asyncio.Task] = set()


def _in_background(work) -> asyncio.Task:
    """Run `work` without waiting for it (a reference is kept until it is done)."""
    task = asyncio.ensure_future(work)
    _BACKGROUND.add(task)
    task.add_done_callback(_BACKGROUND.discard)
    return task


class _SinceSaver:
    """Writes the inbox's first-seen times at most every SINCE_SAVE_EVERY seconds, in a thread,
    and once more (`flush`) when the watch ends; an unsaved time is only lost on a crash, and
    then the block's age falls back to its file's mtime."""

    def __init__(self, inbox: Inbox) -> None:
        self.inbox = inbox
        self.pending: asyncio.Task | None = None

    def soon(self) -> None:
        if self.pending is None or self.pending.done():
            self.pending = _in_background(self._later())

    async def _later(self) -> None:
        await asyncio.sleep(SINCE_SAVE_EVERY)
        await asyncio.to_thread(self.inbox.save_since)

    def flush(self) -> None:
        """Save now (the watch is ending, possibly because the loop is being cancelled)."""
        if self.pending is not None and not self.pending.done():
            self.pending.cancel()
        self.pending = None
        self.inbox.save_since()


class _Either:
    """An event that is set when either of two asyncio events is (what awatch polls)."""

    def __init__(self, a: asyncio.Event, b: asyncio.Event) -> None:
        self.a, self.b = a, b

    def is_set(self) -> bool:
        return self.a.is_set() or self.b.is_set()

    def set(self) -> None:
        # awatch sets its stop event when it is cancelled: restart, don't stop everything.
        self.b.set()
