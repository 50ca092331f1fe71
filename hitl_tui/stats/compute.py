"""Computing `Stats` from the journal and the state books.

What each figure is made of (the window is [since, now]):

- an *answer* is a journal entry of kind answer, committed, given in the window (rolled back
  and unfinished entries are none); it is *undone* when a committed undo names it;
- its *wait* is its time minus when its block began: the `block.since` its begin record holds
  (the block's first sight, from the since book, as the answer was given; an undo puts it
  back). hitl records it with every answer; an answer journaled by an older hitl without it
  is counted as answered, but left out of the waits, and makes `opened` and `blocked_s` of
  its rows unknown (an Unknown of kind "since" says how many);
- a *block* is an answer that was not undone (the undone one's block came back: it is open
  now or answered again, with the same start) or a block open now; it is *opened* in the
  window when it began in it, and blocked from when it began until its answer (or now),
  clipped to the window;
- the *outcomes* are the resume book's records answered in the window: asked again (the
  loop's sign was a new block), not resumed, restart failed; the book keeps closed records 7
  days (at most 2,000), so the rates are over the answers it still knows (`outcomes_known`);
- the *open blocks* are those the caller scanned (`open_blocks`, from the inbox: `since` is
  the since book's first sight); a repository not scanned, or of a [[remote]] host not
  reached, has `open_now` None, and so has the overall row then.

A journal pruned by retention within the window makes the journal's figures None (the days
before the cut too), with an Unknown of kind "journal" saying since when.
"""

from __future__ import annotations

import bisect
import math
import os
import statistics
from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta, tzinfo
from pathlib import Path
from typing import Any

from hitl_tui.stats.figures import Day, Figures, Stats, Unknown
from hitl_tui.stats.index import Window, read_window

#: The ways rows can be keyed.
BY = ("repo", "source", "day")

#: How long the resume book keeps closed records, and how many it keeps (`loops.resume`).
OUTCOMES_KEEP = timedelta(days=7)
OUTCOMES_MAX = 2_000


@dataclass(frozen=True, slots=True)
class _Answer:
    repo: str
    source: str
    time: float
    since: float | None
    undone: bool


@dataclass(frozen=True, slots=True)
class _Open:
    repo: str
    source: str
    since: float


@dataclass(frozen=True, slots=True)
class _Outcome:
    repo: str
    source: str
    time: float
    asked_again: bool
    not_resumed: bool
    restart_failed: bool


@dataclass
class _Group:
    answers: list[_Answer] = field(default_factory=list)
    opens: list[_Open] = field(default_factory=list)
    outcomes: list[_Outcome] = field(default_factory=list)


def _text(repo: object) -> str:
    return os.fsdecode(repo) if isinstance(repo, Path) else str(repo)


def answers_of(window: Window, start: float, end: float) -> tuple[list[_Answer], int]:
    """The committed answers given in [start, end], and how many entries were read."""
    ends: dict[str, bool] = {}
    for summary in reversed(window.files):  # several: the first written counts
        ends.update(zip(reversed(summary.end_ids), reversed(summary.end_ok), strict=True))
    undone: set[str] = set()
    for summary in window.files:
        for entry, undo, target in zip(summary.ids, summary.undo, summary.undoes, strict=True):
            if undo and target and ends.get(entry):
                undone.add(target)
    found: list[_Answer] = []
    seen: set[str] = set()
    read = 0
    for s in window.files:
        repos, sources = s.repos, s.sources
        rows = zip(s.ids, s.times, s.undo, s.repo_of, s.source_of, s.since, strict=True)
        for entry, at, undo, repo, source, since in rows:
            read += 1
            if undo or not start <= at <= end or not ends.get(entry) or entry in seen:
                continue
            seen.add(entry)
            found.append(_Answer(repos[repo], sources[source], at, since, entry in undone))
    return found, read


def _outcome(record: Any) -> _Outcome | None:
    try:
        how = record.how or ""
        return _Outcome(
            repo=str(record.repo),
            source=str(record.source),
            time=record.answered_at.timestamp(),
            asked_again=record.state == "resumed" and how.startswith("asked again"),
            not_resumed=record.state == "not-resumed",
            restart_failed=record.state == "restart-failed",
        )
    except (AttributeError, TypeError, ValueError):
        return None


def _book_records() -> list[Any]:
    from hitl_tui.loops.resume import ResumeBook

    try:
        return ResumeBook.for_state(sources=()).recent(since=timedelta(days=3650))
    except Exception:
        return []


def _percentile(values: list[float], share: float) -> float:
    """Nearest rank: the smallest value with at least `share` of them at or below it."""
    return values[max(0, math.ceil(share * len(values)) - 1)]


def _overlap(begin: float, end: float, lo: float, hi: float) -> float:
    return max(0.0, min(end, hi) - max(begin, lo))


def _when(at: datetime, tz: tzinfo) -> str:
    return at.astimezone(tz).strftime("%Y-%m-%d %H:%M")


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
    """The figures of the window [since, now] from the journal of the state folder.

    - `by`: "repo", "source" or "day" (ValueError otherwise).
    - `repos`: the local repositories to count (their paths; each has a row, even with
      nothing in it), as `hitl stats PATH ...` and the app's workspace give them; answers and
      blocks of other local folders are left out, those of remote backends (a GitHub repo,
      `host:path` of a [[remote]]) are kept. None: every one.
    - `open_blocks`: the blocks open now, all of them in `repos` and of the remotes read
      (`model.Block`, e.g. `inbox.sorted_blocks()`); None: not known, and `open_now`,
      `oldest_open_s`, `opened` and `blocked_s` are None.
    - `resumes`: the resume book's records (`loops.records.Waiting`); None: read the state
      folder's book.
    - `unreached`: Unknowns of kind "host" (`remotes.read_remotes`): the rows of their source (or
      host: repos `host:...`), the overall row and the days lose their open figures.
    - `tz`: the days' time zone (default: the local one).
    """
    if by not in BY:
        raise ValueError(f"by must be one of {', '.join(BY)}; got {by!r}")
    now = now or datetime.now(UTC)
    tz = tz or datetime.now().astimezone().tzinfo or UTC
    start, end = since.timestamp(), now.timestamp()
    only = None if repos is None else {_text(r) for r in repos}

    verdicts: dict[str, bool] = {}

    def wanted(repo: str) -> bool:
        found = verdicts.get(repo)
        if found is None:
            found = verdicts[repo] = only is None or repo in only or not os.path.isabs(repo)
        return found

    window = read_window(since)
    answers = [a for a in answers_of(window, start, end)[0] if wanted(a.repo)]
    opens: list[_Open] | None = None
    if open_blocks is not None:
        opens = []
        for block in open_blocks:
            if _text(getattr(block, "path", "")).startswith("waiting:"):
                continue  # a waiting answer's row in the app's list, not a block
            item = _Open(_text(block.repo), str(block.source), block.since.timestamp())
            if wanted(item.repo):
                opens.append(item)
    records = list(resumes) if resumes is not None else _book_records()
    outcomes = [
        o
        for o in (_outcome(r) for r in records)
        if o is not None and start <= o.time <= end and wanted(o.repo)
    ]

    # -- what is not known -------------------------------------------------------------------
    unknowns: list[Unknown] = []
    cut = window.pruned_until
    journal_known = cut is None or cut.timestamp() <= start
    if cut is not None and not journal_known:
        unknowns.append(
            Unknown(
                "journal",
                f"the journal before {_when(cut, tz)}",
                cut,
                "its segments were pruned by journal_keep",
            )
        )
    horizon = now - OUTCOMES_KEEP
    if len(records) >= OUTCOMES_MAX:
        times = [o.time for o in map(_outcome, records) if o is not None]
        if times:
            horizon = max(horizon, datetime.fromtimestamp(min(times), UTC))
    if since < horizon:
        unknowns.append(
            Unknown(
                "outcomes",
                f"loop outcomes of answers before {_when(horizon, tz)}",
                horizon,
                "the resume book keeps 7 days: the rates are over the answers it holds",
            )
        )
    sinceless = [a for a in answers if a.since is None]
    if sinceless:
        count = len(sinceless)
        unknowns.append(
            Unknown(
                "since",
                f"when the blocks of {count} answer{'' if count == 1 else 's'} began",
                datetime.fromtimestamp(min(a.time for a in sinceless), UTC),
                "journaled by an older hitl: their waits are left out",
            )
        )
    hosts = [u for u in unreached if u.kind == "host"]
    unknowns.extend(hosts)
    down_sources = {u.source for u in hosts if u.source and not u.host}
    down_hosts = {u.host for u in hosts if u.host}
    host_sources = {u.source for u in hosts if u.host}

    # -- the days ----------------------------------------------------------------------------
    first_day, last_day = since.astimezone(tz).date(), now.astimezone(tz).date()
    day_list = [first_day + timedelta(days=i) for i in range((last_day - first_day).days + 1)]
    bounds = [max(start, datetime.combine(d, time(), tzinfo=tz).timestamp()) for d in day_list]
    bounds.append(end)

    day_index = {d.isoformat(): i for i, d in enumerate(day_list)}

    def day_of(at: float) -> int:
        return min(len(day_list) - 1, max(0, bisect.bisect_right(bounds, at) - 1))

    kept = [a for a in answers if not a.undone]
    placed = all(a.since is not None for a in kept)
    # A block whose start is unknown was blocked some time before its answer: the days from
    # the last such answer's on are not touched by it.
    unplaced_until = max((a.time for a in kept if a.since is None), default=None)

    def placed_on(index: int) -> bool:
        return unplaced_until is None or bounds[index] >= unplaced_until

    intervals = [(a.since, a.time) for a in kept if a.since is not None]
    intervals += [(o.since, end) for o in opens or ()]
    per_day = [0.0] * len(day_list)
    began = [0] * len(day_list)
    last = len(day_list) - 1
    for begin, finish in intervals:
        lo, hi = max(begin, start), min(finish, end)
        index = min(last, max(0, bisect.bisect_right(bounds, lo) - 1))
        if start <= begin <= end:
            began[index] += 1  # lo is begin then
        while lo < hi and index < len(day_list):
            top = min(hi, bounds[index + 1])
            per_day[index] += max(0.0, top - lo)
            lo, index = top, index + 1

    # -- the rows ----------------------------------------------------------------------------
    def key_of(repo: str, source: str, at: float) -> str:
        if by == "repo":
            return repo
        if by == "source":
            return source
        return day_list[day_of(at)].isoformat()

    groups: dict[str, _Group] = defaultdict(_Group)
    for a in answers:
        groups[key_of(a.repo, a.source, a.time)].answers.append(a)
    for o in opens or ():
        groups[key_of(o.repo, o.source, o.since)].opens.append(o)
    for out in outcomes:
        groups[key_of(out.repo, out.source, out.time)].outcomes.append(out)
    for repo in sorted(only or ()) if by == "repo" else ():
        groups[repo]  # a row for each repository asked for
    for d in day_list if by == "day" else ():
        groups[d.isoformat()]  # a day with nothing is a row too

    open_everywhere = opens is not None and not hosts

    def open_known(key: str, group: _Group) -> bool:
        if opens is None:
            return False
        if by == "day":
            return open_everywhere
        if by == "source":
            return key not in down_sources and key not in host_sources
        sources = {a.source for a in group.answers} | {o.source for o in group.outcomes}
        if sources & down_sources:
            return False
        return not any(key.startswith(f"{host}:") for host in down_hosts)

    def row(key: str, group: _Group, known_open: bool) -> Figures:
        if by == "day":
            index = day_index[key]
            known_journal = cut is None or bounds[index] >= cut.timestamp()
            opened = began[index]
            blocked = per_day[index]
            known_flow = known_journal and open_everywhere and placed_on(index)
        else:
            known_journal = journal_known
            mine = [a for a in group.answers if not a.undone]
            opened = sum(1 for a in mine if a.since is not None and a.since >= start)
            opened += sum(1 for o in group.opens if o.since >= start)
            blocked = sum(
                _overlap(a.since, a.time, start, end) for a in mine if a.since is not None
            )
            blocked += sum(_overlap(o.since, end, start, end) for o in group.opens)
            known_flow = known_journal and known_open and all(a.since is not None for a in mine)
        return _figures(key, group, end, opened, blocked, known_open, known_journal, known_flow)

    overall_figures = _figures(
        "",
        _Group(answers, opens or [], outcomes),
        end,
        sum(began),
        sum(per_day),
        open_everywhere,
        journal_known,
        journal_known and open_everywhere and placed,
    )
    rows = [row(key, group, open_known(key, group)) for key, group in groups.items()]
    if by == "day":
        rows.sort(key=lambda f: f.key)
    else:
        rows.sort(key=lambda f: (f.blocked_s is None, -(f.blocked_s or 0.0), f.key))

    answered = [0] * len(day_list)
    for a in answers:
        answered[day_of(a.time)] += 1
    days = []
    for index, d in enumerate(day_list):
        day_known = cut is None or bounds[index] >= cut.timestamp()
        flow = day_known and placed_on(index) and open_everywhere
        days.append(
            Day(
                d,
                began[index] if flow else None,
                answered[index] if day_known else None,
                per_day[index] if flow else None,
            )
        )
    return Stats(since, now, by, overall_figures, tuple(rows), tuple(days), tuple(unknowns))


def _figures(
    key: str,
    group: _Group,
    end: float,
    opened: int,
    blocked: float,
    known_open: bool,
    known_journal: bool,
    known_flow: bool,
) -> Figures:
    """A row's figures: `opened` and `blocked` as counted (None unless `known_flow`)."""
    waits = sorted(
        max(0.0, a.time - a.since) for a in group.answers if not a.undone and a.since is not None
    )
    has_waits = bool(waits) and known_journal
    known = len(group.outcomes)
    counted = known > 0 or (known_journal and not group.answers)
    asked = sum(o.asked_again for o in group.outcomes) if counted else None
    stuck = sum(o.not_resumed for o in group.outcomes) if counted else None
    failed = sum(o.restart_failed for o in group.outcomes) if counted else None
    return Figures(
        key=key,
        opened=opened if known_flow else None,
        answered=len(group.answers) if known_journal else None,
        wait_median_s=float(statistics.median(waits)) if has_waits else None,
        wait_p90_s=_percentile(waits, 0.9) if has_waits else None,
        wait_max_s=waits[-1] if has_waits else None,
        blocked_s=blocked if known_flow else None,
        open_now=len(group.opens) if known_open else None,
        oldest_open_s=max(end - o.since for o in group.opens)
        if known_open and group.opens
        else None,
        undone=sum(a.undone for a in group.answers) if known_journal else None,
        asked_again=asked,
        asked_again_rate=asked / known if asked is not None and known else None,
        not_resumed=stuck,
        not_resumed_rate=stuck / known if stuck is not None and known else None,
        restarts_failed=failed,
        outcomes_known=known,
    )


def of_inbox(
    inbox: Any,
    *,
    since: datetime,
    by: str = "repo",
    now: datetime | None = None,
    unreached: Iterable[Unknown] = (),
) -> Stats:
    """`compute` for an `Inbox` (the CLI's, the app's): its workspace's repositories, its open
    blocks (local and those its remotes gave), its resume book's records; `unreached` the hosts
    that did not answer (`remotes.read_remotes`, or the app's watch)."""
    now = now or datetime.now(UTC)
    book = getattr(inbox, "resumes", None)
    return compute(
        since=since,
        by=by,
        now=now,
        repos=[os.fsdecode(r) for r in inbox.workspace.repos],
        open_blocks=inbox.sorted_blocks(),
        resumes=book.recent(since=now - since) if book is not None else (),
        unreached=unreached,
    )
