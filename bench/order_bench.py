"""Row 3d alone, in alternating rounds across source trees: a change of order (`s`) or grouping
(`v`), key to frame, in the app on a fleet (issue 30: 50,000 blocks).

    .venv/bin/python bench/order_bench.py --fleet /work/wt/fleets/f10k \\
        --code /tmp/before --code . --rounds 3

Each round opens the app once per tree (its own state folder under --scratch, so the second
round's parse cache is warm), waits until the inbox is loaded and 4 s more (the questions read
ahead), then cycles `s` through every order and `v` through every grouping twice, 0.1 s apart,
as bench.py's row 3d does. It prints each run's figures, then per tree the median and the
largest of them all, of the orders, of the groupings and of "by question". It writes nothing
in the fleet.

With `--filter`, row 3c instead: `/`, then `0`, `0`, `1`, `2`, `0` typed 0.1 s apart as
bench.py types them, then five backspaces, three times over; each key to its frame.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import asyncio, json, sys
code, fleet, what = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path[:0] = [code, code + "/bench"]
from pathlib import Path
import hitl_tui
assert hitl_tui.__file__.startswith(code), hitl_tui.__file__
from bench import instrument, keypress
from hitl_tui.config import Config
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.inbox.view import GROUPS, ORDERS
from hitl_tui.inbox.workspace import Workspace
from hitl_tui.tui.app import HitlApp

async def main():
    app = HitlApp(Inbox.cached(Workspace.discover([Path(fleet)])), Config(bell=False))
    instrument(app)
    out = []
    async with app.run_test(size=(120, 40)) as pilot:
        while not app.loaded:
            await pilot.pause(0.05)
        await asyncio.sleep(4)
        rows = lambda: app.inbox_screen.rows.spec
        if what == "filter":
            await pilot.press("slash")
            await asyncio.sleep(0.5)
            for _ in range(3):
                for key in [*"00120", *["backspace"] * 5]:
                    text = rows().query.text
                    ms = await keypress(app, key, until=lambda t=text: rows().query.text != t)
                    out.append([f"{key[:2]}:{rows().query.text}", ms * 1000])
                    await asyncio.sleep(0.1)
        for _ in range(2 if what == "order" else 0):
            for key, times in (("s", len(ORDERS)), ("v", len(GROUPS))):
                for _ in range(times):
                    before = (rows().order, rows().group)
                    moved = lambda before=before: (rows().order, rows().group) != before
                    ms = await keypress(app, key, until=moved) * 1000
                    out.append([f"{key}:{rows().order if key == 's' else rows().group}", ms])
                    await asyncio.sleep(0.1)
    print(json.dumps(out))

asyncio.run(main())
"""


def run(code: Path, fleet: Path, state: Path, what: str) -> list[tuple[str, float]]:
    env = {**os.environ, "HITL_STATE_DIR": str(state)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(code), str(fleet), what],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
    ).stdout
    return [(name, ms) for name, ms in json.loads(out.splitlines()[-1])]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fleet", type=Path, required=True)
    parser.add_argument("--code", type=Path, action="append", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/order-bench"))
    parser.add_argument("--filter", action="store_true", help="row 3c: filter keystrokes")
    args = parser.parse_args()
    codes = [code.resolve() for code in args.code]
    what = "filter" if args.filter else "order"
    figures: dict[Path, list[tuple[str, float]]] = {code: [] for code in codes}
    for n in range(args.rounds):
        for i, code in enumerate(codes):
            got = run(code, args.fleet, args.scratch / f"state-{i}", what)
            figures[code] += got
            print(f"round {n + 1} {code}: " + " ".join(f"{k}={ms:.0f}" for k, ms in got))
    for code, got in figures.items():
        if what == "filter":
            typed = [ms for k, ms in got if not k.startswith("ba")]
            print(
                f"{code}: typed {statistics.median(typed):.0f} / {max(typed):.0f} ms; every "
                f"key {statistics.median(ms for _, ms in got):.0f} ms"
            )
            continue
        parts = {
            "all": [ms for _, ms in got],
            "orders": [ms for k, ms in got if k.startswith("s:")],
            "groupings": [ms for k, ms in got if k.startswith("v:")],
            "by question": [ms for k, ms in got if k == "v:question"],
        }
        print(
            f"{code}: "
            + "; ".join(
                f"{name} {statistics.median(v):.0f} / {max(v):.0f} ms" for name, v in parts.items()
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
