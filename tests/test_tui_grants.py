"""The grants screen (`A`, or "Grants" in the palette): every "Allow always" answer of the
inbox's repositories, and `x` revoking the highlighted one after a confirmation, checked in
the grants file on disk and undone with the journal entry the toast names."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable, Static

from hitl_tui.agent.asking import Asker
from hitl_tui.answers.service import undo_answer
from hitl_tui.cli import commands as cli
from hitl_tui.sources.asks.grants import grants_path, read_grants
from hitl_tui.tui.grants_screen import EMPTY, ConfirmRevoke, GrantsScreen
from tests.support import until
from tests.support.pilot import palette, settle
from tests.tui_support import SIZE, make_app


def repo(root: Path, name: str) -> Path:
    folder = root / name
    (folder / ".git").mkdir(parents=True)
    return folder


def grant(folder: Path, command: str) -> None:
    """An agent's Bash permission prompt, answered Allow always (B) from the command line."""
    ask = Asker(folder).ask_permission("Bash", {"command": command})
    assert cli.main(["answer", str(folder / ".hitl" / "asks" / f"{ask.id}.json"),
                     "--choice", "B", "--operator", "Grace"]) == 0  # fmt: skip


def shown(app, selector: str) -> str:
    """What a Static of the top screen shows, as plain text."""
    return str(app.screen.query_one(selector, Static).content)


async def grants_screen(pilot, app) -> GrantsScreen:
    await until(
        pilot,
        lambda: isinstance(app.screen, GrantsScreen) and app.screen.rows is not None,
        5,
        what="the grants screen with its grants read",
        saw=lambda: type(app.screen).__name__,
    )
    return app.screen


async def test_x_revokes_the_highlighted_grant_after_asking(tmp_path: Path) -> None:
    shop, api = repo(tmp_path, "shop"), repo(tmp_path, "api")
    grant(shop, "rm -rf build/")
    grant(shop, "npm test -- [b]markup[/b]")
    grant(api, "make deploy")
    before = grants_path(shop).read_bytes()
    lines = before.splitlines(keepends=True)
    assert len(lines) == 2
    app = make_app([tmp_path])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("A")
        screen = await grants_screen(pilot, app)
        table = screen.query_one(DataTable)
        # Repos in id order: api's grant, then shop's two; the summary is plain text.
        cells = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        assert [c[:3] for c in cells] == [
            ["api", "Bash: make deploy", "Grace"],
            ["shop", "Bash: rm -rf build/", "Grace"],
            ["shop", "Bash: npm test -- [b]markup[/b]", "Grace"],
        ]
        await pilot.press("j", "j")
        assert screen.current.grant.summary == "Bash: npm test -- [b]markup[/b]"
        # x asks first; Esc keeps it (nothing written).
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmRevoke)
        assert "npm test -- [b]markup[/b]" in shown(app, "#revoke-question")
        await pilot.press("escape")
        await app.workers.wait_for_complete()
        assert app.screen is screen
        assert grants_path(shop).read_bytes() == before
        # x, y: that line goes, and only it.
        await pilot.press("x")
        await pilot.pause()
        await pilot.press("y")
        await until(
            pilot,
            lambda: [n.title for n in app._notifications][-1:] == ["Revoked"],
            5,
            what="the Revoked toast",
            saw=lambda: [(n.title, n.message) for n in app._notifications],
        )
        assert grants_path(shop).read_bytes() == lines[0]
        assert [g.summary for g in read_grants(grants_path(api).read_bytes())] == [
            "Bash: make deploy"
        ]
        toast = list(app._notifications)[-1].message
        assert "Bash: npm test -- [b]markup[/b]" in toast
        entry = toast.split("Journal entry ")[1].split(":")[0]
        assert f"hitl undo {entry}" in toast
        assert table.row_count == 2
        assert screen.current.grant.summary == "Bash: rm -rf build/"
    # The journal entry the toast names puts it back, byte for byte.
    undo_answer(entry, "Ada")
    assert grants_path(shop).read_bytes() == before


async def test_the_palette_opens_the_grants_and_none_says_how_one_is_made(tmp_path: Path) -> None:
    repo(tmp_path, "shop")
    app = make_app([tmp_path])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await palette(pilot, app, "grants: allow")
        screen = await grants_screen(pilot, app)
        assert screen.rows == []
        assert not screen.query_one(DataTable).display
        assert shown(app, "#grants-empty") == EMPTY
        assert "Allow always" in EMPTY
        await pilot.press("x")  # nothing to revoke: said, nothing asked
        await pilot.pause()
        assert app.screen is screen
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, GrantsScreen)
