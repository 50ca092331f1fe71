"""The order of the rows: which blocks are listed, in what order, and under which group.

One home for it, used by `hitl list` (`listed`) and by the app's list, which keeps a `RowOrder`
up to date one Delta at a time. What is listed is a `ViewSpec`: the filter (`query.Query`),
the order (`ORDERS`), the grouping (`GROUPS`), and whether the snoozed blocks are shown instead
of the others. The CLI and the app build the same spec from the same words, so they agree.

Domain code: no Textual. A Delta costs what changed (a binary search per arrival, a pass per
removal), never a re-sort; a new filter is one pass over the blocks in their current order,
with each block's lower-cased text kept between keystrokes (`query.Haystacks`).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from itertools import groupby, repeat
from operator import attrgetter
from pathlib import Path
from typing import Any, Protocol

from hitl_tui.inbox import orders
from hitl_tui.inbox.query import Haystacks, Query, category_note
from hitl_tui.model import Block

#: (source name, block file) identifies a block across re-reads; a remote block's "file" is its
#: URL string (a GitHub issue).
Key = tuple[str, Path | str]


class Changes(Protocol):
    """What `RowOrder.apply` reads of a change (the inbox's `Delta`)."""

    added: list[Block]
    changed: list[Block]
    removed: list[Key]


#: The orders, in the order the app cycles them; the first is the default.
ORDERS = ("oldest", "newest", "repo", "category", "source")
#: What each order is called on screen.
ORDER_NAMES = {
    "oldest": "longest blocked first",
    "newest": "newest first",
    "repo": "by repo",
    "category": "by category",
    "source": "by source",
}
#: Groupings, in the order the app cycles them (None: one flat list).
GROUPS: tuple[str | None, ...] = (None, "repo", "source", "state", "question")
#: Grouped by question, the group of the blocks whose question no other block asks (last).
ASKED_ONCE = "questions asked once"
#: Grouped by question, how much of the shared question a group's header shows.
QUESTION_CELLS = 160


#: The state of a row that is an answer waiting for its loop to act on it (`resume.Waiting`),
#: not a block: such rows are listed after every block, in every order, until they leave
#: (resumed) or turn "not-resumed" (listed among the blocks again: it needs the operator).
WAITING = "waiting"


#: What grouping by state calls the rows that are answers, not blocks (every block: "open").
STATE_GROUPS = {
    WAITING: "waiting for the loop",
    "not-resumed": "not resumed",
    "restart-failed": "restart failed",
}


def is_answer(block: Block) -> bool:
    """A row that is an answer waiting for (or failing to wake) its loop, not an open block."""
    return block.state in STATE_GROUPS


def nearest_open(
    blocks: Mapping[str, Block],
    after: Sequence[str],
    before: Sequence[str],
    shown: Container[str],
) -> str | None:
    """The first row key of `after`, else the last of `before`, that is `shown` and an open
    block; else one that is an answer's row (waiting for its loop); never a key `blocks` lacks
    (a group's header). The cursor's next row when its own leaves."""
    keys = [*after, *reversed(before)]
    for answers_too in (False, True):
        for key in keys:
            if key in shown and key in blocks and (answers_too or not is_answer(blocks[key])):
                return key
    return None


def _tier(block: Block) -> int:
    return 1 if block.state == WAITING else 0


#: `sort_key` of a block that is not an answer's row, but for its (constant) tier.
_SINCE_ID = attrgetter("since", "id")


def key_of(block: Block) -> Key:
    return (block.source, block.path)


def sort_key(block: Block) -> tuple[int, datetime, str]:
    """Oldest first, ties by id: the longest-waiting loop is answered first (the answers
    waiting for their loops after every block)."""
    return (_tier(block), block.since, block.id)


def _newest(block: Block) -> tuple[int, float, str]:
    return (_tier(block), -block.since.timestamp(), block.id)


def _by(field_of: Callable[[Block], str]) -> Callable[[Block], tuple[Any, ...]]:
    return lambda b: (_tier(b), field_of(b).casefold(), b.since, b.id)


#: Each order's sort key; rows of equal key keep the oldest first, then the id.
SORT_KEYS: dict[str, Callable[[Block], tuple[Any, ...]]] = {
    "oldest": sort_key,
    "newest": _newest,
    "repo": _by(lambda b: b.repo_name),
    # Blocks without a category after those with one.
    "category": lambda b: (
        _tier(b),
        b.category is None,
        (b.category or "").casefold(),
        b.since,
        b.id,
    ),
    "source": _by(lambda b: b.source),
}
#: What a group is named by.
GROUP_OF: dict[str, Callable[[Block], str]] = {
    "repo": lambda b: b.repo_name,
    "source": lambda b: b.source,
    # The blocks to answer, then the answers whose loop did not resume, then those waiting.
    "state": lambda b: STATE_GROUPS.get(b.state, "open"),
}


def _repo_names(repos: Iterable[tuple[int, Any]]) -> dict[int, str]:
    """Each distinct repository object's `Block.repo_name`, by its id (`(id, repo)` pairs):
    made once per object (the blocks of a repository share it)."""
    return {at: r.name if isinstance(r, Path) else str(r) for at, r in repos}


def ordered(blocks: Iterable[Block], order: str = "oldest") -> list[Block]:
    """`blocks` in row order (a fresh list)."""
    return sorted(blocks, key=SORT_KEYS[order])


def row_key(key: Key) -> str:
    """A block's row, as a string: its (repo, path-or-id) key joined."""
    return f"{key[0]}:{key[1]}"


def row_of(block: Block) -> str:
    return row_key(key_of(block))


class SnoozeRule(Protocol):
    """Which blocks are set aside: `snoozebook.SnoozeBook`, or `Snoozed` (none). A rule may
    also say `asleep(blocks, now)`: the row keys of `blocks` it sets aside, all at once (a
    filter keystroke then makes no call per block)."""

    def snoozed(self, block: Block, now: datetime) -> bool: ...


class Snoozed:
    """Which blocks are set aside (`snoozebook.SnoozeBook` is the real one): none, here."""

    def snoozed(self, block: Block, now: datetime) -> bool:
        return False

    def asleep(self, blocks: Mapping[str, Block], now: datetime) -> set[str]:
        if type(self).snoozed is Snoozed.snoozed:
            return set()
        return {rk for rk, block in blocks.items() if self.snoozed(block, now)}


@dataclass(frozen=True)
class ViewSpec:
    """What the list shows: the filter, the order, the grouping, and which side of a snooze."""

    query: Query = field(default_factory=Query)
    order: str = "oldest"
    #: None, "repo" or "source".
    group: str | None = None
    #: True: only the snoozed blocks; False: all but them.
    snoozed: bool = False

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise ValueError(f"no order {self.order!r} (orders: {', '.join(ORDERS)})")
        if self.group not in GROUPS:
            raise ValueError(f"no grouping {self.group!r} (repo, source, state or question)")

    def with_query(self, text: str) -> ViewSpec:
        return replace(self, query=Query.parse(text))

    def next_order(self) -> ViewSpec:
        return replace(self, order=ORDERS[(ORDERS.index(self.order) + 1) % len(ORDERS)])

    def next_group(self) -> ViewSpec:
        return replace(self, group=GROUPS[(GROUPS.index(self.group) + 1) % len(GROUPS)])


def listed(
    blocks: Iterable[Block],
    spec: ViewSpec | None = None,
    snoozes: SnoozeRule | None = None,
    now: datetime | None = None,
) -> list[Block]:
    """The blocks `spec` lists, in its order (`hitl list`; the app's list agrees)."""
    rows = RowOrder(blocks, spec, snoozes, now)
    return [rows.blocks[rk] for rk in rows.order]


@dataclass(frozen=True)
class Group:
    """A group's header row: its name, how many of its blocks are listed, and whether it is
    folded (its blocks hidden under it)."""

    name: str
    count: int
    folded: bool
    #: How many of its listed blocks are marked.
    marked: int = 0


class RowOrder:
    """Every known block by row key, and the listed rows in order.

    `blocks` holds all blocks, listed or not; `order` the row keys the spec lists, in its order
    (grouped, when it groups: each group's rows together, groups in order of their first row
    under the sort). `apply` changes the order as little as a Delta needs: a known block keeps
    its row, a new one is inserted where the sort key puts it, so rows never move under the
    cursor except for the rows that came or went. `hidden_arrivals` counts the new blocks the
    filter kept out since it was set.
    """

    def __init__(
        self,
        blocks: Iterable[Block] = (),
        spec: ViewSpec | None = None,
        snoozes: SnoozeRule | None = None,
        now: datetime | None = None,
        clock: Callable[[], datetime] | None = None,
        questions: Callable[[list[Block]], list[list[Block]]] | None = None,
    ) -> None:
        self.spec = spec or ViewSpec()
        #: How blocks asking the same question are grouped ("by question"): the app hands in
        #: `loops.similarity.question_groups`, the one rule (it sits above the inbox). None:
        #: every block is asked once.
        self._question_groups = questions
        self.snoozes: SnoozeRule = snoozes or Snoozed()
        self.blocks: dict[str, Block] = {}
        #: Every row key in sort order (listed or not); `order` is a subsequence of it.
        self._sorted: list[str] = []
        #: The sort key each row was placed by (None: made on the fly, `_placed_key`).
        self._placed: dict[str, tuple[Any, ...]] | None = {}
        #: The rows changed since this order was made, by the key they were placed by (a
        #: changed block keeps its place).
        self._held: dict[str, tuple[Any, ...]] = {}
        #: The other orders, as they were left (`orders.Kept`): an `s` back is no sort.
        self._orders: dict[str, orders.Kept] = {}
        #: Grouped by question, the groups made in each order (in the blocks' order then)
        #: since the blocks last changed.
        self._questions_in: dict[str, dict[str, str]] = {}
        self.order: list[str] = []
        self.folded: set[str] = set()
        #: The row keys the operator marked (Space, M): a batch answers them together. Kept
        #: through filters, orders and groupings; a block that leaves the inbox leaves it.
        self.marked: set[str] = set()
        #: Grouped by question: row key -> its group's name (None: to be made again).
        self._questions: dict[str, str] | None = None
        #: Row key -> the name of its group under the grouping `_names_of` (`group_of`, ""
        #: for none), every known block's, kept: a block's entry is made again when the
        #: block comes, changes or leaves (`_renamed`); every entry, by question, when the
        #: blocks change or their order does (the groups depend on both). None: to be made.
        self._names: dict[str, str] | None = None
        self._names_of: str | None = None
        self.hidden_arrivals = 0
        self.hay = Haystacks()
        self._now = now
        #: What "now" is when no time is given (the app's clock); `now`, when given, wins.
        self._clock = clock
        self.load(blocks)

    def __len__(self) -> int:
        return len(self.order)

    # -- what is listed ------------------------------------------------------------------------

    def _time(self) -> datetime:
        if self._now is not None:
            return self._now
        return self._clock() if self._clock is not None else datetime.now(UTC)

    def accepts(self, rk: str, block: Block, now: datetime | None = None) -> bool:
        """Whether the spec lists `block` (the filter, the snooze side; folding aside)."""
        when = now or self._time()
        if self.snoozes.snoozed(block, when) != self.spec.snoozed:
            return False
        query = self.spec.query
        return query.empty or query.matches(block, self.hay.of(rk, block), when)

    def group_of(self, block: Block) -> str | None:
        """The name of the group `block` is listed under (None: not grouped)."""
        group = self.spec.group
        if group is None:
            return None
        if group == "question":
            return self._question_of(block)
        return GROUP_OF[group](block)

    _group = group_of

    def _question_of(self, block: Block) -> str:
        """Grouped by question: the group of `block` (its shared question, `ASKED_ONCE`, or an
        answer's state), from the groups made once per change of the blocks."""
        if block.state in STATE_GROUPS:
            return STATE_GROUPS[block.state]
        return self._question_map().get(row_of(block), ASKED_ONCE)

    def _question_map(self) -> dict[str, str]:
        """`_questions`, made when it is not (and kept for the order, when the blocks are in
        its order: an `s` and back, the blocks unchanged, makes the same groups)."""
        if self._questions is None:
            self._questions = self._question_names()
            if self._in_order:
                self._questions_in[self.spec.order] = self._questions
        return self._questions

    def _question_names(self) -> dict[str, str]:
        """Row key -> its group's name, for every block another block asks the same question
        as (the `questions` rule handed in: `similarity.question_groups`); each name is the
        group's first question, made unique."""
        blocks = [b for b in self.blocks.values() if b.state not in STATE_GROUPS]
        # Each block's row key by the block itself (a row key made again from the block's
        # path was 1.5 µs a block: 75 ms at 50,000).
        rk_of = {id(b): rk for rk, b in self.blocks.items()}
        names: dict[str, str] = {}
        used: set[str] = {ASKED_ONCE, *STATE_GROUPS.values()}
        groups = self._question_groups(blocks) if self._question_groups is not None else []
        for members in groups:
            if len(members) < 2:
                continue
            # The question itself (not a task's title before it), of the longest blocked.
            # (no answer's row here: `sort_key` is (0, since, id) for each of them)
            first = " ".join(min(members, key=_SINCE_ID).question.split())
            if len(first) > QUESTION_CELLS:
                first = first[: QUESTION_CELLS - 1] + "…"
            name = first or "(no question)"
            base, n = name, 1
            while name in used:
                n += 1
                name = f"{base} ({n})"
            used.add(name)
            names.update(dict.fromkeys(map(rk_of.__getitem__, map(id, members)), name))
        return names

    def _group_names(self) -> dict[str, str]:
        """Every known block's group name under the spec's grouping (`_names`), made in one
        pass the first time the grouping is asked for, then kept (at 50,000 blocks a `v`
        made each name twice, a Python call per row each time)."""
        group = self.spec.group
        if self._names is None or self._names_of != group:
            self._names = self._make_names(group)
            self._names_of = group
        return self._names

    def _make_names(self, group: str | None) -> dict[str, str]:
        rks, blocks = self.blocks.keys(), self.blocks.values()
        if group is None:
            return dict.fromkeys(rks, "")
        if group == "question":
            names = dict.fromkeys(rks, ASKED_ONCE)
            names.update(self._question_map())
            names.update(
                (rk, STATE_GROUPS[b.state])
                for rk, b in self.blocks.items()
                if b.state in STATE_GROUPS
            )
            return names
        if group == "state":
            states = map(attrgetter("state"), blocks)
            return dict(zip(rks, map(STATE_GROUPS.get, states, repeat("open")), strict=True))
        if group == "repo":  # one name per repository (a repository holds many blocks)
            repos = list(map(attrgetter("repo"), blocks))
            # (by the path object: its hash is a Python call; the blocks of one share it)
            ids = list(map(id, repos))
            named = _repo_names(dict(zip(ids, repos, strict=True)).items())
            return dict(zip(rks, map(named.__getitem__, ids), strict=True))
        if group == "source":
            return dict(zip(rks, [s or "" for s in map(attrgetter("source"), blocks)], strict=True))
        of = GROUP_OF[group]
        return {rk: of(b) or "" for rk, b in self.blocks.items()}

    def _renamed(self, rk: str) -> None:
        """Keep `_names` true after the block `rk` came, changed or left (grouped by
        question, every name is made again: one block's question can move others')."""
        if self._names is None:
            return
        group = self._names_of
        block = self.blocks.get(rk)
        if group == "question":
            self._names = None
        elif block is None:
            self._names.pop(rk, None)
        elif group is None:
            self._names[rk] = ""
        else:
            self._names[rk] = GROUP_OF[group](block) or ""

    def _matching(self, rks: list[str], when: datetime) -> list[str]:
        """The rows of `rks` the spec lists (`accepts`), in their order. A filter of words
        only (the operator typing) is a comprehension per word over the kept haystacks and a
        set of the snoozed rows: no call per block (at 50,000 blocks a keystroke's pass of
        `accepts` was a tenth of a second)."""
        words = self.spec.query.words()
        asleep_of = getattr(self.snoozes, "asleep", None)
        if words is None or asleep_of is None:
            return [rk for rk in rks if self.accepts(rk, self.blocks[rk], when)]
        asleep: set[str] = asleep_of(self.blocks, when)
        rks = list(rks)  # a new list, always: `order` is never `_sorted` itself
        if self.spec.snoozed:
            rks = [rk for rk in rks if rk in asleep]
        elif asleep:
            rks = [rk for rk in rks if rk not in asleep]
        if words:
            hay = self.hay.texts(self.blocks)
            for word in words:
                rks = [rk for rk in rks if word in hay[rk]]
        return rks

    def _listed(self, now: datetime | None = None) -> list[str]:
        when = now or self._time()
        shown = self._matching(self._sorted, when)
        if not self.spec.group:
            return shown
        # Each group's rows together, in the order of its first row: a stable sort by the
        # group's rank, in C (a Python loop over 50,000 rows was most of a `v`).
        names = list(map(self._group_names().__getitem__, shown))
        groups = list(dict.fromkeys(names))
        if self.spec.group == "question":  # the shared questions first, then the others
            last = (ASKED_ONCE, *STATE_GROUPS.values())
            groups = [g for g in groups if g not in last] + [g for g in last if g in groups]
        rank = dict(zip(groups, range(len(groups)), strict=True))
        ranks = list(map(rank.__getitem__, names))
        return list(map(shown.__getitem__, sorted(range(len(shown)), key=ranks.__getitem__)))

    def category_note(self, hint_of: Callable[[str], str | None]) -> str | None:
        """`query.category_note` over the blocks on the spec's side of a snooze (the answers
        waiting for their loops aside: they are rows, not blocks)."""
        if not any(t.field == "cat" for t in self.spec.query.terms):
            return None
        when = self._time()
        blocks = (
            b
            for b in self.blocks.values()
            if b.state not in STATE_GROUPS and self.snoozes.snoozed(b, when) == self.spec.snoozed
        )
        return category_note(self.spec.query, blocks, hint_of)

    @property
    def counts(self) -> tuple[int, int]:
        """(listed, known): what the header says as `12 of 340 blocks`."""
        return len(self.order), len(self.blocks)

    def marked_hidden(self, now: datetime | None = None) -> int:
        """How many marked blocks the spec does not list (the filter, the snooze side): a pass
        over the marks, never over every block."""
        when = now or self._time()
        return sum(not self.accepts(rk, self.blocks[rk], when) for rk in self.marked)

    def marked_blocks(self) -> list[Block]:
        """The marked blocks, in sort order (listed or not)."""
        if not self.marked:
            return []
        return [self.blocks[rk] for rk in sorted(self.marked, key=self._entry)]

    def _placed_key(self, rk: str) -> tuple[Any, ...]:
        """The sort key row `rk` was placed by in `_sorted`."""
        if self._placed is not None:
            return self._placed[rk]
        held = self._held.get(rk)
        return held if held is not None else SORT_KEYS[self.spec.order](self.blocks[rk])

    def _entry(self, rk: str) -> tuple[tuple[Any, ...], str]:
        return (self._placed_key(rk), rk)

    # -- changing it ---------------------------------------------------------------------------

    def load(self, blocks: Iterable[Block]) -> None:
        """Replace every row."""
        known = {row_of(b): b for b in blocks}
        before = self.blocks
        for rk in [rk for rk, b in known.items() if before.get(rk) is not b]:
            self.hay.forget(rk)  # (its filter text is made again when next needed)
        self._names = None
        self._orders.clear()
        self._questions_in.clear()
        self._sort(known)
        self.marked &= self.blocks.keys()
        self.order = self._listed()

    def _sort(self, known: Mapping[str, Block]) -> None:
        """Every row of `known` (row key -> block) sorted by the spec's order, ties by row
        key: `blocks` in that order, and each row placed by its key now. One key made per
        block and one sort of (key, row key) pairs; the rest is built in C (at 50,000 blocks
        the row key made again from each block's path was a third of an `s`)."""
        self._sorted, self._placed = orders.sorted_rows(known, SORT_KEYS[self.spec.order])
        self._in_order_now(known)

    def _in_order_now(self, known: Mapping[str, Block]) -> None:
        """`blocks` made again in `_sorted`'s order (the groups by question follow it)."""
        self._held = {}
        self.blocks = dict(zip(self._sorted, map(known.__getitem__, self._sorted), strict=True))
        self._in_order = True
        self._questions = self._questions_in.get(self.spec.order)
        if self._names_of == "question":
            self._names = None

    def _reorder(self, left: str) -> None:
        """The spec's order now, the order `left` kept (`orders`): an order known is its
        rows patched with what changed since; "repo", "category", "source" and "newest" are
        the oldest-first rows ranked again (`orders.derived`); else a sort."""
        self._orders[left] = orders.Kept(self._sorted, set(self._held))
        order = self.spec.order
        key = SORT_KEYS[order]
        kept = self._orders.pop(order, None)
        rows = orders.cleaned(kept, self.blocks, key) if kept is not None else None
        if rows is None and order in orders.DERIVED and "oldest" in self._orders:
            oldest = orders.cleaned(self._orders["oldest"], self.blocks, sort_key)
            if oldest is not None:
                self._orders["oldest"] = orders.Kept(oldest)
                rows = orders.derived(order, oldest, self.blocks)
        if rows is None:
            self._sort(self.blocks)
            return
        self._sorted, self._placed = rows, None
        self._in_order_now(self.blocks)

    def _touched(self, rk: str) -> None:
        """Row `rk` came, changed or left: the orders kept place it again when next used."""
        self._in_order = False
        for kept in self._orders.values():
            kept.dirty.add(rk)

    def set_spec(self, spec: ViewSpec, now: datetime | None = None) -> None:
        """Show the blocks `spec` lists (a new filter, order, grouping or snooze side)."""
        reorder, left = spec.order != self.spec.order, self.spec.order
        narrower = (
            not reorder
            and (spec.group, spec.snoozed) == (self.spec.group, self.spec.snoozed)
            and spec.query.narrows(self.spec.query)
        )
        if spec.query != self.spec.query or spec.snoozed != self.spec.snoozed:
            self.hidden_arrivals = 0
        self.spec = spec
        if reorder:  # the same blocks in another order (their filter texts and marks kept)
            self._reorder(left)
            self.order = self._listed(now)
        elif narrower:  # typing on: only what is listed can still be (grouped order kept)
            self.order = self._matching(self.order, now or self._time())
        else:
            self.order = self._listed(now)

    def warm(self) -> None:
        """Make every block's filter text now (the `/` key), not at the first letter typed."""
        for rk, block in self.blocks.items():
            self.hay.of(rk, block)

    def refilter(self, now: datetime | None = None) -> bool:
        """Look again (a snooze ran out, a block aged past `age:>1h`); whether rows changed."""
        before = self.order
        self.order = self._listed(now)
        return self.order != before

    def apply(self, delta: Changes, keep: str | None) -> tuple[bool, str | None]:
        """Apply a Delta (`added`, `changed`, `removed`). `keep` is the highlighted row; returns
        whether the rows changed, and the row to highlight now: `keep`, or when it left, the
        row that took its place (None when no later row is left)."""
        before = list(self.order) if keep is not None else self.order
        grouped = bool(self.spec.group)
        if delta.added or delta.changed or delta.removed:
            self._questions = None  # grouped by question: the groups are made again
            self._questions_in.clear()
            if self._names_of == "question":
                self._names = None
        if self._placed is None and len(delta.added) > 32:  # (many arrivals: keys made once)
            self._placed = {rk: self._placed_key(rk) for rk in self._sorted}
        now = self._time()
        moved = again = False
        for rk in {row_key(k) for k in delta.removed} & self.blocks.keys():
            self._drop(rk)
            moved |= self._unlist(rk)
        for block in delta.changed:
            # A changed block keeps its row (its place in the sort is where it first came).
            rk = row_of(block)
            if rk not in self.blocks:
                continue
            self._hold(rk)
            self.blocks[rk] = block
            self._renamed(rk)
            self.hay.forget(rk)
            if self.accepts(rk, block, now):
                moved |= self._list(rk)
            else:
                moved |= self._unlist(rk)
        for block in delta.added:
            rk = row_of(block)
            if rk in self.blocks:
                self._hold(rk)
                self.blocks[rk] = block
                self._renamed(rk)
                self.hay.forget(rk)
                again = True  # its line is drawn again, as a changed block's
                continue
            self._insert(rk, block)
            if self.accepts(rk, block, now):
                moved |= self._list(rk)
            elif not self.spec.query.empty:
                self.hidden_arrivals += 1
        if grouped and moved:
            self.order = self._listed(now)
        if keep is not None and keep not in self.order:
            keep = self._successor(keep, before)
        return (moved or again or bool(delta.changed)), keep

    def _list(self, rk: str) -> bool:
        """Put `rk` into `order` where the sort puts it (grouped: recomputed after)."""
        if self.spec.group:
            return True
        at = bisect.bisect_left(self.order, self._entry(rk), key=self._entry)
        if at < len(self.order) and self.order[at] == rk:
            return False
        self.order.insert(at, rk)
        return True

    def _unlist(self, rk: str) -> bool:
        if self.spec.group:
            return rk in self.order
        try:
            self.order.remove(rk)
        except ValueError:
            return False
        return True

    def _hold(self, rk: str) -> None:
        """Row `rk`'s block is about to change: it keeps its place (and the key it was placed
        by); the orders kept place it again."""
        if rk not in self._held:
            self._held[rk] = self._placed_key(rk)
        self._touched(rk)

    def _drop(self, rk: str) -> None:
        at = bisect.bisect_left(self._sorted, self._entry(rk), key=self._entry)
        if at < len(self._sorted) and self._sorted[at] == rk:
            del self._sorted[at]
        else:  # (never: `_sorted` is in the order of its keys)
            self._sorted.remove(rk)
        del self.blocks[rk]
        self._held.pop(rk, None)
        if self._placed is not None:
            del self._placed[rk]
        self._touched(rk)
        self._renamed(rk)
        self.marked.discard(rk)
        self.hay.forget(rk)

    def _insert(self, rk: str, block: Block) -> None:
        entry = (SORT_KEYS[self.spec.order](block), rk)
        at = bisect.bisect_right(self._sorted, entry, key=self._entry)
        self._sorted.insert(at, rk)
        if self._placed is not None:
            self._placed[rk] = entry[0]
        self._touched(rk)
        self.blocks[rk] = block
        self._renamed(rk)
        self.hay.forget(rk)

    def _successor(self, gone: str, before: list[str]) -> str | None:
        """The row that takes the place of `gone` (`nearest_open` of the rows still listed
        around it in `before`): never a row that just came, and an answer's row only when no
        open block is left, so that after an answer the cursor is on the next block to answer,
        not on the answer's own row. None when no row is left."""
        if gone not in before:
            return None
        listed = set(self.order)
        at = before.index(gone)
        return nearest_open(self.blocks, before[at + 1 :], before[:at], listed)

    # -- groups and moving between rows --------------------------------------------------------

    def rows(self) -> list[str | Group]:
        """What the list draws top to bottom: row keys, with a Group header before each group
        when the spec groups (the rows of a folded group left out)."""
        if not self.spec.group:
            return list(self.order)
        out: list[str | Group] = []
        current: str | None = None
        members: list[str] = []

        marked = self.marked

        def close() -> None:
            if current is not None:
                folded = current in self.folded
                picked = sum(rk in marked for rk in members) if marked else 0
                out.append(Group(current, len(members), folded, picked))
                if not folded:
                    out.extend(members)

        for name, rks in groupby(self.order, key=self._group_names().__getitem__):
            close()
            current, members = name, list(rks)
        close()
        return out

    def toggle_fold(self, group: str) -> None:
        self.folded ^= {group}

    def members(self, group: str) -> list[str]:
        """The listed row keys of the group named `group` (folded or not)."""
        if not self.spec.group:
            return []
        names = self._group_names()
        return [rk for rk in self.order if names[rk] == group]

    def next_where(
        self, start: str | None, step: int, wanted: Callable[[Block], bool]
    ) -> str | None:
        """The next (`step` 1) or previous (-1) listed row after `start` whose block `wanted`
        accepts, wrapping around; None when there is none."""
        if not self.order:
            return None
        at = self.order.index(start) if start in self.order else (-1 if step > 0 else 0)
        n = len(self.order)
        for i in range(1, n + 1):
            rk = self.order[(at + step * i) % n]
            if wanted(self.blocks[rk]):
                return rk
        return None


def urgency(block: Block, now: datetime, warn: timedelta, alert: timedelta) -> str:
    """How the age is coloured (`[sla]`): "alert" (red) once the block has waited `alert`,
    "warn" (amber) once it has waited `warn`, else ""."""
    waited = now - block.since
    return "alert" if waited >= alert else "warn" if waited >= warn else ""
