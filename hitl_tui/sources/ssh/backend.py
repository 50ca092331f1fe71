"""Blocks on other machines, over the operator's own ssh: the `[[remote]]` backend.

```toml
[[remote]]
host = "build-1"              # an ssh destination, as the operator's ssh config knows it
paths = ["~/loops"]           # repositories, or folders of them, on that machine
hitl = "~/.local/bin/hitl"    # optional: the command there (default: hitl)
ssh = ["ssh", "-F", "~/.ssh/hitl_config"]   # optional: the ssh command here (default: ssh)
list_timeout_seconds = 5      # optional: how long `hitl list` and `hitl status` wait for it
```

The far side is hitl itself, through its CLI (`wire` is the format), each command sent as
`HITL --argv ENCODED` (`far_command`: whatever the far login shell, hitl there gets the words
byte for byte): `hitl list --json --watch PATH...` streams the list and every change; `hitl
answer FILE ... --expect FP --dry-run --json` is the preview's plan; `hitl answer ... --expect
FP --json` writes with that machine's own lock, journal and checks; `hitl undo ENTRY --json`
undoes it there; `hitl history --json` and `hitl status --json` say what happened when a
connection dropped, and whether the loop resumed.

Here it is the system `ssh` (the operator's config, agent, known hosts and jump hosts), with
`BatchMode=yes` (never a prompt) and connection reuse: the long-lived watch is the master
connection, and every answer, preview and undo rides on it while it lives. One watch per host;
a host that cannot be reached, drops, or hangs (no line for a few `alive` periods) is shown as
such and retried with backoff; a reconnect swaps in its whole list again, so nothing is listed
twice or lost. `--expect` makes an answer sent twice impossible to apply twice.

A block from there is listed as `HOST:ID` (`build-1:shop`), its repo and path `HOST:PATH`, and
its text is as untrusted as a local file's (`wire.block_from_wire` checks every field).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import re
import secrets
import shlex
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hitl_tui import __version__
from hitl_tui.answers.locks import LOCK_TIMEOUT
from hitl_tui.model import (
    Answer,
    Block,
    HitlError,
    Plan,
    RemoteAction,
    StaleError,
    UsageError,
)
from hitl_tui.sources.base import OnUpdate, Source
from hitl_tui.sources.ssh import wire
from hitl_tui.textio import one_line, printable

#: What `host` may be: an ssh destination (`build-1`, `ada@10.0.0.7`, `[::1]`), never an option.
HOST = re.compile(r"[A-Za-z0-9_.@\[\]:%+-]{1,255}")
#: Seconds to wait between two tries to reach a host, growing (the last one repeats).
BACKOFF = (2, 4, 8, 15, 30, 60)
#: A host whose hitl is too old (or too new) is tried again this rarely.
VERSION_RETRY = 300
#: A session that stayed up this long starts its backoff from the beginning when it drops.
STEADY = 60.0
#: Seconds for a one-shot command (a preview, an undo, a look at the journal).
COMMAND_TIMEOUT = 60.0
#: Seconds `hitl list` and `hitl status` wait for one host (all hosts are asked at once), as
#: they wait 5 s for GitHub: a host that accepts the connection and never answers holds
#: neither a status bar's `hitl status` nor the local blocks. `list_timeout_seconds` in
#: `[[remote]]`.
LIST_TIMEOUT = 5.0
#: An answer may wait for the far side's lock behind a loop's write.
SEND_TIMEOUT = 120.0
#: Seconds for the first line (the whole list: the far side scans its repositories first).
FIRST_LINE = 120.0
#: The previews whose editable decision is kept (the last ones: one is confirmed soon after).
EDITABLE_KEEP = 256
#: Most of ssh's and the far side's stderr kept, to explain a failure in one line.
STDERR_KEEP = 4096
#: How an answer whose connection dropped is looked for in that machine's journal: an entry
#: for the same block bytes, begun no earlier than this before the send (clocks differ).
SKEW = timedelta(minutes=5)
#: The app's answers whose connection dropped before that machine said whether it wrote
#: them, in the state folder: a restarted app asks again (`SshBackend.settle_pending`).
PENDING_FILE = "remote-pending.json"
PENDING_FORMAT = 1
PENDING_MAX_BYTES = 8 << 20
#: A pending answer older than this is asked about no more (its machine's `hitl history`
#: still says what became of it).
PENDING_KEEP = timedelta(days=7)
#: The most of them kept (the newest).
PENDING_MAX = 1000
#: Pages of 100 of that machine's journal read back to find one (answers since the send).
HISTORY_PAGES = 20
#: A host's changes reach the inbox as they come, unless it sends more than FLOOD_RATE lines a
#: second (a hitl there gone wrong, or hostile): then it is flooding, and until it has sent
#: fewer for FLOOD_CALM seconds its changes are kept per block (the last one wins) and applied
#: every APPLY_EVERY seconds, and its lines are read for at most READ_SHARE of the time (the
#: rest waits in the pipe, and the far side with it): the operator's keys stay quick.
FLOOD_RATE = 50
APPLY_EVERY = 0.25
READ_SHARE = 0.05
FLOOD_CALM = 2.0
#: A flood is named in the host's state once it has lasted this long (a burst of changes, a
#: `git checkout` there, is only paced).
FLOOD_NAMED = 1.0


@dataclass(frozen=True)
class Host:
    """One `[[remote]]` table."""

    host: str
    paths: tuple[str, ...]
    hitl: tuple[str, ...] = ("hitl",)
    ssh: tuple[str, ...] = ("ssh",)
    list_timeout: float = LIST_TIMEOUT


def parse_config(tables: list) -> list[Host]:
    """The `[[remote]]` tables, checked; UsageError naming the table and key."""
    hosts: list[Host] = []
    for index, table in enumerate(tables, 1):
        where = f"[[remote]] #{index}"
        if not isinstance(table, dict):
            raise UsageError(f"{where} must be a table")
        unknown = sorted(set(table) - {"host", "paths", "hitl", "ssh", "list_timeout_seconds"})
        if unknown:
            raise UsageError(
                f"{where}: unknown key {unknown[0]!r} "
                "(known: host, hitl, list_timeout_seconds, paths, ssh)"
            )
        host = table.get("host")
        if not isinstance(host, str) or not HOST.fullmatch(host) or host.startswith("-"):
            raise UsageError(f"{where}: 'host' must be an ssh destination such as \"build-1\"")
        paths = table.get("paths")
        if isinstance(paths, str):
            paths = [paths]
        if (
            not isinstance(paths, list)
            or not paths
            or not all(isinstance(p, str) and p.strip() and "\0" not in p for p in paths)
        ):
            raise UsageError(f"{where} ({host}): 'paths' must be a list of folders on {host}")
        hitl = table.get("hitl", "hitl")
        try:
            words = tuple(shlex.split(hitl)) if isinstance(hitl, str) else ()
        except ValueError:
            words = ()
        if not words:
            raise UsageError(f"{where} ({host}): 'hitl' must be the hitl command on {host}")
        ssh = table.get("ssh", ["ssh"])
        if isinstance(ssh, str):
            ssh = [ssh]
        if not isinstance(ssh, list) or not ssh or not all(isinstance(w, str) and w for w in ssh):
            raise UsageError(f"{where} ({host}): 'ssh' must be a command, as a list of words")
        ssh = [os.path.expanduser(ssh[0]), *(os.path.expanduser(w) for w in ssh[1:])]
        wait = table.get("list_timeout_seconds", LIST_TIMEOUT)
        if isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 < wait <= 3600:
            raise UsageError(
                f"{where} ({host}): 'list_timeout_seconds' must be a number of seconds "
                "(more than 0, at most 3600)"
            )
        if any(h.host == host for h in hosts):
            raise UsageError(f"{where}: host {host!r} is named twice")
        hosts.append(Host(host, tuple(paths), words, tuple(ssh), float(wait)))
    return hosts


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


@dataclass(frozen=True)
class Pending:
    """An answer whose connection dropped before its machine said whether it wrote it."""

    id: str  # its own, in the state file
    host: str
    began: datetime
    fingerprint: str  # the block's bytes as answered: how its far journal entry is found
    block_id: str
    repo: str  # the repository there (its journal is asked of it); "" when not known
    #: What the journal here will record of it (`journal.remote_fields`), once that
    #: machine's journal says it was written.
    fields: dict

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "host": self.host,
            "began": self.began.isoformat(),
            "fingerprint": self.fingerprint,
            "block_id": self.block_id,
            "repo": self.repo,
            "fields": self.fields,
        }

    @classmethod
    def from_json(cls, item: object) -> Pending | None:
        """One from the state file, or None when it is not one (the file is ours, but any
        file can be damaged): every field checked, the journal's too."""
        from hitl_tui.journal.entries import aware_time, checked_fields

        if not isinstance(item, dict):
            return None
        names = ("id", "host", "began", "fingerprint", "block_id", "repo")
        texts = [item.get(k) for k in names]
        if not all(isinstance(t, str) and len(t) <= 4096 for t in texts):
            return None
        fields = checked_fields(item.get("fields"))
        if fields is None or not texts[0]:
            return None
        began = aware_time(texts[2])
        if began is None:
            return None
        return cls(texts[0], texts[1], began, texts[3], texts[4], texts[5], fields)


@dataclass
class Ran:
    code: int
    out: bytes
    err: str


class SshBackend(Source):
    """Every `[[remote]]` table of the config, as one backend (see `sources.base.Source`)."""

    name = wire.REMOTE_SOURCE
    title = "SSH"
    config_key = "remote"
    remote = True
    undoable = True
    #: Seconds between the far side's `alive` lines (a hang shows after three missed).
    alive_every: float = wire.ALIVE_EVERY
    #: After a connection dropped mid-answer: the waits before each look at its journal.
    settle_waits: tuple[float, ...] = (1, 2, 4, 8)
    #: Seconds after a send began that the hitl there may still write it (ssh gone, it goes
    #: on: its wait for the repository's lock, then the write): till then, an answer missing
    #: from its journal is "not known yet", not "not written".
    far_lifetime: float = LOCK_TIMEOUT + 5.0

    def __init__(self, hosts: Sequence[Host]) -> None:
        self.hosts = {h.host: h for h in hosts}
        self._control = control_dir()
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        #: The last preview's plan per block and answer: what the preview may edit.
        self._editable: dict[tuple, str | None] = {}
        #: Answers whose connection dropped before the far side said, by host.
        self._pending: dict[str, list[Pending]] = {}
        #: Whether they are kept in the state folder (the app: it asks again at each line from
        #: that host, also after a restart); the command line says where to look instead.
        self.keeps_pending = False
        self._stored: set[str] = set()  # the ids of those the state file holds
        #: The commands running that only read (a preview, a journal look): ended as the
        #: app's watch ends (`stop_reading`), so quitting never waits for a hung host.
        self._reading: set[subprocess.Popen] = set()
        self._lock = threading.Lock()
        #: Hosts that did not answer `hitl list` or `hitl status` in time (the command line):
        #: not asked again in the same command (each waiting answer would wait again).
        self._silent: set[str] = set()

    def __repr__(self) -> str:
        return f"SshBackend({list(self.hosts)!r})"

    @classmethod
    def from_config(cls, tables: list) -> SshBackend:
        return cls(parse_config(tables))

    # -- running hitl there ---------------------------------------------------------------

    def argv(self, host: Host, words: Sequence[str]) -> list[str]:
        """The local ssh command that runs hitl with `words` on `host`."""
        options = [
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=10",
            "-o",
            f"ServerAliveInterval={max(1, round(self.alive_every))}",
            "-o",
            "ServerAliveCountMax=3",
        ]
        if self._control is not None:
            options += [
                "-o",
                "ControlMaster=auto",
                "-o",
                f"ControlPath={self._control}/%C",
                "-o",
                "ControlPersist=no",
            ]
        try:
            command = far_command(host.hitl, words)
        except ValueError:  # a NUL in a word: no command line can carry it
            raise HitlError(f"{host.host}: a NUL character cannot be sent over ssh") from None
        return [*host.ssh, *options, "--", host.host, command]

    def shell_argv(self, block: Block) -> list[str] | None:
        """ssh to the block's host, with a terminal, into its repository there (`t`): its hitl
        enters the repository and execs the login shell (`hitl --shell-in REPO`, encoded)."""
        host = self.hosts.get(str(block.meta.get("host", "")))
        repo = block.meta.get("remote_repo")
        if host is None or not isinstance(repo, str) or not repo:
            return None
        try:
            command = far_command(host.hitl, [wire.SHELL_IN, repo])
        except ValueError:
            return None
        return [*host.ssh, "-t", "--", host.host, command]

    def _run(
        self,
        host: Host,
        words: Sequence[str],
        timeout: float = COMMAND_TIMEOUT,
        limit: int = wire.MAX_LINE,
        writes: bool = False,
    ) -> Ran:
        """Run hitl `words` on `host` and wait; Unreached when ssh could not (exit 255).
        At most `limit` bytes of its output are read: a far side that prints more is ended.
        One that only reads (not `writes`) is ended when the app's watch ends."""
        argv = self.argv(host, words)
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
        if not writes:
            with self._lock:
                self._reading.add(proc)
        out, err = bytearray(), bytearray()
        over = threading.Event()

        def read_out() -> None:
            with contextlib.suppress(OSError, ValueError):
                while chunk := proc.stdout.read1(1 << 16):
                    out.extend(chunk)
                    if len(out) > limit:
                        over.set()
                        _kill_group(proc)
                        return

        def read_err() -> None:
            with contextlib.suppress(OSError, ValueError):
                while chunk := proc.stderr.read1(1 << 16):
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
            _kill_group(proc)
            raise Unreached(f"{host.host}: no answer within {timeout:g} s") from None
        finally:
            with self._lock:
                self._reading.discard(proc)
            if proc.poll() is None:
                cut = True
                _kill_group(proc)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(5)
            for reader, stream in zip(readers, (proc.stdout, proc.stderr), strict=True):
                # An ssh that shared a connection handed its pipes to the master ssh, which
                # keeps them open after this one is killed: not waited for (a hung host's
                # master holds them until its own watch gives up).
                reader.join(0.5 if cut else 5)
                if not reader.is_alive():  # else a straggler holds the pipe: closing would wait
                    with contextlib.suppress(OSError):
                        stream.close()
        if over.is_set():
            raise HitlError(
                f"{host.host}: its hitl printed more than this hitl reads for one command"
            )
        text = bytes(err).decode("utf-8", "replace")
        if proc.returncode == 255:
            raise Unreached(f"{host.host}: {ssh_reason(text)}")
        return Ran(proc.returncode, bytes(out), text)

    def _reply(self, host: Host, ran: Ran, what: str, ok: tuple[int, ...] = (0,)) -> Any:
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

    def _json(self, host: Host, ran: Ran, what: str) -> dict:
        """The far side's one JSON object, or HitlError mapping its exit code and line."""
        data = self._reply(host, ran, what)
        if not isinstance(data, dict):
            raise HitlError(f"{host.host}: its hitl printed no JSON object for {what}")
        if wire.too_new(data.get("protocol")):
            raise HitlError(version_message(host.host, data.get("protocol"), data.get("hitl")))
        return data

    def _host_of(self, block: Block) -> Host:
        host = self.hosts.get(str(block.meta.get("host", "")))
        if host is None:
            raise HitlError(f"{block.id}: its host is not in the config's [[remote]] any more")
        return host

    # -- answering ------------------------------------------------------------------------------

    def plan(self, block: Block, answer: Answer) -> Plan:
        """The far side's exact plan (`hitl answer --dry-run --json`), for the preview."""
        host = self._host_of(block)
        ran = self._run(host, [*answer_words(block, answer), "--dry-run", "--json"])
        data = self._json(host, ran, "the preview")
        diff = data.get("diff") if isinstance(data.get("diff"), str) else ""
        summary = data.get("summary") if isinstance(data.get("summary"), str) else "answered"
        hint = data.get("hint") if isinstance(data.get("hint"), str) else None
        editable = data.get("decision_text")
        with self._lock:
            self._editable[_answer_key(block, answer)] = (
                editable if isinstance(editable, str) else None
            )
            while len(self._editable) > EDITABLE_KEEP:  # the oldest previews go first
                del self._editable[next(iter(self._editable))]
        then = data.get("then_runs")
        what = f"written on {host.host} by its hitl (its own lock, journal and checks)"
        if isinstance(then, str):
            what += f"; then it runs: {then}"
        return Plan(
            block,
            answer,
            (),
            {},
            f"{host.host}: {summary}",
            hint,
            (RemoteAction("hitl-answer", one_line(what), diff=diff),),
        )

    def decision_text(self, block: Block, answer: Answer) -> str | None:
        return self._editable.get(_answer_key(block, answer))

    def send(self, plan: Plan) -> list[str]:
        """Write the answer there; what is known when the connection drops meanwhile."""
        host = self._host_of(plan.block)
        began = datetime.now(UTC)
        words = [*answer_words(plan.block, plan.answer), "--json"]
        try:
            ran = self._run(host, words, SEND_TIMEOUT, writes=True)
        except Unreached as exc:
            return self._settle(host, plan, began, str(exc))
        data = self._json(host, ran, "the answer")
        said = data.get("done") if isinstance(data.get("done"), list) else []
        done = [printable(one_line(d))[:300] for d in said[:100] if isinstance(d, str)]
        entry = data.get("entry") if isinstance(data.get("entry"), str) else None
        entry = entry if entry and len(entry) <= 200 else None
        return self._journal(host, plan, done, entry)

    def _journal(self, host: Host, plan: Plan, done: list[str], entry: str | None) -> list[str]:
        from hitl_tui import journal
        from hitl_tui.answers.apply import Done

        lines = Done(f"on {host.host}: {d}" for d in done)
        summary = f"written on {host.host}" + (f" (its journal: {entry})" if entry else "")
        try:
            lines.entry = journal.record_remote(
                plan, summary, None, {"host": host.host, "entry": entry}
            )
        except (OSError, HitlError) as exc:
            lines.append(f"(the journal here could not record it: {exc})")
        return lines

    def _looks(self, ask: Callable[[], Any]) -> Iterator[Any]:
        """What `ask()` says after each wait of `settle_waits`; a look that cannot tell (the
        host still away, that machine still writing, its hitl failing to answer) is skipped."""
        for wait in self.settle_waits:
            time.sleep(wait)
            try:
                yield ask()
            except HitlError:
                continue

    def _settle(self, host: Host, plan: Plan, began: datetime, why: str) -> list[str]:
        """The connection dropped while sending: ask that machine's journal, a few times."""
        fingerprint, repo = plan.block.fingerprint, _far_repo(plan.block)
        for found in self._looks(lambda: self._find_sent(host, repo, fingerprint, began)):
            if found is None:
                if self._may_write_yet(began):
                    continue
                raise HitlError(
                    f"{why} while sending; {host.host}'s journal has no such answer: nothing "
                    "was written there (answer again)"
                )
            return [
                *self._journal(host, plan, [f"written ({found})"], found),
                f"confirmed from {host.host}'s journal after the connection dropped",
            ]
        unknown = f"{why} while sending: whether the answer was written is not known yet"
        if not self.keeps_pending:  # the command line: nothing here asks again later
            raise HitlError(
                f"{unknown}; 'hitl history' on {host.host} says (an answer is never applied twice)"
            )
        from hitl_tui import journal

        fields = journal.remote_fields(plan)
        pending = Pending(
            secrets.token_hex(8), host.host, began, fingerprint, plan.block.id, repo, fields
        )
        self._keep(pending)
        raise HitlError(
            f"{unknown}; hitl asks {host.host}'s journal when it reconnects, after a restart "
            "too (it is never applied twice)"
        )

    # -- the answers not known yet, kept in the state folder ----------------------------------

    def _keep(self, pending: Pending) -> None:
        """Keep `pending`: in the state file first, then here (a look at that host meanwhile
        does not see it before the file holds it)."""
        stored = self._store(lambda items: [*items, pending.to_json()][-PENDING_MAX:])
        with self._lock:
            if stored is not None:
                self._stored.add(pending.id)
            self._pending.setdefault(pending.host, []).append(pending)

    def _claim(self, pending: Pending) -> bool:
        """Forget `pending` here and in the state file; False when another app (reading the
        same file) has told and forgotten it already: it is not told twice."""
        with self._lock:
            left = [p for p in self._pending.get(pending.host, []) if p is not pending]
            self._pending[pending.host] = left
            stored = pending.id in self._stored
            self._stored.discard(pending.id)
        before = self._store(lambda items: [i for i in items if _item_id(i) != pending.id])
        if before is None or not stored:
            return True  # the file cannot be used, or it never held this one
        return pending.id in before

    def _store(self, change: Callable[[list], list]) -> set | None:
        """Change the state file's list, under its lock; the ids it held before. None: there
        is no usable file (none can be written, or the one there was damaged: it is written
        anew), and what was in it is not known."""
        from hitl_tui.state import files as statefile

        path = statefile.in_state(PENDING_FILE)
        if path is None:
            return None
        try:
            with statefile.locked(path):
                try:
                    items = statefile.read(path, PENDING_FORMAT, PENDING_MAX_BYTES).get("pending")
                    held = {_item_id(i) for i in items} if isinstance(items, list) else set()
                except statefile.Unusable:
                    items, held = [], None
                kept = change(items if isinstance(items, list) else [])
                statefile.write(path, {"format": PENDING_FORMAT, "pending": kept})
        except OSError:
            return None
        return held

    def load_pending(self) -> None:
        """The answers a previous app left not known yet, for the configured hosts (the
        state file's others stay in it: another config may name their host)."""
        from hitl_tui.state import files as statefile

        path = statefile.in_state(PENDING_FILE)
        if path is None:
            return
        try:
            items = statefile.read(path, PENDING_FORMAT, PENDING_MAX_BYTES).get("pending")
        except statefile.Unusable:
            return
        now = datetime.now(UTC)
        with self._lock:
            known = {p.id for ps in self._pending.values() for p in ps}
        dropped = []
        for item in items if isinstance(items, list) else []:
            pending = Pending.from_json(item)
            if pending is None or pending.began > now + SKEW:  # damaged, or a clock ahead
                dropped.append(_item_id(item))
            elif pending.host in self.hosts and pending.id not in known:
                with self._lock:
                    self._pending.setdefault(pending.host, []).append(pending)
                    self._stored.add(pending.id)
                known.add(pending.id)
        if dropped:
            self._store(lambda items: [i for i in items if _item_id(i) not in dropped])

    def _may_write_yet(self, began: datetime) -> bool:
        return datetime.now(UTC) - began < timedelta(seconds=self.far_lifetime)

    def _find_sent(self, host: Host, repo: str, fingerprint: str, began: datetime) -> str | None:
        """The far side's journal entry of this answer, or None. Unreached: cannot tell (its
        entry there still in progress, or more answers there since than are looked through).
        Its journal is read a page at a time, newest first, back to the send."""
        size = 100
        for page in range(1, HISTORY_PAGES + 1):
            words = ["history", "--json", "-n", str(size), "--page", str(page)]
            items = self._reply(
                host, self._run(host, [*words, *([repo] if repo else [])]), "the journal"
            )
            items = items if isinstance(items, list) else []
            oldest = None
            for item in items:
                if not isinstance(item, dict):
                    continue
                when = _aware(item.get("time"))
                if when is not None:
                    oldest = when if oldest is None else min(oldest, when)
                if item.get("kind") != "answer" or when is None:
                    continue
                block = item.get("block") if isinstance(item.get("block"), dict) else {}
                if block.get("fingerprint") != fingerprint:
                    continue
                if when < began - SKEW or item.get("undone") is True:
                    continue  # before this send, or an earlier answer undone since (same bytes)
                if item.get("status") == "done":
                    return printable(one_line(str(item.get("id"))))[:200]
                if item.get("status") == "in progress":  # still writing there, or recovering
                    raise Unreached(f"{host.host}: the answer is still in progress there")
            if len(items) < size or (oldest is not None and oldest < began - SKEW):
                return None  # the whole journal there, or back to before the send
        raise Unreached(f"{host.host}: too many answers there since to look through")

    def settle_pending(self, host: Host) -> list[str]:
        """After a reconnect: what became of the answers whose connection dropped (one line
        each; a written one is journaled here then). One that cannot be told yet stays, for
        PENDING_KEEP at most."""
        with self._lock:
            pending = list(self._pending.get(host.host, []))
        said = []
        now = datetime.now(UTC)
        for one in pending:
            if now - one.began > PENDING_KEEP or one.began > now + SKEW:
                if self._claim(one):
                    said.append(
                        f"whether the answer to {one.block_id} was written is still not known; "
                        f"'hitl history' on {host.host} says"
                    )
                continue
            try:
                found = self._find_sent(host, one.repo, one.fingerprint, one.began)
                if found is None and self._may_write_yet(one.began):
                    raise Unreached("not yet")
            except HitlError:
                continue  # asked again at the next line from that host
            if not self._claim(one):
                continue
            if found is None:
                said.append(f"the answer to {one.block_id} was not written (answer again)")
                continue
            said.append(f"the answer to {one.block_id} was written ({found})")
            if self._journaled(host, found):  # answered again from here meanwhile
                continue
            sent = {"host": host.host, "entry": found}
            try:
                from hitl_tui import journal

                journal.record_prepared(one.fields, f"written on {host.host} ({found})", sent)
            except Exception as exc:  # told all the same, with what this journal missed
                said[-1] += f" (the journal here could not record it: {exc})"
        return said

    def _journaled(self, host: Host, far: str) -> bool:
        """Whether the journal here has an answer sent to `host` as its entry `far`."""
        from hitl_tui import journal

        with contextlib.suppress(OSError, HitlError):
            for entry in journal.history(limit=500):
                sent = entry.sent or {}
                if sent.get("host") == host.host and sent.get("entry") == far:
                    return True
        return False

    def undo_sent(self, entry: Any, operator: str, force: bool = False) -> str:
        sent = entry.sent or {}
        host = self.hosts.get(str(sent.get("host", "")))
        far = sent.get("entry")
        if host is None:
            raise UsageError(f"cannot undo {entry.id}: its host is not in [[remote]] any more")
        if not isinstance(far, str) or not far:
            raise UsageError(f"cannot undo {entry.id}: {host.host} gave no journal entry for it")
        began = datetime.now(UTC)
        try:
            words = ["undo", far, "--json", f"--operator={operator}"]
            if force:  # that machine's hitl refuses, as this one does, when its loop acted
                words.append("--force")
            ran = self._run(host, words, writes=True)
        except Unreached as exc:
            return self._undo_settled(host, entry, far, began, str(exc))
        if ran.code == 2:  # nothing to undo there: undone already (a retry after a drop)?
            with contextlib.suppress(HitlError):
                if self._far_undone(host, entry, far):
                    return f"on {host.host}: it was already undone there"
        data = self._json(host, ran, "the undo")
        message = data.get("message") if isinstance(data.get("message"), str) else "undone"
        if self._wake is not None and self._loop is not None:
            self.refresh_soon()
        return printable(one_line(f"on {host.host}: {message}"))[:500]

    def _undo_settled(self, host: Host, entry: Any, far: str, began: datetime, why: str) -> str:
        """The connection dropped while undoing: ask that machine's journal, a few times,
        whether the answer there is undone now (undoing again is always safe: an answer
        undone there is not undone twice)."""
        for undone in self._looks(lambda: self._far_undone(host, entry, far)):
            if undone:
                return (
                    f"on {host.host}: undone (confirmed from its journal after the connection "
                    "dropped)"
                )
            if not self._may_write_yet(began):
                raise HitlError(
                    f"cannot undo {entry.id}: {why}; {host.host}'s journal says {far} is not "
                    "undone: nothing was undone (undo again)"
                )
        raise HitlError(
            f"cannot undo {entry.id}: {why}; whether {far} was undone there is not known yet: "
            f"'hitl history' on {host.host} says (undoing again is safe)"
        )

    def _far_undone(self, host: Host, entry: Any, far: str) -> bool:
        """Whether the far journal's answer `far` is undone (Unreached: cannot tell yet, as
        when its undo is still in progress there, or the answer is not listed)."""
        repo = str(entry.repo).removeprefix(f"{host.host}:")
        words = ["history", "--json", "--all", "-n", "0"] + ([repo] if repo.startswith("/") else [])
        items = self._reply(host, self._run(host, words), "the journal")
        listed = False
        for item in items if isinstance(items, list) else []:
            if not isinstance(item, dict):
                continue
            if item.get("id") == far and item.get("kind") == "answer":
                if item.get("undone") is True:
                    return True
                listed = True
            elif item.get("undoes") == far and item.get("status") == "in progress":
                raise Unreached(f"{host.host}: the undo is still in progress there")
        if not listed:
            raise Unreached(f"{host.host}: its journal does not list {far}")
        return False

    # -- listing --------------------------------------------------------------------------------

    def _split(self, target: str) -> tuple[str, str] | None:
        """(host, id there) of `build-1:shop`: the longest configured host before a colon (a
        host may hold colons itself: `[::1]:shop`), or None."""
        for name in sorted(self.hosts, key=len, reverse=True):
            if target.startswith(name + ":") and len(target) > len(name) + 1:
                return name, target[len(name) + 1 :]
        return None

    def owns(self, target: str) -> bool:
        """`build-1:shop` (a configured host, then an id there), and no such file here."""
        return self._split(target) is not None and not os.path.exists(target)

    def read(self, target: str) -> Block:
        split = self._split(target)
        if split is None:
            raise UsageError(f"{target!r} names no host of [[remote]] (HOST:ID)")
        head, rest = split
        host = self.hosts[head]
        blocks = self._read_host(host)
        found = [b for b in blocks if b.meta["remote_id"] == rest] or [
            b for b in blocks if b.meta["remote_id"].endswith("/" + rest)
        ]
        if len(found) == 1:
            return found[0]
        if found:
            raise UsageError(f"{target!r} matches {len(found)} blocks on {head}; give more of it")
        raise UsageError(f"no open block {rest!r} on {head} (see 'hitl list')")

    def _read_host(self, host: Host, timeout: float = COMMAND_TIMEOUT) -> list[Block]:
        ran = self._run(
            host,
            ["list", "--json", "--all", "--local", *host.paths],
            timeout,
            limit=wire.MAX_LIST_LINE,
        )
        items = self._reply(host, ran, "the list")
        blocks = []
        for item in items if isinstance(items, list) else []:
            with contextlib.suppress(wire.WireError):
                blocks.append(wire.block_from_wire(item, host.host))
        return blocks

    def read_into(self, inbox: Any, warn: Callable[[str], None]) -> None:
        """`hitl list` and `hitl status`: every host at once, each given its
        `list_timeout_seconds`; one line for each that did not answer (its blocks not listed)."""

        def one(host: Host) -> None:
            try:
                blocks = self._read_host(host, host.list_timeout)
            except Unreached as exc:
                with self._lock:
                    self._silent.add(host.host)
                warn(f"{exc} (its blocks are not listed)")
                return
            except HitlError as exc:
                warn(f"{exc} (its blocks are not listed)")
                return
            inbox.replace_remote(self.name, host.host, blocks)

        with ThreadPoolExecutor(max_workers=max(1, len(self.hosts))) as pool:
            list(pool.map(one, self.hosts.values()))

    # -- watching (the app) ---------------------------------------------------------------------

    async def watch(self, inbox: Any, on_update: OnUpdate, stop: asyncio.Event) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self.keeps_pending = True
        await asyncio.to_thread(self.load_pending)
        tasks = [
            asyncio.ensure_future(self._follow(host, inbox, on_update, stop))
            for host in self.hosts.values()
        ]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            # Each host's ssh is ended, its pipes closed, before this returns (cancelled too).
            await _uncancelled(asyncio.gather(*tasks, return_exceptions=True))
            self.stop_reading()

    def stop_reading(self) -> None:
        """End the commands still running that only read (an answer or an undo being sent is
        left to finish: a write is never cut short)."""
        with self._lock:
            running = list(self._reading)
        for proc in running:
            _kill_group(proc)

    def refresh_soon(self) -> None:
        """Reconnect a host that waits to be retried, now (thread-safe)."""
        if self._loop is not None and self._wake is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._wake.set)

    async def _follow(self, host: Host, inbox: Any, on_update: OnUpdate, stop) -> None:
        tries = 0
        while not stop.is_set():
            began = time.monotonic()
            try:
                state, message, retry = await Session(self, host, inbox, on_update, stop).run()
            except Exception as exc:  # a bug this far side trips: its error, not every host's
                kind = type(exc).__name__
                state, message, retry = (
                    "error",
                    f"this hitl could not read what its hitl sent ({kind})",
                    None,
                )
            if stop.is_set():
                return
            tries = 1 if time.monotonic() - began > STEADY else tries + 1
            delay = retry or BACKOFF[min(tries, len(BACKOFF)) - 1]
            await on_update(host.host, state, f"{message}, retrying in {delay} s", None)
            assert self._wake is not None
            self._wake.clear()
            waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._wake.wait())]
            try:
                await asyncio.wait(waiters, timeout=delay, return_when="FIRST_COMPLETED")
            finally:
                for waiter in waiters:
                    waiter.cancel()

    # -- did the loop resume? (that machine's `hitl status` says) -----------------------------

    def resume_signs(self, block: Block, plan: Plan) -> dict:
        return {"host": block.meta.get("host"), "repo": block.meta.get("remote_repo")}

    def resumed(self, waiting: Any) -> str | None:
        host = self.hosts.get(str(waiting.signs.get("host", "")))
        repo = waiting.signs.get("repo")
        far = _far_entry(waiting)
        if host is None or not isinstance(repo, str) or far is None:
            return None
        if host.host in self._silent:  # it did not answer this command: asked next time
            return None
        try:  # exit 4 / 5: something did not resume there, or its restart failed (not this one)
            ran = self._run(host, ["status", "--json", "--local", repo], host.list_timeout)
            data = self._reply(host, ran, "the status", ok=(0, 4, 5))
        except Unreached:
            if not self.keeps_pending:  # the command line: the next answer would wait again
                with self._lock:
                    self._silent.add(host.host)
            return None
        except HitlError:
            return None
        rows = data.get("repos") if isinstance(data, dict) else None
        for row in rows if isinstance(rows, list) else []:
            answers = row.get("resumed") if isinstance(row, dict) else None
            for answer in answers if isinstance(answers, list) else []:
                if isinstance(answer, dict) and answer.get("entry") == far:
                    how = answer.get("how") if isinstance(answer.get("how"), str) else "it acted"
                    return printable(one_line(f"{how} (on {host.host})"))[:200]
        return None


def _far_entry(waiting: Any) -> str | None:
    """The far side's journal id of the answer `waiting` watches (from our journal entry)."""
    if not waiting.entry:
        return None
    from hitl_tui.journal.entries import entries

    try:
        entry = entries()[waiting.entry]
    except (KeyError, HitlError, OSError):
        return None
    far = (entry.sent or {}).get("entry")
    return far if isinstance(far, str) else None


def _answer_key(block: Block, answer: Answer) -> tuple:
    return (
        block.id,
        block.fingerprint,
        answer.choice.key if answer.choice else None,
        answer.texts,
        answer.note,
        answer.decision_override,
    )


def answer_words(block: Block, answer: Answer) -> list[str]:
    """`hitl answer` there: the block's file, the answer, and the bytes it must still have.
    Each value rides in its option's word (`--note=-x`): a value that starts with a dash is
    still a value to the far side's argparse."""
    words = ["answer", str(block.meta["remote_path"])]
    if answer.choice is not None:
        words.append(f"--choice={answer.choice.key}")
    words += [f"--text={text}" for text in answer.texts]
    if answer.note:
        words.append(f"--note={answer.note}")
    if answer.decision_override is not None:
        words.append(f"--decision={answer.decision_override}")
    if answer.operator:
        words.append(f"--operator={answer.operator}")
    return [*words, f"--expect={block.fingerprint}"]


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


class Session:
    """One `hitl list --json --watch` over ssh, from connect to drop: feeds `inbox` and
    returns (state, why it ended, seconds to wait or None for the backoff)."""

    def __init__(self, backend: SshBackend, host: Host, inbox: Any, on_update, stop) -> None:
        self.backend, self.host, self.inbox, self.on_update, self.stop = (
            backend,
            host,
            inbox,
            on_update,
            stop,
        )
        self.blocks: dict[tuple, Block] = {}
        self.weights: dict[tuple, int] = {}
        self.total = 0  # the sum of `weights`
        self.listed = False
        self.skipped = 0
        self.over = 0  # blocks not listed: over MAX_BLOCKS or MAX_HOST_TEXT
        self.warnings: list[str] = []  # the far side's (its `list` and `warnings` lines)
        self.err = bytearray()
        self._settling: asyncio.Future | None = None  # the look at dropped answers, if any
        #: The lines of the last second (time, count), for the flood's rate.
        self._recent: collections.deque[tuple[float, int]] = collections.deque()
        self._lines_in_second = 0
        self.flooding = False
        self._flood_began = 0.0
        self._calm_since: float | None = None
        #: Changes read but not applied yet (flooding), and the task that applies them.
        self._dirty = False
        self._ticker: asyncio.Task | None = None
        self.applies = 0  # how many times the inbox was given this host's blocks
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
                self._settling.cancel()  # its thread ends on its own (see _off_loop)
            task = asyncio.current_task()
            quitting = self.stop.is_set() or (task is not None and task.cancelling() > 0)
            await _uncancelled(_close(proc, errors, quick=quitting))
        if ended is not None:
            return ended
        return await self._why(proc)

    async def _drain(self, stream) -> None:
        while chunk := await stream.read(4096):
            self.err += chunk
            del self.err[:-STDERR_KEEP]

    async def _read(self, proc) -> tuple[str, str, int | None] | None:
        """Read lines until EOF (None: ask the exit code why) or a reason to stop."""
        buffer = bytearray()
        patience = FIRST_LINE
        #: The list must have come by then, whatever else the far side says meanwhile; while
        #: its own line keeps coming (a long list, a slow link), ten times that at most.
        began = time.monotonic()
        list_by = began + FIRST_LINE
        waiter_stop = asyncio.ensure_future(self.stop.wait())
        try:
            while True:
                read = asyncio.ensure_future(proc.stdout.read(1 << 16))
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

    async def _lines(self, lines: list[bytes]) -> tuple[str, str, int | None] | None:
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
                    touched = True
        looking = self._settling is not None and not self._settling.done()  # one at a time
        if self.listed and self.backend._pending.get(self.host.host) and not looking:
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
            delta = self.inbox.replace_remote(
                self.backend.name, self.host.host, list(self.blocks.values())
            )
        self._said = (self._condition(), self._state())
        await self.on_update(self.host.host, *self._said, delta)

    async def _settle(self) -> None:
        """Ask that machine what became of the answers whose connection dropped, beside the
        watch (a slow journal there holds neither the list nor quitting), and say it."""
        try:
            said = await _off_loop(self.backend.settle_pending, self.host)
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

    async def _why(self, proc) -> tuple[str, str, int | None]:
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


def _kill_group(proc) -> None:
    """End ssh and what it started (its own process group: `start_new_session`)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _item_id(item: object) -> object:
    return item.get("id") if isinstance(item, dict) else None


def _aware(value: object) -> datetime | None:
    """An ISO time with its zone (one without is taken as UTC), or None."""
    try:
        when = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _far_repo(block: Block) -> str:
    """The repository of a remote block on its machine (its journal is asked of it)."""
    repo = block.meta.get("remote_repo")
    return repo if isinstance(repo, str) else ""


async def _uncancelled(awaitable) -> Any:
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


async def _off_loop(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` in a daemon thread: unlike `asyncio.to_thread`'s executor, nothing waits
    for it at the event loop's end (a journal look there may take a minute; quitting must
    not). Cancelled, the thread finishes on its own and its result is dropped."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def run() -> None:
        result, error = None, None
        try:
            result = fn(*args)
        except BaseException as exc:
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop has closed meanwhile
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, name="hitl-remote", daemon=True).start()
    return await future


async def _close(proc, errors: asyncio.Future, quick: bool = False) -> None:
    """End the watch's ssh, then read its stderr to the end (ssh is gone, so that comes at
    once): a cancelled reader would leave a full pipe paused, open for the garbage collector.
    `quick` (the app quits): about a second at most, a far side ignoring EOF and SIGTERM too."""
    await _end(proc, quick)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(errors, 0.5 if quick else 2)


async def _end(proc, quick: bool = False) -> None:
    """Close the far side's stdin (it stops), then make sure ssh is gone; what it still prints
    is read and dropped meanwhile (a far side blocked on a full pipe can finish, and the pipe
    is closed, not left for the garbage collector)."""
    with contextlib.suppress(Exception):
        proc.stdin.close()
    rest = asyncio.ensure_future(_discard(proc.stdout))
    try:
        await _gone(proc, quick)
    finally:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(rest, 0.5 if quick else 2)


async def _discard(stream) -> None:
    with contextlib.suppress(Exception):
        while await stream.read(1 << 16):
            pass


async def _gone(proc, quick: bool = False) -> None:
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
