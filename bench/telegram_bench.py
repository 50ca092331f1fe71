"""Rows 12a-12b of the benchmark: the Telegram bot (issue 28), `hitl listen` as a real process
against a local Bot API server on 127.0.0.1 (tests/support/telegram_api.py).

    .venv/bin/python bench/telegram_bench.py                # 20 taps, 20 idle seconds
    .venv/bin/python bench/telegram_bench.py --trials 40 --idle 60
    .venv/bin/python bench/telegram_bench.py --smoke        # CI: 4 taps, 3 idle seconds

- 12a: a tap on a block's button, from the tap queued at the server to the answer in
  PROMPT.md (written and fsynced: the atomic rename comes after the fsync). The server answers
  at once, so the figure is hitl's own. Target: p95 at most 1 s. The trials run in rounds of
  four blocks, each round a fresh `hitl listen` and state folder (the burst bound sends four
  messages a minute, then a summary).
- 12b: what `hitl listen` costs while nothing happens: its CPU time (user + system, from
  /proc) over N idle seconds, long polling included. Target: at most 1% of one core.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HITL = str(Path(sys.executable).parent / "hitl")
SHOP = ROOT / "tests" / "fixtures" / "loopkit-shop"
ROUND = 4
KEEP = "B) Keep invoices, detach them from the workspace"


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.0f} / {pct(values, 95) * 1000:.0f} ms"


def _wait(condition, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"not within {seconds:g} s: {what}")
        time.sleep(0.005)


def _listen(tmp: Path, tg, repos: list[Path]) -> subprocess.Popen:
    state = tmp / "state"
    config = tmp / "config.toml"
    config.write_text(f'[telegram]\nchat_id = {tg.operator["id"]}\napi = "{tg.api}"\n')
    env = {
        **os.environ,
        "HITL_STATE_DIR": str(state),
        "HITL_CONFIG": str(config),
        "HITL_TELEGRAM_TOKEN": tg.token,
    }
    return subprocess.Popen(
        [HITL, "listen", "--config", str(config), *map(str, repos)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(tmp / "listen.err").open("wb"),
    )


def _stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def taps(trials: int) -> list[float]:
    """12a: tap → PROMPT.md written, `trials` times."""
    from tests.support.telegram_api import TelegramAPI

    figures: list[float] = []
    while len(figures) < trials:
        tmp = Path(tempfile.mkdtemp(prefix="hitl-telegram-bench-"))
        repos = []
        for i in range(min(ROUND, trials - len(figures))):
            repo = tmp / f"r{i}"
            shutil.copytree(SHOP, repo)
            (repo / ".git").mkdir()
            repos.append(repo)
        with TelegramAPI() as tg:
            proc = _listen(tmp, tg, repos)
            try:
                count = len(repos)
                _wait(lambda c=count: len(tg.sent_messages()) == c, 30, "the messages")
                _wait(lambda: tg.polling, 10, "the long poll")
                for message in tg.sent_messages():
                    repo = tmp / message["text"].split("\n")[0]
                    prompt = repo / "PROMPT.md"
                    before = os.stat(prompt).st_ino
                    t0 = time.perf_counter()
                    tg.tap(message, text=KEEP)
                    _wait(lambda p=prompt, b=before: os.stat(p).st_ino != b, 10, "the answer")
                    figures.append(time.perf_counter() - t0)
                    _wait(lambda: tg.polling, 10, "the next long poll")
            finally:
                _stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)
    return figures


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle(seconds: float) -> dict:
    """12b: `hitl listen`'s CPU seconds over `seconds` with nothing to do."""
    from tests.support.telegram_api import TelegramAPI

    tmp = Path(tempfile.mkdtemp(prefix="hitl-telegram-idle-"))
    repo = tmp / "quiet"
    (repo / ".git").mkdir(parents=True)
    with TelegramAPI() as tg:
        proc = _listen(tmp, tg, [repo])
        try:
            _wait(lambda: tg.polling, 30, "the long poll")
            time.sleep(1.0)  # start-up's work done
            before, polls = _cpu(proc.pid), tg.counts["getUpdates"]
            time.sleep(seconds)
            used = _cpu(proc.pid) - before
            polls = tg.counts["getUpdates"] - polls
        finally:
            _stop(proc)
    shutil.rmtree(tmp, ignore_errors=True)
    return {"seconds": seconds, "cpu": used, "polls": polls}


def verdicts(tapped: list[float], quiet: dict) -> list[tuple[str, str, str, bool]]:
    share = quiet["cpu"] / quiet["seconds"]
    return [
        (
            f"12a. Telegram tap → answer fsynced, `hitl listen` (median / p95 of {len(tapped)})",
            ms(tapped),
            "p95 <= 1 s",
            pct(tapped, 95) <= 1.0,
        ),
        (
            f"12b. `hitl listen` idle, CPU over {quiet['seconds']:g} s",
            f"{quiet['cpu'] * 1000:.0f} ms ({share * 100:.2f}% of a core); "
            f"{quiet['polls']} getUpdates",
            "<= 1% of a core",
            share <= 0.01,
        ),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--idle", type=float, default=20.0, metavar="SECONDS")
    parser.add_argument("--smoke", action="store_true", help="4 taps, 3 idle seconds")
    args = parser.parse_args()
    if args.smoke:
        args.trials, args.idle = 4, 3.0
    failed = False
    for name, value, target, ok in verdicts(taps(args.trials), idle(args.idle)):
        print(f"{name}: {value}   target {target}: {'PASS' if ok else 'FAIL'}")
        failed |= not ok
    return 1 if failed and not args.smoke else 0


if __name__ == "__main__":
    sys.exit(main())
