"""How many inotify instances and watches a process holds (Linux), for tests and benchmarks.

Linux limits both per user (`fs.inotify.max_user_instances`, often 128, and
`max_user_watches`), so the watcher must use one instance and a few watches per repository. The
kernel lists each inotify instance as an `anon_inode:inotify` file descriptor, and each of its
watches as one `inotify wd:` line in that descriptor's fdinfo.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class InotifyUsage:
    instances: int
    watches: int


def inotify_usage(pid: int | str = "self") -> InotifyUsage | None:
    """The inotify instances and watches `pid` holds now; None where /proc cannot tell."""
    fd_dir = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return None
    instances = watches = 0
    for fd in fds:
        try:
            if os.readlink(f"{fd_dir}/{fd}") != "anon_inode:inotify":
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}", encoding="ascii", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:  # closed meanwhile
            continue
        instances += 1
        watches += sum(1 for line in lines if line.startswith("inotify wd:"))
    return InotifyUsage(instances, watches)
