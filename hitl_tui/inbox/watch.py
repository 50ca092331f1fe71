"""One watcher for every repository: watchfiles over folders, never recursive.

A recursive watch costs one inotify watch per folder below it (a big `.git` or `node_modules`
costs thousands), and one watcher per repo runs out of inotify instances (128 per user on Linux).
So there is a single `awatch` over the exact folders the sources name (each repo's root, its task
folder, ...) plus the workspace roots, with `recursive=False`. When that set of folders changes
(a repo or task folder created or deleted) the watcher is restarted on the new set.

Nothing made after start-up is missed, by construction: a change made while a folder's watch is
in place has an event; one made before (after the scan, or while a restart adds 10,000 watches)
has none. So once awatch yields for the first time (every watch is in place by then) the files
are looked at (`Inbox.catch_up`): the workspace searched again if a root changed, and every
block file, watched folder and layout file whose mtime or ctime is at or after the previous
look began (the scan's start the first time). Events lost while watching (the kernel's queue
overflowing, a notice watchfiles drops) are made up the same way every CATCH_UP_EVERY seconds.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

import watchfiles

from hitl_tui.inbox.inbox import SLACK, Delta, Inbox

#: Milliseconds the Rust side waits for more events before yielding a batch.
STEP_MS = 15
#: Longest a burst of events is grouped before it is yielded anyway.
DEBOUNCE_MS = 150
#: How soon after (re)starting the watch the files are looked at once (`Inbox.catch_up`), to
#: catch what changed between the scan (or the last watch) and this watch going live.
CATCH_UP_MS = 200
#: Seconds between two catch-ups while a watch runs: what no event said, made up. The kernel's
#: event queue can overflow (16,384 events by default), and watchfiles drops the kernel's
#: notice of it (an event with no path); a folder at the deepest level searched that becomes a
#: repository later has no watch of its own. At 10,000 repositories a catch-up is about
#: 0.3–0.5 s of stats, in a thread: every 30 s, 1–2% of a core.
CATCH_UP_EVERY = 30.0
#: First-seen times learnt from file events are written at most this often (seconds), and
#: once more when the watch stops: a save at 5,000 blocks is milliseconds of the interpreter,
#: and after every batch it slowed the next event's way to the screen.
SINCE_SAVE_EVERY = 10.0


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
        await _watch_until(inbox, on_delta, stop, on_ready, on_error, saver, _CatchUp(inbox))
    finally:
        saver.flush()


async def _watch_until(
    inbox: Inbox,
    on_delta: Callable[[Delta], Awaitable[None] | None],
    stop: asyncio.Event,
    on_ready: Callable[[list[Path]], None] | None,
    on_error: Callable[[Exception], None] | None,
    saver: _SinceSaver,
    catch_up: _CatchUp,
) -> None:
    following: list[Path] | None = None
    while not stop.is_set():
        # In a thread: at 10,000 repositories the folders' stats take a tenth of a second or
        # more, and the inbox's lock may be held by a catch-up; the UI must not wait for either.
        dirs = following if following is not None else await asyncio.to_thread(inbox.watch_dirs)
        following = None
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
            following = await _watch(
                inbox, dirs, aliases, on_delta, combined, restart, on_error, saver, catch_up
            )
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
    catch_up: _CatchUp,
) -> list[Path] | None:
    """One watch over `dirs`, until it must restart on a new set of folders (returned), or
    stop (None)."""
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
        # awatch yields only once every folder's watch is in place (its first yield comes
        # CATCH_UP_MS later, or with the first events): from here on, a change has an event,
        # and what changed before has none, so the files are looked at now, and every
        # CATCH_UP_EVERY seconds for events the kernel or watchfiles lost.
        due = not caught_up or catch_up.due()
        if not paths and not due:
            continue
        caught_up = True
        try:
            delta = await asyncio.to_thread(inbox.handle, paths) if paths else Delta()
            if due:
                delta.merge(await catch_up.run())
        except Exception as exc:  # a bug must not end live watching for every repo
            if on_error is not None:
                on_error(exc)
            continue
        # The folders to watch next, listed in a thread (10,000 stats at 10,000 repositories:
        # on the event loop they froze the app for a tenth of a second and more at each
        # event). When the set of folders changed, before the change is handed on, so that
        # whoever sees it sees the new watch begin (`on_ready`) at once; else after.
        following = await asyncio.to_thread(inbox.watch_dirs) if delta.rewatch else None
        # A delta that only added or changed blocks leaves the folders as they were (a new
        # folder is a rewatch; one gone removes blocks; an answer's folders come with
        # `waiting`): at 10,000 repositories their stats held up the next event by 0.1 s.
        settled = not (delta.rewatch or delta.removed or delta.waiting or due)
        if delta:
            result = on_delta(delta)
            if asyncio.iscoroutine(result):
                await result
            # Remembered first-seen times are written later, in the background: never on the
            # path from a file event to its row.
            saver.soon()
        if settled:
            continue
        if following is None:
            following = await asyncio.to_thread(inbox.watch_dirs)
        if delta.rewatch or set(following) != set(dirs):
            restart.set()
            return following
    return None


_BACKGROUND: set[asyncio.Task[Any]] = set()


def _in_background(work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
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
        self.pending: asyncio.Task[Any] | None = None

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


class _CatchUp:
    """When the files were last looked at (`Inbox.catch_up`), across the watch's restarts: each
    catch-up reads what changed since the one before began (or since the scan began), so the
    time between two watches, when no folder is watched, is covered too."""

    def __init__(self, inbox: Inbox) -> None:
        self.inbox = inbox
        self.since = inbox.scanned_at - SLACK
        self.next = 0.0

    def due(self) -> bool:
        return time.monotonic() >= self.next

    async def run(self) -> Delta:
        began = time.time()
        self.next = time.monotonic() + CATCH_UP_EVERY  # (a failure is retried then)
        delta = await asyncio.to_thread(self.inbox.catch_up, self.since)
        # And every answer waiting for its loop: a commit made meanwhile has no event of its own.
        delta.waiting += (await asyncio.to_thread(self.inbox.check_waiting)).waiting
        self.since = began - SLACK
        return delta


class _Either:
    """An event that is set when either of two asyncio events is (what awatch polls)."""

    def __init__(self, a: asyncio.Event, b: asyncio.Event) -> None:
        self.a, self.b = a, b

    def is_set(self) -> bool:
        return self.a.is_set() or self.b.is_set()

    def set(self) -> None:
        # awatch sets its stop event when it is cancelled: restart, don't stop everything.
        self.b.set()
