"""A waiting answer's record: one answer hitl wrote, watched until its loop acts on it.

`Waiting` holds the answered block, when, the backend's baseline (its signs), the state
(`STATES`: waiting, resumed, not-resumed, restart-failed) and what a restart did; `as_block`
is its row in the app's list, `to_json` its row in `resume.json`, read back untrusted by
`waiting_of` and `rows_of` (a row that is not a record is skipped). `loop_word`,
`short_problem` and `answered_text` say a record in a few words, for the lists and the
history. The book that keeps them, and the signs, are `resume`'s.

Domain code: no Textual.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from hitl_tui.model import Block, Plan
from hitl_tui.state import files as statefile

STATES = ("waiting", "resumed", "not-resumed", "restart-failed")
OPEN = ("waiting", "not-resumed", "restart-failed")


def key_of(block: Block) -> str:
    """A block's key in this file: `statefile.block_key` as one string, `source:path`."""
    source, path = statefile.block_key(block)
    return f"{source}:{path}"


def row_path(record_id: str) -> str:
    """The `Block.path` of a record's row (`Waiting.as_block`): never a file's path."""
    return f"waiting:{record_id}"


def loop_word(record: Waiting) -> str:
    """What the history says of an answer's loop: `resumed 14:02`, `waiting`, `not resumed`,
    `restart failed (exit 127)`."""
    if record.state == "resumed" and record.resumed_at is not None:
        return "resumed " + record.resumed_at.astimezone().strftime("%H:%M")
    return record.state_words


def short_problem(problem: str) -> str:
    """Why a restart failed, in a word or two for a list's state column: `exit 127`, `not
    found`, `timed out` (`loops.Ran.problem` in full is in the detail)."""
    words = " ".join(problem.split())
    for short in ("not found", "timed out"):
        if words.startswith(short):
            return short
    if words.startswith("exit "):
        return words[:10]
    return words.split(":")[0][:16] or "failed"


def answered_text(plan: Plan) -> str:
    """What was answered, in one line: the choice, the decision as edited, or the own words."""
    line = " ".join(plan.answer.decided(" / ").split())
    return line if len(line) <= 200 else line[:199] + "…"


@dataclass(frozen=True)
class Waiting:
    """One answer hitl wrote, watched until the loop acts on it."""

    #: `key_of` the answered block (`statefile.block_key` as `source:path`).
    key: str
    #: The journal entry id of the answer (None: the journal did not give one).
    entry: str | None
    block_id: str
    source: str
    #: The answered block's repository and file (a remote block's name and URL), as text.
    repo: str
    path: str
    title: str | None
    #: The question in one line, and what was answered in one line.
    question: str
    answered: str
    answered_at: datetime
    #: answered_at + resume_within (after a restart: the restart's time + resume_within).
    deadline: datetime
    #: The backend's baseline, JSON-able (`Source.resume_signs`).
    signs: dict[str, Any]
    state: str
    resumed_at: datetime | None = None
    #: What showed it resumed: "new commit 1a2b3c4", "PROMPT.md changed by the loop", ...
    how: str | None = None
    #: Restarts run since the answer (`restarted`).
    restarts: int = 0
    #: The loop's resume_within, in seconds (a restart's new deadline is this from then).
    within_s: float = 600.0
    #: When the state last changed (the answer, a sign, the deadline, a restart).
    changed_at: datetime | None = field(default=None, compare=False)
    #: The answered block's task id (agenticloop), for a restart's `{task_id}`.
    task_id: str | None = None
    #: Why the last restart failed (`loops.Ran.problem`: "exit 127", "not found: tmux", "timed
    #: out after 30 s"), and the log of its output; None once a restart succeeded.
    restart_problem: str | None = None
    restart_log: str | None = None
    #: When the last restart since the answer ran (None: none did, or only the answer's own,
    #: which went fine).
    restart_at: datetime | None = None

    @property
    def id(self) -> str:
        """How the record is named in the file and by `get`: its journal entry, else its key."""
        return self.entry or self.key

    @property
    def is_open(self) -> bool:
        return self.state in OPEN

    @property
    def state_words(self) -> str:
        """The state as the operator reads it: `waiting`, `not resumed`, `restart failed (exit
        127)`, `resumed`."""
        if self.state == "restart-failed":
            return f"restart failed ({short_problem(self.restart_problem or 'failed')})"
        return self.state.replace("-", " ")

    def as_block(self) -> Block:
        """The row the app lists for this record (never answerable; its path never equals the
        answered block's, so the two rows have different keys)."""
        what = {
            "waiting": "waiting for the loop",
            "not-resumed": "not resumed",
            "restart-failed": self.state_words,
            "resumed": f"resumed ({self.how})" if self.how else "resumed",
        }.get(self.state, self.state)
        repo: Path | str = self.repo
        if os.path.isabs(self.repo):
            repo = Path(self.repo)
        return Block(
            id=self.block_id,
            source=self.source,
            repo=repo,
            path=row_path(self.id),
            state=self.state,
            question=self.question,
            context="",
            attempted=(),
            choices=(),
            since=self.answered_at,
            fingerprint="",
            raw="",
            title=self.title,
            summary=f"{what} · answered: {self.answered}",
            answerable=False,
            meta={"waiting": self, "task_id": self.task_id or ""},
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "entry": self.entry,
            "block_id": self.block_id,
            "source": self.source,
            "repo": self.repo,
            "path": self.path,
            "title": self.title,
            "question": self.question,
            "answered": self.answered,
            "answered_at": self.answered_at.isoformat(),
            "deadline": self.deadline.isoformat(),
            "signs": self.signs,
            "state": self.state,
            "resumed_at": self.resumed_at.isoformat() if self.resumed_at else None,
            "how": self.how,
            "restarts": self.restarts,
            "within_s": self.within_s,
            "changed_at": self.changed_at.isoformat() if self.changed_at else None,
            "task_id": self.task_id,
            "restart_problem": self.restart_problem,
            "restart_log": self.restart_log,
            "restart_at": self.restart_at.isoformat() if self.restart_at else None,
        }


def _time(value: object, optional: bool = False) -> datetime | None:
    if value is None and optional:
        return None
    if type(value) is not str:
        raise statefile.Unusable("a record's time is not text")
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise statefile.Unusable("a record's time does not parse") from None
    if when.tzinfo is None:
        raise statefile.Unusable("a record's time has no zone")
    return when


def _text(row: dict[str, Any], name: str, optional: bool = False) -> str | None:
    value = row.get(name)
    if value is None and optional:
        return None
    if type(value) is not str:
        raise statefile.Unusable(f"a record's {name} is not text")
    return value


def waiting_of(row: object) -> Waiting:
    """A record of the file; Unusable when it is not one."""
    if not isinstance(row, dict):
        raise statefile.Unusable("a record is not an object")
    signs = row.get("signs", {})
    state = row.get("state")
    restarts = row.get("restarts", 0)
    within = row.get("within_s", 600.0)
    if not isinstance(signs, dict) or state not in STATES:
        raise statefile.Unusable("a record is not a waiting answer")
    if type(restarts) is not int or isinstance(within, bool) or not isinstance(within, int | float):
        raise statefile.Unusable("a record's counts are not numbers")
    answered_at = _time(row.get("answered_at"))
    deadline = _time(row.get("deadline"))
    assert answered_at is not None and deadline is not None
    return Waiting(
        key=_text(row, "key") or "",
        entry=_text(row, "entry", True),
        block_id=_text(row, "block_id") or "",
        source=_text(row, "source") or "",
        repo=_text(row, "repo") or "",
        path=_text(row, "path") or "",
        title=_text(row, "title", True),
        question=_text(row, "question") or "",
        answered=_text(row, "answered") or "",
        answered_at=answered_at,
        deadline=deadline,
        signs=signs,
        state=state,
        resumed_at=_time(row.get("resumed_at"), True),
        how=_text(row, "how", True),
        restarts=restarts,
        within_s=float(within),
        changed_at=_time(row.get("changed_at"), True),
        task_id=_text(row, "task_id", True),
        restart_problem=_text(row, "restart_problem", True),
        restart_log=_text(row, "restart_log", True),
        restart_at=_time(row.get("restart_at"), True),
    )


def rows_of(data: dict[str, Any], warn: Callable[[str], None] | None = None) -> dict[str, Waiting]:
    """The records of a file's object, by id. A row that is not a record is skipped (one
    warning): the others still show."""
    rows = data.get("records", [])
    if not isinstance(rows, list):
        raise statefile.Unusable("no list of records")
    found: dict[str, Waiting] = {}
    for row in rows:
        try:
            record = waiting_of(row)
        except statefile.Unusable as exc:
            if warn is not None:
                warn(str(exc))
            continue
        found[record.id] = record
    return found
