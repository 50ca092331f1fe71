"""The answer journal, as the rest of hitl uses it: every answer is recorded before its first
write, so that a crash can be finished or rolled back on the next start, and an answer can be
undone byte for byte.

The package's face: one import for its callers (apply, the CLI, the app, the GitHub
backend); the work is done by
modules with one job each, and none of them imports this face:

    entries     the record format, entries (`Entry`, `hitl history`), saved bytes, and
                writing an entry's begin, commit and rollback records (what apply needs)
    files       an entry's files in its repository: their state, putting bytes back
    recovery    finishing or rolling back what a crash interrupted
    undo        reverting an answer
    batches     answers given at once (a batch id): their entries, the history grouped by
                batch, and undoing a whole batch (`undo_batch`)
    store       where the records are kept: segments, the open index, retention, paging
    retention   how long closed segments are kept: `journal_keep` of the config

Layer: journal, beside inbox; above sources and state, below agent, loops and answers.
"""

from __future__ import annotations

from hitl_tui.journal.batches import BatchUndone, batch_entries, grouped, undo_batch
from hitl_tui.journal.entries import (
    Entry,
    FileStep,
    abandon,
    begin,
    commit,
    history,
    journal_dir,
    journal_file,
    newest_first,
    record_prepared,
    record_remote,
    remote_fields,
)
from hitl_tui.journal.files import roll_back
from hitl_tui.journal.recovery import recover
from hitl_tui.journal.undo import LoopActed, undo

__all__ = [
    "BatchUndone",
    "Entry",
    "FileStep",
    "LoopActed",
    "abandon",
    "batch_entries",
    "begin",
    "commit",
    "grouped",
    "history",
    "journal_dir",
    "journal_file",
    "newest_first",
    "record_prepared",
    "record_remote",
    "recover",
    "remote_fields",
    "roll_back",
    "undo",
    "undo_batch",
]
