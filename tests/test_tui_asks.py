"""Asks (`hitl mcp`) as the operator reads and answers them in the app: a question whose
agent labelled its choices (`A — Postgres`), and a permission prompt whose command has several
lines; each answered with the keys, and what the agent then reads checked with its own side
(`Asker.check`, and the ask file on disk)."""

from __future__ import annotations

import json
from pathlib import Path

from textual.widgets import Static

from hitl_tui.agent.asking import Asker
from tests.support.pilot import select, settle, static_text
from tests.tui_support import SIZE, make_app

HEREDOC = "cat > notes.txt <<'EOF'\nfirst line\n[b]not markup[/b]\nEOF\nrm -rf build/\n"


def repo(root: Path) -> Path:
    folder = root / "shop"
    (folder / ".git").mkdir(parents=True)
    return folder


def pane(app, selector: str) -> Static:
    return app.screen.query_one(selector, Static)


def choices(app) -> str:
    """The Choices pane as the operator reads it, one space between words."""
    return " ".join(static_text(app, "#choices").split())


async def answer(pilot, app, block_id: str, key: str) -> None:
    await select(pilot, app, block_id)
    await pilot.press(key)
    await app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.press("y")
    await app.workers.wait_for_complete()
    await pilot.pause()


async def test_labelled_choices_read_as_options_and_the_agent_gets_the_one_chosen(
    tmp_path: Path,
) -> None:
    folder = repo(tmp_path)
    asker = Asker(folder, client="claude-code")
    ask = asker.ask(
        "Which store for sessions?",
        ["A — Postgres: already deployed", "B) Redis — faster, one more service"],
        "The login feature needs sessions.",
    )
    app = make_app([tmp_path])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await select(pilot, app, f"shop/{ask.id}")
        shown = choices(app)
        # hitl's letter, then the agent's option: never "A) A".
        assert "A) Postgres: already deployed" in shown, shown
        assert "B) Redis" in shown and "→ faster, one more service" in shown, shown
        assert "A) A" not in shown and "B) B)" not in shown
        await answer(pilot, app, f"shop/{ask.id}", "2")
    got = asker.check(ask.id)
    assert (got["status"], got["choice"]) == ("answered", "Redis"), got


async def test_a_permission_prompt_shows_its_command_line_by_line_and_deny_reaches_the_agent(
    tmp_path: Path,
) -> None:
    folder = repo(tmp_path)
    asker = Asker(folder, client="claude-code")
    ask = asker.ask_permission("Bash", {"command": HEREDOC, "description": "Write notes"})
    app = make_app([tmp_path])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await select(pilot, app, f"shop/{ask.id}")
        context = str(pane(app, "#context").content)
        # The exact input (JSON, what a grant is of), then the command as it will run.
        assert '"command": "cat > notes.txt' in context
        assert "command, line by line:\n│ cat > notes.txt <<'EOF'\n│ first line\n" in context
        assert context.endswith("│ [b]not markup[/b]\n│ EOF\n│ rm -rf build/")  # no "│ " after
        # A tool call has no "Attempted" (no "(none given)" pane to read past).
        assert not pane(app, "#attempted").display
        shown = choices(app)
        assert "A) Allow once" in shown and "C) Deny" in shown, shown
        assert "own words to deny with a reason" in shown, shown
        # r: the ask file as it is (its status, who asked, the tool call's id), not a copy.
        await pilot.press("r")
        await pilot.pause()
        raw = app.screen.query_one("#raw").text
        assert raw == (folder / ".hitl" / "asks" / f"{ask.id}.json").read_text()
        assert '"client": "claude-code"' in raw and '"status": "open"' in raw
        await pilot.press("r")
        await answer(pilot, app, f"shop/{ask.id}", "3")
    data = json.loads((folder / ".hitl" / "asks" / f"{ask.id}.json").read_bytes())
    assert data["status"] == "answered"
    assert (data["answer"]["verdict"], data["answer"]["always"]) == ("deny", False)
    assert not (folder / ".hitl" / "grants.jsonl").exists()
