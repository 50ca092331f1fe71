"""The list's orders made without a sort by a Python key (`view.RowOrder`'s `s`, issue 30).

A fresh order is every row key sorted by (its order's sort key, row key) (`sorted_rows`). At
50,000 blocks that is 50,000 Python keys and a sort of tuples: 100-250 ms a key on this
machine. Two cheaper ways give the very same list:

- an order left is kept (`Kept`): its rows, and the rows that came, changed or left since it
  was left (`dirty`). Coming back, those are taken out and placed again by a binary search
  over keys made on the fly (`cleaned`); past a sixteenth of the rows it is sorted again.
- "repo", "category", "source" and "newest" are the oldest-first order (tier, since, id, row
  key) sorted again, stably, by what comes before `since` in their key (`derived`): each
  repository, category or source is named and folded once (not once per block), the rows
  ranked by an int, and Python's sort on ints keeps the oldest-first order among equals,
  which is (since, id, row key): the fresh sort's own tie-break. "newest" ranks by
  -timestamp, so two blocks there tie on (tier, timestamp) and fall back to (id, row key);
  the oldest-first order agrees only when no two distinct times share a timestamp (a date
  centuries away can): checked, else None (sorted afresh).

Domain code: no Textual.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import filterfalse, repeat
from operator import add, attrgetter, itemgetter, mul
from pathlib import Path
from typing import Any

from hitl_tui.model import Block

#: A row's key under an order (`view.SORT_KEYS`).
SortKey = Callable[[Block], tuple[Any, ...]]

#: The state whose rows come after every block (`view.WAITING`; tier 1).
_TIER = {"waiting": 1}
#: Past this share of the rows changed, a kept order is sorted again rather than patched.
DIRTY_SHARE = 16


@dataclass
class Kept:
    """An order left: its row keys in order as they were, and the rows that came, changed or
    left since (placed again on the way back)."""

    rows: list[str]
    dirty: set[str] = field(default_factory=set)


def sorted_rows(blocks: Mapping[str, Block], key: SortKey) -> tuple[list[str], dict[str, Any]]:
    """Every row key of `blocks` by (key, row key), and each row's key: the plain sort."""
    entries = [(key(b), rk) for rk, b in blocks.items()]
    entries.sort()
    rows = list(map(itemgetter(1), entries))
    return rows, dict(zip(rows, map(itemgetter(0), entries), strict=True))


def cleaned(kept: Kept, blocks: Mapping[str, Block], key: SortKey) -> list[str] | None:
    """`kept.rows` with its dirty rows placed again where their key puts them now (those gone
    left out); None when too many changed (sort afresh)."""
    dirty = kept.dirty
    if not dirty:
        return kept.rows
    if len(dirty) * DIRTY_SHARE > len(blocks):
        return None
    rows = list(filterfalse(dirty.__contains__, kept.rows))

    def entry(rk: str) -> tuple[Any, str]:
        return (key(blocks[rk]), rk)

    for rk in dirty:
        block = blocks.get(rk)
        if block is not None:
            rows.insert(bisect.bisect_left(rows, (key(block), rk), key=entry), rk)
    return rows


def _repo_fold(repo: Any) -> str:
    return (repo.name if isinstance(repo, Path) else str(repo)).casefold()


def _category_fold(category: str | None) -> tuple[bool, str]:
    return (category is None, (category or "").casefold())


def _source_fold(source: str) -> str:
    return source.casefold()


#: What comes between the tier and (since, id) in each derived order's key, and how it is read
#: from a block's field (`view.SORT_KEYS`).
_FOLDS: dict[str, tuple[Callable[[Block], Any], Callable[[Any], Any], bool]] = {
    "repo": (attrgetter("repo"), _repo_fold, True),
    "category": (attrgetter("category"), _category_fold, False),
    "source": (attrgetter("source"), _source_fold, False),
}
DERIVED = frozenset({*_FOLDS, "newest"})


def _ranks(values: list[Any], fold: Callable[[Any], Any], by_id: bool) -> list[int]:
    """Each value's dense rank by `fold(value)`, folded once per distinct value; `by_id`: per
    distinct object (the blocks of a repository share its path, whose hash is a Python call;
    an id's is not)."""
    ids = list(map(id, values)) if by_id else values
    folded = {at: fold(v) for at, v in dict(zip(ids, values, strict=True)).items()}
    rank_of = {f: n for n, f in enumerate(sorted(set(folded.values())))}
    rank = {at: rank_of[f] for at, f in folded.items()}
    return list(map(rank.__getitem__, ids))


def _stable_by(rows: list[str], *keys: list[Any]) -> list[str]:
    """`rows` sorted stably by each of `keys` (lists beside `rows`), the last the major one."""
    at: Iterable[int] = range(len(rows))
    for key in keys:
        at = sorted(at, key=key.__getitem__)
    return list(map(rows.__getitem__, at))


def derived(order: str, oldest: list[str], blocks: Mapping[str, Block]) -> list[str] | None:
    """`order`'s rows from the oldest-first rows (every row of `blocks`, sorted by their keys
    now), as `sorted_rows` makes them; None when they cannot be derived exactly."""
    if order not in DERIVED:
        return None
    listed = list(map(blocks.__getitem__, oldest))
    tiers = list(map(_TIER.get, map(attrgetter("state"), listed), repeat(0)))
    if order == "newest":
        since = list(map(attrgetter("since"), listed))
        if any(map(attrgetter("fold"), since)):
            return None  # (a time that equals another yet is not its timestamp)
        stamp = {t: -t.timestamp() for t in dict.fromkeys(since)}  # once per distinct time
        if len(set(stamp.values())) != len(stamp):
            return None  # two times share a timestamp: the tie-break is the id's, not since's
        return _stable_by(oldest, list(map(stamp.__getitem__, since)), tiers)
    get, fold, by_id = _FOLDS[order]
    ranks = _ranks(list(map(get, listed)), fold, by_id)
    span = max(ranks, default=0) + 1
    return _stable_by(oldest, list(map(add, map(mul, tiers, repeat(span)), ranks)))
