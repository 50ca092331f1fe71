"""Long answers in your editor: Ctrl+E in the own-words box opens $VISUAL / $EDITOR on the text
in a private temp folder; what was saved comes back. Under run_test (headless) `App.suspend`
raises SuspendNotSupported, and the editor runs without the terminal: a fake editor script
that rewrites the file stands in for a real one."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from textual.widgets import TextArea

from hitl_tui.tui.screens import PreviewScreen, TextAnswerScreen, editor_command
from tests.support.pilot import select, settle
from tests.tui_support import SIZE, demo_workspace, make_app


def _editor(tmp_path: Path, body: str) -> tuple[Path, Path]:
    """A fake editor: logs the file it was given and its folder's mode, then runs `body`."""
    log = tmp_path / "editor.log"
    script = tmp_path / "fake-editor"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$1" >> "{log}"\n'
        f'stat -c %a "$(dirname "$1")" >> "{log}"\n'
        f'cat "$1" >> "{log}.seen"\n'
        f"{body}\n"
    )
    script.chmod(0o755)
    return script, log


async def _own_words(pilot, app, text: str) -> TextArea:
    await settle(pilot, app)
    await select(pilot, app, "shop")
    await pilot.press("o")
    await pilot.pause()
    assert isinstance(app.screen, TextAnswerScreen)
    await pilot.press(*text)
    return app.screen.query_one("#answer-1", TextArea)


def test_editor_command_prefers_visual_then_editor_then_vi(monkeypatch) -> None:
    monkeypatch.setenv("VISUAL", "code --wait")
    monkeypatch.setenv("EDITOR", "nano")
    assert editor_command() == ["code", "--wait"]
    monkeypatch.setenv("VISUAL", "")
    assert editor_command() == ["nano"]
    monkeypatch.delenv("VISUAL")
    monkeypatch.delenv("EDITOR")
    assert editor_command() == ["vi"]


async def test_ctrl_e_edits_the_draft_and_what_was_saved_is_answered(
    tmp_path: Path, monkeypatch
) -> None:
    root = demo_workspace(tmp_path / "loops")
    script, log = _editor(tmp_path, 'printf "Keep them seven years.\\nThen delete them.\\n" > "$1"')
    monkeypatch.setenv("VISUAL", str(script))
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        area = await _own_words(pilot, app, "short draft")
        await pilot.press("ctrl+e")
        await pilot.pause()
        assert isinstance(app.screen, TextAnswerScreen)
        assert area.text == "Keep them seven years.\nThen delete them."
        folder_line, mode = log.read_text().splitlines()[:2]
        assert mode == "700"  # a private temp folder ...
        assert not Path(folder_line).parent.exists()  # ... removed afterwards
        assert Path(f"{log}.seen").read_text() == "short draft"  # the editor got the draft
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, PreviewScreen)
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
    prompt = (root / "shop" / "PROMPT.md").read_text()
    assert "Keep them seven years." in prompt and "Then delete them." in prompt
    assert not (root / "shop" / "BLOCKED.md").exists()


@pytest.mark.parametrize("how", ["fails", "missing"])
async def test_an_editor_that_fails_or_is_missing_leaves_the_draft(
    tmp_path: Path, monkeypatch, how: str
) -> None:
    root = demo_workspace(tmp_path / "loops")
    if how == "fails":
        script, _ = _editor(tmp_path, 'echo "half-written" > "$1"; exit 3')
        monkeypatch.setenv("VISUAL", str(script))
    else:
        monkeypatch.setenv("VISUAL", str(tmp_path / "no-such-editor"))
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        area = await _own_words(pilot, app, "my draft")
        await pilot.press("ctrl+e")
        await pilot.pause()
        assert isinstance(app.screen, TextAnswerScreen)
        assert area.text == "my draft"
        note = list(app._notifications)[-1]
        assert "unchanged" in note.message and "\n" not in note.message
        assert ("exited with 3" in note.message) == (how == "fails")
    assert (root / "shop" / "BLOCKED.md").exists()


async def test_the_editor_button_edits_the_box_last_focused(tmp_path: Path, monkeypatch) -> None:
    root = demo_workspace(tmp_path / "loops")
    script, _ = _editor(tmp_path, 'printf "from the button" > "$1"')
    monkeypatch.setenv("VISUAL", str(script))
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        area = await _own_words(pilot, app, "x")
        await pilot.click("#editor")
        await pilot.pause()
        assert area.text == "from the button"
        assert mode_is_private(tmp_path)


def mode_is_private(tmp_path: Path) -> bool:
    folder = Path((tmp_path / "editor.log").read_text().splitlines()[0]).parent
    return not folder.exists() or stat.S_IMODE(folder.stat().st_mode) == 0o700
