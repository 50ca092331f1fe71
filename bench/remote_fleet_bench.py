"""Rows 14a-14e of the benchmark: ten machines over `[[remote]]`, each figure beside its floor.

    .venv/bin/python bench/remote_fleet_bench.py                 # 10 hosts x 1,000 blocks
    .venv/bin/python bench/remote_fleet_bench.py --smoke         # 2 hosts x 50 blocks (CI)
    .venv/bin/python bench/remote_fleet_bench.py --hosts 10 --blocks 1000 --rounds 3

A real OpenSSH server on 127.0.0.1 (tests/sshd.py) under ten host aliases (`fleet-0` ...
`fleet-9`, each its own `Host` in the ssh config) stands for ten machines; each has its own
folder of 1,000 blocks (BLOCKED.md repos and agenticloop tasks, bench.py's fleet) and a few
quiet repositories, and the hitl of this venv runs there. The operator's side is the real
backend (`sources.ssh`, one `[[remote]]` per host, connection reuse as configured).

- 14a/14b. Connect: every host's watch started at once; the time to the first host's blocks in
  the inbox, and to the last host's (all ten listed). Floors, same run: `ssh fleet-0 true`,
  and one host's `hitl list --json` over ssh, alone. Rounds: the first is cold (the far
  side's parse cache empty), the rest warm; medians of the rounds.
- 14c. Detection with all ten streaming: a BLOCKED.md written into a quiet repo of each host in
  turn, timed to its block in the inbox; beside the same writes watched locally (the domain's
  watcher on one host's folder), in the same run.
- 14d. The app's key latency (cursor move, key event to frame, as row 3a) with the ten hosts
  connected while every one of them sends changes (its block files rewritten, RATE a second
  per host), beside the same app's moves with no remote at all, in the same run.
- 14e. Connections: TCP connections to the sshd's port while all ten watch (in the backend,
  then in the app after the moves): one per host.

bench/bench.py runs this as its row 12 (`--smoke`: 2 hosts x 50 blocks); skipped, with the
reason, where no sshd can run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

BLOCKED = "# Blocked\n\n## Question:\nShould {where} ship on Friday?\n\n## Choices:\n- A) yes\n"
#: Quiet repositories per host: where the detection trials write.
QUIET = 6


def alias(i: int) -> str:
    return f"fleet-{i}"


def build(root: Path, hosts: int, blocks: int) -> tuple[list[Path], list[list[Path]]]:
    """Each host's folder (`blocks` blocks in blocks/5 repos) and its quiet repositories."""
    from bench import build_fleet

    fleets, quiet = [], []
    for h in range(hosts):
        fleet = root / f"host-{h}"
        fleet.mkdir(parents=True)
        build_fleet(fleet, max(2, blocks // 5), blocks, git_dirs=1, nm_dirs=0)
        free = []
        for q in range(QUIET):
            repo = fleet / f"quiet-{q:02d}"
            (repo / ".git").mkdir(parents=True)
            (repo / "PROMPT.md").write_text("# PROMPT.md\n")
            free.append(repo)
        fleets.append(fleet)
        quiet.append(free)
    return fleets, quiet


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(".bench-tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def connections(port: int) -> int:
    """Established TCP connections from this machine to `port` on 127.0.0.1 (the client ends:
    one per ssh connection)."""
    count = 0
    with open("/proc/net/tcp", encoding="ascii") as f:
        next(f)
        for line in f:
            fields = line.split()
            remote, state = fields[2], fields[3]
            if state == "01" and int(remote.split(":")[1], 16) == port:
                count += 1
    return count


def hosts_for(server, fleets: list[Path]):
    from hitl_tui.sources.ssh.backend import Host

    hitl = (str(server.remote_hitl()),)
    ssh = tuple(server.ssh_argv())
    return [Host(alias(i), (str(f),), hitl, ssh) for i, f in enumerate(fleets)]


def remote_count(inbox, host: str) -> int:
    prefix = f"{host}:"
    return sum(1 for key in list(inbox.blocks) if str(key[1]).startswith(prefix))


# -- 14a/14b, 14c, 14e: the backend alone --------------------------------------------------------


async def connect_and_detect(
    server, fleets: list[Path], quiet: list[list[Path]], blocks: int, trials: int
) -> dict:
    """Start every host's watch at once: when each host's list is in (seconds from the start);
    then, all ten streaming, `trials` detections; the TCP connections meanwhile."""
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.sources.ssh.backend import SshBackend

    hosts = hosts_for(server, fleets)
    backend = SshBackend(hosts)
    inbox = Inbox.open([])
    stop = asyncio.Event()
    listed: dict[str, float] = {}
    states: dict[str, str] = {}
    began = time.perf_counter()

    async def on_update(scope, state, message, delta) -> None:
        states[scope] = f"{state}: {message}"
        if scope not in listed and delta is not None and delta.added:
            listed[scope] = time.perf_counter() - began

    task = asyncio.ensure_future(backend.watch(inbox, on_update, stop))
    out: dict = {}
    try:
        while len(listed) < len(hosts):
            await asyncio.sleep(0.002)
            if time.perf_counter() - began > 120:
                raise RuntimeError(f"not every host listed in 120 s: {states}")
        out["listed"] = sorted(listed.values())
        out["counts"] = [remote_count(inbox, h.host) for h in hosts]
        if trials:
            await asyncio.sleep(0.5)
            out["connections"] = connections(server.port)
            out["detect"] = await detections(inbox, quiet, trials, remote=True)
            out["connections_after"] = connections(server.port)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    return out


async def detections(inbox, quiet: list[list[Path]], trials: int, remote: bool) -> list[float]:
    """Write a block into a quiet repo (each host in turn), time it to the inbox; remove it,
    wait for it to leave."""
    out = []
    for i in range(trials):
        h = i % len(quiet)
        repo = quiet[h][(i // len(quiet)) % len(quiet[h])]
        path = repo / "BLOCKED.md"
        key = ("remote", f"{alias(h)}:{path}") if remote else ("loopkit", path)
        t0 = time.perf_counter()
        write_atomic(path, BLOCKED.format(where=f"{alias(h)} trial {i}"))
        while key not in inbox.blocks:
            await asyncio.sleep(0.001)
            if time.perf_counter() - t0 > 20:
                raise RuntimeError(f"{key} not listed after 20 s")
        out.append(time.perf_counter() - t0)
        path.unlink()
        while key in inbox.blocks:
            await asyncio.sleep(0.002)
            if time.perf_counter() - t0 > 40:
                raise RuntimeError(f"{key} still listed 20 s after its file went")
        await asyncio.sleep(0.05)
    return out


async def local_detect(quiet: list[list[Path]], fleets: list[Path], trials: int) -> list[float]:
    """The floor of 14c: the same writes into host 0's quiet repos, watched here."""
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.inbox.watch import watch_inbox

    inbox = Inbox.open([fleets[0]])
    stop = asyncio.Event()
    ready = asyncio.Event()
    task = asyncio.ensure_future(
        watch_inbox(inbox, lambda delta: None, stop, on_ready=lambda dirs: ready.set())
    )
    await asyncio.wait_for(ready.wait(), 30)
    await asyncio.sleep(0.5)
    try:
        return await detections(inbox, quiet[:1], trials, remote=False)
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


def floors(server, fleets: list[Path], runs: int) -> dict:
    """`ssh fleet-0 true`, and one host's whole list over ssh alone (warm), `runs` times each."""
    from hitl_tui.sources.ssh.transport import far_command

    hitl = str(server.remote_hitl())
    true, alone = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        done = server.ssh(alias(0), "true")
        true.append(time.perf_counter() - t0)
        if done.returncode:
            raise RuntimeError(f"ssh {alias(0)} true: {done.stderr.strip()}")
        t0 = time.perf_counter()
        done = server.ssh(alias(0), far_command((hitl,), ["list", "--json", str(fleets[0])]))
        alone.append(time.perf_counter() - t0)
        if done.returncode:
            raise RuntimeError(f"ssh {alias(0)} hitl list: {done.stderr.strip()[:300]}")
    return {"ssh": true, "alone": alone}


# -- 14d: the app's keys while ten hosts send changes ---------------------------------------------


class Churn:
    """Rewrites block files on every host (`rate` a second each, in turn), in a thread."""

    def __init__(self, fleets: list[Path], rate: float) -> None:
        self.files = [sorted(f.glob("repo-*/BLOCKED.md")) for f in fleets]
        self.rate = rate
        self.stop = threading.Event()
        self.written = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        every = 1.0 / (self.rate * len(self.files))
        n = 0
        while not self.stop.is_set():
            files = self.files[n % len(self.files)]
            if files:
                path = files[(n // len(self.files)) % len(files)]
                write_atomic(path, BLOCKED.format(where=f"{path.parent.name} change {n}"))
                self.written += 1
            n += 1
            self.stop.wait(every)

    def __enter__(self) -> Churn:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(5)


async def app_moves(
    local: Path, server, fleets: list[Path] | None, moves: int, rate: float, expect: int
) -> dict:
    """Cursor moves in the real app on `local`, with `fleets` as its [[remote]] hosts (all
    listed, then sending changes) or none."""
    from bench import instrument, keypress
    from hitl_tui.config import Config
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.inbox.workspace import Workspace
    from hitl_tui.sources.ssh.backend import SshBackend
    from hitl_tui.tui.app import HitlApp

    remotes = (SshBackend(hosts_for(server, fleets)),) if fleets else ()
    inbox = Inbox.cached(Workspace.discover([local]))
    app = HitlApp(inbox, Config(operator="bench", bell=False, remotes=remotes))
    instrument(app)
    out: dict = {}
    async with app.run_test(size=(120, 40)) as pilot:
        t0 = time.perf_counter()
        while not app.loaded or (
            fleets and sum(b.source == "remote" for b in app.inbox.blocks.values()) < expect
        ):
            await pilot.pause(0.05)
            if time.perf_counter() - t0 > 120:
                raise RuntimeError("the hosts' lists did not come")
        await asyncio.sleep(1.0)
        churn = Churn(fleets or [], rate) if fleets else None
        if churn is not None:
            churn.__enter__()
        try:
            await asyncio.sleep(1.0)  # the changes under way
            screen, latencies = app.inbox_screen, []
            for i in range(moves):
                before = screen.current.id if screen.current is not None else None

                def moved(before=before) -> bool:
                    now = screen.current.id if screen.current is not None else None
                    return now != before

                latencies.append(await keypress(app, "j" if i % 2 == 0 else "k", until=moved))
            out["move"] = latencies
            out["blocks"] = len(app.inbox.blocks)
            if fleets:
                out["connections"] = connections(server.port)
        finally:
            if churn is not None:
                churn.__exit__()
                out["changes"] = churn.written
        app.stop_event.set()
        await pilot.press("q")
    return out


# -- the run -------------------------------------------------------------------------------------


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def measure(
    hosts: int = 10,
    blocks: int = 1000,
    trials: int = 30,
    moves: int = 40,
    rounds: int = 3,
    rate: float = 5.0,
    local_repos: int = 1000,
) -> dict:
    """Every figure of rows 14a-14e (seconds), or {"skipped": why}."""
    from bench import build_fleet
    from tests.sshd import Sshd, unavailable_reason

    why = unavailable_reason()
    if why:
        return {"skipped": why}
    out: dict = {"hosts": hosts, "blocks": blocks, "rate": rate}
    with tempfile.TemporaryDirectory(prefix="hitl-remote-fleet-bench-") as tmp:
        root = Path(tmp)
        fleets, quiet = build(root / "far", hosts, blocks)
        local = root / "local"
        local.mkdir()
        build_fleet(local, local_repos, local_repos * 5, git_dirs=1, nm_dirs=0)
        with Sshd(root / "server", aliases=[alias(i) for i in range(hosts)]) as server:
            server.start()
            out["connect"] = []
            for r in range(rounds):
                out.setdefault("floors", []).append(floors(server, fleets, 1))
                last = r == rounds - 1
                got = asyncio.run(
                    connect_and_detect(server, fleets, quiet, blocks, trials if last else 0)
                )
                out["connect"].append(got["listed"])
                out["counts"] = got["counts"]
                if last:
                    out["detect"] = got["detect"]
                    out["connections"] = [got["connections"], got["connections_after"]]
            out["local_detect"] = asyncio.run(local_detect(quiet, fleets, trials))
            out["moves_local"] = asyncio.run(app_moves(local, server, None, moves, rate, 0))
            out["moves_remote"] = asyncio.run(
                app_moves(local, server, fleets, moves, rate, hosts * blocks)
            )
    return out


def verdicts(f: dict) -> list[tuple[str, str, str, bool]]:
    """(row, result, target, ok) for each row."""
    hosts, blocks = f["hosts"], f["blocks"]
    first = [c[0] for c in f["connect"]]
    every = [c[-1] for c in f["connect"]]
    ssh = statistics.median(x for fl in f["floors"] for x in fl["ssh"])
    alone = statistics.median(x for fl in f["floors"] for x in fl["alone"])
    med = statistics.median
    rounds = (
        f"median of {len(first)} rounds; first round (cold there) {first[0]:.2f} / {every[0]:.2f} s"
    )
    rows = [
        (
            f"14a. first remote blocks: {hosts} hosts x {blocks:,} blocks connected at once → "
            "the first host's blocks in the inbox",
            f"{med(first):.2f} s ({rounds}); {med(first) - ssh:.2f} s after the ssh floor; "
            f"floors: `ssh host true` {ssh:.2f} s, one host's `hitl list --json` over ssh alone "
            f"{alone:.2f} s",
            "≤ 1 s",
            med(first) <= 1.0,
        ),
        (
            f"14b. all {hosts} hosts listed ({hosts * blocks:,} blocks)",
            f"{med(every):.2f} s; the last round's hosts: "
            + ", ".join(f"{x:.2f}" for x in f["connect"][-1])
            + " s",
            "≤ 5 s",
            med(every) <= 5.0 and all(c == blocks for c in f["counts"]),
        ),
    ]
    remote, local = f["detect"], f["local_detect"]
    rows.append(
        (
            f"14c. detection with all {hosts} streaming: BLOCKED.md written on a host → its block "
            f"here, each host in turn (median / p95 of {len(remote)})",
            f"remote {med(remote) * 1000:.0f} / {pct(remote, 95) * 1000:.0f} ms; the same writes "
            f"watched locally {med(local) * 1000:.0f} / {pct(local, 95) * 1000:.0f} ms",
            "remote p95 ≤ local p95 + 100 ms",
            pct(remote, 95) <= pct(local, 95) + 0.100,
        )
    )
    quiet, busy = f["moves_local"], f["moves_remote"]
    ql, bl = med(quiet["move"]), med(busy["move"])
    rows.append(
        (
            f"14d. cursor move in the app while all {hosts} hosts send changes "
            f"({f['rate']:g} a second each), key → frame (median / p95 of {len(busy['move'])})",
            f"{bl * 1000:.0f} / {pct(busy['move'], 95) * 1000:.0f} ms at {busy['blocks']:,} blocks "
            f"({busy.get('changes', 0)} changes written meanwhile); no remote: {ql * 1000:.0f} / "
            f"{pct(quiet['move'], 95) * 1000:.0f} ms at {quiet['blocks']:,}",
            "median ≤ 50 ms and ≤ 2× no remote's (+ 2 ms)",
            bl <= 0.050 and bl <= 2 * ql + 0.002,
        )
    )
    conns = [*f["connections"], busy.get("connections", -1)]
    rows.append(
        (
            f"14e. ssh connections while all {hosts} watch (TCP to the sshd: streaming, after "
            "the detections, in the app after the moves)",
            " / ".join(str(c) for c in conns),
            f"{hosts} (one per host)",
            all(c == hosts for c in conns),
        )
    )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--hosts", type=int, default=10)
    parser.add_argument("--blocks", type=int, default=1000, help="per host")
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--moves", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3, help="connects (the first cold there)")
    parser.add_argument("--rate", type=float, default=5.0, help="changes a second per host")
    parser.add_argument("--local-repos", type=int, default=1000, help="5 blocks each")
    parser.add_argument("--smoke", action="store_true", help="2 hosts x 50 blocks, no verdicts")
    args = parser.parse_args()
    if args.smoke:
        args.hosts, args.blocks, args.trials, args.moves, args.rounds = 2, 50, 6, 6, 1
        args.local_repos = 20
    os.environ.setdefault("HITL_STATE_DIR", tempfile.mkdtemp(prefix="hitl-bench-state-"))
    figures = measure(
        args.hosts, args.blocks, args.trials, args.moves, args.rounds, args.rate, args.local_repos
    )
    if "skipped" in figures:
        print(f"skipped: {figures['skipped']}")
        return 0
    failed = False
    for name, result, target, ok in verdicts(figures):
        verdict = "" if args.smoke else (" PASS" if ok else " FAIL")
        failed = failed or not ok
        print(f"{name}: {result}\n    target {target}{verdict}")
    return 1 if failed and not args.smoke else 0


if __name__ == "__main__":
    raise SystemExit(main())
