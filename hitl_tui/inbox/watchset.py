"""Which folders the watch must add or give up after a change: the folders to watch now
against those watched (`compare`), each statted for its identity (a folder made again in place
is another folder: its old watch died with the old one).

At 10,000 repositories that is 20,000 stats, 65-110 ms of a thread sharing the interpreter
with the app (and its objects, kept alive through the stats, brought on the garbage
collector's full collections). When the inbox knows which folders the change touched
(`Delta.folders`: a repository's folders before and after, as its index was updated one
repository at a time), only those are statted; every other folder is as the watch knew it.
That gives the result a compare of every folder gives for every change the inbox saw
(tests/test_watchset.py holds the two to each other over random histories); what no event
said is found by the compare of every folder after each look at the files (every 30 s).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hitl_tui.inbox.inbox import Inbox

#: A folder's identity: (device, inode); None where it cannot be read or is no folder.
Identity = tuple[int, int] | None
#: The folders to follow now; those with no live watch, with their identities; those watched
#: no longer to watch; and whether one of these is still there (its watch would stay).
Change = tuple[list[Path], dict[Path, tuple[int, int]], list[Path], bool]


def identities(dirs: Iterable[Path]) -> dict[Path, Identity]:
    """Each folder's (device, inode), None where it cannot be read or is no folder."""
    out: dict[Path, Identity] = {}
    for folder in dirs:
        try:
            st = os.stat(folder)
        except (OSError, ValueError):
            out[folder] = None
            continue
        out[folder] = (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None
    return out


def compare(
    inbox: Inbox, watched: dict[Path, Identity], folders: Collection[Path] | None = None
) -> Change:
    """The folders to watch now against `watched`; with `folders`, only those statted (the
    others are taken to be as `watched` says). In a thread: 10,000 paths hashed on the event
    loop took 30 ms."""
    dirs = inbox.watch_dirs(checked=False)
    if folders is None:
        # One stat a folder: whether it is one (the folders to follow) and its identity.
        now = {f: i for f, i in identities(dirs).items() if i is not None}
        following = list(now)
        gone = [f for f in watched if f not in now]
    else:
        wanted = set(dirs)
        some = identities(f for f in folders if f in wanted)
        now = {f: i for f, i in some.items() if i is not None}
        following = [f for f in dirs if (now.get(f) if f in some else watched.get(f))]
        gone = [f for f in folders if f in watched and f not in now]
    missing = {f: i for f, i in now.items() if watched.get(f) != i}
    stale = any(os.path.isdir(f) for f in gone)
    return following, missing, gone, stale
