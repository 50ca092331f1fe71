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

This module is the backend the registry builds (`SshBackend`): answering, undoing and reading
there, and what became of an answer whose connection dropped (that machine's journal says).
The rest is in `config` (the table), `transport` (running ssh), `session` (the app's watch of
one host), `pending` (the answers not known yet) and `wire` (the protocol's lines). It records
answers in the journal here through the `RemoteJournal` it is handed (`use_journal`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from hitl_tui.answers.locks import LOCK_TIMEOUT
from hitl_tui.model import Answer, Block, Done, HitlError, Plan, RemoteAction, UsageError
from hitl_tui.sources.base import AnswerWaiting, OnUpdate, RemoteInbox, SentEntry, Source
from hitl_tui.sources.remote import RemoteJournal
from hitl_tui.sources.ssh import wire
from hitl_tui.sources.ssh.config import LIST_TIMEOUT, Host, parse_config
from hitl_tui.sources.ssh.pending import (
    PENDING_FILE,
    PENDING_FORMAT,
    PENDING_KEEP,
    SKEW,
    Pending,
    PendingStore,
)
from hitl_tui.sources.ssh.session import Session
from hitl_tui.sources.ssh.transport import (
    COMMAND_TIMEOUT,
    Ran,
    Running,
    Unreached,
    control_dir,
    far_command,
    far_error,
    json_object,
    reply,
    run,
    shell_word,
    ssh_argv,
    ssh_reason,
    uncancelled,
)
from hitl_tui.textio import one_line, printable

if TYPE_CHECKING:
    from hitl_tui.sources.remote import RemoteBackend

#: The names this module gave before it was split, which callers and tests import from it.
__all__ = [
    "LIST_TIMEOUT",
    "PENDING_FILE",
    "PENDING_FORMAT",
    "Host",
    "Pending",
    "Ran",
    "Session",
    "SshBackend",
    "answer_words",
    "control_dir",
    "far_error",
    "parse_config",
    "shell_word",
    "ssh_reason",
]

#: Seconds to wait between two tries to reach a host, growing (the last one repeats).
BACKOFF = (2, 4, 8, 15, 30, 60)
#: A session that stayed up this long starts its backoff from the beginning when it drops.
STEADY = 60.0
#: An answer may wait for the far side's lock behind a loop's write.
SEND_TIMEOUT = 120.0
#: The previews whose editable decision is kept (the last ones: one is confirmed soon after).
EDITABLE_KEEP = 256
T = TypeVar("T")

#: Pages of 100 of that machine's journal read back to find one (answers since the send).
HISTORY_PAGES = 20


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

    def __init__(self, hosts: Sequence[Host], journal: RemoteJournal | None = None) -> None:
        self.hosts = {h.host: h for h in hosts}
        #: Where answers sent are recorded here (None: built without one, as a test may).
        self._journaled_in = journal
        self._control = control_dir()
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        #: The last preview's plan per block and answer: what the preview may edit.
        self._editable: dict[tuple[object, ...], str | None] = {}
        #: Answers whose connection dropped before the far side said, by host.
        self._pendings = PendingStore()
        #: Whether they are kept in the state folder (the app: it asks again at each line from
        #: that host, also after a restart); the command line says where to look instead.
        self.keeps_pending = False
        #: The commands running that only read (a preview, a journal look): ended as the
        #: app's watch ends (`stop_reading`), so quitting never waits for a hung host.
        self._reading = Running()
        self._lock = threading.Lock()
        #: Hosts that did not answer `hitl list` or `hitl status` in time (the command line):
        #: not asked again in the same command (each waiting answer would wait again).
        self._silent: set[str] = set()

    def use_journal(self, journal: RemoteJournal) -> None:
        """Record answers in `journal` (the registry hands it over as it builds this)."""
        self._journaled_in = journal

    def _journal_here(self) -> RemoteJournal:
        if self._journaled_in is None:
            raise HitlError("this backend was given no journal to record answers in")
        return self._journaled_in

    @property
    def _pending(self) -> dict[str, list[Pending]]:
        """The answers not known yet, by host (`pending.PendingStore`)."""
        return self._pendings.by_host

    def has_pending(self, host: Host) -> bool:
        return bool(self._pendings.by_host.get(host.host))

    def __repr__(self) -> str:
        return f"SshBackend({list(self.hosts)!r})"

    @classmethod
    def from_config(cls, tables: list[Any]) -> SshBackend:
        return cls(parse_config(tables))

    # -- running hitl there ---------------------------------------------------------------

    def argv(self, host: Host, words: Sequence[str]) -> list[str]:
        """The local ssh command that runs hitl with `words` on `host`."""
        return ssh_argv(host, words, self._control, self.alive_every)

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
        """Run hitl `words` on `host` and wait (`transport.run`). One that only reads (not
        `writes`) is ended when the app's watch ends."""
        return run(host, self.argv(host, words), timeout, limit, None if writes else self._reading)

    def _reply(self, host: Host, ran: Ran, what: str, ok: tuple[int, ...] = (0,)) -> object:
        return reply(host, ran, what, ok)

    def _json(self, host: Host, ran: Ran, what: str) -> dict[str, Any]:
        return json_object(host, ran, what)

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
        diff = data.get("diff")
        diff = diff if isinstance(diff, str) else ""
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

    def send(self, plan: Plan) -> Done:
        """Write the answer there; what is known when the connection drops meanwhile."""
        host = self._host_of(plan.block)
        began = datetime.now(UTC)
        words = [*answer_words(plan.block, plan.answer), "--json"]
        try:
            ran = self._run(host, words, SEND_TIMEOUT, writes=True)
        except Unreached as exc:
            return self._settle(host, plan, began, str(exc))
        data = self._json(host, ran, "the answer")
        said = data.get("done")
        said = said if isinstance(said, list) else []
        done = [printable(one_line(d))[:300] for d in said[:100] if isinstance(d, str)]
        entry = data.get("entry") if isinstance(data.get("entry"), str) else None
        entry = entry if entry and len(entry) <= 200 else None
        return self._journal(host, plan, done, entry)

    def _journal(self, host: Host, plan: Plan, done: list[str], entry: str | None) -> Done:
        """What was written there, journaled here (the entry answering notes for resume
        tracking)."""
        lines = [f"on {host.host}: {d}" for d in done]
        summary = f"written on {host.host}" + (f" (its journal: {entry})" if entry else "")
        here: str | None = None
        try:
            here = self._journal_here().record_remote(
                plan, summary, None, {"host": host.host, "entry": entry}
            )
        except (OSError, HitlError) as exc:
            lines.append(f"(the journal here could not record it: {exc})")
        return Done(tuple(lines), here)

    def _looks(self, ask: Callable[[], T]) -> Iterator[T]:
        """What `ask()` says after each wait of `settle_waits`; a look that cannot tell (the
        host still away, that machine still writing, its hitl failing to answer) is skipped."""
        for wait in self.settle_waits:
            time.sleep(wait)
            try:
                yield ask()
            except HitlError:
                continue

    def _settle(self, host: Host, plan: Plan, began: datetime, why: str) -> Done:
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
            done = self._journal(host, plan, [f"written ({found})"], found)
            confirmed = f"confirmed from {host.host}'s journal after the connection dropped"
            return Done((*done.lines, confirmed), done.entry)
        unknown = f"{why} while sending: whether the answer was written is not known yet"
        if not self.keeps_pending:  # the command line: nothing here asks again later
            raise HitlError(
                f"{unknown}; 'hitl history' on {host.host} says (an answer is never applied twice)"
            )
        fields = self._journal_here().remote_fields(plan)
        pending = Pending(
            secrets.token_hex(8), host.host, began, fingerprint, plan.block.id, repo, fields
        )
        self._keep(pending)
        raise HitlError(
            f"{unknown}; hitl asks {host.host}'s journal when it reconnects, after a restart "
            "too (it is never applied twice)"
        )

    # -- the answers not known yet, kept in the state folder (`pending`) ------------------------

    def _keep(self, pending: Pending) -> None:
        self._pendings.keep(pending)

    def _claim(self, pending: Pending) -> bool:
        return self._pendings.claim(pending)

    def load_pending(self) -> None:
        """The answers a previous app left not known yet, for the configured hosts (the
        state file's others stay in it: another config may name their host)."""
        if self._journaled_in is not None:  # else none could be journaled: the file is left as is
            self._pendings.load(self.hosts, self._journaled_in.checked_fields)

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
                block = item.get("block")
                block = block if isinstance(block, dict) else {}
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
        pending = self._pendings.of(host.host)
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
                self._journal_here().record_prepared(
                    one.fields, f"written on {host.host} ({found})", sent
                )
            except Exception as exc:  # told all the same, with what this journal missed
                said[-1] += f" (the journal here could not record it: {exc})"
        return said

    def _journaled(self, host: Host, far: str) -> bool:
        """Whether the journal here has an answer sent to `host` as its entry `far`."""
        with contextlib.suppress(OSError, HitlError):
            for entry in self._journal_here().history(limit=500):
                sent = entry.sent or {}
                if sent.get("host") == host.host and sent.get("entry") == far:
                    return True
        return False

    def undo_sent(self, entry: SentEntry, operator: str, force: bool = False) -> str:
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

    def _undo_settled(
        self, host: Host, entry: SentEntry, far: str, began: datetime, why: str
    ) -> str:
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

    def _far_undone(self, host: Host, entry: SentEntry, far: str) -> bool:
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

    # -- grants (hitl mcp's "Allow always" answers) there --------------------------------------

    def grants(self, host: Host) -> list[dict[str, Any]]:
        """The grants of the host's paths, as `hitl grants --json PATHS` there lists them (each
        an object; what is not one is left out)."""
        ran = self._run(host, ["grants", "--json", *host.paths])
        items = self._reply(host, ran, "the grants")
        if not isinstance(items, list):
            raise HitlError(f"{host.host}: its hitl printed no list of grants")
        return [item for item in items if isinstance(item, dict)]

    def revoke_grant(self, host: Host, grant: str, repo: str, operator: str) -> dict[str, Any]:
        """Revoke `grant` of the repository `repo` there (`hitl grants --revoke`): journaled
        there, so `hitl undo` there puts it back. Its reply: {"revoked", "repo", "entry",
        "done"}."""
        words = ["grants", "--revoke", grant, "--json", f"--operator={operator}", repo]
        ran = self._run(host, words, writes=True)
        data = self._reply(host, ran, "the revoke")  # `hitl grants` says no protocol
        if not isinstance(data, dict):
            raise HitlError(f"{host.host}: its hitl printed no JSON object for the revoke")
        return data

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

    def read_into(self, inbox: RemoteInbox, warn: Callable[[str], None]) -> None:
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

    async def watch(self, inbox: RemoteInbox, on_update: OnUpdate, stop: asyncio.Event) -> None:
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
            await uncancelled(asyncio.gather(*tasks, return_exceptions=True))
            self.stop_reading()

    def stop_reading(self) -> None:
        """End the commands still running that only read (an answer or an undo being sent is
        left to finish: a write is never cut short)."""
        self._reading.kill_all()

    def refresh_soon(self) -> None:
        """Reconnect a host that waits to be retried, now (thread-safe)."""
        if self._loop is not None and self._wake is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._wake.set)

    async def _follow(
        self, host: Host, inbox: RemoteInbox, on_update: OnUpdate, stop: asyncio.Event
    ) -> None:
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

    def resume_signs(self, block: Block, plan: Plan) -> dict[str, Any]:
        return {"host": block.meta.get("host"), "repo": block.meta.get("remote_repo")}

    def resumed(self, waiting: AnswerWaiting) -> str | None:
        host = self.hosts.get(str(waiting.signs.get("host", "")))
        repo = waiting.signs.get("repo")
        far = self._far_entry(waiting)
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

    def _far_entry(self, waiting: AnswerWaiting) -> str | None:
        """The far side's journal id of the answer `waiting` watches (from our journal entry)."""
        if not waiting.entry:
            return None
        try:
            entry = self._journal_here().entry(waiting.entry)
        except (KeyError, HitlError, OSError):
            return None
        far = (entry.sent or {}).get("entry")
        return far if isinstance(far, str) else None


def _answer_key(block: Block, answer: Answer) -> tuple[object, ...]:
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


def _far_repo(block: Block) -> str:
    """The repository of a remote block on its machine (its journal is asked of it)."""
    repo = block.meta.get("remote_repo")
    return repo if isinstance(repo, str) else ""


def _aware(value: object) -> datetime | None:
    """An ISO time with its zone (one without is taken as UTC), or None."""
    try:
        when = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


if TYPE_CHECKING:  # the backend is what answering, the app and undo call a remote one
    _typed: type[RemoteBackend] = SshBackend
