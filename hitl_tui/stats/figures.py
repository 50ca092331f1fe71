"""The figures `hitl stats` and the app's stats screen show: plain frozen dataclasses.

Every figure is `None` when it is not known (a journal segment pruned by retention, a remote
host not reached, answers recorded by an older hitl without their block's start time), and
never 0 for unknown: 0 means "counted, and there were none". Why a figure is unknown is in
`Stats.unknowns`.

Durations are seconds (float); times are aware datetimes. `to_json` gives the `--json` form
(README "Fleet stats"): a field is only ever added.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import date, datetime
from typing import Any


@dataclass(frozen=True)
class Figures:
    """One row: the whole fleet (`key` ""), one repository, one source or one day. A day's row
    holds what happened that day: the answers given, the blocks begun (those still open are its
    `open_now`), the outcomes of its answers, the time blocked within it."""

    #: "" for the overall row; else the repository (a local folder's path as text, a remote
    #: block's repo name), the source name (`loopkit`, `agenticloop`, a [[remote]]'s name), or
    #: the ISO day (`2026-12-03`, in the local time zone), as `Stats.by` says.
    key: str
    #: Blocks that began in the window: those answered (answers that stand) and those open now.
    opened: int | None
    #: Answers given in the window that stand (committed, not rolled back; an undone one too:
    #: see `undone`). Undo entries themselves are never answers.
    answered: int | None
    #: Time to answer (the answer's time minus when its block began: `block.since`, as first
    #: seen), over the answers given in the window that were not undone: median, 90th
    #: percentile (nearest rank) and the longest, in seconds.
    wait_median_s: float | None
    wait_p90_s: float | None
    wait_max_s: float | None
    #: Block-seconds spent blocked inside the window: every block's [began, answered or now)
    #: clipped to the window, summed (two loops blocked for an hour are two hours).
    blocked_s: float | None
    #: Blocks open now, and how long the oldest of them has waited (seconds; None when none is
    #: open, or when the open blocks are not known).
    open_now: int | None
    oldest_open_s: float | None
    #: Answers given in the window that were undone since (`hitl undo`, `u` in the app).
    undone: int | None
    #: Answers whose loop wrote a new block after it (the resume book's sign "asked again"),
    #: and that count over `outcomes_known`.
    asked_again: int | None
    asked_again_rate: float | None
    #: Answers whose loop showed no sign within its resume_within (still not resumed), and
    #: that count over `outcomes_known`.
    not_resumed: int | None
    not_resumed_rate: float | None
    #: Answers whose loop restart (`[[loop]]`, R, hitl restart) failed and has not succeeded.
    restarts_failed: int | None
    #: Answers given in the window whose loop outcome the resume book still holds (it keeps
    #: closed records 7 days): the denominator of the two rates.
    outcomes_known: int | None

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class Day:
    """One day of the window (local time zone): the daily chart's bar."""

    day: date
    #: Blocks that began that day (answered since, or open now); None: unknown (pruned).
    opened: int | None
    #: Answers given that day that stand; None: unknown (that day's journal was pruned).
    answered: int | None
    #: Block-seconds blocked within that day (see `Figures.blocked_s`).
    blocked_s: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "day": self.day.isoformat(),
            "opened": self.opened,
            "answered": self.answered,
            "blocked_s": self.blocked_s,
        }


@dataclass(frozen=True)
class Unknown:
    """Something the figures could not know, said once: why some figures are None."""

    #: "journal" (segments pruned by retention), "host" (a [[remote]] host not reached),
    #: "outcomes" (the resume book no longer holds the loop outcomes of older answers),
    #: "since" (answers journaled by an older hitl, without their block's start).
    kind: str
    #: What, in words: `journal before 2026-09-04 10:15`, `host build-1 (agents)`.
    what: str
    #: Since when it is unknown: for a host, when it was last reached (None: never, as far as
    #: hitl knows); for the journal, the time up to which records were pruned; for outcomes,
    #: the time before which the book holds none.
    since: datetime | None
    #: Why, one line (an error message, "pruned by journal_keep 90d").
    why: str
    #: For a host: the backend's name (`Block.source`), and the ssh host (its repos are
    #: `host:path`); "" for the others, or a backend not reached as a whole (GitHub).
    source: str = ""
    host: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "what": self.what,
            "since": self.since.isoformat() if self.since else None,
            "why": self.why,
            "source": self.source,
            "host": self.host,
        }


@dataclass(frozen=True)
class Stats:
    """The figures of one window [since, until): overall, by row, by day."""

    since: datetime
    until: datetime
    #: How `rows` are keyed: "repo", "source" or "day".
    by: str
    overall: Figures
    #: One row per key, most blocked first (None last), then by key.
    rows: tuple[Figures, ...]
    #: Every day of the window, oldest first (a day with nothing is there, with zeros).
    days: tuple[Day, ...]
    unknowns: tuple[Unknown, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "format": 1,
            "since": self.since.isoformat(),
            "until": self.until.isoformat(),
            "by": self.by,
            "overall": self.overall.to_json(),
            "rows": [r.to_json() for r in self.rows],
            "days": [d.to_json() for d in self.days],
            "unknowns": [u.to_json() for u in self.unknowns],
        }
