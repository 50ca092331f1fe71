"""Rows 11a-11d of the benchmark: many blocks answered at once (issue 26), with 50 blocks
across loopkit and agenticloop (25 loopkit repositories, 25 agenticloop tasks in 5 projects),
all asking the same question, in a temporary workspace and state folder.

    .venv/bin/python bench/batch_bench.py               # 5 trials of each
    .venv/bin/python bench/batch_bench.py --trials 10

- 11a: mark the same question: `similarity.question_groups` over the 50 blocks, and
  `same_question` of one block against the 49 others (the app's `M`). Target: 100 ms.
- 11b: the batch preview: `batch.plan_batch` of the 50 blocks (each block's file read again and
  its exact changes planned), and each plan's diff made (what the preview shows). Target:
  500 ms.
- 11c: apply: `batch.apply_batch` of the 50 plans, every file written fsynced (a temp file
  fsynced and renamed, its folder fsynced; the journal's records and saved bytes too),
  restarts excluded. Target: 1 s.
- 11d: `hitl answer --filter QUERY --text TEXT` over the 50 blocks, the real `hitl` process of
  this venv from start to exit, restarts excluded (--no-restart). Target: 2 s.

Each trial answers a fresh copy of the workspace. The figure is the median (and the worst).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HITL = str(Path(sys.executable).parent / "hitl")
FIXTURES = ROOT / "tests" / "fixtures"
QUESTION = "Which Node version should CI use for the release builds?"
WORDS = "Use Node 22 in CI"


def make_fleet(folder: Path) -> list[Path]:
    """25 loopkit repositories and 5 agenticloop projects of 5 blocked tasks each, every block
    asking QUESTION: 50 blocks."""
    repos = []
    blocked = (FIXTURES / "loopkit-shop" / "BLOCKED.md").read_text(encoding="utf-8")
    old = "Should deleting a workspace also delete its archived invoices, or keep them for 7 years?"
    assert old in blocked
    for i in range(25):
        repo = folder / f"shop-{i:02d}"
        shutil.copytree(FIXTURES / "loopkit-shop", repo)
        (repo / ".git").mkdir()
        (repo / "BLOCKED.md").write_text(blocked.replace(old, QUESTION), encoding="utf-8")
        repos.append(repo)
    task = (FIXTURES / "agenticloop-billing" / ".agenticloop" / "tasks" / "T-009.md").read_text(
        encoding="utf-8"
    )
    for p in range(5):
        repo = folder / f"billing-{p}"
        shutil.copytree(FIXTURES / "agenticloop-billing", repo)
        (repo / ".git").mkdir()
        tasks = repo / ".agenticloop" / "tasks"
        for old_task in tasks.iterdir():
            old_task.unlink()
        for t in range(5):
            name = f"T-{100 + t:03d}"
            text = task.replace("T-009", name).replace(
                "an operator provides SFTP_PASSWORD in the loop's environment", QUESTION
            )
            (tasks / f"{name}.md").write_text(text, encoding="utf-8")
        repos.append(repo)
    return repos


def timed(step: Callable[[], object]) -> tuple[float, object]:
    began = time.perf_counter()
    result = step()
    return time.perf_counter() - began, result


def trial(base: Path) -> dict[str, float]:
    from hitl_tui.answers.batch import How, apply_batch, plan_batch
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.loops.similarity import question_groups, same_question

    folder = Path(tempfile.mkdtemp(dir=base))
    repos = make_fleet(folder)
    inbox = Inbox.open(repos)
    blocks = list(inbox.blocks.values())
    assert len(blocks) == 50, len(blocks)
    first = blocks[0]

    def mark() -> int:
        groups = question_groups(blocks)
        same = [b for b in blocks if b is not first and same_question(first, b)]
        return len(groups[0]) + len(same) if groups else 0

    figures: dict[str, float] = {}
    figures["mark"], marked = timed(mark)
    assert marked == 99, marked  # one group of 50, and the 49 others asking the same
    how = How(texts=(WORDS,), operator="bench")

    def preview():
        batch = plan_batch(inbox, blocks, how)
        for item in batch.items:
            assert item.plan is not None, item.reason
            item.plan.diff()
        return batch

    figures["preview"], batch = timed(preview)
    figures["apply"], done = timed(lambda: apply_batch(inbox, batch, restart=False))
    assert done.count("written") == 50, done.counts
    shutil.rmtree(folder)

    folder = Path(tempfile.mkdtemp(dir=base))
    make_fleet(folder)
    command = [HITL, "answer", "--filter", "node version", "--text", WORDS, "--no-restart"]
    began = time.perf_counter()
    ran = subprocess.run(
        [*command, str(folder)], capture_output=True, text=True, check=False, cwd=folder
    )
    figures["cli"] = time.perf_counter() - began
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.count(": written: ") == 50, ran.stdout[-500:]
    shutil.rmtree(folder)
    return figures


ROWS = [
    ("11a. mark the same question, 50 blocks (groups + M)", "mark", 0.1),
    ("11b. the batch preview, 50 plans and diffs", "preview", 0.5),
    ("11c. apply 50 answers, every file fsynced, no restarts", "apply", 1.0),
    ("11d. hitl answer --filter ... over 50 blocks (process)", "cli", 2.0),
]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="hitl-batch-bench-"))
    os.environ["HITL_STATE_DIR"] = str(base / "state")
    os.environ["HITL_CONFIG"] = str(base / "none.toml")
    try:
        runs = [trial(base) for _ in range(args.trials)]
    finally:
        shutil.rmtree(base, ignore_errors=True)
    failed = False
    print(f"{'':58} {'median':>9} {'worst':>8}  target ({args.trials} trials)")
    for name, key, target in ROWS:
        values = [r[key] for r in runs]
        median, worst = statistics.median(values), max(values)
        ok = median <= target
        failed |= not ok
        print(
            f"{name:58} {median * 1000:6.1f} ms {worst * 1000:5.1f} ms  "
            f"<= {target * 1000:.0f} ms: {'PASS' if ok else 'FAIL'}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
