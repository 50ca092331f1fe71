"""The app's long-lived watch of one host: `hitl list --json --watch` over ssh, from connect to
drop (`Session`). It reads the stream line by line, keeps the host's blocks (bounded: `wire`'s
limits), throttles a host that floods, says the host's state in one line, and asks about the
answers whose connection dropped at each line from the host.

A host's changes reach the inbox as they come, unless it sends more than FLOOD_RATE lines a
second (a hitl there gone wrong, or hostile): then it is flooding, and until it has sent fewer
for FLOOD_CALM seconds its changes are kept per block (the last one wins) and applied every
APPLY_EVERY seconds, and its lines are read for at most READ_SHARE of the time (the rest waits
in the pipe, and the far side with it): the operator's keys stay quick.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from hitl_tui import __version__
from hitl_tui.model import Block, HitlError
from hitl_tui.sources.base import OnUpdate, RemoteInbox
from hitl_tui.sources.ssh import wire
from hitl_tui.sources.ssh.config import Host
from hitl_tui.sources.ssh.transport import (
    STDERR_KEEP,
    Ran,
    close,
    far_error,
    off_loop,
    ssh_reason,
    ssh_state,
    uncancelled,
    version_message,
)
from hitl_tui.textio import one_line, printable

#: A host whose hitl is too old (or too new) is tried again this rarely.
VERSION_RETRY = 300
#: Seconds for the first line (the whole list: the far side scans its repositories first).
FIRST_LINE = 120.0
#: A host floods past FLOOD_RATE lines a second; calm again after FLOOD_CALM seconds below it.
FLOOD_RATE = 50
APPLY_EVERY = 0.25
READ_SHARE = 0.05
FLOOD_CALM = 2.0
#: A flood is named in the host's state once it has lasted this long (a burst of changes, a
#: `git checkout` there, is only paced).
FLOOD_NAMED = 1.0


class Watched(Protocol):
    """What a session asks of its backend (`backend.SshBackend`)."""

    @property
    def name(self) -> str: ...

    @property
    def alive_every(self) -> float: ...

    def argv(self, host: Host, words: Sequence[str]) -> list[str]: ...

    def has_pending(self, host: Host) -> bool: ...

    def settle_pending(self, host: Host) -> list[str]: ...

    def _run(self, host: Host, words: Sequence[str], timeout: float = ...) -> Ran: ...


class Session:
    """One `hitl list --json --watch` over ssh, from connect to drop: feeds `inbox` and
    returns (state, why it ended, seconds to wait or None for the backoff)."""

    def __init__(
        self,
        backend: Watched,
        host: Host,
        inbox: RemoteInbox,
        on_update: OnUpdate,
        stop: asyncio.Event,
    ) -> None:
        self.backend, self.host, self.inbox, self.on_update, self.stop = (
            backend,
            host,
            inbox,
            on_update,
            stop,
        )
        self.blocks: dict[tuple[str, Path | str], Block] = {}
        self.weights: dict[tuple[str, Path | str], int] = {}
        self.total = 0  # the sum of `weights`
        self.listed = False
        self.skipped = 0
        self.over = 0  # blocks not listed: over MAX_BLOCKS or MAX_HOST_TEXT
        self.warnings: list[str] = []  # the far side's (its `list` and `warnings` lines)
        self.err = bytearray()
        self._settling: asyncio.Future[None] | None = None  # the look at dropped answers, if any
        #: The lines of the last second (time, count), for the flood's rate.
        self._recent: collections.deque[tuple[float, int]] = collections.deque()
        self._lines_in_second = 0
        self.flooding = False
        self._flood_began = 0.0
        self._calm_since: float | None = None
        #: Changes read but not applied yet (flooding), and the task that applies them.
        self._dirty = False
        self._ticker: asyncio.Task[None] | None = None
        self.applies = 0  # how many times the inbox was given this host's blocks
        #: The blocks changed since the last apply (None: every one, a new list came).
        self._touched: set[tuple[str, Path | str]] | None = None
        self._applied_at = 0.0
        self._said: tuple[str, str] | None = None  # the state last said

    async def run(self) -> tuple[str, str, int | None]:
        alive = self.backend.alive_every
        words = ["list", "--json", "--watch", "--alive", f"{alive:g}", *self.host.paths]
        argv = self.backend.argv(self.host, words)
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except FileNotFoundError:
            return "error", f"no ssh command {self.host.ssh[0]!r} here", VERSION_RETRY
        except OSError as exc:
            return "error", f"cannot run ssh: {exc.strerror}", None
        errors = asyncio.ensure_future(self._drain(proc.stderr))
        try:
            ended = await self._read(proc)
            if self._ticker is not None:  # what was read is listed, whatever comes next
                self._ticker.cancel()
                self._ticker = None
                self.flooding = False
                if not self.stop.is_set():
                    await self._apply()
        finally:
            if self._ticker is not None:
                self._ticker.cancel()
            if self._settling is not None:
                self._settling.cancel()  # its thread ends on its own (see off_loop)
            task = asyncio.current_task()
            quitting = self.stop.is_set() or (task is not None and task.cancelling() > 0)
            await uncancelled(close(proc, errors, quick=quitting))
        if ended is not None:
            return ended
        return await self._why(proc)

    async def _drain(self, stream: asyncio.StreamReader | None) -> None:
        if stream is None:
            return
        while chunk := await stream.read(4096):
            self.err += chunk
            del self.err[:-STDERR_KEEP]

    async def _read(self, proc: asyncio.subprocess.Process) -> tuple[str, str, int | None] | None:
        """Read lines until EOF (None: ask the exit code why) or a reason to stop."""
        stdout = proc.stdout
        assert stdout is not None  # a pipe: asked for
        buffer = bytearray()
        patience = FIRST_LINE
        #: The list must have come by then, whatever else the far side says meanwhile; while
        #: its own line keeps coming (a long list, a slow link), ten times that at most.
        began = time.monotonic()
        list_by = began + FIRST_LINE
        waiter_stop = asyncio.ensure_future(self.stop.wait())
        try:
            while True:
                read = asyncio.ensure_future(stdout.read(1 << 16))
                done, _ = await asyncio.wait(
                    [read, waiter_stop], timeout=patience, return_when="FIRST_COMPLETED"
                )
                if waiter_stop in done:
                    read.cancel()
                    return "ok", "stopped", None
                if read not in done:
                    read.cancel()
                    if not self.listed:
                        waited = time.monotonic() - began
                        return "unreachable", f"no list for {waited:.0f} s (the host hangs?)", None
                    return (
                        "unreachable",
                        f"no sign of life for {patience:g} s (the host hangs?)",
                        None,
                    )
                chunk = read.result()
                if not chunk:
                    return None
                patience = 3 * self.backend.alive_every + 5
                if not self.listed:
                    limit = list_by if b"\n" in chunk else list_by + 9 * FIRST_LINE
                    patience = max(0.0, min(patience, limit - time.monotonic()))
                longest = wire.MAX_LINE if self.listed else wire.MAX_LIST_LINE
                if b"\n" not in chunk:  # a long line, still coming: not split again and again
                    buffer += chunk
                    if len(buffer) > longest:
                        return "error", "its hitl sent a line too long to be the protocol", None
                    continue
                lines = (buffer + chunk).split(b"\n")
                buffer = bytearray(lines.pop())
                if len(buffer) > longest or any(len(x) > longest for x in lines):
                    return "error", "its hitl sent a line too long to be the protocol", None
                took = time.thread_time()  # this thread's work (not the machine's load)
                ended = await self._lines(lines)
                if ended is not None:
                    return ended
                if self.listed:
                    patience = 3 * self.backend.alive_every + 5
                if self.flooding:  # read for READ_SHARE of the time; the far side waits
                    took = time.thread_time() - took
                    rest = min(1.0, took * (1 / READ_SHARE - 1))
                    done, _ = await asyncio.wait([waiter_stop], timeout=rest)
                    if done:
                        return "ok", "stopped", None
        finally:
            waiter_stop.cancel()

    async def _lines(
        self, lines: Sequence[bytes | bytearray]
    ) -> tuple[str, str, int | None] | None:
        import orjson

        touched = False
        counted = 0
        for line in lines:
            if not line.strip():
                continue
            counted += 1
            try:
                event = orjson.loads(line)
            except ValueError:
                self.skipped += 1
                continue
            if not isinstance(event, dict):
                self.skipped += 1
                continue
            kind = event.get("event")
            if kind == "alive":
                counted -= 1  # the far side's heartbeat: not a change
            elif kind == "list":
                if wire.too_new(event.get("protocol")):
                    message = version_message(
                        self.host.host, event.get("protocol"), event.get("hitl")
                    )
                    return "error", message, VERSION_RETRY
                items = event.get("blocks")
                if not isinstance(items, list):
                    return "error", "its hitl sent a list that is not the protocol", None
                self.blocks, self.weights, self.total, self.over = {}, {}, 0, 0
                self._touched = None
                for item in items:
                    self._put(item)
                self._warn(event.get("warnings"))
                self.listed = touched = True
            elif not self.listed:
                continue  # nothing counts before the list
            elif kind in ("added", "changed"):
                self._put(event.get("block"))
                touched = True
            elif kind == "warnings":
                touched = self._warn(event.get("warnings")) or touched
            elif kind == "removed":
                key = wire.remote_key(self.host.host, event.get("source"), event.get("path"))
                if key is not None and self.blocks.pop(key, None) is not None:
                    self.total -= self.weights.pop(key, 0)
                    self._touch(key)
                    touched = True
        looking = self._settling is not None and not self._settling.done()  # one at a time
        if self.listed and self.backend.has_pending(self.host) and not looking:
            self._settling = asyncio.ensure_future(self._settle())  # at each line: alive too
        began = self._count(counted)
        if touched:
            self._dirty = True
        # At once, unless flooding: then the first of it, or one after it has slowed down.
        slow = self._lines_in_second <= FLOOD_RATE
        if self._dirty and (not self.flooding or began or (slow and self._applied_long_ago())):
            await self._apply()
        return None

    def _applied_long_ago(self) -> bool:
        return time.monotonic() - self._applied_at >= APPLY_EVERY

    def _count(self, lines: int) -> bool:
        """Note `lines` read now; whether the host has just begun to flood (then a ticker
        applies its changes every APPLY_EVERY seconds, until it calms down)."""
        now = time.monotonic()
        self._recent.append((now, lines))
        self._lines_in_second += lines
        while self._recent and self._recent[0][0] <= now - 1.0:
            self._lines_in_second -= self._recent.popleft()[1]
        if self.flooding or self._lines_in_second <= FLOOD_RATE:
            return False
        self.flooding, self._flood_began, self._calm_since = True, now, None
        self._ticker = asyncio.ensure_future(self._tick())
        return True

    async def _tick(self) -> None:
        """While the host floods: what it changed, applied every APPLY_EVERY seconds; once
        it has sent no more than FLOOD_RATE lines a second for FLOOD_CALM seconds, it is said
        calm and its changes are applied as they come again."""
        while True:
            await asyncio.sleep(APPLY_EVERY)
            self._count(0)
            now = time.monotonic()
            if self._lines_in_second > FLOOD_RATE:
                self._calm_since = None
            elif self._calm_since is None:
                self._calm_since = now
            if self._calm_since is not None and now - self._calm_since >= FLOOD_CALM:
                self.flooding, self._ticker = False, None
                await self._apply()  # its state says it is calm
                return
            if self._dirty or (self._condition(), self._state()) != self._said:
                await self._apply()  # (the rate, or lines that changed no block, said too)

    async def _apply(self) -> None:
        """Give the inbox this host's blocks as they are now (its changes since the last
        time, each block's last), and say the host's state."""
        delta = None
        if self._dirty:
            self._dirty = False
            self.applies += 1
            self._applied_at = time.monotonic()
            touched, self._touched = self._touched, set()
            patch = getattr(self.inbox, "patch_remote", None)
            if touched is None or patch is None:
                delta = self.inbox.replace_remote(
                    self.backend.name, self.host.host, list(self.blocks.values())
                )
            else:  # what changed alone: no pass over the host's every block per change
                delta = patch(self.backend.name, self.host.host, touched, self.blocks)
        self._said = (self._condition(), self._state())
        await self.on_update(self.host.host, *self._said, delta)

    async def _settle(self) -> None:
        """Ask that machine what became of the answers whose connection dropped, beside the
        watch (a slow journal there holds neither the list nor quitting), and say it."""
        try:
            said = await off_loop(self.backend.settle_pending, self.host)
        except Exception as exc:  # a bug this tripped: said, and asked again at the next line
            said = [f"could not ask about the answers whose connection dropped ({exc!r:.200})"]
        for line in said:
            await self.on_update(self.host.host, "answer", line, None)

    def _condition(self) -> str:
        trouble = self.skipped or self.over or self.warnings or self._named()
        return "warning" if trouble else "ok"

    def _named(self) -> bool:
        """Whether the host's state says it floods: it has for FLOOD_NAMED seconds, and sent
        more than half of FLOOD_RATE in each half of the last second (a burst is in one)."""
        now = time.monotonic()
        if not self.flooding or now - self._flood_began < FLOOD_NAMED:
            return False
        late = sum(n for t, n in self._recent if t > now - 0.5)
        return late > FLOOD_RATE / 2 and self._lines_in_second - late > FLOOD_RATE / 2

    def _put(self, item: object) -> None:
        try:
            block = wire.block_from_wire(item, self.host.host)
        except wire.WireError:
            self.skipped += 1
            return
        key = (block.source, block.path)
        weight = wire.weight(block)
        total = self.total - self.weights.get(key, 0) + weight
        if (key not in self.blocks and len(self.blocks) >= wire.MAX_BLOCKS) or (
            total > wire.MAX_HOST_TEXT
        ):
            self.over += 1
            return
        self.blocks[key] = block
        self.weights[key] = weight
        self.total = total
        self._touch(key)

    def _touch(self, key: tuple[str, Path | str]) -> None:
        if self._touched is not None:
            self._touched.add(key)

    def _warn(self, value: object) -> bool:
        """Keep the far side's warnings (a list of strings; anything else is not one)."""
        if not isinstance(value, list):
            return False
        said = [printable(one_line(w))[:300] for w in value[:100] if isinstance(w, str)]
        changed = said != self.warnings
        self.warnings = said
        return changed

    def _state(self) -> str:
        count = len(self.blocks)
        text = f"connected, {count} block{'' if count == 1 else 's'}"
        if self._named():
            rate = self._lines_in_second
            text = f"flooding, throttled ({rate:,} change{'' if rate == 1 else 's'}/s); {text}"
        if self.skipped:
            many = self.skipped
            what = "line that was not a block" if many == 1 else "lines that were not blocks"
            text += f" ({many} {what} skipped)"
        if self.over:
            text += f" ({self.over} more were not listed: over the limit)"
        if self.warnings:
            many = len(self.warnings)
            text += f" ({many} warning{'' if many == 1 else 's'} there: {self.warnings[0]})"
        return text

    async def _why(self, proc: asyncio.subprocess.Process) -> tuple[str, str, int | None]:
        code = proc.returncode
        err = self.err.decode("utf-8", "replace")
        if code == 255 or code is None or code < 0:
            reason = ssh_reason(err)
            if self.listed and reason == "unreachable":
                reason = "the connection dropped"
            return ssh_state(reason), reason, None
        ran = Ran(code, b"", err)
        if code == 2 and ("unrecognized arguments" in err or "invalid choice" in err):
            version = await asyncio.to_thread(self._version)
            return (
                "error",
                f"its hitl {version} is too old for the remote protocol {wire.PROTOCOL} (this "
                f"hitl is {__version__}): upgrade hitl on {self.host.host}",
                VERSION_RETRY,
            )
        if code == 0:
            return "unreachable", "the watch ended", None
        return "error", str(far_error(self.host.host, ran, "the watch")).split(": ", 1)[-1], None

    def _version(self) -> str:
        try:
            ran = self.backend._run(self.host, ["--version"], 20)
        except HitlError:
            return "(version unknown)"
        words = ran.out.decode("utf-8", "replace").split()
        return printable(words[-1])[:40] if ran.code == 0 and words else "(version unknown)"
