"""One poller per bot token across every hitl of the operator's (Telegram answers a second
`getUpdates` on the same token with 409 Conflict, and each would take the other's updates).

The claim is an flock on `telegram-<digest of the token>.lock` in the state folder, held as
long as the process polls; the kernel lets it go when the process ends, however it ends. The
holder writes who it is (pid, host, since) into the file, so that a second hitl can say it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import socket
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from hitl_tui.state import files as statefile
from hitl_tui.textio import one_line, printable


@dataclass(frozen=True)
class Holder:
    """Who polls: read from the lock file (untrusted: shown bounded and plain)."""

    pid: int | None
    host: str
    since: str

    def line(self) -> str:
        pid = f"pid {self.pid}" if self.pid is not None else "a process"
        host = f" on {self.host}" if self.host else ""
        since = f" since {self.since}" if self.since else ""
        return f"{pid}{host}{since}"


def lock_path(token: str) -> Path | None:
    digest = hashlib.sha256(token.encode()).hexdigest()[:16]
    return statefile.in_state(f"telegram-{digest}.lock")


class PollerClaim:
    """`acquire` the claim (True) or learn who holds it (`holder`); `release` it."""

    def __init__(self, token: str, path: Path | None = None) -> None:
        self.path = path if path is not None else lock_path(token)
        self._fd: int | None = None
        self.holder: Holder | None = None
        #: `release` and a waiting `acquire` may run in two threads: the fd is closed once.
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"PollerClaim(held={self.held})"

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, wait: bool = False) -> bool:
        """Take the claim (with `wait`, once its holder lets it go: blocking). Without a
        usable state folder this hitl polls (a second one would then be refused by Telegram's
        409, which it reports)."""
        if self._fd is not None:
            return True
        if self.path is None:
            return True
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.holder = _read_holder(fd)
            if not wait:
                os.close(fd)
                return False
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError:
                os.close(fd)
                return False
        me = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.now(UTC).astimezone().strftime("%Y-%m-%d %H:%M"),
        }
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(me).encode() + b"\n", 0)
        except OSError:
            pass
        with self._lock:
            self._fd = fd
        self.holder = None
        return True

    def release(self) -> None:
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass
            os.close(fd)


def _read_holder(fd: int) -> Holder:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError, RecursionError):
        data = {}
    if not isinstance(data, dict):
        data = {}
    pid = data.get("pid")

    def text(value: object) -> str:
        return printable(one_line(value))[:60] if isinstance(value, str) else ""

    return Holder(
        pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
        text(data.get("host")),
        text(data.get("since")),
    )
