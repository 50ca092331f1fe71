"""The order of the rows (view.py): one order for `hitl list` and the app, kept by deltas."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hitl_tui.inbox.inbox import Delta
from hitl_tui.inbox.view import RowOrder, key_of, ordered, row_of

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def block(name: str, minutes: int):
    from hitl_tui.model import Block

    return Block(
        id=name,
        source="loopkit",
        repo=Path("/r") / name,
        path=Path("/r") / name / "BLOCKED.md",
        state="blocked",
        question=f"{name}?",
        context="",
        attempted=(),
        choices=(),
        since=T0 + timedelta(minutes=minutes),
        fingerprint="x",
        raw="",
    )


def ids(rows: RowOrder) -> list[str]:
    return [rows.blocks[rk].id for rk in rows.order]


def test_oldest_first_ties_by_id() -> None:
    blocks = [block("zeta", 5), block("alpha", 5), block("old", 0)]
    assert [b.id for b in ordered(blocks)] == ["old", "alpha", "zeta"]
    assert ids(RowOrder(blocks)) == ["old", "alpha", "zeta"]


def test_arrivals_append_or_insert_and_known_rows_stay() -> None:
    rows = RowOrder([block("a", 0), block("c", 10)])
    changed, keep = rows.apply(Delta(added=[block("d", 20), block("b", 5)]), row_of(block("c", 0)))
    assert changed and ids(rows) == ["a", "b", "c", "d"]
    assert keep == row_of(block("c", 0))
    # A changed block keeps its row even when its time would sort it elsewhere.
    changed, _ = rows.apply(Delta(changed=[block("a", 99)]), None)
    assert changed and ids(rows) == ["a", "b", "c", "d"]


def test_a_listed_block_that_arrives_again_is_drawn_again() -> None:
    """A block already listed that comes again as an arrival (a host's list sent again, say)
    is kept where it is, as it is now, and its row is said changed: the widget draws its line
    again (with its lines kept between keys, the old one stayed for a minute)."""
    rows = RowOrder([block("a", 0), block("b", 10)])
    again = replace(block("a", 0), question="a, asked otherwise?", fingerprint="y")
    changed, _ = rows.apply(Delta(added=[again]), None)
    assert changed and ids(rows) == ["a", "b"]
    assert rows.blocks[row_of(again)].question == "a, asked otherwise?"


def test_the_highlighted_row_leaving_highlights_the_next_one() -> None:
    a, b, c = block("a", 0), block("b", 1), block("c", 2)
    rows = RowOrder([a, b, c])
    _, keep = rows.apply(Delta(removed=[key_of(b)]), row_of(b))
    assert ids(rows) == ["a", "c"] and keep == row_of(c)
    # The last row leaving: the one before it (never a row that only just came).
    _, keep = rows.apply(Delta(removed=[key_of(c)], added=[block("z", 9)]), row_of(c))
    assert ids(rows) == ["a", "z"] and keep == row_of(a)
    _, keep = rows.apply(Delta(removed=[key_of(a), key_of(block("z", 9))]), row_of(a))
    assert ids(rows) == [] and keep is None
    assert rows.apply(Delta(), row_of(a)) == (False, None)


# -- issue 14: filter, order, groups, snoozed side --------------------------------------------

NOW = T0 + timedelta(hours=3)


def task(name: str, minutes: int, **fields):
    """A block of repo `fields.pop('repo', name)` with the fields given."""
    from dataclasses import replace

    repo = fields.pop("repo", name)
    b = block(name, minutes)
    return replace(
        b, repo=Path("/r") / repo, path=Path("/r") / repo / name / "BLOCKED.md", **fields
    )


FLEET = [
    task("shop", 0, question="Ship the ruff upgrade?", category="contract"),
    task("pay-1", 10, repo="payments", question="Which token?", category="credentials"),
    task("pay-2", 170, repo="payments", question="Rotate keys?", state="needs_context"),
    task("docs", 30, source="agenticloop", title="Fix Ruff lint", question="Ignore E501?"),
]


def shown(text: str = "", **spec) -> list[str]:
    from hitl_tui.inbox.view import ViewSpec, listed

    return [b.id for b in listed(FLEET, ViewSpec(**spec).with_query(text), now=NOW)]


def test_words_are_anded_over_every_field_ignoring_case() -> None:
    assert shown("ruff") == ["shop", "docs"]  # a question, a title
    assert shown("RUFF lint") == ["docs"]
    assert shown("payments") == ["pay-1", "pay-2"]  # the repo
    assert shown("credentials") == ["pay-1"]
    assert shown("needs_context") == ["pay-2"]
    assert shown("agenticloop") == ["docs"]
    assert shown("nothing-like-it") == []
    assert shown("") == ["shop", "pay-1", "docs", "pay-2"]


def test_fields_narrow_and_minus_excludes() -> None:
    assert shown("repo:pay") == ["pay-1", "pay-2"]
    assert shown("cat:cred") == shown("category:cred") == ["pay-1"]
    assert shown("state:needs") == ["pay-2"]
    assert shown("src:agentic") == shown("source:agentic") == ["docs"]
    assert shown("-repo:payments") == ["shop", "docs"]
    assert shown("!ruff repo:shop") == []
    assert shown('"which token"') == ["pay-1"]
    assert shown('"which    token"') == []


def test_age_bounds() -> None:
    # Ages at NOW: shop 3h, pay-1 2h50m, docs 2h30m, pay-2 10m.
    assert shown("age:>2h45m") == ["shop", "pay-1"]
    assert shown("age:2h45m") == ["shop", "pay-1"]
    assert shown("age:<15m") == ["pay-2"]
    assert shown("-age:<15m") == ["shop", "pay-1", "docs"]


def test_incomplete_or_unknown_terms_are_reported() -> None:
    from hitl_tui.inbox.query import Query

    typing = Query.parse("ruff age:>")
    assert len(typing.terms) == 1 and "age: wants a duration" in typing.problems[0]
    assert "not a duration" in Query.parse("age:>soon").problems[0]
    url = Query.parse("http://x")
    assert [t.text for t in url.terms] == ["http://x"]
    assert "no field 'http'" in url.problems[0]
    assert Query.parse('"http://x"').problems == ()
    assert Query.parse("repo:").empty and Query.parse("repo:").problems == ()


def test_orders() -> None:
    assert shown(order="newest") == ["pay-2", "docs", "pay-1", "shop"]
    assert shown(order="repo") == ["docs", "pay-1", "pay-2", "shop"]
    assert shown(order="category") == ["shop", "pay-1", "docs", "pay-2"]
    assert shown(order="source") == ["docs", "shop", "pay-1", "pay-2"]


def test_groups_by_repo_fold_and_count() -> None:
    from hitl_tui.inbox.view import Group, RowOrder, ViewSpec

    rows = RowOrder(FLEET, ViewSpec(group="repo"), now=NOW)
    drawn = [r if isinstance(r, Group) else rows.blocks[r].id for r in rows.rows()]
    assert drawn == [
        Group("shop", 1, False), "shop",
        Group("payments", 2, False), "pay-1", "pay-2",
        Group("docs", 1, False), "docs",
    ]  # fmt: skip
    rows.toggle_fold("payments")
    drawn = [r if isinstance(r, Group) else rows.blocks[r].id for r in rows.rows()]
    assert drawn[2:4] == [Group("payments", 2, True), Group("docs", 1, False)]
    # A new block joins its group, not the end of the list.
    rows.apply(Delta(added=[task("pay-3", 200, repo="payments")]), None)
    assert ids(rows) == ["shop", "pay-1", "pay-2", "pay-3", "docs"]


def test_a_filter_keeps_new_blocks_out_and_counts_them() -> None:
    from hitl_tui.inbox.view import RowOrder, ViewSpec

    rows = RowOrder(FLEET, ViewSpec().with_query("repo:payments"), now=NOW)
    assert ids(rows) == ["pay-1", "pay-2"] and rows.counts == (2, 4)
    keep = rows.order[1]
    changed, kept = rows.apply(
        Delta(added=[task("web", 5), task("pay-0", 1, repo="payments")]), keep
    )
    assert changed and ids(rows) == ["pay-0", "pay-1", "pay-2"] and kept == keep
    assert rows.hidden_arrivals == 1 and rows.counts == (3, 6)
    # A block changed so that it no longer matches leaves; the cursor goes to the next row.
    from dataclasses import replace

    moved = replace(rows.blocks[rows.order[0]], repo=Path("/r/elsewhere"))
    _changed, kept = rows.apply(Delta(changed=[moved]), rows.order[0])
    assert ids(rows) == ["pay-1", "pay-2"] and kept == rows.order[0]
    # A new filter counts again from nothing.
    rows.set_spec(rows.spec.with_query(""))
    assert rows.hidden_arrivals == 0 and len(rows) == 6


def test_the_snoozed_side() -> None:
    from hitl_tui.inbox.view import RowOrder, Snoozed, ViewSpec

    class Aside(Snoozed):
        def snoozed(self, block, now):
            return block.id == "shop"

    rows = RowOrder(FLEET, ViewSpec(), Aside(), now=NOW)
    assert ids(rows) == ["pay-1", "docs", "pay-2"]
    rows.set_spec(ViewSpec(snoozed=True))
    assert ids(rows) == ["shop"]


def test_next_where_wraps_around() -> None:
    rows = RowOrder(FLEET)
    order = rows.order
    assert rows.next_where(order[0], 1, lambda b: b.id.startswith("pay")) == order[1]
    assert rows.next_where(order[1], 1, lambda b: b.id.startswith("pay")) == order[3]
    assert rows.next_where(order[3], 1, lambda b: b.id.startswith("pay")) == order[1]
    assert rows.next_where(order[1], -1, lambda b: b.id.startswith("pay")) == order[3]
    assert rows.next_where(None, 1, lambda b: False) is None


def test_urgency_follows_the_sla() -> None:
    from hitl_tui.inbox.view import urgency

    warn, alert = timedelta(minutes=15), timedelta(hours=1)
    b = block("a", 0)
    assert urgency(b, T0 + timedelta(minutes=14), warn, alert) == ""
    assert urgency(b, T0 + timedelta(minutes=15), warn, alert) == "warn"
    assert urgency(b, T0 + timedelta(hours=1), warn, alert) == "alert"


def test_a_clock_says_what_now_is_when_no_time_is_given() -> None:
    from hitl_tui.inbox.view import RowOrder, Snoozed, ViewSpec

    seen = []

    class Until(Snoozed):
        def snoozed(self, block, now):
            seen.append(now)
            return block.id == "a" and now < T0 + timedelta(hours=1)

    at = [T0]
    rows = RowOrder([block("a", 0), block("b", 1)], ViewSpec(), Until(), clock=lambda: at[0])
    assert ids(rows) == ["b"] and set(seen) == {T0}
    at[0] = T0 + timedelta(hours=2)
    assert rows.refilter() and ids(rows) == ["a", "b"]
    rows.apply(Delta(added=[block("c", 2)]), None)
    assert seen[-1] == at[0]


def test_typing_on_filters_what_is_listed_and_lists_what_a_full_pass_would() -> None:
    """A keystroke that only narrows (a longer word, one more word) filters the rows already
    listed; every prefix of these queries lists exactly what a fresh pass lists."""
    from hitl_tui.inbox.query import Query
    from hitl_tui.inbox.view import RowOrder, ViewSpec

    assert Query.parse("ruff lint").narrows(Query.parse("ruff li"))
    assert Query.parse("repo:pay x").narrows(Query.parse("repo:pa"))
    assert not Query.parse("-ruff").narrows(Query.parse("-ruf"))  # excluding more is broader
    assert not Query.parse("age:>2h").narrows(Query.parse("age:>1h"))
    assert not Query.parse("ruf").narrows(Query.parse("ruff"))
    assert not Query.parse("cat:ruff").narrows(Query.parse("ruff"))
    for group in (None, "repo"):
        rows = RowOrder(FLEET, ViewSpec(group=group), now=NOW)
        for final in ("repo:payments rotate", "ruff -shop", "pay cred", 'title:"fix r'):
            for end in range(len(final) + 1):
                rows.set_spec(ViewSpec(group=group).with_query(final[:end]), NOW)
                fresh = RowOrder(FLEET, ViewSpec(group=group).with_query(final[:end]), now=NOW)
                assert rows.order == fresh.order, (group, final[:end])


def test_answers_waiting_for_their_loop_come_after_every_block_in_every_order() -> None:
    from dataclasses import replace

    from hitl_tui.inbox.view import ORDERS, ViewSpec

    waiting = replace(block("w", -100), state="waiting", path="waiting:1")
    late = replace(block("x", -200), state="not-resumed", path="waiting:2")
    blocks = [block("a", 0), waiting, block("b", 5), late]
    for order in ORDERS:
        listed = ids(RowOrder(blocks, ViewSpec(order=order)))
        assert listed[-1] == "w", order  # waiting: after the blocks
        assert "x" in listed[:-1], order  # not resumed: among the blocks, it needs you
    rows = RowOrder([block("a", 0)])
    rows.apply(Delta(added=[waiting, block("c", 9)]), None)
    assert ids(rows) == ["a", "c", "w"]
    assert ids(RowOrder(blocks, ViewSpec().with_query("state:waiting"))) == ["w"]
    # Grouped by state: its own group, after the blocks.
    from hitl_tui.inbox.view import Group

    grouped = RowOrder(blocks, ViewSpec(group="state"))
    heads = [(r.name, r.count) for r in grouped.rows() if isinstance(r, Group)]
    assert heads == [("not resumed", 1), ("open", 2), ("waiting for the loop", 1)]


LOOPKIT_NONE = 'loopkit blocks carry no category unless BLOCKED.md says "Category: NAME"'


def test_a_cat_term_that_finds_none_says_which_blocks_carry_no_category() -> None:
    """Issue 27, item 9: `cat:` does not silently match nothing where a format's blocks carry
    no category unless they declare one."""
    from hitl_tui.inbox.query import Query, category_note
    from hitl_tui.inbox.view import Snoozed, ViewSpec

    hints = {"loopkit": 'BLOCKED.md says "Category: NAME"'}

    def note(text: str, blocks=FLEET) -> str | None:
        return category_note(Query.parse(text), blocks, hints.get)

    # FLEET: shop contract, pay-1 credentials; pay-2 (needs_context) and docs carry none.
    assert note("cat:permission") == (
        f"cat: {LOOPKIT_NONE} (1 here); 1 agenticloop block carries none either"
    )
    loopkit_only = [b for b in FLEET if b.id != "docs"]
    assert note("cat:permission", loopkit_only) == f"cat: {LOOPKIT_NONE} (1 here)"
    agentic_only = [b for b in FLEET if b.id != "pay-2"]
    assert note("cat:permission", agentic_only) == "cat: 1 agenticloop block carries no category"
    # A cat: term that matches a block, a negated one, none at all, or a fleet whose every
    # block has a category: nothing to say.
    assert note("cat:cred") is None and note("cat:cred repo:shop") is None
    assert note("-cat:permission") is None and note("permission") is None
    assert note("cat:permission", [b for b in FLEET if b.category]) is None
    # Two cat: terms: one that finds none is enough.
    assert note("cat:cred cat:permission") is not None
    # The list's: the blocks on its side of a snooze, the answers waiting for their loops aside.
    from dataclasses import replace

    class Aside(Snoozed):
        def snoozed(self, block, now):
            return block.id == "pay-2"

    rows = RowOrder(agentic_only, ViewSpec().with_query("cat:permission"), Aside(), now=NOW)
    assert rows.category_note(hints.get) == "cat: 1 agenticloop block carries no category"
    waiting = replace(block("w", 5), state="waiting", path="waiting:1")
    rows = RowOrder([*loopkit_only, waiting], ViewSpec().with_query("cat:x"), Aside(), now=NOW)
    assert rows.category_note(hints.get) is None
    rows.set_spec(ViewSpec(snoozed=True).with_query("cat:x"))
    assert rows.category_note(hints.get) == f"cat: {LOOPKIT_NONE} (1 here)"


def test_a_filter_finds_a_block_by_its_new_text_and_keeps_the_snoozed_aside() -> None:
    """The filter's words are looked up in texts kept between keystrokes and the snoozed rows
    in a set (no call per block): a block that changed is found by its new words, not its
    old ones; an arrival is found; a snoozed block (the operator's real snooze book) stays
    off the list and is on the snoozed side, until its snooze runs out."""
    from dataclasses import replace

    from hitl_tui.inbox.view import RowOrder, ViewSpec
    from hitl_tui.state.snoozes import SnoozeBook

    book = SnoozeBook(None)
    book.snooze(FLEET[0], NOW + timedelta(hours=1))  # shop, for an hour
    rows = RowOrder(FLEET, ViewSpec(), book, now=NOW)
    assert ids(rows) == ["pay-1", "docs", "pay-2"]
    rows.set_spec(ViewSpec().with_query("r"), NOW)  # makes every text
    assert ids(rows) == ["pay-1", "docs", "pay-2"]
    rows.set_spec(ViewSpec(), NOW)  # the filter closed: the change below is not filtered
    changed = replace(FLEET[1], question="Which vault holds the token?")
    rows.apply(Delta(changed=[changed], added=[task("vault", 40)]), None)
    for text, want in (("vault", ["pay-1", "vault"]), ('"which token"', []), ("ruff", ["docs"])):
        rows.set_spec(ViewSpec().with_query(text), NOW)
        assert ids(rows) == want, text
    rows.set_spec(ViewSpec(snoozed=True).with_query("ruff"), NOW)
    assert ids(rows) == ["shop"]
    rows.set_spec(ViewSpec().with_query("ruff"), NOW + timedelta(hours=2))  # ran out
    assert ids(rows) == ["shop", "docs"]
