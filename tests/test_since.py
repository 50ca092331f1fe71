"""Issue 12: `since` is when the block began, not when its file was last touched.

For BLOCKED.md: when hitl first saw this block at this path (remembered in the state folder),
or the file's mtime the first time hitl ever sees it. For a task file: the date of the note
that blocked it (or when hitl first saw it, if later that same day). Through real subprocesses
(`hitl list`, `answer`, `undo`), and in-process for the parse cache.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hitl_tui.inbox import parsecache
from hitl_tui.inbox.inbox import Inbox
from tests.hostile_cases import SHOP, hitl_env, run_hitl

FIXTURES = Path(__file__).resolve().parent / "fixtures"
DAY = 86400


def _loopkit(dest: Path, age: float) -> Path:
    shutil.copytree(SHOP, dest)
    (dest / ".git").mkdir()
    stamp = time.time() - age
    os.utime(dest / "BLOCKED.md", (stamp, stamp))
    return dest


def _listed(*paths: Path) -> dict[str, str]:
    done = run_hitl("list", "--json", *paths)
    assert done.returncode == 0, done.stderr
    assert done.stderr == b"", done.stderr
    return {b["id"]: b["since"] for b in json.loads(done.stdout)}


def _order(root: Path) -> list[tuple[str, str]]:
    """(id, age) of each line of `hitl list`, in its order."""
    done = run_hitl("list", root)
    assert done.returncode == 0, done.stderr
    return [tuple(line.split()[:2]) for line in done.stdout.decode().splitlines()]


def test_touching_or_rewriting_blocked_md_keeps_its_age(tmp_path: Path) -> None:
    root = tmp_path / "loops"
    old = _loopkit(root / "old", 3 * DAY)
    _loopkit(root / "new", 1 * DAY)
    first = _listed(root)
    assert _order(root) == [("old", "3d"), ("new", "1d")]

    blocked = old / "BLOCKED.md"
    os.utime(blocked)  # the agent touches it
    assert _listed(root) == first
    blocked.write_bytes(blocked.read_bytes() + b"\n- D) One more idea\n")  # and rewrites it
    assert _listed(root) == first
    tmp = old / "BLOCKED.md.tmp"  # an atomic rewrite, as escalate does it
    tmp.write_bytes(blocked.read_bytes() + b"\nMore context.\n")
    tmp.replace(blocked)
    assert _listed(root) == first
    assert _order(root) == [("old", "3d"), ("new", "1d")]


def test_answer_then_undo_restores_the_original_since(tmp_path: Path) -> None:
    root = tmp_path / "loops"
    _loopkit(root / "old", 3 * DAY)
    _loopkit(root / "new", 1 * DAY)
    first = _listed(root)
    done = run_hitl("answer", "old", "--choice", "B", root)
    assert done.returncode == 0, done.stderr
    assert set(_listed(root)) == {"new"}
    undone = run_hitl("undo")
    assert undone.returncode == 0, undone.stderr
    assert _listed(root) == first
    assert _order(root) == [("old", "3d"), ("new", "1d")]


def test_a_new_block_after_an_answer_starts_a_new_age(tmp_path: Path) -> None:
    root = tmp_path / "loops"
    repo = _loopkit(root / "shop", 3 * DAY)
    text = (repo / "BLOCKED.md").read_bytes()
    _listed(root)
    assert run_hitl("answer", "shop", "--choice", "B", root).returncode == 0
    _listed(root)  # the block is gone: forgotten
    (repo / "BLOCKED.md").write_bytes(text)  # the loop's next question
    since = datetime.fromisoformat(_listed(root)["shop"])
    assert abs(since.timestamp() - time.time()) < 60


def _billing(root: Path) -> Path:
    repo = root / "billing"
    shutil.copytree(FIXTURES / "agenticloop-billing", repo)
    (repo / ".git").mkdir()
    return repo


def test_a_task_is_blocked_since_the_date_of_its_note(tmp_path: Path) -> None:
    root = tmp_path / "loops"
    repo = _billing(root)
    first = _listed(root)
    # T-007's blocking note is dated 2026-11-27, T-009's 2026-11-28 (the files are newer).
    assert first["billing/T-007"] == "2026-11-27T00:00:00+00:00"
    assert first["billing/T-009"] == "2026-11-28T00:00:00+00:00"
    # "Keep blocked, add a note": the task stays blocked, its file changes, its age does not.
    done = run_hitl("answer", "T-007", "--choice", "D", "--note", "Waiting for legal", root)
    assert done.returncode == 0, done.stderr
    assert "Waiting for legal" in (repo / ".agenticloop/tasks/T-007.md").read_text()
    assert _listed(root) == first


def test_a_task_blocked_today_is_blocked_since_hitl_first_saw_it(tmp_path: Path) -> None:
    root = tmp_path / "loops"
    repo = _billing(root)
    task = repo / ".agenticloop/tasks/T-009.md"
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    task.write_text(task.read_text().replace("- 2026-11-28: Blocked", f"- {today}: Blocked"))
    stamp = max(time.time() - 60, datetime.fromisoformat(today + "T00:00:00+00:00").timestamp())
    os.utime(task, (stamp, stamp))
    first = _listed(root)
    assert abs(datetime.fromisoformat(first["billing/T-009"]).timestamp() - stamp) < 1
    os.utime(task)
    assert _listed(root) == first


def test_a_corrupt_memory_is_ignored_with_one_line(tmp_path: Path) -> None:
    root = tmp_path / "loops"
    _loopkit(root / "old", 3 * DAY)
    first = _listed(root)
    state = Path(os.environ["HITL_STATE_DIR"])
    memory = state / "since.json"
    assert memory.is_file()
    assert b"old/BLOCKED.md" in memory.read_bytes()
    memory.write_bytes(b'{"format": 1, "blocks": [[[')
    done = run_hitl("list", "--json", root)
    assert done.returncode == 0
    assert len(done.stderr.decode().splitlines()) == 1, done.stderr
    assert "since.json" in done.stderr.decode()
    # Read afresh: the file's mtime, this first time hitl (again) sees it.
    assert {b["id"]: b["since"] for b in json.loads(done.stdout)} == first
    assert _listed(root) == first  # and written again, whole


def test_a_cached_block_follows_the_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(parsecache, "RACY_NS", 0)
    root = tmp_path / "loops"
    repo = _loopkit(root / "shop", 3 * DAY)
    first = Inbox.open([root], cached=True).sorted_blocks()[0].since
    os.utime(repo / "BLOCKED.md")  # a new signature: parsed again, then cached
    again = Inbox.open([root], cached=True)
    assert again.sorted_blocks()[0].since == first
    warm = Inbox.open([root], cached=True)
    assert warm.cache is not None and warm.cache.hits >= 1
    assert warm.sorted_blocks()[0].since == first


async def test_the_app_shows_the_same_ids_and_ages_as_list(tmp_path: Path) -> None:
    """The app's rows: the ids `hitl list` printed, and the age it remembered after a touch."""
    from hitl_tui.config import Config
    from hitl_tui.inbox.workspace import Workspace
    from hitl_tui.timefmt import age
    from hitl_tui.tui.app import HitlApp
    from hitl_tui.tui.widgets import BlockList

    root = tmp_path / "loops"
    blocked = _loopkit(root / "team-a" / "svc-one", 3 * DAY) / "BLOCKED.md"
    _loopkit(root / "team-b" / "svc-two", 1 * DAY)
    assert _order(root) == [("team-a/svc-one", "3d"), ("team-b/svc-two", "1d")]
    os.utime(blocked)
    _loopkit(root / "team-c" / "svc-one", 2 * DAY)
    inbox = Inbox.cached(Workspace.discover([root]))
    app = HitlApp(inbox, config=Config(operator="Ada", bell=False), watch=False)
    async with app.run_test(size=(120, 30)) as pilot:
        for _ in range(50):
            await pilot.pause()
            if app.loaded and not app.workers._workers:
                break
        table = app.query_one(BlockList)
        rows = [(b.id, age(b.since)) for b in (table.blocks[k] for k in table.order)]
    assert rows == [("team-a/svc-one", "3d"), ("team-c/svc-one", "2d"), ("team-b/svc-two", "1d")]
    assert _order(root) == rows


# -- issue 23, item 7: a file dated in the future ------------------------------------------------


def _later(minutes: int, *args: object) -> subprocess.CompletedProcess:
    """`hitl ARGS` run as if it were `minutes` later (libfaketime; the CLI never sleeps)."""
    hitl = Path(sys.executable).with_name("hitl")
    return subprocess.run(
        ["faketime", "-f", f"+{minutes}m", hitl, *map(str, args)],
        env=hitl_env(),
        capture_output=True,
        timeout=60,
    )


def _sinces(done) -> dict[str, datetime]:
    assert done.returncode == 0, done.stderr
    return {b["id"]: datetime.fromisoformat(b["since"]) for b in json.loads(done.stdout)}


@pytest.mark.skipif(shutil.which("faketime") is None, reason="needs libfaketime's faketime")
def test_a_block_dated_in_the_future_ages_from_when_hitl_first_saw_it(tmp_path: Path) -> None:
    root = tmp_path / "loops"
    _loopkit(root / "far", time.time() - datetime(2099, 1, 1, tzinfo=UTC).timestamp())
    _loopkit(root / "ahead", -3600)  # a file server whose clock is an hour ahead
    _loopkit(root / "old", 2 * 3600)
    billing = _billing(root)
    task = billing / ".agenticloop/tasks/T-009.md"
    task.write_text(task.read_text().replace("- 2026-11-28: Blocked", "- 2099-01-01: Blocked"))
    before = datetime.now(UTC)
    first = _sinces(run_hitl("list", "--json", root))
    after = datetime.now(UTC)
    for found in ("far", "ahead", "billing/T-009"):
        assert before - timedelta(seconds=1) <= first[found] <= after, (found, first[found])
    # Newest first seen, so listed last, seconds old; none is older than an hour yet.
    last = dict(_order(root)[-3:])
    assert set(last) == {"ahead", "billing/T-009", "far"}
    assert all(age.endswith("s") for age in last.values()), last
    future = {"far", "ahead", "billing/T-009"}
    hour_old = _ids(run_hitl("list", "--json", "--filter", "age:>1h", root))
    assert "old" in hour_old and not hour_old & future

    # Ninety minutes later they have aged like any other block.
    assert _sinces(_later(90, "list", "--json", root)) == first
    later = _later(90, "list", root)
    assert later.returncode == 0, later.stderr
    ages = dict(tuple(line.split()[:2]) for line in later.stdout.decode().splitlines())
    assert (ages["far"], ages["ahead"], ages["billing/T-009"], ages["old"]) == (
        "1h",
        "1h",
        "1h",
        "3h",
    )
    aged = _later(90, "list", "--json", "--filter", "age:>1h", root)
    assert _ids(aged) == hour_old | future


def test_a_future_time_remembered_by_an_older_hitl_is_replaced(tmp_path: Path) -> None:
    """since.json rows written from future-dated files before this fix: from now on, now."""
    root = tmp_path / "loops"
    repo = _loopkit(root / "far", 3600)
    memory = Path(os.environ["HITL_STATE_DIR"]) / "since.json"
    future = (datetime(2099, 1, 1, tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(
        microseconds=1
    )
    row = ["loopkit", os.fsdecode(repo / "BLOCKED.md"), os.fsdecode(repo), future]
    memory.write_text(json.dumps({"format": 1, "blocks": [row]}))
    before = datetime.now(UTC)
    first = _listed(root)
    assert (
        before - timedelta(seconds=1) <= datetime.fromisoformat(first["far"]) <= datetime.now(UTC)
    )
    assert _listed(root) == first  # remembered: it ages from there


def _ids(done) -> set[str]:
    return set(_sinces(done))


def test_a_remote_block_from_a_clock_ahead_is_never_later_than_its_arrival(tmp_path) -> None:
    from hitl_tui.inbox.workspace import Workspace

    shop = _loopkit(tmp_path / "shop", 3600)
    inbox = Inbox(Workspace.discover([shop]))
    inbox.scan()
    (block,) = inbox.blocks.values()
    ahead = dataclasses.replace(
        block,
        id="far:shop",
        path="far:/srv/shop/BLOCKED.md",
        since=datetime.now(UTC) + timedelta(days=1),
    )
    before = datetime.now(UTC)
    delta = inbox.replace_remote("ssh", "far", [ahead])
    (arrived,) = delta.added
    assert before <= arrived.since <= datetime.now(UTC)
    # The next poll brings the same block: its time stays, and it is not "changed".
    again = inbox.replace_remote("ssh", "far", [ahead])
    assert not again
    assert [b.since for b in inbox.blocks.values() if b.id == "far:shop"] == [arrived.since]


def test_a_block_file_dated_before_1970_spoils_no_age(tmp_path: Path) -> None:
    """A BLOCKED.md whose mtime is before the epoch (`touch -d 1960-01-01`): hitl remembers it
    from the epoch, so its memory stays readable and every other block keeps its age (it wrote
    a time it then refused to read, and every age started again)."""
    root = tmp_path / "loops"
    _loopkit(root / "old", 3 * DAY)
    ancient = _loopkit(root / "ancient", 0)
    os.utime(ancient / "BLOCKED.md", (-315_619_200, -315_619_200))  # 1960-01-01
    first = _listed(root)
    assert first["ancient"].startswith("1970-01-01T00:00:00")
    assert _listed(root) == first


def test_the_memory_keeps_every_block_of_a_fleet_of_50000(tmp_path: Path) -> None:
    """Issue 30's fleet (50,000 open blocks): each block's first sight is remembered across
    starts (a cap of 20,000 forgot the oldest 30,000 at every save, so their ages restarted
    with the next rewrite of their file), and a start that meets the same blocks again has
    nothing to write."""
    from hitl_tui.state.since import MAX_BYTES, SinceBook

    path = tmp_path / "state" / "since.json"
    first = datetime(2026, 1, 1, tzinfo=UTC)
    repo = "/home/operator/" + "fleet/" * 12 + "repo-{n:05d}"  # long paths: the size bound
    keys = [
        ("agenticloop", f"{repo.format(n=n)}/.agenticloop/tasks/task-{n:05d}.md")
        for n in range(50_000)
    ]
    book = SinceBook(path)
    for n, key in enumerate(keys):
        book.first_seen(key, repo.format(n=n), first + timedelta(seconds=n))
    book.save()
    assert path.stat().st_size < MAX_BYTES
    later = datetime(2026, 6, 1, tzinfo=UTC)  # the files rewritten since: later mtimes
    again = SinceBook(path)
    seen = [again.first_seen(key, repo.format(n=n), later) for n, key in enumerate(keys)]
    assert seen == [first + timedelta(seconds=n) for n in range(50_000)]
    assert not again.dirty


def test_a_memory_too_large_for_its_reader_keeps_its_newest_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rows of long paths that are not ASCII (six bytes a character in JSON) can pass the file's
    size bound under the row bound: the save leaves out the oldest rows, not a file the next
    start refuses whole (every block's age lost, and lost again at each start)."""
    from hitl_tui.state import since

    monkeypatch.setattr(since, "MAX_BYTES", 64 << 10)
    path = tmp_path / "state" / "since.json"
    first = datetime(2026, 1, 1, tzinfo=UTC)
    repo = "/home/operator/" + "エージェント/" * 8 + "repo-{n:03d}"
    keys = [(".hitl", f"{repo.format(n=n)}/.hitl/asks/質問-{n:03d}.md") for n in range(200)]
    book = since.SinceBook(path)
    for n, key in enumerate(keys):
        book.first_seen(key, repo.format(n=n), first + timedelta(seconds=n))
    book.save()
    assert 0 < path.stat().st_size <= since.MAX_BYTES
    later = datetime(2026, 6, 1, tzinfo=UTC)
    again = since.SinceBook(path)
    seen = [again.first_seen(key, repo.format(n=n), later) for n, key in enumerate(keys)]
    kept = [n for n, when in enumerate(seen) if when != later]
    assert kept and kept == list(range(kept[0], 200)), kept  # the newest, each as it was
    assert all(seen[n] == first + timedelta(seconds=n) for n in kept)
    assert "too large" not in capsys.readouterr().err


def _rows_before(loaded: object) -> dict:
    """The memory file's rows as a Python loop checked them (the oracle of the test below)."""
    if not isinstance(loaded, dict) or loaded.get("format") != 1:
        raise ValueError("not a memory file of this version")
    blocks = loaded.get("blocks")
    if not isinstance(blocks, list):
        raise ValueError("no blocks")
    rows = {}
    for row in blocks:
        if not (isinstance(row, list) and len(row) == 4):
            raise ValueError("a row")
        source, path, repo, when = row
        if not (type(source) is str and type(path) is str and type(repo) is str):
            raise ValueError("a row")
        if type(when) is not int or not 0 <= when < 1 << 62:
            raise ValueError("a time")
        rows[(source, path)] = (repo, when)
    return rows


def test_a_memory_file_is_read_as_the_row_by_row_check_read_it() -> None:
    """The rows are checked in C now (a start's first rows wait for them): every hostile
    variant is refused, and every good one read, exactly as the loop did."""
    import random

    from hitl_tui.state.since import _rows_of

    good = [
        ["loopkit", f"/r/{n}/BLOCKED.md", f"/r/{n}", 1_700_000_000_000_000 + n] for n in range(6)
    ]
    good.append([*good[0][:3], 5])  # the same key again: the last one counts
    bad_values = [None, True, 1.5, -1, 1 << 62, 1 << 70, "x", [], {}, ["a"], 0, (1 << 62) - 1]
    rng = random.Random(30)
    docs: list[object] = [
        None, [], {}, {"format": 2, "blocks": []}, {"format": 1}, {"format": 1, "blocks": {}},
        {"format": 1, "blocks": []}, {"format": 1, "blocks": good},
    ]  # fmt: skip
    for _ in range(400):
        rows = [list(r) for r in good]
        for _ in range(rng.randint(1, 3)):
            n = rng.randrange(len(rows))
            shape = rng.randrange(4)
            if shape == 0:
                if isinstance(rows[n], list) and len(rows[n]) == 4:
                    rows[n][rng.randrange(4)] = rng.choice(bad_values)
            elif shape == 1:
                if isinstance(rows[n], list):
                    rows[n] = rows[n][: rng.randrange(4)] or rows[n] + ["extra"]
            elif shape == 2:
                rows[n] = rng.choice([None, "row", 5, {"a": 1}, ()])
            else:
                rows.append(rows[n])
        docs.append({"format": 1, "blocks": rows})
    refused = read = 0
    for doc in docs:
        doc = json.loads(json.dumps(doc))  # as the file gives it
        try:
            expected = _rows_before(doc)
        except ValueError:
            with pytest.raises(ValueError):
                _rows_of(doc)
            refused += 1
        else:
            assert _rows_of(doc) == expected
            read += 1
    assert refused > 100 and read > 20
