"""Issue 30: the parse cache reads its shards as the scan needs them, not all before it.

At 50,000 blocks the sixteen shards took 0.7 s to read, and the first rows waited for all of
them. Now a warm start reads one shard (to know the cache is warm), and each other shard the
first time a repository of it is met. These tests check the blocks are the very blocks a
parse gives, field by field, on real and hostile files, and that a file changed after its
shard was (or before it was) read is read again, never shown stale.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import zlib
from pathlib import Path

import pytest

from hitl_tui.inbox import parsecache
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.inbox.parsecache import SHARDS
from hitl_tui.model import Block
from tests.conftest import FIXTURES

BLOCKED = "## Question\nShip {what}?\n## Choices\n- A) yes\n- B) no\n"
TASK = """\
---
task_id: T-{n:03d}
status: blocked
block_category: credentials
---

# T-{n:03d} - Task {n}

## Comments
- 2026-11-20: Blocked (credentials): Needed: a token {n}.
"""

#: Repositories enough that every shard holds some (crc32 of the path, modulo SHARDS).
LOOPS = 48


# Files written just now are cached (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("cached_at_once")


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    """The sample repositories (agenticloop's own files among them), hostile files, and
    enough small loops to put repositories in every shard."""
    root = tmp_path / "fleet"
    for name in ("loopkit-shop", "agenticloop-billing"):
        shutil.copytree(FIXTURES / name, root / name)
        (root / name / ".git").mkdir()
    for name in ("shop", "fresh"):
        shutil.copytree(FIXTURES / "agenticloop-real" / name, root / f"real-{name}")
        (root / f"real-{name}" / ".git").mkdir()
    hostile = {
        "binary": b"\x00\x01\xff## Question\n\x00?\n",
        "latin1": "## Question\nCaf\xe9 ou th\xe9 ?\n## Choices\n- A) caf\xe9\n".encode("latin-1"),
        "huge": (
            "## Question\nBig?\n## Context\n" + "x" * (parsecache.MAX_CACHED_RAW + 10)
        ).encode(),
        "markup": b"## Question\n[bold red]Ship[/] $(rm -rf /)?\n## Choices\n- A) [link]\n",
        "empty": b"",
        "no-question": b"# Blocked\n\njust words, no sections\n",
    }
    for name, data in hostile.items():
        repo = root / f"hostile-{name}"
        (repo / ".git").mkdir(parents=True)
        (repo / "BLOCKED.md").write_bytes(data)
    tasks = root / "hostile-tasks" / ".agenticloop" / "tasks"
    tasks.mkdir(parents=True)
    (tasks / "T-001.md").write_bytes(b"---\ntask_id: [unclosed\nstatus: blocked\n---\n# T\n")
    (tasks / "T-002.md").write_bytes(b"---\nstatus: blocked\n---\n\xff\xfe not utf-8\n")
    (tasks / "T-003.md").write_text(TASK.format(n=3))
    for i in range(LOOPS):
        repo = root / f"loop-{i:02d}"
        (repo / ".git").mkdir(parents=True)
        (repo / "BLOCKED.md").write_text(BLOCKED.format(what=f"loop {i}"))
    return root


def fields(block: Block) -> dict:
    return {f.name: getattr(block, f.name) for f in dataclasses.fields(Block)}


def count_reads(monkeypatch) -> list[Path]:
    reads: list[Path] = []
    real = parsecache._read_shard

    def counting(path: Path):
        reads.append(path)
        return real(path)

    monkeypatch.setattr(parsecache, "_read_shard", counting)
    return reads


def shard_of(repo: Path) -> int:
    return zlib.crc32(os.fsencode(repo)) % SHARDS


def test_a_warm_cache_reads_one_shard_then_each_as_it_is_needed(fleet, monkeypatch):
    first = Inbox.open([fleet], cached=True)
    assert first.cache is not None and len(first.cache) > LOOPS
    again = Inbox.open([fleet], cached=True).cache  # what a warm scan hits (and misses:
    assert again is not None  # the files never cached, a huge one, an unreadable one)
    reads = count_reads(monkeypatch)
    inbox = Inbox.deferred([fleet])
    inbox.prepare()
    assert inbox.cache is not None and not inbox.cache.cold
    assert len(reads) == 1, reads  # before: all sixteen, before any block was listed
    repos = inbox.workspace.repos
    inbox.scan()
    # Each shard read once in all, as its first repository came.
    assert sorted(p.name for p in reads) == sorted(f"shard-{n:02d}.json" for n in range(SHARDS))
    assert {shard_of(r) for r in repos} == set(range(SHARDS))
    assert (inbox.cache.hits, inbox.cache.misses) == (again.hits, again.misses)
    assert inbox.cache.hits == len(first.cache)


def test_shards_read_as_needed_give_the_blocks_a_parse_gives(fleet, monkeypatch):
    parsed = Inbox.open([fleet])  # no cache: every file parsed
    Inbox.open([fleet], cached=True)  # writes the cache
    warm = Inbox.deferred([fleet])
    warm.scan()
    assert warm.cache is not None and warm.cache.hits > LOOPS
    assert set(warm.blocks) == set(parsed.blocks)
    for key, block in warm.blocks.items():
        assert fields(block) == fields(parsed.blocks[key]), key
    # And the same as a cache read whole before the scan (the load as it was).
    eager = Inbox.deferred([fleet])
    eager.prepare()
    assert eager.cache is not None and len(eager.cache) > LOOPS  # reads every shard
    eager.scan()
    assert {k: fields(b) for k, b in eager.blocks.items()} == {
        k: fields(b) for k, b in warm.blocks.items()
    }


@pytest.mark.parametrize("when", ["before its shard is read", "after its shard is read"])
def test_a_file_changed_on_disk_is_read_again_not_shown_stale(fleet, when):
    """Same size, same mtime, new bytes (the ctime gives it away), in a shard the cache has not
    read yet, or in one it has read already."""
    Inbox.open([fleet], cached=True)
    base = Inbox.open([fleet], cached=True).cache  # the misses of a warm scan (uncached files)
    assert base is not None
    inbox = Inbox.deferred([fleet])
    inbox.prepare()  # reads the first shard with entries
    assert inbox.cache is not None
    read = {n for n in range(SHARDS) if n not in inbox.cache._pending}
    loops = [fleet / f"loop-{i:02d}" for i in range(LOOPS)]
    pick = [r for r in loops if (shard_of(r) in read) == (when.startswith("after"))]
    repo = pick[0]
    path = repo / "BLOCKED.md"
    st = path.stat()
    number = str(int(repo.name.removeprefix("loop-")))
    what = "loop " + "X" * len(number)  # as long as "loop 7": the size does not change
    path.write_text(BLOCKED.format(what=what))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    inbox.scan()
    block = inbox.resolve(str(path))
    assert block.question == Inbox.open([fleet]).resolve(str(path)).question
    assert block.question == f"Ship {what}?", block.question
    assert inbox.cache.misses == base.misses + 1
