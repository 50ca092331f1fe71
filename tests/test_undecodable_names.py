"""A repository folder whose name is not UTF-8 (`caf\\xe9-shop`, latin-1 bytes on Linux).

Every command runs in a real subprocess under a strict UTF-8 stdout (what a pipe into a
strict reader, or `PYTHONIOENCODING=utf-8:strict`, gives): the bad byte is printed as a
visible `\\xe9`, JSON carries it as a `\\udce9` escape that `os.fsencode(json.loads(...))`
turns back into the folder's bytes, and no command fails for the rest of the workspace.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hitl_tui.inbox.inbox import Inbox
from tests.hostile_cases import DRIVER, Run, hitl_env

BAD = b"caf\xe9-shop"
SHOWN = "caf\\xe9-shop"  # what a terminal shows: a visible escape, never a raw byte
BLOCK = "## Question\n{q}\n## Choices\n- A) yes — ship\n- B) no — wait\n"


def run_strict(*args: object, cwd: Path | bytes | None = None, env: dict | None = None) -> Run:
    """`hitl ARGS` in a subprocess whose stdout refuses anything that is not UTF-8."""
    env = hitl_env({"PYTHONIOENCODING": "utf-8:strict", "HITL_TEST_FAULT": "{}", **(env or {})})
    env.pop("PYTHONUTF8")  # UTF-8 mode would make stdout surrogateescape, hiding the bug
    argv = [os.fsencode(sys.executable), b"-c", DRIVER.encode(), *map(os.fsencode, args)]
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, timeout=60)
    return Run(done.returncode, done.stdout, done.stderr, 0, 0.0)


def bad_repo(root: Path, question: str | None = "Ship the café?") -> bytes:
    folder = os.fsencode(root) + b"/" + BAD
    os.mkdir(folder)
    os.mkdir(folder + b"/.git")
    if question is not None:
        with open(folder + b"/BLOCKED.md", "w", encoding="utf-8") as f:
            f.write(BLOCK.format(q=question))
    return folder


@pytest.fixture
def loops(tmp_path: Path) -> Path:
    root = tmp_path / "loops"
    root.mkdir()
    bad_repo(root)
    ok = root / "ok"
    (ok / ".git").mkdir(parents=True)
    (ok / "BLOCKED.md").write_text(BLOCK.format(q="Ship ok?"))
    return root


def _utf8(run: Run) -> str:
    return run.stdout.decode("utf-8")  # strict: raises on a raw \xe9


def test_list_prints_a_visible_escape_under_strict_utf8(loops: Path) -> None:
    run = run_strict("list", loops)
    assert run.returncode == 0, run.err
    out = _utf8(run)
    assert SHOWN in out and "Ship the café?" in out and "Ship ok?" in out
    assert run.err == ""


def test_list_json_is_valid_utf8_and_round_trips_the_bytes(loops: Path) -> None:
    run = run_strict("list", "--json", loops)
    assert run.returncode == 0, run.err
    text = _utf8(run)
    assert "\\udce9" in text
    items = {item["question"]: item for item in json.loads(text)}
    bad = items["Ship the café?"]
    assert os.fsencode(bad["repo"]) == os.fsencode(loops) + b"/" + BAD
    assert os.fsencode(bad["path"]) == os.fsencode(loops) + b"/" + BAD + b"/BLOCKED.md"
    assert os.fsencode(bad["id"]) == BAD
    assert items["Ship ok?"]["id"] == "ok"


def test_guard_prints_the_escape_and_exits_2(loops: Path) -> None:
    run = run_strict("guard", loops)
    assert run.returncode == 2, run.err
    out = _utf8(run)
    assert f"{SHOWN}: blocked: Ship the café?" in out and "ok: blocked: Ship ok?" in out
    assert run.err == ""


def test_escalate_in_such_a_repo_exits_2_and_notifies(tmp_path: Path) -> None:
    folder = bad_repo(tmp_path, question=None)
    sent = tmp_path / "sent.txt"
    dial = {"LOOPKIT_HITL_CHANNEL": "dial", "LOOPKIT_HITL_DIAL_CMD": f"cat > '{sent}'"}
    run = run_strict(
        "escalate",
        "--question",
        "Keep the invoices?",
        "--context",
        "Billing keeps them 7 years.",
        "--attempted",
        "Read PROMPT.md",
        "--choice",
        "Keep — safe",
        "--choice",
        "Drop — simple",
        cwd=folder,
        env=dial,
    )
    assert run.returncode == 2, run.err
    assert SHOWN in _utf8(run)
    assert run.err == ""
    assert f"[loopkit] blocked in {SHOWN} on " in sent.read_text(encoding="utf-8")
    with open(folder + b"/BLOCKED.md", encoding="utf-8") as f:
        assert "Keep the invoices?" in f.read()


def test_answer_undo_and_history_in_such_a_repo(loops: Path) -> None:
    folder = os.fsencode(loops) + b"/" + BAD
    with open(folder + b"/BLOCKED.md", "rb") as f:
        blocked = f.read()
    # By the id as `list` prints it (the visible escape), as a person would type it.
    run = run_strict("answer", SHOWN, "--choice", "A", loops)
    assert run.returncode == 0, run.err
    assert SHOWN in _utf8(run)
    assert not os.path.exists(folder + b"/BLOCKED.md")
    with open(folder + b"/PROMPT.md", encoding="utf-8") as f:
        assert "yes — ship" in f.read()

    history = run_strict("history")
    assert history.returncode == 0, history.err
    assert SHOWN in _utf8(history)
    as_json = run_strict("history", "--json")
    assert as_json.returncode == 0, as_json.err
    [entry] = json.loads(_utf8(as_json))
    assert os.fsencode(entry["block"]["path"]).startswith(folder)
    assert os.fsencode(entry["repo"]) == folder

    undo = run_strict("undo")
    assert undo.returncode == 0, undo.err
    _utf8(undo)
    with open(folder + b"/BLOCKED.md", "rb") as f:
        assert f.read() == blocked

    # By the id's own bytes too (argv decodes them as surrogates).
    again = run_strict("answer", BAD, "--choice", "B", "--dry-run", loops)
    assert again.returncode == 0, again.err
    assert "no — wait" in _utf8(again)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify (Linux)")
async def test_the_real_watcher_keeps_watching_every_repo(loops: Path) -> None:
    from tests.test_watch import Watcher, added

    folder = os.fsencode(loops) + b"/" + BAD
    os.unlink(folder + b"/BLOCKED.md")
    os.unlink(loops / "ok" / "BLOCKED.md")
    inbox = Inbox.open([loops])
    async with Watcher(inbox) as w:
        (loops / "ok" / "BLOCKED.md").write_text(BLOCK.format(q="Now ok?"))
        await w.expect(added("ok"))
        with open(folder + b"/BLOCKED.md", "w", encoding="utf-8") as f:
            f.write(BLOCK.format(q="Now café?"))
        delta = await w.expect(added(os.fsdecode(BAD)))
        assert delta.added[0].question == "Now café?"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify (Linux)")
async def test_the_app_shows_the_escape_and_its_watcher_keeps_working(loops: Path) -> None:
    from tests.support.pilot import settle
    from tests.tui_support import SIZE, make_app

    os.unlink(loops / "ok" / "BLOCKED.md")
    app = make_app([loops], watch=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        from hitl_tui.tui.widgets import BlockList

        table = app.query_one(BlockList)
        rows = [table.render_line(y).text for y in range(table.size.height)]
        assert any(SHOWN in row and "Ship the café?" in row for row in rows), rows
        await asyncio.sleep(2.5)  # the old watcher failed, and was restarted, every 2 s
        (loops / "ok" / "BLOCKED.md").write_text(BLOCK.format(q="Arrived live?"))
        for _ in range(100):
            await asyncio.sleep(0.05)
            await pilot.pause()
            if any(b.id == "ok" for b in table.blocks.values()):
                break
        assert any(b.id == "ok" for b in table.blocks.values())
        assert [n for n in app._notifications if n.severity == "error"] == []
        app.stop_event.set()
