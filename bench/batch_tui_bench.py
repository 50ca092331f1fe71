"""Answer each question once, in the app (issue 26): key -> frame of `M` (mark every open block
asking the same question) with 50 such blocks, alone and in a 5,000-block inbox; and of the
batch preview of those 50 (a choice key with marks: planned in a worker, then shown).

    .venv/bin/python bench/batch_tui_bench.py            # 50 alone, then 50 in 5,000 blocks
    .venv/bin/python bench/batch_tui_bench.py --trials 5

The 50 blocks ask "Which Node version should CI use?": 25 loopkit BLOCKED.md, 25 agenticloop
tasks. The others are agenticloop tasks whose questions differ by a number ("a token 17"): the
same words, so every one of them is a candidate the rule must look at and refuse. Timed as
bench/bench.py times a key: from the key event to the frame that shows its effect.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench import instrument, keypress  # noqa: E402

NODE = "Which Node version should CI use?"
BLOCKED = f"""\
# Blocked

## Question:
{NODE}

## Choices:
- A) Node 20 — the LTS the servers run.
- B) Node 22 — the newest LTS.
"""
TASK = """\
---
task_id: T-{n:04d}
status: blocked
block_category: decision
backend: files
---

# T-{n:04d} - {title}

## Task
Do it.

## Comments
- 2026-11-20: Blocked (decision): Checked: env. Needed: {question}
"""


def build(root: Path, others: int, same: int = 50) -> list[Path]:
    """`same` blocks asking NODE (half loopkit repos, half tasks of one agenticloop repo) and
    `others` tasks asking "a token N" (100 per agenticloop repo)."""
    repos = []
    for i in range(same // 2):
        repo = root / f"node-{i:02d}"
        (repo / ".git").mkdir(parents=True)
        (repo / "BLOCKED.md").write_text(BLOCKED)
        repos.append(repo)
    tasks = [(n, "Pin the CI Node version", NODE) for n in range(same - same // 2)]
    tasks += [(n, f"Task {n}", f"a token {n}.") for n in range(same, same + others)]
    for start in range(0, len(tasks), 100):
        repo = root / f"svc-{start // 100:03d}"
        folder = repo / ".agenticloop" / "tasks"
        folder.mkdir(parents=True)
        (repo / ".git").mkdir()
        (repo / ".agenticloop" / "project.md").write_text("# Project\n")
        for n, title, question in tasks[start : start + 100]:
            text = TASK.format(n=n, title=title, question=question)
            (folder / f"T-{n:04d}.md").write_text(text)
        repos.append(repo)
    return repos


async def measure(repos: list[Path], trials: int) -> dict:
    from hitl_tui.config import Config
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.inbox.view import row_of
    from hitl_tui.inbox.workspace import Workspace
    from hitl_tui.tui.app import HitlApp
    from hitl_tui.tui.widgets import BlockList

    app = HitlApp(Inbox(Workspace.discover(repos)), Config(operator="bench", bell=False))
    app.watch_enabled = False
    instrument(app)
    out: dict = {}
    async with app.run_test(size=(120, 40)) as pilot:
        while not app.loaded:
            await pilot.pause(0.01)
        await asyncio.sleep(0.5)  # the questions are read in a worker once the scan is over
        await app.workers.wait_for_complete()
        out["blocks"] = len(app.inbox.blocks)
        table = app.query_one(BlockList)
        rows = app.inbox_screen.rows
        target = next(  # a BLOCKED.md: its choice 2, Node 22, is the batch's option
            rk
            for rk in rows.order
            if rows.blocks[rk].question.strip() == NODE and rows.blocks[rk].source == "loopkit"
        )
        table.select(target)
        await pilot.pause()
        assert table.current is not None and row_of(table.current) == target
        times = []
        for _ in range(trials):
            await asyncio.sleep(0.2)
            times.append(await keypress(app, "M", until=lambda: len(rows.marked) >= 50))
            out["marked"] = len(rows.marked)
            await keypress(app, "escape", until=lambda: not rows.marked)
        out["mark_same"] = times
        # The batch preview: `2` (Node 22) with the 50 marked, to the frame that shows it.
        from hitl_tui.tui.batch_screens import BatchPreviewScreen

        previews = []
        for _ in range(max(1, trials // 2)):
            await keypress(app, "M", until=lambda: len(rows.marked) >= 50)
            await asyncio.sleep(0.2)
            previews.append(
                await keypress(app, "2", until=lambda: isinstance(app.screen, BatchPreviewScreen))
            )
            await keypress(
                app, "escape", until=lambda: not isinstance(app.screen, BatchPreviewScreen)
            )
            await keypress(app, "escape", until=lambda: not rows.marked)
        out["preview"] = previews
        # Space on a row, grouped by question (the group's header counts the marks).
        for _ in range(4):
            await keypress(app, "v", until=lambda: True)
        await asyncio.sleep(0.5)
        table.select(target)
        await asyncio.sleep(0.2)
        spaces = []
        for i in range(trials * 2):
            want = i % 2 == 0
            spaces.append(await keypress(app, "space", until=lambda w=want: bool(rows.marked) == w))
        out["space"] = spaces
    return out


def ms(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1000:.0f} ms, max {max(values) * 1000:.0f} ms"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    failed = False
    for others in (0, 4950):
        with tempfile.TemporaryDirectory(prefix="hitl-batch-bench-") as folder:
            repos = build(Path(folder), others)
            started = time.perf_counter()
            got = asyncio.run(measure(repos, args.trials))
            took = time.perf_counter() - started
            worst = max(got["mark_same"])
            verdict = "PASS" if worst <= 0.1 else "FAIL"
            failed |= worst > 0.1
            print(
                f"mark-same-question, {got['marked']} marked of {got['blocks']:,} blocks: "
                f"{ms(got['mark_same'])} (target <= 100 ms) {verdict}  [run {took:.0f} s]"
            )
            print(
                f"Space (mark one), grouped by question: {ms(got['space'])} "
                f"(target <= 100 ms) {'PASS' if max(got['space']) <= 0.1 else 'FAIL'}"
            )
            failed |= max(got["space"]) > 0.1
            slowest = max(got["preview"])
            failed |= slowest > 0.5
            print(
                f"batch preview of those {got['marked']}: {ms(got['preview'])} "
                f"(target <= 500 ms) {'PASS' if slowest <= 0.5 else 'FAIL'}"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
