"""How long a loop's write can still be lost while hitl replaces a file: the remaining window.

    .venv/bin/python bench/write_window.py             # 2,000 writes of each kind, on disk
    .venv/bin/python bench/write_window.py --n 200     # quicker
    .venv/bin/python bench/write_window.py --dir /dev/shm

Every write of an answer goes through `repofs.RepoDir.replace`, which records, for each file,
the time during which a write by the loop is not detected:

- update, with `renameat2(RENAME_EXCHANGE)`: from the swap until the swapped-out file has been
  read back and compared. A loop that opened the file before the swap and writes to it after
  that comparison writes into the replaced file, which is then deleted;
- update, without it (another OS, or a file system with no RENAME_EXCHANGE): from the last
  comparison until the plain rename has returned;
- remove (the block file): from renaming it aside until it has been read back and compared.

A create never has one (`RENAME_NOREPLACE`). The file is 8 KiB, about a PROMPT.md.
"""

from __future__ import annotations

import argparse
import errno
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hitl_tui.answers import repofs  # noqa: E402


def measure(folder: Path, n: int, kind: str) -> list[float]:
    """Microseconds of each of `n` writes of `kind` ("swap", "fallback", "remove")."""
    target = folder / f"{kind}.md"
    a = b"# PROMPT.md\n" + b"x" * 8180 + b"\n"
    b = a[:-1] + b"y\n"
    real = repofs.renameat2
    if kind == "fallback":

        def missing(*args):
            raise OSError(errno.ENOSYS, "disabled for the benchmark")

        repofs.renameat2 = missing
    try:
        if kind != "remove":
            target.write_bytes(a)
        with repofs.RepoDir(folder) as rd:
            spot = rd.spot(target)
            for i in range(n):
                if kind == "remove":
                    rd.replace(spot, None, a)  # a create has no window: it records none
                    rd.replace(spot, a, None)
                else:
                    old, new = (a, b) if i % 2 == 0 else (b, a)
                    rd.replace(spot, old, new)
            assert len(rd.windows) == n
            return [ns / 1000 for ns in rd.windows]
    finally:
        repofs.renameat2 = real


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="writes of each kind")
    parser.add_argument("--dir", help="where to write (default: a temp folder under bench/)")
    args = parser.parse_args()
    base = Path(args.dir) if args.dir else ROOT / "bench"
    with tempfile.TemporaryDirectory(prefix=".window-", dir=base) as tmp:
        print(f"{args.n:,} writes of each kind in {tmp} ({os.uname().sysname})")
        print(f"{'write':<40} {'median':>9} {'p99':>9} {'max':>9}")
        for kind, label in (
            ("swap", "update, RENAME_EXCHANGE + read back"),
            ("fallback", "update, check + plain rename"),
            ("remove", "remove, rename aside + read back"),
        ):
            us = sorted(measure(Path(tmp), args.n, kind))
            p99 = us[min(len(us) - 1, int(len(us) * 0.99))]
            print(f"{label:<40} {statistics.median(us):>7.1f}µs {p99:>7.1f}µs {us[-1]:>7.1f}µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
