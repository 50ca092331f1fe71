"""The app's answers whose connection dropped before their machine said whether it wrote them
(`Pending`), kept in the state folder's `remote-pending.json` (`PendingStore`): a restarted
app asks that machine's journal again (`SshBackend.settle_pending`), and an answer told by one
app is not told twice by another reading the same file.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from hitl_tui.state import files as statefile
from hitl_tui.timefmt import aware_time

#: Checks what the journal will record of an answer, read back (`RemoteJournal.checked_fields`).
CheckFields = Callable[[object], "dict[str, Any] | None"]

#: The app's answers whose connection dropped before that machine said whether it wrote
#: them, in the state folder: a restarted app asks again (`SshBackend.settle_pending`).
PENDING_FILE = "remote-pending.json"
PENDING_FORMAT = 1
PENDING_MAX_BYTES = 8 << 20
#: A pending answer older than this is asked about no more (its machine's `hitl history`
#: still says what became of it).
PENDING_KEEP = timedelta(days=7)
#: The most of them kept (the newest).
PENDING_MAX = 1000
#: How an answer whose connection dropped is looked for in that machine's journal: an entry
#: for the same block bytes, begun no earlier than this before the send (clocks differ).
SKEW = timedelta(minutes=5)


@dataclass(frozen=True)
class Pending:
    """An answer whose connection dropped before its machine said whether it wrote it."""

    id: str  # its own, in the state file
    host: str
    began: datetime
    fingerprint: str  # the block's bytes as answered: how its far journal entry is found
    block_id: str
    repo: str  # the repository there (its journal is asked of it); "" when not known
    #: What the journal here will record of it (`journal.remote_fields`), once that
    #: machine's journal says it was written.
    fields: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "host": self.host,
            "began": self.began.isoformat(),
            "fingerprint": self.fingerprint,
            "block_id": self.block_id,
            "repo": self.repo,
            "fields": self.fields,
        }

    @classmethod
    def from_json(cls, item: object, checked_fields: CheckFields) -> Pending | None:
        """One from the state file, or None when it is not one (the file is ours, but any
        file can be damaged): every field checked, the journal's too (`checked_fields`)."""
        if not isinstance(item, dict):
            return None
        names = ("id", "host", "began", "fingerprint", "block_id", "repo")
        texts = [t for t in (item.get(k) for k in names) if isinstance(t, str) and len(t) <= 4096]
        if len(texts) != len(names):
            return None
        fields = checked_fields(item.get("fields"))
        if fields is None or not texts[0]:
            return None
        began = aware_time(texts[2])
        if began is None:
            return None
        return cls(texts[0], texts[1], began, texts[3], texts[4], texts[5], fields)


class PendingStore:
    """The pending answers of the configured hosts, by host: here, and (the app) in the
    state file, changed under its lock."""

    def __init__(self) -> None:
        self.by_host: dict[str, list[Pending]] = {}
        self._stored: set[str] = set()  # the ids of those the state file holds
        self._lock = threading.Lock()

    def of(self, host: str) -> list[Pending]:
        with self._lock:
            return list(self.by_host.get(host, []))

    def keep(self, pending: Pending) -> None:
        """Keep `pending`: in the state file first, then here (a look at that host meanwhile
        does not see it before the file holds it)."""
        stored = self._store(lambda items: [*items, pending.to_json()][-PENDING_MAX:])
        with self._lock:
            if stored is not None:
                self._stored.add(pending.id)
            self.by_host.setdefault(pending.host, []).append(pending)

    def claim(self, pending: Pending) -> bool:
        """Forget `pending` here and in the state file; False when another app (reading the
        same file) has told and forgotten it already: it is not told twice."""
        with self._lock:
            left = [p for p in self.by_host.get(pending.host, []) if p is not pending]
            self.by_host[pending.host] = left
            stored = pending.id in self._stored
            self._stored.discard(pending.id)
        before = self._store(lambda items: [i for i in items if _item_id(i) != pending.id])
        if before is None or not stored:
            return True  # the file cannot be used, or it never held this one
        return pending.id in before

    def _store(self, change: Callable[[list[Any]], list[Any]]) -> set[object] | None:
        """Change the state file's list, under its lock; the ids it held before. None: there
        is no usable file (none can be written, or the one there was damaged: it is written
        anew), and what was in it is not known."""
        path = statefile.in_state(PENDING_FILE)
        if path is None:
            return None
        try:
            with statefile.locked(path):
                held: set[object] | None
                try:
                    items = statefile.read(path, PENDING_FORMAT, PENDING_MAX_BYTES).get("pending")
                    held = {_item_id(i) for i in items} if isinstance(items, list) else set()
                except statefile.Unusable:
                    items, held = [], None
                kept = change(items if isinstance(items, list) else [])
                statefile.write(path, {"format": PENDING_FORMAT, "pending": kept})
        except OSError:
            return None
        return held

    def load(self, hosts: Collection[str], checked_fields: CheckFields) -> None:
        """The answers a previous app left not known yet, for `hosts` (the state file's
        others stay in it: another config may name their host)."""
        path = statefile.in_state(PENDING_FILE)
        if path is None:
            return
        try:
            items = statefile.read(path, PENDING_FORMAT, PENDING_MAX_BYTES).get("pending")
        except statefile.Unusable:
            return
        now = datetime.now(UTC)
        with self._lock:
            known = {p.id for ps in self.by_host.values() for p in ps}
        dropped = []
        for item in items if isinstance(items, list) else []:
            pending = Pending.from_json(item, checked_fields)
            if pending is None or pending.began > now + SKEW:  # damaged, or a clock ahead
                dropped.append(_item_id(item))
            elif pending.host in hosts and pending.id not in known:
                with self._lock:
                    self.by_host.setdefault(pending.host, []).append(pending)
                    self._stored.add(pending.id)
                known.add(pending.id)
        if dropped:
            self._store(lambda items: [i for i in items if _item_id(i) not in dropped])


def _item_id(item: object) -> object:
    return item.get("id") if isinstance(item, dict) else None
