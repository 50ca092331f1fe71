"""One watcher for every repository: watchfiles over folders, never recursive.

A recursive watch costs one inotify watch per folder below it (a big `.git` or `node_modules`
costs thousands), and one watcher per repo runs out of inotify instances (128 per user on Linux).
So there is a single `awatch` over the exact folders the sources name (each repo's root, its task
folder, ...) plus the workspace roots, with `recursive=False`. A folder added to that set while
watching (a repo or task folder created, a repository's first `.hitl/asks/`) is watched by a
second, small watcher beside it, merged into the same stream (`_Streams`): building the big one
again took a quarter of a second at 10,000 repositories with the interpreter held, the app
frozen. Past EXTRA_MAX added folders, or when a folder no longer to watch is still there, the
watch restarts on the whole set, in one watcher again. So at most two inotify instances, and
one watch per folder. A folder deleted loses its watch with it: nothing restarts.

Nothing made after start-up is missed, by construction: a change made while a folder's watch is
in place has an event; one made before (after the scan, or while a restart adds 10,000 watches)
has none. So once awatch yields for the first time (every watch is in place by then) the files
are looked at (`Inbox.catch_up`): the workspace searched again if a root changed, and every
block file, watched folder and layout file whose mtime or ctime is at or after the previous
look began (the scan's start the first time). Events lost while watching (the kernel's queue
overflowing, a notice watchfiles drops) are made up the same way every CATCH_UP_EVERY seconds.

Past the kernel's limit on inotify watches (`fs.inotify.max_user_watches`, per user, shared by
every program) a folder gets no watch. watchfiles places the watches in order and stops at the
first one refused, so the folders from there on are left out of the watch and polled instead,
every POLL_EVERY seconds (the same look as a catch-up, for their repositories alone: a few stats
each); the inbox says how many repositories that is and how to raise the limit, once
(`WatchLimit`, `Inbox.watch_warning`). Once the limit is raised, the next catch-up (within
CATCH_UP_EVERY seconds) sees it and the watch starts again over every folder.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import watchfiles

from hitl_tui.inbox.inbox import SLACK, Delta, Inbox
from hitl_tui.inbox.watchset import compare as _compare
from hitl_tui.inbox.watchset import identities as _identities

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
#: Seconds between two looks at the folders the kernel would not watch (its limit on inotify
#: watches reached): the catch-up's stats, for their repositories alone (tens of microseconds
#: each: 1,000 repositories polled cost about 2% of a core). A block written there shows
#: within this, not within a watch's ~50 ms.
POLL_EVERY = 2.0
#: The limit the message suggests (what editors' and IDEs' guides suggest too).
SUGGESTED_WATCHES = 524_288
#: Where Linux keeps the limit on inotify watches (per user).
MAX_WATCHES_FILE = "/proc/sys/fs/inotify/max_user_watches"


@dataclass(frozen=True)
class WatchLimit:
    """The folders the kernel would not watch, their repositories polled instead."""

    #: Repositories with a folder left unwatched, of the repositories watched in all.
    repos: int
    total: int
    #: Folders left unwatched (the repositories', the roots', the waiting answers' `.git`).
    folders: int
    #: The kernel's limit (`fs.inotify.max_user_watches`), where /proc says it.
    limit: int | None
    every: float = POLL_EVERY

    def message(self) -> str:
        limit = f" ({self.limit:,})" if self.limit is not None else ""
        what = (
            f"{self.repos:,} of {self.total:,} repositories"
            if self.repos
            else f"{self.folders:,} folders"
        )
        setting = f"fs.inotify.max_user_watches={SUGGESTED_WATCHES}"
        return (
            f"{what} could not be watched: the kernel's limit on inotify watches, "
            f"fs.inotify.max_user_watches{limit}, is reached. They are polled every "
            f"{self.every:g} s instead (their new blocks show within that). To raise the limit: "
            f"sudo sysctl {setting}; to keep it after a reboot: "
            f"echo {setting} | sudo tee /etc/sysctl.d/90-inotify.conf"
        )


def max_user_watches() -> int | None:
    """The kernel's limit on inotify watches per user, or None where /proc does not say."""
    try:
        with open(MAX_WATCHES_FILE, encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


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
    on_limit: Callable[[WatchLimit | None], None] | None = None,
) -> None:
    """Feed file events into `inbox` until `stop` is set; call `on_delta` for each change.

    Parsing runs in a thread so that a caller on an event loop (the TUI) stays responsive.
    `on_limit` is called when the folders the kernel would not watch change (None: none now);
    `inbox.watch_warning` says it too.
    """
    saver = _SinceSaver(inbox)
    try:
        await _watch_until(
            inbox, on_delta, stop, on_ready, on_error, saver, _CatchUp(inbox), _Limits(on_limit)
        )
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
    limits: _Limits,
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
                inbox,
                dirs,
                aliases,
                on_delta,
                combined,
                restart,
                on_error,
                saver,
                catch_up,
                limits,
                on_ready,
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
    limits: _Limits,
    on_ready: Callable[[list[Path]], None] | None = None,
) -> list[Path] | None:
    """One watch over `dirs`, until it must restart on a new set of folders (returned), or
    stop (None). Folders added meanwhile are watched by a second, small watch (`_Streams`)."""
    placed = time.time()
    # Which folder each watch is on, taken before the watches are: a folder deleted and made
    # again in place later has another identity, and its watch died with the old one.
    watched = await asyncio.to_thread(_identities, dirs)
    watch, refused = await _place(aliases.names, combined)
    if watch is None:
        return None
    # (Folders left unwatched stay in `watched`: they are polled, not added again.)
    unwatched = [aliases.path(name) for name in refused]
    poll = _Poll(inbox, unwatched, placed) if unwatched else None
    limits.report(inbox, unwatched, poll)
    roots = set(inbox.workspace.roots)
    streams = _Streams(watch, aliases, combined)
    caught_up = False
    #: The look at the files running in the background (`_CatchUp.run`), until its result is
    #: taken from the queue (`_Looked`): events are handled meanwhile (at 10,000 repositories
    #: a look is 0.3 s of stats, seconds on a busy machine, and every event waited for it).
    look: asyncio.Task[Delta] | None = None

    async def restart_on(following: list[Path]) -> list[Path]:
        # What a look still running finds is handed on before the watch starts again (it
        # moves the catch-up's `since`: the next look would not find it again).
        if look is not None:
            try:
                found = await look
            except Exception as exc:
                if on_error is not None:
                    on_error(exc)
                found = Delta()
            if found:
                result = on_delta(found)
                if asyncio.iscoroutine(result):
                    await result
        restart.set()
        return following

    try:
        while True:
            item = await streams.queue.get()
            if item is _END:
                return None
            if isinstance(item, BaseException):
                raise item
            added: list[Path] = []
            looked: Delta | None = None
            paths: list[Path] = []
            if isinstance(item, _Added):
                if item.failed:  # the small watch could not be placed: all start again
                    return await restart_on(await asyncio.to_thread(inbox.watch_dirs))
                added = item.folders
            elif isinstance(item, _Looked):
                look = None
                if item.task.cancelled():
                    continue
                error = item.task.exception()
                if error is not None:  # a bug must not end live watching for every repo
                    if on_error is not None and isinstance(error, Exception):
                        on_error(error)
                    continue
                looked = item.task.result()
            else:
                paths = item
            # awatch yields only once every folder's watch is in place (its first yield comes
            # CATCH_UP_MS later, or with the first events): from here on, a change has an event,
            # and what changed before has none, so the files are looked at now, and every
            # CATCH_UP_EVERY seconds for events the kernel or watchfiles lost.
            # The first look, as the watch begins, is awaited before any event is handled (so
            # an event never races it); the later ones run beside the events.
            first = not caught_up
            if look is None and caught_up and catch_up.due():
                look = asyncio.ensure_future(catch_up.run())
                look.add_done_callback(lambda task: streams.queue.put_nowait(_Looked(task)))
            due = first or looked is not None
            polled = poll is not None and poll.due()
            if not paths and not due and not polled and not added:
                continue
            caught_up = True
            try:
                delta = await asyncio.to_thread(inbox.handle, paths) if paths else Delta()
                if first:
                    delta.merge(await catch_up.run())
                if looked is not None:
                    delta.merge(looked)
                if any(f in roots for f in added) and not first:
                    delta.merge(await catch_up.run())
                elif added:  # their watches in place now: what was made there before
                    delta.merge(await _caught_up(inbox, added, catch_up.since))
                if polled and not due and poll is not None:
                    delta.merge(await poll.run())
            except Exception as exc:  # a bug must not end live watching for every repo
                if on_error is not None:
                    on_error(exc)
                continue
            # The limit raised since (the sysctl the message gives): every folder watched again.
            raised = due and poll is not None and poll.raised()
            # A delta that only added or changed blocks leaves the folders as they were (a new
            # folder is a rewatch; one gone removes blocks; an answer's folders come with
            # `waiting`): at 10,000 repositories their stats held up the next event by 0.1 s.
            # A block removed whose folder is still there leaves them as they were too (each
            # trial of row 1 removes its file: a stat of its folder, not 10,000).
            settled = not (
                delta.rewatch or delta.waiting or due or raised or _folder_gone(delta.removed)
            )
            # The folders to watch next, and those of them with no watch of their own, in a
            # thread (10,000 stats at 10,000 repositories: on the event loop they froze the app
            # for a tenth of a second and more at each event). When the set of folders changed,
            # before the change is handed on, so that whoever sees it sees the new watch begin
            # (`on_ready`) at once.
            change = None
            if delta.rewatch:
                # The folders the inbox says this change touched, alone (`inbox/watchset.py`);
                # every folder after a look at the files, or when the answers waiting changed.
                some = None if due or polled or delta.waiting else delta.folders
                change = await asyncio.to_thread(_compare, inbox, watched, some)
            if delta:
                result = on_delta(delta)
                if asyncio.iscoroutine(result):
                    await result
                # Remembered first-seen times are written later, in the background: never on
                # the path from a file event to its row.
                saver.soon()
            if settled:
                continue
            if change is None:
                change = await asyncio.to_thread(_compare, inbox, watched)
            following, missing, gone, stale = change
            # (Nothing left to watch: the watch starts again, and looks for it every second.)
            if raised or stale or not following or len(streams.extra) + len(missing) > EXTRA_MAX:
                return await restart_on(following)
            if missing or gone:
                # Folders gone: their watches went with them. Folders new (or made again in
                # place): the small watch takes them, and the main one, over 10,000 folders,
                # is not built again (a quarter of a second with the interpreter held).
                for folder in gone:
                    del watched[folder]
                watched.update(missing)
                left = set(gone) | set(missing)
                extra = [f for f in streams.extra if f not in left]
                if missing:
                    streams.add(extra + list(missing), list(missing))
                else:
                    streams.extra = extra
                if on_ready is not None:
                    on_ready(following)
    finally:
        if look is not None and not look.done():
            look.cancel()  # (stopping: what it finds is of no one's interest now)
        await streams.close()  # (its watches given back before the next watch places its own)


#: Folders added to the watch after it began (a new repository, a repository's first
#: `.hitl/asks/`) are watched by a second, small watcher, merged into the same stream, up to
#: this many: past it, the main watch starts again over every folder, once. So a live watch
#: holds at most two inotify instances (three for the moment the small one is replaced).
EXTRA_MAX = 256
#: How soon the small watch yields for the first time (its watches are in place then, and its
#: folders are looked at): a new repository's or a first ask's row waits for it. It wakes this
#: often while idle too (once every 200 ms, the main one): 50 ms against 100 costs about 1 ms
#: of CPU a second while idle (3.3 -> 4.6 ms/s, a small watch measured alone) and takes 50 ms
#: off a repository's first ask (bench row 10a).
EXTRA_MS = 50


async def _caught_up(inbox: Inbox, folders: list[Path], since: float) -> Delta:
    """What was made in `folders` before their watch was in place: a catch-up of their
    repositories alone (a waiting answer's folder: the waiting answers checked)."""
    repos = inbox.owners(folders)
    delta = await asyncio.to_thread(inbox.catch_up, since, repos) if repos else Delta()
    if len(repos) < len(folders) and inbox.resumes is not None:
        delta.waiting += (await asyncio.to_thread(inbox.check_waiting)).waiting
    return delta


@dataclass(frozen=True)
class _Added:
    """The small watch is in place over `folders` (newly added), or could not be (`failed`)."""

    folders: list[Path]
    failed: bool = False


@dataclass(frozen=True)
class _Looked:
    """A look at the files (`_CatchUp.run`) is over: its Delta, or its error."""

    task: asyncio.Task[Delta]


_END = object()


class _Streams:
    """The main watch and the small one over the folders added since it began, as one queue
    of batches of paths; an `_Added` once a new small watch is in place. A new small watch is
    placed before the one it replaces is closed, so no event falls between the two."""

    def __init__(
        self,
        main: AsyncGenerator[set[tuple[watchfiles.Change, str]], None],
        aliases: _Aliases,
        stop: _Either,
    ) -> None:
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.stop = stop
        #: The folders the small watch holds, or will once placed.
        self.extra: list[Path] = []
        self._lock = asyncio.Lock()
        self._current: asyncio.Event | None = None
        self._stops: list[asyncio.Event] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._spawn(self._pump(main, aliases, main=True))

    def _spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _pump(
        self,
        watch: AsyncGenerator[set[tuple[watchfiles.Change, str]], None],
        aliases: _Aliases,
        main: bool,
    ) -> None:
        try:
            async for changes in watch:
                if changes or main:  # (the main one's timeouts drive the catch-up's clock)
                    self.queue.put_nowait([aliases.path(p) for _, p in changes])
        except Exception as exc:
            self.queue.put_nowait(exc if main else _Added([], failed=True))
        finally:
            await watch.aclose()
            if main:
                self.queue.put_nowait(_END)
            else:
                aliases.close()

    def add(self, folders: list[Path], new: list[Path]) -> None:
        """Watch `folders` (every added folder still wanted) with a new small watch; `new`
        are those not watched until now."""
        self.extra = folders
        self._spawn(self._replace(list(folders), new))

    async def _replace(self, folders: list[Path], new: list[Path]) -> None:
        async with self._lock:
            if self.stop.is_set():
                return
            own = asyncio.Event()
            self._stops.append(own)
            aliases = _Aliases(folders)
            try:
                watch, refused = await _place(aliases.names, _Either(self.stop, own), EXTRA_MS)
            except OSError:
                watch, refused = None, ["?"]
            if watch is None or refused:
                aliases.close()
                if watch is not None:
                    await watch.aclose()
                if not self.stop.is_set():
                    self.queue.put_nowait(_Added(new, failed=True))
                return
            if self._current is not None:
                self._current.set()  # the one it replaces ends (its pump, then its watches)
            self._current = own
            self._spawn(self._pump(watch, aliases, main=False))
            self.queue.put_nowait(_Added(new))

    async def close(self) -> None:
        self.stop.set()  # (the main watch's restart: this watch is over either way)
        for own in self._stops:
            own.set()
        tasks = list(self._tasks)
        if tasks:
            await asyncio.wait(tasks, timeout=2.0)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


def _folder_gone(removed: list[Any]) -> bool:
    """Whether the folder of a removed block's file is gone (or the block had no file)."""
    for key in removed:
        path = key[1] if isinstance(key, tuple) and len(key) > 1 else None
        if not isinstance(path, Path) or not os.path.isdir(path.parent):
            return True
    return False


async def _place(
    names: list[str], stop: _Either, timeout: int = CATCH_UP_MS
) -> tuple[AsyncGenerator[set[tuple[watchfiles.Change, str]], None] | None, list[str]]:
    """A watch over as many of `names` as the kernel allows (every watch placed once this
    returns), and the names it would not watch: past its limit on inotify watches, the first
    refused and every one after it (watchfiles places them in order, and stops at the first
    it cannot). A folder gone or unreadable meanwhile is left out, as ignored before."""
    names = list(names)
    refused: list[str] = []
    ignore = False
    while True:
        watch = watchfiles.awatch(
            *names,
            watch_filter=_accept,
            recursive=False,
            step=STEP_MS,
            debounce=DEBOUNCE_MS,
            stop_event=stop,
            ignore_permission_denied=ignore,
            rust_timeout=timeout,
            yield_on_timeout=True,
        )
        try:
            first = await anext(watch)
        except StopAsyncIteration:
            return None, refused
        except OSError as exc:
            at = _refused_at(exc, names)
            if _over_limit(exc):
                cut = at if at is not None else len(names) // 2
                refused[:0] = names[cut:]
                del names[cut:]
            elif at is not None:
                del names[at]
            elif not ignore:
                ignore = True  # which folder it was, unsaid: skip what cannot be watched
            else:
                raise
            continue
        return _then(first, watch), refused


async def _then(
    first: set[tuple[watchfiles.Change, str]],
    rest: AsyncGenerator[set[tuple[watchfiles.Change, str]], None],
) -> AsyncGenerator[set[tuple[watchfiles.Change, str]], None]:
    try:
        yield first
        async for changes in rest:
            yield changes
    finally:
        await rest.aclose()


def _over_limit(exc: OSError) -> bool:
    """Whether watchfiles refused a watch for the kernel's limit on watches (notify's
    MaxFilesWatch: inotify_add_watch failed with ENOSPC)."""
    text = str(exc)
    return "MaxFilesWatch" in text or "watch limit" in text


def _refused_at(exc: OSError, names: list[str]) -> int | None:
    """Which of `names` watchfiles' error names (`... about ["/the/folder"] ...`), if any."""
    text = str(exc)
    for i, name in enumerate(names):
        if f"[{json.dumps(name, ensure_ascii=False)}]" in text:
            return i
    return None


class _Poll:
    """The folders the kernel would not watch, looked at every POLL_EVERY seconds: a catch-up
    (`Inbox.catch_up`) of their repositories alone, since the one before began, fed to the same
    `on_delta` as file events. A root among them: the workspace is probed too; a waiting
    answer's folder: the waiting answers are checked."""

    def __init__(self, inbox: Inbox, folders: list[Path], placed: float) -> None:
        self.inbox = inbox
        self.repos = inbox.owners(folders)
        roots = set(inbox.workspace.roots)
        self.roots = any(f in roots for f in folders)
        self.waiting = len(self.repos) < len(folders) and inbox.resumes is not None
        self.since = placed - SLACK
        self.next = time.monotonic() + POLL_EVERY
        #: The kernel's limit when it refused (None: /proc does not say).
        self.limit = max_user_watches()

    def due(self) -> bool:
        return time.monotonic() >= self.next

    def raised(self) -> bool:
        """Whether the kernel's limit is higher now than when it refused a watch (looked at
        with each catch-up, every CATCH_UP_EVERY seconds)."""
        now = max_user_watches()
        return now is not None and (self.limit is None or now > self.limit)

    async def run(self) -> Delta:
        began = time.time()
        self.next = time.monotonic() + POLL_EVERY
        only = None if self.roots else self.repos
        delta = await asyncio.to_thread(self.inbox.catch_up, self.since, only)
        if self.waiting:
            delta.waiting += (await asyncio.to_thread(self.inbox.check_waiting)).waiting
        self.since = began - SLACK
        return delta


class _Limits:
    """What was said of the folders left unwatched, across the watch's restarts: said again
    only when their number changes (and once more when there are none left)."""

    def __init__(self, on_limit: Callable[[WatchLimit | None], None] | None) -> None:
        self.on_limit = on_limit
        self.last: WatchLimit | None = None

    def report(self, inbox: Inbox, folders: list[Path], poll: _Poll | None) -> None:
        now = None
        if poll is not None:
            total = len(inbox.workspace.repos)
            now = WatchLimit(len(poll.repos), total, len(folders), max_user_watches())
        inbox.polled = frozenset(poll.repos) if poll is not None else frozenset()
        inbox.watch_warning = now.message() if now is not None else None
        if now != self.last:
            self.last = now
            if self.on_limit is not None:
                self.on_limit(now)


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


class _IsSet(Protocol):
    def is_set(self) -> bool: ...


class _Either:
    """An event that is set when either of two asyncio events is (what awatch polls)."""

    def __init__(self, a: _IsSet, b: asyncio.Event) -> None:
        self.a, self.b = a, b

    def is_set(self) -> bool:
        return self.a.is_set() or self.b.is_set()

    def set(self) -> None:
        # awatch sets its stop event when it is cancelled: restart, don't stop everything.
        self.b.set()
