"""The journal's entries: the record format, folding records into entries (`Entry`, shown by
`hitl history`), the saved bytes (blobs), and writing an entry's begin, commit and rollback
records. What `apply` needs to journal an answer; `journal_files` puts an entry's files back,
`recovery` finishes what a crash interrupted, `undo` reverts an answer. Only these modules know
what a record holds; `journalstore` keeps the records on disk (segments, index, retention).

Everything lives in the operator's state folder, never in a repository:

    journal/journal.jsonl   one JSON record per line, append-only (the active segment)
    journal/journal-*.jsonl closed segments, read newest first; pruned past `journal_keep`
    journal/open/<id>       the begin record of each entry still in progress
    journal/blobs/<sha256>  the bytes of each file before and after an answer, content-addressed
    journal/journal.lock    flock held while appending a record

Records (every one has `v`, `type`, `id`, `time`):

    begin     kind ("answer" | "undo"), undoes, operator, repo, block, answer, summary, files,
              and batch (an answer given with others at once: the batch's id; absent: alone)
    commit    every step was written (by: "apply" | "recovery")
    rollback  every step written was restored to its old bytes (by: "apply" | "recovery")

Each file step has `path`, `action`, `old_sha256`, `new_sha256` (None: the file is absent) and
`old_mode` / `new_mode` (permission bits to give the file in that state; None: keep).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import os
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hitl_tui import fsio
from hitl_tui.journal import store as journalstore
from hitl_tui.model import HitlError, Plan
from hitl_tui.paths import state_dir
from hitl_tui.textio import one_line
from hitl_tui.timefmt import aware_time

VERSION = 1


# -- where ---------------------------------------------------------------------------------


def journal_dir() -> Path:
    return state_dir() / "journal"


def journal_file() -> Path:
    return journal_dir() / "journal.jsonl"


def blob_path(sha: str) -> Path:
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

    def to_record(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "action": self.action,
            "old_sha256": self.old_sha256,
            "new_sha256": self.new_sha256,
            "old_mode": self.old_mode,
            "new_mode": self.new_mode,
        }

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> FileStep:
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
    answer: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    #: The repository folder's (device, inode) when it was answered; None in old records.
    repo_id: tuple[Any, ...] | None = None
    #: When the block answered had begun (its `since`); None in old records.
    block_since: datetime | None = None
    #: The answer went to a remote backend: `repo` and `block_path` are a name and a URL.
    remote: bool = False
    #: Why it cannot be undone (its source said so when it was journaled); None: it can.
    not_undoable: str | None = None
    #: What a remote backend needs to find the answer where it was sent (another machine's
    #: journal entry: `{"host": ..., "entry": ...}`), as it recorded it; None for the others.
    sent: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    #: The batch the answer was one of (`answers.batch`: `hitl answer ID ID ...`, marks in the
    #: app), its id; None: answered alone. `hitl undo BATCH` undoes the batch's entries.
    batch: str | None = None

    @property
    def undone(self) -> bool:
        return self.undone_by is not None

    @property
    def undoable(self) -> bool:
        return self.not_undoable is None

    def to_json(self) -> dict[str, Any]:
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
            "batch": self.batch,
        }


def entries() -> Entries:
    """Every entry of the journal, looked up lazily (by id, or newest first)."""
    return Entries()


def history(include_undos: bool = False, limit: int = 0, skip: int = 0) -> list[Entry]:
    """Journaled answers, newest first (undo entries too when asked): `limit` of them (0: all)
    after the `skip` newest. Reads only as far back as it needs."""
    shown = newest_first(include_undos)
    return list(itertools.islice(shown, skip, skip + limit if limit > 0 else None))


def newest_first(include_undos: bool = False) -> Iterator[Entry]:
    """Journaled answers, newest first (in journal order), read lazily."""
    for entry in entries().newest_first():
        if include_undos or entry.kind == "answer":
            yield entry


# -- records -------------------------------------------------------------------------------


def _now() -> datetime:
    return datetime.now(UTC)


def _new_id(now: datetime) -> str:
    return f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def _append(record: dict[str, Any]) -> None:
    """Append one record durably (a begin record's open file first: see journalstore)."""
    journalstore.append({"v": VERSION, **record})


def _parse_time(value: object) -> datetime:
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return datetime.fromtimestamp(0, UTC)


class Entries:
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


def open_entries() -> list[Entry]:
    """The entries still in progress, from the open index alone (no segment is read)."""
    return [_entry(begin, None) for _, begin in journalstore.open_entries()]


def _replace(entry: Entry, **changes: Any) -> Entry:
    values = {name: getattr(entry, name) for name in Entry.__slots__}
    values.update(changes)
    return Entry(**values)


def _where(value: object, remote: bool) -> Path | str:
    return str(value) if remote else Path(str(value))


def migrated(begin: dict[str, Any]) -> dict[str, Any]:
    """A begin record as this hitl writes it, from one an older hitl wrote: the one place a
    record of an older version is patched up (`_entry` reads every record through it).

    What a block's source could do is recorded with the answer (the block's `remote`, and its
    `not_undoable`). Records from before that (no `remote` key) had one remote backend,
    GitHub: an answer with no file steps and a URL for a path was sent there, and cannot be
    undone from hitl. `begin` itself is never changed."""
    block = begin.get("block") or {}  # every field's type was checked by journalstore.problem
    if "remote" in block:
        return begin
    remote = not begin.get("files") and "://" in str(block.get("path", ""))
    block = {**block, "remote": remote}
    if remote:
        block["not_undoable"] = (
            f"answered {block.get('id', '')} on {block.get('source', '')}: hitl cannot undo "
            "what was sent there"
        )
    return {**begin, "block": block}


def _entry(begin: dict[str, Any], end: dict[str, Any] | None) -> Entry:
    begin = migrated(begin)
    block = begin.get("block") or {}  # every field's type was checked by journalstore.problem
    remote = block.get("remote") is True
    not_undoable = block.get("not_undoable")
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
        block_since=aware_time(block.get("since")),
        remote=remote,
        not_undoable=not_undoable if isinstance(not_undoable, str) else None,
        sent=block.get("sent") if isinstance(block.get("sent"), dict) else None,
        batch=begin.get("batch") if isinstance(begin.get("batch"), str) else None,
    )


def _repo_id(value: object) -> tuple[Any, ...] | None:
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


# -- blobs ---------------------------------------------------------------------------------


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _store_blob(data: bytes) -> str:
    sha = _sha(data)
    path = blob_path(sha)
    try:
        if path.stat().st_size == len(data):
            return sha
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    fsio.atomic_write(path, data, 0o600)
    return sha


def load_blob(sha: str) -> bytes:
    try:
        data = blob_path(sha).read_bytes()
    except OSError as exc:
        raise HitlError(f"the journal lost the saved bytes {sha[:12]}: {exc.strerror}") from None
    if _sha(data) != sha:
        raise HitlError(f"the journal's saved bytes {sha[:12]} are damaged")
    return data


def _mode_of(path: Path) -> int | None:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return None


# -- begin, commit, roll back (apply.apply_plan; recovery and undo end entries too) ----------


def begin(
    plan: Plan,
    identity: tuple[Any, ...] | None = None,
    *,
    remote: bool = False,
    not_undoable: str | None = None,
    sent: dict[str, Any] | None = None,
) -> str:
    """Journal `plan` before its first write: the old and new bytes of each file, then a record.

    `remote` and `not_undoable` are what the plan's source can do (`Source.remote`,
    `Source.why_not_undoable`), recorded so that undo and history need not know the source.
    Raises OSError when the state folder cannot take it (nothing was written to the repo).
    """
    now = _now()
    entry_id = _new_id(now)
    abilities = {"remote": remote, **({"not_undoable": not_undoable} if not_undoable else {})}
    if sent is not None:
        abilities["sent"] = sent
    with journalstore.storing_blobs():  # no blob is pruned until the open file names it
        _append(_begin_record(plan, now, entry_id, identity, abilities))
        return entry_id


def _head(
    now: datetime,
    entry_id: str,
    undoes: str | None,
    operator: str,
    repo: str,
    identity: tuple[Any, ...] | None,
) -> dict[str, Any]:
    """The first fields of a begin record: an answer, or (`undoes`) the undo of one."""
    return {
        "type": "begin",
        "id": entry_id,
        "time": now.isoformat(),
        "kind": "answer" if undoes is None else "undo",
        "undoes": undoes,
        "operator": operator,
        "repo": repo,
        # The repository folder's device and inode: recovery finds it if it was moved.
        "repo_id": list(identity) if identity else None,
    }


def _begin_record(
    plan: Plan,
    now: datetime,
    entry_id: str,
    identity: tuple[Any, ...] | None,
    abilities: dict[str, Any],
) -> dict[str, Any]:
    """The begin record of `plan` (its old and new bytes stored as blobs first)."""
    steps = []
    for change in plan.changes:
        old_sha = None if change.old is None else _store_blob(change.old)
        new_sha = None if change.new is None else _store_blob(change.new)
        steps.append(
            FileStep(change.path, change.action, old_sha, new_sha, _mode_of(change.path), None)
        )
    block, answer = plan.block, plan.answer
    decided = answer.decided(" | ")
    choice = answer.choice
    record = {
        **_head(now, entry_id, None, answer.operator, str(block.repo), identity),
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
    if answer.batch is not None:
        record["batch"] = answer.batch
    return record


def commit(entry_id: str, by: str = "apply") -> None:
    _append({"type": "commit", "id": entry_id, "time": _now().isoformat(), "by": by})


def end_rollback(entry_id: str, by: str, reason: str) -> None:
    record = {"type": "rollback", "id": entry_id, "time": _now().isoformat(), "by": by}
    _append({**record, "reason": reason})


def abandon(entry_id: str, reason: str) -> None:
    """End an entry whose repository is gone: there is nothing to write back."""
    end_rollback(entry_id, "apply", reason)


def begin_undo(
    entry: Entry, steps: list[FileStep], operator: str, identity: tuple[Any, ...]
) -> str:
    """Journal the undo of `entry` before its first write: `steps` give each file its old bytes
    back. Raises OSError when the state folder cannot take it (nothing was written)."""
    now = _now()
    undo_id = _new_id(now)
    record = {
        **_head(now, undo_id, entry.id, operator, str(entry.repo), identity),
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
    _append(record)
    return undo_id


def record_remote(
    plan: Plan, summary: str, not_undoable: str | None, sent: dict[str, Any] | None = None
) -> str:
    """Journal an answer already sent to a remote backend (no file is written): its begin and
    commit records at once, `summary` saying what was sent, `sent` what its backend needs to
    undo it there (`Source.undo_sent`). Raises OSError or HitlError when the journal cannot
    take it."""
    entry_id = begin(
        dataclasses.replace(plan, summary=summary),
        remote=True,
        not_undoable=not_undoable,
        sent=sent,
    )
    commit(entry_id)
    return entry_id


#: What `remote_fields` keeps of a block and of an answer (what a journal entry shows).
_BLOCK_FIELDS = ("id", "source", "path", "fingerprint", "question", "since")
#: The longest text kept in those fields (an operator's own words; a question is 300).
_FIELD_LIMIT = 100_000


def remote_fields(plan: Plan) -> dict[str, Any]:
    """What the journal will record of a remote answer not known yet to be written, as plain
    JSON: made as it is sent, kept in the state folder (`sources.ssh`), and journaled by
    `record_prepared` once its machine says it was. `plan` writes no file here."""
    if plan.changes:
        raise ValueError("a plan that writes files here is journaled by apply_plan")
    record = _begin_record(plan, _now(), "-", None, {})
    fields = {
        "operator": record["operator"],
        "repo": record["repo"],
        "block": {key: record["block"][key] for key in _BLOCK_FIELDS},
        "answer": record["answer"],
    }
    if "batch" in record:  # one of a batch (`answers.batch`): its entry joins the batch
        fields["batch"] = record["batch"]
    return fields


def checked_fields(fields: object) -> dict[str, Any] | None:
    """`fields` (of `remote_fields`, read back from a file) with exactly their keys and types,
    or None when they are not such fields."""

    def text(value: object, optional: bool = False) -> bool:
        if value is None:
            return optional
        return isinstance(value, str) and len(value) <= _FIELD_LIMIT

    if not isinstance(fields, dict):
        return None
    block, answer = fields.get("block"), fields.get("answer")
    if not (text(fields.get("operator")) and text(fields.get("repo")) and fields.get("repo")):
        return None
    if not isinstance(block, dict) or not all(text(block.get(k)) for k in _BLOCK_FIELDS):
        return None
    if not aware_time(block.get("since")) or not isinstance(answer, dict):
        return None
    choice, texts = answer.get("choice"), answer.get("texts")
    if choice is not None and not (
        isinstance(choice, dict)
        and text(choice.get("key"))
        and text(choice.get("option"))
        and text(choice.get("consequence"), optional=True)
    ):
        return None
    if not isinstance(texts, list) or len(texts) > 100 or not all(text(t) for t in texts):
        return None
    if not (
        text(answer.get("note"), optional=True)
        and text(answer.get("decision"))
        and text(answer.get("decision_override"), optional=True)
    ):
        return None
    batch = fields.get("batch")
    if batch is not None and not (isinstance(batch, str) and len(batch) <= 100):
        return None
    return {
        **({"batch": batch} if batch is not None else {}),
        "operator": fields["operator"],
        "repo": fields["repo"],
        "block": {key: block[key] for key in _BLOCK_FIELDS},
        "answer": {
            "choice": None
            if choice is None
            else {k: choice.get(k) for k in ("key", "option", "consequence")},
            "texts": list(texts),
            "note": answer.get("note"),
            "decision": answer["decision"],
            "decision_override": answer.get("decision_override"),
        },
    }


def record_prepared(fields: object, summary: str, sent: dict[str, Any]) -> str:
    """Journal, as done and now, the remote answer of `remote_fields` (read back: checked, and
    only they are taken), with its `summary` and `sent` as known now; its id. HitlError when
    they are not such fields."""
    checked = checked_fields(fields)
    if checked is None:
        raise HitlError("its record in the state folder is damaged")
    now = _now()
    entry_id = _new_id(now)
    record = {
        **_head(now, entry_id, None, checked["operator"], checked["repo"], None),
        "block": {**checked["block"], "remote": True, "sent": sent},
        "answer": checked["answer"],
        "summary": summary,
        "files": [],
        **({"batch": checked["batch"]} if "batch" in checked else {}),
    }
    why = journalstore.problem(record)
    if why is not None:
        raise HitlError(f"its record in the state folder is damaged ({why})")
    _append(record)
    commit(entry_id)
    return entry_id
