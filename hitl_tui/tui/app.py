"""The inbox app: every open block across the watched repositories, answered in two keystrokes.

This is the only package that imports Textual. The app owns its lifecycle, the config, the
domain's Inbox and the workers that feed it (the first scan, the watcher, remote polling), the
toasts of arrivals and warnings, the header's refresh, the report of a worker that failed, and
the switch to the help and the history. What the operator does to a block (answer, undo, the
raw file) is the inbox screen's (`inbox_screen.py`); answers are planned and applied there with
the same code the CLI uses, in worker threads, so that no keypress waits on the disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, ClassVar

from textual import events, on, work
from textual.app import App
from textual.command import CommandPalette
from textual.css.query import NoMatches
from textual.notifications import Notification, SeverityLevel
from textual.timer import Timer
from textual.worker import Worker, WorkerState

from hitl_tui.config import Config
from hitl_tui.inbox.inbox import Delta, Inbox, key_of
from hitl_tui.inbox.scan import default_workers
from hitl_tui.loops import notices
from hitl_tui.loops.commands import restart_warnings
from hitl_tui.loops.resume import NAME as RESUME_FILE
from hitl_tui.loops.resume import ResumeBook
from hitl_tui.model import Block, HitlError
from hitl_tui.sources.base import Source
from hitl_tui.state import files as statefile
from hitl_tui.state.seen import SeenBook
from hitl_tui.state.snoozes import SnoozeBook
from hitl_tui.textio import printable
from hitl_tui.tui.asked import Asked
from hitl_tui.tui.commands import HitlCommands, HitlPalette
from hitl_tui.tui.inbox_screen import InboxScreen
from hitl_tui.tui.messages import ScanBatch, ScanDone
from hitl_tui.tui.quiet import Quiet
from hitl_tui.tui.screens import HelpScreen, HistoryScreen
from hitl_tui.tui.telegram_link import RunsTelegram
from hitl_tui.tui.toasts import ProgressToasts, show
from hitl_tui.tui.waiting import row_for
from hitl_tui.tui.widgets import row_key

if TYPE_CHECKING:
    from hitl_tui.inbox.view import Key
    from hitl_tui.inbox.watch import WatchLimit
    from hitl_tui.tui.stats_screen import StatsCache, StatsScreen

#: What each worker group does, for the message when one fails.
WORKER_TASKS = {
    "scan": "Reading the repositories",
    "cache": "Saving the parse cache",
    "watch": "Live watching",
    "github": "Polling GitHub",
    "apply": "Writing an answer (or an undo)",
    "snooze": "Writing a snooze",
    "seen": "Saving which blocks were seen",
    "asked": "Reading the journal's answers (asked again, asked before)",
    "preview": "Preparing the first preview",
    "grants": "Reading the grants",
    "questions": "Reading the questions (M, grouping by question)",
    "stats": "Computing the fleet stats (S)",
}

#: A burst of arrivals ends after this many seconds without a new block ...
ARRIVAL_QUIET = 0.5
#: ... or this long after its first block, whichever comes first.
ARRIVAL_MAX = 2.0
#: Blocks named in the toast of a burst; the rest are counted.
ARRIVAL_NAMES = 5
#: Seconds the app waits, as it quits, for its ssh connections to end: milliseconds, or
#: about a second for a far side that ignores EOF and SIGTERM (`sources.ssh._gone`, quick).
STOP_WAIT = 2.0
#: Remote hosts' changes are drawn at most this often (seconds), all hosts' at once: ten hosts
#: sending changes made an apply (its passes over every row) per change, and the keys waited.
#: The first change after a quiet spell is drawn at once.
REMOTE_DRAW_EVERY = 0.1
#: What the app reads ahead once its first scan is over (each question, for `M`; the fleet's
#: figures, for `S`) waits until the operator has pressed no key for this many seconds: at
#: 50,000 blocks each is a second of Python sharing the interpreter with the keys (the first
#: preview took 164 ms with them, against 50). `M` and `S` compute what is not ready. Once
#: begun, it gives way again at each key, until the next such pause (`tui/quiet.py`).
PREFETCH_QUIET = 2.0
#: Seconds a change seen by the watcher holds that background work (a key holds it
#: PREFETCH_QUIET s): at 10,000 repos a detection beside it took 80-300 ms, against 40.
ARRIVAL_HOLD = 1.0
#: The cyclic garbage collector's thresholds once the app is loaded (CPython's: 700, 10, 10):
#: objects alive for a moment (a look at the files) die before a young collection sees them,
#: and few grow old enough to start a full one (a walk of every object made since start-up).
GC_THRESHOLD = (50_000, 20, 10)


class HitlApp(RunsTelegram, App[int]):
    """hitl's terminal app: the Inbox and its workers, arrivals, the header, failures, and the
    screens. The inbox screen is the default screen; its keys (tui/bindings.py) are its own,
    but for quit, help, history and grants, which are the app's."""

    CSS_PATH = "app.tcss"
    TITLE = "hitl"
    #: Ctrl+P: hitl's commands, Textual's own among them (tui/commands.py: one provider, so
    #: one order and no entry twice).
    COMMANDS: ClassVar = {HitlCommands}
    #: Screen classes for small terminals (app.tcss, and the preview's CSS): below 60 columns
    #: the inbox drops its state column, below 20 rows every screen packs tighter.
    #: (Typed as App declares them, an instance variable each: mypy refuses a ClassVar there.)
    HORIZONTAL_BREAKPOINTS: list[tuple[int, str]] | None = [(0, "-narrow"), (60, "-wide")]  # noqa: RUF012
    VERTICAL_BREAKPOINTS: list[tuple[int, str]] | None = [(0, "-short"), (20, "-tall")]  # noqa: RUF012

    def __init__(
        self,
        inbox: Inbox,
        config: Config | None = None,
        *,
        watch: bool = True,
        clock: Callable[[], datetime] | None = None,
        notices: list[str] | None = None,
    ) -> None:
        super().__init__()
        self.inbox = inbox
        self.config = config or Config()
        self.watch_enabled = watch
        self.clock = clock or (lambda: datetime.now(UTC))
        self.stop_event = asyncio.Event()
        self.loaded = False
        #: When the operator last pressed a key or used the mouse (`when_quiet`), and the
        #: background work that waits for a pause in the keys (the read-ahead, the cache's save).
        self.quiet = Quiet(PREFETCH_QUIET)
        #: The garbage collector's thresholds before the app set GC_THRESHOLD (once loaded).
        self._gc_threshold: tuple[int, int, int] | None = None
        self.operator = self.config.operator_name()
        #: Messages from before start-up (answers a crash interrupted, then recovered).
        self.notices = list(notices or ())
        #: Each remote backend's title -> scope -> (state, one-line message), as last polled.
        self.source_states: dict[str, dict[str, tuple[str, str]]] = {}
        #: Each remote backend's title -> scope -> when it was last read (the stats' unknowns
        #: say since when a scope is not known).
        self.source_reached: dict[str, dict[str, datetime]] = {}
        self.inbox.use_remotes(self.config.remotes)
        if self.inbox.resumes is None:
            # Answers are watched until their loop acts on them (resume.json, state folder).
            # On the app's clock (the same "now" as the rows' ages).
            book = ResumeBook(statefile.in_state(RESUME_FILE), clock=self.clock)
            self.inbox.use_resumes(book, self.config.loops)
        #: Configuration warnings already toasted (inbox.warnings: a project.md unread, ...).
        self._warned: set[str] = set()
        #: The kernel's limit on inotify watches was said (`_watch_limit`): said once.
        self._limit_said = False
        #: The remote blocks changed since they were last drawn (`_remote_changed`): their keys
        #: (those to announce apart), the answers waiting they resolved, the draw to come.
        self._remote_keys: dict[Key, None] = {}
        self._remote_new: set[Key] = set()
        self._remote_waiting: list = []
        self._remote_timer: Timer | None = None
        self._remote_drawn = 0.0
        #: Blocks of the burst of arrivals in progress, and those waiting for a modal to close.
        self._arriving: list[Block] = []
        self._held: list[Block] = []
        self._burst_timer: Timer | None = None
        self._burst_began = 0.0
        #: The failures of notice channels already toasted (each says so once).
        self._notice_failures: set[str] = set()
        #: Each answer's one toast, updated as it goes (answered, restarted, resumed).
        self.progress = ProgressToasts(self)
        self.inbox_screen = InboxScreen(
            self.clock,
            self.inbox,
            self.operator,
            seen=SeenBook.for_state(),
            snoozes=SnoozeBook.for_state(),
            sla=(self.config.sla_warn, self.config.sla_alert),
            loops=self.config.loops,
            bell=self.config.bell,
        )
        #: The journal's answers: asked again, asked before, and `p` (tui/asked.py).
        self.asked = Asked(self.clock)
        #: The fleet's figures kept per window, and the stats screen: built on first use.
        self._stats_cache: StatsCache | None = None
        self._stats_screen: StatsScreen | None = None

    # -- the inbox screen and the workers ------------------------------------------------------

    def get_default_screen(self) -> InboxScreen:
        return self.inbox_screen

    def on_mount(self) -> None:
        self.theme = "textual-dark"
        if self.config.keys:
            self.set_keymap(dict(self.config.keys))
        self.screen_change_signal.subscribe(self, self._screen_changed)
        for message in self.notices:
            self.notify(printable(message), title="Recovered", severity="warning", markup=False)

    @on(InboxScreen.Ready)
    def _inbox_ready(self) -> None:
        self.initial_scan()
        self.asked.start(self, self.inbox_screen)

    @work(
        thread=True, exclusive=True, group="scan", exit_on_error=False, description="initial_scan"
    )
    def initial_scan(self) -> None:
        """The first scan, its blocks listed as they are found (`ScanBatch`), then `ScanDone`.
        The answers waiting for their loop come with the first batch. An inbox opened as
        `hitl` opens it (`Inbox.deferred`) searches its workspace and loads its parse cache
        here first: the first frame (the header says "reading repositories…") never waits
        for them."""
        self.inbox.prepare()
        self.inbox_screen.seen.load_marks()  # (seen.json: 50,000 marks at 50,000 blocks)
        waiting = []
        if self.inbox.resumes is not None:
            self.inbox.check_waiting()  # what resumed while hitl was closed leaves quietly
            waiting = [row_for(r) for r in self.inbox.open_waiting()]
        first = [True]

        def batch(blocks: list[Block], done: int, total: int) -> None:
            if first[0]:
                first[0] = False
                blocks = [*blocks, *waiting]
            self.post_message(ScanBatch(blocks, done, total))

        self.inbox.scan(workers=default_workers(), on_batch=batch)
        # The [[loop]] restarts that will fail here: warnings, toasted as the scan ends.
        origin = self.config.path if self.config.path is not None else "config"
        self.inbox.config_warnings = restart_warnings(
            self.config.loops, self.inbox.workspace.repos, origin
        )
        if self.watch_enabled:
            self.inbox.watch_dirs()  # maps each watched folder to its repo: here, not on the UI
        self.post_message(ScanDone(self.inbox.sorted_blocks(), waiting))
        self.inbox.save_since()
        # The parse cache (at 50,000 blocks, a second of Python after a cold scan) is saved
        # when the operator pauses, as reading ahead is; and as the app quits, in any case.
        self.call_from_thread(self.when_quiet, [self.save_parse_cache])

    @work(thread=True, group="cache", exit_on_error=False, description="save_parse_cache")
    def save_parse_cache(self) -> None:
        if self.inbox.cache is not None:
            self.inbox.cache.save(between=self.quiet.give_way)

    @on(ScanBatch)
    def _scan_batch(self, message: ScanBatch) -> None:
        if not self.loaded:  # (none comes after ScanDone: the scan posts that last)
            self.inbox_screen.add_batch(message.blocks, message.done, message.total)

    @on(ScanDone)
    def _scan_done(self, message: ScanDone) -> None:
        # The batches listed the blocks; what the scan ended with is what stays listed.
        self.inbox_screen.finish_scan(message.blocks, message.waiting)
        # Start-up made most of the objects the app will ever hold (blocks, rows, widgets).
        # Frozen, the cyclic GC stops walking them: at 5,000 blocks one full collection took
        # 80 ms, in the middle of a keypress.
        gc.freeze()
        # And what is made from here on is collected young less often: at CPython's 700
        # objects, the watcher's looks at 10,000 repositories (lists of 50,000 paths, alive
        # for a second) were walked young a hundred times over and kept as old, and the full
        # collections that followed (100-500 ms, in any thread) stalled the event loop.
        if self._gc_threshold is None:
            self._gc_threshold = gc.get_threshold()
            gc.set_threshold(*GC_THRESHOLD)
        self.loaded = True
        self.refresh_header()
        self.inbox_screen.show_current()
        self._toast_warnings()
        if self.watch_enabled:
            self.run_watcher()
            for source in self.inbox.remotes:
                self.run_remote(source)
            self.start_telegram()
        # What the first preview needs, built once the list is drawn and the app idle.
        self.set_timer(0.2, self.inbox_screen.prepare_preview)
        # Each question read once for the same-question rule (M, grouping by question), then
        # the fleet's figures of the last 30 days, for `S` to show at once: when the operator
        # is not pressing keys (and not at once: the operator's first keys come now).
        self.quiet.touch()
        self.when_quiet([self.read_questions, self.prefetch_stats])

    def read_questions(self) -> None:
        """Each question read ahead, for `M` and grouping by question (giving way to keys)."""
        self.inbox_screen.read_questions(self.quiet)

    def when_quiet(self, jobs: list[Callable[[], object]]) -> None:
        """Start `jobs`, one a second, once no key or click came for PREFETCH_QUIET s (each
        job gives way to the keys again while it runs: `Quiet.sliced`)."""
        if not jobs:
            return
        wait = self.quiet.wait()
        if wait > 0:
            self.set_timer(wait, lambda: self.when_quiet(jobs))
            return
        jobs[0]()
        self.set_timer(1.0, lambda: self.when_quiet(jobs[1:]))

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.InputEvent) and not event.is_forwarded:
            self.quiet.touch()  # (`when_quiet`, and the work that gives way to keys)
        await super().on_event(event)

    @work(exclusive=True, group="watch", exit_on_error=False, description="run_watcher")
    async def run_watcher(self) -> None:
        from hitl_tui.inbox.watch import watch_inbox

        while not self.stop_event.is_set():
            try:
                await watch_inbox(
                    self.inbox,
                    self._on_delta,
                    self.stop_event,
                    on_error=self._watch_error,
                    on_limit=self._watch_limit,
                )
            except Exception as exc:  # the watcher itself failed: say so, and start again
                self._watch_error(exc)
                await asyncio.sleep(2)

    @work(group="remote", exit_on_error=False, description="run_remote")
    async def run_remote(self, source: Source) -> None:
        """Poll a remote backend's scopes; each shows its own state, none hides the others."""

        async def update(scope: str, state: str, message: str, delta: Delta | None) -> None:
            await self._on_remote(source, scope, state, message, delta)

        try:
            await source.watch(self.inbox, update, self.stop_event)
        except HitlError as exc:  # the backend cannot start at all
            self.notify(printable(str(exc)), title=source.title, severity="error", markup=False)

    async def _on_remote(
        self, source: Source, scope: str, state: str, message: str, delta: Delta | None
    ) -> None:
        if state == "answer":  # what became of an answer: said, not the scope's state
            self.notify(
                printable(f"{scope}: {message}"),
                title=f"{source.title} answer",
                markup=False,
                timeout=15,
            )
            self.refresh_header()
            return
        states = self.source_states.setdefault(source.title, {})
        before = states.get(scope)
        states[scope] = (state, message)
        if state in ("ok", "warning"):
            self.source_reached.setdefault(source.title, {})[scope] = self.clock()
        if delta is not None:
            self._remote_changed(delta, announce=before is not None)
        else:
            self.refresh_header()
        if state != "ok" and (before is None or before[0] != state):
            self.notify(
                printable(f"{scope}: {message}"),
                title=f"{source.title} source",
                severity="warning",
                markup=False,
            )

    async def _remote_stopped(self) -> None:
        """Wait (STOP_WAIT s at most) for the remote backends to end their connections: an
        ssh left running would outlive the app, and its pipes the event loop."""
        running = [
            w for w in self.workers if w.group == "remote" and w.state != WorkerState.PENDING
        ]
        if running:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    asyncio.gather(*(w.wait() for w in running), return_exceptions=True),
                    STOP_WAIT,
                )

    def _remote_changed(self, delta: Delta, announce: bool) -> None:
        """A remote host's blocks changed: drawn now, or with every host's changes of the
        next REMOTE_DRAW_EVERY seconds in one apply, from the inbox as it is then (a block
        added then removed meanwhile is not drawn at all)."""
        for block in (*delta.added, *delta.changed):
            self._remote_keys[key_of(block)] = None
        self._remote_keys.update(dict.fromkeys(delta.removed))
        if announce:
            self._remote_new.update(key_of(b) for b in delta.added)
        self._remote_waiting += delta.waiting
        if self._remote_timer is not None:
            return
        wait = self._remote_drawn + REMOTE_DRAW_EVERY - time.monotonic()
        if wait <= 0:
            self._draw_remote()
        else:
            self._remote_timer = self.set_timer(wait, self._draw_remote)

    def _draw_remote(self) -> None:
        self._remote_timer = None
        self._remote_drawn = time.monotonic()
        keys, self._remote_keys = self._remote_keys, {}
        new, self._remote_new = self._remote_new, set()
        waiting, self._remote_waiting = self._remote_waiting, []
        listed = self.inbox_screen.rows.blocks
        delta = Delta(waiting=waiting)
        for key in keys:
            block = self.inbox.blocks.get(key)
            if block is None:
                if row_key(key) in listed:
                    delta.removed.append(key)
            elif row_key(key) in listed:
                delta.changed.append(block)
            else:
                delta.added.append(block)
        arrived = [b for b in delta.added if key_of(b) in new]
        self.apply_delta(delta)
        if arrived:
            self._arrived(arrived)

    def _watch_limit(self, limit: WatchLimit | None) -> None:
        """Past the kernel's limit on inotify watches: the header says how many repositories
        are polled, and a toast (once) why, and the sysctl that raises the limit."""
        self.refresh_header()
        if limit is not None and not self._limit_said:
            self._limit_said = True
            if self.inbox.watch_warning:
                self._warned.add(self.inbox.watch_warning)
            self.notify(
                printable(limit.message()),
                title="Not every repository is watched",
                severity="warning",
                markup=False,
                timeout=30,
            )

    def _watch_error(self, exc: Exception) -> None:
        self.notify(
            printable(f"{type(exc).__name__}: {exc}"),
            title="Live watching hit an error (still watching)",
            severity="error",
            markup=False,
            timeout=10,
        )

    async def _on_delta(self, delta: Delta) -> None:
        self.apply_delta(delta, announce=True)
        if delta.added or delta.changed or delta.removed:  # the next may follow: hold the
            self.quiet.touch(ARRIVAL_HOLD)  # background work (`tui/quiet.py`) meanwhile

    def apply_delta(self, delta: Delta, announce: bool = False) -> None:
        """The inbox changed: the inbox screen's list and header follow, new warnings are
        toasted, and (`announce`) new blocks are announced."""
        try:
            self.inbox_screen.apply(delta)
            self.refresh_header()
        except NoMatches:  # a change that arrives while the app is closing
            return
        if self.loaded:  # (the warnings wait for the lock the first scan holds)
            self._toast_warnings()
        self.asked.journal_may_have_changed(self)  # an answer or an undo: read what is new
        self.wake_telegram()  # the bot sends what is new, edits what was answered
        if announce and delta.added:
            self._arrived(delta.added)

    # -- arrivals: one toast and one bell per burst, none over a modal ------------------------

    def _arrived(self, blocks: list[Block]) -> None:
        """Collect a burst: it ends after ARRIVAL_QUIET s without a new block (ARRIVAL_MAX s at
        the latest), then rings once and shows one toast naming every block in it."""
        self._arriving.extend(blocks)
        now = time.monotonic()
        if self._burst_timer is None:
            self._burst_began = now
        else:
            self._burst_timer.stop()
        # Never 0: Textual's timer divides by its interval (a burst past ARRIVAL_MAX would
        # ask for one).
        wait = min(ARRIVAL_QUIET, max(0.01, self._burst_began + ARRIVAL_MAX - now))
        self._burst_timer = self.set_timer(wait, self._end_burst)

    def _still_open(self, blocks: list[Block]) -> list[Block]:
        """The blocks still listed, each once (one may have been answered or left meanwhile)."""
        try:
            listed = self.inbox_screen.blocklist.blocks
        except NoMatches:  # the burst ended as the app was closing
            return []
        seen: dict[str, Block] = {}
        for block in blocks:
            rk = row_key(key_of(block))
            if rk in listed:
                seen[rk] = listed[rk]
        return list(seen.values())

    def _end_burst(self) -> None:
        self._burst_timer = None
        blocks = self._still_open(self._arriving)
        self._arriving = []
        if not blocks:
            return
        if self.config.bell:
            self.bell()
        self.send_notice(notices.new_blocks(blocks), notices.shared_new(blocks))
        if len(self.screen_stack) > 1:
            # A modal is open (the preview, a text box): a toast there would cover its
            # buttons. The bell has rung; the toast waits until the modal closes.
            self._held.extend(blocks)
            return
        self._announce(blocks)

    def _screen_changed(self, screen) -> None:
        if len(self.screen_stack) == 1 and self._held:
            blocks = self._still_open(self._held)
            self._held = []
            if blocks:
                self._announce(blocks)

    def _announce(self, blocks: list[Block]) -> None:
        if len(blocks) == 1:
            block = blocks[0]
            title = "New block"
            message = f"{block.id}: {block.one_line_question(120)}"
        else:
            names = ", ".join(b.id for b in blocks[:ARRIVAL_NAMES])
            more = len(blocks) - ARRIVAL_NAMES
            title = "New blocks"
            message = f"{len(blocks)} new blocks: {names}" + (
                f" and {more} more" if more > 0 else ""
            )
        self.notify(printable(message), title=title, severity="warning", markup=False)

    # -- notices beyond the bell: the terminal's escape, desktop, command, webhook ------------

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Textual's toast, widened when a word of it (a log's path, a URL) would be cut across
        lines (`toasts.show`)."""
        if timeout is None:
            timeout = self.NOTIFICATION_TIMEOUT
        show(self, Notification(message, title, severity, timeout, markup=markup))

    def send_notice(self, notice: notices.Notice, shared: notices.Shared | None = None) -> None:
        """`notice` on every channel `[notify]` enables for its kind: the terminal's escape
        written here, the others sent by a worker thread (each within its timeout); with
        `shared`, those get the notice of the items no other hitl of the operator sent."""
        if notice.kind == "not-resumed":
            self.wake_telegram()  # its Restart and Drop buttons
        cfg = self.config.notify
        if not cfg.wants(notice.kind):
            return
        escape = notices.terminal_escape(notice, cfg, os.environ)
        if escape is not None:
            self.write_terminal(escape)
        if notices.channels(cfg, os.environ):
            # A daemon thread, not a worker: asyncio.run waits for its executor's threads as
            # the app exits, so a channel still running (a command that ignores SIGTERM, a
            # webhook that trickles) held the process until its timeout. At exit the commands
            # still running are killed instead (on_unmount).
            threading.Thread(
                target=self._send_notice, args=(notice, shared), name="hitl-notice", daemon=True
            ).start()

    def write_terminal(self, data: str) -> None:
        """Raw bytes to the real terminal, as `App.bell` writes its BEL (none when headless,
        as under Pilot)."""
        if not self.is_headless and self._driver is not None:
            self._driver.write(data)

    def _send_notice(self, notice: notices.Notice, shared: notices.Shared | None) -> None:
        cfg = self.config.notify
        # With `shared`: each channel gets what no other hitl of the operator's sent on it.
        failed = notices.send(notice, cfg) if shared is None else notices.send_shared(shared, cfg)
        for line in failed:
            try:
                self.call_from_thread(self._notice_failed, line)
            except RuntimeError:  # the app has exited meanwhile
                return

    def _notice_failed(self, line: str) -> None:
        """One toast per failure of a channel: one that keeps failing says so once."""
        if line in self._notice_failures:
            return
        self._notice_failures.add(line)
        self.notify(printable(line), title="Notice not sent", severity="warning", markup=False)

    def _toast_warnings(self) -> None:
        """A toast once per new configuration warning (the header keeps the count)."""
        for warning in self.inbox.warnings:
            if warning not in self._warned:
                self._warned.add(warning)
                self.notify(printable(warning), title="Warning", severity="warning", markup=False)

    def refresh_header(self) -> None:
        """The inbox screen's header and empty-inbox text, from the inbox as it is now; during
        the first scan, its progress (the inbox is locked by the scan until then)."""
        if self.loaded:
            self.inbox_screen.show_header(self.inbox, self.source_states)
        else:
            self.inbox_screen.show_progress()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A worker that raised: say what failed, in a toast (and the header, for the first
        scan, which would otherwise say "reading repositories…" forever). The app runs on."""
        if event.state == WorkerState.ERROR:
            self.worker_failed(event.worker)

    def worker_failed(self, worker: Worker) -> None:
        """Say what a worker that raised was doing; the inbox screen's workers report here too."""
        error = worker.error
        what = WORKER_TASKS.get(worker.group, "A background task")
        text = f"{what} failed: {type(error).__name__}: {error}"
        if worker.group == "scan":
            self.inbox_screen.show_failure(printable(text))
        self.notify(printable(text), title="Error", severity="error", markup=False, timeout=30)

    # -- switching screens: help, history, grants, stats (the inbox screen is the default) -----

    def action_command_palette(self) -> None:
        """Ctrl+P: Textual's palette, with its search icon as the browser of `hitl serve` can
        draw it (HitlPalette)."""
        if self.use_command_palette and not isinstance(self.screen, CommandPalette):
            self.push_screen(HitlPalette(id="--command-palette"))

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.config.keys))

    def action_history(self) -> None:
        from hitl_tui import journal

        # The newest answers only: the journal may hold 90 days of them (`hitl history` pages).
        entries = journal.history(limit=HistoryScreen.LIMIT)
        self.push_screen(HistoryScreen(entries, self.operator, self.inbox, self.apply_delta))

    def action_grants(self) -> None:
        """The grants (Allow always answers) of the inbox's repositories, here and on the
        `[[remote]]` hosts, read by the screen's worker."""
        from hitl_tui.tui.grants_screen import GrantsScreen

        repos = list(self.inbox.workspace.ids.items())
        self.push_screen(GrantsScreen(repos, self.operator, self.inbox.remotes))

    @property
    def stats_cache(self) -> StatsCache:
        """The fleet's figures kept per window (tui/stats_screen.py; imported on first use)."""
        if self._stats_cache is None:
            from hitl_tui.tui.stats_screen import StatsCache, loader

            self._stats_cache = StatsCache(loader(self))
        return self._stats_cache

    def action_stats(self) -> None:
        """`S`: the fleet's figures (tui/stats_screen.py), computed by the screen's worker;
        Enter on a repository comes back here as the inbox's filter."""
        from hitl_tui.tui.commands import repo_filter
        from hitl_tui.tui.stats_screen import StatsScreen

        def closed(repo: str | None) -> None:
            if repo is not None:
                self.inbox_screen.set_filter(repo_filter(repo) if repo else "")

        workspace = self.inbox.workspace
        labels = {os.fsdecode(r): workspace.id_of(r) for r in workspace.repos}
        if self._stats_screen is None:  # one screen, kept: each open shows the last figures
            sla = (self.config.sla_warn, self.config.sla_alert)
            self._stats_screen = StatsScreen(self.stats_cache, labels, sla)
            self.install_screen(self._stats_screen, "stats")
        self._stats_screen.labels = labels
        self.push_screen("stats", closed)

    @work(thread=True, exclusive=True, group="stats", exit_on_error=False, description="stats")
    def prefetch_stats(self) -> None:
        """The 30 days' figures, computed while the app is idle after its first scan: `S`
        shows them at once (and computes them again)."""
        from hitl_tui.tui.stats_screen import WINDOWS

        # Not asked for: a failure is said by the screen, when `S` computes them itself.
        with contextlib.suppress(Exception):
            self.stats_cache.compute(WINDOWS[0], gently=self.quiet)

    async def action_quit(self) -> None:
        self.stop_event.set()
        self.exit(0)

    async def on_unmount(self) -> None:
        self.stop_event.set()
        self.quiet.stop()  # the background work waiting for a pause stops waiting
        try:
            notices.stop_all()  # a notice command still running is not left behind
            self.stop_telegram()
            if self.loaded:
                self.inbox_screen.save_seen_now()  # the marks learnt since the last save
            await self._remote_stopped()
        finally:  # however the rest stopped, for a process that embeds the app (the tests)
            if self._gc_threshold is not None:
                gc.set_threshold(*self._gc_threshold)  # CPython's own again
                self._gc_threshold = None
            gc.unfreeze()  # what start-up froze can be collected again
