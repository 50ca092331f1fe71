"""The one answer service (`answers.service`, issue 24): what it returns is what every client
renders (the CLI prints it, the app toasts it), so it carries everything they need, typed: the
lines done, the journal entry, the answer waiting for its loop, the restart's `Ran`, the hint.
Real files, a real journal, real restart processes."""

from __future__ import annotations

import shutil
import sys
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

from hitl_tui import journal
from hitl_tui.answers.service import Answered, answer, plan_answer, restart_for
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.loops.commands import Loop
from hitl_tui.loops.resume import ResumeBook
from hitl_tui.model import Answer
from tests.hostile_cases import SHOP


def _inbox(tmp_path: Path, name: str = "shop") -> Inbox:
    repo = tmp_path / "loops" / name
    shutil.copytree(SHOP, repo)
    (repo / ".git").mkdir()
    return Inbox.open([repo])


def _loop(tmp_path: Path, code: str) -> Loop:
    return Loop(match=(str(tmp_path / "loops" / "*"),), restart=(sys.executable, "-c", code))


def test_one_result_says_what_was_written_journaled_noted_and_restarted(
    tmp_path: Path, _isolated_state: Path
) -> None:
    inbox = _inbox(tmp_path)
    loop = _loop(tmp_path, "import sys; sys.exit(0)")
    inbox.use_resumes(ResumeBook.for_state(), (loop,))
    [block] = inbox.blocks.values()
    plan = plan_answer(inbox, block, Answer(choice=block.choices[0], operator="Ada"))

    done = answer(inbox, plan, (loop,))

    assert isinstance(done, Answered)
    [entry] = journal.newest_first()
    assert done.entry == entry.id  # the journal's own id, not an attribute riding on a list
    assert done.done and all(isinstance(line, str) for line in done.done)
    assert done.waiting is not None and done.waiting.entry == entry.id
    assert done.ran is not None and done.ran.ok and done.restarted
    assert done.hint is None  # the loop was restarted: the source's "restart it" hint is moot
    with pytest.raises(FrozenInstanceError):
        done.entry = "other"  # type: ignore[misc]


def test_a_failed_restart_is_in_the_result_and_on_the_answer_waiting(
    tmp_path: Path, _isolated_state: Path
) -> None:
    inbox = _inbox(tmp_path)
    loop = _loop(tmp_path, "import sys; sys.exit(3)")
    book = ResumeBook.for_state()
    inbox.use_resumes(book, (loop,))
    [block] = inbox.blocks.values()
    plan = plan_answer(inbox, block, Answer(choice=block.choices[0], operator="Ada"))

    done = answer(inbox, plan, (loop,))

    assert done.ran is not None and not done.ran.ok and done.ran.problem == "exit 3"
    assert done.restarted and done.hint is None
    assert done.waiting is not None and done.waiting.state == "restart-failed"
    [record] = book.open()
    assert record.state == "restart-failed" and record.entry == done.entry


def test_without_a_restart_the_hint_is_the_sources_and_nothing_ran(
    tmp_path: Path, _isolated_state: Path
) -> None:
    inbox = _inbox(tmp_path)
    inbox.use_resumes(ResumeBook.for_state(), ())
    [block] = inbox.blocks.values()
    plan = plan_answer(inbox, block, Answer(choice=block.choices[0], operator="Ada"))
    assert restart_for((), block) is None

    done = answer(inbox, plan, ())

    assert done.ran is None and not done.restarted
    assert plan.hint and done.hint == plan.hint
    assert done.waiting is not None and done.waiting.entry == done.entry


def test_a_refused_restart_runs_nothing_and_keeps_the_hint(
    tmp_path: Path, _isolated_state: Path
) -> None:
    inbox = _inbox(tmp_path, "shop\x1b[2J")
    loop = Loop(match=(str(tmp_path / "loops" / "*"),), restart=("echo", "{name}"))
    inbox.use_resumes(ResumeBook.for_state(), (loop,))
    [block] = inbox.blocks.values()
    restart = restart_for((loop,), block)
    assert restart is not None and restart.command is None and restart.refused
    plan = plan_answer(inbox, block, Answer(choice=block.choices[0], operator="Ada"))

    done = answer(inbox, plan, (loop,))

    assert done.ran is not None and done.ran.refused and not done.restarted
    assert plan.hint and done.hint == plan.hint
