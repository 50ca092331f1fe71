"""What the operator sees on screen: the whole list, whole categories, a preview that keeps
edits and drafts, and arrivals that do not bury the screen (issue 12, "On screen")."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import pytest
from textual.widgets import TextArea

from hitl_tui.inbox.inbox import Delta
from hitl_tui.sources.loopkit.source import LoopkitSource
from hitl_tui.tui.screens import PreviewScreen, TextAnswerScreen
from hitl_tui.tui.widgets import BlockList
from tests.support.pilot import arrive, select, settle
from tests.tui_support import NOW, SIZE, demo_workspace, make_app

#: The sizes the issue names; each overflows the list with FLEET blocks.
SIZES = [(150, 45), (100, 30), (80, 24)]
FLEET = 30


def drawn(app) -> list[str]:
    """Every line of the screen as drawn (the active screen, modals included)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def fleet(root: Path, count: int = FLEET) -> Path:
    """`count` loopkit repos, repo-01 the oldest, each asking its own numbered question."""
    for index in range(1, count + 1):
        repo = root / f"repo-{index:02d}"
        (repo / ".git").mkdir(parents=True)
        path = repo / "BLOCKED.md"
        path.write_text(
            f"## Question\nQuestion number {index:02d}?\n"
            "## Context\nA fleet.\n## Attempted\n- Nothing.\n"
            "## Choices\n- A) Yes — fine.\n- B) No — also fine.\n"
        )
        stamp = NOW.timestamp() - (count + 1 - index) * 600
        os.utime(path, (stamp, stamp))
    return root


def list_lines(app) -> list[str]:
    """The drawn lines that are rows of the inbox (they name a repo-NN block)."""
    return [line for line in drawn(app) if "repo-" in line and "Question number" in line]


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
@pytest.mark.parametrize("key", ["G", "end"])
async def test_the_last_row_is_drawn_after_g_or_end(
    tmp_path: Path, size: tuple[int, int], key: str
) -> None:
    app = make_app([fleet(tmp_path)])
    async with app.run_test(size=size) as pilot:
        await settle(pilot, app)
        assert app.query_one(BlockList).current.id == "repo-01"
        await pilot.press(key)
        await pilot.pause()
        assert app.query_one(BlockList).current.id == f"repo-{FLEET:02d}"
        rows = list_lines(app)
        assert rows, drawn(app)
        assert f"Question number {FLEET:02d}?" in rows[-1], "\n".join(drawn(app))
        # And back at the top, the first row is drawn again.
        await pilot.press("g")
        await pilot.pause()
        assert "Question number 01?" in list_lines(app)[0]


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_moving_down_row_by_row_keeps_the_cursor_row_drawn(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    app = make_app([fleet(tmp_path)])
    async with app.run_test(size=size) as pilot:
        await settle(pilot, app)
        table = app.query_one(BlockList)
        for _ in range(FLEET - 1):
            await pilot.press("j")
            await pilot.pause()
            wanted = table.current.one_line_question()
            assert any(wanted in row for row in list_lines(app)), (wanted, drawn(app))


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_blocks_that_arrive_at_the_bottom_are_drawn_after_g(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    """The toast names the newest block: G shows its row, and every line of the list is a row
    (no scrollbar or blank line takes the place of one), while the list fills and overflows."""
    root = fleet(tmp_path, 3)
    app = make_app([root])
    async with app.run_test(size=size) as pilot:
        await settle(pilot, app)
        table = app.query_one(BlockList)
        for number in range(50, 70):
            repo = root / f"repo-{number}"
            (repo / ".git").mkdir(parents=True)
            (repo / "BLOCKED.md").write_text(f"## Question\nQuestion number {number}?\n")
            block = LoopkitSource().parse(repo, repo / "BLOCKED.md", f"repo-{number}")
            app.apply_delta(Delta(added=[block]), announce=True)
            await pilot.pause()
            await pilot.press("G")
            await pilot.pause()
            assert table.current.id == f"repo-{number}"
            rows = list_lines(app)
            assert f"Question number {number}?" in rows[-1], "\n".join(drawn(app))
            assert len(rows) == table.size.height, "\n".join(drawn(app))


# -- 2. categories are shown whole ------------------------------------------------------------

#: FORMATS.md §2.2's documented categories, and agenticloop's own in the real fixtures.
CATEGORIES = [
    "transient",
    "credentials",
    "contract",
    "review-exhausted",
    "review-unknown",
    "merge-conflict",
    "ci-failure",
    "tooling-failure",
    "no-artifact",
    "no-progress",
]


def categorised(root: Path) -> Path:
    """An agenticloop repo with one blocked task per documented category."""
    repo = root / "cats"
    (repo / ".git").mkdir(parents=True)
    tasks = repo / ".agenticloop" / "tasks"
    tasks.mkdir(parents=True)
    (repo / ".agenticloop" / "project.md").write_text(
        "---\ntask_backend: files\ntask_file_template: .agenticloop/tasks/{taskId}.md\n---\n"
    )
    for index, category in enumerate(CATEGORIES, 101):
        path = tasks / f"T-{index}.md"
        path.write_text(
            f"---\ntask_id: T-{index}\nstatus: blocked\nblock_category: {category}\n"
            f"backend: files\n---\n\n# T-{index} - Task {index}\n\n## Comments\n"
            f"- 2026-11-2{index % 10}: Blocked ({category}): stuck. Needed: a human decides "
            f"task {index}.\n"
        )
        stamp = NOW.timestamp() - (200 - index) * 600
        os.utime(path, (stamp, stamp))
    return repo


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
async def test_every_documented_category_is_shown_whole(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    app = make_app([categorised(tmp_path)])
    async with app.run_test(size=size) as pilot:
        await settle(pilot, app)
        table = app.query_one(BlockList)
        seen = set()
        for _ in range(len(CATEGORIES)):
            block = table.current
            row = next(line for line in drawn(app) if f"{block.id} " in line)
            assert f" {block.category} " in row, (block.category, row)
            assert "…" not in row.split(block.category)[0], row
            seen.add(block.category)
            await pilot.press("j")
            await pilot.pause()
        assert seen == set(CATEGORIES)
        header = next(line for line in drawn(app) if "question" in line and "state" in line)
        assert header.index("question") > header.index("state") + len("review-exhausted")


# -- 3. the preview: Tab order, the cursor at the end, no edit lost without asking ------------


async def _preview_of(pilot, app, block_id: str = "shop", key: str = "3"):
    await settle(pilot, app)
    await select(pilot, app, block_id)
    await pilot.press(key)
    await pilot.pause()
    assert isinstance(app.screen, PreviewScreen)
    return app.screen


def _focused_id(app) -> str | None:
    return app.focused.id if app.focused is not None else None


async def test_tab_goes_decision_apply_back_and_never_to_the_diff(tmp_path: Path) -> None:
    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=SIZE) as pilot:
        screen = await _preview_of(pilot, app)
        assert _focused_id(app) == "apply"
        order = []
        for _ in range(6):
            await pilot.press("tab")
            await pilot.pause()
            order.append(_focused_id(app))
        assert order == ["cancel", "decision", "apply"] * 2, order
        for _ in range(3):
            await pilot.press("shift+tab")
            await pilot.pause()
            order.append(_focused_id(app))
        assert order[6:] == ["decision", "cancel", "apply"], order
        assert screen.query_one("#diff-scroll").has_focus is False


@pytest.mark.parametrize("how", ["e", "tab"])
async def test_typing_in_the_decision_box_appends(tmp_path: Path, how: str) -> None:
    root = demo_workspace(tmp_path)
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        screen = await _preview_of(pilot, app)
        area = screen.query_one("#decision", TextArea)
        generated = area.text
        if how == "e":
            await pilot.press("e")
        else:
            while not area.has_focus:
                await pilot.press("tab")
        await pilot.press(*" per legal")
        await pilot.pause()
        assert area.text == generated + " per legal"
        await pilot.press("tab")  # to Apply
        await pilot.pause()
        assert _focused_id(app) == "apply"
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
    assert "users must contact support. per legal\n" in (root / "shop" / "PROMPT.md").read_text()


@pytest.mark.parametrize("leave", ["escape", "back"])
async def test_leaving_an_edited_decision_asks_first(tmp_path: Path, leave: str) -> None:
    root = demo_workspace(tmp_path)
    before = {p: p.read_bytes() for p in (root / "shop").iterdir() if p.is_file()}
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        screen = await _preview_of(pilot, app)
        await pilot.press("e", *" per legal")
        await pilot.pause()

        async def leave_preview() -> None:
            if leave == "escape":
                await pilot.press("escape")
            else:
                screen.query_one("#cancel").focus()
                await pilot.pause()
                await pilot.press("enter")
            await pilot.pause()

        await leave_preview()
        shown = "\n".join(drawn(app))
        assert app.screen is not screen, shown
        assert "Discard your edit" in shown and "Keep editing" in shown, shown
        await pilot.press("escape")  # keep editing
        await pilot.pause()
        assert app.screen is screen
        area = screen.query_one("#decision", TextArea)
        assert area.has_focus and area.text.endswith(" per legal")
        await pilot.press("!")
        await pilot.pause()
        assert area.text.endswith(" per legal!")
        assert "per legal" in "\n".join(drawn(app))

        await leave_preview()
        await pilot.press("d")  # discard, on purpose
        await pilot.pause()
        assert not isinstance(app.screen, PreviewScreen)
        assert app.screen is app.screen_stack[0]
    after = {p: p.read_bytes() for p in (root / "shop").iterdir() if p.is_file()}
    assert after == before


async def test_leaving_an_unedited_preview_does_not_ask(tmp_path: Path) -> None:
    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=SIZE) as pilot:
        await _preview_of(pilot, app)
        await pilot.press("e", "x", "backspace", "escape")
        await pilot.pause()
        assert app.screen is app.screen_stack[0]


# -- 4. own-words drafts are kept per block until answered or discarded on purpose -----------


def _box_text(app, index: int = 1) -> str:
    return app.screen.query_one(f"#answer-{index}", TextArea).text


async def test_an_own_words_draft_survives_esc_from_the_preview(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await select(pilot, app, "shop")
        await pilot.press("o", *"Keep them, anonymised", "ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, PreviewScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.screen_stack[0]
        # Another block has its own (empty) box.
        await pilot.press("j", "o")
        await pilot.pause()
        assert isinstance(app.screen, TextAnswerScreen) and _box_text(app) == ""
        await pilot.press("escape", "k")
        await pilot.pause()
        # Back on shop: the draft is there, in the box and on screen.
        await pilot.press("o")
        await pilot.pause()
        assert isinstance(app.screen, TextAnswerScreen)
        assert _box_text(app) == "Keep them, anonymised"
        assert any("Keep them, anonymised" in line for line in drawn(app)), drawn(app)
        await pilot.press("ctrl+s", "y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert "keep them for 7 years? → Keep them, anonymised\n" in (
            (root / "shop" / "PROMPT.md").read_text()
        )
        # Answered: the draft is gone. Undone, the block is back with an empty box.
        await pilot.press("u")  # asks first: y undoes it
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        await select(pilot, app, "shop")
        await pilot.press("o")
        await pilot.pause()
        assert _box_text(app) == ""


async def test_esc_from_the_text_box_keeps_the_draft_and_discard_drops_it(tmp_path: Path) -> None:
    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await select(pilot, app, "shop")
        await pilot.press("o", *"Half a thought", "escape")
        await pilot.pause()
        assert app.screen is app.screen_stack[0]
        assert any("Draft kept" in n.message for n in app._notifications)
        await pilot.press("o")
        await pilot.pause()
        assert _box_text(app) == "Half a thought"
        await pilot.press(*" and the rest", "escape")
        await pilot.pause()
        await pilot.press("o")
        await pilot.pause()
        assert _box_text(app) == "Half a thought and the rest"
        # Discarded on purpose: the next o starts empty.
        await pilot.click("#discard")
        await pilot.pause()
        assert app.screen is app.screen_stack[0]
        await pilot.press("o")
        await pilot.pause()
        assert _box_text(app) == ""


# -- 5. a burst of arrivals is one toast and one bell, and toasts stay off the buttons --------


def _arrival_toasts(app) -> list:
    return [n for n in app._notifications if n.title.startswith("New block")]


def _ringing(app) -> list[int]:
    rings: list[int] = []
    app.config = dataclasses.replace(app.config, bell=True)
    app.bell = lambda: rings.append(1)
    return rings


NAMES = ["alpha", "bravo", "charlie", "delta", "echo"]


async def test_a_burst_of_arrivals_is_one_toast_and_one_bell(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    app = make_app([root])
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot, app)
        rings = _ringing(app)
        arrive(app, root, NAMES)
        await pilot.pause(0.8)
        toasts = _arrival_toasts(app)
        assert len(toasts) == 1, [t.message for t in toasts]
        assert toasts[0].message.startswith("5 new blocks: alpha, bravo, charlie, delta, echo")
        assert rings == [1]
        shown = "\n".join(drawn(app))
        assert "5 new blocks" in shown, shown
        # A single later arrival is its own burst, named with its question.
        arrive(app, root, ["foxtrot"])
        await pilot.pause(0.8)
        assert [t.message for t in _arrival_toasts(app)][1:] == ["foxtrot: What about foxtrot?"]
        assert rings == [1, 1]


async def test_arrivals_wait_while_the_preview_is_open(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    app = make_app([root])
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot, app)
        rings = _ringing(app)
        await select(pilot, app, "shop")
        await pilot.press("2")
        await pilot.pause()
        assert isinstance(app.screen, PreviewScreen)
        arrive(app, root, NAMES)
        await pilot.pause(0.8)
        shown = "\n".join(drawn(app))
        assert "Back (Esc)" in shown and "Apply (Enter / y)" in shown, shown
        assert "new blocks" not in shown and not _arrival_toasts(app), shown
        assert rings == [1]  # the bell still says something arrived
        await pilot.press("escape")
        await pilot.pause(0.2)
        toasts = _arrival_toasts(app)
        assert len(toasts) == 1 and toasts[0].message.startswith("5 new blocks: alpha")
        assert rings == [1]


@pytest.mark.parametrize("size", [SIZE, *SIZES, (60, 15), (40, 10)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_a_toast_in_the_preview_leaves_its_buttons_visible(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=size, notifications=True) as pilot:
        await settle(pilot, app)
        await select(pilot, app, "shop")
        await pilot.press("2")
        await pilot.pause()
        app.notify("A long message " * 8, title="Something", timeout=30)
        app.notify("Another one " * 8, title="Something else", timeout=30)
        await pilot.pause(0.3)
        shown = drawn(app)
        assert any("Another one" in line for line in shown), "\n".join(shown)
        buttons = [line for line in shown if "Back (Esc)" in line]
        assert buttons and "Apply (Enter / y)" in buttons[0], "\n".join(shown)
        apply_button = app.screen.query_one("#apply")
        for toast in app.screen.query("Toast"):
            assert not toast.region.overlaps(apply_button.region), (toast.region, size)


async def test_drafts_are_per_choice_and_untouched_defaults_are_no_draft(tmp_path: Path) -> None:
    """billing/T-012 asks two questions (the first with a recommended default); T-007's
    choice 3 asks for a note: each keeps its own draft, and defaults left as they are none."""
    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await select(pilot, app, "billing/T-012")
        await pilot.press("o")
        await pilot.pause()
        default = _box_text(app, 1)
        assert default and _box_text(app, 2) == ""
        await pilot.press("escape")  # nothing typed: no draft
        await pilot.pause()
        assert not any("Draft kept" in n.message for n in app._notifications)
        await pilot.press("o", "tab", *"Ask finance")
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("o")
        await pilot.pause()
        assert (_box_text(app, 1), _box_text(app, 2)) == (default, "Ask finance")
        await pilot.press("escape", "g")
        # A note for T-007's choice 3 is not T-012's draft, nor T-007's own-words one.
        await select(pilot, app, "billing/T-007")
        await pilot.press("3", *"Approved in standup", "escape")
        await pilot.pause()
        await pilot.press("o")
        await pilot.pause()
        assert _box_text(app) != "Approved in standup"
        await pilot.press("escape", "3")
        await pilot.pause()
        assert _box_text(app) == "Approved in standup"


async def test_a_burst_longer_than_its_longest_wait_does_not_crash_the_app(tmp_path: Path):
    """Blocks that keep arriving past the burst's longest wait ask for a timer of 0 s, which
    Textual's Timer cannot stop (ZeroDivisionError when the app closes)."""
    from hitl_tui.tui import app as app_module

    root = tmp_path / "loops"
    (root / "seed" / ".git").mkdir(parents=True)
    app = make_app([root])
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.pause()
        app._burst_began = time.monotonic() - 10 * app_module.ARRIVAL_MAX  # a long burst
        app._burst_timer = app.set_timer(1, lambda: None)
        for i in range(3):
            repo = root / f"r{i}"
            (repo / ".git").mkdir(parents=True)
            (repo / "BLOCKED.md").write_text(f"## Question\nShip {i}?\n")
            app.apply_delta(app.inbox.handle([repo]), announce=True)
            await pilot.pause()
    assert app.return_code in (None, 0)
