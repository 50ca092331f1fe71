"""How hitl's start-up and journal commands grow with the journal's history (issue 11, item 9).

    .venv/bin/python bench/journal_bench.py                  # 10k and 100k answers
    .venv/bin/python bench/journal_bench.py --answers 2000   # a quick run
    .venv/bin/python bench/journal_bench.py --legacy         # today's single journal.jsonl

For each size it builds, in a temp state folder, a journal of N answers as hitl itself writes
them (`journal.begin` + `journal.commit` of one real plan on a small repo, over the last 80
days; fsync is skipped while building, nothing else), or with `--legacy` one `journal.jsonl`
written line by line in the layout hitl used before rotation (the migration path). Then it
times real `hitl` subprocesses on that state folder: `hitl guard REPO`, `hitl list REPO`,
`hitl history -n 20` and `hitl undo` (which refuses, exit 3, writing nothing: the repo is not
in the answered state), median of --runs, with each one's peak RSS (ru_maxrss from wait4).
A first run after building is printed apart (with --legacy it is the one that migrates).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SHOP = ROOT / "tests" / "fixtures" / "loopkit-shop"
HITL = Path(sys.executable).parent / "hitl"


def build(state: Path, repo: Path, answers: int, legacy: bool) -> float:
    """Journal `answers` answers of one plan on `repo`, spread over the last 80 days."""
    os.environ["HITL_STATE_DIR"] = str(state)
    from hitl_tui import journal
    from hitl_tui.answers.service import plan_answer
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.journal import entries as journal_entries
    from hitl_tui.model import Answer

    inbox = Inbox.open([repo])
    block = inbox.resolve(str(repo))
    plan = plan_answer(inbox, block, Answer(choice=block.find_choice("B"), operator="Ada"))
    start = datetime.now(UTC) - timedelta(days=80)
    step = timedelta(days=80) / answers
    clock = [start]

    def now() -> datetime:
        return clock[0]

    began = time.monotonic()
    real_fsync, real_now = os.fsync, journal_entries._now
    os.fsync = lambda fd: None
    journal_entries._now = now  # every record's time (begin and commit are journal_entries')
    try:
        if legacy:
            build_legacy(journal, plan, answers, start, step)
        else:
            for _ in range(answers):
                entry = journal.begin(plan)
                journal.commit(entry)
                clock[0] += step
    finally:
        os.fsync, journal_entries._now = real_fsync, real_now
    return time.monotonic() - began


def build_legacy(journal, plan, answers: int, start: datetime, step: timedelta) -> None:
    """One journal.jsonl, as hitl wrote it before rotation: the same records, one file."""
    entry = journal.begin(plan)  # stores the blobs; its records are the template
    folder = state_dir_journal()
    active = folder / "journal.jsonl"
    template = json.loads(active.read_bytes().splitlines()[0])
    for name in os.listdir(folder):
        if name not in ("blobs", "journal.lock"):
            path = folder / name
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    with open(active, "w", encoding="ascii") as out:
        when = start
        for n in range(answers):
            entry = f"{when:%Y%m%d-%H%M%S}-{n:06x}"
            begin = {**template, "id": entry, "time": when.isoformat()}
            out.write(json.dumps(begin, separators=(",", ":")) + "\n")
            end = {"v": 1, "type": "commit", "id": entry, "time": when.isoformat(), "by": "apply"}
            out.write(json.dumps(end, separators=(",", ":")) + "\n")
            when += step


def state_dir_journal() -> Path:
    return Path(os.environ["HITL_STATE_DIR"]) / "journal"


def run(state: Path, *args: object) -> tuple[float, int, int]:
    """Seconds, peak RSS (bytes) and exit code of one `hitl ARGS`."""
    env = {**os.environ, "HITL_STATE_DIR": str(state), "HITL_CONFIG": str(state / "none.toml")}
    began = time.monotonic()
    proc = subprocess.Popen(
        [str(HITL), *map(str, args)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.monotonic() - began
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.stderr is not None
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if proc.returncode not in (0, 2, 3):
        raise SystemExit(f"hitl {args} failed ({proc.returncode}): {err}")
    return seconds, usage.ru_maxrss * 1024, proc.returncode


def du(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--answers", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--legacy", action="store_true", help="one journal.jsonl (migration)")
    args = parser.parse_args()
    commands = {
        "guard": lambda repo: ("guard", repo),
        "list": lambda repo: ("list", repo),
        "history -n 20": lambda repo: ("history", "-n", "20"),
        "undo": lambda repo: ("undo",),
    }
    print(f"{'answers':>8}  {'command':<14} {'median s':>9} {'first s':>8} {'peak RSS':>9}")
    for answers in [0, *args.answers]:
        with tempfile.TemporaryDirectory(prefix="hitl-journal-bench-") as scratch:
            root = Path(scratch)
            repo = root / "shop"
            shutil.copytree(SHOP, repo)
            (repo / ".git").mkdir()
            state = root / "state"
            state.mkdir()
            if answers:
                built = build(state, repo, answers, args.legacy)
                size = du(state / "journal")
                print(f"# {answers} answers built in {built:.1f}s, journal {size / 1e6:.0f} MB")
            for name, argv in commands.items():
                first = run(state, *argv(repo))
                times, peaks = [], [first[1]]
                for _ in range(args.runs):
                    seconds, peak, _code = run(state, *argv(repo))
                    times.append(seconds)
                    peaks.append(peak)
                print(
                    f"{answers:>8}  {name:<14} {statistics.median(times):>9.3f} {first[0]:>8.3f}"
                    f" {max(peaks) / 1e6:>7.0f}MB"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
