"""Short human times for the inbox (`45s`, `12m`, `3h`, `2d`), durations read back, and the
zoned ISO 8601 times hitl's files keep."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta


def age(since: datetime, now: datetime | None = None) -> str:
    return duration(((now or datetime.now(UTC)) - since).total_seconds())


def duration(length: float) -> str:
    """A length of time in seconds as `age` says one: `45s`, `12m`, `3h`, `2d` (`hitl stats`'s
    waits and blocked time)."""
    seconds = max(0, int(length))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


#: `90s`, `15m`, `1h30m`, `2d`, `1w`: whole numbers, each with its unit, largest first.
_PART = re.compile(r"(\d{1,6})([smhdw])")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> timedelta:
    """A duration as people write it (`15m`, `1h`, `1h30m`, `2d`, `1w`); ValueError with a
    message fit to show when it is not one."""
    compact = "".join(text.split()).lower()
    at, total, units = 0, 0, ""
    for m in _PART.finditer(compact):
        if m.start() != at or m.group(2) in units:
            break
        total += int(m.group(1)) * _SECONDS[m.group(2)]
        units += m.group(2)
        at = m.end()
    if not compact or at != len(compact):
        raise ValueError(f"{text.strip()!r} is not a duration (like 90s, 15m, 1h30m, 2d, 1w)")
    return timedelta(seconds=total)


def aware_time(value: object) -> datetime | None:
    """An ISO 8601 time with its zone, or None (not text, not a time, no zone)."""
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return when if when.tzinfo is not None else None
