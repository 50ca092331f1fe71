"""Answer each question once, in the app (issue 26): marks (Space, Esc, M), grouping by
question, and one answer previewed and written for every marked block. Driven by keys;
asserting what the list, the header and the screens show, and the files on disk."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Static, TextArea

from hitl_tui.cli import commands as cli
from hitl_tui.tui.batch_screens import BatchPreviewScreen, BatchResultScreen
from hitl_tui.tui.screens import PreviewScreen, TextAnswerScreen
from hitl_tui.tui.undo_flow import ConfirmUndo
from hitl_tui.tui.widgets import BlockList
from tests.support import batch_fleet, until
from tests.support.pilot import select, settle
from tests.tui_support import NOW, SIZE, make_app


def _fleet(tmp_path: Path, **kw) -> list[Path]:
    return batch_fleet.build(tmp_path, NOW.timestamp(), **kw)


def _header(app) -> str:
    return str(app.query_one("#topbar", Static).content)


def _rows(app) -> list[str]:
    """Each drawn row's text, as the list shows it (the first cell: the marks)."""
    table = app.query_one(BlockList)
    return [table.render_line(y).text for y in range(len(table.drawn))]


def _marked_ids(app) -> set[str]:
    table = app.query_one(BlockList)
    return {table.blocks[rk].id for rk in table.rows.marked}


def _row_of(app, block_id: str) -> str:
    return next(r for r in _rows(app) if r[1:].startswith(block_id + " "))


async def test_space_marks_esc_clears_and_the_header_counts_marks_the_filter_hides(tmp_path):
    app = make_app(_fleet(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await select(pilot, app, "node-1")
        await pilot.press("space")
        await select(pilot, app, "db-1")
        await pilot.press("space")
        assert _marked_ids(app) == {"node-1", "db-1"}
        assert _row_of(app, "node-1").startswith("✓")
        assert _row_of(app, "db-1").startswith("✓")
        assert not _row_of(app, "node-2").startswith("✓")
        assert "· 2 marked" in _header(app)
        # Space again unmarks.
        await pilot.press("space")
        assert _marked_ids(app) == {"node-1"}
        assert not _row_of(app, "db-1").startswith("✓")
        await pilot.press("space")
        # A filter that hides one: the marks stay, the header says how many are hidden.
        await pilot.press("slash", *"db", "enter")
        await pilot.pause()
        assert [r[1:5] for r in _rows(app)] == ["db-1", "db-2"]
        assert "· 2 marked (1 hidden by the filter)" in _header(app)
        assert _marked_ids(app) == {"node-1", "db-1"}
        # Another order, a grouping: the marks stay.
        await pilot.press("s", "v")
        await pilot.pause()
        assert _marked_ids(app) == {"node-1", "db-1"}
        # Cleared filter: both shown marked again; Esc clears every mark.
        await pilot.press("slash", "escape")
        await pilot.pause()
        assert _row_of(app, "node-1").startswith("✓")
        assert "· 2 marked ·" in _header(app) or _header(app).endswith("· 2 marked")
        await pilot.press("escape")
        await pilot.pause()
        assert _marked_ids(app) == set()
        assert "marked" not in _header(app)
        assert not any(r.startswith("✓") for r in _rows(app))


# -- p: reuse an earlier answer -------------------------------------------------------------


async def test_p_offers_another_repos_decision_as_own_words_never_as_a_draft(tmp_path):
    """svc's tasks list no "Node 22": p offers node-1's decision (its option's text, not its
    label and consequence) in the own-words box, titled with where it comes from."""
    repos = _fleet(tmp_path, node=1, db=0, tasks=1)
    assert cli.main(["answer", str(repos[0]), "--choice", "B"]) == 0
    app = make_app(repos)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await until(pilot, lambda: app.asked.index is not None, what="the memory of answers")
        await select(pilot, app, "svc/T-001")
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, TextAnswerScreen), what="the text box")
        title = str(app.screen.query_one("#answer-title", Static).content)
        assert "from the answer given in node-1" in title, title
        assert "your draft" not in title
        assert not app.screen.query("#discard")
        text = app.screen.query_one("#answer-1", TextArea).text
        assert text == "Node 22", text
        await pilot.press("ctrl+s")
        await until(pilot, lambda: isinstance(app.screen, PreviewScreen), what="the preview")
        assert app.screen.plan.answer.choice is None
        assert app.screen.plan.answer.texts == ("Node 22",)


# -- M, and grouping by question ------------------------------------------------------------


async def test_M_marks_every_open_block_asking_the_same_question(tmp_path):
    app = make_app(_fleet(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        # A filter hides the agenticloop tasks: M marks them all the same, and says so.
        app.inbox_screen.BURST_GAP = 0  # the operator pauses after Enter (else M is ignored)
        await pilot.press("slash", *"src:loopkit", "enter")
        await select(pilot, app, "node-2")
        await pilot.press("M")
        await pilot.pause()
        node = {"node-1", "node-2", "node-3", "node-4", "svc/T-001", "svc/T-002"}
        assert _marked_ids(app) == node
        assert "· 6 marked (2 hidden by the filter)" in _header(app)
        for block_id in ("node-1", "node-2", "node-3", "node-4"):
            assert _row_of(app, block_id).startswith("✓"), _rows(app)
        assert not _row_of(app, "db-1").startswith("✓")
        toast = str(list(app._notifications)[-1].message)
        assert "6 blocks asking this question: 6 newly marked" in toast
        # The other question: its own two.
        await select(pilot, app, "db-2")
        await pilot.press("M")
        await pilot.pause()
        assert _marked_ids(app) == node | {"db-1", "db-2"}


async def test_v_groups_by_question_and_space_on_a_header_marks_the_group(tmp_path):
    repos = _fleet(tmp_path)
    # A question no other block asks.
    batch_fleet.loopkit(tmp_path, "lone", "## Question\nShould the logo be blue?\n", 0)
    app = make_app([*repos, tmp_path / "lone"])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        for _ in range(4):
            await pilot.press("v")
        await pilot.pause()
        assert "grouped by question" in _header(app)
        rows = _rows(app)
        assert rows[0].startswith(" ▾ Which Node version should CI use? · 6 blocks"), rows
        assert rows[7].startswith(" ▾ Which DB migration tool should we use? · 2 blocks"), rows
        assert rows[10].startswith(" ▾ questions asked once · 1 block"), rows
        assert {r[1:10].strip() for r in rows[1:7]} == {
            "svc/T-001",
            "svc/T-002",
            "node-1",
            "node-2",
            "node-3",
            "node-4",
        }
        # Space on the DB header marks its two blocks; the header row counts them.
        table = app.query_one(BlockList)
        table.move_cursor(7)
        await pilot.press("space")
        await pilot.pause()
        assert _marked_ids(app) == {"db-1", "db-2"}
        assert _rows(app)[7].startswith(
            " ▾ Which DB migration tool should we use? · 2 blocks · 2 marked"
        )
        assert _rows(app)[8].startswith("✓db-")
        assert "· 2 marked" in _header(app)
        # Space again: all were marked, so all are unmarked; Enter still folds.
        await pilot.press("space")
        assert _marked_ids(app) == set()
        await pilot.press("enter")
        await pilot.pause()
        assert "(folded)" in _rows(app)[7]


# -- a choice key with marks: the batch preview, apply, the result, undo ---------------------


def _files(repos: list[Path]) -> dict[str, bytes]:
    """Every file of the repos (but .git), by path: what the batch may change."""
    return {
        str(f): f.read_bytes()
        for repo in repos
        for f in sorted(repo.rglob("*"))
        if f.is_file() and ".git" not in f.parts
    }


def _static(screen, selector: str) -> str:
    import io

    from rich.console import Console

    console = Console(width=300, record=True, file=io.StringIO())
    console.print(screen.query_one(selector, Static).content)
    return console.export_text()


async def test_a_choice_key_with_marks_previews_applies_and_undoes_every_marked_block(tmp_path):
    """Six blocks ask the Node question: four loopkit repos list "Node 22", one agenticloop task
    recommends it (its own words for it: "Accept the recommended default: Node 22", picked in
    the preview), one lists no such option (skipped). One repo's block changes after the
    preview: refused and named, the others written. Then `u` undoes the whole batch."""
    repos = _fleet(tmp_path, db=1)
    before = _files(repos)
    app = make_app(repos)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await select(pilot, app, "node-1")
        await pilot.press("M", "2")  # B) Node 22 of node-1, for all six
        await until(
            pilot, lambda: isinstance(app.screen, BatchPreviewScreen), what="the batch preview"
        )
        screen = app.screen
        assert "Answer 6 marked blocks with “Node 22”" in _static(screen, "#batch-title")
        count = _static(screen, "#batch-count")
        assert "6 blocks: 4 ready · 2 to choose · 0 refused · block 1 of 6" in count, count
        heads = [_static(screen, f"#head-{i}") for i in range(6)]
        assert "svc/T-001" in heads[0] and "choose: no option 'Node 22' here" in heads[0]
        assert "svc/T-002" in heads[1] and "choose:" in heads[1]
        for i, name in enumerate(("node-1", "node-2", "node-3", "node-4"), 2):
            assert name in heads[i] and "ready: B) Node 22" in heads[i], heads[i]
            body = _static(screen, f"#body-{i}")
            assert "-## Question:" in body or "BLOCKED.md" in body, body
        # n: the next section; 1 picks T-002's recommended default; s skips T-001.
        await pilot.press("n")
        assert "block 2 of 6" in _static(screen, "#batch-count")
        await pilot.press("1")
        await pilot.pause()
        assert "ready: A) Accept the recommended default: Node 22" in _static(screen, "#head-1")
        await pilot.press("N", "s")
        await pilot.pause()
        assert "skipped" in _static(screen, "#head-0")
        assert "5 ready · 0 to choose · 1 skipped · 0 refused" in _static(screen, "#batch-count")
        # node-3's loop rewrites its question meanwhile.
        changed = repos[2] / "BLOCKED.md"
        changed.write_text(changed.read_text() + "\nAlso: which npm?\n")
        nothing_yet = _files(repos)
        assert {k: v for k, v in nothing_yet.items() if v != before.get(k)} == {
            str(changed): changed.read_bytes()
        }
        await pilot.press("y")
        await until(
            pilot,
            lambda: isinstance(app.screen, BatchResultScreen),
            what="the batch result",
            saw=lambda: (app.screen, [str(n.message) for n in app._notifications]),
        )
        result = _static(app.screen, "#result-text")
        assert "written (4)" in result and "refused (1)" in result and "skipped (1)" in result
        written = result.split("refused (1)")[0]
        for name in ("svc/T-002", "node-1", "node-2", "node-4"):
            assert name in written
        refused = result.split("refused (1)")[1].split("skipped (1)")[0]
        assert "node-3" in refused and "BLOCKED.md" in refused, refused
        assert "svc/T-001" in result.split("skipped (1)")[1]
        # On disk: the four answered, node-3 as its loop left it, T-001 untouched.
        for repo in (repos[0], repos[1], repos[3]):
            assert not (repo / "BLOCKED.md").exists()
            assert "Node 22" in (repo / "PROMPT.md").read_text()
        assert changed.read_text().endswith("Also: which npm?\n")
        tasks = repos[-1] / ".agenticloop" / "tasks"
        assert (tasks / "T-001.md").read_bytes() == before[str(tasks / "T-001.md")]
        t2 = (tasks / "T-002.md").read_text()
        assert "status: blocked" not in t2 and "Node 22" in t2
        assert not app.inbox_screen.rows.marked
        # The answers' rows, waiting for their loops, listed at once (not at the next look).
        await settle(pilot, app)
        rows = app.inbox_screen.rows
        waiting = sorted(
            rows.blocks[rk].id for rk in rows.order if rows.blocks[rk].state == "waiting"
        )
        assert waiting == ["node-1", "node-2", "node-4", "svc/T-002"]
        # u: the whole batch undone (asked first): every file as it was, node-3's change kept.
        await pilot.press("u")
        await until(pilot, lambda: isinstance(app.screen, ConfirmUndo), what="the undo question")
        assert "Undo the whole batch" in str(app.screen.text)
        await pilot.press("y")
        await until(
            pilot,
            lambda: isinstance(app.screen, BatchResultScreen) and app.screen.undone,
            what="the batch undone",
        )
        assert "undo of the batch" in _static(app.screen, "#result-text")
        await settle(pilot, app)
        after = _files(repos)
        assert after == {**before, str(changed): changed.read_bytes()}
        await pilot.press("escape")
        await pilot.pause()
        ids = {b.id for b in app.inbox_screen.rows.blocks.values() if b.state == "blocked"}
        assert {"node-1", "node-2", "node-4", "svc/T-002"} <= ids


async def test_p_maps_to_a_choice_only_when_the_option_texts_fold_equal(tmp_path):
    """a's answer chose "Node >= 22". In c, "node  >= 22." is that option (case, spaces and a
    trailing full stop aside): p opens its preview. In b, "Node <= 22" is not (the operator
    differs): p offers a's decision as own words, from a."""

    def blocked(options: str) -> str:
        return f"## Question:\n{batch_fleet.NODE}\n\n## Choices:\n{options}"

    a = batch_fleet.loopkit(tmp_path, "a", blocked("- A) Node >= 22\n- B) Node 20\n"), 0)
    b = batch_fleet.loopkit(tmp_path, "b", blocked("- A) Node <= 22\n- B) Node 20\n"), 0)
    c = batch_fleet.loopkit(tmp_path, "c", blocked("- A) Node 20\n- B) node  >= 22.\n"), 0)
    assert cli.main(["answer", str(a), "--choice", "A"]) == 0
    app = make_app([b, c])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await until(pilot, lambda: app.asked.index is not None, what="the memory of answers")
        await select(pilot, app, "c")
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, PreviewScreen), what="c's preview")
        assert app.screen.plan.answer.choice.key == "B"
        await pilot.press("escape")
        await select(pilot, app, "b")
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, TextAnswerScreen), what="b's text box")
        assert "from the answer given in a" in str(
            app.screen.query_one("#answer-title", Static).content
        )
        assert app.screen.query_one("#answer-1", TextArea).text == "Node >= 22"


# -- the history: a batch is one line that expands; u there undoes the batch ------------------


async def test_the_history_shows_a_batch_as_one_line_that_expands_and_u_undoes_it(tmp_path):
    from hitl_tui.answers.batch import How, apply_batch, plan_batch
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.inbox.workspace import Workspace
    from hitl_tui.journal.batches import Group
    from hitl_tui.tui.screens import HistoryScreen

    repos = _fleet(tmp_path, db=1, tasks=0)  # node-1 ... node-4, db-1
    before = _files(repos)
    inbox = Inbox(Workspace.discover(repos[:4]))
    inbox.scan()
    batch = plan_batch(inbox, inbox.sorted_blocks(), How(option="Node 22", operator="Ada"))
    assert apply_batch(inbox, batch, restart=False).count("written") == 4
    assert cli.main(["answer", str(repos[4]), "--choice", "A"]) == 0  # db-1, alone, newest
    app = make_app(repos)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("h")
        await until(pilot, lambda: isinstance(app.screen, HistoryScreen), what="the history")
        screen = app.screen
        table = screen.table
        assert [type(r).__name__ for r in screen.shown] == ["Entry", "Group"]
        assert str(table.get_row_at(1)[2]) == "▸ batch of 4"
        assert str(table.get_row_at(1)[6]) == batch.id
        await pilot.press("j", "space")
        await pilot.pause()
        assert [str(table.get_row_at(i)[2]) for i in range(len(screen.shown))] == [
            "db-1",
            "▾ batch of 4",
            "  └ node-4",
            "  └ node-3",
            "  └ node-2",
            "  └ node-1",
        ]
        await pilot.press("space")  # folded again
        await pilot.pause()
        assert len(screen.shown) == 2 and isinstance(screen.current_row, Group)
        await pilot.press("u")
        await until(pilot, lambda: isinstance(app.screen, ConfirmUndo), what="the undo question")
        assert "Undo the whole batch" in app.screen.text and "4 answers" in app.screen.text
        await pilot.press("y")
        await until(
            pilot,
            lambda: app.screen is screen and str(table.get_row_at(1)[4]) == "undone",
            what="the batch undone",
            saw=lambda: [str(c) for c in table.get_row_at(1)],
        )
        after = _files(repos)
        for name in ("node-1", "node-2", "node-3", "node-4"):
            path = str(tmp_path / name / "BLOCKED.md")
            assert after[path] == before[path]
        assert not (repos[4] / "BLOCKED.md").exists()  # db-1's answer, alone, stays


async def test_agent_markup_in_a_batch_is_shown_as_text(tmp_path):
    """Options and questions are agent text: in the batch's sections and result they are
    plain text, never styles or actions."""
    hostile = "[@click=app.quit]Node[/] 22 [b \x1b]2;title\x07"
    text = f"## Question:\nWhich [b]Node[/x] version?\n\n## Choices:\n- A) {hostile}\n- B) No\n"
    repos = [batch_fleet.loopkit(tmp_path, f"h-{i}", text, 0) for i in (1, 2)]
    app = make_app(repos)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("M", "1")
        await until(pilot, lambda: isinstance(app.screen, BatchPreviewScreen), what="preview")
        head = _static(app.screen, "#head-0")
        assert "ready: A) [@click=app.quit]Node[/] 22 [b" in head and "\x1b" not in head
        assert "Which [b]Node[/x] version?" in _static(app.screen, "#body-0")
        await pilot.press("y")
        await until(pilot, lambda: isinstance(app.screen, BatchResultScreen), what="result")
        assert "[@click=app.quit]Node[/] 22 [b" in _static(app.screen, "#result-text")
        assert app.is_running
        assert not (repos[0] / "BLOCKED.md").exists() and not (repos[1] / "BLOCKED.md").exists()


async def test_a_batch_restarts_each_loop_once_unless_r_turned_them_off(tmp_path):
    """With a [[loop]] restart: the preview says the loops restart after; `y` writes the
    batch and each loop's restart runs once (a line in its repo); with `r` off, none runs."""
    from hitl_tui.config import Config
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.inbox.workspace import Workspace
    from hitl_tui.loops.commands import Loop
    from hitl_tui.tui.app import HitlApp

    for run_them in (True, False):
        root = tmp_path / ("on" if run_them else "off")
        repos = batch_fleet.build(root, NOW.timestamp(), node=3, db=0, tasks=0)
        # (Named per repo: batch.restart_all runs one restart per distinct command.)
        restart = ("sh", "-c", "echo ran >> restarted.log", "sh", "{name}")
        loop = Loop((str(root / "*"),), restart=restart)
        config = Config(operator="Ada", bell=False, loops=(loop,))
        app = HitlApp(Inbox(Workspace.discover(repos)), config=config, watch=False)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            await pilot.press("M", "2")
            await until(
                pilot, lambda a=app: isinstance(a.screen, BatchPreviewScreen), what="preview"
            )
            title = _static(app.screen, "#batch-title")
            assert "then restarts: 3 loops (r: skip)" in title, title
            if not run_them:
                await pilot.press("r")
                assert "restarts skipped (r: run them)" in _static(app.screen, "#batch-title")
            await pilot.press("y")
            await until(pilot, lambda a=app: isinstance(a.screen, BatchResultScreen), what="result")
            await settle(pilot, app)
        for repo in repos:
            assert not (repo / "BLOCKED.md").exists()
            log = repo / "restarted.log"
            assert (log.read_text() if log.exists() else "") == ("ran\n" if run_them else "")


# -- the domain's side: view.RowOrder's marks and groups by question ---------------------------


def test_row_order_marks_survive_specs_and_leave_with_their_block(tmp_path):
    from hitl_tui.inbox.inbox import Delta, Inbox
    from hitl_tui.inbox.view import ASKED_ONCE, RowOrder, ViewSpec, key_of, row_of
    from hitl_tui.inbox.workspace import Workspace
    from hitl_tui.loops.similarity import question_groups
    from hitl_tui.sources.loopkit.source import LoopkitSource

    inbox = Inbox(Workspace.discover(_fleet(tmp_path)))
    inbox.scan()
    blocks = inbox.sorted_blocks()
    rows = RowOrder(blocks, now=NOW, questions=question_groups)
    by_id = {b.id: b for b in blocks}
    rows.marked |= {row_of(by_id["node-1"]), row_of(by_id["db-1"])}
    rows.set_spec(ViewSpec().with_query("db"), now=NOW)
    assert rows.marked_hidden(NOW) == 1 and len(rows.marked) == 2
    assert [b.id for b in rows.marked_blocks()] == ["node-1", "db-1"]
    rows.set_spec(ViewSpec(group="question"), now=NOW)
    assert rows.marked_hidden(NOW) == 0
    names = [g.name for g in rows.rows() if not isinstance(g, str)]
    assert names == ["Which Node version should CI use?", "Which DB migration tool should we use?"]
    assert rows.members("Which DB migration tool should we use?") == [
        row_of(by_id["db-1"]),
        row_of(by_id["db-2"]),
    ]
    # node-1 leaves the inbox (answered): its mark goes with it; a lone question arrives.
    rows.apply(Delta(removed=[key_of(by_id["node-1"])]), None)
    assert rows.marked == {row_of(by_id["db-1"])}
    lone = batch_fleet.loopkit(tmp_path, "lone", "## Question\nShould the logo be blue?\n", 0)
    block = LoopkitSource().parse(lone, lone / "BLOCKED.md", "lone")
    rows.apply(Delta(added=[block]), None)
    assert rows.group_of(block) == ASKED_ONCE
    assert [g.name for g in rows.rows() if not isinstance(g, str)][-1] == ASKED_ONCE
