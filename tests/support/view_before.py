"""The oracle of tests/test_view_equivalence.py: the row order and the groups by question as
they were before issue 30's 50,000-block work, made of today's code where it did not change
and, where it did, of the code before in its simplest form. Not used by hitl.

What changed (`git diff eeb1b7d a6fc629 -- hitl_tui/inbox/view.py hitl_tui/loops/similarity.py`)
and stands here as it was:

- `RowOrder` kept no group names: each row's group was asked of `group_of` whenever it was
  needed (`_group_names` here is made afresh at each call, so `_listed` and `members`, which
  read it, are as they were; nothing is kept for `_renamed` to update);
- a new order loaded every block again, sorted from scratch (`load`, `set_spec`);
- a group by question was named after its member first by `sort_key`, each row key made again
  from its block (`_question_names`);
- `rows` called `group_of` for each listed row, a header where the name changed;
- each row's sort key was kept beside it (`_keys`, `_placed`: a Delta placed by a binary
  search over them), no order left was kept, and no groups by question were kept for an order
  (round 4: `_drop`, `_insert`, `_hold`, `_question_map` here);
- `question_groups` compared a block with the first block of every group in turn, as far as
  the caps let it (a word counted for its first MAX_POSTINGS groups, the first
  GROUP_CANDIDATES groups sharing two words scored), with no group left out by its literals
  first. Here pair by pair, with no index: slow, and plainly that rule.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from itertools import chain, count

from hitl_tui.inbox import view
from hitl_tui.inbox.view import (
    ASKED_ONCE,
    QUESTION_CELLS,
    SORT_KEYS,
    STATE_GROUPS,
    Group,
    ViewSpec,
    is_answer,
    row_of,
    sort_key,
)
from hitl_tui.loops.similarity import (
    GROUP_CANDIDATES,
    MAX_POSTINGS,
    THRESHOLD,
    _Asked,
    _asked,
    _same,
)
from hitl_tui.model import Block


class RowOrderBefore(view.RowOrder):
    """Today's `RowOrder` with the methods whose bodies changed as they were."""

    def _group_names(self) -> dict[str, str]:
        return {rk: self.group_of(block) or "" for rk, block in self.blocks.items()}

    def _question_names(self) -> dict[str, str]:
        names: dict[str, str] = {}
        used = {ASKED_ONCE, *STATE_GROUPS.values()}
        asked = [b for b in self.blocks.values() if not is_answer(b)]
        for members in self._question_groups(asked) if self._question_groups else []:
            if len(members) < 2:
                continue
            text = " ".join(min(members, key=sort_key).question.split()) or "(no question)"
            if len(text) > QUESTION_CELLS:
                text = text[: QUESTION_CELLS - 1] + "…"
            tries = chain([text], (f"{text} ({n})" for n in count(2)))
            name = next(t for t in tries if t not in used)
            used.add(name)
            names.update((row_of(b), name) for b in members)
        return names

    def load(self, blocks: Iterable[Block]) -> None:
        key = SORT_KEYS[self.spec.order]
        rows = sorted(((key(b), row_of(b), b) for b in blocks), key=lambda t: (t[0], t[1]))
        before, self.blocks = self.blocks, {rk: b for _k, rk, b in rows}
        for rk in [rk for rk, b in self.blocks.items() if before.get(rk) is not b]:
            self.hay.forget(rk)
        self._sorted = [rk for _k, rk, _b in rows]
        self._keys = [(k, rk) for k, rk, _b in rows]
        self._placed = {rk: k for k, rk, _b in rows}
        self.marked &= self.blocks.keys()
        self._questions = None
        self.order = self._listed()

    def set_spec(self, spec: ViewSpec, now: datetime | None = None) -> None:
        if spec.order == self.spec.order:
            super().set_spec(spec, now)
            return
        if spec.query != self.spec.query or spec.snoozed != self.spec.snoozed:
            self.hidden_arrivals = 0
        self.spec = spec
        self.load(list(self.blocks.values()))

    # Round 4: each row's sort key kept beside it (`_keys`, `_placed`), every order sorted
    # anew, no order kept, no groups by question kept for an order.

    def _question_map(self) -> dict[str, str]:
        if self._questions is None:
            self._questions = self._question_names()
        return self._questions

    def _hold(self, rk: str) -> None:
        pass

    def _drop(self, rk: str) -> None:
        del self.blocks[rk]
        self._renamed(rk)
        self.marked.discard(rk)
        assert self._placed is not None
        at = bisect.bisect_left(self._keys, (self._placed.pop(rk), rk))
        del self._keys[at]
        del self._sorted[at]
        self.hay.forget(rk)

    def _insert(self, rk: str, block: Block) -> None:
        entry = (SORT_KEYS[self.spec.order](block), rk)
        at = bisect.bisect_right(self._keys, entry)
        self._keys.insert(at, entry)
        self._sorted.insert(at, rk)
        assert self._placed is not None
        self._placed[rk] = entry[0]
        self.blocks[rk] = block
        self._renamed(rk)
        self.hay.forget(rk)

    def rows(self) -> list[str | Group]:
        if not self.spec.group:
            return list(self.order)
        runs: list[tuple[str, list[str]]] = []
        for rk in self.order:
            name = self.group_of(self.blocks[rk]) or ""
            if not runs or runs[-1][0] != name:
                runs.append((name, []))
            runs[-1][1].append(rk)
        out: list[str | Group] = []
        for name, rks in runs:
            folded = name in self.folded
            out.append(Group(name, len(rks), folded, sum(rk in self.marked for rk in rks)))
            out.extend([] if folded else rks)
        return out


def question_groups_before(blocks: Iterable[Block]) -> list[list[Block]]:
    """`similarity.question_groups` as it was: what it returns, pair by pair."""
    firsts: list[_Asked] = []
    #: The words each group is found by: those it is among the first MAX_POSTINGS groups of.
    found_by: list[frozenset[str]] = []
    groups_of_word: Counter[str] = Counter()
    members: list[list[Block]] = []
    exact: dict[tuple[str, frozenset[str]], int] = {}
    for block in blocks:
        asked = _asked(block)
        if not asked.normal:
            continue
        at = exact.get((asked.normal, asked.literals))
        if at is None:
            at = _first_same_before(asked, firsts, found_by)
        if at is None:
            at = len(firsts)
            firsts.append(asked)
            found_by.append(frozenset(t for t in asked.tokens if groups_of_word[t] < MAX_POSTINGS))
            groups_of_word.update(asked.tokens)
            members.append([])
        exact.setdefault((asked.normal, asked.literals), at)
        members[at].append(block)
    return [group for group in members if len(group) > 1]


def _first_same_before(
    asked: _Asked, firsts: list[_Asked], found_by: list[frozenset[str]]
) -> int | None:
    mine = len(asked.tokens)
    shared = [(at, len(asked.tokens & words)) for at, words in enumerate(found_by)]
    wanted = [(at, n) for at, n in shared if n >= 2 or (n and mine == 1)]
    for at, common in wanted[:GROUP_CANDIDATES]:
        theirs = len(firsts[at].tokens)
        counted = common >= 2 or mine == theirs == 1
        guess = (common / (mine + theirs - common) + common / min(mine, theirs)) / 2
        if counted and guess >= THRESHOLD and _same(asked, firsts[at]):
            return at
    return None
