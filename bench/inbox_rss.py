"""Memory of an inbox holding a fleet's blocks and its parse cache, as the app's scan makes it.

    .venv/bin/python bench/inbox_rss.py /work/wt/fleets/f10k              # cold, in-process
    .venv/bin/python bench/inbox_rss.py F --workers 2                     # cold, as the app
    .venv/bin/python bench/inbox_rss.py F --state DIR; ... --state DIR    # then warm
    .venv/bin/python bench/inbox_rss.py F --trace                         # tracemalloc top 30

Prints the process's RSS after the scan, after the cache is saved, and its peak (bench.py's
row 4 is the whole app's peak: this is the inbox's share of it, without Textual). Run it from
a folder that holds no `hitl_tui` (scan workers import from their working folder), with
PYTHONPATH=TREE to measure another tree.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import time
import tracemalloc
from pathlib import Path


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        return int(f.read().split("VmRSS:")[1].split()[0]) / 1024


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("fleet", type=Path)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--state", type=Path, help="a state folder to keep (else a temp one)")
    parser.add_argument("--trace", action="store_true", help="tracemalloc's top 30 lines")
    args = parser.parse_args()
    state = args.state or Path(tempfile.mkdtemp(prefix="hitl-rss-"))
    os.environ["HITL_STATE_DIR"] = str(state)
    os.environ["HITL_CONFIG"] = str(state / "no-config.toml")
    if args.trace:
        tracemalloc.start(1)
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.inbox.workspace import Workspace

    try:
        t0 = time.perf_counter()
        inbox = Inbox.cached(Workspace.discover([args.fleet]))
        inbox.scan(workers=args.workers)
        took = time.perf_counter() - t0
        print(f"{len(inbox.blocks)} blocks in {took:.1f} s; RSS {rss_mb():.0f} MB")
        cpu = time.process_time()
        inbox.save_cache()
        cpu = time.process_time() - cpu
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"saved (CPU {cpu:.2f} s): RSS {rss_mb():.0f} MB, peak {peak:.0f} MB")
        if args.trace:
            snapshot = tracemalloc.take_snapshot()
            for stat in snapshot.statistics("lineno")[:30]:
                frame = stat.traceback[0]
                where = f"{frame.filename.split('hitl_tui/')[-1]}:{frame.lineno}"
                print(f"{stat.size / 2**20:7.1f} MB {stat.count:8d} {where}")
    finally:
        if args.state is None:
            shutil.rmtree(state, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
