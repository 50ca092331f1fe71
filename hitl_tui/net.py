"""Bounds for talking to servers we do not control: one deadline per exchange, capped bodies.

httpx's timeouts are per network operation: a server sending one byte every 0.3 s never trips a
5 s read timeout and can hold a request for ever. Everything here bounds the whole exchange
instead. httpx is imported only where a response is read, so importing this module is cheap.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import httpx

T = TypeVar("T")

#: How long past its deadline a bounded call may take to unwind (closing its connection).
GRACE = 0.5

#: The most of a response body the GitHub client reads (a list page is well under 1 MiB).
MAX_BODY = 16 * 1024 * 1024


class BodyTooLarge(Exception):
    """A response body went past its cap; nothing more of it was read."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(f"larger than {size_text(limit)}")


def size_text(count: int) -> str:
    if count >= 1024 * 1024 and count % (1024 * 1024) == 0:
        return f"{count // (1024 * 1024)} MiB"
    if count >= 1024 and count % 1024 == 0:
        return f"{count // 1024} KiB"
    return f"{count} bytes"


def run_bounded(factory: Callable[[], Awaitable[T]], seconds: float) -> T:
    """Run `factory()` on an event loop of its own and give up after `seconds` in total.

    The coroutine runs under `asyncio.timeout`, so at the deadline it is cancelled and closes
    its connection cleanly (TimeoutError). It runs in a daemon thread that is waited for only a
    little past the deadline: what cancellation cannot reach (a resolver stuck in getaddrinfo,
    which also holds `asyncio.run`'s exit) is left behind rather than waited for.
    """
    box: dict[str, Any] = {}

    async def bounded() -> T:
        async with asyncio.timeout(seconds):
            return await factory()

    def main() -> None:
        try:
            box["value"] = asyncio.run(bounded())
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=main, name="hitl-net", daemon=True)
    thread.start()
    thread.join(seconds + GRACE)
    if thread.is_alive():
        raise TimeoutError(f"no answer within {seconds:g} s")
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value


async def read_capped(response: httpx.Response, limit: int, truncate: bool = False) -> bytes:
    """The (decoded) body of a streamed response, or BodyTooLarge once it passes `limit`
    (with `truncate`, its first `limit` bytes instead: enough of an error page).

    A declared Content-Length over the cap is refused before a byte of the body is read.
    """
    declared = response.headers.get("content-length", "").strip()
    if (
        declared.isdigit()
        and int(declared) > limit
        and not response.headers.get("content-encoding")
        and not truncate
    ):
        raise BodyTooLarge(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            if truncate:
                chunks.append(chunk[: len(chunk) - (size - limit)])
                break
            raise BodyTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)
