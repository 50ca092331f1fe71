"""`u` says which answer it undoes and asks first; on a highlighted answer it undoes that one,
not the journal's last; when the loop has acted on the answer (a real commit after it), it asks
a second time, and only `f` there undoes it. Checked on disk, with a real git repository."""

from __future__ import annotations

import shutil
from pathlib import Path

from textual.widgets import Static

from hitl_tui import journal
from hitl_tui.tui.screens import HistoryScreen
from hitl_tui.tui.undo_flow import ConfirmUndo
from hitl_tui.tui.widgets import BlockList
from tests.conftest import FIXTURES
from tests.support.pilot import select, settle
from tests.support.repos import git
from tests.tui_support import SIZE, demo_workspace, make_app


def _files(repo: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in repo.iterdir() if p.is_file()}


async def _answer(pilot, app, block_id: str, key: str = "2") -> None:
    await select(pilot, app, block_id)
    await pilot.press(key, "enter")
    await app.workers.wait_for_complete()
    await pilot.pause()


async def _press(pilot, app, *keys: str) -> None:
    """Press `keys`, then let the workers they started finish (a question is pushed by one)."""
    await pilot.press(*keys)
    await app.workers.wait_for_complete()
    await pilot.pause()


def _asked(app) -> str:
    """The question on screen, as the operator reads it (the modal must be up)."""
    screen = app.screen
    assert isinstance(screen, ConfirmUndo), f"no question: {type(screen).__name__} is shown"
    return str(screen.query_one("#undo-question", Static).render())


def _notes(app) -> list[tuple[str, str]]:
    return [(n.title, n.message) for n in app._notifications]


async def test_u_says_which_answer_and_asks_first_nothing_written_before_y(
    tmp_path: Path,
) -> None:
    root = demo_workspace(tmp_path)
    shop = root / "shop"
    before = _files(shop)
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await _answer(pilot, app, "shop")
        answered = _files(shop)
        assert "BLOCKED.md" not in answered

        await select(pilot, app, "shop")  # its row, waiting for the loop
        await _press(pilot, app, "u")
        text = _asked(app)
        assert text.startswith(
            'Undo the answer to shop (BLOCKED.md): "B) Keep invoices, detach them from the '
            "workspace"
        ), text
        assert " ago?\n" in text and f"in {shop} · " in text
        assert _files(shop) == answered  # asked, nothing written
        assert not journal.history()[0].undone

        await _press(pilot, app, "n")  # kept
        assert not isinstance(app.screen, ConfirmUndo)
        assert _files(shop) == answered and not journal.history()[0].undone
        await _press(pilot, app, "u")
        await _press(pilot, app, "escape")  # kept too
        assert _files(shop) == answered and not journal.history()[0].undone
        assert not any(title == "Undone" for title, _ in _notes(app))

        await _press(pilot, app, "u")
        await _press(pilot, app, "y")
        assert _files(shop) == before
        assert journal.history()[0].undone
        assert any(title == "Undone" for title, _ in _notes(app))


async def test_u_on_a_highlighted_answer_undoes_it_not_the_journals_last(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    api_before = _files(root / "api")
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await _answer(pilot, app, "api")
        await _answer(pilot, app, "shop")  # the journal's last answer: another repository's
        shop_answered = _files(root / "shop")

        await select(pilot, app, "api")  # api's answer, waiting for its loop
        await _press(pilot, app, "u")
        text = _asked(app)
        assert text.startswith("Undo the answer to api (BLOCKED.md): "), text
        assert f"in {root / 'api'} · " in text
        await _press(pilot, app, "y")
        assert _files(root / "api") == api_before
        assert _files(root / "shop") == shop_answered  # the last answer stays
        assert [(e.block_id, e.undone) for e in journal.history()] == [
            ("shop", False),
            ("api", True),
        ]
        listed = {b.id for b in app.query_one(BlockList).blocks.values() if b.state != "waiting"}
        assert "api" in listed and "shop" not in listed

        # A block with no answer of its own: the journal's last answer, and its repository.
        await select(pilot, app, "mobile")
        await _press(pilot, app, "u")
        text = _asked(app)
        assert text.startswith(
            "mobile has no answer of its own to undo. The last answer in the journal is:\n"
            "Undo the answer to shop (BLOCKED.md): "
        ), text
        assert f"in {root / 'shop'} · " in text
        await _press(pilot, app, "escape")
        assert _files(root / "shop") == shop_answered


def _git_shop(root: Path) -> Path:
    repo = root / "shop"
    shutil.copytree(FIXTURES / "loopkit-shop", repo)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "start")
    return repo


async def test_u_on_an_answer_the_loop_committed_on_asks_again_and_only_f_undoes(
    tmp_path: Path,
) -> None:
    root = tmp_path / "loops"
    repo = _git_shop(root)
    before = _files(repo)
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await _answer(pilot, app, "shop")
        # The loop resumes: it commits the decision with its work.
        (repo / "work.txt").write_text("done\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "[b]Keep invoices[/b] [@click=app.quit]")
        head = git(repo, "rev-parse", "HEAD")
        committed = _files(repo)

        await select(pilot, app, "shop")
        await _press(pilot, app, "u")
        assert _asked(app).startswith("Undo the answer to shop (BLOCKED.md): ")
        await _press(pilot, app, "y")
        text = _asked(app)  # asked again, naming what the loop did
        assert app.screen.forced
        assert text.startswith(
            f"The loop has acted on this answer since: commit {head[:7]} "
            '"[b]Keep invoices[/b] [@click=app.quit]" after it.\n'
        ), text
        assert _files(repo) == committed and git(repo, "status", "--porcelain") == ""
        await _press(pilot, app, "y")  # a second y is not the second yes
        assert isinstance(app.screen, ConfirmUndo) and _files(repo) == committed
        await _press(pilot, app, "n")
        assert not isinstance(app.screen, ConfirmUndo)
        assert _files(repo) == committed and not journal.history()[0].undone
        assert app.is_running

        # From the history: the same two questions; `f` undoes it.
        await _press(pilot, app, "h")
        assert isinstance(app.screen, HistoryScreen)
        await _press(pilot, app, "u")
        await _press(pilot, app, "y")
        assert app.screen.forced
        await _press(pilot, app, "f")
        assert isinstance(app.screen, HistoryScreen)
        assert journal.history()[0].undone
        assert (repo / "BLOCKED.md").read_bytes() == before["BLOCKED.md"]
        assert (repo / "PROMPT.md").read_bytes() == before["PROMPT.md"]


async def test_a_commit_between_the_question_and_y_is_asked_about_too(tmp_path: Path) -> None:
    """The undo checks again when it runs: a loop that commits while the question is up is
    named in a second question, and nothing is written."""
    root = tmp_path / "loops"
    repo = _git_shop(root)
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await _answer(pilot, app, "shop")
        await select(pilot, app, "shop")
        await _press(pilot, app, "u")
        assert not app.screen.forced  # no sign yet
        (repo / "work.txt").write_text("done\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "meanwhile")
        answered = _files(repo)
        await _press(pilot, app, "y")
        assert app.screen.forced and '"meanwhile" after it' in _asked(app)
        assert _files(repo) == answered and not journal.history()[0].undone


async def test_u_on_an_open_block_undoes_its_own_answer_not_the_journals_last(
    tmp_path: Path,
) -> None:
    """An agenticloop task answered with a note only stays blocked: highlighted, `u` undoes
    that note, not the answer given since in another repository."""
    from tests.hostile_cases import run_hitl

    root = demo_workspace(tmp_path)
    task = root / "billing" / ".agenticloop" / "tasks" / "T-007.md"
    task_before = task.read_bytes()
    noted = run_hitl("answer", "billing/T-007", "--choice", "D", "--note", "ask legal", root)
    assert noted.returncode == 0, noted.stderr
    task_noted = task.read_bytes()
    assert task_noted != task_before
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await _answer(pilot, app, "api")  # the journal's last answer, in another repository
        api_answered = _files(root / "api")
        table = app.query_one(BlockList)
        await pilot.press("home")
        for _ in range(len(table.order)):  # the open block, not its answer's waiting row
            current = table.current
            if current is not None and current.id == "billing/T-007" and current.state != "waiting":
                break
            await pilot.press("j")
        assert table.current.id == "billing/T-007" and table.current.state != "waiting"
        await _press(pilot, app, "u")
        text = _asked(app)
        assert text.startswith(
            "Undo the answer to billing/T-007 (.agenticloop/tasks/T-007.md): "
            '"D) Keep blocked, add a note'
        ), text
        await _press(pilot, app, "y")
        assert task.read_bytes() == task_before
        assert _files(root / "api") == api_answered
