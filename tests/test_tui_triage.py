"""Triage at fleet scale, in the app: the filter, the order and groups, new blocks, snoozes, and
the age's colour. Driven by keys; asserting what is on screen and what is in the state folder."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

from textual.widgets import Input, Static

from hitl_tui.config import Config
from hitl_tui.inbox.inbox import Delta, Inbox
from hitl_tui.inbox.view import Group
from hitl_tui.inbox.workspace import Workspace
from hitl_tui.model import Block
from hitl_tui.sources.loopkit.source import LoopkitSource
from hitl_tui.tui.app import HitlApp
from hitl_tui.tui.inbox_screen import InboxScreen
from hitl_tui.tui.snooze_screen import SnoozeScreen
from hitl_tui.tui.widgets import BlockList
from tests.support.pilot import select, settle
from tests.tui_support import NOW, SIZE, demo_workspace, make_app


async def _press_done(pilot, app, *keys: str) -> None:
    """Press `keys`, then wait for what they started (a snooze written) to be shown."""
    await pilot.press(*keys)
    await app.workers.wait_for_complete()
    await pilot.pause()


def _header(app) -> str:
    return str(app.query_one("#topbar", Static).content)


def _filter_shown(app) -> bool:
    return app.query_one("#filter-bar").display


def _ids(table: BlockList) -> list[str]:
    return [table.blocks[rk].id for rk in table.order]


def _state(name: str) -> dict:
    path = Path(os.environ["HITL_STATE_DIR"]) / name
    return json.loads(path.read_text()) if path.exists() else {}


def _app(root: Path, clock: list) -> HitlApp:
    """The demo app with a clock the test moves (`clock[0]`)."""
    inbox = Inbox(Workspace.discover([root]))
    return HitlApp(inbox, Config(operator="Ada", bell=False), watch=False, clock=lambda: clock[0])


def _new_block(root: Path, name: str, question: str, minutes_ago: int = 1) -> Block:
    repo = root / name
    (repo / ".git").mkdir(parents=True, exist_ok=True)
    (repo / "BLOCKED.md").write_text(f"## Question\n{question}\n")
    stamp = NOW.timestamp() - minutes_ago * 60
    os.utime(repo / "BLOCKED.md", (stamp, stamp))
    block = LoopkitSource().parse(repo, repo / "BLOCKED.md", name)
    assert isinstance(block, Block)
    return block


# -- 1. the filter ---------------------------------------------------------------------------


async def test_slash_filters_as_you_type_and_enter_keeps_it(tmp_path: Path) -> None:
    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        table = app.query_one(BlockList)
        assert len(table.order) == 6 and "of" not in _header(app)
        await pilot.press("slash")
        box = app.query_one("#filter", Input)
        assert box.has_focus and _filter_shown(app)
        await pilot.press("b", "i", "l", "l")
        assert _ids(table) == ["billing/T-007", "billing/T-012"]
        assert _header(app).startswith("hitl · 2 of 6 blocks in 5 repos")
        await pilot.press("enter")
        assert table.has_focus and _filter_shown(app) and box.value == "bill"
        assert _ids(table) == ["billing/T-007", "billing/T-012"]
        await pilot.press("j")  # the list's keys work again
        assert table.current.id == "billing/T-012"


async def test_escape_clears_the_filter_and_goes_back_to_the_list(tmp_path: Path) -> None:
    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        table = app.query_one(BlockList)
        await pilot.press("slash", "s", "h", "o", "p")
        assert _ids(table) == ["shop"]
        await pilot.press("escape")
        box = app.query_one("#filter", Input)
        assert table.has_focus and box.value == "" and not _filter_shown(app)
        assert len(table.order) == 6 and "of" not in _header(app)
        assert table.current.id == "shop"  # the block highlighted under the filter stays


async def test_letters_typed_in_one_burst_with_the_slash_go_to_the_filter(tmp_path: Path) -> None:
    """A terminal hands a fast burst (or a busy app's backlog) over in one read: every key is
    queued before `/` is handled. The letters after it are the filter's: `z` must not open
    the snooze dialog, nor any other letter act on the highlighted block."""
    from textual import events

    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        for key, char in (("slash", "/"), ("z", "z"), ("z", "z"), ("z", "z")):
            app.post_message(events.Key(key, char))
        await pilot.pause()
        await pilot.pause()
        assert isinstance(app.screen, InboxScreen), app.screen
        assert app.query_one("#filter", Input).value == "zzz"
        assert _ids(app.query_one(BlockList)) == []
        await pilot.press("backspace", "backspace", "backspace", "slash", "s", "h")
        assert app.query_one("#filter", Input).value == "/sh"  # in the box, `/` is typed


def _note_or_detail(app) -> tuple[str | None, bool]:
    """The note shown where the detail goes (None: hidden), and whether the detail shows."""
    note = app.query_one("#list-note", Static)
    return (str(note.content) if note.display else None), app.query_one("#detail").display


async def test_a_filter_that_lists_none_says_so_where_the_detail_was(tmp_path: Path) -> None:
    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        app.inbox_screen.BURST_GAP = 0  # the operator pauses after Esc (else L and v are eaten)
        assert _note_or_detail(app) == (None, True)
        await pilot.press("slash", *"zzz")
        assert _ids(app.query_one(BlockList)) == []
        note, detail = _note_or_detail(app)
        assert note is not None and "No block matches the filter" in note and not detail
        await pilot.press("backspace", "backspace", "backspace")  # every block again
        assert _note_or_detail(app) == (None, True)
        await pilot.press("escape", "L", "slash", *"zzz")  # the list zoomed: the note still
        assert app.inbox_screen.seen.list_zoom
        note, detail = _note_or_detail(app)
        assert note is not None and "No block matches the filter" in note and not detail
        await pilot.press("escape", "L", "v", "k")  # grouped by repo: onto billing's header
        table = app.query_one(BlockList)
        assert table.current is None and table.current_group.name == "billing"
        note, detail = _note_or_detail(app)
        assert note is not None and note.startswith("billing: 2 blocks") and not detail
        await pilot.press("j")
        assert _note_or_detail(app) == (None, True)


async def test_query_problems_are_one_dim_line_not_an_error(tmp_path: Path) -> None:
    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("slash", *"age:>")
        problems = app.query_one("#filter-problems", Static)
        assert problems.display and "age: wants a duration" in str(problems.content)
        assert not any(n.severity == "error" for n in app._notifications)
        assert len(app.query_one(BlockList).order) == 6  # the incomplete term is left out
        await pilot.press("1", "h")
        assert not problems.display
        listed = _ids(app.query_one(BlockList))
        assert listed == ["billing/T-007", "billing/T-012", "shop", "mobile"]


async def test_the_highlighted_row_stays_while_the_filter_changes(tmp_path: Path) -> None:
    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        table = app.query_one(BlockList)
        await select(pilot, app, "mobile")
        screen = app.screen
        assert isinstance(screen, InboxScreen)
        screen.set_filter("-docs")
        await pilot.pause()
        assert "mobile" in _ids(table) and len(table.order) < 6
        assert table.current.id == "mobile"
        assert app.query_one("#filter", Input).value == "-docs"
        screen.set_filter("repo:shop")  # mobile leaves: the highlight goes to a listed row
        await pilot.pause()
        assert table.current.id == "shop"
        screen.set_filter("")
        await pilot.pause()
        assert table.current.id == "shop" and len(table.order) == 6


async def test_a_filter_keystroke_draws_what_a_fresh_draw_draws(tmp_path: Path) -> None:
    """A filter, a fold or a snooze keeps the rows' drawn lines (the columns keep their widths)
    and finds the highlighted row without indexing every row first: after each keystroke,
    cursor move, grouping and fold, every line on screen is the line drawn from scratch, and
    the highlighted row is where the drawn rows put it."""
    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        table = app.query_one(BlockList)

        def check() -> None:
            def drawn() -> list[list[tuple[str, object]]]:  # each line's text and styles
                height = range(table.size.height)
                return [[(s.text, s.style) for s in table.render_line(y)] for y in height]

            kept = drawn()
            lines, table._lines = table._lines, {}  # (the kept lines stay kept for the next)
            assert kept == drawn()
            table._lines = lines
            items = [table._item_key(item) for item in table.drawn]
            assert table._index == dict(zip(items, range(len(items)), strict=True))
            if table.current is not None:
                assert items[table.cursor_row] == table._kept()

        await select(pilot, app, "mobile")
        await pilot.press("slash")
        for key in ["o", "backspace", "i", "l", "backspace", "backspace", "b", "i"]:
            await pilot.press(key)
            check()
        await pilot.press("escape")
        for key in ["j", "j", "v", "j", "enter", "k", "enter", "v", "v", "s"]:
            await pilot.press(key)
            check()


async def test_arrivals_the_filter_keeps_out_are_counted(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        app.screen.set_filter("password")
        await pilot.pause()
        table = app.query_one(BlockList)
        assert table.order == []
        kept_out = _new_block(root, "infra", "Which region first?")
        matching = _new_block(root, "web", "Rotate the password now?")
        app.apply_delta(Delta(added=[kept_out, matching]))
        await pilot.pause()
        assert _ids(table) == ["web"]
        assert "1 of 8 blocks" in _header(app) and "+1 hidden by the filter" in _header(app)


# -- 2. order and groups -------------------------------------------------------------------


async def test_s_cycles_the_order_and_it_is_remembered(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        table = app.query_one(BlockList)
        await select(pilot, app, "shop")
        await pilot.press("s")
        assert "newest first" in _header(app)
        assert _ids(table) == ["docs", "api", "mobile", "shop", "billing/T-012", "billing/T-007"]
        assert table.current.id == "shop"
        await pilot.press("s")
        assert "by repo" in _header(app) and _ids(table)[0] == "api"
    assert _state("seen.json")["order"] == "repo"
    again = make_app([root])
    async with again.run_test(size=SIZE) as pilot:
        await settle(pilot, again)
        assert _ids(again.query_one(BlockList))[0] == "api"
        assert "by repo" in _header(again)


async def test_v_groups_with_a_header_per_group_that_folds(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        table = app.query_one(BlockList)
        await pilot.press("v")
        assert "grouped by repo" in _header(app)
        headers = [item for item in table.drawn if isinstance(item, Group)]
        assert [(g.name, g.count) for g in headers][:2] == [("billing", 2), ("shop", 1)]
        assert table.current.id == "billing/T-007"
        await pilot.press("k")  # onto the billing header
        assert table.current is None and table.current_group.name == "billing"
        await pilot.press("enter")
        assert table.current_group.folded and len(table.drawn) == 5 + 4  # 5 headers, 4 rows
        # Enter again unfolds (Space marks the group's blocks: tests/test_tui_batch.py).
        await pilot.press("enter")
        assert not table.current_group.folded and len(table.drawn) == 11
        # A click on a header folds it too (the list is under the border and column titles).
        shop_row = table.drawn.index(next(g for g in headers if g.name == "shop"))
        await pilot.click(BlockList, offset=(5, shop_row))
        await pilot.pause()
        assert any(isinstance(g, Group) and g.name == "shop" and g.folded for g in table.drawn)
        await pilot.press("v")
        assert "grouped by source" in _header(app)
        names = [item.name for item in table.drawn if isinstance(item, Group)]
        assert names == ["agenticloop", "loopkit"]
    assert _state("seen.json")["group"] == "source"


# -- 3. what is new --------------------------------------------------------------------------


async def test_new_blocks_are_marked_reached_with_n_and_seen_when_highlighted(
    tmp_path: Path,
) -> None:
    root = demo_workspace(tmp_path)
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        table = app.query_one(BlockList)
        # A first run: everything found is seen, nothing is marked.
        assert not any(app.screen.seen.is_new(b) for b in table.blocks.values())
    assert len(_state("seen.json")["seen"]) == 6
    # The next run: two blocks came meanwhile.
    a = _new_block(root, "infra", "Which region first?", minutes_ago=100_000)
    b = _new_block(root, "web", "Which CDN?", minutes_ago=5)
    again = make_app([root])
    async with again.run_test(size=SIZE) as pilot:
        await settle(pilot, again)
        table = again.query_one(BlockList)
        seen = again.screen.seen
        # The first row is highlighted at start-up (so seen); the other new one is marked.
        assert table.current.id == "infra" and not seen.is_new(a) and seen.is_new(b)
        line = table.render_line(_ids(table).index("web")).text
        assert line.startswith(BlockList.NEW_MARK + "web")
        await pilot.press("n")
        assert table.current.id == "web" and not seen.is_new(b)
        assert table.render_line(table.cursor_row).text.startswith(" web")
        await pilot.press("n")
        assert any("No new blocks" in n.message for n in again._notifications)
    assert {row[1] for row in _state("seen.json")["seen"]} >= {str(a.path), str(b.path)}


async def test_n_and_shift_n_wrap_in_list_order(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        table = app.query_one(BlockList)
        seen = app.screen.seen
        await select(pilot, app, "mobile")
        for rk in table.order:
            if table.blocks[rk].id in ("shop", "docs"):
                seen.unsee(table.blocks[rk])
        await pilot.press("n")
        assert table.current.id == "docs"
        await pilot.press("N")
        assert table.current.id == "shop"


async def test_seen_marks_are_saved_every_few_seconds_not_per_key(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        screen = app.screen
        screen.save_seen_soon()
        await app.workers.wait_for_complete()
        stamp = (Path(os.environ["HITL_STATE_DIR"]) / "seen.json").stat().st_mtime_ns
        table = app.query_one(BlockList)
        screen.seen.unsee(table.blocks[table.order[3]])
        await pilot.press("j", "j", "j")  # the marks change; nothing is written per key
        after = (Path(os.environ["HITL_STATE_DIR"]) / "seen.json").stat().st_mtime_ns
        assert after == stamp and screen.seen.dirty
        screen.save_seen_soon()  # what the 5 s timer does
        await app.workers.wait_for_complete()
        assert not screen.seen.dirty


# -- 4. snoozes ------------------------------------------------------------------------------


async def test_z_snoozes_for_an_hour_and_big_z_shows_the_snoozed(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    clock = [NOW]
    app = _app(root, clock)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        table = app.query_one(BlockList)
        await select(pilot, app, "shop")
        await pilot.press("z")
        assert isinstance(app.screen, SnoozeScreen)
        await _press_done(pilot, app, "2")
        assert "shop" not in _ids(table) and table.current.id == "mobile"
        # "N of M" is the filter's (issue 27): the snoozed one is counted on its own.
        assert "5 blocks in" in _header(app) and "1 snoozed" in _header(app)
        rows = _state("snoozed.json")["snoozes"]
        assert [(r["id"], r["until"]) for r in rows] == [
            ("shop", (NOW + timedelta(hours=1)).isoformat())
        ]
        await pilot.press("Z")
        assert _ids(table) == ["shop"] and _header(app).startswith("hitl · snoozed: 1 block")
        await _press_done(pilot, app, "z")  # in the snoozed view: back at once
        assert _ids(table) == [] and _state("snoozed.json")["snoozes"] == []
        await pilot.press("Z")
        assert "shop" in _ids(table) and "snoozed" not in _header(app)
        assert not app.screen.seen.is_new(table.blocks[table.order[2]])  # brought back: seen


async def test_escape_in_the_snooze_dialog_snoozes_nothing(tmp_path: Path) -> None:
    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("z")
        assert isinstance(app.screen, SnoozeScreen)
        await pilot.press("escape")
        await app.workers.wait_for_complete()
        assert isinstance(app.screen, InboxScreen)
        assert len(app.query_one(BlockList).order) == 6 and _state("snoozed.json") == {}


async def test_a_snooze_whose_time_is_up_comes_back_new(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    clock = [NOW]
    app = _app(root, clock)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        table = app.query_one(BlockList)
        await select(pilot, app, "api")
        await _press_done(pilot, app, "z", "1")  # 15 minutes
        assert "api" not in _ids(table)
        clock[0] = NOW + timedelta(minutes=10)
        app.screen.refresh_ages()
        assert "api" not in _ids(table) and "1 snoozed" in _header(app)
        clock[0] = NOW + timedelta(minutes=16)
        app.screen.refresh_ages()  # the minute's refresh
        await pilot.pause()
        assert "api" in _ids(table) and "snoozed" not in _header(app)
        api = table.blocks[table.order[_ids(table).index("api")]]
        assert app.screen.seen.is_new(api)


async def test_until_it_changes_and_gone_blocks_are_pruned(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        table = app.query_one(BlockList)
        await select(pilot, app, "docs")
        await pilot.press("z", "5")
        await pilot.press("home")
        await select(pilot, app, "shop")
        await _press_done(pilot, app, "z", "4")
        assert {r["id"]: r["until"] for r in _state("snoozed.json")["snoozes"]}["docs"] is None
        assert "docs" not in _ids(table) and "2 snoozed" in _header(app)
    # The next run: shop was answered meanwhile; its snooze is forgotten after the scan.
    (root / "shop" / "BLOCKED.md").unlink()
    again = make_app([root])
    async with again.run_test(size=SIZE) as pilot:
        await settle(pilot, again)
        await again.workers.wait_for_complete()
        assert [r["id"] for r in _state("snoozed.json")["snoozes"]] == ["docs"]
        assert "docs" not in _ids(again.query_one(BlockList))


# -- 5. the age's colour ---------------------------------------------------------------------


async def test_the_age_is_amber_then_red_and_bold(tmp_path: Path) -> None:
    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        table = app.query_one(BlockList)
        await pilot.press("end")  # the rows looked at are not the highlighted one

        def age_style(block_id: str):
            row = _ids(table).index(block_id)
            segments = list(table.render_line(row))
            return next(s.style for s in segments if s.text.strip() in ("48m", "17m", "3h"))

        warn = table.get_component_rich_style("blocklist--warn")
        alert = table.get_component_rich_style("blocklist--alert")
        assert age_style("api").color == warn.color  # 48 min: past 15 min
        shop = age_style("shop")  # 3 h: past an hour
        assert shop.color == alert.color and shop.bold
        assert warn.color != alert.color


async def test_a_snoozed_block_that_changes_comes_back_new(tmp_path: Path) -> None:
    from dataclasses import replace

    root = demo_workspace(tmp_path)
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        table = app.query_one(BlockList)
        await select(pilot, app, "mobile")
        mobile = table.current
        await _press_done(pilot, app, "z", "5")  # until it changes
        assert "mobile" not in _ids(table) and "1 snoozed" in _header(app)
        rewritten = replace(mobile, fingerprint="sha256:rewritten", question="Now what?")
        app.apply_delta(Delta(changed=[rewritten]))
        await pilot.pause()
        assert "mobile" in _ids(table) and "snoozed" not in _header(app)
        assert app.screen.seen.is_new(rewritten)
        row = _ids(table).index("mobile")
        assert table.render_line(row).text.startswith(BlockList.NEW_MARK + "mobile")


async def test_cat_that_finds_none_says_loopkit_blocks_carry_none_unless_declared(
    tmp_path: Path,
) -> None:
    """Issue 27, item 9: in the filter bar, one line, as the operator types; a BLOCKED.md that
    declares its category is found by it."""
    root = demo_workspace(tmp_path)
    mobile = root / "mobile" / "BLOCKED.md"
    mobile.write_text("Category: credentials\n" + mobile.read_text())
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        table = app.query_one(BlockList)
        problems = app.query_one("#filter-problems", Static)
        await pilot.press("slash", *"cat:credentials")
        assert _ids(table) == ["mobile"] and not problems.display
        await pilot.press(*"x")
        assert _ids(table) == []
        # shop, api, docs declare none; billing/T-012 is a needs_context task.
        assert problems.display and str(problems.content) == (
            'cat: loopkit blocks carry no category unless BLOCKED.md says "Category: NAME" '
            "(3 here); 1 agenticloop block carries none either"
        )
        assert not any(n.severity == "error" for n in app._notifications)
        await pilot.press("backspace")
        assert _ids(table) == ["mobile"] and not problems.display
        await pilot.press("escape")
        assert not problems.display and len(table.order) == 6
