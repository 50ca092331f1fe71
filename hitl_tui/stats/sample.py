"""A fixed `Stats` made by hand (no journal): for the stats screen's tests, snapshot and
screenshot while nothing else is at hand. Tests of the figures themselves build a real
journal (tests/test_stats.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hitl_tui.stats.figures import Day, Figures, Stats, Unknown


def _row(
    key: str,
    opened: int,
    answered: int,
    waits: tuple[float, float, float],
    blocked: float,
    open_now: int,
    oldest: float | None,
    undone: int,
    again: int,
    not_resumed: int,
    failed: int,
    known: int,
) -> Figures:
    return Figures(
        key=key,
        opened=opened,
        answered=answered,
        wait_median_s=waits[0],
        wait_p90_s=waits[1],
        wait_max_s=waits[2],
        blocked_s=blocked,
        open_now=open_now,
        oldest_open_s=oldest,
        undone=undone,
        asked_again=again,
        asked_again_rate=again / known if known else None,
        not_resumed=not_resumed,
        not_resumed_rate=not_resumed / known if known else None,
        restarts_failed=failed,
        outcomes_known=known,
    )


def sample(now: datetime | None = None, days: int = 14, repos: int = 12) -> Stats:
    """A plausible fleet: `repos` repositories blocking less and less, over `days` days (one
    with nothing), one host not reached."""
    now = now or datetime(2026, 12, 3, 14, 0, tzinfo=UTC)
    since = now - timedelta(days=days)
    rows = []
    for i in range(repos):
        answered = max(1, 30 - 2 * i)
        rows.append(
            _row(
                f"/home/op/loops/loop-{i + 1:02d}",
                answered + (i % 3),
                answered,
                (300.0 + 60 * i, 1800.0 + 120 * i, 7200.0 - 100 * i),
                answered * (600.0 + 60 * i),
                i % 3,
                900.0 * (i % 3) or None,
                int(i % 4 == 0),
                i % 5,
                int(i % 7 == 3),
                1 if i == 4 else 0,
                answered,
            )
        )
    rows.append(
        Figures(
            "agents",
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
        )
    )
    total = _row("", 220, 200, (540.0, 2700.0, 7200.0), 250_000.0, 12, 5400.0, 3, 18, 4, 1, 190)
    total = Figures(**{**total.to_json(), "open_now": None, "oldest_open_s": None})
    day_rows = []
    for d in range(days):
        day = (since + timedelta(days=d + 1)).date()
        quiet = d == days // 2
        day_rows.append(
            Day(
                day,
                0 if quiet else 10 + (d * 7) % 9,
                0 if quiet else 9 + (d * 5) % 8,
                0.0 if quiet else 3600.0 * (4 + (d * 3) % 11),
            )
        )
    return Stats(
        since=since,
        until=now,
        by="repo",
        overall=total,
        rows=tuple(rows),
        days=tuple(day_rows),
        unknowns=(
            Unknown(
                "host",
                "host build-1 (agents)",
                None,
                "ssh: connect to host build-1 port 22: Connection refused",
            ),
        ),
    )
