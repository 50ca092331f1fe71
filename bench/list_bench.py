"""`hitl list --json` cold and warm on bench.py's fleet, beside a bare read of the same files.

    .venv/bin/python bench/list_bench.py                      # 1,000 repos, ~5,000 blocks
    .venv/bin/python bench/list_bench.py --runs 7 --keep DIR  # build the fleet in DIR, keep it
    .venv/bin/python bench/list_bench.py --fleet DIR --profile OUT   # and cProfile each kind
    .venv/bin/python bench/list_bench.py --fleet DIR --code A --code B  # interleave two trees

Cold is a state folder with no parse cache (the first run, or the first after an upgrade);
warm is the next run, with the cache the previous one saved. Each round runs cold and warm for
each --code tree in turn (a folder holding a `hitl_tui` package: a `git archive` of an older
commit, say), then the bare read, so that noise from other work on the machine falls on every
figure alike (bench.list_rounds). The bare read is the floor: one Python loop that lists each
repository and reads every block file whole.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import ROOT, build_fleet, list_json, list_rounds, spread


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--repos", type=int, default=1000)
    parser.add_argument("--blocks", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--fleet", type=Path, help="an existing fleet (else one is built)")
    parser.add_argument("--keep", type=Path, help="build the fleet here and keep it")
    parser.add_argument(
        "--code", type=Path, action="append", help="a source tree holding hitl_tui (repeatable)"
    )
    parser.add_argument("--profile", type=Path, help="write cold.prof and warm.prof here")
    args = parser.parse_args()
    codes = [c.resolve() for c in args.code] if args.code else [ROOT]
    scratch = Path(tempfile.mkdtemp(prefix="hitl-listbench-"))
    try:
        fleet = args.fleet
        if fleet is None:
            fleet = args.keep or scratch / "fleet"
            fleet.mkdir(parents=True, exist_ok=True)
            t0 = time.perf_counter()
            made = build_fleet(fleet, args.repos, args.blocks)
            print(f"built {args.repos} repos, {made} blocks in {time.perf_counter() - t0:.1f} s")
            time.sleep(2.1)  # files changed in the last 2 s are never cached (parsecache.py)
        rounds = list_rounds(fleet, scratch, args.runs, codes)
        if args.profile is not None:
            args.profile.mkdir(parents=True, exist_ok=True)
            state = scratch / "state-profile"
            list_json(fleet, state, codes[-1], args.profile / "cold.prof")
            list_json(fleet, state, codes[-1], args.profile / "warm.prof")
            print(f"profiles of {codes[-1]} in {args.profile}")
        bares = rounds["bare"]
        floor = statistics.median(bares)
        print(f"bare read of {rounds['files']} block files: {spread(bares)}")
        for code in codes:
            print(f"{code}:")
            for kind in ("cold", "warm"):
                values = rounds[code][kind]
                ratios = [v / b for v, b in zip(values, bares, strict=True)]
                print(
                    f"  list --json {kind}: {spread(values)}; "
                    f"{statistics.median(values) / floor:.0f}x the bare read "
                    f"(per round {min(ratios):.0f}-{max(ratios):.0f}x); "
                    f"CPU {spread(rounds[code][kind + '_cpu'])}"
                )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
