"""The parse cache: a warm scan equals a cold one, and anything changed is read again.

Most tests set RACY_NS to 0: files written by a test are seconds old at most, and the racy rule
(not caching a file changed in the last 2 s) would keep them out of the cache. One test checks
the rule itself with its real value.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hitl_tui import fsio
from hitl_tui.inbox import parsecache
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.inbox.parsecache import ParseCache
from hitl_tui.inbox.scan import PARALLEL_MIN_REPOS
from hitl_tui.inbox.workspace import Workspace
from hitl_tui.model import Block
from hitl_tui.sources.agenticloop import parse as agenticloop
from tests.conftest import FIXTURES

#: Where each field of a Block stands in a shard's row (the on-disk format: the fields in the
#: dataclass's order).
FIELD = {f.name: i for i, f in enumerate(dataclasses.fields(Block))}

BLOCKED = "## Question\nShip {what}?\n## Choices\n- A) yes\n- B) no\n"
TASK = """\
---
task_id: T-{n:03d}
status: {status}
block_category: credentials
when: 2026-11-20
---

# T-{n:03d} - Task {n}

## Comments
- 2026-11-20: Blocked (credentials): Needed: a token {n}.
"""


# Files written just now are cached (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("cached_at_once")


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    """Both sample repos, a few more of each kind, and a repo with no block."""
    root = tmp_path / "fleet"
    shutil.copytree(FIXTURES / "loopkit-shop", root / "shop")
    shutil.copytree(FIXTURES / "agenticloop-billing", root / "billing")
    for name in ("shop", "billing"):
        (root / name / ".git").mkdir()
    for i in range(3):
        repo = root / f"loop-{i}"
        (repo / ".git").mkdir(parents=True)
        (repo / "BLOCKED.md").write_text(BLOCKED.format(what=f"loop {i}"))
        tasks = root / f"tasks-{i}" / ".agenticloop" / "tasks"
        tasks.mkdir(parents=True)
        for n in range(3):
            status = "blocked" if n else "agent-ready"
            (tasks / f"T-{n:03d}.md").write_text(TASK.format(n=n, status=status))
    (root / "idle" / ".git").mkdir(parents=True)
    return root


def listing(inbox: Inbox) -> list[dict]:
    return [b.to_json() for b in inbox.sorted_blocks()]


def cold_listing(root: Path) -> list[dict]:
    return listing(Inbox.open([root]))


def listed_json(stdout: bytes) -> list[dict]:
    """`hitl list --json` as `listing` gives it: without what only `list` adds (snoozes, and
    whether a block asks again what was answered)."""
    rows = json.loads(stdout)
    assert all(r.pop("snoozed") is False and r.pop("snoozed_until") is None for r in rows)
    assert all(r.pop("asked_again") is None for r in rows)
    return rows


def test_a_warm_scan_reads_no_block_file_and_lists_the_same(fleet: Path, monkeypatch) -> None:
    first = Inbox.open([fleet], cached=True)
    assert first.cache is not None and first.cache.hits == 0
    cold = listing(first)
    assert len(cold) >= 9

    read_file = fsio.read_file

    def no_block_reading(path, *args, **kwargs):
        # project.md is a layout, read by every scan (it is small and one per repo).
        assert path.name == "project.md", f"a warm scan read {path}"
        return read_file(path, *args, **kwargs)

    monkeypatch.setattr(fsio, "read_file", no_block_reading)
    warm = Inbox.open([fleet], cached=True)
    assert warm.cache is not None
    assert warm.cache.misses == 0 and warm.cache.hits == len(first.cache)
    assert listing(warm) == cold
    # Every field, including the ones --json leaves out, survives the round trip.
    for block in warm.sorted_blocks():
        twin = first.blocks[(block.source, block.path)]
        assert block == twin and block.meta == twin.meta and block.raw == twin.raw


def test_a_file_rewritten_in_place_is_read_again(fleet: Path) -> None:
    """Same size, same mtime, new bytes: the ctime gives it away."""
    path = fleet / "loop-0" / "BLOCKED.md"
    Inbox.open([fleet], cached=True)
    st = path.stat()
    path.write_text(BLOCKED.format(what="loop X"))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns

    warm = Inbox.open([fleet], cached=True)
    block = warm.resolve(str(path))
    assert block.question == "Ship loop X?"
    assert block.fingerprint == fsio.read_file(path).fingerprint
    assert listing(warm) == cold_listing(fleet)


def test_answered_and_new_blocks_show_on_the_next_run(fleet: Path) -> None:
    Inbox.open([fleet], cached=True)
    (fleet / "loop-1" / "BLOCKED.md").unlink()
    task = fleet / "tasks-2" / ".agenticloop" / "tasks" / "T-000.md"
    task.write_text(TASK.format(n=0, status="blocked"))
    (fleet / "idle" / "BLOCKED.md").write_text(BLOCKED.format(what="idle"))
    warm = Inbox.open([fleet], cached=True)
    ids = {b.id for b in warm.blocks.values()}
    assert "loop-1" not in ids and "idle" in ids and "tasks-2/T-000" in ids
    assert listing(warm) == cold_listing(fleet)


def test_entries_of_deleted_files_are_dropped(fleet: Path) -> None:
    first = Inbox.open([fleet], cached=True)
    assert first.cache is not None
    before = len(first.cache)
    shutil.rmtree(fleet / "tasks-0")
    again = Inbox.open([fleet], cached=True)
    assert again.cache is not None and len(again.cache) == before - 3
    assert len(Inbox.open([fleet], cached=True).cache or ()) == before - 3


def test_a_recent_change_is_not_cached(fleet: Path, monkeypatch) -> None:
    monkeypatch.setattr(parsecache, "RACY_NS", 2_000_000_000)
    path = fleet / "loop-2" / "BLOCKED.md"
    old = 1_700_000_000
    for file in fleet.rglob("*.md"):
        os.utime(file, (old, old))  # sets ctime to now, which is what the rule looks at
    first = Inbox.open([fleet], cached=True)
    assert first.cache is not None and len(first.cache) == 0
    path.write_text(BLOCKED.format(what="later"))
    second = Inbox.open([fleet], cached=True)
    assert second.resolve(str(path)).question == "Ship later?"


def test_a_new_label_is_not_served_from_the_cache(fleet: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    (other / "loop-0" / ".git").mkdir(parents=True)
    (other / "loop-0" / "BLOCKED.md").write_text(BLOCKED.format(what="twin"))
    Inbox.open([fleet, other], cached=True)
    # The same two folders, listed apart: the labels lose their disambiguation.
    alone = Inbox.open([fleet], cached=True)
    assert alone.resolve(str(fleet / "loop-0" / "BLOCKED.md")).id == "loop-0"
    together = Inbox.open([fleet, other], cached=True)
    assert {b.id for b in together.blocks.values()} == {
        b.id for b in Inbox.open([fleet, other]).blocks.values()
    }


def test_a_symlinked_block_file_is_always_read(fleet: Path) -> None:
    repo = fleet / "loop-0"
    (repo / "docs").mkdir()
    (repo / "BLOCKED.md").rename(repo / "docs" / "real.md")
    (repo / "BLOCKED.md").symlink_to("docs/real.md")
    Inbox.open([fleet], cached=True)
    (repo / "docs" / "real.md").write_text(BLOCKED.format(what="via the link"))
    warm = Inbox.open([fleet], cached=True)
    assert warm.resolve(str(repo / "BLOCKED.md")).question == "Ship via the link?"


def test_another_version_of_hitl_starts_empty(fleet: Path, monkeypatch) -> None:
    Inbox.open([fleet], cached=True)
    monkeypatch.setattr(parsecache, "code_stamp", lambda: "another build")
    again = Inbox.open([fleet], cached=True)
    assert again.cache is not None and again.cache.hits == 0 and again.cache.misses > 0


def _shards(root: Path) -> list[Path]:
    cache = ParseCache.for_workspace((root,))
    assert cache.folder is not None
    return sorted(cache.folder.glob("shard-*.json"))


def _rewrite_rows(root: Path, change) -> None:
    """Apply `change(row)` to every entry row of every shard (a row: source, path, sig,
    label, the block's fields or None) and write the shards back as they were found."""
    for shard in _shards(root):
        data = json.loads(shard.read_bytes())
        data["entries"] = [change(row) for row in data["entries"]]
        shard.write_text(json.dumps(data))
        shard.chmod(0o600)


def test_corrupt_or_planted_cache_files_read_as_empty(fleet: Path) -> None:
    expected = cold_listing(fleet)
    Inbox.open([fleet], cached=True)
    folder = ParseCache.for_workspace((fleet,)).folder
    assert folder is not None and _shards(fleet)
    deep = "[" * 200_000 + "]" * 200_000
    stamp = parsecache.code_stamp()
    # A tuple used as a key, nested deep enough to overflow the C stack if it were hashed.
    nested: object = 1
    for _ in range(100):
        nested = {"$": "tuple", "v": [nested]}
    tuple_key = {"$": "dict", "v": [[nested, 1]]}
    row = ["x", "y", [1] * 5, "z", [tuple_key]]
    planted = {"format": parsecache.FORMAT, "stamp": stamp, "entries": [row]}

    def fifo(path: Path) -> None:
        os.mkfifo(path)  # would block a plain open: opened non-blocking, and not a file

    def zeros(path: Path) -> None:
        path.symlink_to("/dev/zero")  # would never end: not followed

    def shared(path: Path) -> None:
        path.write_text(json.dumps(planted))
        path.chmod(0o666)  # writable by anyone: not trusted

    plants = [
        lambda p: p.write_bytes(b"\x80\x05garbage"),
        lambda p: p.write_bytes(b""),
        lambda p: p.write_text(deep),
        lambda p: p.write_text(json.dumps(planted)),
        zeros,
        fifo,
        shared,
    ]
    for n in range(parsecache.SHARDS):
        shard = folder / f"shard-{n:02d}.json"
        shard.unlink(missing_ok=True)
        plants[n % len(plants)](shard)
    inbox = Inbox.open([fleet], cached=True)
    assert listing(inbox) == expected
    assert inbox.cache is not None and inbox.cache.hits == 0


def test_a_shard_of_colliding_int_keys_is_refused_at_once(fleet: Path) -> None:
    """Python hashes ints modulo 2**61 - 1: a set of 60,000 of its multiples would take minutes
    to build. The first such member makes the shard unreadable instead."""
    folder = ParseCache.for_workspace((fleet,)).folder
    assert folder is not None
    folder.mkdir(parents=True)
    members = [k * ((1 << 61) - 1) for k in range(1, 60_001)]
    planted = {"format": parsecache.FORMAT, "stamp": parsecache.code_stamp(), "entries": []}
    planted["x"] = {"$": "set", "v": members}
    shard = folder / "shard-00.json"
    shard.write_text(json.dumps(planted))
    shard.chmod(0o600)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    run = subprocess.run(
        [sys.executable, "-m", "hitl_tui", "list", "--json", str(fleet)],
        capture_output=True,
        env=env,
        timeout=20,
    )
    assert run.returncode == 0 and listed_json(run.stdout) == cold_listing(fleet)


def test_a_value_json_cannot_hold_leaves_the_rest_of_its_shard_cached(
    fleet: Path, monkeypatch
) -> None:
    """An int of 4,000 hex digits in a block's facts: json writes no int that long.

    agenticloop's reader makes every header value text, so the int is planted by hand."""
    tasks = fleet / "tasks-1" / ".agenticloop" / "tasks"
    huge = tasks / "T-009.md"
    huge.write_text(TASK.format(n=9, status="blocked").replace("when:", "huge: yes\nwhen:"))
    real = agenticloop.load_header

    def load(text: str) -> dict:
        data = real(text)
        if "huge: yes" in text:
            data["n"] = int("f" * 4000, 16)
        return data

    monkeypatch.setattr(agenticloop, "load_header", load)
    # Planted through the full rules' load_header (a plain header is read without it).
    monkeypatch.setattr(agenticloop, "FAST_HEADER", False)
    first = Inbox.open([fleet], cached=True)
    assert first.resolve(str(huge)).meta["header"]["n"] > 1 << 15000
    again = Inbox.open([fleet], cached=True)
    assert again.cache is not None and again.cache.misses == 1  # that one task, parsed again
    assert listing(again) == listing(first)


def test_housekeeping_removes_only_what_the_cache_wrote(fleet: Path, tmp_path: Path) -> None:
    Inbox.open([fleet], cached=True)
    own = ParseCache.for_workspace((fleet,)).folder
    assert own is not None
    old = 1_600_000_000
    leftover = own / ".shard-killed-mid-save"
    leftover.write_text("{")
    os.utime(leftover, (old, old))
    idle = own.parent / "0123456789abcdef"
    idle.mkdir()
    (idle / "shard-03.json").write_text("{}")
    (idle / "notes.txt").write_text("not ours")
    os.utime(idle, (old, old))
    (fleet / "loop-2" / "BLOCKED.md").unlink()  # something to save
    Inbox.open([fleet], cached=True)
    assert not leftover.exists()
    assert not (idle / "shard-03.json").exists() and (idle / "notes.txt").exists()


def test_entries_that_are_not_what_freeze_wrote_are_parsed_again(fleet: Path) -> None:
    Inbox.open([fleet], cached=True)
    since = FIELD["since"]
    bad = [
        ("choices", [[1, 2, 3, 4, 5, 6]]),
        ("since", "2020-01-01T00:00:00"),  # no timezone: would not sort with the others
        ("attempted", "not a list"),
        ("meta", [1, 2]),
        ("truncated", 0),
    ]

    def spoil(row):
        if row[4] is not None:
            field, value = bad[hash(row[1]) % len(bad)]
            row[4][FIELD[field]] = value
        return row

    _rewrite_rows(fleet, spoil)
    again = Inbox.open([fleet], cached=True)
    assert listing(again) == cold_listing(fleet)
    assert all(b.since.tzinfo is not None for b in again.blocks.values())
    assert since is not None
    # Every file that held a block was parsed again (those without one still hit).
    assert again.cache is not None and again.cache.misses == sum(
        1 for b in again.blocks.values() if b.path.name != "project.md"
    )


def test_a_failed_read_is_not_cached(fleet: Path, monkeypatch) -> None:
    """EIO today (a network file system), readable tomorrow with the very same stat."""
    path = fleet / "loop-0" / "BLOCKED.md"
    read_file = fsio.read_file

    def failing(file, *args, **kwargs):
        if file == path:
            raise OSError(errno.EIO, "Input/output error")
        return read_file(file, *args, **kwargs)

    monkeypatch.setattr(fsio, "read_file", failing)
    assert Inbox.open([fleet], cached=True).resolve(str(path)).fingerprint == "unreadable"
    monkeypatch.setattr(fsio, "read_file", read_file)
    assert Inbox.open([fleet], cached=True).resolve(str(path)).question == "Ship loop 0?"


def test_header_values_come_back_exactly(fleet: Path) -> None:
    """A header's text, lists, nested mappings, empty values and `$` keys survive the file."""
    task = fleet / "tasks-0" / ".agenticloop" / "tasks" / "T-009.md"
    task.write_text(
        TASK.format(n=9, status="blocked").replace(
            "when: 2026-11-20\n",
            "when: 2026-11-20\nat: 2026-11-20T10:00:00Z\ntags: [a, 'b, c', [d]]\n"
            "empty:\nodd: {1: one}\nnested:\n  $: dollar\n  list:\n    - x\n"
            "text: |\n  two\n  lines\nbig: 123456789012345678901234567890\n$: dollar\n",
        )
    )
    first = Inbox.open([fleet], cached=True)
    fresh = first.resolve(str(task))
    warm = Inbox.open([fleet], cached=True)
    assert warm.cache is not None and warm.cache.misses == 0
    cached = warm.resolve(str(task))
    assert cached == fresh
    header, again = fresh.meta["header"], cached.meta["header"]
    assert again == header and cached.defaults == fresh.defaults
    assert header["tags"] == ["a", "b, c", ["d"]] and header["empty"] == {}
    assert header["nested"] == {"$": "dollar", "list": ["x"]} and header["text"] == "two\nlines\n"
    assert {k: type(v) for k, v in again.items()} == {k: type(v) for k, v in header.items()}


def _hitl(*args: object) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    return subprocess.run(
        [sys.executable, "-m", "hitl_tui", *map(str, args)], capture_output=True, text=True, env=env
    )


def _cached_rows(root: Path, path: Path) -> list:
    """The entry rows of the shards on disk for `path`."""
    return [
        row
        for shard in _shards(root)
        for row in json.loads(shard.read_bytes())["entries"]
        if row[1] == str(path)
    ]


def test_a_stale_entry_cannot_make_an_answer_write(fleet: Path, monkeypatch) -> None:
    """Forge the worst case: an entry whose signature matches but whose block is old (another
    fingerprint). Issue 23: the answer is the file's, and the entry is dropped; `--expect` of
    the forged fingerprint (what a `list` from that cache said) is still refused."""
    path = fleet / "loop-0" / "BLOCKED.md"
    prompt = fleet / "loop-0" / "PROMPT.md"
    Inbox.open([fleet], cached=True)
    forged = "sha256:" + "0" * 64

    def forge(row):
        if row[1] == str(path):
            row[4][FIELD["fingerprint"]] = forged
        return row

    _rewrite_rows(fleet, forge)
    before = path.read_bytes()
    run = _hitl("answer", "--choice", "A", "--expect", forged, path, fleet)
    assert run.returncode == 3, run.stderr
    assert "changed since" in run.stderr
    assert path.read_bytes() == before and not prompt.exists()
    assert [row[4][FIELD["fingerprint"]] for row in _cached_rows(fleet, path)] == [], "kept"
    run = _hitl("answer", "--choice", "A", path, fleet)
    assert run.returncode == 0, run.stderr
    assert "Ship loop 0? → A) yes\n" in prompt.read_text() and not path.exists()


def test_what_an_answer_writes_follows_the_file_not_the_cache(fleet: Path, tmp_path) -> None:
    """A planted entry with the file's true fingerprint but other facts (A approves the change)
    must not change a byte of what `hitl answer` writes."""
    twin = tmp_path / "twin"
    shutil.copytree(fleet, twin, symlinks=True)
    task = Path(".agenticloop") / "tasks" / "T-001.md"
    Inbox.open([fleet], cached=True)

    def plant(row):
        if row[1] == str(fleet / "tasks-0" / task):
            state = row[4]
            state[FIELD["meta"]].update(approval_gate=True)
            choices = state[FIELD["choices"]]
            choices[0][4], choices[1][4] = "approve", "keep"  # the choices' kinds
        return row

    _rewrite_rows(fleet, plant)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}

    args = ["answer", "--choice", "A", "--note", "token set"]

    def answer(root: Path, state: Path) -> bytes:
        run = subprocess.run(
            [sys.executable, "-m", "hitl_tui", *args, str(root / "tasks-0" / task), str(root)],
            capture_output=True,
            text=True,
            env={**env, "HITL_STATE_DIR": str(state)},
        )
        assert run.returncode == 0, run.stderr
        return (root / "tasks-0" / task).read_bytes()

    planted = answer(fleet, Path(os.environ["HITL_STATE_DIR"]))
    clean = answer(twin, tmp_path / "clean-state")
    assert b"approved: true" not in planted
    assert planted == clean


def test_worker_processes_fill_the_cache(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(parsecache, "RACY_NS", 2_000_000_000)
    root = tmp_path / "many"
    for i in range(PARALLEL_MIN_REPOS + 2):
        repo = root / f"r{i:03d}"
        (repo / ".git").mkdir(parents=True)
        if i % 2:
            (repo / "BLOCKED.md").write_text(BLOCKED.format(what=i))
    time.sleep(parsecache.RACY_NS / 1e9 + 0.1)  # the workers keep the real racy rule
    first = Inbox.cached(Workspace.discover([root]))
    first.scan(workers=2)
    assert first.cache is not None and first.cache.hits == 0
    first.save_cache()
    second = Inbox.cached(Workspace.discover([root]))
    assert second.cache is not None and not second.cache.cold
    second.scan(workers=2)  # warm: read in-process, from the cache
    assert second.cache.misses == 0
    assert second.cache.hits == len(list(root.glob("*/BLOCKED.md"))) > 0
    assert listing(second) == listing(first) == cold_listing(root)


def test_live_updates_of_a_cached_inbox(fleet: Path) -> None:
    Inbox.open([fleet], cached=True)
    inbox = Inbox.cached(Workspace.discover([fleet]))
    inbox.scan()
    path = fleet / "loop-0" / "BLOCKED.md"
    path.write_text(BLOCKED.format(what="now"))
    delta = inbox.handle([path])
    assert [b.question for b in delta.changed] == ["Ship now?"]
    path.unlink()
    assert inbox.handle([path]).removed == [("loopkit", path)]


def test_list_json_is_the_same_cold_and_warm(fleet: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    runs = [
        subprocess.run(
            [sys.executable, "-m", "hitl_tui", "list", "--json", str(fleet)],
            capture_output=True,
            check=True,
            env=env,
        ).stdout
        for _ in range(2)
    ]
    assert listed_json(runs[0]) == listed_json(runs[1]) == cold_listing(fleet)
    assert _shards(fleet)


def test_the_choice_written_is_the_files_not_the_caches(fleet: Path) -> None:
    """A planted entry with the file's true stat and fingerprint but its own text for choice A:
    `hitl answer --choice A` writes the file's choice A, never the planted text. Issue 23: it
    was refused (exit 3, "review it again") at every retry, the operator never shown the
    planted text; now the entry is dropped and the file answered. The `--expect FP` contract
    stays: a file changed since FP is refused."""
    path = fleet / "loop-0" / "BLOCKED.md"
    prompt = fleet / "loop-0" / "PROMPT.md"
    Inbox.open([fleet], cached=True)

    def plant(row):
        if row[1] == str(path):
            row[4][FIELD["choices"]][0][1] = "drop the production database"
        return row

    _rewrite_rows(fleet, plant)
    [shown] = [b for b in Inbox.open([fleet], cached=True).blocks.values() if b.path == path]
    assert shown.choices[0].option == "drop the production database"  # the plant took
    true_fp = shown.fingerprint
    before = path.read_bytes()
    dry = _hitl("answer", "--choice", "A", "--expect", true_fp, "--dry-run", path, fleet)
    assert dry.returncode == 0, dry.stderr
    assert "Ship loop 0? → A) yes" in dry.stdout and "production" not in dry.stdout
    assert not any("production" in json.dumps(row) for row in _cached_rows(fleet, path))
    [again] = [b for b in Inbox.open([fleet], cached=True).blocks.values() if b.path == path]
    assert again.choices[0].option == "yes"  # the entry is gone: the file is read again

    # The FILE changed since the operator read FP: refused, as ever.
    path.write_text(BLOCKED.format(what="now"))
    stale = _hitl("answer", "--choice", "A", "--expect", true_fp, path, fleet)
    assert stale.returncode == 3, stale.stderr
    assert not prompt.exists()
    path.write_bytes(before)
    done = _hitl("answer", "--choice", "A", path, fleet)
    assert done.returncode == 0, done.stderr
    assert "Ship loop 0? → A) yes\n" in prompt.read_text()
    assert "production" not in prompt.read_text()


async def test_the_app_writes_the_files_choice_not_the_caches(fleet: Path) -> None:
    from hitl_tui.config import Config
    from hitl_tui.inbox.workspace import Workspace
    from hitl_tui.tui.app import HitlApp
    from hitl_tui.tui.screens import PreviewScreen

    repo = fleet / "loop-0"
    path = repo / "BLOCKED.md"
    Inbox.open([repo], cached=True)

    def plant(row):
        if row[1] == str(path):
            row[4][FIELD["choices"]][0][1] = "drop the production database"
        return row

    _rewrite_rows(repo, plant)
    inbox = Inbox.cached(Workspace.discover([repo]))
    app = HitlApp(inbox, config=Config(operator="Ada", bell=False), watch=False)
    before = path.read_bytes()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert "drop the production database" in _screen_text(app)  # the plant is shown
        await pilot.press("1")
        await pilot.pause()
        assert any(
            n.title == "Block changed" and "reads differently" in n.message
            for n in app._notifications
        )
        await pilot.press("enter")  # whatever has the focus now, nothing may be written
        await pilot.pause(0.2)
        assert path.read_bytes() == before and not (repo / "PROMPT.md").exists()
        # Issue 23: the file's block is shown now (the entry is dropped), and asked again,
        # the answer goes through: it was refused at every retry.
        screen = _screen_text(app)
        assert "drop the production database" not in screen and "A) yes" in screen
        await pilot.press("1")
        await pilot.pause()
        assert isinstance(app.screen, PreviewScreen)
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
    assert not path.exists()
    assert "Ship loop 0? → A) yes\n" in (repo / "PROMPT.md").read_text()


def _screen_text(app) -> str:
    """What the terminal shows, as plain text (the SVG screenshot without its markup)."""
    import html
    import re

    svg = app.export_screenshot()
    return html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ")


def test_the_code_stamp_covers_the_header_reader() -> None:
    """A change to agenticloop's reader (sources/agenticloop/frontmatter.py) empties the cache."""
    from hitl_tui.sources.agenticloop import frontmatter

    reader = Path(frontmatter.__file__)
    st = reader.stat()
    parsecache.code_stamp.cache_clear()
    before = parsecache.code_stamp()
    try:
        os.utime(reader, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        parsecache.code_stamp.cache_clear()
        assert parsecache.code_stamp() != before
    finally:
        os.utime(reader, ns=(st.st_atime_ns, st.st_mtime_ns))
        parsecache.code_stamp.cache_clear()
    assert parsecache.code_stamp() == before


def test_the_code_stamp_covers_every_module_of_every_package(tmp_path: Path, monkeypatch) -> None:
    """A parser moved into a new sub-package must still invalidate the cache when it changes."""
    package = tmp_path / "hitl_tui"
    (package / "sources" / "deep").mkdir(parents=True)
    (package / "inbox").mkdir()
    for rel in ("inbox/parsecache.py", "sources/loopkit.py", "sources/deep/reader.py"):
        (package / rel).write_text("# v1\n")
    monkeypatch.setattr(parsecache, "__file__", str(package / "inbox" / "parsecache.py"))
    stamp = parsecache.code_stamp.__wrapped__  # the cached one is computed once a process
    before = stamp()
    (package / "sources" / "deep" / "reader.py").write_text("# v2, longer\n")
    assert stamp() != before
