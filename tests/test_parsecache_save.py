"""The parse cache's save: each row encoded as it is made (`codec.dumps_rows`), and the texts
the app keeps left as they were (`codec.unshared`).

The shards written row by row must be the very bytes the whole document gave (`codec.dumps`),
on the fixtures and on hostile blocks (texts that are not ASCII, a path of undecodable bytes,
an int beyond 64 bits, a float JSON has no word for): anything orjson cannot write falls back
to the whole document, json's.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
from pathlib import Path

import pytest

from hitl_tui.inbox import codec, parsecache
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.inbox.parsecache import ParseCache
from hitl_tui.sources.agenticloop import parse as agenticloop

FIXTURES = Path("/work/shared/fixtures")
if not FIXTURES.is_dir():  # CI's checkout keeps them beside the tests
    FIXTURES = Path(__file__).resolve().parent / "fixtures"

BLOCKED = """\
# Blocked

## Question:
Should {name} keep its legacy endpoint — one more release? 🚢

## Context:
Step {n}: naïve façade, 日本語 text, and a tab\there.

## Choices:
- A) Keep it — one more release of upkeep.
- B) Remove it — clients on the old version break.
"""
TASK = """\
---
task_id: T-{n:03d}
status: blocked
block_category: credentials
owner: Zoë {n}
---

# T-{n:03d} - Task {n} — ünïcode

## Comments
- 2026-11-20: Blocked (credentials): Needed: a token {n} — from the café.
"""


# Files written just now are cached (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("cached_at_once")


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    root = tmp_path / "fleet"
    root.mkdir()
    for name in os.listdir(FIXTURES) if FIXTURES.is_dir() else []:
        if (FIXTURES / name).is_dir():
            shutil.copytree(FIXTURES / name, root / name, symlinks=True)
    for i in range(40):
        repo = root / f"loop-{i:02d}"
        (repo / ".git").mkdir(parents=True)
        (repo / "BLOCKED.md").write_text(BLOCKED.format(name=f"repo {i}", n=i))
        tasks = root / f"tasks-{i:02d}" / ".agenticloop" / "tasks"
        tasks.mkdir(parents=True)
        for n in range(3):
            (tasks / f"T-{n:03d}.md").write_text(TASK.format(n=n + i))
    return root


def _shards(cache: ParseCache) -> dict[str, bytes]:
    assert cache.folder is not None
    return {p.name: p.read_bytes() for p in sorted(cache.folder.glob("shard-*.json"))}


def _saved_both_ways(root: Path, tmp_path: Path, monkeypatch) -> tuple[dict, dict, Inbox]:
    """The shards of one scan saved row by row, then (the same entries, another folder) as
    one whole document: the save before `dumps_rows`."""
    inbox = Inbox.open([root], cached=True)
    cache = inbox.cache
    assert cache is not None and len(cache) > 100
    streamed = _shards(cache)
    whole_folder = tmp_path / "whole"
    cache.folder = whole_folder
    cache._dirty.update(range(parsecache.SHARDS))
    with monkeypatch.context() as m:
        m.setattr(parsecache, "dumps_rows", lambda head, name, rows: None)
        cache.save()
    return streamed, _shards(cache), inbox


def test_shards_written_row_by_row_are_the_whole_documents_bytes(
    fleet: Path, tmp_path: Path, monkeypatch
) -> None:
    streamed, whole, inbox = _saved_both_ways(fleet, tmp_path, monkeypatch)
    assert len(streamed) == parsecache.SHARDS and streamed == whole
    assert {codec.loads(data)["codec"] for data in streamed.values()} == {"orjson"}
    # and a warm start reads them back to the blocks a cold parse gave
    warm = Inbox.open([fleet], cached=True)
    assert warm.cache is not None and warm.cache.hits > 100
    assert set(warm.blocks) == set(inbox.blocks)
    for key, block in warm.blocks.items():
        assert block == inbox.blocks[key] and block.meta == inbox.blocks[key].meta


@pytest.mark.parametrize("value", [1 << 70, math.nan, -math.inf])
def test_a_row_orjson_cannot_write_makes_its_shard_whole_as_before(
    fleet: Path, tmp_path: Path, monkeypatch, value
) -> None:
    real = agenticloop.load_header

    def header(text: str) -> dict:
        data = real(text)
        if data.get("task_id") == "T-005":  # one task of one repository
            data["n"] = value
        return data

    monkeypatch.setattr(agenticloop, "load_header", header)
    monkeypatch.setattr(agenticloop, "FAST_HEADER", False)  # (see test_cache_codec)
    streamed, whole, _ = _saved_both_ways(fleet, tmp_path, monkeypatch)
    assert streamed == whole
    codecs = {codec.loads(data).get("codec", "json") for data in streamed.values()}
    assert codecs == {"json", "orjson"} if value == 1 << 70 else {"orjson"}


def test_a_path_of_undecodable_bytes_makes_its_shard_whole_as_before(
    fleet: Path, tmp_path: Path, monkeypatch
) -> None:
    folder = os.fsencode(fleet) + b"/caf\xe9-shop"
    os.makedirs(folder + b"/.git")
    with open(folder + b"/BLOCKED.md", "w") as f:
        f.write(BLOCKED.format(name="the café", n=1))
    streamed, whole, _ = _saved_both_ways(fleet, tmp_path, monkeypatch)
    assert streamed == whole
    assert "json" in {codec.loads(data).get("codec", "json") for data in streamed.values()}


@pytest.mark.parametrize(
    "rows",
    [
        [],
        [["a", "b", [1, 2, 3, 4, 5], "c", None]],
        [["é—🚢", {"k": [1.5, None, True, "日本"]}, -(1 << 63), (1 << 64) - 1]],
        [["\u2028\u2029", '"\\\n\t\x00\x1f', 0.1, -0.0, 1e300]] * 3,
    ],
)
def test_dumps_rows_is_dumps_byte_for_byte(rows: list) -> None:
    head = {"format": parsecache.FORMAT, "stamp": "0123abc"}
    assert codec.dumps_rows(head, "entries", iter(rows)) == codec.dumps({**head, "entries": rows})


@pytest.mark.parametrize("bad", [1 << 64, "\udce9", {1: 2}, math.nan])
def test_dumps_rows_gives_way_on_what_orjson_cannot_write_exactly(bad: object) -> None:
    head = {"format": parsecache.FORMAT, "stamp": "x"}
    result = codec.dumps_rows(head, "entries", iter([["ok"], [bad]]))
    if bad != bad:  # NaN: orjson writes null, as `dumps` does (the codec tags NaN before)
        assert result == codec.dumps({**head, "entries": [["ok"], [bad]]})
    else:
        assert result is None


def test_unshared_is_an_equal_text_of_its_own_when_not_ascii() -> None:
    for text in ["", "a", "ascii only", "é", "façade", "— 🚢", "日本語", "\udce9x"]:
        copy = codec.unshared(text)
        assert copy == text and type(copy) is str
        assert (copy is text) == (text.isascii() or len(text) < 2)


def _sizes(inbox: Inbox) -> list[int]:
    """The memory each text of each block holds (a str keeps its UTF-8 form, once made,
    inside it: `sys.getsizeof` counts it)."""
    out = []

    def walk(value: object) -> None:
        if type(value) is str:
            out.append(sys.getsizeof(value))
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(k)
                walk(v)

    for block in inbox.sorted_blocks():
        for name in codec._FIELDS:
            value = getattr(block, name)
            if name == "choices":
                value = [[c.key, c.option, c.consequence, c.kind] for c in value]
            elif name == "extra":
                value = [[s.title, s.body] for s in value]
            walk(value)
        walk(os.fspath(block.path))
    return out


def test_a_save_leaves_the_blocks_texts_as_they_were(fleet: Path) -> None:
    inbox = Inbox.cached(Inbox.open([fleet]).workspace)
    inbox.scan()
    before = _sizes(inbox)
    assert any(not t.isascii() for b in inbox.blocks.values() for t in (b.raw, b.question))
    inbox.save_cache()
    assert inbox.cache is not None and _shards(inbox.cache)
    assert _sizes(inbox) == before
