"""A scan worker: `python -m hitl_tui.inbox.workers` reads its share of a scan, for
`Inbox.scan`.

Started as a plain subprocess (not multiprocessing), so that it never re-imports the parent's
`__main__` (a script embedding hitl without a main guard would run again in every worker).
It reads `{"repos": [...], "labels": {...}}` as JSON on stdin and writes frames on stdout
(`inbox.frame`): the pickled Blocks as it finds them, so the app lists them as they come, then
the parse-cache entries; the parent started it with its own interpreter and code, so the
pickle is trusted.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> int:
    from hitl_tui.inbox.inbox import frame, scan_chunk

    request = json.load(sys.stdin.buffer)
    repos = [Path(r) for r in request["repos"]]
    labels = {Path(r): label for r, label in request["labels"].items()}
    out = sys.stdout.buffer

    def emit(blocks, done: int) -> None:
        out.write(frame(("blocks", blocks, done)))
        out.flush()

    _blocks, entries = scan_chunk(repos, labels, emit)
    out.write(frame(("entries", entries)))
    out.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
