"""Running hitl on another machine through the system ssh, and reading what it replies.

Each command is sent as `HITL --argv ENCODED` (`far_command`: whatever the far login shell,
hitl there gets the words byte for byte), with `BatchMode=yes` (never a prompt) and connection
reuse (`control_dir`): the long-lived watch is the master connection, and every answer,
preview and undo rides on it while it lives. ssh runs in a process group of its own, ended
whole (`kill_group`); the asyncio helpers end a watch's ssh within a bound and read its pipes
to their end.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import re
import signal
import stat
import subprocess
import tempfile
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

from hitl_tui import __version__
from hitl_tui.model import HitlError, StaleError, UsageError
from hitl_tui.sources.ssh import wire
from hitl_tui.sources.ssh.config import Host
from hitl_tui.textio import one_line, printable

#: Seconds for a one-shot command (a preview, an undo, a look at the journal).
COMMAND_TIMEOUT = 60.0
#: Most of ssh's and the far side's stderr kept, to explain a failure in one line.
STDERR_KEEP = 4096

T = TypeVar("T")


#: A word every shell (sh, dash, bash, zsh, fish, csh) reads as itself, unquoted.
PLAIN = re.compile(r"[A-Za-z0-9_./:@+,-]+")


def shell_word(word: str) -> str:
    r"""`word` quoted for any far login shell (sh, dash, bash, zsh, fish, csh), a leading `~/`
    left to it to expand. Single quotes, but never a backslash or a quote inside them (fish
    reads `\` and `'` there as escapes): each is written `\` or `'` between them, which
    every one of those shells reads as that one character."""
    if word == "~":
        return "~"
    if word.startswith("~/"):
        return "~/" + _quoted(word[2:]) if word[2:] else "~/"
    return _quoted(word)


def _quoted(word: str) -> str:
    if PLAIN.fullmatch(word):
        return word
    if not word:
        return "''"
    pieces = []
    for part in re.split(r"([\\'])", word):
        if part in ("\\", "'"):
            pieces.append("\\" + part)
        elif part:
            pieces.append(f"'{part}'")
    return "".join(pieces)


def far_command(hitl: Sequence[str], words: Sequence[str]) -> str:
    """The command line the far login shell runs: the configured hitl command (its own words,
    a leading `~/` expanded there), then `--argv` and `words` encoded (`wire.encode_argv`):
    no shell there can change them. `--version` alone goes plain, so a hitl too old to know
    `--argv` still says its version. ValueError for a NUL in a word."""
    command = " ".join(shell_word(w) for w in hitl)
    if list(words) == ["--version"]:
        return f"{command} --version"
    return f"{command} {wire.ARGV} {wire.encode_argv(list(words))}"


def control_dir() -> Path | None:
    """A private folder for ssh's connection-sharing sockets (short: a socket path is at most
    ~100 bytes), or None where none can be had safely (then every command connects anew)."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    folder = (
        Path(base) / "hitl-ssh"
        if base and len(base) < 40
        else Path(tempfile.gettempdir()) / f"hitl-ssh-{os.getuid()}"
    )
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(folder)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        return None
    return folder


class Unreached(HitlError):
    """ssh could not reach the host, or lost it: whether the command ran there is unknown."""


@dataclass
class Ran:
    """What one command there did: its exit code, its output, the end of its stderr."""

    code: int
    out: bytes
    err: str


def ssh_argv(
    host: Host, words: Sequence[str], control: Path | None, alive_every: float
) -> list[str]:
    """The local ssh command that runs hitl with `words` on `host`: connections shared
    through `control` (a folder of `control_dir`, or None), keepalives every `alive_every`."""
    options = [
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=10",
        "-o",
        f"ServerAliveInterval={max(1, round(alive_every))}",
        "-o",
        "ServerAliveCountMax=3",
    ]
    if control is not None:
        options += [
            "-o",
            "ControlMaster=auto",
            "-o",
            f"ControlPath={control}/%C",
            "-o",
            "ControlPersist=no",
        ]
    try:
        command = far_command(host.hitl, words)
    except ValueError:  # a NUL in a word: no command line can carry it
        raise HitlError(f"{host.host}: a NUL character cannot be sent over ssh") from None
    return [*host.ssh, *options, "--", host.host, command]


class Running:
    """The commands running that only read (a preview, a journal look), thread-safe: ended
    together (`kill_all`) as the app's watch ends, so quitting never waits for a hung host."""

    def __init__(self) -> None:
        self._procs: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()

    def add(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._procs.add(proc)

    def discard(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._procs.discard(proc)

    def __len__(self) -> int:
        with self._lock:
            return len(self._procs)

    def kill_all(self) -> None:
        with self._lock:
            running = list(self._procs)
        for proc in running:
            kill_group(proc)


def run(
    host: Host,
    argv: list[str],
    timeout: float = COMMAND_TIMEOUT,
    limit: int = wire.MAX_LINE,
    reading: Running | None = None,
) -> Ran:
    """Run `argv` (`ssh_argv`: hitl on `host`) and wait; Unreached when ssh could not (exit
    255). At most `limit` bytes of its output are read: a far side that prints more is ended.
    One that only reads is kept in `reading` while it runs (None: it writes)."""
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except FileNotFoundError:
        raise HitlError(f"{host.host}: no ssh command {host.ssh[0]!r} here") from None
    except OSError as exc:
        raise HitlError(f"{host.host}: cannot run ssh: {exc.strerror}") from None
    except ValueError:  # a NUL in a word: no command line can carry it
        raise HitlError(f"{host.host}: a NUL character cannot be sent over ssh") from None
    if reading is not None:
        reading.add(proc)
    out, err = bytearray(), bytearray()
    over = threading.Event()
    # Pipes, as asked for (buffered: `read1` returns what is there).
    stdout, stderr = cast(io.BufferedReader, proc.stdout), cast(io.BufferedReader, proc.stderr)

    def read_out() -> None:
        with contextlib.suppress(OSError, ValueError):
            while chunk := stdout.read1(1 << 16):
                out.extend(chunk)
                if len(out) > limit:
                    over.set()
                    kill_group(proc)
                    return

    def read_err() -> None:
        with contextlib.suppress(OSError, ValueError):
            while chunk := stderr.read1(1 << 16):
                err.extend(chunk)
                del err[:-STDERR_KEEP]

    readers = [threading.Thread(target=f, daemon=True) for f in (read_out, read_err)]
    for reader in readers:
        reader.start()
    cut = False  # ended here: its pipes may outlive it
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        cut = True
        kill_group(proc)
        raise Unreached(f"{host.host}: no answer within {timeout:g} s") from None
    finally:
        if reading is not None:
            reading.discard(proc)
        if proc.poll() is None:
            cut = True
            kill_group(proc)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
        for reader, stream in zip(readers, (stdout, stderr), strict=True):
            # An ssh that shared a connection handed its pipes to the master ssh, which
            # keeps them open after this one is killed: not waited for (a hung host's
            # master holds them until its own watch gives up).
            reader.join(0.5 if cut else 5)
            if not reader.is_alive():  # else a straggler holds the pipe: closing would wait
                with contextlib.suppress(OSError):
                    stream.close()
    if over.is_set():
        raise HitlError(f"{host.host}: its hitl printed more than this hitl reads for one command")
    text = bytes(err).decode("utf-8", "replace")
    if proc.returncode == 255:
        raise Unreached(f"{host.host}: {ssh_reason(text)}")
    return Ran(proc.returncode, bytes(out), text)


def reply(host: Host, ran: Ran, what: str, ok: tuple[int, ...] = (0,)) -> object:
    """The far side's JSON reply (any value: the caller checks its shape), or HitlError
    mapping its exit code and its line."""
    if ran.code not in ok:
        raise far_error(host.host, ran, what)
    import orjson

    try:
        return orjson.loads(ran.out)
    except ValueError:
        pass
    try:  # lone surrogates, as `\udce9`: the undecodable bytes of a path or an answer
        return json.loads(ran.out)
    except (ValueError, RecursionError):
        raise HitlError(f"{host.host}: its hitl printed no JSON for {what}") from None


def json_object(host: Host, ran: Ran, what: str) -> dict[str, Any]:
    """The far side's one JSON object, or HitlError mapping its exit code and line."""
    data = reply(host, ran, what)
    if not isinstance(data, dict):
        raise HitlError(f"{host.host}: its hitl printed no JSON object for {what}")
    if wire.too_new(data.get("protocol")):
        raise HitlError(version_message(host.host, data.get("protocol"), data.get("hitl")))
    return data


def ssh_reason(err: str) -> str:
    """ssh's failure in a few words (its exit 255), from what it printed."""
    text = err.lower()
    for needle, reason in (
        ("could not resolve hostname", "unknown host"),
        ("connection refused", "unreachable (connection refused)"),
        ("timed out", "unreachable (timed out)"),
        ("no route to host", "unreachable (no route to host)"),
        ("network is unreachable", "unreachable (no network)"),
        ("host key verification failed", "its host key is not trusted (see known_hosts)"),
        ("remote host identification has changed", "its host key changed (see known_hosts)"),
        ("permission denied", "ssh was refused (permission denied: the key?)"),
        ("timeout, server", "the connection hung (no reply to keepalives)"),
        ("connection closed", "the connection was closed"),
        ("connection reset", "the connection was reset"),
        ("broken pipe", "the connection broke"),
    ):
        if needle in text:
            return reason
    return "unreachable"


def ssh_state(reason: str) -> str:
    if "permission denied" in reason or "host key" in reason:
        return "unauthorised"
    return "unreachable"


def far_error(host: str, ran: Ran, what: str) -> HitlError:
    """The far side's one-line error for `what`, with its exit code's meaning kept."""
    lines = [line for line in ran.err.splitlines() if line.strip()]
    said = lines[-1] if lines else f"exit {ran.code}"
    said = printable(one_line(said.removeprefix("hitl: ")))[:300]
    if ran.code == 127:
        return HitlError(f"{host}: no hitl command there ({said})")
    if ran.code == 2 and ("unrecognized arguments" in said or "invalid choice" in said):
        return HitlError(f"{host}: its hitl is too old for {what} ({said}); upgrade it there")
    cls = {3: StaleError, 2: UsageError}.get(ran.code, HitlError)
    return cls(f"{host}: {said}")


def version_message(host: str, protocol: object, version: object) -> str:
    theirs = printable(str(version))[:40] if version else "unknown"
    return (
        f"{host} speaks remote protocol {printable(str(protocol))[:20]} (hitl {theirs}); this "
        f"hitl {__version__} speaks {wire.PROTOCOL}: upgrade hitl here"
    )


def kill_group(proc: subprocess.Popen[bytes] | asyncio.subprocess.Process) -> None:
    """End ssh and what it started (its own process group: `start_new_session`)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


# -- asyncio helpers: a watch's ssh ended within a bound, its pipes read to their end ----------


async def uncancelled(awaitable: Awaitable[T]) -> T:
    """Await `awaitable` to its end even when cancelled meanwhile, then pass the cancel on:
    ending a far side's ssh is bounded (`_gone`), and left half done it leaves a process and
    open pipes behind (the app cancels its workers as it quits)."""
    task = asyncio.ensure_future(awaitable)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    return task.result()


async def off_loop(fn: Callable[..., T], *args: object) -> T:
    """`fn(*args)` in a daemon thread: unlike `asyncio.to_thread`'s executor, nothing waits
    for it at the event loop's end (a journal look there may take a minute; quitting must
    not). Cancelled, the thread finishes on its own and its result is dropped."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(cast(T, result))  # `fn` returned it

    def call() -> None:
        result, error = None, None
        try:
            result = fn(*args)
        except BaseException as exc:
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop has closed meanwhile
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=call, name="hitl-remote", daemon=True).start()
    return await future


async def close(
    proc: asyncio.subprocess.Process, errors: asyncio.Future[None], quick: bool = False
) -> None:
    """End the watch's ssh, then read its stderr to the end (ssh is gone, so that comes at
    once): a cancelled reader would leave a full pipe paused, open for the garbage collector.
    `quick` (the app quits): about a second at most, a far side ignoring EOF and SIGTERM too."""
    await _end(proc, quick)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(errors, 0.5 if quick else 2)


async def _end(proc: asyncio.subprocess.Process, quick: bool = False) -> None:
    """Close the far side's stdin (it stops), then make sure ssh is gone; what it still prints
    is read and dropped meanwhile (a far side blocked on a full pipe can finish, and the pipe
    is closed, not left for the garbage collector)."""
    with contextlib.suppress(Exception):
        if proc.stdin is not None:
            proc.stdin.close()
    rest = asyncio.ensure_future(_discard(proc.stdout))
    try:
        await _gone(proc, quick)
    finally:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(rest, 0.5 if quick else 2)


async def _discard(stream: asyncio.StreamReader | None) -> None:
    if stream is None:
        return
    with contextlib.suppress(Exception):
        while await stream.read(1 << 16):
            pass


async def _gone(proc: asyncio.subprocess.Process, quick: bool = False) -> None:
    """ssh ended: on its own after stdin closed (3 s; 0.3 s when quitting), else SIGTERM to
    its process group, then SIGKILL (2 s each; 0.3 s when quitting)."""
    try:
        await asyncio.wait_for(proc.wait(), 0.3 if quick else 3)
        return
    except TimeoutError:
        pass
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            await asyncio.wait_for(proc.wait(), 0.3 if quick else 2)
            return
        except TimeoutError:
            continue
