"""A scan worker: `python -m hitl_tui.inbox.workers` reads its share of a scan, for
`Inbox.scan` (`scan.run_workers`).

Started as a plain subprocess (not multiprocessing), so that it never re-imports the parent's
`__main__` (a script embedding hitl without a main guard would run again in every worker).
It reads `{"repos": [...], "labels": {...}}` as JSON on stdin and writes frames on stdout
(`scan.frame`): the pickled Blocks as it finds them, so the app lists them as they come, then
the parse-cache entries; the parent started it with its own interpreter and code, so the
pickle is trusted.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hitl_tui.inbox.inbox import Delta, Inbox
from hitl_tui.inbox.parsecache import SENT, ParseCache, gc_paused
from hitl_tui.inbox.scan import Batches, frame
from hitl_tui.inbox.workspace import Workspace
from hitl_tui.model import Block


def scan_chunk(
    repos: list[Path],
    labels: dict[Path, str],
    emit: Callable[[list[Block], int], None] | None = None,
) -> tuple[list[Block], list[Any]]:
    """A worker's share of a scan: the very code path of a scan in-process.

    Returns the blocks, and the parse-cache entries made on the way (for the parent's cache).
    `emit(blocks, repos_read)`, when given, gets the blocks as they are found, every so often
    (`Batches`), the last time with every repository read.
    """
    cache = ParseCache()
    inbox = Inbox(Workspace(paths=tuple(repos), repos=list(repos), roots=[]), cache=cache)
    inbox.labels = labels
    batches = Batches(None if emit is None else lambda b, done, _total: emit(b, done), len(repos))
    with gc_paused():
        for done, repo in enumerate(repos, 1):
            delta = Delta()
            for source in inbox.sources:
                inbox._scan_source(repo, source, delta)
            batches.add(delta.added, done)
    batches.flush(len(repos))
    return list(inbox.blocks.values()), cache.entries()


def sent(entry: Any) -> Any:
    """A cache entry as a worker sends it: a block it holds was sent already (every block this
    worker parsed is one it found), so only its `since` goes (`ParseCache.adopt`)."""
    sig, label, state = entry
    if type(state) is Block:
        return (sig, label, (SENT, state.since))
    return entry


def main() -> int:

    request = json.load(sys.stdin.buffer)
    repos = [Path(r) for r in request["repos"]]
    labels = {Path(r): label for r, label in request["labels"].items()}
    out = sys.stdout.buffer

    def emit(blocks: list[Block], done: int) -> None:
        out.write(frame(("blocks", blocks, done)))
        out.flush()

    _blocks, entries = scan_chunk(repos, labels, emit)
    out.write(frame(("entries", [(n, k, sent(e)) for n, k, e in entries])))
    out.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
