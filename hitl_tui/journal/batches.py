"""Batches in the journal: the answers given at once (`answers.batch`) share a batch id, which
each one's begin record holds (`Entry.batch`). Finding a batch's entries, grouping the
history by batch (`hitl history`: one line per batch), and undoing a whole batch
(`hitl undo BATCH`, `u` on a batch in the app).

A batch id says when its batch was planned (`batch-20261203-114501-3f9a1c`, UTC): every entry
of it is newer, so reading the journal newest first stops there.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from hitl_tui.journal.entries import Entry, newest_first
from hitl_tui.journal.undo import undo
from hitl_tui.model import HitlError, UsageError

_BATCH_ID = re.compile(r"^batch-(\d{8}-\d{6})-[0-9a-f]{6}$")
#: A clock that steps back between planning and writing is allowed this much.
_SLACK = timedelta(minutes=5)


def is_batch_id(text: str) -> bool:
    """Whether `text` is a batch id (`batch-YYYYmmdd-HHMMSS-xxxxxx`)."""
    return bool(_BATCH_ID.match(text.strip()))


def batch_began(batch_id: str) -> datetime | None:
    """When the batch was planned, from its id; None: not a batch id."""
    found = _BATCH_ID.match(batch_id.strip())
    if found is None:
        return None
    return datetime.strptime(found.group(1), "%Y%m%d-%H%M%S").replace(tzinfo=UTC)


def batch_entries(batch_id: str) -> list[Entry]:
    """The answers of batch `batch_id`, newest first (read back only to when it began).
    UsageError when it names no batch of the journal."""
    began = batch_began(batch_id)
    if began is None:
        raise UsageError(f"{batch_id!r} is not a batch id (batch-YYYYmmdd-HHMMSS-xxxxxx)")
    found = []
    for entry in newest_first():
        if entry.time < began - _SLACK:
            break
        if entry.batch == batch_id.strip():
            found.append(entry)
    if not found:
        raise UsageError(f"no batch {batch_id} in the journal (see 'hitl history')")
    return found


@dataclass(frozen=True)
class Group:
    """One line of the history: an answer given alone (`batch` None, one entry), or a batch
    (its id, its entries newest first)."""

    batch: str | None
    entries: tuple[Entry, ...]

    @property
    def newest(self) -> Entry:
        return self.entries[0]


def grouped(entries: Iterable[Entry]) -> Iterator[Group]:
    """`entries` (newest first) with each batch's entries gathered into one Group, where its
    newest entry stands; the others one Group each, in their order. Lazy: a batch is read
    ahead only back to when it began."""
    source = iter(entries)
    ahead: deque[Entry] = deque()  # read ahead while gathering a batch, not part of it
    while True:
        entry = ahead.popleft() if ahead else next(source, None)
        if entry is None:
            return
        batch = entry.batch
        if batch is None:
            yield Group(None, (entry,))
            continue
        began = batch_began(batch)
        members = [entry]
        kept: deque[Entry] = deque()
        past = False
        for later in ahead:
            if later.batch == batch and not past:
                members.append(later)
            else:
                kept.append(later)
            past = past or began is None or later.time < began - _SLACK
        ahead = kept
        while not past:
            read = next(source, None)
            if read is None:
                break
            if read.batch == batch:
                members.append(read)
            else:
                ahead.append(read)
            past = began is None or read.time < began - _SLACK
        yield Group(batch, tuple(members))


@dataclass(frozen=True)
class BatchUndone:
    """What undoing one answer of a batch did: `status` "undone", "refused" (the file that
    changed, or what the loop did since, is in `message`) or "skipped" (undone already)."""

    entry: str
    block_id: str
    status: str
    message: str

    def to_json(self) -> dict[str, Any]:
        return {
            "entry": self.entry,
            "block": self.block_id,
            "status": self.status,
            "message": self.message,
        }


def undo_batch(
    batch_id: str, operator: str, force: bool = False, sources: Sequence[Any] = ()
) -> list[BatchUndone]:
    """Undo every answer of batch `batch_id`, newest first, each as `hitl undo ENTRY` undoes
    one (`undo.undo`, byte for byte, its own lock and journal entry), and each refused on its
    own: where a file it wrote changed since (the file is named), or where its loop has acted
    on it since (`resume.loop_acted`: a commit after it, ...) unless `force`; the others are
    still undone. An answer undone already is "skipped". Returns one `BatchUndone` per
    answer. UsageError when `batch_id` names no batch. `sources`: the remote backends (an
    answer sent to another machine is undone there)."""
    from hitl_tui.loops.resume import forget_undone, loop_acted

    results = []
    for entry in batch_entries(batch_id):
        if entry.undone:
            results.append(
                BatchUndone(entry.id, entry.block_id, "skipped", f"{entry.id} was undone already")
            )
            continue
        if entry.status != "done":
            results.append(
                BatchUndone(entry.id, entry.block_id, "skipped", f"{entry.id} is {entry.status}")
            )
            continue
        try:
            message = undo(
                entry.id,
                operator=operator,
                sources=sources,
                force=force,
                acted=lambda e, where: loop_acted(e, where, sources),
            )
        except HitlError as exc:
            results.append(BatchUndone(entry.id, entry.block_id, "refused", str(exc)))
            continue
        forget_undone(message)
        results.append(BatchUndone(entry.id, entry.block_id, "undone", str(message)))
    return results
