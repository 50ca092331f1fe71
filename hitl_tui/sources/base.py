"""The one interface every backend implements: a local file format or a remote tracker.

A backend declares what it can do (class attributes, with defaults here) and overrides only
the methods it needs; the inbox, answering, the journal, the CLI and the app ask it, and never
test its name or the shape of its paths.

- A **local file format** (loopkit's BLOCKED.md, agenticloop task files) says where its blocks
  live in a repository (`watch_dirs`, `block_files`, `claims`, `layout_changed`), parses one
  file (`parse`), and plans an answer as the exact new bytes of files (`plan`), which
  `apply.apply_plan` writes and the journal can undo. It is one module plus one line in
  `hitl_tui.sources.registry`.
- A **remote backend** (GitHub issues; another machine later) reads a config table
  (`config_key`, validated once at load by `from_config`), lists its blocks by polling
  (`read_into` for a command, `watch` for the app), reads one block a command names
  (`owns`, `read`), plans an answer as requests (`plan`) and sends them (`send`). It is one
  module plus one line in `hitl_tui.sources.registry`: nothing else names it.

`LocalFormat` (below) is the local role as a Protocol: what the inbox, the parse cache and the
watcher may ask a file format. The things a backend is handed from the layers above it (an
answer waiting for its loop, a journal entry, the inbox) are Protocols here too, naming only
what a backend reads of them, so that no source imports a layer above it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from hitl_tui.model import Answer, Block, Done, HitlError, Plan, UsageError

if TYPE_CHECKING:
    import asyncio

#: What a remote backend reports after reading one of its scopes (see `Source.watch`):
#: (scope, state, one-line message, the inbox Delta or None when the scope was not read).
#: `state` is "ok", "warning" (read, but the message says what the operator should know: the
#: far side could not read a repo, say), or why not ("rate-limited", "unreachable",
#: "unauthorised", "error").
OnUpdate = Callable[[str, str, str, Any], Awaitable[None]]


class RecordSent(Protocol):
    """Journals an answer already sent to a remote backend (`journal.record_remote`, given to
    the backends by the config that builds them: the journal sits above the sources): `summary`
    says what was sent, `not_undoable` why it cannot be undone (None: it can), `sent` what its
    backend needs to find it there again. Returns the entry's id; raises OSError or HitlError
    when the journal cannot take it."""

    def __call__(
        self,
        plan: Plan,
        summary: str,
        not_undoable: str | None,
        sent: dict[str, Any] | None = None,
    ) -> str: ...


class AnswerWaiting(Protocol):
    """An answer waiting for its loop to act (`loops.resume.Waiting`), as a backend reads it
    (`Source.resumed`, `resume_dirs`)."""

    @property
    def repo(self) -> str:
        """The answered block's repository (a remote block's name), as text."""
        ...

    @property
    def path(self) -> str:
        """The answered block's file (a remote block's URL), as text."""
        ...

    @property
    def entry(self) -> str | None:
        """The answer's journal entry id (None: the journal gave none)."""
        ...

    @property
    def signs(self) -> dict[str, Any]:
        """The backend's baseline taken after the answer (`Source.resume_signs`)."""
        ...


class SentEntry(Protocol):
    """A journaled answer sent to a remote backend (`journal.Entry`), as its backend reads it
    to undo it there (`Source.undo_sent`)."""

    @property
    def id(self) -> str:
        """The journal entry's id."""
        ...

    @property
    def repo(self) -> Path:
        """The block's repository as journaled (a remote block's name)."""
        ...

    @property
    def sent(self) -> dict[str, Any] | None:
        """What the backend recorded to find the answer where it was sent."""
        ...


class RemoteInbox(Protocol):
    """What a remote backend does to the inbox (`inbox.Inbox`): swap in one scope's blocks.
    The result (the inbox's Delta) is handed on, unread, to `OnUpdate`."""

    def replace_remote(self, source: str, scope: str, blocks: list[Block]) -> object: ...


class LocalFormat(Protocol):
    """The local file format's role (loopkit's BLOCKED.md, agenticloop's task files): where its
    blocks live in a repository, one file parsed to a Block, an answer planned as the exact new
    bytes of files, and whether the loop resumed. `Source` gives every one a default; a format
    overrides what it needs (see `Source` for each method's contract)."""

    name: ClassVar[str]

    def watch_dirs(self, repo: Path) -> list[Path]: ...
    def block_files(self, repo: Path) -> list[Path]: ...
    def layout_files(self, repo: Path) -> list[Path]: ...
    def claims(self, repo: Path, path: Path) -> bool: ...
    def layout_changed(self, repo: Path, path: Path) -> bool: ...
    def parse(self, repo: Path, path: Path, label: str) -> Block | None: ...
    def cacheable(self, repo: Path, path: Path) -> bool: ...
    def warnings(self, repo: Path) -> list[str]: ...
    def began(self, block: Block, first_seen: datetime) -> datetime: ...
    def plan(self, block: Block, answer: Answer) -> Plan: ...
    def decision_text(self, block: Block, answer: Answer) -> str | None: ...
    def plan_note(self, block: Block, note: str, operator: str, when: datetime) -> Plan: ...
    def as_planned_from(self, block: Block) -> Block: ...
    def resume_signs(self, block: Block, plan: Plan) -> dict[str, Any]: ...
    def resumed(self, waiting: AnswerWaiting) -> str | None: ...
    def resume_dirs(self, waiting: AnswerWaiting) -> list[Path]: ...
    def loop_acts_on(self, block_id: str) -> bool: ...


def keep_answer(block: Block, note: str, operator: str, when: datetime) -> Answer:
    """The answer that picks `block`'s "keep blocked, add a note" choice (kind `keep`) with
    `note` as its words: how a backend that lists such a choice (agenticloop, GitHub) plans
    `Source.plan_note`. UsageError when the block lists none."""
    keep = next((c for c in block.choices if c.kind == "keep"), None)
    if keep is None:
        raise UsageError(f"{block.id}: this block lists no 'keep blocked, add a note' choice")
    return Answer(choice=keep, texts=(note,), operator=operator, when=when)


class Source:
    """A backend. Every ability has a default here: a subclass declares only what differs."""

    #: The name blocks carry (`Block.source`, `list --json`'s `source`).
    name: ClassVar[str] = ""
    #: What the app's header calls its scopes' states ("GitHub 1/1 ok"); remote backends.
    title: ClassVar[str] = ""
    #: The config file's table this backend reads (`[[github]]`), or None: it needs none.
    config_key: ClassVar[str | None] = None
    #: Its blocks live elsewhere: an answer is sent (`send`), never written to local files, and
    #: a block's `repo` and `path` are names and URLs, not folders and files.
    remote: ClassVar[bool] = False
    #: How a block of this backend declares its category, when its blocks carry none unless
    #: they do (loopkit's BLOCKED.md): the filter's note on a `cat:` that matches nothing says
    #: it. None: its blocks carry theirs, or none that the agent could declare.
    category_hint: ClassVar[str | None] = None
    #: An answer can be undone byte for byte (`hitl undo`); see `why_not_undoable`.
    undoable: ClassVar[bool] = True
    #: Where a remote backend journals what it sent (`RecordSent`); set by `registry.
    #: remote_sources` from what the config gives it. None: what is sent is not journaled.
    record_sent: RecordSent | None = None

    # -- configuration ---------------------------------------------------------------------

    @classmethod
    def from_config(cls, tables: list[Any]) -> Source:
        """The backend for its config tables, validated; UsageError (one line) when invalid.
        Called once, by `config.load_config`, which names the file in the error."""
        return cls()

    # -- where blocks live (local file formats) ------------------------------------------------

    def watch_dirs(self, repo: Path) -> list[Path]:
        """Folders whose direct entries can hold or locate this source's blocks."""
        return []

    def block_files(self, repo: Path) -> list[Path]:
        """Every file in `repo` that may hold a block now (parsed on a full scan)."""
        return []

    def layout_files(self, repo: Path) -> list[Path]:
        """Files whose change (even in place) can move where this source's blocks live: the
        watcher's catch-up stats them (`Inbox.catch_up`)."""
        return []

    def claims(self, repo: Path, path: Path) -> bool:
        """Whether a change to `path` may add, change or remove one of this source's blocks."""
        return False

    def layout_changed(self, repo: Path, path: Path) -> bool:
        """Whether a change to `path` moves where this source's blocks live (rescan the repo)."""
        return False

    def parse(self, repo: Path, path: Path, label: str) -> Block | None:
        """The block in `path`, or None when the file is gone or holds no open block."""
        return None

    def cacheable(self, repo: Path, path: Path) -> bool:
        """True when `parse` depends on nothing but the file's bytes, its stat and the label
        (and finds no block where there is no file), so that `parsecache` may reuse an earlier
        result while the file's stat is unchanged. False: parsed afresh every time."""
        return False

    def warnings(self, repo: Path) -> list[str]:
        """What this source could not read in the repository's configuration (never blocks)."""
        return []

    # -- when a block began (`Inbox`: its `since`, the list's age and order) -----------------

    def began(self, block: Block, first_seen: datetime) -> datetime:
        """When `block` began, given when hitl first saw it. Default: then (a BLOCKED.md says
        no date of its own)."""
        return first_seen

    # -- answering -----------------------------------------------------------------------------

    def plan(self, block: Block, answer: Answer) -> Plan:
        """The exact changes that answer `block`; raises HitlError when it cannot."""
        raise HitlError(f"{block.id}: {self.name} blocks cannot be answered")

    def plan_note(self, block: Block, note: str, operator: str, when: datetime) -> Plan:
        """The exact changes that add the operator's `note` to `block` while it stays open
        ("Reply and keep blocked", `w`): written where the loop and the next operator read it,
        nothing else changed, no restart. Raises HitlError when this backend has no such
        place (the default)."""
        raise UsageError(
            f"{block.id}: {self.title or self.name} blocks take no note that keeps them open; "
            "answer the block instead"
        )

    def decision_text(self, block: Block, answer: Answer) -> str | None:
        """The text the answer writes, which the operator may edit in the preview (passed back
        as `Answer.decision_override`); None: nothing to edit."""
        return None

    def as_planned_from(self, block: Block) -> Block:
        """`block` as the planner must see it: parsed again from its file when the file still
        holds the same bytes (a Block out of the parse cache or a long-open app never decides
        what is written). If it changed, `block` as it is: the planner's fingerprint check
        refuses it. A remote backend re-reads when it sends, so it returns `block`."""
        if self.remote:
            return block
        try:
            fresh = self.parse(Path(block.repo), Path(block.path), block.id)
        except HitlError:
            return block
        if fresh is None or fresh.fingerprint != block.fingerprint:
            return block
        # When it began is the inbox's (first seen: the since book), not the file's time: an
        # undo rewrites the file, an agent may touch it. The journal records it with the answer.
        return replace(fresh, id=block.id, since=block.since)

    def send(self, plan: Plan) -> Done:
        """Carry out a remote plan (blocking: call it off the UI thread): one line per thing
        done, and the journal entry here when the backend journals it itself. Local formats
        never send: `apply.apply_plan` writes their plans."""
        raise HitlError(f"{plan.block.id}: {self.name} answers are written, not sent")

    def why_not_undoable(self, block: Block) -> str:
        """Why an answer to `block` cannot be undone, completing `<journal id> ...`; the journal
        records it with the answer (`undoable` False)."""
        return f"answered {block.id}: hitl cannot undo an answer sent to {self.title or self.name}"

    # -- did the loop resume? (`resume.ResumeBook`) ---------------------------------------

    def resume_signs(self, block: Block, plan: Plan) -> dict[str, Any]:
        """The baseline taken right after the answer `plan` was written to `block` (JSON-able),
        against which `resumed` later tells whether the loop acted. Default: none."""
        return {}

    def resumed(self, waiting: AnswerWaiting) -> str | None:
        """What shows the loop acted on the answer `waiting` (a `resume.Waiting`) since it was
        written, in one line ("new commit 1a2b3c4"); None: nothing yet. Default: never (the
        record waits until its deadline)."""
        return None

    def resume_dirs(self, waiting: AnswerWaiting) -> list[Path]:
        """Folders whose file events may show that the loop acted on `waiting` (watched,
        non-recursively, only while the record is open). Default: none."""
        return []

    def loop_acts_on(self, block_id: str) -> bool:
        """Whether a loop acts on what was journaled for `block_id`, so that a commit after it
        makes `hitl undo` refuse. Default: yes (every answer); no for a change only the
        operator's side reads (a revoked grant, `sources.asks`)."""
        return True

    # -- remote backends -----------------------------------------------------------------------

    def owns(self, target: str) -> bool:
        """Whether `hitl answer TARGET` names one of this backend's blocks (`owner/name#12`)."""
        return False

    def read(self, target: str) -> Block:
        """The block `target` names, read now (for `hitl answer`); HitlError when it cannot."""
        raise HitlError(f"{target}: not a {self.name} block")

    def read_into(self, inbox: RemoteInbox, warn: Callable[[str], None]) -> None:
        """Read every scope once into `inbox` (`hitl list`); `warn` one line per scope that
        could not be read (its blocks are not listed)."""

    async def watch(self, inbox: RemoteInbox, on_update: OnUpdate, stop: asyncio.Event) -> None:
        """Poll until `stop` (an asyncio.Event) is set, swapping each scope's blocks into
        `inbox` and awaiting `on_update` after each (the app runs this in a worker)."""

    def shell_argv(self, block: Block) -> list[str] | None:
        """A command that opens an interactive shell where `block` lives when that is not a
        folder here (`t` in the app: another machine's repository); None: no such place."""
        return None

    def undo_sent(self, entry: SentEntry, operator: str, force: bool = False) -> str:
        """Undo, where it was sent, the answer of the journal `entry` (a `journal.Entry` whose
        `sent` this backend recorded); one line saying what was done. Raises HitlError (a
        StaleError when it moved on there, or its loop has acted on it: refused unless
        `force`). Only for a backend whose answers are `undoable`."""
        raise UsageError(f"{entry.id}: {self.title or self.name} answers cannot be undone")

    def refresh_soon(self) -> None:
        """Read every scope again soon (after an answer was sent); thread-safe enough to call
        from the app's thread."""
