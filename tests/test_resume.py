"""Did the loop resume? The signs each backend reads from real files (a real `git` repository,
packed refs, a worktree's `.git` file, no `.git`), the records' states and deadlines in
`resume.json` (corrupt, shared by two processes), and the watcher seeing a commit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hitl_tui.answers.apply import apply_plan
from hitl_tui.answers.service import apply_answer, plan_answer
from hitl_tui.inbox.diagnostics import inotify_usage
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.loops.resume import MAX_RECORDS, ResumeBook
from hitl_tui.model import Answer
from hitl_tui.sources.loopkit import gitref
from tests.conftest import FIXTURES
from tests.support.repos import git

GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="needs git")


def git_repo(path: Path, fixture: str = "loopkit-shop") -> Path:
    shutil.copytree(FIXTURES / fixture, path)
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "start")
    return path


def commit(repo: Path, name: str = "work.txt") -> str:
    (repo / name).write_text(f"{name} {os.urandom(4).hex()}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"add {name}")
    return git(repo, "rev-parse", "HEAD")


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def answered(repo: Path, book: ResumeBook, choice: int = 1):
    """Answer the repo's one block through the domain (as the app does): the record noted."""
    inbox = Inbox.open([repo])
    inbox.use_resumes(book)
    [block] = inbox.blocks.values()
    plan = plan_answer(inbox, block, Answer(choice=block.choices[choice]))
    done = apply_answer(inbox, plan)
    [record] = book.open()
    assert record.entry == done.entry and record.entry  # the journal entry of this answer
    return inbox, record


# -- reading HEAD -------------------------------------------------------------------------------


@needs_git
def test_head_follows_commits_packed_refs_and_detached(tmp_path: Path):
    repo = git_repo(tmp_path / "shop")
    assert gitref.head(repo) == git(repo, "rev-parse", "HEAD")
    new = commit(repo)
    assert gitref.head(repo) == new
    git(repo, "pack-refs", "--all")
    assert not (repo / ".git/refs/heads/main").exists()  # only packed-refs has it now
    assert gitref.head(repo) == new
    git(repo, "checkout", "-q", "--detach")
    assert (repo / ".git/HEAD").read_text().strip() == new
    assert gitref.head(repo) == new
    assert gitref.watch_dirs(repo) == [repo / ".git", repo / ".git/logs"]


@needs_git
def test_head_of_a_worktree_reads_its_git_file(tmp_path: Path):
    repo = git_repo(tmp_path / "shop")
    tree = tmp_path / "shop-wt"
    git(repo, "worktree", "add", "-q", "-b", "side", str(tree))
    assert (tree / ".git").is_file()
    assert gitref.head(tree) == git(tree, "rev-parse", "HEAD")
    new = commit(tree)
    assert gitref.head(tree) == new and gitref.head(repo) != new
    gitdir = Path(git(tree, "rev-parse", "--absolute-git-dir"))
    assert gitref.watch_dirs(tree) == [gitdir, gitdir / "logs"]


@needs_git
def test_no_git_unborn_and_hostile_git_files(tmp_path: Path):
    plain = tmp_path / "plain"
    plain.mkdir()
    assert gitref.head(plain) is None and gitref.watch_dirs(plain) == []
    unborn = tmp_path / "unborn"
    unborn.mkdir()
    git(unborn, "init", "-q")
    assert gitref.head(unborn) is None  # no commit yet
    for text in (b"gitdir: /nonexistent\n", b"\xff\xfe" * 5000, b"gitdir: \x00\n", b""):
        odd = tmp_path / f"odd{len(text)}"
        odd.mkdir()
        (odd / ".git").write_bytes(text)
        assert gitref.head(odd) is None and gitref.watch_dirs(odd) == []
    escape = tmp_path / "escape"
    (escape / ".git").mkdir(parents=True)
    (escape / ".git/HEAD").write_text("ref: refs/../../../etc/passwd\n")
    assert gitref.head(escape) is None
    looping = tmp_path / "looping"
    (looping / ".git/refs/heads").mkdir(parents=True)
    (looping / ".git/HEAD").write_text("ref: refs/heads/a\n")
    (looping / ".git/refs/heads/a").write_text("ref: refs/heads/a\n")
    assert gitref.head(looping) is None


# -- loopkit signs ------------------------------------------------------------------------------


@needs_git
def test_loopkit_waits_then_a_commit_resumes_it(tmp_path: Path):
    repo = git_repo(tmp_path / "shop")
    book = ResumeBook(tmp_path / "resume.json")
    _inbox, record = answered(repo, book)
    assert record.state == "waiting" and record.block_id == "shop"
    assert record.answered.startswith("B) Keep invoices")
    assert record.deadline - record.answered_at == timedelta(minutes=10)  # no [[loop]]: 10m
    # What hitl wrote itself is no sign: PROMPT.md as the answer left it, HEAD unmoved.
    assert book.check() == [] and book.get(record.id).state == "waiting"
    new = commit(repo)
    [done] = book.check()
    assert done.state == "resumed" and done.how == f"new commit {new[:7]}"
    assert book.open() == [] and book.get(record.entry).resumed_at is not None
    assert [r.id for r in book.recent(repo)] == [record.id]  # kept for status and history


@needs_git
@pytest.mark.parametrize(
    ("touch", "how"),
    [
        ("PROMPT.md", "PROMPT.md changed by the loop"),
        ("IMPLEMENTATION_PLAN.md", "IMPLEMENTATION_PLAN.md changed by the loop"),
        ("BLOCKED.md", "asked again (new BLOCKED.md)"),
    ],
)
def test_loopkit_files_the_loop_changed(tmp_path: Path, touch: str, how: str):
    repo = git_repo(tmp_path / "shop")
    book = ResumeBook(tmp_path / "resume.json")
    _inbox, _record = answered(repo, book)
    original = (FIXTURES / "loopkit-shop" / "BLOCKED.md").read_bytes()
    path = repo / touch
    path.write_bytes(original if touch == "BLOCKED.md" else path.read_bytes() + b"- more\n")
    [done] = book.observe([path])
    assert (done.state, done.how) == ("resumed", how)


def test_loopkit_without_git_still_sees_its_files(tmp_path: Path):
    repo = tmp_path / "shop"
    shutil.copytree(FIXTURES / "loopkit-shop", repo)  # no .git at all
    book = ResumeBook(tmp_path / "resume.json")
    _inbox, record = answered(repo, book)
    assert record.signs["head"] is None
    assert book.watch_dirs() == [repo]  # nothing more to watch
    assert book.check() == []
    (repo / "PROMPT.md").write_text("rewritten by the loop\n")
    assert [r.how for r in book.check()] == ["PROMPT.md changed by the loop"]


# -- agenticloop signs --------------------------------------------------------------------------


def _billing(tmp_path: Path) -> Path:
    repo = tmp_path / "billing"
    shutil.copytree(FIXTURES / "agenticloop-billing", repo)
    (repo / ".git").mkdir()
    return repo


def _one_task(repo: Path, book: ResumeBook):
    inbox = Inbox.open([repo])
    inbox.use_resumes(book)
    block = next(b for b in inbox.sorted_blocks() if b.source == "agenticloop")
    resume = next(c for c in block.choices if c.kind != "keep" and not c.needs_text)
    apply_answer(inbox, plan_answer(inbox, block, Answer(choice=resume)))
    [record] = book.open()
    return block, record


def test_agenticloop_status_moving_on_resumes(tmp_path: Path):
    repo = _billing(tmp_path)
    book = ResumeBook(tmp_path / "resume.json")
    block, record = _one_task(repo, book)
    path = Path(record.path)
    assert record.signs["status"] == "agent-ready" and record.task_id == block.meta["task_id"]
    assert book.check() == []  # the status hitl set is no sign
    assert book.watch_dirs() == [path.parent]
    text = path.read_text()
    path.write_text(text.replace("status: agent-ready", "status: in_progress", 1))
    [done] = book.observe([path])
    assert done.how == "status agent-ready → in_progress"


def test_agenticloop_a_note_by_the_loop_resumes(tmp_path: Path):
    repo = _billing(tmp_path)
    book = ResumeBook(tmp_path / "resume.json")
    _block, record = _one_task(repo, book)
    path = Path(record.path)
    path.write_text(path.read_text() + "\n- 2026-03-01: agent: picked it up\n")
    [done] = book.observe([path])
    assert done.how == "the task file changed (a note by the loop)"


# -- states, deadlines, the file ----------------------------------------------------------------


def _noted(tmp_path: Path, clock: Clock, within: timedelta = timedelta(minutes=10)):
    repo = tmp_path / "shop"
    shutil.copytree(FIXTURES / "loopkit-shop", repo)
    inbox = Inbox.open([repo])
    [block] = inbox.blocks.values()
    plan = plan_answer(inbox, block, Answer(choice=block.choices[0]))
    apply_plan(plan)
    book = ResumeBook(tmp_path / "resume.json", clock=clock)
    return repo, book, book.note(block, plan, "entry-1", within)


def test_a_deadline_turns_it_not_resumed_and_a_restart_waits_again(tmp_path: Path):
    clock = Clock()
    repo, book, _record = _noted(tmp_path, clock, timedelta(minutes=5))
    clock.now += timedelta(minutes=4, seconds=59)
    assert book.due() == []
    clock.now += timedelta(seconds=1)
    [late] = book.due()
    assert late.state == "not-resumed" and book.open() == [late]
    assert late.as_block().summary.startswith("not resumed · answered: A) Cascade")
    clock.now += timedelta(minutes=1)
    again = book.restarted("shop")  # by block id, as `hitl restart shop` names it
    assert again is not None and again.state == "waiting" and again.restarts == 1
    assert again.deadline == clock.now + timedelta(minutes=5)
    clock.now = again.deadline
    [late] = book.check()  # check() includes the deadlines
    assert late.state == "not-resumed" and late.restarts == 1
    # The loop may still act later: a not-resumed answer turns resumed.
    (repo / "PROMPT.md").write_text("the loop moved on\n")
    [done] = book.check()
    assert done.state == "resumed" and done.how == "PROMPT.md changed by the loop"
    assert book.restarted("no-such-block") is None


def test_as_block_is_a_row_of_its_own(tmp_path: Path):
    clock = Clock()
    repo, _book, record = _noted(tmp_path, clock)
    row = record.as_block()
    assert row.repo == repo and row.id == "shop" and row.state == "waiting"
    assert row.path == "waiting:entry-1" and row.path != record.path
    assert not row.answerable and row.meta["waiting"] is record
    assert row.summary.startswith("waiting for the loop · answered: A) Cascade delete")
    assert row.since == record.answered_at


def test_dismiss_and_a_new_answer_to_the_same_block(tmp_path: Path):
    clock = Clock()
    repo, book, record = _noted(tmp_path, clock)
    assert book.get("loopkit:" + str(repo / "BLOCKED.md")) == record  # by key
    book.dismiss("entry-1")
    assert book.open() == [] and book.get("entry-1") is None
    assert ResumeBook(book.path, clock=clock).open() == []  # saved


def test_old_records_are_forgotten_and_the_count_is_bounded(tmp_path: Path):
    clock = Clock()
    _repo, book, record = _noted(tmp_path, clock)
    clock.now += timedelta(days=8)
    book.due()  # any write prunes
    assert book.recent(since=timedelta(days=30)) == []
    rows = [
        dict(record.to_json(), entry=f"e{i}", key=f"k{i}", state="resumed") for i in range(2100)
    ]
    book.path.write_text(json.dumps({"format": 1, "records": rows}))
    clock.now = record.answered_at
    book.dismiss("e0")
    assert len(json.loads(book.path.read_text())["records"]) == MAX_RECORDS


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"\xff\xfe\x00", b'{"format": 1, "records": 7}', b"[]", b'{"format": 99}'],
)
def test_a_corrupt_file_hides_nothing_and_is_replaced(tmp_path: Path, capsys, content: bytes):
    path = tmp_path / "resume.json"
    path.write_bytes(content)
    clock = Clock()
    book = ResumeBook(path, clock=clock)
    assert book.open() == [] and book.watch_dirs() == [] and book.check() == []
    assert capsys.readouterr().err.count("hitl: ignored") == 1
    repo = tmp_path / "shop"
    shutil.copytree(FIXTURES / "loopkit-shop", repo)
    inbox = Inbox.open([repo])
    [block] = inbox.blocks.values()
    book.note(block, plan_answer(inbox, block, Answer(choice=block.choices[0])), "e", timedelta(1))
    assert [r.id for r in ResumeBook(path, clock=clock).open()] == ["e"]


def test_one_bad_record_leaves_the_others(tmp_path: Path, capsys):
    clock = Clock()
    _repo, book, record = _noted(tmp_path, clock)
    data = json.loads(book.path.read_text())
    data["records"].insert(0, {"key": 3, "state": "waiting"})
    data["records"].append(dict(record.to_json(), entry="e2", deadline="yesterday"))
    book.path.write_text(json.dumps(data))
    again = ResumeBook(book.path, clock=clock)
    assert [r.id for r in again.open()] == ["entry-1"]
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "skipped a record (" in err and "the others are read" in err


NOTER = textwrap.dedent(
    """
    import sys
    from dataclasses import replace
    from datetime import timedelta
    from pathlib import Path
    from hitl_tui.answers.service import plan_answer
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.model import Answer
    from hitl_tui.loops.resume import ResumeBook

    repo, path, tag = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    inbox = Inbox.open([repo])
    [block] = inbox.blocks.values()
    plan = plan_answer(inbox, block, Answer(choice=block.choices[0]))
    book = ResumeBook(path)
    for i in range(25):  # 25 blocks each, noted one by one (each a locked read-change-write)
        one = replace(block, id=f"{tag}-{i}", path=repo / f"{tag}-{i}.md")
        book.note(one, plan, f"{tag}-{i}", timedelta(minutes=10))
    """
)


def test_two_processes_noting_at_once_lose_nothing(tmp_path: Path):
    path = tmp_path / "resume.json"
    procs = []
    for tag in ("a", "b"):
        repo = tmp_path / tag / "shop"
        shutil.copytree(FIXTURES / "loopkit-shop", repo)
        procs.append(subprocess.Popen([sys.executable, "-c", NOTER, str(repo), str(path), tag]))
    assert [p.wait(60) for p in procs] == [0, 0]
    records = ResumeBook(path).recent()
    wanted = sorted(f"{tag}-{i}" for tag in "ab" for i in range(25))
    assert sorted(r.id for r in records) == wanted  # neither wrote over the other's rows


# -- the watcher --------------------------------------------------------------------------------


@needs_git
@pytest.mark.skipif(
    not sys.platform.startswith("linux") or inotify_usage() is None,
    reason="counts inotify through /proc (Linux)",
)
async def test_a_waiting_repo_gets_its_git_folders_watched_and_a_commit_arrives(tmp_path: Path):
    import asyncio
    import time

    from tests.test_watch import Watcher

    shop = git_repo(tmp_path / "loops" / "shop")
    other = git_repo(tmp_path / "loops" / "other")
    inbox = Inbox.open([shop, other])
    book = ResumeBook(tmp_path / "resume.json")
    inbox.use_resumes(book)
    assert sorted(inbox.watch_dirs()) == sorted([shop, other])  # nothing waits: as before
    async with Watcher(inbox) as w:
        assert len(w.dirs) == 2 and w.held().watches == 2
        [block] = [b for b in inbox.blocks.values() if b.repo == shop]
        plan = plan_answer(inbox, block, Answer(choice=block.choices[0]))
        await asyncio.to_thread(apply_answer, inbox, plan)  # as the app applies it
        # The answer's own writes in the repo make a batch; the watch restarts on the new set.
        deadline = time.monotonic() + 5
        while len(w.dirs) != 4:
            assert time.monotonic() < deadline, w.dirs
            await asyncio.sleep(0.02)
        await w.watching()
        assert sorted(w.dirs) == sorted([shop, other, shop / ".git", shop / ".git/logs"])
        assert w.held().watches == 4  # 3 for the waiting repo, 1 for the other
        began = time.monotonic()
        new = await asyncio.to_thread(commit, shop)
        delta = await w.expect(lambda d: bool(d.waiting))
        assert time.monotonic() - began < 2.5
        [done] = delta.waiting
        assert (done.block_id, done.state, done.how) == ("shop", "resumed", f"new commit {new[:7]}")
        # Resumed: its git folders are no longer watched.
        deadline = time.monotonic() + 5
        while len(w.dirs) != 2:
            assert time.monotonic() < deadline, w.dirs
            await asyncio.sleep(0.02)
        await w.watching()
        assert w.held().watches == 2


async def test_a_new_block_in_a_waiting_repo_resolves_it_as_asked_again(tmp_path: Path):
    repo = tmp_path / "shop"
    shutil.copytree(FIXTURES / "loopkit-shop", repo)
    inbox = Inbox.open([repo])
    book = ResumeBook(tmp_path / "resume.json")
    inbox.use_resumes(book)
    [block] = inbox.blocks.values()
    apply_answer(inbox, plan_answer(inbox, block, Answer(choice=block.choices[0])))
    assert not inbox.handle([repo / "BLOCKED.md"]).waiting  # the answer's own removal
    shutil.copy(FIXTURES / "loopkit-shop" / "BLOCKED.md", repo / "BLOCKED.md")
    delta = inbox.handle([repo / "BLOCKED.md"])
    assert [b.id for b in delta.added] == ["shop"] and bool(delta)
    [done] = delta.waiting
    assert done.state == "resumed" and done.how.startswith("asked again")


@needs_git
def test_an_answer_waiting_in_another_workspace_costs_no_watch_here(tmp_path: Path):
    shop = git_repo(tmp_path / "a" / "shop")
    other = git_repo(tmp_path / "b" / "other")
    book = ResumeBook(tmp_path / "resume.json")
    answered(shop, book)
    here = Inbox.open([other])
    here.use_resumes(book)
    assert here.watch_dirs() == [other]
    commit(shop)
    assert here.check_waiting().waiting == []  # not this inbox's to report
    # The look was made (the file says resumed), only not reported in the other inbox.
    assert book.get("shop").state == "resumed" and book.get("shop").how.startswith("new commit")


def test_the_watcher_leaves_remote_answers_to_hitl_status(tmp_path: Path):
    """`check(remote=False)` (the watcher's look at start-up) never asks a remote backend,
    which would read over the network; `check()` (hitl status) does."""
    from dataclasses import replace

    from hitl_tui.model import Plan
    from hitl_tui.sources.base import Source

    asked: list[str] = []

    class Tracker(Source):
        name = "tracker"
        remote = True

        def resumed(self, waiting) -> str | None:
            asked.append(waiting.block_id)
            return "new comment by loop-bot"

    repo = tmp_path / "shop"
    shutil.copytree(FIXTURES / "loopkit-shop", repo)
    [block] = Inbox.open([repo]).blocks.values()
    issue = replace(block, source="tracker", repo="acme/shop", path="https://x/1", id="acme#1")
    book = ResumeBook(tmp_path / "resume.json", sources=[Tracker()])
    book.note(issue, Plan(issue, Answer(), (), {}, ""), None, timedelta(minutes=10))
    assert book.check(remote=False) == [] and asked == []
    [done] = book.check()
    assert asked == ["acme#1"] and done.how == "new comment by loop-bot"
    assert done.as_block().repo == "acme/shop"  # a remote block's repo stays a name


def test_a_fifo_planted_as_head_or_a_ref_reads_as_no_commit_at_once(tmp_path: Path) -> None:
    """An agent can make `.git/HEAD`, a ref or packed-refs a FIFO: reading it must not wait
    for a writer (the watcher's thread would hang), it is simply no commit."""
    import os
    import threading

    from hitl_tui.sources.loopkit import gitref

    repo = tmp_path / "repo"
    (repo / ".git" / "refs" / "heads").mkdir(parents=True)
    os.mkfifo(repo / ".git" / "HEAD")
    result: list = []
    reader = threading.Thread(target=lambda: result.append(gitref.head(repo)), daemon=True)
    reader.start()
    reader.join(5)
    assert not reader.is_alive() and result == [None]
    (repo / ".git" / "HEAD").unlink()
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    os.mkfifo(repo / ".git" / "packed-refs")
    os.mkfifo(repo / ".git" / "refs" / "heads" / "main")
    result.clear()
    reader = threading.Thread(target=lambda: result.append(gitref.head(repo)), daemon=True)
    reader.start()
    reader.join(5)
    assert not reader.is_alive() and result == [None]
