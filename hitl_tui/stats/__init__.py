"""Fleet stats (`hitl stats`, the app's `S` screen): which loops block most, how long they
wait, and whether the answers took, from the journal and the state books.

    figures   the result's types: `Stats`, `Figures` (a row), `Day`, `Unknown` (None is
              unknown, never zero)
    compute   `compute(...)`: the figures of a window, reading only the journal segments the
              window needs (and a small per-segment summary cached in the state folder);
              `of_inbox(inbox, since=...)`: the same for an Inbox (the CLI's, the app's)
    index     the journal as the window needs it: segments, cached summaries, what was pruned
    remotes   the remote backends read, and since when a host was last reached
    sample    a hand-made Stats (the screen's tests and screenshot)

Layer: beside `loops.similarity` and `answers.apply`: above the journal, the loops' resume
book and the state books, below the clients. Domain code: no Textual.
"""

from __future__ import annotations

from hitl_tui.stats.compute import BY, compute, of_inbox
from hitl_tui.stats.figures import Day, Figures, Stats, Unknown

__all__ = ["BY", "Day", "Figures", "Stats", "Unknown", "compute", "of_inbox"]
