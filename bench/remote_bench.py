"""Row 9 of the benchmark: how soon a block written on another machine is listed here.

    .venv/bin/python bench/remote_bench.py              # 100 repos there, 30 trials
    .venv/bin/python bench/remote_bench.py --repos 300 --trials 50

A real OpenSSH server on 127.0.0.1 (tests/sshd.py: throwaway keys, its own state folders)
stands for the other machine, and the hitl of this venv runs there. The same fleet is watched
two ways, in turn, by the same process: locally (the domain's watcher, `watch.watch_inbox`,
into an Inbox) and through `[[remote]]` (`sources.ssh`: `hitl list --json --watch` over ssh,
into an Inbox). Each trial writes a BLOCKED.md into a quiet repo and times the write to the
block in the Inbox; then removes it and waits for it to leave. Target: the remote p95 at most
the local p95 + 100 ms.

bench/bench.py runs this as its row 9; it is skipped there, with the reason, where no sshd
can run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BLOCKED = "# Blocked\n\n## Question:\nShould repo {n} ship on Friday?\n\n## Choices:\n- A) yes\n"


def build(root: Path, repos: int) -> list[Path]:
    """`repos` quiet repositories (a `.git` and a PROMPT.md each), every tenth blocked."""
    made = []
    for i in range(repos):
        repo = root / f"repo-{i:04d}"
        (repo / ".git" / "objects").mkdir(parents=True)
        (repo / "PROMPT.md").write_text("# PROMPT.md\n")
        if i % 10 == 0:
            (repo / "BLOCKED.md").write_text(BLOCKED.format(n=i))
        else:
            made.append(repo)
    return made


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(".bench-tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


async def trials(inbox, free: list[Path], count: int, key_of, offset: int) -> list[float]:
    """Write a block, time it to the inbox; remove it, wait for it to leave."""
    latencies = []
    for i in range(count):
        repo = free[i % len(free)]
        path = repo / "BLOCKED.md"
        key = key_of(path)
        t0 = time.perf_counter()
        write_atomic(path, BLOCKED.format(n=offset + i))
        while key not in inbox.blocks:
            await asyncio.sleep(0.001)
            if time.perf_counter() - t0 > 20:
                raise RuntimeError(f"{path} not listed after 20 s")
        latencies.append(time.perf_counter() - t0)
        path.unlink()
        while key in inbox.blocks:
            await asyncio.sleep(0.002)
        await asyncio.sleep(0.05)
    return latencies


async def local_latency(fleet: Path, free: list[Path], count: int) -> list[float]:
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.inbox.watch import watch_inbox

    inbox = Inbox.open([fleet])
    stop = asyncio.Event()
    ready = asyncio.Event()
    task = asyncio.ensure_future(
        watch_inbox(inbox, lambda delta: None, stop, on_ready=lambda dirs: ready.set())
    )
    await asyncio.wait_for(ready.wait(), 30)
    await asyncio.sleep(0.5)
    try:
        return await trials(inbox, free, count, lambda p: ("loopkit", p), 9000)
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


async def remote_latency(server, fleet: Path, free: list[Path], count: int) -> list[float]:
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.sources.ssh.backend import Host, SshBackend

    host = Host("build-1", (str(fleet),), (str(server.remote_hitl()),), tuple(server.ssh_argv()))
    backend = SshBackend([host])
    inbox = Inbox.open([])
    stop = asyncio.Event()
    states: list[str] = []

    async def on_update(scope, state, message, delta) -> None:
        states.append(state)

    task = asyncio.ensure_future(backend.watch(inbox, on_update, stop))
    t0 = time.perf_counter()
    while "ok" not in states:
        await asyncio.sleep(0.01)
        if time.perf_counter() - t0 > 60:
            raise RuntimeError(f"the remote watch did not start: {states}")
    await asyncio.sleep(0.5)
    try:
        return await trials(inbox, free, count, lambda p: ("remote", f"build-1:{p}"), 19000)
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def measure(repos: int, count: int) -> dict:
    """{"local": [...], "remote": [...]} in seconds, or {"skipped": why}."""
    from tests.sshd import Sshd, unavailable_reason

    why = unavailable_reason()
    if why:
        return {"skipped": why}
    with tempfile.TemporaryDirectory(prefix="hitl-remote-bench-") as tmp:
        root = Path(tmp)
        fleet = root / "fleet"
        free = build(fleet, repos)
        with Sshd(root / "server") as server:
            server.start()
            local = asyncio.run(local_latency(fleet, free, count))
            remote = asyncio.run(remote_latency(server, fleet, free, count))
    return {"local": local, "remote": remote}


def verdict(figures: dict) -> tuple[str, bool]:
    local, remote = figures["local"], figures["remote"]
    text = (
        f"remote {statistics.median(remote) * 1000:.0f} / {pct(remote, 95) * 1000:.0f} ms; "
        f"local {statistics.median(local) * 1000:.0f} / {pct(local, 95) * 1000:.0f} ms"
    )
    return text, pct(remote, 95) <= pct(local, 95) + 0.100


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--repos", type=int, default=100)
    parser.add_argument("--trials", type=int, default=30)
    args = parser.parse_args()
    os.environ.setdefault("HITL_STATE_DIR", tempfile.mkdtemp(prefix="hitl-bench-state-"))
    figures = measure(args.repos, args.trials)
    if "skipped" in figures:
        print(f"skipped: {figures['skipped']}")
        return 0
    text, ok = verdict(figures)
    print(f"9. detection of a block on another machine over ssh (median / p95): {text}")
    print(f"   target: remote p95 <= local p95 + 100 ms: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
