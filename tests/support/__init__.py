"""What the tests share: one bounded wait (`until`), and the Pilot helpers.

`until` polls a condition with a bound and, when the bound passes, fails saying what it saw
(`saw` is called then, to describe the current state). A wait never gives up quietly.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


def _failure(seconds: float, what: str, saw: Callable[[], object] | None, last: object) -> str:
    said = f"not within {seconds:g} s: {what or 'the condition'}"
    seen = saw() if saw is not None else last
    return f"{said}; saw: {seen!r}"


async def until(
    pilot: Any,
    condition: Callable[[], T | Awaitable[T]],
    seconds: float = 15.0,
    *,
    saw: Callable[[], object] | None = None,
    what: str = "",
    every: float = 0.05,
) -> T:
    """Wait until `condition()` is truthy and return it; give the app (`pilot`, or None for
    plain asyncio) a turn between tries; `condition` may be a coroutine function. After
    `seconds` of wall time, raise AssertionError with what `saw()` describes (or the
    condition's last value)."""
    deadline = time.monotonic() + seconds
    while True:
        if pilot is not None:
            await pilot.pause()
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(_failure(seconds, what, saw, value))
        await asyncio.sleep(every)


def until_sync(
    condition: Callable[[], T],
    seconds: float = 30.0,
    *,
    saw: Callable[[], object] | None = None,
    what: str = "",
    every: float = 0.05,
) -> T:
    """`until` for threads and processes: poll `condition()` every `every` seconds."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(_failure(seconds, what, saw, value))
        time.sleep(every)
