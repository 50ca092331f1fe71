"""The journal as a remote backend records in it (`sources.remote.RemoteJournal`): the config
hands one to the backends as it builds them, so that a backend (below the journal) never
imports it. Each method is the journal's own function of the same name (`entries`).
"""

from __future__ import annotations

from typing import Any

from hitl_tui.journal import entries
from hitl_tui.model import Plan


class SentJournal:
    """The journal here, for the answers a remote backend sends (`RemoteJournal`)."""

    def record_remote(
        self,
        plan: Plan,
        summary: str,
        not_undoable: str | None,
        sent: dict[str, Any] | None = None,
    ) -> str:
        return entries.record_remote(plan, summary, not_undoable, sent)

    def remote_fields(self, plan: Plan) -> dict[str, Any]:
        return entries.remote_fields(plan)

    def checked_fields(self, fields: object) -> dict[str, Any] | None:
        return entries.checked_fields(fields)

    def record_prepared(self, fields: object, summary: str, sent: dict[str, Any]) -> str:
        return entries.record_prepared(fields, summary, sent)

    def history(self, limit: int) -> list[entries.Entry]:
        return entries.history(limit=limit)

    def entry(self, entry_id: str) -> entries.Entry:
        return entries.entries()[entry_id]
