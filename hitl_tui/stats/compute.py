"""Computing `Stats` from the journal and the state books.

Inputs: the journal's answers given in the window (segments closed before `since` are never
read), the resume book's records (loop outcomes), and the blocks open now with their
first-seen times (the inbox's blocks: `Block.since` is the since book's first sight).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime, tzinfo
from typing import Any

from hitl_tui.stats.figures import Stats, Unknown

#: The ways rows can be keyed.
BY = ("repo", "source", "day")


def compute(
    *,
    since: datetime,
    by: str = "repo",
    now: datetime | None = None,
    repos: Collection[str] | None = None,
    open_blocks: Iterable[Any] | None = None,
    resumes: Iterable[Any] | None = None,
    unreached: Iterable[Unknown] = (),
    tz: tzinfo | None = None,
) -> Stats:
    """The figures of the window [since, now) from the journal of the state folder.

    - `by`: "repo", "source" or "day" (ValueError otherwise).
    - `repos`: only answers and blocks of these repositories (as text: a local folder's path,
      a remote repo's name); None: every one the journal names.
    - `open_blocks`: the blocks open now (`model.Block`, e.g. `inbox.sorted_blocks()`); None:
      not known, and `open_now` / `oldest_open_s` are None.
    - `resumes`: the resume book's records (`loops.records.Waiting`, `ResumeBook.recent()`);
      None: read the state folder's book.
    - `unreached`: hosts not reached (`unreached_hosts`): their sources' open figures are None.
    - `tz`: the days' time zone (default: the local one).
    """
    raise NotImplementedError
