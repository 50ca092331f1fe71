"""Reply and keep blocked (issue 27, item 5): `w` in the app, `hitl note` on the command line.
The operator's note goes where the loop and the next operator read it, in every format; the
block stays open (listed, `hitl guard` exit 2), nothing restarts, and `hitl undo` takes the
note back byte for byte. Real files, a real journal, real `hitl` processes."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hitl_tui import journal
from hitl_tui.agent.asking import Asker
from hitl_tui.answers.service import plan_note, undo_answer, write_note
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.model import HitlError, StaleError, UsageError
from hitl_tui.sources.asks import format as fmt
from hitl_tui.sources.github import issues as gh
from hitl_tui.sources.github.backend import GithubBackend
from hitl_tui.tui.screens import PreviewScreen, TextAnswerScreen
from hitl_tui.tui.statecol import state_words as _state
from hitl_tui.tui.widgets import BlockList
from tests.support.pilot import select, settle
from tests.tui_support import SIZE, demo_workspace, make_app

WHEN = datetime(2026, 12, 3, 11, 0, tzinfo=UTC)
NOTE = "I add the secret to CI, you wait for me"


def _hitl(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hitl_tui", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
    )


def _repo(tmp_path: Path, blocked: bytes, name: str = "shop") -> Path:
    repo = tmp_path / name
    (repo / ".git").mkdir(parents=True)
    (repo / "BLOCKED.md").write_bytes(blocked)
    return repo


def _one(inbox: Inbox):
    [block] = inbox.blocks.values()
    return block


def _noted(inbox: Inbox, block, note: str = NOTE):
    return write_note(inbox, plan_note(inbox, block, note, "Ada", WHEN))


# -- loopkit: a dated line under BLOCKED.md's `## Operator notes` ------------------------------

CRLF_NO_FINAL = (
    b"\xef\xbb\xbf# Blocked\r\n\r\n## Question\r\nWhich CI token?\r\n\r\n"
    b"## Choices\r\n- A) Use the org token\r\n- B) Skip the deploy step"
)


def test_loopkit_note_is_one_line_under_operator_notes_and_every_other_byte_stays(
    tmp_path: Path, _isolated_state: Path
) -> None:
    repo = _repo(tmp_path, CRLF_NO_FINAL)
    inbox = Inbox.open([repo])
    before = _one(inbox)

    done = _noted(inbox, before)

    assert (repo / "BLOCKED.md").read_bytes() == CRLF_NO_FINAL + (
        b"\r\n\r\n## Operator notes\r\n- 2026-12-03, Ada: I add the secret to CI, you wait for me"
    )  # BOM, CRLF and the missing final newline kept; nothing else moved
    assert done.entry is not None and done.waiting is None and done.ran is None
    assert not (repo / "PROMPT.md").exists() and not (repo / "IMPLEMENTATION_PLAN.md").exists()
    # The same open block, read again: its note as such, not an unknown extra section.
    after = _one(Inbox.open([repo]))
    assert after.id == before.id and after.fingerprint != before.fingerprint
    assert after.question == "Which CI token?" and len(after.choices) == 2
    assert after.notes == ("2026-12-03, Ada: I add the secret to CI, you wait for me",)
    assert after.extra == () and after.problems == ()
    assert _state(after) == "waiting on you"


def test_loopkit_second_note_goes_under_the_first_even_with_a_section_after_it(
    tmp_path: Path, _isolated_state: Path
) -> None:
    text = b"## Question\nWhich?\n\n## Operator notes\n- 2026-12-01, Bo: asked legal\n\n## Log\nx\n"
    repo = _repo(tmp_path, text)
    inbox = Inbox.open([repo])
    _noted(inbox, _one(inbox), "legal said yes; adding it")
    assert (repo / "BLOCKED.md").read_bytes() == text.replace(
        b"asked legal\n", b"asked legal\n- 2026-12-03, Ada: legal said yes; adding it\n"
    )
    assert _one(Inbox.open([repo])).notes == (
        "2026-12-01, Bo: asked legal",
        "2026-12-03, Ada: legal said yes; adding it",
    )


def test_loopkit_note_keeps_guard_stopping_the_loop_and_undo_restores_every_byte(
    tmp_path: Path, _isolated_state: Path
) -> None:
    repo = _repo(tmp_path, CRLF_NO_FINAL)
    inbox = Inbox.open([repo])
    done = _noted(inbox, _one(inbox))

    guard = _hitl("guard", str(repo))
    assert guard.returncode == 2, guard.stderr  # still blocked: the loop stays stopped

    undo_answer(done.entry, "Ada")
    assert (repo / "BLOCKED.md").read_bytes() == CRLF_NO_FINAL
    [entry] = journal.newest_first()
    assert entry.undone


def test_a_note_refuses_placeholders_empty_text_and_a_changed_block(
    tmp_path: Path, _isolated_state: Path
) -> None:
    repo = _repo(tmp_path, b"## Question\nWhich?\n")
    inbox = Inbox.open([repo])
    block = _one(inbox)
    with pytest.raises(UsageError, match="empty"):
        plan_note(inbox, block, "  ", "Ada", WHEN)
    with pytest.raises(UsageError, match="TBD"):
        plan_note(inbox, block, "TBD", "Ada", WHEN)
    (repo / "BLOCKED.md").write_bytes(b"## Question\nSomething else?\n")
    with pytest.raises(StaleError):
        plan_note(inbox, block, NOTE, "Ada", WHEN)
    assert (repo / "BLOCKED.md").read_bytes() == b"## Question\nSomething else?\n"


# -- agenticloop: its own "keep blocked + note" transition ------------------------------------


def test_agenticloop_note_is_its_keep_transition_status_unchanged(
    billing: Path, _isolated_state: Path
) -> None:
    inbox = Inbox.open([billing])
    block = next(b for b in inbox.blocks.values() if b.id.endswith("T-007"))
    old = Path(block.path).read_bytes()

    done = _noted(inbox, block)

    new = Path(block.path).read_bytes()
    line = b"- 2026-12-03: Note from Ada (still blocked): I add the secret to CI, you wait for me"
    assert new.count(line) == 1
    # Only the note's line was added: every byte of the old file is there, in order.
    added = new.replace(line + b"\n", b"", 1)
    assert added == old
    again = next(b for b in Inbox.open([billing]).blocks.values() if b.id == block.id)
    assert again.state == "blocked" and again.question == block.question
    assert again.notes == ("2026-12-03, Note from Ada (still blocked): " + NOTE,)
    assert _state(again) == "waiting on you"
    undo_answer(done.entry, "Ada")
    assert Path(block.path).read_bytes() == old


# -- GitHub: a comment, the label kept ----------------------------------------------------------

MARKER = (
    "Blocked (credentials): the deploy needs CI_TOKEN.\nNeeded: a token in the CI secrets.\n\n"
    "AGENT_TASK_STATUS: blocked\nAGENT_BLOCK_CATEGORY: credentials\n"
)


def _issue_comments(*extra: dict) -> tuple[dict, list[dict]]:
    issue = {
        "number": 7,
        "title": "Deploy",
        "body": "",
        "state": "open",
        "labels": [{"name": "Blocked"}],
        "html_url": "https://github.com/acme/shop/issues/7",
        "created_at": "2026-11-01T00:00:00Z",
    }
    marker = {
        "id": 1,
        "body": MARKER,
        "user": {"login": "loop-bot"},
        "author_association": "NONE",
        "created_at": "2026-11-02T00:00:00Z",
    }
    return issue, [marker, *extra]


def test_github_note_is_one_comment_and_the_label_stays() -> None:
    src = gh.GithubSource(repo="acme/shop")
    issue, comments = _issue_comments()
    block = gh.build_block(src, "acme/shop", issue, comments, "loop-bot")
    assert block is not None and block.notes == ()

    plan = GithubBackend([src]).plan_note(block, NOTE, "Ada", WHEN)

    assert [a.kind for a in plan.remote] == ["comment"]  # no label removed
    body = plan.remote[0].data["body"]
    assert body == f"{NOTE}\n\n— Ada, via hitl\n"
    assert plan.hint is None
    # Read back after it is posted: still blocked, waiting on the operator, with the note.
    posted = {
        "id": 2,
        "body": body,
        "user": {"login": "ada"},
        "author_association": "OWNER",
        "created_at": "2026-12-03T11:00:00Z",
    }
    issue, comments = _issue_comments(posted)
    again = gh.build_block(src, "acme/shop", issue, comments, "loop-bot")
    assert again is not None and again.state == "blocked"
    assert again.notes == (f"2026-12-03, {NOTE}",)
    assert _state(again) == "waiting on you"


# -- hitl's own asks: a "notes" line, read by check_answer while the ask stays open -------------


def test_ask_note_is_one_line_the_agent_reads_while_the_ask_stays_open(
    tmp_path: Path, _isolated_state: Path
) -> None:
    repo = tmp_path / "shop"
    (repo / ".git").mkdir(parents=True)
    asker = Asker(repo)
    ask = asker.ask("Which CI token?", ["Org token", "Skip deploy"])
    path = repo / ".hitl" / "asks" / f"{ask.id}.json"
    old = path.read_bytes()
    inbox = Inbox.open([repo])

    done = _noted(inbox, _one(inbox))

    new = path.read_bytes()
    at = WHEN.isoformat()
    line = f' "notes": [{{"note":"{NOTE}","by":"Ada","at":"{at}"}}],\n'.encode()
    status = b' "status": "open",\n'
    assert new == old.replace(status, status + line)  # one line added, below the status
    result = asker.check(ask.id)
    assert result["status"] == "waiting" and result["answer"] is None
    assert result["notes"] == [{"note": NOTE, "by": "Ada", "at": at}]
    assert fmt.parse(path.read_bytes()).status == "open"  # check_answer handed nothing over
    block = _one(Inbox.open([repo]))
    assert block.notes == (f"2026-12-03, Ada: {NOTE}",)
    # A second note replaces that one line with the longer list.
    _noted(Inbox.open([repo]), block, "done in 10 min")
    assert [n["note"] for n in fmt.parse(path.read_bytes()).notes] == [NOTE, "done in 10 min"]
    assert len(path.read_bytes().splitlines()) == len(new.splitlines())
    undo_answer(None, "Ada")
    undo_answer(done.entry, "Ada")
    assert path.read_bytes() == old


def test_a_format_without_a_place_for_notes_refuses_in_one_line(tmp_path: Path) -> None:
    from hitl_tui.sources.base import Source

    repo = _repo(tmp_path, b"## Question\nWhich?\n")
    block = _one(Inbox.open([repo]))
    with pytest.raises(HitlError, match="take no note that keeps them open"):
        Source().plan_note(block, NOTE, "Ada", WHEN)


# -- the command: `hitl note` -------------------------------------------------------------------


def test_hitl_note_dry_run_json_and_list_shows_it_waiting_on_you(
    tmp_path: Path, _isolated_state: Path
) -> None:
    repo = _repo(tmp_path, b"## Question\nWhich CI token?\n")
    dry = _hitl("note", "shop", NOTE, str(tmp_path), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "+## Operator notes\n" in dry.stdout
    assert (repo / "BLOCKED.md").read_bytes() == b"## Question\nWhich CI token?\n"

    done = _hitl("note", "shop", NOTE, str(tmp_path), "--json", "--operator", "Ada")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["entry"] and data["restarted"] is False
    written = (repo / "BLOCKED.md").read_text()
    assert written.endswith(f"\n## Operator notes\n- {_today()}, Ada: {NOTE}\n")

    listed = _hitl("list", str(tmp_path))
    assert "[waiting on you] Which CI token? — your note:" in listed.stdout
    assert NOTE in listed.stdout
    as_json = json.loads(_hitl("list", str(tmp_path), "--json").stdout)
    assert as_json[0]["notes"] == [f"{_today()}, Ada: {NOTE}"]
    assert _hitl("guard", str(repo)).returncode == 2
    undone = _hitl("undo", data["entry"])
    assert undone.returncode == 0, undone.stderr
    assert (repo / "BLOCKED.md").read_bytes() == b"## Question\nWhich CI token?\n"

    empty = _hitl("note", "shop", " ", str(tmp_path))
    assert empty.returncode == 2 and "the note is empty" in empty.stderr


def _today() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d")


# -- the app: `w` -------------------------------------------------------------------------------


async def test_w_asks_for_the_note_previews_it_and_writes_it_the_block_stays(
    tmp_path: Path, _isolated_state: Path
) -> None:
    root = demo_workspace(tmp_path)
    shop = root / "shop"
    old = (shop / "BLOCKED.md").read_bytes()
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await select(pilot, app, "shop")
        await pilot.press("w")
        await pilot.pause()
        assert isinstance(app.screen, TextAnswerScreen)
        await pilot.press(*"adding the secret")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, PreviewScreen)
        assert "+## Operator notes" in app.screen.plan.diff()
        await pilot.press("y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        blocks = app.query_one(BlockList)
        current = blocks.current
        assert current is not None and current.id == "shop"  # still listed, still highlighted
        assert current.notes == ("2026-11-29, Ada: adding the secret",)
        assert _state(current) == "waiting on you"
        assert blocks.is_new is not None and not blocks.is_new(current)  # the note is yours
        row = blocks.render_line(blocks.cursor_row - blocks.scroll_offset.y).text
        assert "waiting on you" in row and "✎ 2026-11-29, Ada: adding the secret — " in row
        assert any(n.title == "Noted" for n in app._notifications)
    new = (shop / "BLOCKED.md").read_bytes()
    assert new.startswith(old) and new[len(old) :].endswith(
        b"## Operator notes\n- 2026-11-29, Ada: adding the secret\n"
    )
    assert not (shop / "PROMPT.md").read_bytes().count(b"adding the secret")


def test_a_note_is_no_answer_the_block_is_never_asked_again_of_itself(
    tmp_path: Path, _isolated_state: Path
) -> None:
    """The note is journaled (undoable) but answers nothing: the journal's answer index, which
    says "asked again" and offers `p`, does not take it for an answer of the block it kept
    open (the app showed ↻ "You answered this 0s ago" on the block just noted)."""
    from hitl_tui.loops.similarity import AnswerIndex

    repo = _repo(tmp_path, CRLF_NO_FINAL)
    inbox = Inbox.open([repo])
    _noted(inbox, _one(inbox))
    inbox = Inbox.open([repo])
    index = AnswerIndex.from_journal()
    assert index.asked_again(_one(inbox)) is None
    assert index.earlier(_one(inbox)) == []


@pytest.mark.parametrize(
    "blocked",
    [
        # A heading the parser reads as text: the note would become choice C.
        b"# Blocked\n\n## Question\nWhich DB?\n\n## Choices\n- A) pg\n- B) mysql\n"
        b"##### Operator notes\n",
        # An unclosed code fence at the end: the note would be part of the log.
        b"# Blocked\n\n## Question\nWhich DB?\n\n## Choices\n- A) pg\n\n## Context\n```\nlog\n",
    ],
    ids=["a level-5 heading", "an unclosed fence"],
)
def test_a_note_the_file_would_not_read_back_as_a_note_is_refused(
    tmp_path: Path, blocked: bytes
) -> None:
    repo = _repo(tmp_path, blocked)
    inbox = Inbox.open([repo])
    with pytest.raises(HitlError, match="would not read the note back"):
        _noted(inbox, _one(inbox))
    assert (repo / "BLOCKED.md").read_bytes() == blocked
