"""The inbox's two widgets: the list of blocks and the detail of the highlighted one.

Agent text reaches the screen only as `rich.text.Text` or `Content` built from plain strings that
went through `printable()`: never as markup, so `[b`, `[/x]` or `[@click=app.quit]` in a
BLOCKED.md is just text, and escape sequences show as visible symbols.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import ClassVar

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widget import Widget

from hitl_tui.inbox.inbox import Delta
from hitl_tui.inbox.view import Group, RowOrder, ViewSpec, nearest_open, row_key, row_of, urgency
from hitl_tui.model import Block
from hitl_tui.sources.agentic_common import CATEGORIES
from hitl_tui.textio import printable
from hitl_tui.timefmt import age
from hitl_tui.tui.bindings import bindings
from hitl_tui.tui.columns import column_widths
from hitl_tui.tui.statecol import WAITING_WORDS, state_words

__all__ = ["BlockList", "BlockListHeader", "row_key"]

Clock = Callable[[], datetime]
PLAIN = Style()


class BlockList(ScrollView, can_focus=True):
    """Every open block the view lists, drawn line by line: only the visible rows are rendered.

    A DataTable measures every cell of every row when rows change (seconds at 5,000 blocks);
    this list keeps plain Python lists and renders the rows on screen, so a keypress costs the
    same at 10 blocks as at 5,000. The highlighted block stays put when others come and go, and
    when a filter, an order or a grouping changes while it is still listed.

    What is listed is the domain's `view.RowOrder` (`rows`, with its `ViewSpec`); grouped, a
    header row per group (`view.Group`) comes before its blocks, and Enter or a click on
    it folds the group. A block the operator has not highlighted yet (`is_new`) has a mark in
    the first column; its age is amber, then red, past the `[sla]` times.
    """

    DEFAULT_CSS = """
    BlockList { background: $surface; overflow-x: hidden; }
    BlockList > .blocklist--cursor {
        background: $block-cursor-background;
        color: $block-cursor-foreground;
        text-style: bold;
    }
    BlockList:blur > .blocklist--cursor {
        background: $block-cursor-blurred-background;
        text-style: none;
    }
    BlockList > .blocklist--dim { color: $text-muted; }
    BlockList > .blocklist--ctx { color: $accent; text-style: bold; }
    BlockList > .blocklist--category { color: $warning; }
    BlockList > .blocklist--problem { color: $error; text-style: bold; }
    BlockList > .blocklist--new { color: $accent; text-style: bold; }
    BlockList > .blocklist--warn { color: $warning; }
    BlockList > .blocklist--alert { color: $error; text-style: bold; }
    BlockList > .blocklist--group { color: $text; background: $panel; text-style: bold; }
    BlockList > .blocklist--marked { background: $secondary 35%; }
    BlockList > .blocklist--mark { color: $secondary-lighten-2; text-style: bold; }
    """
    COMPONENT_CLASSES: ClassVar = {
        "blocklist--cursor",
        "blocklist--dim",
        "blocklist--ctx",
        "blocklist--category",
        "blocklist--problem",
        "blocklist--new",
        "blocklist--warn",
        "blocklist--alert",
        "blocklist--group",
        "blocklist--marked",
        "blocklist--mark",
    }
    BINDINGS: ClassVar = bindings("list")
    #: (title, width) of the fixed columns; the question takes the rest. The block column
    #: widens to the longest id (`columns.column_widths`), the state column to the longest
    #: state shown (see `_state_width`).
    FIXED = (("block", 20), ("age", 4), ("state", 9))
    #: The state column is never wider than the longest documented category (FORMATS.md
    #: §2.2, `review-exhausted`): an unknown, longer one is cut, the question keeps its room.
    STATE_MAX = max(len(c) for c in CATEGORIES)
    #: ... but for an answer whose loop's restart failed: `restart failed (exit 127)`,
    #: `restart failed (not found)` are whole (and longer ones cut at this).
    FAILED_MAX = len("restart failed (not found)")
    #: The mark of a block not seen yet, in the first column (a space when seen).
    NEW_MARK = "●"
    #: The mark of a block that asks again what was answered (`similar`; tui/asked.py).
    AGAIN_MARK = "↻"
    #: The mark of a block the operator marked (Space, M) for a batch answer: it wins over
    #: the others, and the row's background is tinted.
    MARKED_MARK = "✓"

    cursor_row: reactive[int] = reactive(0, always_update=False)

    class Highlighted(Message):
        """The highlighted block changed (or the list did, under it)."""

        def __init__(self, block: Block | None) -> None:
            super().__init__()
            self.block = block

    def __init__(
        self,
        clock: Clock,
        rows: RowOrder | None = None,
        *,
        is_new: Callable[[Block], bool] | None = None,
        sla: tuple[timedelta, timedelta] | None = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.clock = clock
        #: The rows and their order (the domain's `view.RowOrder`); this widget draws them.
        self.rows = rows if rows is not None else RowOrder()
        #: Whether a block gets the new mark (None: no marks).
        self.is_new = is_new
        #: (warn, alert): when the age turns amber, then red (None: never).
        self.sla = sla
        #: What is drawn top to bottom: row keys, and group headers when grouped.
        self.drawn: list[str | Group] = []
        #: The `_item_key` of each of `drawn`, made with it (a header keeps its key when its
        #: marks are counted again: its name is the key).
        self._drawn_at: list[str] = []
        #: Each drawn key's row (`_index`), made when first asked for after a redraw (None).
        self._rows_at: dict[str, int] | None = {}
        self._lines: dict[tuple, Strip] = {}
        self._id_cells: int | None = None
        self._state_cells: int | None = None
        #: Each known block's id and state widths, kept as blocks come and go (`_Measures`).
        self._measures = _Measures()
        #: The column titles above the list, redrawn when the columns change width.
        self.header: Widget | None = None
        #: Whether a block asks again what was answered (None: no marks; tui/asked.py).
        self.is_asked: Callable[[Block], bool] | None = None

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """As tall as its rows, but never taller than the screen (the list's box is at most
        its share of it anyway). Textual measures a `height: auto` box by laying it out at
        its full height, and its map of where widgets are grows with it: at 50,000 rows every
        layout (each change of the rows' count) took 10-20 ms of that, for nothing shown."""
        return min(self.virtual_size.height, max(viewport.height, 1))

    # -- data --------------------------------------------------------------------------------

    @property
    def blocks(self) -> dict[str, Block]:
        """Every known block, listed or not (filtered, snoozed), by row key."""
        return self.rows.blocks

    @property
    def order(self) -> list[str]:
        """The listed row keys, top to bottom (group headers aside)."""
        return self.rows.order

    @property
    def current(self) -> Block | None:
        """The highlighted block (None on a group's header row)."""
        if 0 <= self.cursor_row < len(self.drawn):
            item = self.drawn[self.cursor_row]
            if isinstance(item, str):
                return self.blocks.get(item)
        return None

    @property
    def current_group(self) -> Group | None:
        """The group whose header row is highlighted, if one is."""
        if 0 <= self.cursor_row < len(self.drawn):
            item = self.drawn[self.cursor_row]
            if isinstance(item, Group):
                return item
        return None

    def _item_key(self, item: str | Group) -> str:
        """A drawn item's key in `_index`: a row key, or `\\0group:name` for a header."""
        return item if isinstance(item, str) else f"\0group:{item.name}"

    def _drawn_keys(self) -> list[str]:
        """The `_item_key` of each drawn item, top to bottom (ungrouped: the drawn list
        itself, which a redraw replaces and never changes)."""
        return self._drawn_at

    @property
    def _index(self) -> dict[str, int]:
        """Each drawn item's row by its `_item_key`: made in C when first needed after a
        redraw (a filter keystroke that keeps the highlighted row needs none: at 50,000
        rows it was 3-4 ms a key)."""
        if self._rows_at is None:
            self._rows_at = dict(zip(self._drawn_at, range(len(self._drawn_at)), strict=True))
        return self._rows_at

    def _row_at(self, key: str) -> int | None:
        """`_index.get(key)`, without making `_index` (the list searched in C instead)."""
        if self._rows_at is not None:
            return self._rows_at.get(key)
        try:
            return self._drawn_at.index(key)
        except ValueError:
            return None

    def _kept(self) -> str | None:
        if 0 <= self.cursor_row < len(self.drawn):
            return self._item_key(self.drawn[self.cursor_row])
        return None

    def _reindex(self, known_changed: bool = True) -> None:
        """Draw the rows again. The id and state columns are as wide as the longest of every
        known block, listed or not, so a filter or a fold (`known_changed` False) keeps them;
        a change of some blocks measures those alone (`_measures`)."""
        self.drawn = self.rows.rows()
        if self.rows.spec.group:  # (no call per row: 50,000 were 30 ms, twice a `v`)
            self._drawn_at = [
                item if type(item) is str else f"\0group:{item.name}"  # type: ignore[union-attr]
                for item in self.drawn
            ]
        else:  # row keys alone: the drawn list itself, which a redraw replaces
            self._drawn_at = self.drawn  # type: ignore[assignment]
        self._rows_at = None  # (indexed when first needed)
        before = (self._state_cells, self._id_cells)
        if known_changed:
            self._id_cells = self._state_cells = None
            # (a filter or a fold keeps every row's line: the columns keep their widths)
            self._lines.clear()
        self.virtual_size = Size(self.scrollable_content_region.width, len(self.drawn))
        self.refresh()
        if self.header is not None and before != (self._state_width(), self._longest_id()):
            self.header.refresh()  # the column titles follow the columns' widths

    def load(self, blocks: list[Block]) -> None:
        """Replace every row (start-up): in the order `view.RowOrder` gives them."""
        keep = self._kept()
        self.rows.load(blocks)
        self._measures.valid = False  # every block measured again, when first drawn
        self._reindex()
        self._restore(keep, self.cursor_row)

    def _restore(self, keep: str | None, fallback: int, before: list[str] | None = None) -> None:
        """Highlight `keep` again; when it left, the nearest open block to it in `before` (the
        keys drawn until now) still drawn (`view.nearest_open`), else the row at `fallback`."""
        row = self._row_at(keep) if keep is not None else None
        if keep is not None and row is None and before and keep in before:
            at = before.index(keep)
            keep = nearest_open(self.blocks, before[at + 1 :], before[:at], self._index)
            if keep is None:
                fallback = len(self.drawn) - 1
            row = self._row_at(keep) if keep is not None else None
        if row is None:
            row = min(max(fallback, 0), max(len(self.drawn) - 1, 0))
        self._move(row, force=True)

    def apply(self, delta: Delta) -> None:
        """Apply a Delta with the least change: the highlighted block keeps the cursor."""
        current = self.current
        keep = row_of(current) if current is not None else None
        group = None if current is not None else self._kept()
        changed, keep = self.rows.apply(delta, keep)
        touched = {row_key(k) for k in delta.removed}
        touched.update(row_of(b) for b in delta.added)
        touched.update(row_of(b) for b in delta.changed)
        self._measures.update(touched, self.blocks)
        if changed:
            self._reindex()
        self._restore(keep if current is not None else group, self.cursor_row)

    def relist(self, change: Callable[[], object]) -> None:
        """Run `change` (a new spec, a refilter, a fold) and draw the rows it leaves; the
        highlighted row keeps the cursor while it is still drawn."""
        keep = self._kept()
        before = self._drawn_keys()
        change()
        self._reindex(known_changed=False)
        self._restore(keep, self.cursor_row, before)

    def set_spec(self, spec: ViewSpec) -> None:
        """List what `spec` says (a filter keystroke: one pass over the blocks)."""
        self.relist(lambda: self.rows.set_spec(spec, self.clock()))

    def refilter(self) -> bool:
        """Look again at what is listed (a snooze set, run out or undone); the rows are redrawn
        only when they changed, and whether they did is returned."""
        keep = self._kept()
        before = self._drawn_keys()
        if not self.rows.refilter(self.clock()):
            return False
        self._reindex(known_changed=False)
        self._restore(keep, self.cursor_row, before)
        return True

    def toggle_fold(self, group: Group) -> None:
        self.relist(lambda: self.rows.toggle_fold(group.name))

    def set_marks(self, rks: set[str], on: bool) -> None:
        """Mark (`on`) or unmark the rows `rks`: only their lines are drawn again, and, grouped,
        the headers of their groups (a cost per row marked, never a pass over the list)."""
        marked = self.rows.marked
        changed = rks - marked if on else rks & marked
        if on:
            marked |= changed
        else:
            marked -= changed
        if not changed:
            return
        if self.rows.spec.group:
            counts: dict[str, int] = {}
            for rk in changed:
                name = self.rows.group_of(self.blocks[rk]) or ""
                counts[name] = counts.get(name, 0) + (1 if on else -1)
            for name, step in counts.items():
                row = self._index.get(f"\0group:{name}")
                item = self.drawn[row] if row is not None else None
                if row is not None and isinstance(item, Group):
                    self.drawn[row] = replace(item, marked=item.marked + step)
                    self.refresh_line(row - self.scroll_offset.y)
        if len(changed) > 20:
            self._lines.clear()
            self.refresh()
        else:
            for rk in changed:
                self.refresh_row(rk)

    def clear_marks(self) -> None:
        self.set_marks(set(self.rows.marked), False)

    def refresh_ages(self) -> None:
        self._lines.clear()
        self.refresh()

    def refresh_row(self, rk: str) -> None:
        """Redraw one row (its new mark went): the cached lines of the others stay."""
        row = self._row_at(rk)
        if row is None:
            return
        for key in [k for k in self._lines if k[0] == rk]:
            del self._lines[key]
        self.refresh_line(row - self.scroll_offset.y)

    # -- the cursor --------------------------------------------------------------------------

    def _move(self, row: int, force: bool = False) -> None:
        row = min(max(row, 0), max(len(self.drawn) - 1, 0))
        if row != self.cursor_row or force:
            self.refresh_line(self.cursor_row - self.scroll_offset.y)
            self.cursor_row = row
            self.refresh_line(row - self.scroll_offset.y)
            self.post_message(self.Highlighted(self.current))
        self._scroll_to_cursor()

    def _scroll_to_cursor(self) -> None:
        height = self.scrollable_content_region.height
        top = self.scroll_offset.y
        if height <= 0:
            return
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False)
        elif self.cursor_row >= top + height:
            self.scroll_to(y=self.cursor_row - height + 1, animate=False)

    def move_cursor(self, row: int) -> None:
        self._move(row)

    def select(self, rk: str) -> bool:
        """Highlight the row `rk`; False when it is not drawn (not listed, or folded)."""
        row = self._index.get(rk)
        if row is None:
            return False
        self._move(row)
        return True

    def action_cursor_down(self) -> None:
        self._move(self.cursor_row + 1)

    def action_cursor_up(self) -> None:
        self._move(self.cursor_row - 1)

    def action_page(self, direction: int) -> None:
        self._move(self.cursor_row + direction * max(1, self.scrollable_content_region.height - 1))

    def action_first(self) -> None:
        """`g` / `G`: the first / last block, past group header rows (unless all are folded)."""
        self._move(next((r for r, i in enumerate(self.drawn) if isinstance(i, str)), 0))

    def action_last(self) -> None:
        rows = range(len(self.drawn) - 1, -1, -1)
        self._move(next((r for r in rows if isinstance(self.drawn[r], str)), len(self.drawn) - 1))

    def action_fold(self) -> None:
        """Enter on a group's header row folds or unfolds the group."""
        group = self.current_group
        if group is not None:
            self.toggle_fold(group)

    def on_click(self, event: events.Click) -> None:
        row = event.y + self.scroll_offset.y
        if 0 <= row < len(self.drawn):
            self._move(row)
            item = self.drawn[row]
            if isinstance(item, Group):
                self.toggle_fold(item)

    def on_focus(self) -> None:
        self._lines.clear()
        self.refresh()

    def on_blur(self) -> None:
        self._lines.clear()
        self.refresh()

    def on_resize(self) -> None:
        self.virtual_size = Size(self.scrollable_content_region.width, len(self.drawn))
        self._lines.clear()
        self._scroll_to_cursor()

    # -- drawing -----------------------------------------------------------------------------

    def titles(self, width: int) -> Strip:
        """The column titles, for the Static above the list."""
        titles = [title for title, _ in self.FIXED] + ["question"]
        return self._strip(titles, [Style(bold=True)] * 4, width)

    def _widths(self, width: int) -> list[int]:
        """Each column's width; 0 leaves a column out (the state, in a narrow terminal)."""
        fixed = [w for _, w in self.FIXED]
        return column_widths(width, fixed[0], fixed[1], self._state_width(), self._longest_id())

    def _longest_id(self) -> int:
        if self._id_cells is None:
            self._id_cells = self._measures.of_all(self.blocks).longest(self._measures.ids)
        return self._id_cells

    def _state_width(self) -> int:
        """As wide as the longest state of the known blocks (`no-progress`, `credentials`,
        `merge-conflict` whole), between `needs ctx` and the longest documented category.
        Measured once per change of the list, never per keystroke."""
        if self._state_cells is None:
            measures = self._measures.of_all(self.blocks)
            longest, failed = measures.longest(measures.states), measures.longest(measures.fails)
            cells = min(max(self.FIXED[2][1], longest), self.STATE_MAX)
            self._state_cells = max(cells, min(failed, self.FAILED_MAX))
        return self._state_cells

    def _strip(
        self,
        cells: list[str],
        styles: list[Style],
        width: int,
        base=PLAIN,
        mark: Segment | None = None,
    ) -> Strip:
        segments = [mark or Segment(" ", base)]
        for text, style, size in zip(cells, styles, self._widths(width), strict=True):
            if size:
                segments.append(Segment(_fit(text, size), base + style))
                segments.append(Segment("  ", base))
        return Strip(segments).adjust_cell_length(width, base)

    def render_line(self, y: int) -> Strip:
        row = y + self.scroll_offset.y
        width = self.scrollable_content_region.width
        if row >= len(self.drawn) or width <= 0:
            return Strip.blank(width, self.rich_style)
        item = self.drawn[row]
        selected = row == self.cursor_row
        if isinstance(item, Group):
            return self._render_group(item, width, selected)
        block = self.blocks[item]
        new = self.is_new is not None and self.is_new(block)
        again = self.is_asked is not None and self.is_asked(block)
        marked = item in self.rows.marked
        cache_key = (item, width, selected, self.has_focus, new, again, marked)
        strip = self._lines.get(cache_key)
        if strip is None:
            strip = self._render_row(block, width, selected, new, again, marked)
            if len(self._lines) > 2000:
                self._lines.clear()
            self._lines[cache_key] = strip
        return strip

    def _render_group(self, group: Group, width: int, selected: bool) -> Strip:
        style = self.rich_style + self.get_component_rich_style("blocklist--group")
        if selected:
            style = style + self.get_component_rich_style("blocklist--cursor")
        sign = "▸" if group.folded else "▾"
        noun = "block" if group.count == 1 else "blocks"
        text = f" {sign} {printable(group.name) or '(none)'} · {group.count} {noun}"
        if group.marked:
            text += f" · {group.marked} marked"
        if group.folded:
            text += " (folded)"
        return Strip([Segment(_fit(text, width), style)]).adjust_cell_length(width, style)

    def _render_row(
        self,
        block: Block,
        width: int,
        selected: bool,
        new: bool = False,
        again: bool = False,
        marked: bool = False,
    ) -> Strip:
        base = self.rich_style
        if marked:
            base = base + self.get_component_rich_style("blocklist--marked")
        if selected:
            base = base + self.get_component_rich_style("blocklist--cursor")
        state, state_style = state_words(block), Style()
        text_style = Style()
        if block.state == "waiting":  # an answer waiting for its loop: quiet, at the bottom
            state_style = text_style = self.get_component_rich_style("blocklist--dim")
        elif block.state in ("not-resumed", "restart-failed") or block.problems:
            state_style = self.get_component_rich_style("blocklist--problem")
        elif block.state == "needs_context":
            state_style = self.get_component_rich_style("blocklist--ctx")
        elif state:
            state_style = self.get_component_rich_style("blocklist--category")
        if selected:
            state_style = text_style = Style()
        now = self.clock()
        age_style = Style()
        if self.sla is not None:
            level = urgency(block, now, *self.sla)
            if level:
                age_style = self.get_component_rich_style(f"blocklist--{level}")
                if selected:  # on the cursor's colours only the weight says it
                    age_style = Style(bold=level == "alert")
        mark = None
        if new:
            mark_style = (
                base if selected else base + self.get_component_rich_style("blocklist--new")
            )
            mark = Segment(self.NEW_MARK, mark_style)
        if again:  # asked again: this mark, in the new mark's colour while not seen yet
            kind = "blocklist--new" if new else "blocklist--warn"
            mark_style = base if selected else base + self.get_component_rich_style(kind)
            mark = Segment(self.AGAIN_MARK, mark_style)
        if marked:
            marking = self.get_component_rich_style("blocklist--mark")
            mark = Segment(self.MARKED_MARK, base if selected else base + marking)
        question = block.one_line_question(300)
        if block.notes and block.state not in WAITING_WORDS:  # kept blocked with a note (`w`)
            question = f"✎ {block.notes[-1][:200]} — {question}"
        cells = [
            printable(block.id),
            age(block.since, now).rjust(4),
            state,
            printable(question),
        ]
        styles = [text_style, age_style, state_style, text_style]
        return self._strip(cells, styles, width, base, mark)


class BlockListHeader(Widget):
    """The column titles above the list (the list itself scrolls under them)."""

    DEFAULT_CSS = """
    BlockListHeader { height: 1; background: $panel; color: $text; text-style: bold; }
    """

    def __init__(self, blocklist: BlockList, **kwargs) -> None:
        super().__init__(**kwargs)
        self.blocklist = blocklist
        blocklist.header = self

    def render_line(self, y: int) -> Strip:
        return self.blocklist.titles(self.size.width).apply_style(self.rich_style)


def _fit(text: str, width: int) -> str:
    """Exactly `width` cells: padded, or cut with an ellipsis (wide characters counted)."""
    if cell_len(text) <= width:
        return set_cell_size(text, width)
    return set_cell_size(text, width - 1) + "…"


class _Measures:
    """The id and state widths of every known block (listed or not), kept per row as blocks
    come, change and go: a change measures the blocks it names alone. (Measured whole at every
    change, 15,000 blocks took 270 ms a change: ten hosts sending changes froze the keys.)"""

    def __init__(self) -> None:
        self.of: dict[str, tuple[int, int, bool]] = {}
        #: How many blocks have each width: ids, states, and the states of failed restarts.
        self.ids: Counter[int] = Counter()
        self.states: Counter[int] = Counter()
        self.fails: Counter[int] = Counter()
        #: Whether `of` covers the known blocks (False: measured whole when next asked).
        self.valid = False

    def of_all(self, blocks: dict[str, Block]) -> _Measures:
        if not self.valid:
            self.of.clear()
            self.ids.clear()
            self.states.clear()
            self.fails.clear()
            for rk, block in blocks.items():
                self._put(rk, block)
            self.valid = True
        return self

    def update(self, rks: Iterable[str], blocks: dict[str, Block]) -> None:
        """The rows `rks` changed (added, changed or removed): measure them again."""
        if not self.valid:
            return  # measured whole when next asked
        for rk in rks:
            self._drop(rk)
            block = blocks.get(rk)
            if block is not None:
                self._put(rk, block)

    def _put(self, rk: str, block: Block) -> None:
        failed = block.state == "restart-failed"
        measure = (cell_len(printable(block.id)), cell_len(state_words(block)), failed)
        self.of[rk] = measure
        self.ids[measure[0]] += 1
        (self.fails if failed else self.states)[measure[1]] += 1

    def _drop(self, rk: str) -> None:
        measure = self.of.pop(rk, None)
        if measure is None:
            return
        for counter, width in (
            (self.ids, measure[0]),
            (self.fails if measure[2] else self.states, measure[1]),
        ):
            counter[width] -= 1
            if counter[width] <= 0:
                del counter[width]

    @staticmethod
    def longest(counter: Counter[int]) -> int:
        return max(counter, default=0)
