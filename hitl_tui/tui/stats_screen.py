"""`S`: fleet stats, which loops block most, how long they wait, and whether answers took.

The figures are the domain's (`hitl_tui.stats.compute`, the same as `hitl stats`). Computing
them takes longer than an open may (at 100,000 answers, about a second), so they are kept per
window (`StatsCache`: the app fills the 30 days' once its first scan is over): `S` shows the
kept figures at once ("updating…") and the screen's worker computes them again; with none
kept, the screen says it is computing them. The app keeps one screen installed: a reopen
redraws only what changed. It shows the overall line, time blocked per repository
(`RepoBars`, the top ten and the rest summed), opened and answered per day (`DayChart`), and
the table of every figure per repository (its first ROWS), sorted by the column `s` picks (▼);
`w` changes the window (30, 90, 7 days). A figure not known (a host not reached, a pruned
journal) is `?`, never 0, and the lines under the table say what, and since when. `Enter` on
a repository closes the screen and filters the inbox to it (`repo:NAME`); on the overall
row, it clears the filter.

Repository names and error messages are plain text (`printable`, `Text`), never markup.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar, Literal

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Static
from textual.worker import Worker, WorkerState

from hitl_tui.stats import Figures, Stats, Unknown
from hitl_tui.textio import printable
from hitl_tui.tui.bindings import bindings
from hitl_tui.tui.quiet import Quiet
from hitl_tui.tui.stats_charts import Bar, DayChart, DayCounts, RepoBars, level, span

#: The windows `w` cycles through, in days; the first is where the screen opens.
WINDOWS = (30, 90, 7)
#: Bars of the chart: the repositories most blocked; the rest are summed in one more.
TOP = 10
#: Seconds after the kept figures are shown before they are computed again.
AGAIN_AFTER = 0.2
#: Rows of the table: the first by the sort (`hitl stats` lists every one). A table of 1,000
#: rows took ~100 ms to fill, at each open and each sort.
ROWS = 200
#: Computes the figures of a window (blocking: the screen's worker runs it).
Load = Callable[..., Stats]


@dataclass(frozen=True)
class Column:
    """A column of the table: its title, the figure it shows, and how its cell reads."""

    title: str
    value: Callable[[Figures], float | int | str | None]
    show: Callable[[Figures], str]
    #: Sorted largest first (a name: A to Z).
    descending: bool = True
    #: The SLA colour applies (a time waited).
    waited: bool = False


#: A figure not known, in the table (the lines under it say what, and since when).
UNKNOWN = "?"


def _count(name: str) -> Callable[[Figures], str]:
    def show(f: Figures) -> str:
        value = getattr(f, name)
        return UNKNOWN if value is None else f"{value:,}"

    return show


def _rate(count: str, rate: str) -> Callable[[Figures], str]:
    def show(f: Figures) -> str:
        n, r = getattr(f, count), getattr(f, rate)
        if n is None:
            return UNKNOWN
        if r is None:  # no answer whose outcome is known: no rate
            return f"{n}" if n else "–"
        return f"{n} ({r:.0%})"

    return show


def _wait(name: str) -> Callable[[Figures], str]:
    def show(f: Figures) -> str:
        value = getattr(f, name)
        if value is None:
            return "–" if f.answered == 0 else UNKNOWN
        return _span(value)

    return show


def _oldest(f: Figures) -> str:
    if f.oldest_open_s is None:
        return "–" if f.open_now == 0 else UNKNOWN
    return _span(f.oldest_open_s)


def _span(seconds: float | None) -> str:
    return UNKNOWN if seconds is None else span(seconds)


COLUMNS: tuple[Column, ...] = (
    Column("repo", lambda f: f.key.lower(), lambda f: f.key, descending=False),
    Column("time\nblocked", lambda f: f.blocked_s, lambda f: _span(f.blocked_s)),
    Column("\nopened", lambda f: f.opened, _count("opened")),
    Column("\nanswered", lambda f: f.answered, _count("answered")),
    Column("wait\nmedian", lambda f: f.wait_median_s, _wait("wait_median_s"), waited=True),
    Column("wait\np90", lambda f: f.wait_p90_s, _wait("wait_p90_s"), waited=True),
    Column("wait\nmax", lambda f: f.wait_max_s, _wait("wait_max_s"), waited=True),
    Column("open\nnow", lambda f: f.open_now, _count("open_now")),
    Column("oldest\nopen", lambda f: f.oldest_open_s, _oldest, waited=True),
    Column("\nundone", lambda f: f.undone, _count("undone")),
    Column("asked\nagain", lambda f: f.asked_again_rate, _rate("asked_again", "asked_again_rate")),
    Column("not\nresumed", lambda f: f.not_resumed_rate, _rate("not_resumed", "not_resumed_rate")),
    Column("restart\nfailed", lambda f: f.restarts_failed, _count("restarts_failed")),
)
#: The column the table opens sorted by: time blocked, most first.
SORT = 1


def sorted_rows(rows: Sequence[Figures], column: Column) -> list[Figures]:
    """`rows` by `column`, largest first (names A to Z); an unknown figure always last."""
    known = [r for r in rows if column.value(r) is not None]
    unknown = [r for r in rows if column.value(r) is None]
    known.sort(key=lambda r: r.key)  # ties stay by name, A to Z (the sorts are stable)
    known.sort(key=column.value, reverse=column.descending)  # type: ignore[arg-type]
    return known + sorted(unknown, key=lambda r: r.key)


def unknown_line(unknown: Unknown) -> str:
    """`? host build-1 (agents): unknown since 2026-12-01 10:15 (why)`, in local time: what
    the table's `?` stand for."""
    if unknown.since is not None:
        since = "unknown since " + unknown.since.astimezone().strftime("%Y-%m-%d %H:%M")
    elif unknown.kind == "host":
        since = "unknown, never reached"
    else:
        since = "unknown"
    return printable(f"{UNKNOWN} {unknown.what}: {since} ({unknown.why})")


def _word(shown: str) -> str:
    return "unknown" if shown == UNKNOWN else shown


def overall_line(stats: Stats, days: int) -> str:
    f = stats.overall
    median, p90 = _word(_wait("wait_median_s")(f)), _word(_wait("wait_p90_s")(f))
    parts = [
        f"last {days} days",
        f"{_word(_count('opened')(f))} opened",
        f"{_word(_count('answered')(f))} answered",
        f"median wait {median}, p90 {p90}",
        f"{span(f.blocked_s)} blocked",
    ]
    if f.open_now is None:
        parts.append("open now unknown")
    else:
        oldest = f", oldest {span(f.oldest_open_s)}" if f.oldest_open_s is not None else ""
        parts.append(f"{f.open_now} open{oldest}")
    return " · ".join(parts)


def chart_bars(
    rows: Sequence[Figures], label: Callable[[str], str], sla: tuple[timedelta, timedelta] | None
) -> list[Bar]:
    """The chart's bars: the TOP repositories most blocked, then one for the rest (summed),
    then the repositories whose time is unknown; none for a repository not blocked at all.
    A bar is amber or red (`[sla]`) by its repository's median wait or its oldest open
    block, whichever is longer."""
    known = sorted((r for r in rows if r.blocked_s), key=lambda r: (-(r.blocked_s or 0), r.key))
    unknown = [r for r in rows if r.blocked_s is None]

    def waited(r: Figures) -> float | None:
        waits = [w for w in (r.wait_median_s, r.oldest_open_s) if w is not None]
        return max(waits) if waits else None

    bars = [Bar(label(r.key), r.blocked_s, level(waited(r), sla)) for r in known[:TOP]]
    rest = known[TOP:]
    if rest:
        total = sum(r.blocked_s or 0.0 for r in rest)
        bars.append(Bar(f"{len(rest):,} others", total))
    bars += [Bar(label(r.key), None) for r in unknown[: max(0, TOP + 1 - len(bars))]]
    return bars


class StatsCache:
    """The figures last computed for each window, so that `S` shows them at once while the
    screen's worker computes them again (at 100,000 answers that takes longer than an open
    may). The app fills the 30 days' ahead, once its first scan is over (`prefetch`)."""

    def __init__(self, load: Load) -> None:
        self.load = load
        self.figures: dict[int, Stats] = {}

    def compute(self, days: int, gently: Quiet | None = None) -> Stats:
        """The figures of the last `days` days, computed now (blocking), and kept. `gently`:
        read ahead, giving way to the operator's keys (`Quiet.sliced`)."""
        window = timedelta(days=days)
        stats = self.load(window) if gently is None else self.load(window, gently)
        self.figures[days] = stats
        return stats


@dataclass
class StatsRead(Message):
    """The figures of a window, computed by the screen's worker."""

    days: int
    stats: Stats


class StatsScreen(ModalScreen[str | None]):
    """The fleet's figures over a window: charts, and the table by repository. Dismissed with
    the repository name to filter the inbox by ("": every one), or None (Esc)."""

    DEFAULT_CSS = """
    StatsScreen { align: center middle; background: $background; }
    #stats-box {
        width: 100%; height: 100%;
        border: round $accent; background: $surface; padding: 0 1;
    }
    #stats-overall { height: 1; text-style: bold; }
    #stats-charts { height: 40%; min-height: 8; max-height: 13; margin-top: 1; }
    #stats-bars-box, #stats-days-box {
        height: 100%; border: round $primary 50%; padding: 0 1;
        border-title-color: $text-muted;
    }
    #stats-bars-box { width: 40%; }
    #stats-days-box { width: 1fr; margin-left: 1; }
    #stats-days { height: 1fr; }
    #stats-table { height: 1fr; min-height: 4; }
    #stats-unknowns { height: auto; max-height: 4; color: $warning; }
    #stats-hint { color: $text-muted; height: 1; }
    StatsScreen.-short #stats-box { border: none; padding: 0; }
    StatsScreen.-short #stats-charts { display: none; }
    """
    BINDINGS: ClassVar = bindings("stats")

    def __init__(
        self,
        load: Load | StatsCache,
        labels: Mapping[str, str] | None = None,
        sla: tuple[timedelta, timedelta] | None = None,
    ) -> None:
        super().__init__()
        #: Computes the figures of a window (blocking: run by the worker), and keeps them.
        self.cache = load if isinstance(load, StatsCache) else StatsCache(load)
        #: A row's key (a repository's path as text) -> its name in the inbox (`shop`).
        self.labels = dict(labels or {})
        self.sla = sla
        self.window = 0
        self.sort = SORT
        self.stats: Stats | None = None
        #: The window (days) of the figures shown; None until the first come.
        self.shown_days: int | None = None
        #: The figures shown are those kept from before, being computed again.
        self.updating = False
        #: The rows shown, in the table's order: the overall row first.
        self.shown: list[Figures] = []

    @property
    def days(self) -> int:
        return WINDOWS[self.window]

    def label(self, key: str) -> str:
        """A repository as the inbox names it (its path's last part if the inbox has none)."""
        if key in self.labels:
            return self.labels[key]
        return key.rstrip("/").rsplit("/", 1)[-1] or key

    def compose(self) -> ComposeResult:
        with Vertical(id="stats-box") as box:
            box.border_title = "Fleet stats"
            yield Static("Computing the figures…", id="stats-overall", markup=False)
            with Horizontal(id="stats-charts"):
                with Vertical(id="stats-bars-box") as bars:
                    bars.border_title = "Time blocked per repo"
                    yield RepoBars(id="stats-bars")
                with Vertical(id="stats-days-box") as days:
                    days.border_title = "Blocks per day"
                    yield DayChart(id="stats-days")
            yield DataTable(
                id="stats-table", cursor_type="row", zebra_stripes=True, header_height=2
            )
            yield Static("", id="stats-unknowns", markup=False)
            yield Static("", id="stats-hint", markup=False)
        yield Footer(show_command_palette=False)

    def on_mount(self) -> None:
        self.table.focus()
        self._hint()

    def on_screen_resume(self) -> None:
        """Each open (the app keeps this screen installed): the figures kept from the last
        time at once, if any, and computed again."""
        self._open_window()

    def _open_window(self) -> None:
        kept = self.cache.figures.get(self.days)
        self.updating = True
        if kept is None:
            self.query_one("#stats-overall", Static).update(
                f"Computing the figures of the last {self.days} days…"
            )
            self._compute(self.days)
            return
        if kept is self.stats and self.shown_days == self.days:  # on screen since last time
            self._show_overall()
        else:
            self.stats, self.shown_days = kept, self.days
            self._show()
        # Computed again once they are drawn (the worker's thread takes turns with this one:
        # started at once, it slowed the frame that shows them by as much as it took).
        self.set_timer(AGAIN_AFTER, lambda days=self.days: self._compute(days))

    @property
    def table(self) -> DataTable:
        return self.query_one("#stats-table", DataTable)

    @work(thread=True, exclusive=True, group="stats", exit_on_error=False, description="stats")
    def _compute(self, days: int) -> None:
        self.post_message(StatsRead(days, self.cache.compute(days)))

    @on(StatsRead)
    def _read(self, message: StatsRead) -> None:
        if message.days != self.days:  # a window changed since (`w` pressed twice)
            return
        current = self.current
        self.stats = message.stats
        self.shown_days = message.days
        self.updating = False
        self._show(current.key if current is not None else None)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            error = event.worker.error
            text = printable(f"The figures could not be computed: {type(error).__name__}: {error}")
            self.query_one("#stats-overall", Static).update(text)

    def _show(self, keep: str | None = None) -> None:
        stats = self.stats
        if stats is None:
            return
        self._show_overall()
        bars = chart_bars(stats.rows, self.label, self.sla)
        self.query_one(RepoBars).show(bars, "No block in the window.")
        self.query_one(DayChart).show([DayCounts(d.day, d.opened, d.answered) for d in stats.days])
        unknowns = "\n".join(unknown_line(u) for u in stats.unknowns)
        self.query_one("#stats-unknowns", Static).update(unknowns)
        self._fill(keep)

    def _show_overall(self) -> None:
        if self.stats is not None:
            updating = " · updating…" if self.updating else ""
            line = overall_line(self.stats, self.days) + updating
            self.query_one("#stats-overall", Static).update(line)

    def _fill(self, keep: str | None = None) -> None:
        """The table, sorted by the chosen column; the cursor stays on `keep`'s row."""
        table = self.table
        table.clear(columns=True)
        for i, column in enumerate(COLUMNS):
            title = column.title + ("▼" if i == self.sort else "")
            justify: Literal["left", "right"] = "left" if i == 0 else "right"
            label = Text(title, style="bold" if i == self.sort else "", justify=justify)
            table.add_column(label, key=str(i))
        stats = self.stats
        if stats is None:
            return
        column = COLUMNS[self.sort]
        overall = Figures(**{**stats.overall.to_json(), "key": ""})
        ordered = sorted_rows(stats.rows, column)
        self.shown = [overall, *ordered[:ROWS]]
        for figures in self.shown:
            table.add_row(*self._cells(figures), key=figures.key or "\0all")
        if len(ordered) > ROWS:  # a line, not a repository (Enter there does nothing)
            more = f"… {len(ordered) - ROWS:,} more"
            table.add_row(Text(more, style="italic"), *[""] * (len(COLUMNS) - 1), key="\0more")
        if keep is not None:
            keys = [f.key for f in self.shown]
            if keep in keys:
                table.move_cursor(row=keys.index(keep), animate=False)

    def _cells(self, figures: Figures) -> list[Text]:
        """A row's cells; a time waited past the `[sla]` times in the inbox's amber and red."""
        colours = self.app.theme_variables
        sla_styles = {
            "warn": colours.get("warning", "yellow"),
            "alert": colours.get("error", "red"),
        }
        cells = []
        for i, column in enumerate(COLUMNS):
            if i == 0:
                name = "all repos" if not figures.key else self.label(figures.key)
                cells.append(Text(printable(name), style="bold" if not figures.key else ""))
                continue
            shown = column.show(figures)
            style = ""
            if shown == UNKNOWN:
                style = sla_styles["warn"] + " bold"
            elif column.waited:
                wait = column.value(figures)
                at = level(wait if isinstance(wait, float | int) else None, self.sla)
                style = sla_styles.get(at, "") + (" bold" if at == "alert" else "")
            cells.append(Text(shown, style=style, justify="right"))
        return cells

    def _hint(self) -> None:
        sort = " ".join(COLUMNS[self.sort].title.split())
        windows = "/".join(f"{d}d" for d in sorted(WINDOWS))
        self.query_one("#stats-hint", Static).update(
            f"Enter: the inbox filtered to the repo · s: sort (by {sort}) · "
            f"w: window ({windows}, now {self.days}d) · Esc: back"
        )

    @property
    def current(self) -> Figures | None:
        row = self.table.cursor_row
        return self.shown[row] if 0 <= row < len(self.shown) else None

    def action_cursor_down(self) -> None:
        self.table.action_cursor_down()

    def action_cursor_up(self) -> None:
        self.table.action_cursor_up()

    def action_first(self) -> None:
        self.table.move_cursor(row=0, animate=False)

    def action_last(self) -> None:
        self.table.move_cursor(row=max(0, len(self.shown) - 1), animate=False)

    def action_cycle_sort(self) -> None:
        """`s`: the next column to sort by (the header marks it ▼)."""
        current = self.current
        self.sort = (self.sort + 1) % len(COLUMNS)
        self._fill(current.key if current else None)
        self._hint()

    def action_cycle_window(self) -> None:
        """`w`: the next window (30, 90, 7 days), computed again in the worker."""
        self.window = (self.window + 1) % len(WINDOWS)
        self._hint()
        self._open_window()

    @on(DataTable.RowSelected, "#stats-table")
    def action_filter_repo(self) -> None:
        """`Enter`: close, and filter the inbox to the highlighted repository."""
        figures = self.current
        if figures is None:
            return
        self.dismiss(self.label(figures.key) if figures.key else "")

    def action_close(self) -> None:
        self.dismiss(None)


def unreached(app: Any) -> list[Unknown]:
    """The remote scopes the app could not read when it last polled them
    (`HitlApp.source_states`): their open blocks are not known, since they were last read
    (None: not once since the app started)."""
    backends = {r.title: r for r in app.inbox.remotes}
    out = []
    for title, scopes in app.source_states.items():
        backend = backends.get(title)
        source = str(backend.name) if backend is not None else title
        hosts = set(getattr(backend, "hosts", None) or ())
        for scope, (state, message) in scopes.items():
            if state in ("ok", "warning"):
                continue
            last = app.source_reached.get(title, {}).get(scope)
            host = scope if scope in hosts else ""
            what = f"host {scope} ({source})" if host else f"{title} {scope}"
            why = printable(" ".join(message.split()))
            out.append(Unknown("host", printable(what), last, why, source, host))
    return out


def loader(app: Any) -> Load:
    """The app's figures for a window: the state folder's journal and books, the inbox's
    repositories and open blocks, and the remote scopes not read (run in the screen's
    worker)."""
    import os

    from hitl_tui.stats import compute

    def load(window: timedelta, gently: Quiet | None = None) -> Stats:
        now: datetime = app.clock()
        inbox = app.inbox
        with inbox.lock:  # (the first scan holds it until its end)
            blocks = list(inbox.blocks.values())
            repos = [os.fsdecode(r) for r in inbox.workspace.repos]
        book = inbox.resumes
        return compute(
            since=now - window,
            now=now,
            repos=repos,
            open_blocks=blocks if gently is None else gently.sliced(blocks),
            resumes=book.recent(since=window) if book is not None else (),
            unreached=unreached(app),
        )

    return load
