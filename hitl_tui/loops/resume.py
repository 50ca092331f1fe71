"""Did the loop resume? Each answer hitl wrote, watched until its loop acts on it.

After an answer is written (`hitl answer`, the app), `note` records a `Waiting`: the answered
block, when, and the backend's baseline (`Source.resume_signs`: loopkit's HEAD and the bytes
hitl wrote to PROMPT.md, an agenticloop task's status and bytes). From then on the backend
says, from the files, whether its loop acted since (`Source.resumed`: a new commit, a file
the loop changed, a new block: "asked again"); the watcher hands over the paths that changed
(`observe`), and `check` looks at every open record at once (start-up, `hitl status`).

A record is *waiting* until then, *resumed* once a sign is seen, and *not-resumed* when no
sign came within the loop's `resume_within` (`due`); a not-resumed record still turns resumed
when the loop acts later, and `restarted` puts it back to waiting with a new deadline. A
`[[loop]]` restart that failed (the one after the answer, `R`, `hitl restart`) makes it
*restart-failed* (`restart_failed`: why, and the log of its output) until a restart succeeds, the
loop acts all the same, or the operator drops it: no deadline turns it into anything else.

`resume.json` in the state folder: `{"format": 1, "records": [Waiting.to_json(), ...]}`,
read and written by `statefile` (whole, under a lock, merged with other hitl processes: every
change is made to the rows as they are in the file at that moment). A file that cannot be read
is ignored with one line on stderr; it only ever holds the operator's view. Closed records are
kept KEEP_DAYS for `hitl status` and the history, at most MAX_RECORDS in all.

`loop_acted` reads the same signs for `hitl undo`, which refuses an answer its loop has acted
on (a commit after it: every local answer's record keeps the HEAD it left, `signs["head"]`).

The records themselves (`Waiting`, their states and JSON form) are in `records`.

Domain code: no Textual.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hitl_tui.loops.records import Waiting, answered_text, key_of, rows_of
from hitl_tui.model import Block, Plan
from hitl_tui.state import files as statefile

if TYPE_CHECKING:
    from hitl_tui.sources.base import Source

FORMAT = 1
NAME = "resume.json"
MAX_BYTES = 8 << 20
MAX_RECORDS = 2_000
KEEP = timedelta(days=7)


def forget_undone(message: object) -> None:
    """After `journal.undo` (its message carries the entry undone): nothing waits for the loop
    to act on that answer any more, its block is back. Never raises: the undo stands."""
    entry = getattr(message, "entry", None)
    if not isinstance(entry, str):
        return
    try:
        ResumeBook.for_state().undone(entry)
    except Exception:
        pass


#: A commit subject or a reflog line quoted by `loop_acted` is cut to this many characters.
SAID = 60


def loop_acted(
    entry: Any,
    where: Path | None = None,
    remotes: Iterable[Any] = (),
    book: ResumeBook | None = None,
) -> str | None:
    """What shows the loop has acted on the journal `entry`'s answer since it was given, in a
    few words (`commit abc1234 "msg" after it`); None: no sign. `hitl undo` refuses then.

    The signs `resume` watches for: a commit after the answer (HEAD moved: the reflog's lines
    after the HEAD recorded right after the answer, else after the answer's time), what the
    answer's backend reads now against its record (a file or a status the loop changed, a
    new block), and a record already resumed. A remote answer (`remotes`: the config's remote
    backends): only a record resumed here (no network; its machine's `hitl undo` looks there).
    `where`: where the repository is now. Never raises: a sign that cannot be read is none."""
    try:
        return _acted(entry, where, remotes, book)
    except Exception:
        return None


def _acted(
    entry: Any, where: Path | None, remotes: Iterable[Any], book: ResumeBook | None
) -> str | None:
    from hitl_tui.sources.loopkit import gitref

    if book is None:
        from hitl_tui.sources.registry import default_sources

        given = list(remotes)
        names = {getattr(s, "name", None) for s in given}
        local = [s for s in default_sources() if s.name not in names]
        book = ResumeBook.for_state([*given, *local])
    # A change no loop reads (a grant revoked): nothing the loop does is a sign.
    acts_on = getattr(book._source(getattr(entry, "block_source", "")), "loop_acts_on", None)
    if acts_on is not None and not acts_on(getattr(entry, "block_id", "")):
        return None
    record = book.get(entry.id)
    if record is not None and record.entry != entry.id:
        record = None
    seen = (record.how or "it acted") if record is not None and record.state == "resumed" else None
    if entry.remote:
        return _said(seen) if seen else None
    repo = where if where is not None else entry.repo
    head = record.signs.get("head") if record is not None else None
    if isinstance(repo, Path) and repo.is_dir():
        after = head if isinstance(head, str) else None
        now = gitref.head(repo)
        if after is None or now != after:  # HEAD where the answer left it: no commit since
            moves = gitref.head_moves(repo, after=after, since=entry.time.timestamp())
            if moves:
                return _moves_said(moves)
            if after is not None and now is not None:  # moved, and no reflog says how
                return f"HEAD moved to {now[:7]} since"
    found = (book.acted(record) if record is not None else None) or seen
    return _said(found) if found else None


def _said(text: str) -> str:
    from hitl_tui.textio import printable

    return " ".join(printable(text).split())


def _cut(text: str) -> str:
    text = _said(text)
    return text if len(text) <= SAID else text[: SAID - 1] + "…"


def _moves_said(moves: list[Any]) -> str:
    """`commit abc1234 "msg" after it`, `3 commits after it, the last abc1234 "msg"`, or how
    HEAD moved when not only by commits (`HEAD moved once since, to abc1234 (reset: ...)`)."""
    last = moves[-1]
    short = last.new[:7]
    if all(m.is_commit for m in moves):
        subject = _cut(last.subject)
        if len(moves) == 1:
            return f'commit {short} "{subject}" after it'
        return f'{len(moves)} commits after it, the last {short} "{subject}"'
    times = "once" if len(moves) == 1 else f"{len(moves)} times"
    return f"HEAD moved {times} since, to {short} ({_cut(last.message)})"


def loop_states(book: ResumeBook) -> dict[str, Waiting]:
    """Journal entry id -> what its loop did since (the history: `hitl history`, the app's)."""
    try:
        return {r.entry: r for r in book.recent() if r.entry is not None}
    except Exception:  # the operator's view only: the history shows without it
        return {}


def _now() -> datetime:
    return datetime.now(UTC)


class ResumeBook:
    """Every answer watched for its loop to resume, by id (`Waiting.id`).

    `path` None keeps them in memory only (tests, no state folder). `clock` gives "now" when a
    method is not given one. `sources` are the backends asked for signs, by `Block.source`
    (the inbox sets its own, local and remote; default: the local ones)."""

    def __init__(
        self,
        path: Path | None = None,
        clock: Callable[[], datetime] | None = None,
        sources: Iterable[Any] | None = None,
    ) -> None:
        self.path = path
        self.clock = clock or _now
        self._sources = list(sources) if sources is not None else None
        self._rows: dict[str, Waiting] = {}
        self._stamp: tuple[int, int, int] | None = None
        self._warned = False
        #: Folder -> ids of the open records whose signs may show in it (built on demand).
        self._dirs: dict[Path, set[str]] | None = None
        self._reload()

    @classmethod
    def for_state(cls, sources: Iterable[Any] | None = None) -> ResumeBook:
        return cls(statefile.in_state(NAME), sources=sources)

    # -- the backends --------------------------------------------------------------------------

    @property
    def sources(self) -> list[Any]:
        if self._sources is None:
            from hitl_tui.sources.registry import default_sources

            self._sources = default_sources()
        return self._sources

    @sources.setter
    def sources(self, sources: Iterable[Any]) -> None:
        self._sources = list(sources)
        self._dirs = None

    def _source(self, name: str) -> Source | None:
        return next((s for s in self.sources if s.name == name), None)

    def acted(self, record: Waiting) -> str | None:
        """What the backend sees now that shows the loop acted on `record` since its answer
        (`hitl undo` refuses then); None: no sign. Never raises; the record is not changed."""
        return self._resumed(record)

    def _resumed(self, record: Waiting) -> str | None:
        """The backend's `how` line when the loop acted since the answer; never raises."""
        source = self._source(record.source)
        if source is None:
            return None
        try:
            how = source.resumed(record)
        except Exception:  # a file that vanished mid-read, a bug in one backend: not resumed
            return None
        return " ".join(how.split())[:200] if isinstance(how, str) and how.strip() else None

    # -- recording -----------------------------------------------------------------------------

    def note(
        self,
        block: Block,
        plan: Plan,
        entry: str | None,
        within: timedelta,
        now: datetime | None = None,
    ) -> Waiting:
        """Record the answer `plan` just wrote to `block` (its journal `entry`), watched for
        `within`. Its baseline is taken now, from the backend. An open record of the same
        block is replaced (answered again)."""
        now = now or self.clock()
        source = self._source(block.source)
        signs: dict[str, Any] = {}
        if source is not None:
            try:
                signs = dict(source.resume_signs(block, plan) or {})
            except Exception:
                signs = {}
        if isinstance(block.repo, Path) and "head" not in signs:
            # Any local answer: a commit after it is a sign for `loop_acted` (undo refuses).
            from hitl_tui.sources.loopkit import gitref

            signs["head"] = gitref.head(block.repo)
        record = Waiting(
            key=key_of(block),
            entry=entry,
            block_id=block.id,
            source=block.source,
            repo=os.fsdecode(block.repo) if isinstance(block.repo, Path) else str(block.repo),
            path=os.fsdecode(block.path) if isinstance(block.path, Path) else str(block.path),
            title=block.title,
            question=block.one_line_question(),
            answered=answered_text(plan),
            answered_at=now,
            deadline=now + within,
            signs=signs,
            state="waiting",
            within_s=within.total_seconds(),
            changed_at=now,
            task_id=task_id if isinstance(task_id := block.meta.get("task_id"), str) else None,
        )

        def edit(rows: dict[str, Waiting]) -> list[Waiting]:
            for old in [r for r in rows.values() if r.key == record.key and r.is_open]:
                del rows[old.id]
            rows.pop(record.id, None)
            rows[record.id] = record
            return [record]

        self._edit(edit)
        return record

    # -- asking --------------------------------------------------------------------------------

    def open(self) -> list[Waiting]:
        """Waiting and not-resumed records, oldest answer first."""
        self._reload()
        return sorted((r for r in self._rows.values() if r.is_open), key=lambda r: r.answered_at)

    def get(self, key_or_entry: str) -> Waiting | None:
        """A record by journal entry id; else the newest by block key, then by block id (the
        open one first)."""
        self._reload()
        found = self._rows.get(key_or_entry)
        if found is not None:
            return found
        for field_name in ("key", "block_id"):
            matches = [r for r in self._rows.values() if getattr(r, field_name) == key_or_entry]
            if matches:
                return max(matches, key=lambda r: (r.is_open, r.answered_at))
        return None

    def recent(self, repo: str | Path | None = None, since: timedelta = KEEP) -> list[Waiting]:
        """Every record answered within `since` (resumed ones too), of `repo` if given, oldest
        answer first (`hitl status`, the history)."""
        self._reload()
        start = self.clock() - since
        want = None if repo is None else os.fsdecode(repo) if isinstance(repo, Path) else repo
        return sorted(
            (
                r
                for r in self._rows.values()
                if (want is None or r.repo == want)
                and max(r.answered_at, r.resumed_at or r.answered_at) >= start
            ),
            key=lambda r: r.answered_at,
        )

    def watch_dirs(self, repos: Iterable[str | Path] | None = None) -> list[Path]:
        """Folders to watch (non-recursively) for the open records' signs; of the records of
        `repos` only, when given (an app watches its own workspace)."""
        index = self._index()
        if repos is not None:
            wanted = {os.fsdecode(r) if isinstance(r, Path) else r for r in repos}
            mine = {r.id for r in self._rows.values() if r.repo in wanted}
            return [d for d, ids in index.items() if ids & mine and os.path.isdir(d)]
        return [d for d in index if os.path.isdir(d)]

    def _index(self) -> dict[Path, set[str]]:
        self._reload()
        if self._dirs is None:
            dirs: dict[Path, set[str]] = {}
            for record in self._rows.values():
                if not record.is_open:
                    continue
                source = self._source(record.source)
                if source is None:
                    continue
                try:
                    folders = source.resume_dirs(record)
                except Exception:
                    folders = []
                for folder in folders:
                    dirs.setdefault(Path(folder), set()).add(record.id)
            self._dirs = dirs
        return self._dirs

    # -- what happened -------------------------------------------------------------------------

    def observe(self, paths: Iterable[Path | str], now: datetime | None = None) -> list[Waiting]:
        """The records whose state changed because of these changed paths (the watcher's)."""
        if not self._rows and self.path is None:
            return []
        index = self._index()
        if not index:
            return []
        ids: set[str] = set()
        for path in paths:
            if not isinstance(path, Path):
                continue
            ids |= index.get(path.parent, set()) | index.get(path, set())
        if not ids:
            return []
        return self._look(lambda r: r.id in ids, now)

    def check(self, now: datetime | None = None, remote: bool = True) -> list[Waiting]:
        """Look at every open record (start-up, `hitl status`), then the deadlines; the
        records that changed. `remote` False skips the records of remote backends (a GitHub
        issue is read over the network: `hitl status` does, the watcher does not)."""

        def which(record: Waiting) -> bool:
            source = self._source(record.source)
            return remote or not getattr(source, "remote", False)

        changed = self._look(which, now)
        ids = {r.id for r in changed}
        return changed + [r for r in self.due(now) if r.id not in ids]

    def resolve(
        self, records: Iterable[Waiting], how: str, now: datetime | None = None
    ) -> list[Waiting]:
        """Mark these open records resumed, with `how` (a new block in their repository: the
        inbox saw the loop ask again). The ones that changed."""
        now = now or self.clock()
        ids = {r.id for r in records}

        def edit(rows: dict[str, Waiting]) -> list[Waiting]:
            out = []
            for rid in ids:
                record = rows.get(rid)
                if record is not None and record.is_open:
                    rows[rid] = new = _resumed(record, how, now)
                    out.append(new)
            return out

        return self._edit(edit) if ids else []

    def open_in(self, repo: Path | str) -> list[Waiting]:
        """The open records of one repository."""
        want = os.fsdecode(repo) if isinstance(repo, Path) else repo
        return [r for r in self.open() if r.repo == want]

    def due(self, now: datetime | None = None) -> list[Waiting]:
        """Waiting records past their deadline turn not-resumed; those that did."""
        now = now or self.clock()
        self._reload()
        if not any(r.state == "waiting" and r.deadline <= now for r in self._rows.values()):
            return []

        def edit(rows: dict[str, Waiting]) -> list[Waiting]:
            out = []
            for rid, record in list(rows.items()):
                if record.state == "waiting" and record.deadline <= now:
                    rows[rid] = new = replace(record, state="not-resumed", changed_at=now)
                    out.append(new)
            return out

        return self._edit(edit)

    def restarted(self, key_or_entry: str, now: datetime | None = None) -> Waiting | None:
        """The loop was restarted again: back to waiting, a new deadline, one more restart.
        None when there is no such record."""
        now = now or self.clock()
        found = self.get(key_or_entry)
        if found is None:
            return None
        rid = found.id
        result: list[Waiting] = []

        def edit(rows: dict[str, Waiting]) -> list[Waiting]:
            record = rows.get(rid)
            if record is None:
                return []
            new = replace(
                record,
                state="waiting",
                deadline=now + timedelta(seconds=record.within_s),
                restarts=record.restarts + 1,
                resumed_at=None,
                how=None,
                changed_at=now,
                restart_problem=None,
                restart_log=None,
                restart_at=now,
            )
            rows[rid] = new
            result.append(new)
            return [new]

        self._edit(edit)
        return result[0] if result else None

    def restart_failed(
        self, key_or_entry: str, problem: str, log: str | None, now: datetime | None = None
    ) -> Waiting | None:
        """A restart of the record's loop failed (`problem`, its output in `log`): the record
        is *restart-failed*, one more restart counted, until a restart succeeds (`restarted`)
        or the loop acts. None when there is no such open record."""
        now = now or self.clock()
        found = self.get(key_or_entry)
        if found is None:
            return None
        rid = found.id
        result: list[Waiting] = []

        def edit(rows: dict[str, Waiting]) -> list[Waiting]:
            record = rows.get(rid)
            if record is None or not record.is_open:
                return []
            new = replace(
                record,
                state="restart-failed",
                restarts=record.restarts + 1,
                changed_at=now,
                restart_problem=" ".join(problem.split())[:200] or "failed",
                restart_log=log,
                restart_at=now,
            )
            rows[rid] = new
            result.append(new)
            return [new]

        self._edit(edit)
        return result[0] if result else None

    def dismiss(self, key_or_entry: str) -> Waiting | None:
        """The operator drops the record from the list (it is forgotten); the record, or None
        when there was none."""
        found = self.get(key_or_entry)
        if found is None:
            return None
        rid = found.id

        def edit(rows: dict[str, Waiting]) -> list[Waiting]:
            return [rows.pop(rid)] if rid in rows else []

        gone = self._edit(edit)
        return gone[0] if gone else None

    def undone(self, entry: str) -> Waiting | None:
        """The answer of journal entry `entry` was undone: its block is back, nothing waits
        for the loop any more (the record is forgotten). The record, or None."""
        found = self.get(entry)
        return self.dismiss(found.id) if found is not None and found.entry == entry else None

    def refresh(self) -> bool:
        """Re-read the file if another process changed it; whether it did."""
        return self._reload()

    # -- inside --------------------------------------------------------------------------------

    def _look(self, which: Callable[[Waiting], bool], now: datetime | None) -> list[Waiting]:
        """Ask the backend about the open records `which` picks; mark those resumed."""
        now = now or self.clock()
        self._reload()
        found: dict[str, str] = {}
        for record in self._rows.values():
            if record.is_open and which(record):
                how = self._resumed(record)
                if how is not None:
                    found[record.id] = how
        if not found:
            return []

        def edit(rows: dict[str, Waiting]) -> list[Waiting]:
            out = []
            for rid, how in found.items():
                record = rows.get(rid)
                if record is not None and record.is_open:
                    rows[rid] = new = _resumed(record, how, now)
                    out.append(new)
            return out

        return self._edit(edit)

    def _reload(self) -> bool:
        if self.path is None:
            return False
        stamp = statefile.stamp(self.path)
        if stamp == self._stamp and (stamp is not None or not self._rows):
            return False
        self._stamp = stamp
        try:
            self._rows = rows_of(statefile.read(self.path, FORMAT, MAX_BYTES), self._skipped)
        except statefile.Unusable as exc:
            self._warn(str(exc))
            self._rows = {}
        self._dirs = None
        return True

    def _warn(self, why: str) -> None:
        self._say_once(f"hitl: ignored {self.path} (answers waiting for a loop): {why}")

    def _skipped(self, why: str) -> None:
        self._say_once(f"hitl: {self.path}: skipped a record ({why}); the others are read")

    def _say_once(self, line: str) -> None:
        """One line on stderr for a state file that cannot be read whole, once per book."""
        if not self._warned:
            self._warned = True
            with contextlib.suppress(Exception):
                print(line, file=sys.stderr)

    def _edit(self, edit: Callable[[dict[str, Waiting]], list[Waiting]]) -> list[Waiting]:
        """Run `edit` on the rows as they are in the file now (under its lock), prune, and
        write when it changed something; what `edit` returned."""
        now = self.clock()
        if self.path is None:
            out = edit(self._rows)
            _prune(self._rows, now)
            self._dirs = None
            return out
        out = []
        called = False

        def change(data: dict[str, Any]) -> bool:
            nonlocal out, called
            called = True
            try:
                rows = rows_of(data)
            except statefile.Unusable:
                rows = {}
            out = edit(rows)
            pruned = _prune(rows, now)
            data["records"] = [r.to_json() for r in rows.values()]
            self._rows = rows
            return bool(out) or pruned

        try:
            statefile.update(self.path, FORMAT, MAX_BYTES, change)
        except OSError as exc:  # no state folder to write: kept in memory for this run
            self._warn(exc.strerror or str(exc))
            if not called:
                out = edit(self._rows)
        self._stamp = statefile.stamp(self.path)
        self._dirs = None
        return out


def _resumed(record: Waiting, how: str, now: datetime) -> Waiting:
    return replace(record, state="resumed", resumed_at=now, how=how, changed_at=now)


def _prune(rows: dict[str, Waiting], now: datetime) -> bool:
    """Forget records answered, resumed or last due more than KEEP ago, then the oldest beyond
    MAX_RECORDS (closed ones first). Whether any went."""
    start = now - KEEP
    gone = [
        rid
        for rid, r in rows.items()
        if max(r.answered_at, r.deadline, r.resumed_at or r.answered_at) < start
    ]
    for rid in gone:
        del rows[rid]
    if len(rows) > MAX_RECORDS:
        order = sorted(rows.values(), key=lambda r: (r.is_open, r.answered_at))
        for record in order[: len(rows) - MAX_RECORDS]:
            del rows[record.id]
        return True
    return bool(gone)
