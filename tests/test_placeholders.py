"""Issue 23: the placeholder words of agenticloop's task linter (`TBD`, `etc.`, ...) are refused
in the operator's own words for every format, not only in task files: `hitl answer inventory
--text TBD` wrote `→ TBD` to PROMPT.md, removed BLOCKED.md and restarted the loop."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from textual.widgets import Static, TextArea

from hitl_tui.tui.screens import PreviewScreen, TextAnswerScreen
from tests.hostile_cases import SHOP, run_hitl, snapshot
from tests.support.pilot import select, settle
from tests.tui_support import SIZE, demo_workspace, make_app

RECORDER = "import sys; open(sys.argv[1], 'a').write('restarted\\n')"


@pytest.fixture
def loops(tmp_path: Path) -> Path:
    """A loopkit repo `inventory` under loops/, and a config whose [[loop]] restarts it."""
    repo = tmp_path / "loops" / "inventory"
    shutil.copytree(SHOP, repo)
    (repo / ".git").mkdir()
    calls = tmp_path / "calls"
    (tmp_path / "config.toml").write_text(
        f"repos = [{json.dumps(str(tmp_path / 'loops'))}]\n[[loop]]\n"
        f"match = [{json.dumps(str(tmp_path / 'loops' / '*'))}]\n"
        f"restart = {json.dumps([sys.executable, '-c', RECORDER, str(calls)])}\n"
    )
    return tmp_path


@pytest.mark.parametrize(
    ("args", "word"),
    [
        (("--text", "TBD"), "'TBD'"),
        (("--text", "keep them, etc."), "'etc.'"),
        (("--choice", "A", "--note", "scope tbd"), "'TBD'"),
        (("--choice", "A", "--decision", "Cascade, as needed"), "'as needed'"),
    ],
    ids=["text", "etc", "note", "decision"],
)
def test_a_loopkit_answer_with_a_placeholder_is_refused(
    loops: Path, args: tuple[str, ...], word: str
) -> None:
    before = snapshot(loops / "loops")
    config = loops / "config.toml"
    for dry in ((), ("--dry-run",)):
        done = run_hitl("answer", "inventory", *args, *dry, "--config", config)
        assert (done.returncode, done.stdout) == (2, b""), done.stderr
        err = done.stderr.decode()
        assert err.startswith(f"hitl: the answer contains the placeholder {word} (")
        assert err.endswith("say it concretely; nothing written\n") and err.count("\n") == 1
    assert snapshot(loops / "loops") == before
    assert not (loops / "calls").exists()  # the loop was not restarted
    # The block's own words are the agent's: a choice quoting `etc.` is answered as usual.
    blocked = loops / "loops" / "inventory" / "BLOCKED.md"
    blocked.write_text("## Question\nWhich?\n## Choices\n- A) logs, caches, etc.\n- B) none\n")
    done = run_hitl("answer", "inventory", "--choice", "A", "--config", config)
    assert done.returncode == 0, done.stderr
    assert "Which? → A) logs, caches, etc.\n" in (blocked.parent / "PROMPT.md").read_text()


def _error(app) -> str:
    return "\n".join(str(n.message) for n in app._notifications if n.severity == "error")


async def test_the_app_refuses_a_placeholder_in_own_words_and_in_the_decision(
    tmp_path: Path,
) -> None:
    root = demo_workspace(tmp_path)
    shop = root / "shop"
    before = snapshot(shop)
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await select(pilot, app, "shop")
        await pilot.press("o")
        await pilot.pause()
        assert isinstance(app.screen, TextAnswerScreen)
        await pilot.press(*"TBD", "ctrl+s")
        await pilot.pause()
        assert not isinstance(app.screen, PreviewScreen)
        assert "the answer contains the placeholder 'TBD'" in _error(app)
        assert snapshot(shop) == before

        # The editable decision of a choice's preview: refused there, and y writes nothing.
        await pilot.press("escape")
        await select(pilot, app, "shop")
        await pilot.press("2")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, PreviewScreen)
        await pilot.press("e")
        area = screen.query_one("#decision", TextArea)
        area.move_cursor(area.document.end)
        await pilot.press(*" etc.")
        await pilot.pause()
        shown = str(screen.query_one("#preview-error", Static).render())
        assert "the answer contains the placeholder 'etc.'" in shown
        await pilot.press("escape", "y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert snapshot(shop) == before


def test_an_edited_decision_keeps_the_agents_own_placeholder_words(loops: Path) -> None:
    """Review of issue 23: a choice of the agent's holding `etc.` was refused as soon as the
    operator edited the decision it words (the preview's `e`, `--decision`), even to fix one
    letter: the agent's words are never refused. A placeholder the operator adds still is."""
    blocked = loops / "loops" / "inventory" / "BLOCKED.md"
    text = blocked.read_text(encoding="utf-8")
    blocked.write_text(text.replace("- B) Keep invoices,", "- B) Keep invoices, receipts, etc.,"))
    config = loops / "config.toml"
    dry = run_hitl(
        "answer", "inventory", "--choice", "B", "--dry-run", "--json", "--config", config
    )
    assert dry.returncode == 0, dry.stderr
    worded = json.loads(dry.stdout)["decision_text"]
    assert "etc." in worded, worded
    edited = worded.replace("Keep", "Keep all", 1)
    added = run_hitl(
        "answer", "inventory", "--choice", "B", "--decision", edited + " TBD", "--config", config
    )
    assert added.returncode == 2 and b"placeholder 'TBD'" in added.stderr, added.stderr
    done = run_hitl(
        "answer", "inventory", "--choice", "B", "--decision", edited, "--config", config
    )
    assert done.returncode == 0, done.stderr
    assert "Keep all invoices, receipts, etc.," in (
        loops / "loops" / "inventory" / "PROMPT.md"
    ).read_text(encoding="utf-8")
