"""Fleet stats (`hitl stats`, the app's `S` screen): which loops block most, how long they
wait, and whether the answers took, from the journal and the state books.

    figures   the result's types: `Stats`, `Figures` (a row), `Day`, `Unknown` (None is
              unknown, never zero)
    compute   `compute(...)`: the figures of a window, reading only the journal segments the
              window needs (and a small per-segment summary cached in the state folder)

Layer: beside `loops.similarity` and `answers.apply`: above the journal, the loops' resume
book and the state books, below the clients. Domain code: no Textual.
"""

from __future__ import annotations

from hitl_tui.stats.compute import BY, compute
from hitl_tui.stats.figures import Day, Figures, Stats, Unknown

__all__ = ["BY", "Day", "Figures", "Stats", "Unknown", "compute"]
