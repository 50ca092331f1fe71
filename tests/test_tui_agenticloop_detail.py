"""An agenticloop task's detail is compact (issue 27, item 2): the template's sections nobody
filled in fold into one line under "More", the choices read short, one line each, and what an
answer changes in the task's header is in its preview. On agenticloop's own files
(fixtures/agenticloop-real)."""

from __future__ import annotations

import shutil
from pathlib import Path

from hitl_tui.sources.agenticloop.template import unfilled
from hitl_tui.tui.screens import PreviewScreen
from tests.conftest import FIXTURES
from tests.support.pilot import select, settle, static_text
from tests.test_small_terminals import drawn
from tests.tui_support import make_app

REAL = FIXTURES / "agenticloop-real"
TASK = Path(".agenticloop") / "tasks" / "T-002.md"


def shop(root: Path) -> Path:
    repo = root / "shop"
    shutil.copytree(REAL / "shop", repo)
    (repo / ".git").mkdir()
    return repo


def test_every_section_of_agenticloops_scaffold_reads_as_unfilled() -> None:
    text = (REAL / "fresh" / ".agenticloop" / "tasks" / "T-001.md").read_text()
    body = text.split("\n---\n", 1)[1]
    sections = [part.split("\n", 1) for part in body.split("\n## ")[1:]]
    titles = [title for title, _ in sections if title not in ("Comments",)]
    assert len(titles) == 20, titles
    for title, rest in sections:
        if title != "Comments":
            assert unfilled(rest), title
    # One word of the task's own, and the section is the task's.
    assert not unfilled("Describe the starting behavior, constraints, and known gaps. Redis.")


async def test_a_task_with_its_whole_template_shows_one_line_of_more_and_short_choices(
    tmp_path: Path,
) -> None:
    shop(tmp_path)
    app = make_app([tmp_path])
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot, app)
        await select(pilot, app, "shop/T-002")
        more = static_text(app, "#extra")
        assert more.startswith("19 empty sections (r shows them): Source Documents Reviewed, ")
        assert app.query_one("#extra").region.height == 3  # one line in its border
        screen = "\n".join(drawn(app))
        assert "Describe the starting behavior" not in screen
        assert "State the exact outcome" not in screen  # the template's ## Task, too
        choices = [line for line in static_text(app, "#choices").splitlines() if line.strip()]
        assert [" ".join(line.split()) for line in choices] == [
            "1 A) Accept the recommended default: 5 minutes",
            "2 B) Resume with a note",
            "3 C) Keep needs_context, add a note",
            "o answer in your own words",
        ]
        assert "## Comments" not in screen and "agent-ready" not in screen
        # What the answer changes in the header is in its preview.
        await pilot.press("2")
        await pilot.pause()
        await pilot.press(*"Five minutes.", "ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, PreviewScreen), type(app.screen).__name__
        screen = " ".join(" ".join(drawn(app)).split())
        assert (
            "B) Resume with a note — your answer as a dated note under ## Comments; "
            "status: needs_context → agent-ready"
        ) in screen, screen
        assert "+status: agent-ready" in screen


async def test_a_section_the_task_filled_in_is_shown_and_the_empty_ones_named_after_it(
    tmp_path: Path,
) -> None:
    path = shop(tmp_path) / TASK
    text = path.read_text()
    path.write_text(text.replace("## Scope\nList the required changes.", "## Scope\nOnly prices."))
    app = make_app([tmp_path])
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot, app)
        await select(pilot, app, "shop/T-002")
        more = static_text(app, "#extra")
        assert more.startswith("Scope\nOnly prices.\n\n18 empty sections (r shows them): "), more
        assert more.rstrip().endswith("Source Documents Reviewed, Current State, Out of Scope, …")
