"""`hitl list --json` cold and warm on bench.py's fleet, beside a bare read of the same files.

    .venv/bin/python bench/list_bench.py                      # 1,000 repos, ~5,000 blocks
    .venv/bin/python bench/list_bench.py --runs 7 --keep DIR  # keep the fleet in DIR
    .venv/bin/python bench/list_bench.py --fleet DIR --profile OUT   # cProfile each kind
    .venv/bin/python bench/list_bench.py --fleet DIR --code A --code B  # interleave two trees

Cold is a state folder with no parse cache (the first run, or the first after an upgrade);
warm is the next run with the cache the previous one saved. Each round runs cold, warm and the
bare read one after another (and, with several --code trees, each tree in turn), so that noise
from other work on the machine falls on every figure alike. The bare read is the floor: one
Python loop that lists each repository and reads every block file whole.
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import build_fleet


def bare_read(root: Path) -> tuple[float, int]:
    """Seconds to list every repository and read each block file whole; the files read."""
    t0 = time.perf_counter()
    files = 0
    for repo in os.scandir(root):
        names = os.listdir(repo.path)
        if "BLOCKED.md" in names:
            with open(os.path.join(repo.path, "BLOCKED.md"), "rb") as f:
                f.read()
            files += 1
        if ".agenticloop" in names:
            tasks = os.path.join(repo.path, ".agenticloop", "tasks")
            with os.scandir(tasks) as it:
                for entry in it:
                    with open(entry.path, "rb") as f:
                        f.read()
                    files += 1
    return time.perf_counter() - t0, files


def list_json(code: Path, root: Path, state: Path, profile: Path | None = None) -> float:
    """Seconds for one `hitl list --json ROOT` of the code in `code`, its state in `state`."""
    env = {**os.environ, "HITL_STATE_DIR": str(state), "PYTHONPATH": str(code)}
    env["HITL_CONFIG"] = str(state / "no-config.toml")
    # As installed: the modules' bytecode is cached (the first run, a warm-up, writes it).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    cmd = [sys.executable]
    if profile is not None:
        cmd += ["-m", "cProfile", "-o", str(profile)]
    cmd += ["-m", "hitl_tui", "list", "--json", str(root)]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, env=env, cwd=code)
    elapsed = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"{code}: {out.stderr.decode(errors='replace')}")
    return elapsed


def measure(code: Path, root: Path, scratch: Path, n: int) -> dict[str, float]:
    state = scratch / f"state-{n}"
    shutil.rmtree(state, ignore_errors=True)
    state.mkdir()
    cold = list_json(code, root, state)
    warm = list_json(code, root, state)
    return {"cold": cold, "warm": warm}


def spread(values: list[float]) -> str:
    return (
        f"median {statistics.median(values):.3f} s "
        f"(min {min(values):.3f}, max {max(values):.3f}, n={len(values)})"
    )


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
    codes = args.code or [Path(__file__).resolve().parent.parent]
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
        empty = scratch / "empty"
        empty.mkdir()
        for code in codes:  # a warm-up: bytecode written, the interpreter's files in the cache
            (scratch / "state-warmup").mkdir(exist_ok=True)
            list_json(code, empty, scratch / "state-warmup")
        if args.profile is not None:
            args.profile.mkdir(parents=True, exist_ok=True)
            state = scratch / "state-profile"
            state.mkdir()
            list_json(codes[0], fleet, state, args.profile / "cold.prof")
            list_json(codes[0], fleet, state, args.profile / "warm.prof")
            print(f"profiles in {args.profile}")
        figures = {c: {"cold": [], "warm": []} for c in codes}
        bares: list[float] = []
        files = 0
        for n in range(args.runs):
            for code in codes:
                got = measure(code, fleet, scratch, n)
                for kind, value in got.items():
                    figures[code][kind].append(value)
            bare, files = bare_read(fleet)
            bares.append(bare)
        print(f"bare read of {files} block files: {spread(bares)}")
        floor = statistics.median(bares)
        for code in codes:
            print(f"{code}:")
            for kind in ("cold", "warm"):
                values = figures[code][kind]
                ratios = [v / b for v, b in zip(values, bares, strict=True)]
                print(
                    f"  list --json {kind}: {spread(values)}; "
                    f"{statistics.median(values) / floor:.0f}x the bare read "
                    f"(per run {min(ratios):.0f}-{max(ratios):.0f}x)"
                )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
