"""What a remote backend (GitHub issues, another machine over ssh) is to the rest of hitl, and
what the rest of hitl is to it, as typed interfaces (Protocols: nothing here is a base class).

- `RemoteBackend`: what the inbox, the app, answering, undo and resume tracking call on one.
- `RemoteInbox`: the narrow side of the Inbox a backend pushes its blocks into.
- `RemoteJournal`: how a backend that learns of an answer's fate only later (the ssh backend:
  a connection dropped mid-answer) records it in the journal here, and reads back what it
  recorded. The journal layer implements it (`journal.sent.SentJournal`) and the config hands
  it to the backends as it builds them (`registry.remote_sources`): a backend never imports
  the journal, which sits above it.
- `SentEntry`, `AnswerWaiting`: the little a backend reads of a journal entry and of a
  resume record (`journal.Entry`, `resume.Waiting`, both above this layer).

Layer: sources (shared by the backends; it imports none of them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from hitl_tui.model import Answer, Block, Done, Plan
from hitl_tui.sources.base import AnswerWaiting, OnUpdate, RemoteInbox, SentEntry

if TYPE_CHECKING:
    import asyncio


class RemoteJournal(Protocol):
    """The journal here, as a remote backend records its answers in it (`journal.entries`
    says what each record holds). Recording raises OSError or HitlError when it cannot."""

    def record_remote(
        self,
        plan: Plan,
        summary: str,
        not_undoable: str | None,
        sent: dict[str, Any] | None = None,
    ) -> str:
        """Journal an answer already sent; its entry id."""
        ...

    def remote_fields(self, plan: Plan) -> dict[str, Any]:
        """What the journal will record of an answer not known yet to be written (JSON)."""
        ...

    def checked_fields(self, fields: object) -> dict[str, Any] | None:
        """`remote_fields` read back from a file: checked, or None when they are not such."""
        ...

    def record_prepared(self, fields: object, summary: str, sent: dict[str, Any]) -> str:
        """Journal, as done now, the answer of `remote_fields`; its entry id."""
        ...

    def history(self, limit: int) -> Sequence[SentEntry]:
        """The newest `limit` answers journaled, newest first."""
        ...

    def entry(self, entry_id: str) -> SentEntry:
        """The journal's entry `entry_id`; KeyError when it has none."""
        ...


@runtime_checkable
class Journaling(Protocol):
    """A backend that records answers in the journal itself, handed the journal when built."""

    def use_journal(self, journal: RemoteJournal) -> None: ...


class RemoteBackend(Protocol):
    """A remote backend, as the inbox, the app, answering, undo and resume tracking call it
    (`base.Source` says what each method does)."""

    @property
    def name(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def remote(self) -> bool: ...

    @property
    def undoable(self) -> bool: ...

    def read_into(self, inbox: RemoteInbox, warn: Callable[[str], None]) -> None: ...

    async def watch(self, inbox: RemoteInbox, on_update: OnUpdate, stop: asyncio.Event) -> None: ...

    def refresh_soon(self) -> None: ...

    def owns(self, target: str) -> bool: ...

    def read(self, target: str) -> Block: ...

    def plan(self, block: Block, answer: Answer) -> Plan: ...

    def decision_text(self, block: Block, answer: Answer) -> str | None: ...

    def send(self, plan: Plan) -> Done: ...

    def why_not_undoable(self, block: Block) -> str: ...

    def undo_sent(self, entry: SentEntry, operator: str, force: bool = False) -> str: ...

    def resume_signs(self, block: Block, plan: Plan) -> dict[str, Any]: ...

    def resumed(self, waiting: AnswerWaiting) -> str | None: ...

    def shell_argv(self, block: Block) -> list[str] | None: ...
