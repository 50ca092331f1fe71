"""`telegram.json` in the state folder: what the buttons' short tokens name, and the messages
sent (which block each shows, and whether it is still open there).

A button's `callback_data` is at most 64 bytes, and comes back from Telegram untrusted: it is
`h1:` and a random token of TOKEN_CHARS characters, looked up here. Anything else, or a token
not in the book, is refused. The book is one of the state folder's small files
(`state.files`: read and written whole, under a lock); rows older than KEEP are dropped, and at
most MAX_ROWS of each kind are kept (MAX_MESSAGES messages, each text kept to TEXT_KEPT
characters: the file stays a few MB at most, well under MAX_BYTES).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hitl_tui.state import files as statefile

FILE = "telegram.json"
FORMAT = 1
MAX_BYTES = 16 << 20
KEEP = timedelta(days=7)
MAX_ROWS = 5000
MAX_MESSAGES = 1000
#: The most of a message's text kept (to edit it later): a block's message at its longest
#: (`text.MESSAGE_LIMIT`), so that the edit saying what was written shows it all still.
TEXT_KEPT = 3300
PREFIX = "h1:"
TOKEN_CHARS = 12
_DATA = re.compile(rf"{re.escape(PREFIX)}([A-Za-z0-9_-]{{{TOKEN_CHARS}}})\Z")

Row = dict[str, Any]


def token_of(data: object) -> str | None:
    """The token in a button's callback_data, or None: not one of ours."""
    if not isinstance(data, str) or len(data) > 64:
        return None
    match = _DATA.match(data)
    return match.group(1) if match else None


class TelegramBook:
    """The tokens and messages of one chat's bot (`path`: None keeps them in memory only)."""

    def __init__(self, path: Path | None, clock: Callable[[], datetime] | None = None) -> None:
        self.path = path
        self.clock = clock or (lambda: datetime.now(UTC))
        self._memory: dict[str, Any] = {"format": FORMAT}

    @classmethod
    def for_state(cls) -> TelegramBook:
        return cls(statefile.in_state(FILE))

    def _read(self) -> dict[str, Any]:
        if self.path is None:
            return self._memory
        try:
            return statefile.read(self.path, FORMAT, MAX_BYTES)
        except statefile.Unusable:
            return {}

    def _edit(self, change: Callable[[dict[str, Any]], None]) -> None:
        now = self.clock()

        def edit(data: dict[str, Any]) -> bool:
            for kind in ("tokens", "messages"):
                rows = data.get(kind)
                data[kind] = rows if isinstance(rows, dict) else {}
            change(data)
            _prune(data, now)
            return True

        if self.path is None:
            edit(self._memory)
            return
        try:
            statefile.update(self.path, FORMAT, MAX_BYTES, edit)
        except OSError:
            edit(self._memory)

    # -- the buttons' tokens ------------------------------------------------------------------

    def add_tokens(self, rows: list[Row]) -> list[str]:
        """One new token per row (what its button does), each as its button's callback_data."""
        made = [secrets.token_urlsafe(9)[:TOKEN_CHARS] for _ in rows]
        stamp = self.clock().astimezone(UTC).isoformat()

        def change(data: dict[str, Any]) -> None:
            for token, row in zip(made, rows, strict=True):
                data["tokens"][token] = {**row, "t": stamp}

        self._edit(change)
        return [PREFIX + token for token in made]

    def token(self, data: object) -> Row | None:
        """What a button's callback_data names, or None (not ours, unknown, or malformed)."""
        token = token_of(data)
        if token is None:
            return None
        row = self._read().get("tokens", {}).get(token)
        return row if isinstance(row, dict) else None

    # -- the messages ---------------------------------------------------------------------------

    def note_message(self, message_id: int, row: Row) -> None:
        stamp = self.clock().astimezone(UTC).isoformat()

        if isinstance(row.get("text"), str) and len(row["text"]) > TEXT_KEPT:
            row = {**row, "text": row["text"][: TEXT_KEPT - 1] + "…"}

        def change(data: dict[str, Any]) -> None:
            data["messages"][str(message_id)] = {**row, "t": stamp}

        self._edit(change)

    def message(self, message_id: object) -> Row | None:
        if not isinstance(message_id, int) or isinstance(message_id, bool):
            return None
        row = self._read().get("messages", {}).get(str(message_id))
        return row if isinstance(row, dict) else None

    def messages(self, state: str = "open") -> dict[int, Row]:
        """The messages whose block is in `state` ("open": still answerable there)."""
        rows = self._read().get("messages", {})
        out: dict[int, Row] = {}
        for key, row in rows.items() if isinstance(rows, dict) else ():
            if isinstance(row, dict) and row.get("state") == state and key.isdigit():
                out[int(key)] = row
        return out

    def set_state(self, message_id: int, state: str, when: str | None = None) -> bool:
        """Mark a message `state`; False when it was already (another hitl, or a retry)."""
        done = [False]

        def change(data: dict[str, Any]) -> None:
            row = data["messages"].get(str(message_id))
            if (
                isinstance(row, dict)
                and row.get("state") != state
                and (when is None or row.get("state") == when)
            ):
                row["state"] = state
                done[0] = True

        self._edit(change)
        return done[0]


def _prune(data: dict[str, Any], now: datetime) -> None:
    cutoff = (now - KEEP).astimezone(UTC).isoformat()
    for kind in ("tokens", "messages"):
        rows = {
            k: r
            for k, r in data[kind].items()
            if isinstance(k, str) and isinstance(r, dict) and str(r.get("t", "")) >= cutoff
        }
        most = MAX_MESSAGES if kind == "messages" else MAX_ROWS
        newest = sorted(rows.items(), key=lambda kv: str(kv[1].get("t", "")))[-most:]
        data[kind] = dict(newest)
