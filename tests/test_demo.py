"""`hitl demo` stays in its sandbox: the operator's state folder is never touched.

The demo is run end to end through `hitl demo` (`cli.main`), with the app headless: the auto
pilot answers a block and quits, as an operator trying hitl would.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from pathlib import Path

import pytest

from hitl_tui.cli.commands import main
from hitl_tui.tui.app import HitlApp
from hitl_tui.tui.screens import PreviewScreen
from hitl_tui.tui.widgets import BlockList
from tests.support import until
from tests.tui_support import SIZE


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture
def headless_demo(monkeypatch: pytest.MonkeyPatch):
    """Run `hitl demo` with the app headless, driven by `script(pilot, seen)`.

    Returns (exit code, what the script recorded, the temp folders the demo made).
    """
    made: list[Path] = []
    mkdtemp = tempfile.mkdtemp

    def recording_mkdtemp(*args, **kwargs):
        folder = mkdtemp(*args, **kwargs)
        made.append(Path(folder))
        return folder

    monkeypatch.setattr(tempfile, "mkdtemp", recording_mkdtemp)
    run = HitlApp.run

    def start(script):
        seen: dict = {}

        async def auto_pilot(pilot) -> None:
            # A failing step must end the app (an auto pilot's exception would not): it is
            # kept and raised once the demo has returned.
            try:
                await asyncio.wait_for(script(pilot, seen), 60)
            except BaseException as exc:
                seen["error"] = exc
                pilot.app.exit()

        def run_headless(self, **_kwargs):
            return run(self, headless=True, size=SIZE, auto_pilot=auto_pilot)

        monkeypatch.setattr(HitlApp, "run", run_headless)
        code = main(["demo", "--agent-delay", "0"])
        if "error" in seen:
            raise seen["error"]
        return code, seen, made

    return start


async def _settle(pilot) -> None:
    await until(pilot, lambda: pilot.app.loaded)


async def _answer_shop(pilot, seen: dict) -> None:
    app = pilot.app
    await _settle(pilot)
    table = app.query_one(BlockList)
    shop = next(b for b in table.blocks.values() if b.id == "shop")
    seen["shop"] = shop.repo
    for _ in range(len(table.order)):
        if table.current is not None and table.current.id == "shop":
            break
        await pilot.press("j")
    await pilot.press("2")
    await pilot.pause()
    assert isinstance(app.screen, PreviewScreen)
    await pilot.press("enter")
    await until(pilot, lambda: any(n.title == "Answered" for n in app._notifications))
    seen["answered"] = not (shop.repo / "BLOCKED.md").exists()
    seen["toasts"] = [n.title for n in app._notifications]
    seen["state_during"] = os.environ.get("HITL_STATE_DIR")


def test_demo_answers_never_reach_the_operators_state_folder(headless_demo, _isolated_state):
    operator_state = Path(_isolated_state)

    async def script(pilot, seen: dict) -> None:
        await _answer_shop(pilot, seen)
        await pilot.press("q")

    code, seen, made = headless_demo(script)
    assert code == 0
    assert seen["answered"] and "Answered" in seen["toasts"]
    # Nothing in the operator's state folder: no journal entry, no parse cache, no lock.
    assert _files(operator_state) == []
    assert os.environ["HITL_STATE_DIR"] == str(operator_state)
    # The demo's own state folder was inside its temp folder, which is gone.
    assert len(made) == 1
    assert Path(seen["state_during"]).is_relative_to(made[0])
    assert seen["shop"].is_relative_to(made[0])
    assert not made[0].exists()


def test_the_next_real_history_and_undo_know_nothing_of_the_demo(
    headless_demo, _isolated_state, capsys
) -> None:
    async def script(pilot, seen: dict) -> None:
        await _answer_shop(pilot, seen)
        await pilot.press("q")

    code, _seen, _made = headless_demo(script)
    assert code == 0
    capsys.readouterr()
    assert main(["history"]) == 0
    assert "shop" not in capsys.readouterr().out
    assert main(["undo"]) != 0
    assert "T-007" not in capsys.readouterr().err


def test_undo_inside_the_demo_undoes_the_demo_answer(headless_demo) -> None:
    async def script(pilot, seen: dict) -> None:
        await _answer_shop(pilot, seen)
        await pilot.press("u")  # asks first (which answer, when): y undoes it
        await until(pilot, lambda: type(pilot.app.screen).__name__ == "ConfirmUndo")
        await pilot.press("y")
        await until(pilot, lambda: (seen["shop"] / "BLOCKED.md").exists())
        seen["undone"] = [n.title for n in pilot.app._notifications if n.title == "Undone"]
        await pilot.press("q")

    code, seen, made = headless_demo(script)
    assert code == 0
    assert seen["undone"] == ["Undone"]
    assert not made[0].exists()


def test_the_demo_leaves_a_real_interrupted_answer_to_the_next_real_command(
    headless_demo, shop: Path, capsys
) -> None:
    """Crash repair writes to the operator's repos: not the demo's business."""
    from hitl_tui.answers.apply import apply_plan
    from tests.hostile_cases import snapshot
    from tests.test_journal import Crash, crash_at, plan_for

    with pytest.raises(Crash):
        apply_plan(plan_for(shop), hook=crash_at("update:IMPLEMENTATION_PLAN.md"))
    interrupted = snapshot(shop)

    async def script(pilot, seen: dict) -> None:
        await _settle(pilot)
        seen["notices"] = [n.title for n in pilot.app._notifications]
        await pilot.press("q")

    code, seen, _made = headless_demo(script)
    assert code == 0
    assert "Recovered" not in seen["notices"]
    assert snapshot(shop) == interrupted
    capsys.readouterr()
    assert main(["list", str(shop)]) == 0
    assert "rolled back an interrupted answer to shop" in capsys.readouterr().err


def test_the_demo_runs_with_an_unusable_operator_state_folder(
    headless_demo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    not_a_folder = tmp_path / "state-file"
    not_a_folder.write_text("")
    monkeypatch.setenv("HITL_STATE_DIR", str(not_a_folder))

    async def script(pilot, seen: dict) -> None:
        await _answer_shop(pilot, seen)
        await pilot.press("q")

    code, seen, _made = headless_demo(script)
    assert code == 0
    assert seen["answered"]
    assert not_a_folder.read_text() == ""


def test_the_demo_has_an_agents_question_and_permission_prompt_to_answer(headless_demo) -> None:
    """`hitl demo` shows asks (`hitl mcp`) too: web's question and its Bash permission prompt,
    answered Allow once in the demo's own repository."""

    async def script(pilot, seen: dict) -> None:
        app = pilot.app
        await _settle(pilot)
        table = app.query_one(BlockList)
        blocks = {b.id: b for b in table.blocks.values()}
        seen["asks"] = {i: (b.category, b.question) for i, b in blocks.items() if "/ask-" in i}
        prompt = blocks["web/ask-demop4x8n3"]
        for _ in range(len(table.order)):
            if table.current is not None and table.current.id == prompt.id:
                break
            await pilot.press("j")
        await pilot.press("1")
        await until(pilot, lambda: isinstance(app.screen, PreviewScreen))
        await pilot.press("enter")
        await until(pilot, lambda: any(n.title == "Answered" for n in app._notifications))
        seen["answer"] = json.loads(Path(prompt.path).read_bytes())["answer"]
        await pilot.press("q")

    code, seen, _made = headless_demo(script)
    assert code == 0
    assert seen["asks"] == {
        "web/ask-demoq7k2m9": (
            "question",
            "The hero image is 2.4 MB. Convert it to AVIF, or keep the PNG?",
        ),
        "web/ask-demop4x8n3": ("permission", "Allow Bash: `rm -rf dist/ && npm run build`?"),
    }
    assert (seen["answer"]["choice"], seen["answer"]["verdict"]) == ("Allow once", "allow")
