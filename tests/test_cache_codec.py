"""The parse cache's two JSON codecs: orjson where it is exact, the stdlib's json elsewhere.

orjson refuses ints beyond 64 bits and strings that are not UTF-8 (a path of undecodable
bytes), writes NaN as null, and reads an int beyond 64 bits back as a float. Each case must
come back from a warm start exactly as a cold parse gave it, read from the cache (no miss).
"""

from __future__ import annotations

import gc
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hitl_tui.inbox import codec as blockcodec
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.inbox.parsecache import ParseCache, gc_paused
from hitl_tui.sources.agenticloop import parse as agenticloop

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


# Files written just now are cached (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("cached_at_once")


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    root = tmp_path / "fleet"
    for i in range(4):
        repo = root / f"loop-{i}"
        (repo / ".git").mkdir(parents=True)
        (repo / "BLOCKED.md").write_text(BLOCKED.format(what=i))
        tasks = root / f"tasks-{i}" / ".agenticloop" / "tasks"
        tasks.mkdir(parents=True)
        (tasks / "T-001.md").write_text(TASK.format(n=i))
    return root


def shards(root: Path) -> dict[str, bytes]:
    folder = ParseCache.for_workspace((root,)).folder
    assert folder is not None
    return {p.name: p.read_bytes() for p in sorted(folder.glob("shard-*.json"))}


def codec_of(data: bytes) -> str:
    return json.loads(data).get("codec", "json")


def warm_equals_cold(root: Path) -> Inbox:
    cold = Inbox.open([root], cached=True)
    warm = Inbox.open([root], cached=True)
    assert warm.cache is not None and warm.cache.misses == 0 and warm.cache.hits > 0
    assert set(warm.blocks) == set(cold.blocks)
    for key, block in warm.blocks.items():
        twin = cold.blocks[key]
        assert block == twin and block.meta == twin.meta and block.raw == twin.raw
    return warm


def test_plain_shards_are_orjsons(fleet: Path) -> None:
    warm_equals_cold(fleet)
    assert {codec_of(data) for data in shards(fleet).values()} == {"orjson"}


def test_a_path_of_undecodable_bytes_is_cached_through_json(fleet: Path) -> None:
    folder = os.fsencode(fleet) + b"/caf\xe9-shop"
    os.makedirs(folder + b"/.git")
    with open(folder + b"/BLOCKED.md", "w") as f:
        f.write(BLOCKED.format(what="the café"))
    warm = warm_equals_cold(fleet)
    [block] = [b for b in warm.blocks.values() if b"\xe9" in os.fsencode(b.path)]
    assert os.fsencode(block.repo) == folder and block.question == "Ship the café?"
    codecs = {name: codec_of(data) for name, data in shards(fleet).items()}
    # Its shard is json's (surrogates escaped); the others stay orjson's.
    assert "json" in codecs.values() and "orjson" in codecs.values()


def big_header(monkeypatch, value) -> None:
    """Every task's header gains `n: value` (agenticloop's reader makes text only)."""
    real = agenticloop.load_header

    def load(text: str) -> dict:
        data = real(text)
        data["n"] = value
        return data

    monkeypatch.setattr(agenticloop, "load_header", load)
    # Planted through the full rules' load_header (a plain header is read without it).
    monkeypatch.setattr(agenticloop, "FAST_HEADER", False)


def test_an_int_beyond_64_bits_comes_back_an_int(fleet: Path, monkeypatch) -> None:
    big_header(monkeypatch, (1 << 70) + 1)
    warm = warm_equals_cold(fleet)
    tasks = [b for b in warm.blocks.values() if b.source == "agenticloop"]
    assert tasks and all(type(b.meta["header"]["n"]) is int for b in tasks)
    assert all(b.meta["header"]["n"] == (1 << 70) + 1 for b in tasks)
    assert "json" in {codec_of(data) for data in shards(fleet).values()}


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_a_float_json_has_no_word_for_comes_back(fleet: Path, monkeypatch, value) -> None:
    big_header(monkeypatch, value)
    Inbox.open([fleet], cached=True)
    warm = Inbox.open([fleet], cached=True)
    assert warm.cache is not None and warm.cache.misses == 0
    tasks = [b for b in warm.blocks.values() if b.source == "agenticloop"]
    got = [b.meta["header"]["n"] for b in tasks]
    assert tasks and all(type(n) is float for n in got)
    assert all(math.isnan(n) for n in got) if math.isnan(value) else got == [value] * len(got)


def test_a_shard_that_lies_about_its_codec_is_not_trusted(fleet: Path) -> None:
    """json wrote a signature int beyond 64 bits; the shard claims orjson wrote it: orjson
    would read a float, which is no signature, and the entries are parsed again."""
    Inbox.open([fleet], cached=True)
    folder = ParseCache.for_workspace((fleet,)).folder
    assert folder is not None
    for name, data in shards(fleet).items():
        doc = json.loads(data)
        for row in doc["entries"]:
            row[2][0] = 1 << 70
        doc["codec"] = "orjson"
        (folder / name).write_text(json.dumps(doc))
        (folder / name).chmod(0o600)
    again = Inbox.open([fleet], cached=True)
    assert again.cache is not None and again.cache.hits == 0
    assert {b.id for b in again.blocks.values()} == {
        b.id for b in Inbox.open([fleet]).blocks.values()
    }


def test_loads_reads_what_either_codec_wrote() -> None:
    doc = {"format": 1, "text": "caf\udce9", "n": 1 << 70, "f": 0.1}
    written = blockcodec.dumps(doc)
    assert b'"codec"' not in written  # orjson refused it
    assert blockcodec.loads(written) == doc
    plain = {"format": 1, "text": "café", "n": 1 << 62}
    assert blockcodec.loads(blockcodec.dumps(plain)) == {**plain, "codec": "orjson"}
    assert type(blockcodec.loads(blockcodec.dumps(plain))["n"]) is int


def test_gc_paused_nests_and_restores_the_collector() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()


def test_what_a_pause_made_is_old_and_not_frozen_after_it() -> None:
    """The first collection after a scan must not walk every block it made (the youngest
    generation holds them all until then): they are moved to the oldest, not frozen."""
    assert gc.get_freeze_count() == 0
    with gc_paused():
        made = [[n] for n in range(50_000)]
    assert gc.get_freeze_count() == 0 and gc.get_count()[0] < 1_000
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert id(made) in oldest and id(made[-1]) in oldest


def test_list_json_is_the_same_through_either_encoder(fleet: Path) -> None:
    """`list --json` (orjson, json for a lone surrogate) parses to what the Blocks say."""
    folder = os.fsencode(fleet) + b"/caf\xe9-shop"
    os.makedirs(folder + b"/.git")
    with open(folder + b"/BLOCKED.md", "w") as f:
        f.write(BLOCKED.format(what="the café"))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    run = subprocess.run(
        [sys.executable, "-m", "hitl_tui", "list", "--json", str(fleet)],
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    run.stdout.decode("utf-8")  # strict: valid UTF-8 throughout
    rows = json.loads(run.stdout)
    expected = [b.to_json() for b in Inbox.open([fleet]).sorted_blocks()]
    for row in rows:
        assert row.pop("snoozed") is False and row.pop("snoozed_until") is None
        assert row.pop("asked_again") is None
    assert rows == expected
    assert any(os.fsencode(r["repo"]) == folder for r in rows)
