"""Background work that gives way to the operator's keys.

What the app reads ahead (each question for `M`, the fleet's figures for `S`) and the save of
a cold scan's parse cache are seconds of Python at 50,000 blocks. Run in a thread, they share
the interpreter with the keys: a thread holding the GIL makes the event loop wait for its
turn at every step of a key (the palette opened in 237 ms instead of 30). So such work runs in
small slices, and between two slices it looks at `Quiet`: when a key or click came less than
`quiet` seconds ago, it waits (in a sleep, which releases the GIL) until no key has come for
that long, and then goes on where it stopped. Blocks arriving hold it too, for less: a
detection shared the interpreter with it (at 10,000 repos, 80-300 ms against 40). No Textual
here: the app tells `Quiet` of each input event and each change the watcher sees (`touch`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")

#: Items of background work done between two looks at the operator's keys: a slice is a
#: millisecond or two of Python (a question read, a shard's rows), so a key waits that long.
SLICE = 64


class Quiet:
    """When the operator last pressed a key, and background work that waits for a pause."""

    def __init__(self, quiet: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.quiet = quiet
        self.clock = clock
        #: Until when background work waits (a key or click holds it `quiet` s; a block
        #: arriving, less: `touch`). Set by the event loop, read by the workers.
        self.until = clock() + quiet
        #: Set as the app quits: a waiting worker stops waiting (and its work stops).
        self.stopped = threading.Event()
        #: How many times background work stopped for the operator (tests, the bench).
        self.yields = 0

    def touch(self, hold: float | None = None) -> None:
        """A key or a click came now (background work waits `quiet` s), or a block arrived
        (`hold` s: the operator is about to look, and the next block may follow it)."""
        self.until = max(self.until, self.clock() + (self.quiet if hold is None else hold))

    def stop(self) -> None:
        self.stopped.set()

    def wait(self) -> float:
        """Seconds until the operator has pressed no key for `quiet` s (<= 0: quiet now)."""
        return self.until - self.clock()

    def give_way(self) -> bool:
        """Between two slices of background work: wait while the operator is at the keys
        (until no key came for `quiet` s). False when the app is quitting (stop the work)."""
        waited = False
        while not self.stopped.is_set():
            left = self.wait()
            if left <= 0:
                return True
            if not waited:
                waited = True
                self.yields += 1
            self.stopped.wait(left)  # (releases the GIL: the keys have the interpreter)
        return False

    def sliced(self, items: Iterable[T], size: int | None = None) -> Iterator[T]:
        """`items`, giving way to the operator every `size` of them (SLICE), stops early as
        the app quits."""
        size = size or SLICE
        for n, item in enumerate(items):
            if n % size == 0 and not self.give_way():
                return
            yield item
