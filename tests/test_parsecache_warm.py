"""Issue 30, row 4: a warm scan holds each block once, and one shard's fields at a time.

At 50,000 blocks the shards as read (every field of every block as JSON gave it: lists, the
choices' texts, the encoded metas) took 200 MB, all held until the scan's end beside the
Blocks made from them. Now a thawed entry keeps its Block, a warm scan reads one shard's
repositories after another, and each shard's fields are let go as its blocks are made. These
tests check that, and that the blocks, the listing and the shards saved again are exactly
what a cold parse gives, on the sample, real and hostile files of test_parsecache_lazy.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hitl_tui.inbox import parsecache
from hitl_tui.inbox.codec import loads
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.inbox.parsecache import ParseCache
from tests import test_parsecache_lazy as lazy

# The sample, real and hostile fleet of test_parsecache_lazy, with its files cached at once.
fleet = lazy.fleet
pytestmark = pytest.mark.usefixtures("cached_at_once")
fields = lazy.fields

ROOT = Path(__file__).resolve().parent.parent


def _fields_held(cache: ParseCache) -> int:
    """Entries whose block is held as the fields read from a shard, not as a Block."""
    tables = [*cache._entries, *(cache._previous or [])]
    return sum(type(entry[2]) is list for table in tables for entry in table.values())


def test_a_warm_scan_lets_each_shards_fields_go_before_reading_the_next(
    fleet: Path, monkeypatch
) -> None:
    cold = Inbox.open([fleet])  # no cache: every file parsed
    Inbox.open([fleet], cached=True)  # fills the cache
    held_at_read: list[int] = []
    real = ParseCache._read

    def spying(self: ParseCache, shard: int):
        held_at_read.append(_fields_held(self))
        return real(self, shard)

    monkeypatch.setattr(ParseCache, "_read", spying)
    warm = Inbox.open([fleet], cached=True)
    assert warm.cache is not None and warm.cache.hits > 50  # (hostile files: misses)
    # The first shard is read before the scan; each other one when its first repository is
    # met, by then every block of the shards before it made and their fields let go.
    assert len(held_at_read) == parsecache.SHARDS
    assert held_at_read == [0] * parsecache.SHARDS
    assert _fields_held(warm.cache) == 0
    # The blocks are the ones a parse gives, field by field (meta too).
    assert warm.blocks.keys() == cold.blocks.keys()
    for key, block in warm.blocks.items():
        assert fields(block) == fields(cold.blocks[key]), key
    # The few texts many blocks carry alike are one object each (one more for those parsed
    # afresh: the hostile files the cache does not keep).
    for name in ("source",):
        values = [getattr(b, name) for b in warm.blocks.values()]
        assert len({id(v) for v in values}) <= 2 * len(set(values)), name


def test_a_second_look_at_an_unchanged_file_gives_the_same_block(fleet: Path) -> None:
    Inbox.open([fleet], cached=True)
    warm = Inbox.open([fleet], cached=True)
    assert warm.cache is not None
    before = dict(warm.blocks)
    hits = warm.cache.hits
    delta = warm.handle([b.path for b in before.values() if isinstance(b.path, Path)])
    assert not delta.added and not delta.changed and not delta.removed
    assert warm.cache.hits > hits
    for key, block in warm.blocks.items():
        assert fields(block) == fields(before[key])


def test_thawed_blocks_are_saved_as_the_rows_they_were_read_from(fleet: Path) -> None:
    first = Inbox.open([fleet], cached=True)
    assert first.cache is not None and first.cache.folder is not None
    folder = first.cache.folder
    written = {p.name: loads(p.read_bytes()) for p in sorted(folder.glob("shard-*.json"))}
    assert len(written) == parsecache.SHARDS

    warm = Inbox.open([fleet], cached=True)
    assert warm.cache is not None and _fields_held(warm.cache) == 0
    for p in folder.glob("shard-*.json"):
        p.unlink()
    warm.cache._dirty.update(range(parsecache.SHARDS))
    warm.cache.save()
    again = {p.name: loads(p.read_bytes()) for p in sorted(folder.glob("shard-*.json"))}
    assert again == written


def test_list_json_warm_is_byte_identical_to_cold(fleet: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HITL_STATE_DIR": str(tmp_path / "state")}
    env["HITL_CONFIG"] = str(tmp_path / "none.toml")
    cmd = [sys.executable, "-m", "hitl_tui", "list", "--json", str(fleet)]
    cold, warm = (subprocess.run(cmd, capture_output=True, check=True, env=env) for _ in "ab")
    assert list((tmp_path / "state" / "parse-cache").glob("*/shard-*.json"))
    assert warm.stdout == cold.stdout and len(cold.stdout) > 1000


def test_every_change_is_read_again_by_a_scan_after_a_warm_one(fleet: Path) -> None:
    """In one process (the app's rescans): once a warm scan made its entries Blocks, a file
    edited in place (same size, same mtime), one replaced by a rename, one added, one removed,
    a repository added and one removed all show at the next scan as a cold parse shows them."""
    Inbox.open([fleet], cached=True)
    inbox = Inbox.open([fleet], cached=True)
    assert inbox.cache is not None and _fields_held(inbox.cache) == 0
    edited = fleet / "loop-03" / "BLOCKED.md"
    st = edited.stat()
    edited.write_text(lazy.BLOCKED.format(what="loop X"))  # as long as "loop 3"
    os.utime(edited, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert edited.stat().st_size == st.st_size and edited.stat().st_mtime_ns == st.st_mtime_ns
    renamed = fleet / "loop-04" / "BLOCKED.md"
    spare = renamed.with_name("new.tmp")
    spare.write_text(lazy.BLOCKED.format(what="the rename"))
    os.utime(spare, ns=(renamed.stat().st_atime_ns, renamed.stat().st_mtime_ns))
    os.replace(spare, renamed)
    tasks = fleet / "hostile-tasks" / ".agenticloop" / "tasks"
    (tasks / "T-009.md").write_text(lazy.TASK.format(n=9))
    (fleet / "loop-05" / "BLOCKED.md").unlink()
    (fleet / "loop-new" / ".git").mkdir(parents=True)
    (fleet / "loop-new" / "BLOCKED.md").write_text(lazy.BLOCKED.format(what="a new repo"))
    shutil.rmtree(fleet / "loop-06")
    inbox.workspace.rescan()
    inbox.scan()
    cold = Inbox.open([fleet])
    assert inbox.blocks.keys() == cold.blocks.keys()
    for key, block in inbox.blocks.items():
        assert fields(block) == fields(cold.blocks[key]), key
    assert inbox.resolve(str(edited)).question == "Ship loop X?"
    assert inbox.resolve(str(renamed)).question == "Ship the rename?"
    assert inbox.resolve(str(tasks / "T-009.md")).id.endswith("T-009")
    assert inbox.resolve(str(fleet / "loop-new" / "BLOCKED.md")).question == "Ship a new repo?"
