"""What the app's workers report back: small dataclass Messages, posted from their threads.

A worker never calls into the app; it posts one of these to its own node (`post_message` is
thread-safe) and that node's handler runs on the UI thread: the scan's to the app, the answer's
and the undo's to the inbox screen. A worker that raises is reported by the app's one
`worker_failed` instead (the inbox screen forwards its workers' failures there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from textual.message import Message
from textual.worker import Worker

from hitl_tui.answers import service
from hitl_tui.answers.batch import Batch
from hitl_tui.inbox.inbox import Delta
from hitl_tui.loops import notices
from hitl_tui.loops.commands import Ran
from hitl_tui.model import Block
from hitl_tui.tui.toasts import ProgressToasts


@dataclass
class ScanBatch(Message):
    """Blocks the first scan found since its last batch (the first batch also brings the rows
    of answers waiting for their loop), and how far it is: repositories read, of how many."""

    blocks: list[Block]
    done: int
    total: int


@dataclass
class ScanDone(Message):
    """The first scan finished: every open block, in row order."""

    blocks: list[Block]
    #: The rows of answers still waiting for their loop (`tui.waiting.row_for`).
    waiting: list[Block] = field(default_factory=list)


@dataclass
class Answered(Message):
    """An answer was applied: what was done (the answer service's `Answered`), and what it
    changed in the inbox."""

    answered: service.Answered
    delta: Delta
    #: The operator left the `[[loop]]` restart on in the preview (`r` turns it off).
    restart: bool = True


@dataclass
class Restarted(Message):
    """The `[[loop]]` restart run after an answer finished (`loops.Ran`: ok, or why not)."""

    block: Block
    ran: Ran
    #: The answer waiting for this loop, back to waiting after a restart, or restart failed
    #: (`resume.Waiting`).
    waiting: object | None = None


@dataclass
class WaitingLooked(Message):
    """The answers waiting for their loops, looked at again (the timer): those that changed,
    and every one still open, as the state file says now."""

    changed: list
    open_now: list


@dataclass
class ListChanged(Message):
    """A change of the list a worker made (an answer dropped from the waiting rows)."""

    delta: Delta


@dataclass
class AnswerStale(Message):
    """The block changed since it was read: nothing was written."""

    block: Block
    message: str


@dataclass
class Undone(Message):
    """An answer was undone (`u` in the inbox)."""

    message: str
    delta: Delta


@dataclass
class Refused(Message):
    """An answer or an undo was refused (a one-line reason); nothing was written."""

    title: str
    message: str


@dataclass
class BatchApplied(Message):
    """A batch was applied (`answers.batch.apply_batch`): the batch as applied (written,
    refused, skipped), and what it changed in the inbox."""

    batch: Batch
    delta: Delta


@dataclass
class BatchUndone(Message):
    """A batch was undone: one line per answer (undone, refused with why, skipped)."""

    lines: list[str]
    delta: Delta


@dataclass
class HistoryUndone(Message):
    """An answer (or a batch) of the history was undone: the toast, the inbox's change, the
    new history."""

    message: str
    delta: Delta
    entries: list


class Host(Protocol):
    """What the inbox screen asks of its app (HitlApp), which it cannot import (a cycle)."""

    def apply_delta(self, delta: Delta, announce: bool = False) -> None:
        """The inbox changed: the list, the header, the configuration warnings follow."""

    def worker_failed(self, worker: Worker) -> None:
        """A worker raised: say what failed."""

    def send_notice(self, notice: notices.Notice, shared: notices.Shared | None = None) -> None:
        """`notice` on the channels of the config's [notify] (desktop, terminal, ...)."""

    @property
    def progress(self) -> ProgressToasts:
        """Each answer's one toast (`toasts.ProgressToasts`), updated as it goes."""
