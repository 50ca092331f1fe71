"""The order of the rows and the groups by question as they were before issue 30's 50,000-block
work (hitl_tui/inbox/view.py and `similarity.question_groups` at that time, verbatim but for
this note and the imports below): the oracle tests/test_view_equivalence.py compares the
faster code with. Not used by hitl.
"""

# ruff: noqa
from __future__ import annotations

# mypy: ignore-errors
from collections import Counter
from itertools import chain

from hitl_tui.loops.similarity import (
    GROUP_CANDIDATES,
    MAX_POSTINGS,
    THRESHOLD,
    _asked,
    _Asked,
    _same,
)


import bisect
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

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
        self._keys: list[tuple[Any, ...]] = []
        #: The sort key each row was placed by (a changed block keeps its place).
        self._placed: dict[str, tuple[Any, ...]] = {}
        self.order: list[str] = []
        self.folded: set[str] = set()
        #: The row keys the operator marked (Space, M): a batch answers them together. Kept
        #: through filters, orders and groupings; a block that leaves the inbox leaves it.
        self.marked: set[str] = set()
        #: Grouped by question: row key -> its group's name (None: to be made again).
        self._questions: dict[str, str] | None = None
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
        if self._questions is None:
            self._questions = self._question_names()
        return self._questions.get(row_of(block), ASKED_ONCE)

    def _question_names(self) -> dict[str, str]:
        """Row key -> its group's name, for every block another block asks the same question
        as (the `questions` rule handed in: `similarity.question_groups`); each name is the
        group's first question, made unique."""
        blocks = [b for b in self.blocks.values() if b.state not in STATE_GROUPS]
        names: dict[str, str] = {}
        used: set[str] = {ASKED_ONCE, *STATE_GROUPS.values()}
        groups = self._question_groups(blocks) if self._question_groups is not None else []
        for members in groups:
            if len(members) < 2:
                continue
            # The question itself (not a task's title before it), of the longest blocked.
            first = " ".join(min(members, key=sort_key).question.split())
            if len(first) > QUESTION_CELLS:
                first = first[: QUESTION_CELLS - 1] + "…"
            name = first or "(no question)"
            base, n = name, 1
            while name in used:
                n += 1
                name = f"{base} ({n})"
            used.add(name)
            for block in members:
                names[row_of(block)] = name
        return names

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
        groups: dict[str, list[str]] = {}
        for rk in shown:
            groups.setdefault(self._group(self.blocks[rk]) or "", []).append(rk)
        if self.spec.group == "question":  # the shared questions first, then the others
            last = (ASKED_ONCE, *STATE_GROUPS.values())
            names = [g for g in groups if g not in last] + [g for g in last if g in groups]
            return [rk for name in names for rk in groups[name]]
        return [rk for rows in groups.values() for rk in rows]

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
        placed = self._placed
        return [self.blocks[rk] for rk in sorted(self.marked, key=lambda r: (placed[r], r))]

    # -- changing it ---------------------------------------------------------------------------

    def load(self, blocks: Iterable[Block]) -> None:
        """Replace every row."""
        key = SORT_KEYS[self.spec.order]
        rows = sorted(((key(b), row_of(b), b) for b in blocks), key=lambda t: (t[0], t[1]))
        before = self.blocks
        self.blocks = {rk: b for _k, rk, b in rows}
        for rk in [rk for rk, b in self.blocks.items() if before.get(rk) is not b]:
            self.hay.forget(rk)  # (its filter text is made again when next needed)
        self._sorted = [rk for _k, rk, _b in rows]
        self._keys = [(k, rk) for k, rk, _b in rows]
        self._placed = {rk: k for k, rk, _b in rows}
        self.marked &= self.blocks.keys()
        self._questions = None
        self.order = self._listed()

    def set_spec(self, spec: ViewSpec, now: datetime | None = None) -> None:
        """Show the blocks `spec` lists (a new filter, order, grouping or snooze side)."""
        reorder = spec.order != self.spec.order
        narrower = (
            not reorder
            and (spec.group, spec.snoozed) == (self.spec.group, self.spec.snoozed)
            and spec.query.narrows(self.spec.query)
        )
        if spec.query != self.spec.query or spec.snoozed != self.spec.snoozed:
            self.hidden_arrivals = 0
        self.spec = spec
        if reorder:
            self.load(list(self.blocks.values()))
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
        now = self._time()
        moved = False
        for rk in {row_key(k) for k in delta.removed} & self.blocks.keys():
            self._drop(rk)
            moved |= self._unlist(rk)
        for block in delta.changed:
            # A changed block keeps its row (its place in the sort is where it first came).
            rk = row_of(block)
            if rk not in self.blocks:
                continue
            self.blocks[rk] = block
            self.hay.forget(rk)
            if self.accepts(rk, block, now):
                moved |= self._list(rk)
            else:
                moved |= self._unlist(rk)
        for block in delta.added:
            rk = row_of(block)
            if rk in self.blocks:
                self.blocks[rk] = block
                self.hay.forget(rk)
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
        return (moved or bool(delta.changed)), keep

    def _list(self, rk: str) -> bool:
        """Put `rk` into `order` where the sort puts it (grouped: recomputed after)."""
        if self.spec.group:
            return True
        placed = self._placed
        at = bisect.bisect_left(self.order, (placed[rk], rk), key=lambda r: (placed[r], r))
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

    def _drop(self, rk: str) -> None:
        del self.blocks[rk]
        self.marked.discard(rk)
        at = bisect.bisect_left(self._keys, (self._placed.pop(rk), rk))
        del self._keys[at]
        del self._sorted[at]
        self.hay.forget(rk)

    def _insert(self, rk: str, block: Block) -> None:
        entry = (SORT_KEYS[self.spec.order](block), rk)
        at = bisect.bisect_right(self._keys, entry)
        self._keys.insert(at, entry)
        self._sorted.insert(at, rk)
        self._placed[rk] = entry[0]
        self.blocks[rk] = block
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

        for rk in self.order:
            name = self._group(self.blocks[rk]) or ""
            if name != current:
                close()
                current, members = name, []
            members.append(rk)
        close()
        return out

    def toggle_fold(self, group: str) -> None:
        self.folded ^= {group}

    def members(self, group: str) -> list[str]:
        """The listed row keys of the group named `group` (folded or not)."""
        if not self.spec.group:
            return []
        return [rk for rk in self.order if self._group(self.blocks[rk]) == group]

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


# -- similarity.question_groups, before --


def question_groups(blocks: Iterable[Block]) -> list[list[Block]]:
    """The groups of two or more blocks asking the same question (`same_question`), each in
    the order given, the groups in the order of their first block. A block is in one group at
    most: each block joins the group of the first earlier block ("the group's question",
    its first) it asks the same question as, else it begins a group (so a group's every
    block asks the same question as its first; no chain of near ones drifts). Blocks equal
    once normalised are grouped at once; the others are compared only with the groups'
    first blocks that share two words with them (an inverted index, counted in C), not pair
    by pair: 5,000 blocks group in about 50 ms once their questions are read (each question
    is read once and kept, by its text), about 110 ms the first time
    (tests/test_similar.py). Bounded: a block is compared with GROUP_CANDIDATES groups at
    most, and a word's first MAX_POSTINGS groups."""
    firsts: list[_Asked] = []
    members: list[list[Block]] = []
    exact: dict[tuple[str, frozenset[str]], int] = {}
    postings: dict[str, list[int]] = {}
    for block in blocks:
        asked = _asked(block)
        if not asked.normal:
            continue
        at = exact.get((asked.normal, asked.literals))
        if at is None:
            at = _first_same(asked, firsts, postings)
        if at is None:
            at = len(firsts)
            firsts.append(asked)
            members.append([])
            for token in asked.tokens:
                postings.setdefault(token, []).append(at)
        exact.setdefault((asked.normal, asked.literals), at)
        members[at].append(block)
    return [group for group in members if len(group) > 1]


def _first_same(asked: _Asked, firsts: list[_Asked], postings: dict[str, list[int]]) -> int | None:
    """The earliest group whose first block asks the same question as `asked` (None: none)."""
    # Counted in C (Counter over the chained postings): the groups sharing a word.
    counts = Counter(chain.from_iterable(postings.get(t, ())[:MAX_POSTINGS] for t in asked.tokens))
    mine = len(asked.tokens)
    lone = mine == 1
    wanted = sorted(at for at, n in counts.items() if n >= 2 or lone)
    for at in wanted[:GROUP_CANDIDATES]:
        # The score from the count of shared words alone first (no set is built): only
        # those it lets through are compared whole (literals, numbers).
        common = counts[at]
        theirs = len(firsts[at].tokens)
        if common < 2 and not (mine == theirs == 1):
            continue
        if (common / (mine + theirs - common) + common / min(mine, theirs)) / 2 < THRESHOLD:
            continue
        if _same(asked, firsts[at]):
            return at
    return None
