"""The stats screen's two charts (`S`, `stats_screen.py`), drawn as text in the theme's colours.

- `RepoBars`: time blocked per repository, the top ten and the rest summed in one bar; each bar
  amber or red as the inbox colours an age (`[sla]` warn, alert), by the repository's median
  time to answer or its oldest open block, whichever is longer.
- `DayChart`: blocks opened and answered per day over the window, side by side, on one scale
  from zero (days grouped when the window has more days than the width has room for).

Why not Textual's `Sparkline` or `textual-plotext`: a sparkline scales each series from its own
minimum (a day with 3 blocks drew as nothing when 3 was the least, and opened and answered
could not be compared on one scale) and has no labels; textual-plotext (last released in
2024, plotext < 6) renders a chart as ANSI text that is parsed back (a repository's name in
a label went through that parser) and keeps its own palette beside the theme's. Eighths of a
block drawn here take a few lines, are exact at any width, and take their colours from the
theme through component classes, as the inbox list does.

Repository names are shown as plain text (`printable`), never markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import ClassVar

from rich.text import Text
from textual.widget import Widget

from hitl_tui.textio import printable

#: A bar's end in eighths of a cell, left to right (RepoBars) and bottom to top (DayChart).
ACROSS = " ▏▎▍▌▋▊▉█"
UP = " ▁▂▃▄▅▆▇█"


def span(seconds: float | None) -> str:
    """A duration in the fewest characters that still read well: `45s`, `12m`, `2h05m`,
    `3d04h`."""
    if seconds is None:
        return "unknown"
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def level(wait_s: float | None, sla: tuple[timedelta, timedelta] | None) -> str:
    """ "alert", "warn" or "" for a time waited, as the inbox colours a block's age."""
    if wait_s is None or sla is None:
        return ""
    warn, alert = sla
    if wait_s >= alert.total_seconds():
        return "alert"
    return "warn" if wait_s >= warn.total_seconds() else ""


def bar(fraction: float, width: int) -> str:
    """A horizontal bar `fraction` (0..1) of `width` cells, to an eighth of a cell; a value
    above zero is never drawn as nothing."""
    eighths = round(max(0.0, min(1.0, fraction)) * width * 8)
    if fraction > 0 and eighths == 0:
        eighths = 1
    full, part = divmod(eighths, 8)
    return "█" * full + (ACROSS[part] if part else "")


@dataclass(frozen=True)
class Bar:
    """One repository's bar: its name, time blocked (None: unknown), and its SLA level."""

    label: str
    seconds: float | None
    level: str = ""


class RepoBars(Widget):
    """Horizontal bars, one a line: the name, the bar, the time (or `unknown`)."""

    DEFAULT_CSS = """
    RepoBars { height: auto; text-wrap: nowrap; text-overflow: clip; }
    RepoBars > .stats--ok { color: $primary; }
    RepoBars > .stats--warn { color: $warning; }
    RepoBars > .stats--alert { color: $error; }
    RepoBars > .stats--dim { color: $text-muted; }
    """
    COMPONENT_CLASSES: ClassVar = {"stats--ok", "stats--warn", "stats--alert", "stats--dim"}

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.bars: list[Bar] = []
        self.empty = ""

    def show(self, bars: Sequence[Bar], empty: str = "") -> None:
        self.bars = list(bars)
        self.empty = empty
        self.refresh(layout=True)

    def get_content_height(self, container, viewport, width: int) -> int:
        return max(1, len(self.bars))

    def render(self) -> Text:
        if not self.bars:
            return Text(self.empty, style=self.get_component_rich_style("stats--dim"))
        width = self.size.width
        names = [printable(b.label) for b in self.bars]
        values = [span(b.seconds) for b in self.bars]
        name_w = min(max(len(n) for n in names), max(8, width // 3))
        value_w = max(len(v) for v in values)
        room = max(1, width - name_w - value_w - 2)
        top = max((b.seconds or 0.0 for b in self.bars), default=0.0) or 1.0
        dim = self.get_component_rich_style("stats--dim")
        text = Text(no_wrap=True, overflow="crop")
        for i, (b, name, value) in enumerate(zip(self.bars, names, values, strict=True)):
            if i:
                text.append("\n")
            if len(name) > name_w:
                name = name[: name_w - 1] + "…"
            text.append(f"{name:<{name_w}} ")
            if b.seconds is None:
                text.append(f"{'':<{room}} ")
                text.append(f"{value:>{value_w}}", style=dim)
                continue
            style = self.get_component_rich_style(f"stats--{b.level or 'ok'}")
            drawn = bar(b.seconds / top, room)
            text.append(drawn, style=style)
            text.append(" " * (room - len(drawn) + 1))
            text.append(f"{value:>{value_w}}")
        return text


@dataclass(frozen=True)
class DayCounts:
    """One column group of the day chart: its first day, and blocks opened and answered
    (None: unknown, those days' journal was pruned)."""

    day: date
    opened: int | None
    answered: int | None


def grouped(days: Sequence[DayCounts], groups: int) -> list[DayCounts]:
    """`days` in at most `groups` runs of consecutive days, each summed (unknown if any day
    in it is)."""
    if not days or groups >= len(days):
        return list(days)
    size = -(-len(days) // max(1, groups))
    out = []
    for start in range(0, len(days), size):
        run = days[start : start + size]
        opened = [d.opened for d in run]
        answered = [d.answered for d in run]
        out.append(
            DayCounts(
                run[0].day,
                None if None in opened else sum(o or 0 for o in opened),
                None if None in answered else sum(a or 0 for a in answered),
            )
        )
    return out


class DayChart(Widget):
    """Columns per day (or per run of days): opened, then answered, on one scale from zero;
    the scale's top on the left, the first and last day under the columns."""

    DEFAULT_CSS = """
    DayChart { height: 8; text-wrap: nowrap; text-overflow: clip; }
    DayChart > .stats--opened { color: $warning; }
    DayChart > .stats--answered { color: $success; }
    DayChart > .stats--dim { color: $text-muted; }
    """
    COMPONENT_CLASSES: ClassVar = {"stats--opened", "stats--answered", "stats--dim"}

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.days: list[DayCounts] = []

    def show(self, days: Sequence[DayCounts]) -> None:
        self.days = list(days)
        self.refresh()

    def render(self) -> Text:
        dim = self.get_component_rich_style("stats--dim")
        opened_style = self.get_component_rich_style("stats--opened")
        answered_style = self.get_component_rich_style("stats--answered")
        text = Text(no_wrap=True, overflow="crop")
        if not self.days:
            text.append("no days in the window", style=dim)
            return text
        width, height = self.size.width, self.size.height
        rows = max(1, height - 2)  # the legend above, the dates below
        # The scale's width: room for the largest a column could sum to.
        most = max(sum(d.opened or 0 for d in self.days), sum(d.answered or 0 for d in self.days))
        room = max(3, width - len(str(most)) - 1)
        # A day: opened, answered and a gap, a cell each (wider when there is room; no gap
        # when there is not; runs of days summed when even that does not fit).
        n = len(self.days)
        gap = 1 if room >= 3 * n else 0
        cols = grouped(self.days, room // (2 + gap))
        cell = max(1, min(3, (room // len(cols) - gap) // 2))
        top = max(max(c.opened or 0, c.answered or 0) for c in cols)
        axis_w = len(str(top)) + 1
        text.append("■ opened", style=opened_style)
        text.append(" ")
        text.append("■ answered", style=answered_style)
        what = f"{-(-n // len(cols))} days a column" if len(cols) < n else "a day a column"
        text.append(f" · {what} · max {top}" if top else " · none in the window", style=dim)
        scale = top or 1
        for row in range(rows, 0, -1):
            text.append("\n")
            label = str(top) if row == rows else ("0" if row == 1 and rows > 1 else "")
            text.append(f"{label:>{axis_w - 1}}│", style=dim)
            for group in cols:
                pair = ((group.opened, opened_style), (group.answered, answered_style))
                for value, style in pair:
                    if value is None:
                        text.append(("?" if row == 1 else " ") * cell, style=dim)
                        continue
                    eighths = round(value / scale * rows * 8)
                    if value and not eighths:
                        eighths = 1
                    filled = eighths - (row - 1) * 8
                    char = "█" if filled >= 8 else UP[filled] if filled > 0 else " "
                    text.append(char * cell, style=style)
                text.append(" " * gap)
        text.append("\n")
        first = cols[0].day.strftime("%b %d")
        last = self.days[-1].day.strftime("%b %d")
        used = len(cols) * (2 * cell + gap)
        space = max(1, used - len(first) - len(last))
        text.append(" " * axis_w + first + " " * space + last, style=dim)
        return text
