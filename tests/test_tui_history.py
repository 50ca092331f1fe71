"""The history screen you can act on: a cursor (j/k), a filter as you type (/), and `u` undoing
the highlighted answer with the rules of `hitl undo ID`, checked on disk."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable, Input

from hitl_tui import journal
from hitl_tui.tui.screens import HistoryScreen
from hitl_tui.tui.widgets import BlockList
from tests.support.pilot import select, settle
from tests.tui_support import SIZE, demo_workspace, make_app


async def _answer(pilot, app, block_id: str, key: str = "2") -> None:
    await select(pilot, app, block_id)
    await pilot.press(key, "enter")
    await app.workers.wait_for_complete()
    await pilot.pause()


async def _history(pilot, app) -> HistoryScreen:
    await pilot.press("h")
    await pilot.pause()
    assert isinstance(app.screen, HistoryScreen)
    return app.screen


def _blocks(screen: HistoryScreen) -> list[str]:
    return [e.block_id for e in screen.shown]


async def test_u_undoes_the_highlighted_answer_not_the_last(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    api_before = (root / "api" / "BLOCKED.md").read_bytes()
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await _answer(pilot, app, "api")
        await _answer(pilot, app, "shop")
        assert not (root / "api" / "BLOCKED.md").exists()
        assert not (root / "shop" / "BLOCKED.md").exists()
        screen = await _history(pilot, app)
        assert _blocks(screen) == ["shop", "api"]
        assert screen.current.block_id == "shop"
        await pilot.press("j")
        assert screen.current.block_id == "api"
        await pilot.press("k", "down")
        assert screen.current.block_id == "api"
        await pilot.press("u")  # asks first (tests/test_undo_confirm.py): y undoes it
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        # The api answer is undone byte for byte; shop's, the newer one, stays.
        assert (root / "api" / "BLOCKED.md").read_bytes() == api_before
        assert not (root / "shop" / "BLOCKED.md").exists()
        assert [n.title for n in app._notifications][-1] == "Undone"
        # The screen shows it, the cursor stays on it, and the inbox lists api again.
        assert screen.current.block_id == "api" and screen.current.undone
        assert str(screen.table.get_row_at(1)[4]) == "undone"
        rows = app.query_one(BlockList).blocks.values()
        listed = {b.id for b in rows if b.state != "waiting"}
        assert "api" in listed and "shop" not in listed
        # Shop's answer still waits for its loop; api's, undone, no longer does.
        assert [b.id for b in rows if b.state == "waiting"] == ["shop"]
        # Again: refused in one line, nothing written.
        await pilot.press("u")
        await app.workers.wait_for_complete()
        await pilot.pause()
        notes = list(app._notifications)
        assert notes[-1].title == "Not undone", [n.title for n in notes]
        assert "\n" not in notes[-1].message
        assert (root / "api" / "BLOCKED.md").read_bytes() == api_before
    entries = journal.history()
    assert [(e.block_id, e.undone) for e in entries] == [("shop", False), ("api", True)]


async def test_an_undo_refused_because_a_file_moved_on_names_it(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await _answer(pilot, app, "shop")
        prompt = root / "shop" / "PROMPT.md"
        prompt.write_text(prompt.read_text() + "\nthe loop moved on\n")
        moved = prompt.read_bytes()
        await _history(pilot, app)
        await pilot.press("u")
        await app.workers.wait_for_complete()
        await pilot.pause()
        note = list(app._notifications)[-1]
        assert note.title == "Not undone"
        assert "PROMPT.md" in note.message and "\n" not in note.message
        assert prompt.read_bytes() == moved
        assert not (root / "shop" / "BLOCKED.md").exists()
    assert not journal.history()[0].undone


async def test_slash_filters_as_you_type_and_esc_goes_back_then_closes(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await _answer(pilot, app, "api")
        await _answer(pilot, app, "shop")
        await _answer(pilot, app, "mobile", "1")
        screen = await _history(pilot, app)
        assert _blocks(screen) == ["mobile", "shop", "api"]
        await pilot.press("slash")
        assert isinstance(screen.focused, Input)
        await pilot.press(*"mobile")
        await pilot.pause()
        assert _blocks(screen) == ["mobile"]
        # j, k, u and q are letters in the filter, never keys.
        await pilot.press(*["backspace"] * 6, *"ada")
        await pilot.pause()
        assert _blocks(screen) == ["mobile", "shop", "api"]  # the operator's name
        await pilot.press("backspace", "backspace", "backspace", *"nothing like it")
        await pilot.pause()
        assert screen.shown == []
        assert "No answers match" in str(screen.table.get_row_at(0)[0])
        await pilot.press("u")  # typed, no undo
        await pilot.pause()
        assert all(not e.undone for e in journal.history())
        for _ in range(len("nothing like itu")):
            await pilot.press("backspace")
        await pilot.press(*"api")
        await pilot.pause()
        assert _blocks(screen) == ["api"]
        await pilot.press("escape")
        assert isinstance(screen.focused, DataTable)
        assert isinstance(app.screen, HistoryScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HistoryScreen)


async def test_history_filters_over_the_answer_id_and_repo(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await _answer(pilot, app, "api")
        await _answer(pilot, app, "shop")
        screen = await _history(pilot, app)
        api = next(e for e in screen.shown if e.block_id == "api")
        await pilot.press("slash", *api.id[-6:])
        await pilot.pause()
        assert _blocks(screen) == ["api"]
        await pilot.press("ctrl+a", "ctrl+k", *str(root / "shop"))
        await pilot.pause()
        assert _blocks(screen) == ["shop"]


async def test_a_word_typed_in_one_burst_with_the_slash_is_the_filters(tmp_path: Path) -> None:
    """`/shop` in one read (a fast typist, a busy app): the `h` is the filter's, not the key
    that closes the history."""
    from textual import events

    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await _answer(pilot, app, "api")
        await _answer(pilot, app, "shop")
        screen = await _history(pilot, app)
        for char in "/shop":
            app.post_message(events.Key("slash" if char == "/" else char, char))
        await pilot.pause()
        await pilot.pause()
        assert app.screen is screen
        assert screen.query_one("#history-filter", Input).value == "shop"
        assert _blocks(screen) == ["shop"]


async def test_hostile_text_in_the_history_is_shown_not_run(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    app = make_app([root])
    app.operator = app.inbox_screen.operator = "[@click=app.quit]ada[/b"
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await _answer(pilot, app, "shop")
        screen = await _history(pilot, app)
        await pilot.press("slash", *"[/b")
        await pilot.pause()
        assert _blocks(screen) == ["shop"]
        await pilot.press("escape", "u")
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("y")  # the question first: the operator's name in it is text
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.is_running
        assert (root / "shop" / "BLOCKED.md").exists()


# -- `hitl history PATH...`: the same filter by repository on the CLI, in real subprocesses --


def _answered_in_three_repos(tmp_path: Path) -> Path:
    from tests.hostile_cases import run_hitl

    root = demo_workspace(tmp_path / "loops")
    for block, choice in (("api", "2"), ("shop", "2"), ("mobile", "1")):
        done = run_hitl("answer", block, "--choice", choice, root)
        assert done.returncode == 0, done.stderr
    return root


def test_hitl_history_path_lists_only_that_repos_answers(tmp_path: Path) -> None:
    import json

    from tests.hostile_cases import run_hitl

    root = _answered_in_three_repos(tmp_path)
    every = json.loads(run_hitl("history", "--json").stdout)
    assert [e["block"]["id"] for e in every] == ["mobile", "shop", "api"]
    one = run_hitl("history", "--json", root / "shop")
    assert one.returncode == 0, one.stderr
    assert [e["block"]["id"] for e in json.loads(one.stdout)] == ["shop"]
    two = run_hitl("history", root / "api", root / "mobile")
    lines = two.stdout.decode().splitlines()
    assert two.returncode == 0 and len(lines) == 2, lines
    assert " mobile " in lines[0] and " api " in lines[1]
    # A folder above the repositories: every one under it; a relative path works too.
    assert len(json.loads(run_hitl("history", "--json", root).stdout)) == 3
    relative = run_hitl("history", "--json", "shop", cwd=root)
    assert [e["block"]["id"] for e in json.loads(relative.stdout)] == ["shop"]
    none = run_hitl("history", tmp_path / "elsewhere")
    assert none.returncode == 0
    assert none.stdout.decode().strip() == "no answers in these repositories"


def test_hitl_history_path_pages_within_the_repo_and_undo_shows(tmp_path: Path) -> None:
    import json

    from tests.hostile_cases import run_hitl

    root = _answered_in_three_repos(tmp_path)
    shop = json.loads(run_hitl("history", "--json", root / "shop").stdout)[0]
    assert run_hitl("undo", shop["id"]).returncode == 0
    assert (root / "shop" / "BLOCKED.md").exists()
    page = run_hitl("history", "-n", "1", root / "shop", root / "api")
    lines = page.stdout.decode().splitlines()
    assert " shop " in lines[0] and "undone by" in lines[0]
    assert lines[1].startswith("(older answers: hitl history ")
    assert "--page 2" in lines[1] and str(root / "api") in lines[1]
    second = run_hitl("history", "-n", "1", "--page", "2", root / "shop", root / "api")
    assert " api " in second.stdout.decode().splitlines()[0]


def test_hitl_history_help_names_path() -> None:
    from tests.hostile_cases import run_hitl

    done = run_hitl("history", "--help")
    text = done.stdout.decode()
    assert done.returncode == 0
    assert "PATH" in text and "owner/name" in text
