"""`hitl stats` on a big journal (issue 29): 100,000 answers over 90 days, 1,000 repositories.

    .venv/bin/python bench/stats_bench.py                  # the issue's size
    .venv/bin/python bench/stats_bench.py --smoke          # 2,000 answers, 50 repos

It builds, in a temp state folder, a journal in hitl's own format: one real answer journaled
by hitl (`journal.begin` + `journal.commit` of a real plan) is the template of every record,
written line by line with its id, time, repository, block file and `block.since` changed, 1%
of them undone (an undo entry and its commit), rotated into segments of SEGMENT_BYTES named by
the time of their last record, as hitl closes them; the resume book holds its 2,000 records
(the newest answers, written by `Waiting.to_json`). The repositories are real folders (a
`.git` each), one in 100 blocked now. Then it times real `hitl stats ROOT` subprocesses
(--json): the first after building (each segment in the window summarised and cached), then
warm runs, for windows of 7, 30 and 90 days; and says how many segments each window read.

`measure` returns the figures for bench/bench.py's table.
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


def _template(state: Path, scratch: Path) -> tuple[dict, dict]:
    """One real answer, journaled by hitl: its begin and commit records."""
    from hitl_tui import journal
    from hitl_tui.answers.service import plan_answer
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.model import Answer

    repo = scratch / "template"
    shutil.copytree(SHOP, repo)
    (repo / ".git").mkdir()
    inbox = Inbox.open([repo])
    block = inbox.resolve(str(repo))
    plan = plan_answer(inbox, block, Answer(choice=block.find_choice("B"), operator="Ada"))
    real_fsync = os.fsync
    os.fsync = lambda fd: None
    try:
        entry = journal.begin(plan)
        journal.commit(entry)
    finally:
        os.fsync = real_fsync
    active = state / "journal" / "journal.jsonl"
    begin, commit = (json.loads(line) for line in active.read_bytes().splitlines())
    active.unlink()
    return begin, commit


def build(state: Path, root: Path, answers: int, repos: int, days: int) -> dict:
    """The journal, the resume book and the repositories (see the module docstring)."""
    os.environ["HITL_STATE_DIR"] = str(state)
    os.environ["HITL_CONFIG"] = str(state / "none.toml")
    from hitl_tui.journal import store as journalstore
    from hitl_tui.loops.records import Waiting

    began = time.monotonic()
    folders = []
    for n in range(repos):
        repo = root / "fleet" / f"loop-{n:04d}"
        (repo / ".git").mkdir(parents=True)
        if n % 100 == 0:
            shutil.copy(SHOP / "BLOCKED.md", repo / "BLOCKED.md")
        folders.append(repo)
    begin, commit = _template(state, root)
    folder = state / "journal"
    (folder / "open").mkdir(exist_ok=True)  # the layout of today: nothing to migrate
    now = datetime.now(UTC)
    start = now - timedelta(days=days)
    step = timedelta(days=days) / answers
    seq, out, size = 1, None, 0
    recent: list[tuple[str, datetime, Path]] = []

    def close(last: datetime) -> None:
        nonlocal seq, out, size
        assert out is not None
        out.close()
        name = f"journal-{seq:06d}-{last + timedelta(seconds=1):%Y%m%dT%H%M%SZ}.jsonl"
        os.rename(folder / "journal.jsonl", folder / name)
        seq, out, size = seq + 1, None, 0

    when = start
    for n in range(answers):
        if out is None:
            out = open(folder / "journal.jsonl", "w", encoding="ascii")  # noqa: SIM115
        repo = folders[(n * 7919) % repos]
        entry = f"{when:%Y%m%d-%H%M%S}-{n:06x}"
        wait = timedelta(seconds=30 + (n * 104729) % 7200)
        block = {**begin["block"], "path": str(repo / "BLOCKED.md"), "id": repo.name}
        block["since"] = (when - wait).isoformat()
        lines = [
            {**begin, "id": entry, "time": when.isoformat(), "repo": str(repo), "block": block},
            {**commit, "id": entry, "time": when.isoformat()},
        ]
        if n % 100 == 50:  # undone a minute later
            undo_id = f"{when:%Y%m%d-%H%M%S}-u{n:06x}"
            at = (when + timedelta(minutes=1)).isoformat()
            undo = {**begin, "id": undo_id, "time": at, "kind": "undo", "undoes": entry}
            undo["block"] = {k: v for k, v in block.items() if k != "since"}
            lines += [undo, {**commit, "id": undo_id, "time": at}]
        for record in lines:
            text = json.dumps(record, separators=(",", ":")) + "\n"
            out.write(text)
            size += len(text)
        recent.append((entry, when, repo))
        recent = recent[-2000:]
        if size > journalstore.SEGMENT_BYTES:
            close(when)
        when += step
    if out is not None:
        out.close()
    rows = []
    for n, (entry, at, repo) in enumerate(recent):
        state_name = ("resumed", "not-resumed", "waiting", "restart-failed")[n % 4]
        rows.append(
            Waiting(
                key=f"loopkit:{repo / 'BLOCKED.md'}",
                entry=entry,
                block_id=repo.name,
                source="loopkit",
                repo=str(repo),
                path=str(repo / "BLOCKED.md"),
                title=None,
                question="Keep invoices?",
                answered="B) Keep invoices",
                answered_at=at,
                deadline=at + timedelta(minutes=10),
                signs={},
                state=state_name,
                resumed_at=at + timedelta(minutes=3) if state_name == "resumed" else None,
                how="asked again (new BLOCKED.md)" if n % 8 == 0 else None,
            ).to_json()
        )
    (state / "resume.json").write_text(json.dumps({"format": 1, "records": rows}))
    size = sum(p.stat().st_size for p in folder.glob("journal*.jsonl"))
    return {
        "built_s": time.monotonic() - began,
        "segments": seq - 1,
        "journal_mb": size / 1e6,
    }


def run(state: Path, *args: object) -> tuple[float, float, dict]:
    """Wall seconds, CPU seconds (user + system, from wait4) and the JSON of one `hitl ARGS`."""
    env = {**os.environ, "HITL_STATE_DIR": str(state), "HITL_CONFIG": str(state / "none.toml")}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        began = time.monotonic()
        proc = subprocess.Popen([str(HITL), *map(str, args)], env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - began
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if code != 0:
            raise SystemExit(f"hitl {args} failed ({code}): {err.read().decode()}")
        data = json.loads(out.read()) if "--json" in args else {}
    return wall, usage.ru_utime + usage.ru_stime, data


def segments_read(state: Path, days: int) -> int:
    os.environ["HITL_STATE_DIR"] = str(state)
    from hitl_tui.stats.index import read_window

    return read_window(datetime.now(UTC) - timedelta(days=days)).segments_read


def measure(answers: int = 100_000, repos: int = 1000, days: int = 90, runs: int = 5) -> dict:
    """Build, then time `hitl stats` (see the module docstring); the figures, as a dict."""
    saved = {k: os.environ.get(k) for k in ("HITL_STATE_DIR", "HITL_CONFIG")}
    with tempfile.TemporaryDirectory(prefix="hitl-stats-bench-") as scratch:
        root = Path(scratch)
        state = root / "state"
        state.mkdir()
        try:
            figures = build(state, root, answers, repos, days)
            fleet = root / "fleet"
            first, _cpu, data = run(state, "stats", fleet, "--json")
            figures["first_30d_s"] = first
            figures["answered_30d"] = data["overall"]["answered"]
            for window in (7, 30, days):
                done = [
                    run(state, "stats", fleet, "--since", f"{window}d", "--json")
                    for _ in range(runs)
                ]
                figures[f"warm_{window}d_s"] = statistics.median(d[0] for d in done)
                figures[f"warm_{window}d_cpu_s"] = statistics.median(d[1] for d in done)
                figures[f"segments_{window}d"] = segments_read(state, window)
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
    figures.update(answers=answers, repos=repos, days=days)
    return figures


def rows(figures: dict) -> list[tuple[str, str, str, bool]]:
    """bench/bench.py's rows: (measure, result, target, ok)."""
    size = f"{figures['answers']:,} answers over {figures['days']} days, {figures['repos']} repos"
    warm = figures["warm_30d_s"]
    whole = figures["days"]
    read = [figures[f"segments_{d}d"] for d in (7, 30, whole)]
    times = " / ".join(f"{figures[f'warm_{d}d_s'] * 1000:.0f}" for d in (7, 30, whole))
    return [
        (
            f"12a. hitl stats --since 30d, {size} (median, warm)",
            f"{warm * 1000:.0f} ms, CPU {figures['warm_30d_cpu_s'] * 1000:.0f} ms "
            f"({figures['answered_30d']:,} answers in the window, "
            f"{read[1]} of {figures['segments']} segments read); the first run after the "
            f"journal was written {figures['first_30d_s'] * 1000:.0f} ms",
            "<= 1 s",
            warm <= 1.0,
        ),
        (
            f"12b. hitl stats --since 7d / 30d / {whole}d: the window's segments only",
            f"{times} ms; segments read {read[0]} / {read[1]} / {read[2]} of {figures['segments']}",
            "never a segment closed before the window",
            read[0] <= read[1] <= read[2] <= figures["segments"],
        ),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--answers", type=int, default=100_000)
    parser.add_argument("--repos", type=int, default=1000)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="2,000 answers, 50 repos, 2 runs")
    args = parser.parse_args()
    if args.smoke:
        args.answers, args.repos, args.runs = 2000, 50, 2
    figures = measure(args.answers, args.repos, args.days, args.runs)
    print(json.dumps(figures, indent=1))
    for name, result, target, ok in rows(figures):
        print(f"{name}: {result} (target {target}: {'ok' if ok else 'MISSED'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
