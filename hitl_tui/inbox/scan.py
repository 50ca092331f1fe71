"""The process-pool scan: a cold start's scan read by worker processes, and its reports.

A large workspace with nothing in the parse cache is read by worker processes
(`python -m hitl_tui.inbox.workers`, each with a share of the repositories), so that parsing
does not hold the interpreter lock the app's UI thread needs while it draws; `run_workers`
starts them and reads their frames back. `Batches` hands what a scan found to its `on_batch`
every so often, so that the app lists the blocks as they come (a scan in-process reports the
same way). `Inbox.scan` decides when to use the workers.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hitl_tui.model import Block

#: Below this many repositories a scan is quicker in-process than starting workers.
PARALLEL_MIN_REPOS = 64
MAX_WORKERS = 4

#: What a scan reports as it goes (`Inbox.scan(on_batch=...)`): the blocks found since the last
#: report, the repositories read so far, and how many there are.
OnBatch = Callable[[list[Block], int, int], None]

#: Repositories the app reads itself, at once, while its scan workers start (a Python each):
#: their blocks are the first rows drawn.
HEAD_REPOS = 16

#: Seconds between a scan's reports: the first soon (the app paints its first rows), then
#: doubling up to BATCH_MAX (each report costs the app a pass over its rows), or, once more
#: than BATCH_ROWS blocks are listed, up to a second for each BATCH_ROWS (at 50,000 blocks a
#: pass is tens of milliseconds: a quarter of a second apart, a fifth of the app's time),
#: never more than BATCH_SLOWEST.
BATCH_FIRST = 0.03
BATCH_MAX = 0.25
BATCH_ROWS = 50_000
BATCH_SLOWEST = 2.0


class Batches:
    """The blocks a scan found, handed to `on_batch` every so often (never more often than
    BATCH_FIRST, doubling up to BATCH_MAX seconds), and once more at the end (`flush`)."""

    def __init__(self, on_batch: OnBatch | None, total: int) -> None:
        self.on_batch = on_batch
        self.total = total
        self.pending: list[Block] = []
        self.wait = BATCH_FIRST
        self.last = time.monotonic()
        #: Blocks reported so far.
        self.reported = 0

    def add(self, blocks: list[Block], done: int) -> None:
        if self.on_batch is None:
            return
        self.pending.extend(blocks)
        if time.monotonic() - self.last >= self.wait:
            self.flush(done)
            rows = min(self.reported / BATCH_ROWS, BATCH_SLOWEST)
            self.wait = min(self.wait * 2, max(BATCH_MAX, rows))

    def flush(self, done: int) -> None:
        """Report what is pending (an empty batch too: the last one says the scan is over)."""
        if self.on_batch is None:
            return
        pending, self.pending = self.pending, []
        self.reported += len(pending)
        self.on_batch(pending, done, self.total)
        self.last = time.monotonic()


def default_workers() -> int:
    """Scan workers for the app: one per core available to this process, at most MAX_WORKERS."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return min(cores, MAX_WORKERS)


#: A scan worker's frames on its stdout: this many bytes of length (big-endian), then a pickle
#: of ("blocks", [Block, ...], repos_read) or, last, ("entries", [cache entry, ...]).
FRAME_HEAD = 8


def frame(item: object) -> bytes:
    import pickle

    data = pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
    return len(data).to_bytes(FRAME_HEAD, "big") + data


def run_workers(
    repos: list[Path],
    labels: dict[Path, str],
    workers: int,
    found: Callable[[list[Block], int], None],
    entries: list[Any],
    meanwhile: Callable[[], None] | None = None,
    timeout: float = 120.0,
) -> bool:
    """Every block of `repos` read by `workers` worker processes: `found(blocks, repos_read)`
    as each worker sends some (repos_read: of every worker), their cache entries added to
    `entries`; `meanwhile()` runs once they are started. False if they cannot run or one
    failed."""
    import pickle
    import selectors
    import subprocess

    procs = []
    selector = selectors.DefaultSelector()
    try:
        for i in range(workers):
            # Runs of a few neighbours, dealt round-robin: balanced even when every other
            # repository is the busy kind.
            chunk = [r for n, r in enumerate(repos) if (n // 3) % workers == i]
            request = {
                "repos": [os.fsdecode(r) for r in chunk],
                "labels": {os.fsdecode(r): labels[r] for r in chunk},
            }
            proc = subprocess.Popen(
                [sys.executable, "-m", "hitl_tui.inbox.workers"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            procs.append(proc)
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps(request).encode())
            proc.stdin.close()
            selector.register(proc.stdout, selectors.EVENT_READ, (i, bytearray()))
        if meanwhile is not None:
            meanwhile()
        done = [0] * workers
        deadline = time.monotonic() + timeout
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("scan workers took too long")
            for key, _ in selector.select(timeout=left):
                i, buf = key.data
                data = os.read(key.fd, 1 << 20)
                if not data:
                    selector.unregister(key.fileobj)
                    continue
                buf += data
                while len(buf) >= FRAME_HEAD:
                    size = int.from_bytes(buf[:FRAME_HEAD], "big")
                    if len(buf) < FRAME_HEAD + size:
                        break
                    item = pickle.loads(bytes(buf[FRAME_HEAD : FRAME_HEAD + size]))
                    del buf[: FRAME_HEAD + size]
                    if item[0] == "blocks":
                        done[i] = item[2]
                        found(item[1], sum(done))
                    else:
                        entries.extend(item[1])
        codes = [proc.wait(timeout=max(1.0, deadline - time.monotonic())) for proc in procs]
        return all(code == 0 for code in codes)
    except Exception:  # no processes here (a sandbox, a limit): read in-process instead
        for proc in procs:
            proc.kill()
        return False
    finally:
        selector.close()
        for proc in procs:
            if proc.stdout is not None:
                proc.stdout.close()
