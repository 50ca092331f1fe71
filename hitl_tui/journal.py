"""The answer journal: every answer is recorded before its first write, so that a crash can be
finished or rolled back on the next start, and an answer can be undone byte for byte.

Everything lives in the operator's state folder, never in a repository (`journalstore` keeps
it: segments, rotation, retention, the open index; see its docstring):

    journal/journal.jsonl   one JSON record per line, append-only (the active segment)
    journal/journal-*.jsonl closed segments, read newest first; pruned past `journal_keep`
    journal/open/<id>       the begin record of each entry still in progress
    journal/blobs/<sha256>  the bytes of each file before and after an answer, content-addressed
    journal/journal.lock    flock held while appending a record

Records (every one has `v`, `type`, `id`, `time`):

    begin     kind ("answer" | "undo"), undoes, operator, repo, block, answer, summary, files
    commit    every step was written (by: "apply" | "recovery")
    rollback  every step written was restored to its old bytes (by: "apply" | "recovery")

Each file step has `path`, `action`, `old_sha256`, `new_sha256` (None: the file is absent) and
`old_mode` / `new_mode` (permission bits to give the file in that state; None: keep).

Recovery rule. The steps of a plan are applied in order and the last one (for loopkit, removing
BLOCKED.md: the loop's unblock signal) is the commit point. An interrupted entry whose last step
reached its new bytes is rolled forward (any earlier step still old is written); otherwise it is
rolled back (every step that reached its new bytes gets its old bytes back, last first). Each
write is an atomic rename, so each file is entirely old or entirely new, and the rule makes the
set consistent. Recovery runs under the repository's lock, so it never touches an answer that a
live process is still writing; it is idempotent, so a crash during recovery is recovered again.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import itertools
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from hitl_tui import fsio, journalstore, repofs
from hitl_tui.locks import LOCK_TIMEOUT, LockBusy, repo_lock
from hitl_tui.model import HitlError, Plan, StaleError, UsageError
from hitl_tui.paths import state_dir
from hitl_tui.repofs import ConcurrentWrite, RepoDir
from hitl_tui.textio import one_line

VERSION = 1
StepHook = Callable[[str], None]


# -- where ---------------------------------------------------------------------------------


def journal_dir() -> Path:
    return state_dir() / "journal"


def journal_file() -> Path:
    return journal_dir() / "journal.jsonl"


def _blob_path(sha: str) -> Path:
    return journal_dir() / "blobs" / sha


# -- the public view -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FileStep:
    """One file an entry writes: its bytes before (old) and after (new), as sha256 hex."""

    path: Path
    action: str
    old_sha256: str | None
    new_sha256: str | None
    old_mode: int | None = None
    new_mode: int | None = None

    def to_record(self) -> dict:
        return {
            "path": str(self.path),
            "action": self.action,
            "old_sha256": self.old_sha256,
            "new_sha256": self.new_sha256,
            "old_mode": self.old_mode,
            "new_mode": self.new_mode,
        }

    @classmethod
    def from_record(cls, data: dict) -> FileStep:
        return cls(
            Path(str(data["path"])),
            str(data.get("action", "update")),
            data.get("old_sha256"),
            data.get("new_sha256"),
            data.get("old_mode"),
            data.get("new_mode"),
        )


@dataclass(frozen=True, slots=True)
class Entry:
    """One journaled answer (or undo), folded from its records. Shown by `hitl history`."""

    id: str
    time: datetime
    kind: str
    operator: str
    #: A local folder; for a remote source (GitHub) its name (`acme/shop`).
    repo: Path
    block_id: str
    block_source: str
    #: The block file; for a remote source its URL, as a str (a Path would mangle `//`).
    block_path: Path | str
    block_fingerprint: str
    question: str
    #: What was answered, one line: `B) Keep invoices — ...` or the operator's own words.
    answered: str
    summary: str
    files: tuple[FileStep, ...]
    #: "in progress" (no end record yet), "done" or "rolled back".
    status: str
    #: "apply" or "recovery": who ended it.
    ended_by: str | None = None
    undoes: str | None = None
    undone_by: str | None = None
    undone_time: datetime | None = None
    undone_operator: str | None = None
    answer: dict = field(default_factory=dict, compare=False, hash=False)
    #: The repository folder's (device, inode) when it was answered; None in old records.
    repo_id: tuple | None = None
    #: When the block answered had begun (its `since`); None in old records.
    block_since: datetime | None = None
    #: The answer went to a remote backend: `repo` and `block_path` are a name and a URL.
    remote: bool = False
    #: Why it cannot be undone (its source said so when it was journaled); None: it can.
    not_undoable: str | None = None

    @property
    def undone(self) -> bool:
        return self.undone_by is not None

    @property
    def undoable(self) -> bool:
        return self.not_undoable is None

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "time": self.time.isoformat(),
            "kind": self.kind,
            "operator": self.operator,
            "repo": str(self.repo),
            "block": {
                "id": self.block_id,
                "source": self.block_source,
                "path": str(self.block_path),
                "fingerprint": self.block_fingerprint,
                "question": self.question,
            },
            "answered": self.answered,
            "answer": self.answer,
            "summary": self.summary,
            "status": self.status,
            "ended_by": self.ended_by,
            "undoes": self.undoes,
            "undone": self.undone,
            "undone_by": self.undone_by,
            "undone_time": self.undone_time.isoformat() if self.undone_time else None,
            "undone_operator": self.undone_operator,
            "files": [f.to_record() for f in self.files],
        }


def history(include_undos: bool = False, limit: int = 0, skip: int = 0) -> list[Entry]:
    """Journaled answers, newest first (undo entries too when asked): `limit` of them (0: all)
    after the `skip` newest. Reads only as far back as it needs."""
    shown = newest_first(include_undos)
    return list(itertools.islice(shown, skip, skip + limit if limit > 0 else None))


def newest_first(include_undos: bool = False) -> Iterator[Entry]:
    """Journaled answers, newest first (in journal order), read lazily."""
    for entry in _entries(_read_records()).newest_first():
        if include_undos or entry.kind == "answer":
            yield entry


# -- records -------------------------------------------------------------------------------


def _now() -> datetime:
    return datetime.now(UTC)


def _new_id(now: datetime) -> str:
    return f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


@contextlib.contextmanager
def _journal_lock() -> Iterator[None]:
    folder = journal_dir()
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / "journal.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _append(record: dict) -> None:
    """Append one record durably (a begin record's open file first: see journalstore)."""
    journalstore.append({"v": VERSION, **record})


def _read_records() -> None:
    """The journal, to fold with `_entries`; nothing is read until an entry is looked up."""
    return None


def _parse_time(value: object) -> datetime:
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return datetime.fromtimestamp(0, UTC)


class _Entries:
    """The journal's entries, folded from its records lazily: an id is looked up reading newest
    first only back to its begin record (an entry still open: only the segments since it
    began), and `newest_first` stops wherever its caller stops."""

    def get(self, entry_id: str, default: Entry | None = None) -> Entry | None:
        opened = journalstore.open_entry(entry_id)
        if opened is not None:
            since, begin = opened
            folded = journalstore.find(entry_id, since)
            if folded is None or folded.end is None:
                return _entry(begin, None)
            journalstore.remove_stale_open(entry_id)  # ended: a crash came before its removal
        else:
            folded = journalstore.find(entry_id)
            if folded is None:
                return default
        return _folded(folded) or default

    def __getitem__(self, entry_id: str) -> Entry:
        entry = self.get(entry_id)
        if entry is None:
            raise KeyError(entry_id)
        return entry

    def newest_first(self) -> Iterator[Entry]:
        for folded in journalstore.newest_first():
            entry = _folded(folded)
            if entry is not None:
                yield entry

    def values(self) -> list[Entry]:
        return list(self.newest_first())


def _entries(records: object = None) -> _Entries:
    """Every entry of the journal, looked up lazily (`records` is what `_read_records` gave)."""
    return _Entries()


def _folded(folded: journalstore.Folded) -> Entry | None:
    try:
        entry = _entry(folded.begin, folded.end)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    if folded.undo is not None:  # an undo that committed marks the answer it undid
        undo = folded.undo
        entry = _replace(
            entry,
            undone_by=undo["id"],
            undone_time=_parse_time(undo.get("time")),
            undone_operator=str(undo.get("operator", "")),
        )
    return entry


def _open_entries() -> list[Entry]:
    """The entries still in progress, from the open index alone (no segment is read)."""
    return [_entry(begin, None) for _, begin in journalstore.open_entries()]


def _replace(entry: Entry, **changes) -> Entry:
    values = {name: getattr(entry, name) for name in Entry.__slots__}
    values.update(changes)
    return Entry(**values)


def _where(value: object, remote: bool) -> Path | str:
    return str(value) if remote else Path(str(value))


def _entry(begin: dict, end: dict | None) -> Entry:
    block = begin.get("block") or {}  # every field's type was checked by journalstore.problem
    # What its source could do is recorded with the answer. Records from before that (no
    # "remote" key) had one remote backend, GitHub: no file steps, and a URL for a path.
    legacy = "remote" not in block
    remote = block.get("remote") is True or (
        legacy and not begin.get("files") and "://" in str(block.get("path", ""))
    )
    not_undoable = block.get("not_undoable")
    if legacy and remote:
        not_undoable = (
            f"answered {block.get('id', '')} on {block.get('source', '')}: hitl cannot undo "
            "what was sent there"
        )
    answer = begin.get("answer") or {}
    status = "in progress"
    if end is not None:
        status = "done" if end["type"] == "commit" else "rolled back"
    return Entry(
        id=begin["id"],
        time=_parse_time(begin.get("time")),
        kind=str(begin.get("kind", "answer")),
        operator=str(begin.get("operator", "")),
        repo=Path(str(begin["repo"])),
        block_id=str(block.get("id", "")),
        block_source=str(block.get("source", "")),
        block_path=_where(block.get("path", ""), remote),
        block_fingerprint=str(block.get("fingerprint", "")),
        question=str(block.get("question", "")),
        answered=str(answer.get("decision", "")),
        summary=str(begin.get("summary", "")),
        files=tuple(FileStep.from_record(f) for f in begin.get("files", [])),
        status=status,
        ended_by=None if end is None else end.get("by"),
        undoes=begin.get("undoes"),
        answer=answer if isinstance(answer, dict) else {},
        repo_id=_repo_id(begin.get("repo_id")),
        block_since=_since(block.get("since")),
        remote=remote,
        not_undoable=not_undoable if isinstance(not_undoable, str) else None,
    )


def _repo_id(value: object) -> tuple | None:
    """(device, inode[, birth time in ns or None]) as recorded, or None when malformed."""
    if not isinstance(value, list) or len(value) not in (2, 3):
        return None
    dev, ino, *rest = value
    if not all(type(v) is int and 0 <= v < 1 << 64 for v in (dev, ino)):
        return None
    born = rest[0] if rest else None
    if born is not None and not (type(born) is int and 0 <= born < 1 << 64):
        return None
    return dev, ino, born


def _since(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return when if when.tzinfo is not None else None


# -- blobs ---------------------------------------------------------------------------------


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _store_blob(data: bytes) -> str:
    sha = _sha(data)
    path = _blob_path(sha)
    try:
        if path.stat().st_size == len(data):
            return sha
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    fsio.atomic_write(path, data, 0o600)
    return sha


def _load_blob(sha: str) -> bytes:
    try:
        data = _blob_path(sha).read_bytes()
    except OSError as exc:
        raise HitlError(f"the journal lost the saved bytes {sha[:12]}: {exc.strerror}") from None
    if _sha(data) != sha:
        raise HitlError(f"the journal's saved bytes {sha[:12]} are damaged")
    return data


# -- writing files -------------------------------------------------------------------------


def _mode_of(path: Path) -> int | None:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return None


# -- steps and states ----------------------------------------------------------------------


def _current(rd: RepoDir, step: FileStep) -> str | None:
    """sha256 hex of the file now, None when absent, "?" when it is something else."""
    try:
        data = rd.read(rd.spot(step.path))
    except (OSError, HitlError):
        return "?"
    if data is None:
        return None
    if not isinstance(data, bytes):
        return "?"
    return _sha(data)


def _state(rd: RepoDir, step: FileStep) -> str:
    """ "old", "new", "both" (the step changes nothing) or "other" (it moved on)."""
    now = _current(rd, step)
    is_old = now == step.old_sha256
    is_new = now == step.new_sha256
    if is_old and is_new:
        return "both"
    if is_new:
        return "new"
    if is_old:
        return "old"
    return "other"


def _put(rd: RepoDir, step: FileStep, side: str) -> None:
    """Give the file of `step` its `side` ("old" or "new") bytes, if it still has the other.

    Like every write to a repository, the replace checks what it replaces (repofs): a file
    the loop changed meanwhile is left with the loop's bytes (ConcurrentWrite).
    """
    sha, mode = (
        (step.old_sha256, step.old_mode) if side == "old" else (step.new_sha256, step.new_mode)
    )
    other = step.new_sha256 if side == "old" else step.old_sha256
    data = None if sha is None else _load_blob(sha)
    expected = None if other is None else _load_blob(other)
    rd.replace(rd.spot(step.path), expected, data, mode)


def _rel(repo: Path, path: Path) -> str:
    try:
        return str(path.relative_to(repo))
    except ValueError:
        return str(path)


def _temp_folders(rd: RepoDir, steps: tuple[FileStep, ...]) -> set[int]:
    folders = set()
    for step in steps:
        with contextlib.suppress(HitlError, OSError):
            folders.add(rd.spot(step.path).folder)
    return folders


# -- begin, commit, roll back (used by apply.apply_plan) ---------------------------------------


def begin(
    plan: Plan,
    identity: tuple | None = None,
    *,
    remote: bool = False,
    not_undoable: str | None = None,
) -> str:
    """Journal `plan` before its first write: the old and new bytes of each file, then a record.

    `remote` and `not_undoable` are what the plan's source can do (`Source.remote`,
    `Source.why_not_undoable`), recorded so that undo and history need not know the source.
    Raises OSError when the state folder cannot take it (nothing was written to the repo).
    """
    now = _now()
    entry_id = _new_id(now)
    abilities = {"remote": remote, **({"not_undoable": not_undoable} if not_undoable else {})}
    with journalstore.storing_blobs():  # no blob is pruned until the open file names it
        return _begin(plan, now, entry_id, identity, abilities)


def _begin(
    plan: Plan, now: datetime, entry_id: str, identity: tuple | None, abilities: dict
) -> str:
    steps = []
    for change in plan.changes:
        old_sha = None if change.old is None else _store_blob(change.old)
        new_sha = None if change.new is None else _store_blob(change.new)
        steps.append(
            FileStep(change.path, change.action, old_sha, new_sha, _mode_of(change.path), None)
        )
    block, answer = plan.block, plan.answer
    if answer.decision_override is not None:
        decided = answer.decision_override
    elif answer.choice is not None:
        decided = answer.choice.label()
    else:
        decided = " | ".join(answer.texts)
    choice = answer.choice
    record = {
        "type": "begin",
        "id": entry_id,
        "time": now.isoformat(),
        "kind": "answer",
        "undoes": None,
        "operator": answer.operator,
        "repo": str(block.repo),
        # The repository folder's device and inode: recovery finds it if it was moved.
        "repo_id": list(identity) if identity else None,
        "block": {
            "id": block.id,
            "source": block.source,
            "path": str(block.path),
            "fingerprint": block.fingerprint,
            "question": block.one_line_question(300),
            # When the block began: an undo puts it back (the list's order and age).
            "since": block.since.isoformat(),
            **abilities,
        },
        "answer": {
            "choice": None
            if choice is None
            else {"key": choice.key, "option": choice.option, "consequence": choice.consequence},
            "texts": list(answer.texts),
            "note": answer.note,
            "decision": one_line(decided)[:1000],
            "decision_override": answer.decision_override,
        },
        "summary": plan.summary,
        "files": [s.to_record() for s in steps],
    }
    _append(record)
    return entry_id


def commit(entry_id: str, by: str = "apply") -> None:
    _append({"type": "commit", "id": entry_id, "time": _now().isoformat(), "by": by})


def _end_rollback(entry_id: str, by: str, reason: str) -> None:
    record = {"type": "rollback", "id": entry_id, "time": _now().isoformat(), "by": by}
    _append({**record, "reason": reason})


def roll_back(entry_id: str, reason: str, rd: RepoDir, written: int) -> tuple[list, list]:
    """Restore the `written` first files of a failed, still-locked entry.

    Returns (restored, moved), as `_roll_back_files`. Raises OSError or HitlError when a file
    cannot be restored: the entry then stays open and the next start recovers it.
    """
    entry = _entries(_read_records())[entry_id]
    restored, moved = _roll_back_files(entry, rd, written)
    moved += [f"{name} (left by an interrupted write)" for name in _sweep(entry, rd)]
    _end_rollback(entry_id, "apply", reason)
    return restored, moved


def abandon(entry_id: str, reason: str) -> None:
    """End an entry whose repository is gone: there is nothing to write back."""
    _end_rollback(entry_id, "apply", reason)


def _roll_back_files(
    entry: Entry, rd: RepoDir, written: int | None = None
) -> tuple[list[str], list[str]]:
    """Give every file that has its new bytes its old ones back, last first.

    `written`: how many of the entry's steps were carried out (None: not known, after a
    crash). Returns (restored, moved): a file hitl wrote that the loop changed since is not
    restored (that would drop the loop's bytes, and its old bytes would drop hitl's change
    too): it keeps both, and is named in `moved`. So is, when `written` is not known, any file
    that holds neither its old nor its new bytes.
    """
    restored, moved = [], []
    steps = list(enumerate(entry.files))
    for index, step in reversed(steps):
        ours = written is None or index < written
        state = _state(rd, step)
        if state == "other" and ours:
            moved.append(_rel(entry.repo, step.path))
            continue
        if state != "new" or not ours:
            continue
        try:
            _put(rd, step, "old")
        except ConcurrentWrite:
            moved.append(_rel(entry.repo, step.path))
            continue
        restored.append(_rel(entry.repo, step.path))
    return restored, moved


def _sweep(entry: Entry, rd: RepoDir) -> list[str]:
    """Temp files a crash left: deleted when they hold bytes of this entry (or the start of
    them, a write cut short), else kept."""
    shas = {sha for step in entry.files for sha in (step.old_sha256, step.new_sha256) if sha}
    blobs: list[bytes] = []

    def ours(data: bytes) -> bool:
        if not blobs:
            for sha in shas:
                with contextlib.suppress(HitlError):
                    blobs.append(_load_blob(sha))
        return not data or any(blob.startswith(data) for blob in blobs)

    # Under the repository's lock, after a crash: a temp of unknown bytes is kept at once.
    return rd.clean_temps(_temp_folders(rd, entry.files), ours, min_age=0)


# -- recovery ------------------------------------------------------------------------------


def _same_repo(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _locate(entry: Entry) -> Path | None:
    """Where the entry's repository is now: its recorded path, or where it was moved to (found
    by the folder's device and inode); None when it cannot be found."""
    if entry.repo_id is None:  # journaled before hitl recorded the folder's identity
        return entry.repo if os.path.isdir(entry.repo) else None
    if repofs.same_folder(entry.repo, entry.repo_id):
        return entry.repo
    return repofs.find_moved(entry.repo, entry.repo_id)


def recover(repo: Path | None = None, *, locked: bool = False) -> list[str]:
    """Finish or roll back every interrupted answer; one message per answer recovered.

    Called at the start of every hitl command and of the app (`repo` None), and by apply under
    a repository's lock (`repo` given, `locked` True). An answer whose repository lock is held
    by a live process is still being written and is left alone.
    """
    pending = _open_entries()  # from journal/open/ alone: start-up never reads the history
    messages = []
    for entry in pending:
        if not entry.files:  # no files (GitHub): nothing to lock or restore
            if repo is None or str(entry.repo) == str(repo):
                messages.append(_recover_one(entry.id, None))
            continue
        where = _locate(entry)
        if repo is not None and not _same_repo(where or entry.repo, repo):
            continue
        if locked:
            messages.append(_recover_one(entry.id, where))
            continue
        try:
            # The lock is the folder's (device and inode): the same one a live process holds
            # on a repository that was renamed under it.
            with repo_lock(where or entry.repo, timeout=0, identity=entry.repo_id):
                messages.append(_recover_one(entry.id, where))
        except LockBusy:
            continue  # a live process is writing it right now
        except HitlError as exc:
            messages.append(f"could not recover {entry.id}: {exc}")
    return [m for m in messages if m]


def _recover_one(entry_id: str, where: Path | None) -> str:
    """What was done, in one line; empty when another process recovered it meanwhile."""
    entry = _entries(_read_records()).get(entry_id)
    if entry is None or entry.status != "in progress":
        return ""
    what = "an interrupted undo of" if entry.kind == "undo" else "an interrupted answer to"
    name = f"{what} {entry.block_id} ({entry.id})"
    if not entry.files:
        # Nothing written to files (a GitHub answer, journaled after it was sent): close it.
        commit(entry.id, by="recovery")
        return f"recorded {name}: {entry.summary}"
    if where is None:
        _end_rollback(entry.id, "recovery", "the repository is gone")
        return f"{name}: {_gone(entry)}"
    try:
        with RepoDir(entry.repo, located=where) as rd:
            message = _recover_in(entry, name, rd)
    except (OSError, HitlError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return f"could not recover {name}: {reason}; hitl will try again at the next start"
    if where != entry.repo:
        message += f" (the repository had moved to {where})"
    return message


def _gone(entry: Entry) -> str:
    """Exactly what is left where, for an answer whose repository cannot be found."""
    kept = ", ".join(
        f"{_rel(entry.repo, step.path)} (old bytes: {_blob_path(step.old_sha256)})"
        if step.old_sha256
        else f"{_rel(entry.repo, step.path)} (did not exist before)"
        for step in entry.files
    )
    return (
        f"the repository {entry.repo} is gone (deleted, or moved where hitl cannot find it); "
        f"if it still exists, these files may hold the answer half-written: {kept}"
    )


def _recover_in(entry: Entry, name: str, rd: RepoDir) -> str:
    steps = entry.files
    pairs = [(step, _state(rd, step)) for step in steps]
    deciding = [state for step, state in pairs if step.old_sha256 != step.new_sha256]
    # Forward when the last step was done. A last file that holds neither side (the loop wrote
    # a new BLOCKED.md after hitl removed the old one) counts as done unless an earlier step
    # is still old: then the crash came first, and the loop's file is simply left as it is.
    forward = (
        not deciding or deciding[-1] == "new" or (deciding[-1] == "other" and "old" not in deciding)
    )
    moved = [_rel(entry.repo, step.path) for step, state in pairs if state == "other"]
    if forward:
        for step, state in pairs:
            if state != "old":
                continue
            try:
                _put(rd, step, "new")
            except ConcurrentWrite:
                moved.append(_rel(entry.repo, step.path))
        kept = _sweep(entry, rd)
        commit(entry.id, by="recovery")
    else:
        _restored, changed = _roll_back_files(entry, rd)
        kept = _sweep(entry, rd)
        moved.extend(name for name in changed if name not in moved)
        _end_rollback(entry.id, "recovery", "interrupted before its last step")
    tail = f" ({', '.join(moved)} changed since and was left as it is)" if moved else ""
    if kept:
        tail += f" (bytes of unknown origin left by the crash kept as {', '.join(kept)})"
    if forward:
        return f"finished {name}: {entry.summary}{tail}"
    if entry.kind == "undo":
        return f"rolled back {name}: the answer stays in place{tail}"
    return f"rolled back {name}: nothing of it was kept, the block is still open{tail}"


# -- undo ------------------------------------------------------------------------------------


#: An ambiguous `hitl undo ID` names at most this many of the answers it matches.
SHOW_MATCHES = 10


def _pick(entries: _Entries, entry_id: str | None) -> Entry:
    """The last answer not undone yet, or the one `entry_id` names: its journal id, any unique
    part of it as `hitl history` prints it (the timestamp, the random tail `3f9a1c`), or a
    block's id or a suffix of it in whole components (`svc-one`: that block's last answer not
    undone). Without an id it stops at the first answer it finds; with one, an exact journal
    id stops where it is found and anything else reads to the end, to be sure it is unique."""
    if entry_id is None:
        for e in entries.newest_first():
            if e.kind == "answer" and e.status == "done" and not e.undone and e.undoable:
                return e
        raise UsageError("nothing to undo: no answer in the journal (see 'hitl history')")
    from hitl_tui.textio import printable

    wanted = entry_id.strip()
    tail = "/" + wanted.strip("/")
    found: dict[str, Entry] = {}
    blocks: set[str] = set()
    for e in entries.newest_first() if wanted else ():
        if e.id == wanted:
            return e
        if e.kind != "answer":
            continue
        if wanted in e.id:
            found.setdefault(e.id, e)
        shown = printable(e.block_id)
        if e.block_id and any(
            i == wanted.strip("/") or i.endswith(tail) for i in (e.block_id, shown)
        ):
            # A block's id: its newest answer that can still be undone.
            if e.block_id not in blocks and e.status == "done" and not e.undone and e.undoable:
                found.setdefault(e.id, e)
            blocks.add(e.block_id)
    if not wanted or not found:
        if blocks:
            raise UsageError(f"no answer of {entry_id!r} is left to undo (see 'hitl history')")
        raise UsageError(f"no answer {entry_id!r} in the journal (see 'hitl history')")
    if len(found) > 1:
        named = [f"{e.id} ({printable(e.block_id)})" for e in found.values()]
        more = len(named) - SHOW_MATCHES
        shown = ", ".join(named[:SHOW_MATCHES]) + (f" and {more} more" if more > 0 else "")
        raise UsageError(f"{entry_id!r} matches {len(found)} answers: {shown}; give more of the id")
    return next(iter(found.values()))


def undo(
    entry_id: str | None = None, operator: str | None = None, hook: StepHook | None = None
) -> str:
    """Revert the last answer (or `entry_id`) byte for byte, the block file included.

    Refuses with StaleError (exit 3) when any file it wrote changed since, naming the file;
    UsageError when there is nothing to undo. Returns a one-line message.
    """
    entry = _pick(_entries(_read_records()), entry_id)
    _check_undoable(entry)
    if operator is None:  # every command passes the config's operator (`Config.operator_name`)
        operator = "operator"
    where = _locate(entry)
    if where is None:
        raise StaleError(f"cannot undo {entry.id}: the repository {entry.repo} is gone")
    with repo_lock(where, timeout=LOCK_TIMEOUT), RepoDir(entry.repo, located=where) as rd:
        recovered = recover(where, locked=True)
        entry = _entries(_read_records())[entry.id]
        _check_undoable(entry)
        for step in entry.files:
            rd.spot(step.path)  # refuses a path that now leads out of the repository
            state = _state(rd, step)
            if state not in ("new", "both"):
                raise StaleError(_moved_on(entry, step, rd))
        steps = [
            FileStep(
                s.path,
                {"remove": "create", "create": "remove"}.get(s.action, s.action),
                s.new_sha256,
                s.old_sha256,
                s.new_mode,
                s.old_mode,
            )
            for s in reversed(entry.files)
        ]
        now = _now()
        undo_id = _new_id(now)
        record = {
            "type": "begin",
            "id": undo_id,
            "time": now.isoformat(),
            "kind": "undo",
            "undoes": entry.id,
            "operator": operator,
            "repo": str(entry.repo),
            "repo_id": list(rd.identity),
            "block": {
                "id": entry.block_id,
                "source": entry.block_source,
                "path": str(entry.block_path),
                "fingerprint": entry.block_fingerprint,
                "question": entry.question,
            },
            "answer": {"decision": f"undo of {entry.id}: {entry.answered}"},
            "summary": f"undid {entry.id}",
            "files": [s.to_record() for s in steps],
        }
        try:
            _append(record)
        except OSError as exc:
            raise HitlError(f"cannot write the journal: {exc.strerror}; nothing undone") from None
        # Before the block file is back (an app watching it reads this when it reappears).
        _remember_since(entry)
        if hook:
            hook("journaled")
        restored = []
        try:
            for step in steps:
                # Each file gets its old bytes only if it still holds what the answer wrote: a
                # BLOCKED.md the loop wrote meanwhile (its next question) is never replaced.
                _put(rd, step, "new")
                restored.append(_rel(entry.repo, step.path))
                if hook:
                    hook(f"{step.action}:{_rel(entry.repo, step.path)}")
        except (OSError, HitlError) as exc:
            if isinstance(exc, ConcurrentWrite):
                reason = f"{exc} (the loop moved on)"
            else:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            undo_entry = _entries(_read_records())[undo_id]
            try:
                _restored, moved = _roll_back_files(undo_entry, rd, len(restored))
                moved += _sweep(undo_entry, rd)
                _end_rollback(undo_id, "apply", reason)
            except (OSError, HitlError):
                raise HitlError(
                    f"could not undo {entry.id}: {reason}; hitl will finish or roll it back "
                    "at the next start"
                ) from None
            if moved:
                raise HitlError(
                    f"cannot undo {entry.id}: {reason}; rolled back, except "
                    f"{', '.join(moved)}: changed by the loop since, so it keeps both the "
                    "undo and the loop's change (review it)"
                ) from None
            message = f"cannot undo {entry.id}: {reason}; nothing was changed"
            if isinstance(exc, StaleError):
                raise StaleError(message) from None
            raise HitlError(message) from None
        commit(undo_id)
        if hook:
            hook("committed")
    done = f"undid {entry.id} ({entry.block_id}): restored {', '.join(restored)}"
    return "; ".join([*recovered, done])


def _remember_since(entry: Entry) -> None:
    """The block an undo brings back began when it began: not now (see `sincebook`)."""
    if entry.block_since is None or not entry.block_source:
        return
    from hitl_tui.sincebook import SinceBook, key_for

    book = SinceBook.for_state()
    book.remember(key_for(entry.block_source, entry.block_path), entry.repo, entry.block_since)
    book.save()


def _check_undoable(entry: Entry) -> None:
    if entry.kind != "answer":
        raise UsageError(f"{entry.id} is an undo, not an answer")
    if not entry.undoable:
        raise UsageError(f"{entry.id} {entry.not_undoable}")
    if entry.undone:
        raise UsageError(f"{entry.id} was already undone (by {entry.undone_by})")
    if entry.status == "rolled back":
        raise UsageError(f"{entry.id} was rolled back: there is nothing to undo")
    if entry.status != "done":
        raise UsageError(f"{entry.id} is still in progress")


def _moved_on(entry: Entry, step: FileStep, rd: RepoDir) -> str:
    name = _rel(entry.repo, step.path)
    now = _current(rd, step)
    if step.new_sha256 is None and now is not None:
        why = f"{name} exists again (the loop wrote a new one)"
    elif now is None:
        why = f"{name} was removed since"
    else:
        why = f"{name} changed since the answer"
    return f"cannot undo {entry.id}: {why}; nothing was changed"
