"""Ten machines sending changes at once (issue 30): each change costs the app what it names,
not a pass over every block; the hosts' changes are drawn together a few times a second; a
host's stream updates the inbox by the blocks it changed (`Inbox.patch_remote`), to the same
end as swapping its whole list in. bench/remote_fleet_bench.py measures it end to end."""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime
from pathlib import Path

from hitl_tui.inbox.inbox import Delta, Inbox
from hitl_tui.inbox.view import key_of, row_of
from hitl_tui.inbox.workspace import Workspace
from hitl_tui.model import Block
from hitl_tui.sources.ssh import wire
from hitl_tui.tui import widgets
from hitl_tui.tui.widgets import BlockList
from tests.support import until
from tests.support.pilot import settle
from tests.tui_support import SIZE, make_app

SINCE = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def remote(host: str, n: int, question: str = "Ship?", block_id: str | None = None) -> Block:
    """A block of `host` as its stream brings it (`wire`)."""
    item = {
        "id": block_id or f"r{n}",
        "source": "loopkit",
        "repo": f"/far/r{n}",
        "path": f"/far/r{n}/BLOCKED.md",
        "question": question,
        "since": SINCE.isoformat(),
        "fingerprint": f"sha256:{abs(hash((host, n, question))):064x}",
        "choices": [{"key": "A", "option": "yes"}],
    }
    return wire.block_from_wire(item, host)


def quiet_app(tmp_path: Path):
    repo = tmp_path / "quiet"
    (repo / ".git").mkdir(parents=True)
    return make_app([repo])


async def test_a_change_among_thousands_measures_that_block_alone(tmp_path: Path, monkeypatch):
    """3,000 blocks listed; one changes: its state is measured, not the 3,000 (each change
    measured every block: 270 ms a change at 15,000). A longer id widens its column, and
    its leaving narrows it back."""
    app = quiet_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        blocks = [remote("far", n) for n in range(3000)]
        app.inbox.replace_remote("ssh", "far", blocks)
        app.apply_delta(Delta(added=blocks))
        await pilot.pause()
        table = app.query_one(BlockList)
        assert len(table.order) == 3000
        width = table._longest_id()
        measured: list[Block] = []
        real = widgets.state_words

        def counting(block: Block) -> str:
            measured.append(block)
            return real(block)

        monkeypatch.setattr(widgets, "state_words", counting)
        changed = dataclasses.replace(blocks[5], question="Ship now?", fingerprint="sha256:1")
        app.apply_delta(Delta(changed=[changed]))
        await pilot.pause()
        assert table._longest_id() == width and table._state_width() > 0
        # That block, and the rows drawn again (a screenful), not the 3,000.
        assert len(measured) < 100, f"{len(measured)} blocks measured for one change"
        longer = remote("far", 9999, block_id="a-much-longer-block-id-than-the-others")
        app.apply_delta(Delta(added=[longer]))
        await pilot.pause()
        assert table._longest_id() == len(longer.id) > width
        app.apply_delta(Delta(removed=[key_of(longer)]))
        await pilot.pause()
        assert table._longest_id() == width
        assert len(measured) < 300, f"{len(measured)} blocks measured for three changes"


async def test_ten_hosts_changes_are_drawn_together_and_end_as_the_inbox(tmp_path: Path):
    """Ten hosts, each sending changes in quick succession (50 updates): the list is drawn a
    few times, not 50 (every update was an apply, each a pass over every row), and ends as the
    inbox is: a block added then removed meanwhile is not listed, every change shown."""
    app = quiet_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        hosts = [f"h{i}" for i in range(10)]
        for host in hosts:
            first = app.inbox.replace_remote("ssh", host, [remote(host, n) for n in range(20)])
            await app._on_remote(_Src(), host, "ok", "connected", first)  # type: ignore[arg-type]
        await until(pilot, lambda: len(app.query_one(BlockList).order) == 200, 5)
        draws: list[Delta] = []
        real = app.inbox_screen.apply

        def counted(delta: Delta) -> None:
            draws.append(delta)
            real(delta)

        app.inbox_screen.apply = counted  # type: ignore[method-assign]
        for round_ in range(5):
            for host in hosts:
                now = [remote(host, n, f"Ship? (round {round_})") for n in range(20)]
                if round_ == 2:
                    now.append(remote(host, 99, "Here a moment"))
                delta = app.inbox.replace_remote("ssh", host, now)
                await app._on_remote(_Src(), host, "ok", "connected", delta)  # type: ignore[arg-type]
        table = app.query_one(BlockList)

        def drawn() -> bool:
            return all(table.blocks.get(row_of(b)) is b for b in app.inbox.blocks.values()) and len(
                table.blocks
            ) == len(app.inbox.blocks)

        await until(pilot, drawn, 5, saw=lambda: (len(table.blocks), len(app.inbox.blocks)))
        assert len(draws) <= 3, f"{len(draws)} draws for 50 updates"
        assert not any("Here a moment" in b.question for b in table.blocks.values())
        assert {b.question for b in table.blocks.values()} == {"Ship? (round 4)"}
        app.stop_event.set()


class _Src:
    title = "SSH"


def test_patching_a_hosts_changes_ends_as_swapping_its_whole_list(tmp_path: Path):
    """Random changes, added, changed and removed blocks of one host: patched one change at a
    time and swapped whole, the two inboxes and their deltas agree at every step."""
    rng = random.Random(30)
    whole, patched = Inbox(Workspace.discover([])), Inbox(Workspace.discover([]))
    blocks: dict = {}
    for step in range(300):
        touched = set()
        for _ in range(rng.randint(1, 4)):
            n = rng.randrange(40)
            block = remote("far", n, f"Ship? ({step})")
            key = key_of(block)
            if key in blocks and rng.random() < 0.3:
                del blocks[key]
            else:
                blocks[key] = block
            touched.add(key)
        a = whole.replace_remote("ssh", "far", list(blocks.values()))
        b = patched.patch_remote("ssh", "far", touched, blocks)
        assert sorted(map(key_of, a.added)) == sorted(map(key_of, b.added)), step
        assert sorted(map(key_of, a.changed)) == sorted(map(key_of, b.changed)), step
        assert sorted(a.removed) == sorted(b.removed), step
        assert whole.blocks == patched.blocks, step
