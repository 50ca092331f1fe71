"""An escape-storm block: every field (and the folder name) full of terminal control sequences.

Every screen an operator can reach is drawn, and every segment of every line is checked: no
control character from the agent may reach the terminal (an OSC 2 retitles the tmux pane,
`ESC[2J` clears the screen, `ESC[?1049l` leaves the alternate screen). What the operator sees
instead is the visible symbol (␛), so the text is still there to read.
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

from textual.widgets import TextArea

from hitl_tui.inbox.inbox import Delta
from hitl_tui.tui.screens import HelpScreen, HistoryScreen, PreviewScreen, TextAnswerScreen
from hitl_tui.tui.widgets import BlockList
from tests.support.pilot import select, settle
from tests.tui_support import SIZE, make_app

#: ESC sequences (CSI, OSC with BEL and ST, DCS), 8-bit C1 controls, BEL, backspace, lone CR,
#: NUL, DEL, shift out / in, and a vertical tab.
STORM = (
    "\x1b[2J\x1b[H\x1b]2;pwned\x07\x1b[?1049l\x1b[31mred\x1b[0m "
    "\x1b]0;title\x1b\\ \x1bP1$r\x1b\\ \x9b31m\x9d2;c1\x9c \x90dcs\x9c "
    "\x07bell \x08\x08bs lone\rCR nul\x00 del\x7f \x0e\x0f\x0b"
)
FOLDER = "st\x1b]2;pwn\x07\x1b[2Jorm\x08\r\x9b"
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def storm_workspace(root: Path) -> Path:
    repo = root / FOLDER
    (repo / ".git").mkdir(parents=True)
    (repo / "BLOCKED.md").write_text(
        f"# {STORM} title\n\n## Question:\n{STORM} retention?\n\n## Context:\n{STORM}\n\n"
        f"## Attempted:\n- {STORM}\n\n"
        f"## Choices:\n- A) {STORM} keep — {STORM}\n- B) drop {STORM} — {STORM}\n\n"
        f"## {STORM} extra\n{STORM}\n",
        encoding="utf-8",
    )
    tasks = root / "billing" / ".agenticloop" / "tasks"
    tasks.mkdir(parents=True)
    (root / "billing" / ".git").mkdir()
    (tasks / "T-001.md").write_text(
        "---\ntask_id: T-001\nstatus: needs_context\nbackend: files\n---\n\n"
        f"# T-001 - {STORM} rounding\n\n## Task\n{STORM}\n\n## Comments\n"
        "- 2026-11-28: needs_context. Questions for the maintainer:\n"
        f"  1. {STORM} per line? Recommended: {STORM} per line. Who: maintainer.\n"
        f"  2. {STORM} halves? Recommended: {STORM} up. Who: owner.\n",
        encoding="utf-8",
    )
    return root


def leaks(app) -> list[tuple[int, str]]:
    """(line, text) of every drawn segment that carries a control character."""
    found = []
    for y, strip in enumerate(app.screen._compositor.render_strips()):
        for segment in strip:
            if not segment.control and CONTROL.search(segment.text):
                found.append((y, segment.text))
    return found


def drawn(app) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def check(pilot, app, where: str) -> None:
    await pilot.pause()
    await asyncio.sleep(0.05)
    await pilot.pause()
    bad = leaks(app)
    assert bad == [], f"{where}: control characters reach the terminal: {bad[:5]}"
    assert "␛" in drawn(app), f"{where}: the storm is not shown at all"


async def test_no_control_character_reaches_the_terminal_from_any_screen(tmp_path: Path) -> None:
    root = storm_workspace(tmp_path / "loops")
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        table = app.query_one(BlockList)
        storm = next(b for b in table.blocks.values() if b.source == "loopkit")
        task = next(b for b in table.blocks.values() if b.source == "agenticloop")
        await select(pilot, app, storm.id)
        await check(pilot, app, "inbox and detail panes")

        await pilot.press("r")
        await check(pilot, app, "raw view")
        await pilot.press("r")

        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.pause()
        assert leaks(app) == []
        await pilot.press("escape")

        await pilot.press("1")
        await pilot.pause()
        assert isinstance(app.screen, PreviewScreen)
        await check(pilot, app, "preview")
        await pilot.press("e")  # the decision box, focused, with its cursor in the text
        await check(pilot, app, "preview, editing")
        await pilot.press("escape")
        await pilot.press("escape")

        await pilot.press("o")
        await pilot.pause()
        assert isinstance(app.screen, TextAnswerScreen)
        await check(pilot, app, "own words")
        await pilot.press("escape")

        await select(pilot, app, task.id)
        await check(pilot, app, "task detail")
        await pilot.press("o")  # one box per question, pre-filled with the recommended defaults
        await pilot.pause()
        assert isinstance(app.screen, TextAnswerScreen)
        boxes = list(app.screen.query(".answer-text").results(TextArea))
        assert len(boxes) == 2 and all("␛" in box.text for box in boxes)
        await check(pilot, app, "own words, one box per question")
        await pilot.press("escape")

        await pilot.press("home")
        await select(pilot, app, storm.id)
        await pilot.press("1")
        await pilot.pause()
        await pilot.press("enter")  # applied: the "Answered" toast names the block
        for _ in range(50):
            await pilot.pause()
            if not os.path.exists(storm.path):
                break
            await asyncio.sleep(0.05)
        assert not os.path.exists(storm.path)
        await check(pilot, app, "inbox with the Answered toast")

        await pilot.press("h")
        await pilot.pause()
        assert isinstance(app.screen, HistoryScreen)
        await check(pilot, app, "history")
        await pilot.press("escape")

        app.apply_delta(Delta(added=[storm]), announce=True)  # a "New block" toast
        app.source_states["GitHub"] = {"acme/x": ("error", STORM)}  # the header's trouble text
        app.refresh_header()
        await check(pilot, app, "new-block toast and header")
        assert "␛" in str(app.query_one("#topbar").render())


async def test_an_unedited_decision_writes_the_generated_text_byte_for_byte(tmp_path: Path):
    """The box shows the decision made printable; left as shown, it is no override: PROMPT.md
    gets the generated decision exactly as `hitl answer --choice A` would write it."""
    from hitl_tui.model import Answer
    from hitl_tui.sources.loopkit.source import LoopkitSource
    from tests.tui_support import NOW

    root = storm_workspace(tmp_path / "loops")
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        storm = next(b for b in app.query_one(BlockList).blocks.values() if b.source == "loopkit")
        await select(pilot, app, storm.id)
        await pilot.press("1")
        await pilot.pause()
        screen = app.screen
        box = screen.query_one("#decision", TextArea)
        assert "␛]2;pwned" in box.text and not CONTROL.search(box.text)
        assert screen.plan is screen.planned  # not an override
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
    expected = LoopkitSource().decision_text(
        storm, Answer(choice=storm.choices[0], operator="Ada", when=NOW)
    )
    assert "\x1b]2;pwned" in expected
    prompt = (storm.repo / "PROMPT.md").read_text(encoding="utf-8")
    assert f"- 2026-11-29: {expected}\n" in prompt
    assert "␛" not in prompt


async def test_an_edited_decision_writes_the_box_as_it_stands(tmp_path: Path):
    root = storm_workspace(tmp_path / "loops")
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        storm = next(b for b in app.query_one(BlockList).blocks.values() if b.source == "loopkit")
        await select(pilot, app, storm.id)
        await pilot.press("1")
        await pilot.pause()
        screen = app.screen
        await pilot.press("e")
        box = screen.query_one("#decision", TextArea)
        box.move_cursor(box.document.end)
        await pilot.press("space", "o", "k")
        await pilot.pause()
        assert screen.plan is not screen.planned
        shown = box.text
        screen.query_one("#apply").focus()
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
    prompt = (storm.repo / "PROMPT.md").read_text(encoding="utf-8")
    assert f"- 2026-11-29: {shown}\n" in prompt and shown.endswith(" ok")
    assert "\x1b" not in prompt
