"""The fleet stats screen (`S`): figures of real answers, sorting (`s`), the window (`w`),
unknowns that never read 0, and Enter on a repository filtering the inbox to it."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from hitl_tui.cli.demo import build_workspace
from hitl_tui.config import Config
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.inbox.workspace import Workspace
from hitl_tui.stats.sample import sample
from hitl_tui.tui.app import HitlApp
from hitl_tui.tui.stats_charts import RepoBars
from hitl_tui.tui.stats_screen import StatsScreen
from hitl_tui.tui.widgets import BlockList
from tests.support import until
from tests.support.pilot import select, settle
from tests.tui_support import NOW, SIZE, demo_workspace, make_app

SLA = (timedelta(minutes=15), timedelta(hours=1))


async def _answer(pilot, app, block_id: str, key: str = "2") -> None:
    await select(pilot, app, block_id)
    await pilot.press(key, "enter")
    await app.workers.wait_for_complete()
    await pilot.pause()


async def _stats(pilot, app) -> StatsScreen:
    """The stats screen, once its figures are shown, computed since it opened (those kept
    from before, the app's computed ahead among them, are shown first: "updating…")."""
    await until(pilot, lambda: isinstance(app.screen, StatsScreen), 5, what="the stats screen")
    screen = app.screen
    await until(
        pilot,
        lambda: screen.stats is not None and screen.table.row_count > 0 and not screen.updating,
        10,
        what="the figures",
        saw=lambda: str(screen.query_one("#stats-overall").content),
    )
    return screen


def _rows(screen: StatsScreen) -> dict[str, list[str]]:
    """Each row of the table as shown: its first cell -> every cell's text."""
    table = screen.table
    out = {}
    for i in range(table.row_count):
        cells = [str(c) for c in table.get_row_at(i)]
        out[cells[0]] = cells
    return out


def _column(title: str) -> int:
    from hitl_tui.tui.stats_screen import COLUMNS

    return [" ".join(c.title.split()) for c in COLUMNS].index(title)


async def test_s_shows_real_answers_s_sorts_and_enter_filters_the_inbox(tmp_path: Path) -> None:
    # On the real clock: the journal records each answer's real time.
    build_workspace(tmp_path)
    config = Config(operator="Ada", bell=False)
    app = HitlApp(Inbox(Workspace.discover([tmp_path])), config, watch=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        # Two real answers: shop blocked 190 minutes before, api 48.
        await _answer(pilot, app, "shop")
        await _answer(pilot, app, "api")
        await pilot.press("S")
        screen = await _stats(pilot, app)
        rows = _rows(screen)
        shop, api = rows["shop"], rows["api"]
        answered, median, blocked = _column("answered"), _column("wait median"), 1
        assert (shop[answered], shop[median], shop[blocked]) == ("1", "3h10m", "3h10m")
        assert (api[answered], api[median], api[blocked]) == ("1", "48m", "48m")
        assert rows["all repos"][answered] == "2"
        assert rows["all repos"][_column("wait max")] == "3h10m"
        # mobile's block is open, blocked 125 minutes; billing's two tasks are, none answered.
        mobile, billing = rows["mobile"], rows["billing"]
        assert (mobile[_column("open now")], mobile[_column("oldest open")]) == ("1", "2h05m")
        assert (mobile[answered], mobile[median]) == ("0", "–")
        assert billing[_column("open now")] == "2" and billing[answered] == "0"
        # Sorted by time blocked, most first (the overall row stays on top).
        order = [screen.label(f.key) for f in screen.shown[1:]]
        assert order[0] == "billing" and order.index("shop") < order.index("api")
        assert "time\nblocked▼" in [str(c.label) for c in screen.table.columns.values()]
        # `s`: sorted by the next column, opened, which the header and the hint say.
        await pilot.press("s")
        await pilot.pause()
        assert "by opened" in str(screen.query_one("#stats-hint").content)
        opened = [f.opened for f in screen.shown[1:]]
        assert opened == sorted(opened, reverse=True) and opened[0] == 2
        # The chart names the repositories most blocked, billing first.
        assert screen.query_one(RepoBars).bars[0].label == "billing"
        # Enter on billing: the screen closes, the inbox lists billing's blocks only.
        await pilot.press("home")
        for _ in range(len(screen.shown)):
            if screen.current is not None and screen.label(screen.current.key) == "billing":
                break
            await pilot.press("j")
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is app.inbox_screen
        assert app.inbox_screen.rows.spec.query.text == "repo:billing"
        listed = {b.id for b in app.query_one(BlockList).blocks.values()}
        shown = [app.inbox_screen.rows.blocks[rk].id for rk in app.query_one(BlockList).order]
        assert shown and all(i.startswith("billing/") for i in shown), (shown, listed)
        # S again, Enter on the overall row: the filter is cleared.
        await pilot.press("S")
        screen = await _stats(pilot, app)
        await pilot.press("home", "enter")
        await pilot.pause()
        assert app.inbox_screen.rows.spec.query.text == ""


async def test_unknown_figures_read_unknown_never_zero_and_w_changes_the_window(
    tmp_path: Path,
) -> None:
    """A host never reached: its row is `?` in every cell, a line says what and why; a
    repository's name with markup in it is shown as it is; `w` computes 90 days, then 7."""
    asked: list[timedelta] = []
    hostile = "/loops/[b]shop[b [@click=app.quit]"

    def load(window: timedelta):
        asked.append(window)
        stats = sample(NOW, days=window.days)
        rows = (replace(stats.rows[0], key=hostile), *stats.rows[1:])
        return replace(stats, rows=rows)

    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        app.push_screen(StatsScreen(load, {}, SLA))
        screen = await _stats(pilot, app)
        rows = _rows(screen)
        agents = rows["agents"]
        assert set(agents[1:]) == {"?"}, agents
        unknowns = str(screen.query_one("#stats-unknowns").content)
        assert "host build-1 (agents): unknown, never reached" in unknowns
        assert "Connection refused" in unknowns
        assert "open now unknown" in str(screen.query_one("#stats-overall").content)
        assert "[b]shop[b [@click=app.quit]" in rows
        assert "[b]shop[b [@click=app.quit]" in [b.label for b in screen.query_one(RepoBars).bars]
        assert asked == [timedelta(days=30)]
        await pilot.press("w")
        await until(pilot, lambda: screen.shown_days == 90, 5, what="90 days")
        assert "now 90d" in str(screen.query_one("#stats-hint").content)
        await pilot.press("w")
        await until(pilot, lambda: screen.shown_days == 7, 5, what="7 days")
        assert asked == [timedelta(days=d) for d in (30, 90, 7)]
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.inbox_screen
        assert app.inbox_screen.rows.spec.query.text == ""


async def test_the_demo_history_fills_the_screen_and_asks_nothing_again(tmp_path: Path) -> None:
    """`hitl demo`'s fortnight of past answers (`demo.build_history`): journaled, dated in the
    past with their blocks' starts, shown by `S`; none reads as the open blocks asked again,
    `u` on an open block is not about them, and an undo of one is refused, the repos
    untouched."""
    from hitl_tui import journal
    from hitl_tui.answers.service import undo_answer
    from hitl_tui.cli.demo import build_history
    from hitl_tui.model import HitlError

    root = demo_workspace(tmp_path)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    made = build_history(root, NOW.timestamp())
    entries = journal.history(limit=1000)
    assert made == len(entries) > 30
    assert all(NOW - timedelta(days=15) < e.time < NOW for e in entries)
    shop = sum(e.block_id == "shop" for e in entries)
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        again = [b.id for b in app.inbox.blocks.values() if app.asked.again(b) is not None]
        assert again == []
        await select(pilot, app, "shop")
        await pilot.press("u")  # as before the history: nothing of the demo's own to undo
        await until(pilot, lambda: any(n.title == "Not undone" for n in app._notifications))
        note = next(n for n in app._notifications if n.title == "Not undone")
        assert note.message.startswith("nothing to undo"), note.message
        await pilot.press("S")
        screen = await _stats(pilot, app)
        await until(pilot, lambda: not screen.updating, 10, what="the figures computed")
        rows = _rows(screen)
        assert rows["shop"][_column("answered")] == str(shop)
        assert rows["all repos"][_column("answered")] == str(made)
    try:
        undo_answer(entries[0].id, "Ada")
    except HitlError as exc:
        assert "not undoable" in str(exc)
    else:  # pragma: no cover - the assertion below says what happened
        raise AssertionError("the undo of a demo answer went through")
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


async def test_figures_that_cannot_be_computed_say_why_as_plain_text(tmp_path: Path) -> None:
    def load(window: timedelta):
        raise OSError("[b]journal[/b unreadable [@click=app.quit]")

    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        app.push_screen(StatsScreen(load, {}, SLA))
        await until(pilot, lambda: isinstance(app.screen, StatsScreen), 5, what="the screen")
        screen = app.screen
        overall = screen.query_one("#stats-overall")
        await until(
            pilot,
            lambda: "could not be computed" in str(overall.content),
            5,
            what="the failure said",
            saw=lambda: str(overall.content),
        )
        assert "OSError: [b]journal[/b unreadable [@click=app.quit]" in str(overall.content)
        assert app.is_running and screen.table.row_count == 0


async def test_the_palette_and_the_help_offer_the_stats(tmp_path: Path) -> None:
    from hitl_tui.tui.screens import HelpScreen
    from tests.support.pilot import palette

    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), 5, what="the help")
        text = str(app.screen.query_one("#help-text").content)
        assert "In the fleet stats (S)" in text and "fleet stats: time blocked per repo" in text
        await pilot.press("escape")
        await palette(pilot, app, "fleet stats: time blocked")
        screen = await _stats(pilot, app)
        assert screen is app.screen


def test_a_host_the_app_could_not_read_is_unknown_since_it_last_was() -> None:
    """`unreached`: the app's remote scopes not read when last polled, each an Unknown of
    kind host, since the app last read it (None: not once), its message made one line."""
    from types import SimpleNamespace

    from hitl_tui.tui.stats_screen import unknown_line, unreached

    ssh = SimpleNamespace(title="SSH", name="remote", hosts={"build-1": None, "down-1": None})
    app = SimpleNamespace(
        inbox=SimpleNamespace(remotes=[ssh]),
        source_states={
            "SSH": {
                "build-1": ("error", "ssh: connect to host build-1\nport 22: refused"),
                "down-1": ("unreachable", "timed out"),
                "ok-1": ("ok", ""),
            }
        },
        source_reached={"SSH": {"build-1": NOW - timedelta(hours=2)}},
    )
    found = {u.host: u for u in unreached(app)}
    assert set(found) == {"build-1", "down-1"}
    build = found["build-1"]
    assert (build.kind, build.source, build.since) == ("host", "remote", NOW - timedelta(hours=2))
    assert build.why == "ssh: connect to host build-1 port 22: refused"
    assert found["down-1"].since is None
    assert "unknown, never reached" in unknown_line(found["down-1"])
    assert "unknown since " in unknown_line(build)


async def test_a_reopen_shows_the_kept_figures_at_once_then_the_new_ones(tmp_path: Path) -> None:
    """The figures kept from the last open are shown as `S` opens, said to be updating, and
    replaced by those the worker computes again."""
    import threading

    from hitl_tui.tui.stats_screen import StatsCache

    release = threading.Event()
    calls: list[int] = []

    def load(window: timedelta):
        calls.append(window.days)
        if len(calls) > 1:  # the second computation waits for the test
            assert release.wait(10)
        stats = sample(NOW, days=window.days)
        return replace(stats, overall=replace(stats.overall, answered=len(calls)))

    cache = StatsCache(load)
    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        app.install_screen(StatsScreen(cache, {}, SLA), "kept")  # as the app keeps it
        app.push_screen("kept")
        screen = await _stats(pilot, app)
        assert _rows(screen)["all repos"][_column("answered")] == "1"
        await pilot.press("escape")
        await pilot.pause()
        app.push_screen("kept")
        await until(pilot, lambda: app.screen is screen, 5, what="the screen again")
        overall = screen.query_one("#stats-overall")
        assert screen.updating and "updating…" in str(overall.content)
        assert _rows(screen)["all repos"][_column("answered")] == "1"
        release.set()
        await until(pilot, lambda: not screen.updating, 10, what="the new figures")
        assert _rows(screen)["all repos"][_column("answered")] == "2"
        assert "updating" not in str(overall.content)
