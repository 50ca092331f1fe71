"""`hitl stats`: fleet health over a window (the last 30 days unless --since), overall and per
repository (or per source, or per day): blocks opened and answered, time to answer, time
blocked, open now, answers undone, asked again, not resumed, restarts failed.

The figures are `hitl_tui.stats`'s (README "Fleet stats" says what each means); what could not
be known (a remote host not reached, the journal pruned by retention) is `?` in the table, null
in the JSON, and said below the table with since when: never zero.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hitl_tui import timefmt
from hitl_tui.cli.base import PROG, Parser, add_common, open_inbox, print_warnings
from hitl_tui.model import UsageError
from hitl_tui.textio import json_encoder, printable
from hitl_tui.timefmt import parse_duration

EPILOG = """\
The window is the last --since (30d) up to now; the days are local days. Counted: the
PATHs' repositories (no PATH: the config's, else .) and the remote backends' (GitHub,
[[remote]]).
  opened          blocks that began in the window (answered since, or open now)
  answered        answers given in the window (an undone one too); undo entries are not
  wait            time to answer: median, 90th percentile (nearest rank) and longest, from
                  when the block began (as first seen) to its answer; undone answers left out
  blocked         the time blocks spent open within the window, summed over blocks
  open / oldest   blocks open now, and how long the oldest has waited
  undone          answers given in the window and undone since
  asked again     answers after which the loop wrote a new block (the rate: of the answers
                  whose loop outcome hitl still knows: it keeps them 7 days)
  not resumed     answers whose loop showed no sign within resume_within
  restart failed  answers whose [[loop]] restart failed (and has not succeeded since)
  ?               not known (the lines below the table say why, and since when)

--json prints one object (a field is only ever added):
  {"format": 1, "since": TIME, "until": TIME, "by": "repo"|"source"|"day",
   "overall": FIGURES, "rows": [FIGURES], "days": [DAY], "unknowns": [UNKNOWN]}
  FIGURES: {"key", "opened", "answered", "wait_median_s", "wait_p90_s", "wait_max_s",
            "blocked_s", "open_now", "oldest_open_s", "undone", "asked_again",
            "asked_again_rate", "not_resumed", "not_resumed_rate", "restarts_failed",
            "outcomes_known"}
  DAY: {"day", "opened", "answered", "blocked_s"}
  UNKNOWN: {"kind", "what", "since", "why", "source", "host"}
  key is "" overall, else the repository, the source or the day; durations are seconds;
  rates are 0..1; null is unknown, never zero.

examples:
  hitl stats
  hitl stats ~/loops --since 7d --by day
  hitl stats --json | jq '.rows[] | select(.not_resumed_rate > 0.2) | .key'

Each [[remote]] host is asked at once, for list_timeout_seconds at most (5); one that
does not answer is one stderr line, and its figures are unknown."""


def build_stats() -> argparse.ArgumentParser:
    p = Parser(
        prog=f"{PROG} stats",
        description="Fleet health over a window: which loops block most, how long they wait,\n"
        "and whether the answers took, overall and per repository.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common(p)
    p.add_argument(
        "--since",
        metavar="DURATION",
        default="30d",
        help="the window: this long before now (30d; 12h, 2w, ...)",
    )
    p.add_argument(
        "--by",
        choices=("repo", "source", "day"),
        default="repo",
        help="one row per repository (default), per source, or per day",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--local",
        action="store_true",
        help="no remote backend of the config (GitHub, [[remote]]): their open blocks unknown",
    )
    return p


def run_stats(args: argparse.Namespace) -> int:
    from hitl_tui.stats import of_inbox
    from hitl_tui.stats.figures import Unknown
    from hitl_tui.stats.remotes import read_remotes

    try:
        window = parse_duration(args.since)
    except ValueError as exc:
        raise UsageError(f"--since: {exc}") from None
    if window <= timedelta(0):
        raise UsageError("--since: the window must be longer than 0s")
    _config, inbox = open_inbox(args)
    now = datetime.now(UTC)
    unreached: list[Unknown] = []
    if args.local:
        unreached = [
            Unknown("host", f"{r.name} (--local)", None, "not asked: --local", r.name)
            for r in inbox.remotes
        ]
    else:
        unreached = read_remotes(
            inbox,
            inbox.remotes,
            now,
            lambda text: print(f"hitl: {printable(text)}", file=sys.stderr),
        )
    print_warnings(inbox)
    stats = of_inbox(inbox, since=now - window, by=args.by, now=now, unreached=unreached)
    if args.json:
        sys.stdout.write(json_encoder()(stats.to_json()) + "\n")
        return 0
    names = {os.fsdecode(r): inbox.workspace.id_of(r) for r in inbox.workspace.repos}
    sys.stdout.write(render(stats, names))
    return 0


# -- the table ---------------------------------------------------------------------------------

COLUMNS = (
    ("opened", 6),
    ("answered", 8),
    ("wait med", 8),
    ("p90", 5),
    ("max", 5),
    ("blocked", 7),
    ("open", 4),
    ("oldest", 6),
    ("undone", 6),
    ("asked again", 11),
    ("not resumed", 11),
    ("restart failed", 14),
)


def duration(seconds: float | None) -> str:
    """A duration as hitl shows ages (`45s`, `12m`, `3h`, `2d`); `?` when unknown."""
    return "?" if seconds is None else timefmt.duration(seconds)


def count(value: int | None) -> str:
    return "?" if value is None else str(value)


def rated(value: int | None, rate: float | None) -> str:
    if value is None:
        return "?"
    return f"{value} ({rate:.0%})" if rate is not None else str(value)


def cells(f) -> list[str]:
    return [
        count(f.opened),
        count(f.answered),
        duration(f.wait_median_s),
        duration(f.wait_p90_s),
        duration(f.wait_max_s),
        duration(f.blocked_s),
        count(f.open_now),
        duration(f.oldest_open_s) if f.open_now else "-" if f.open_now == 0 else "?",
        count(f.undone),
        rated(f.asked_again, f.asked_again_rate),
        rated(f.not_resumed, f.not_resumed_rate),
        count(f.restarts_failed),
    ]


def _when(at: datetime) -> str:
    return at.astimezone().strftime("%Y-%m-%d %H:%M")


def render(stats, names: dict[str, str] | None = None) -> str:
    """The human table: the window, overall, one line per row, the days, then the unknowns."""
    names = names or {}
    days = (stats.until - stats.since) / timedelta(days=1)
    lines = [f"{_when(stats.since)} to {_when(stats.until)} ({days:g} days), by {stats.by}", ""]
    labels = [("all", stats.overall)]
    for row in stats.rows:
        label = names.get(row.key) or row.key
        if stats.by == "repo" and label == row.key and os.path.isabs(row.key):
            label = Path(row.key).name or row.key
        labels.append((printable(label), row))
    width = max(len(stats.by), *(len(label) for label, _ in labels))
    head = [stats.by.ljust(width)] + [name.rjust(size) for name, size in COLUMNS]
    lines.append("  ".join(head))
    for label, row in labels:
        shown = [label.ljust(width)] + [
            text.rjust(size) for text, (_, size) in zip(cells(row), COLUMNS, strict=True)
        ]
        lines.append("  ".join(shown).rstrip())
    if stats.by != "day":
        lines += ["", "day         opened  answered  blocked"]
        for day in stats.days:
            lines.append(
                f"{day.day.isoformat()}  {count(day.opened):>6}  {count(day.answered):>8}  "
                f"{duration(day.blocked_s):>7}"
            )
    if stats.unknowns:
        lines.append("")
        for unknown in stats.unknowns:
            since = _since(unknown)
            lines.append(printable(f"? unknown: {unknown.what}{since} ({unknown.why})"))
    return "\n".join(lines) + "\n"


def _since(unknown) -> str:
    if unknown.kind == "host":
        if unknown.since is None:
            return ", never reached"
        return f", not reached since {_when(unknown.since)}"
    return ""
