"""The faster order and grouping (issue 30, 50,000 blocks) give what the code before gave.

The code before is the oracle: tests/support/view_before.py, today's code with the methods that
changed as they were (`RowOrderBefore`) and the old `question_groups` rule pair by pair
(`question_groups_before`). Many generated blocks, hostile questions among them (numbers,
operators and paths that differ, markup, escapes, full-width digits, empty and huge texts, a
thousand questions sharing words, which the candidate caps cut), in random orders; then random
deltas (blocks that come, change and leave) between changes of order, grouping, filter and
folds: every listed row, every drawn row and group header, every group's members, every
block's group, the marked blocks in order and the blocks' own order are the same as the old
code's after each step. And a delta lands where a full re-sort puts it in every order and
grouping.
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hitl_tui.inbox.inbox import Delta
from hitl_tui.inbox.view import GROUPS, ORDERS, Group, RowOrder, ViewSpec, key_of, row_of
from hitl_tui.loops.similarity import question_groups
from hitl_tui.model import Block
from tests.support.view_before import RowOrderBefore, question_groups_before

T0 = datetime(2026, 11, 1, tzinfo=UTC)

WORDS = [
    "deploy",
    "service",
    "cache",
    "invoice",
    "retry",
    "webhook",
    "payment",
    "token",
    "legacy",
    "endpoint",
]
QUESTIONS = [
    "Retry the flaky test while failures >= 2?",
    "Retry the flaky test while failures <= 2?",
    "Set the retry offset to -1 for this test?",
    "Set the retry offset to 1 for this test?",
    "Write the bundle to ./build before deploy?",
    "Write the bundle to /build before deploy?",
    "Keep the archived invoices for 7 years?",
    "Keep the archived invoices for 30 years?",
    "keep   the ARCHIVED invoices for 7 years",
    "Should we **keep** the `legacy` endpoint?",
    "Should we keep the legacy endpoint for one more release?",
    "Should repo 12 keep its legacy endpoint for one more release?",
    "Should repo １２ keep its legacy endpoint for one more release?",
    "Should repo 13 keep its legacy endpoint for one more release?",
    "Task 3 — a token 3.",
    "Task 4 — a token 4.",
    "[b]bold [/x] [@click=app.quit]quit[/] [link=file:///etc/passwd]x[/link] [b",
    "\x1b[31mred\x1b[0m \x1b]0;pwned title\x07 \x1b[2J\x1b[H \x9b31m \x07",
    "",
    "   ",
    "?",
    "the a an of",
    "Port?",
    "Which port?",
    "x" * 3000,
    ("retry the payment webhook " * 200).strip(),
    "Retry while attempts != 3?",
    "Retry while attempts == 3?",
    "Use ~/cache or ../cache for the token?",
]


def _question(rng: random.Random) -> str:
    pick = rng.random()
    if pick < 0.4:
        return rng.choice(QUESTIONS)
    if pick < 0.7:  # many questions sharing some words, each with words of its own
        own = "".join(rng.choice("abcdefghij") for _ in range(6))
        shared = rng.sample(WORDS, rng.randint(2, 5))
        return " ".join([*shared, own]) + "?"
    if pick < 0.85:  # a question asked again with a word changed or added
        base = rng.choice(QUESTIONS[:16]).split()
        at = rng.randrange(len(base))
        base.insert(at, rng.choice(WORDS))
        return " ".join(base)
    return f"Should repo {rng.randint(0, 40)} keep its {rng.choice(WORDS)} for one more release?"


def _block(rng: random.Random, n: int) -> Block:
    remote = rng.random() < 0.15
    source = "github" if remote else rng.choice(["loopkit", "agenticloop", "Loopkit"])
    repo: Path | str = (
        f"owner/repo{rng.randint(0, 5)}" if remote else Path(f"/r/{rng.choice('abcdEF')}{n % 7}")
    )
    path: Path | str = (
        f"https://github.com/owner/repo/issues/{n}" if remote else Path(f"/r/x{n}/BLOCKED.md")
    )
    state = rng.choice(["blocked"] * 6 + ["waiting", "not-resumed", "restart-failed"])
    return Block(
        id=f"{rng.choice(['T-', 'b', 'B'])}{rng.randint(0, 30)}",
        source=source,
        repo=repo,  # type: ignore[arg-type]
        path=path,  # type: ignore[arg-type]
        state=state,
        question=_question(rng),
        context="",
        attempted=(),
        choices=(),
        since=T0 + timedelta(minutes=rng.randint(0, 20)),
        fingerprint=f"{rng.random()}",
        raw="",
        category=rng.choice([None, None, "credentials", "Credentials", "design", "ß"]),
        summary=rng.choice([None] * 5 + ["Task 9: needs a token"]),
    )


def _changed(rng: random.Random, block: Block) -> Block:
    """The same block (same row key) read again: a new question, time, state or category."""
    other = _block(rng, 0)
    field = rng.choice(["question", "since", "state", "category", "id", "summary"])
    return replace(block, **{field: getattr(other, field)}, fingerprint=f"{rng.random()}")


def _drawn(rows: RowOrder) -> list[object]:
    return [r if isinstance(r, str) else (r.name, r.count, r.folded, r.marked) for r in rows.rows()]


def _same_view(new: RowOrder, old: RowOrderBefore) -> None:
    assert list(new.blocks) == list(old.blocks)
    assert new.order == old.order
    assert _drawn(new) == _drawn(old)
    assert [b.id for b in new.marked_blocks()] == [b.id for b in old.marked_blocks()]
    for group in {r.name for r in old.rows() if isinstance(r, Group)}:
        assert new.members(group) == old.members(group)
    for rk, block in list(new.blocks.items())[:: max(1, len(new.blocks) // 50)]:
        assert new.group_of(block) == old.group_of(old.blocks[rk])


@pytest.mark.parametrize("seed", range(12))
def test_question_groups_as_before_on_generated_hostile_blocks(seed: int) -> None:
    rng = random.Random(seed)
    blocks = [_block(rng, n) for n in range(rng.choice([50, 400, 1500]))]
    for _ in range(3):
        rng.shuffle(blocks)
        groups = question_groups(blocks)
        assert [[id(b) for b in g] for g in groups] == [
            [id(b) for b in g] for g in question_groups_before(blocks)
        ]
        assert any(len(g) > 2 for g in groups)


def test_question_groups_as_before_past_the_candidate_caps() -> None:
    """1,500 questions without numbers sharing two or more of ten words: a word's postings pass
    MAX_POSTINGS and a block's candidates GROUP_CANDIDATES, where the caps decide."""
    rng = random.Random(7)
    blocks = []
    for n in range(1500):
        words = rng.sample(WORDS, rng.randint(2, 4))
        own = "".join(rng.choice("klmnopqrst") for _ in range(5))
        question = " ".join([*words, own] if rng.random() < 0.8 else words)
        blocks.append(replace(_block(rng, n), question=question, summary=None))
    groups = question_groups(blocks)
    assert groups == question_groups_before(blocks) and len(groups) > 10


def _rows(blocks: list[Block], spec: ViewSpec) -> tuple[RowOrder, RowOrderBefore]:
    now = T0 + timedelta(hours=1)
    new = RowOrder(blocks, spec, now=now, questions=question_groups)
    old = RowOrderBefore(blocks, spec, now=now, questions=question_groups_before)
    return new, old


def _set(new: RowOrder, old: RowOrderBefore, **change: object) -> None:
    spec = replace(new.spec, **change)  # type: ignore[arg-type]
    new.set_spec(spec)
    old.set_spec(spec)


@pytest.mark.parametrize("seed", range(10))
def test_orders_groupings_and_deltas_as_before(seed: int) -> None:
    rng = random.Random(1000 + seed)
    blocks = [_block(rng, n) for n in range(300)]
    new, old = _rows(blocks, ViewSpec())
    _same_view(new, old)
    serial = 300
    for _step in range(60):
        action = rng.random()
        if action < 0.25:
            _set(new, old, order=rng.choice(ORDERS))
        elif action < 0.45:
            _set(new, old, group=rng.choice(GROUPS))
        elif action < 0.5:
            text = rng.choice(["", "repo", "cat:credentials", "token", "legacy 1"])
            spec = new.spec.with_query(text)
            new.set_spec(spec)
            old.set_spec(old.spec.with_query(text))
        elif action < 0.55 and new.order:
            rk = rng.choice(new.order)
            new.marked.add(rk)
            old.marked.add(rk)
        elif action < 0.6:
            groups = [r.name for r in old.rows() if isinstance(r, Group)]
            if groups:
                name = rng.choice(groups)
                new.toggle_fold(name)
                old.toggle_fold(name)
        else:
            known = list(new.blocks.values())
            removed = [key_of(b) for b in rng.sample(known, min(len(known), rng.randint(0, 4)))]
            gone = {f"{k[0]}:{k[1]}" for k in removed}
            kept = [b for b in known if row_of(b) not in gone]
            picked = rng.sample(kept, min(len(kept), rng.randint(0, 4)))
            changed = [_changed(rng, b) for b in picked]
            added = []
            for _ in range(rng.randint(0, 5)):
                serial += 1
                added.append(_block(rng, serial))
            keep = rng.choice(new.order) if new.order and rng.random() < 0.7 else None
            delta = Delta(added=added, changed=changed, removed=removed)
            assert new.apply(delta, keep) == old.apply(delta, keep)
        _same_view(new, old)


@pytest.mark.parametrize("seed", range(6))
def test_a_delta_lands_where_a_full_sort_puts_it_in_every_order_and_grouping(seed: int) -> None:
    """Blocks that came and left (a change keeps its row until the order changes), then each
    order and grouping chosen: the rows are those of a RowOrder made from scratch."""
    rng = random.Random(2000 + seed)
    blocks = [_block(rng, n) for n in range(300)]
    rows = RowOrder(blocks, ViewSpec(), now=T0, questions=question_groups)
    serial = 300
    for _ in range(20):
        known = list(rows.blocks.values())
        removed = [key_of(b) for b in rng.sample(known, 3)]
        added = []
        for _ in range(4):
            serial += 1
            added.append(_block(rng, serial))
        rows.apply(Delta(added=added, removed=removed), None)
        fresh = RowOrder(list(rows.blocks.values()), rows.spec, now=T0, questions=question_groups)
        assert rows.order == fresh.order  # ungrouped, the order it was made in
    for order in ORDERS:
        for group in GROUPS:
            if group == "question":
                continue  # (grouped by question, groups depend on the blocks' order: above)
            spec = ViewSpec(order=order, group=group)
            rows.set_spec(spec)
            fresh = RowOrder(list(rows.blocks.values()), spec, now=T0, questions=question_groups)
            assert rows.order == fresh.order and rows.rows() == fresh.rows()
            more = _block(rng, serial + 1)
            serial += 1
            gone = rng.choice(list(rows.blocks.values()))
            rows.apply(Delta(added=[more], removed=[key_of(gone)]), None)
            fresh = RowOrder(list(rows.blocks.values()), spec, now=T0, questions=question_groups)
            assert rows.order == fresh.order and rows.rows() == fresh.rows()


def test_a_group_past_the_candidate_cap_is_not_looked_for() -> None:
    """450 groups each sharing two words with a question and not the same question, then one
    that is: it is the 451st candidate, past GROUP_CANDIDATES, so the question begins a
    group of its own (as before; a candidate list that ignored the cap would join them)."""
    rng = random.Random(3)
    greek = [
        "kappa",
        "lambda",
        "omicron",
        "sigma",
        "theta",
        "delta",
        "gamma",
        "zeta",
        "iota",
        "upsilon",
    ]

    def own() -> str:
        return "".join(rng.choice("bcdfghjklmnpqrtvwxz") for _ in range(7))

    questions = [
        " ".join([greek[i % 10], greek[(i + 1) % 10], own(), own(), own()]) for i in range(450)
    ]
    questions += [" ".join([*greek, own()]), " ".join(greek)]
    blocks = [
        replace(_block(rng, n), question=q, summary=None, state="blocked")
        for n, q in enumerate(questions)
    ]
    groups = question_groups(blocks)
    assert groups == question_groups_before(blocks)
    assert all(blocks[-1] not in g for g in groups)


def _far_times(rng: random.Random, block: Block) -> Block:
    """The block dated centuries away, a microsecond or two from others: two distinct times
    there can share a float timestamp (what "newest" sorts by)."""
    far = datetime(9000 + rng.randint(0, 1), 1, 1, tzinfo=UTC)
    return replace(block, since=far + timedelta(microseconds=rng.randint(0, 40)))


def _fresh_same(rows: RowOrder) -> None:
    """Right after an `s`: the rows are those of a RowOrder made from scratch of the same
    blocks (every kept order patched, every derived order, is a full sort's)."""
    fresh = RowOrder(list(rows.blocks.values()), rows.spec, now=T0, questions=question_groups)
    fresh.folded, fresh.marked = set(rows.folded), set(rows.marked)
    assert list(rows.blocks) == list(fresh.blocks)
    assert rows._sorted == fresh._sorted
    assert rows.order == fresh.order
    assert rows.rows() == fresh.rows()
    assert [b.id for b in rows.marked_blocks()] == [b.id for b in fresh.marked_blocks()]


@pytest.mark.parametrize("seed", range(12))
def test_kept_and_derived_orders_are_a_fresh_sort_after_random_histories(seed: int) -> None:
    """Random arrivals, changes (a changed block keeps its row until the order changes) and
    removals, few or many (past a sixteenth of the rows a kept order is sorted again),
    between `s`, `v`, filters and marks: after each `s` the rows are a fresh RowOrder's, and
    the blocks' own places within the current order are where the code before put them."""
    rng = random.Random(3000 + seed)
    far = seed % 3 == 0  # dates where timestamps collide: "newest" is sorted afresh
    blocks = [_block(rng, n) for n in range(rng.choice([40, 300]))]
    if far:
        blocks = [_far_times(rng, b) if rng.random() < 0.5 else b for b in blocks]
    new, old = _rows(blocks, ViewSpec())
    serial = len(blocks)
    for _step in range(80):
        action = rng.random()
        if action < 0.3:
            order = rng.choice([o for o in ORDERS if o != new.spec.order])
            _set(new, old, order=order)
            _fresh_same(new)
        elif action < 0.4:
            _set(new, old, group=rng.choice(GROUPS))
        elif action < 0.45:
            text = rng.choice(["", "repo", "token", "cat:design"])
            new.set_spec(new.spec.with_query(text))
            old.set_spec(old.spec.with_query(text))
        elif action < 0.5 and new.order:
            rk = rng.choice(new.order)
            new.marked.add(rk)
            old.marked.add(rk)
        else:
            known = list(new.blocks.values())
            many = rng.random() < 0.15
            top = len(known) // 5 if many else 4
            removed = [key_of(b) for b in rng.sample(known, min(len(known), rng.randint(0, top)))]
            gone = {row_of(b) for b in known if key_of(b) in removed}
            kept = [b for b in known if row_of(b) not in gone]
            picked = rng.sample(kept, min(len(kept), rng.randint(0, top)))
            changed = [_changed(rng, b) for b in picked]
            if far:
                changed = [_far_times(rng, b) if rng.random() < 0.5 else b for b in changed]
            added = []
            for _ in range(rng.randint(0, 40 if many else 5)):
                serial += 1
                block = _block(rng, serial)
                added.append(_far_times(rng, block) if far and rng.random() < 0.5 else block)
            # (a block read again as an arrival: it keeps its row)
            again = [_changed(rng, b) for b in rng.sample(kept, min(len(kept), 1))]
            delta = Delta(added=added + again, changed=changed, removed=removed)
            keep = rng.choice(new.order) if new.order and rng.random() < 0.7 else None
            assert new.apply(delta, keep) == old.apply(delta, keep)
        _same_view(new, old)


def test_an_order_derived_is_a_full_sort_and_none_where_timestamps_collide() -> None:
    """`orders.derived` from the oldest-first rows gives the full sort's rows for each order
    it derives; "newest" where two distinct times share a timestamp gives None (its ties
    would differ), and a full sort is what the RowOrder then shows."""
    from hitl_tui.inbox import orders
    from hitl_tui.inbox.view import SORT_KEYS

    rng = random.Random(11)
    blocks = {row_of(b): b for b in (_block(rng, n) for n in range(2000))}
    oldest, _ = orders.sorted_rows(blocks, SORT_KEYS["oldest"])
    for order in sorted(orders.DERIVED):
        assert (
            orders.derived(order, oldest, blocks) == orders.sorted_rows(blocks, SORT_KEYS[order])[0]
        )
    a = replace(_block(rng, 1), since=datetime(9000, 1, 1, tzinfo=UTC), id="z")
    b = replace(a, path=Path("/r/other/BLOCKED.md"), id="a")
    b = replace(b, since=a.since + timedelta(microseconds=1))
    assert a.since != b.since and a.since.timestamp() == b.since.timestamp()
    pair = {row_of(a): a, row_of(b): b}
    base, _ = orders.sorted_rows(pair, SORT_KEYS["oldest"])
    assert orders.derived("newest", base, pair) is None
    rows = RowOrder(pair.values(), ViewSpec(), now=T0)
    rows.set_spec(ViewSpec(order="newest"))
    assert rows.order == orders.sorted_rows(pair, SORT_KEYS["newest"])[0] == [row_of(b), row_of(a)]


def test_a_question_read_again_by_its_text_is_as_read_from_its_one_line() -> None:
    """`similarity._asked` keeps each question by the block's own text (summary, else
    question) too: read again, from either cache, it is what its one line gives, for hostile
    texts and summaries (empty, blank, markup, escapes, huge), and past the caches' bound."""
    from hitl_tui.loops import similarity

    rng = random.Random(5)
    blocks = []
    for n in range(600):
        block = _block(rng, n)
        summary = rng.choice([None, "", " ", block.question, f"Task {n % 9}:  {block.question}"])
        blocks.append(replace(block, summary=summary))

    def plain(block: Block) -> similarity._Asked:
        question = block.one_line_question(300)
        normal, marks = similarity.normalise(question), similarity.literals(question)
        kinds = tuple(frozenset(x for x in marks if x.startswith(k)) for k in similarity._KINDS)
        return similarity._Asked(normal, similarity.tokens(normal), marks, kinds)

    similarity._RAW.clear()
    similarity._ASKED.clear()
    for _ in range(2):
        for block in blocks:
            assert similarity._asked(block) == plain(block)
    assert similarity._RAW and similarity._ASKED
    bound = similarity._ASKED_MAX
    similarity._ASKED_MAX = 50
    similarity._RAW.clear()
    similarity._ASKED.clear()
    try:
        for block in blocks:
            assert similarity._asked(block) == plain(block)
            assert len(similarity._RAW) <= 50 and len(similarity._ASKED) <= 50
    finally:
        similarity._ASKED_MAX = bound
