"""The domain's nouns: a Block the agent wrote, the operator's Answer, and the Plan of file changes.

Nothing here imports Textual. Every source (loopkit, agenticloop, ...) turns bytes on disk into
Blocks, and turns a Block plus an Answer into a Plan; the CLI and the TUI only ever see these.
"""

from __future__ import annotations

import difflib
import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

#: How much of a block file is parsed and shown. Larger files are still listed, fingerprinted over
#: every byte, and answerable; the panes show the first part and say so.
MAX_PARSE_BYTES = 1 << 20


class HitlError(Exception):
    """An error the user can cause or fix: printed as one line, mapped to an exit code."""

    exit_code = 1


class UsageError(HitlError):
    """Bad usage or bad input (unknown choice, empty text): nothing was written."""

    exit_code = 2


class StaleError(HitlError):
    """The block changed or vanished since the operator read it: nothing was written."""

    exit_code = 3


class UnsafePathError(HitlError):
    """A write would leave the repository (a symlink pointing outside, say): nothing was written."""

    exit_code = 1


def fingerprint(data: bytes) -> str:
    """The identity of a block's bytes, as shown by `list --json` and checked before writing."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, slots=True)
class Choice:
    """One listed way out of the block: `B) Keep invoices — needs a migration`."""

    key: str
    option: str
    consequence: str | None = None
    #: The operator must type text with this choice (a note, an answer); the UI asks for it.
    needs_text: bool = False
    #: What the choice does, in its source's words (`default`, `approve`, `resume`, `keep`),
    #: read by that source's planner; None for a choice the agent listed itself. Not compared:
    #: the planner takes it from the choice of that key as parsed again from the file.
    kind: str | None = field(default=None, compare=False)

    def label(self) -> str:
        text = f"{self.key}) {self.option}"
        if self.consequence:
            text += f" — {self.consequence}"
        return text


@dataclass(frozen=True, slots=True)
class Section:
    """A markdown section of a block file that is not one of the four known panes."""

    title: str
    body: str


@dataclass(frozen=True, slots=True)
class Block:
    """One open block, as parsed from untrusted bytes. Every text field is shown literally."""

    id: str
    source: str
    #: A local repository folder; for a remote source its name (`owner/name` on GitHub).
    repo: Path | str
    #: The block file; for a remote source its URL (a GitHub issue's html_url).
    path: Path | str
    state: str
    question: str
    context: str
    attempted: tuple[str, ...]
    choices: tuple[Choice, ...]
    since: datetime
    fingerprint: str
    raw: str
    category: str | None = None
    title: str | None = None
    #: The block in one line when its source words it otherwise than the question (an
    #: agenticloop task: its title, then what is needed); None: the question.
    summary: str | None = None
    extra: tuple[Section, ...] = ()
    #: Why the file did not parse cleanly (shown above the panes); empty when it did.
    problems: tuple[str, ...] = ()
    #: True when only the first MAX_PARSE_BYTES were parsed and shown.
    truncated: bool = False
    #: Separate questions that each want an answer (agenticloop needs_context).
    questions: tuple[str, ...] = ()
    #: What each of `questions` is answered with by default (its recommended default; None:
    #: none): the own-words boxes start from these.
    defaults: tuple[str | None, ...] = ()
    #: False when the block can only be shown (a file that could not be read, a header that
    #: does not parse): its planner refuses every answer.
    answerable: bool = True
    #: The operator's notes on the block, oldest first, each one line (`w`: "Reply and keep
    #: blocked", `service.write_note`): the block stays open, waiting on the operator.
    notes: tuple[str, ...] = ()
    #: Facts only this block's own planner reads (frontmatter, notes, ...). Not shown.
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def repo_name(self) -> str:
        return self.repo.name if isinstance(self.repo, Path) else str(self.repo)

    @classmethod
    def shown_only(
        cls,
        id: str,
        source: str,
        repo: Path,
        path: Path,
        question: str,
        problem: str,
        **fields: Any,
    ) -> Block:
        """A block that can only be shown, never answered (a file that could not be read, a
        header that does not parse): no choices, `problem` above its panes; `fields` sets any
        other field (its text, fingerprint, time)."""
        shown: dict[str, Any] = {
            "state": "blocked",
            "context": "",
            "attempted": (),
            "choices": (),
            "since": datetime.now(UTC),
            "fingerprint": "unreadable",
            "raw": "",
            "answerable": False,
            "problems": (problem,),
        }
        shown.update(fields)
        return cls(id=id, source=source, repo=repo, path=path, question=question, **shown)

    def one_line_question(self, width: int = 200) -> str:
        """The block in one line, as the list shows it: its source's summary when it gives one
        (an agenticloop task: its title, then what is needed), else the question."""
        line = " ".join((self.summary or self.question).split())
        return line if len(line) <= width else line[: width - 1] + "…"

    def find_choice(self, key: str) -> Choice:
        """A choice by its label (`B`, any case) or its 1-based position (`2`)."""
        wanted = key.strip().rstrip(").:").lstrip("(").strip()
        for choice in self.choices:
            if choice.key.casefold() == wanted.casefold():
                return choice
        if wanted.isdigit():
            index = int(wanted)
            if 1 <= index <= len(self.choices):
                return self.choices[index - 1]
        keys = ", ".join(c.key for c in self.choices) or "none; answer with --text"
        raise UsageError(f"no choice {key!r} in {self.id} (choices: {keys})")

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "repo": str(self.repo),
            "source": self.source,
            "path": str(self.path),
            "state": self.state,
            "category": self.category,
            "title": self.title,
            "question": self.question,
            "context": self.context,
            "attempted": list(self.attempted),
            "choices": [
                {"key": c.key, "option": c.option, "consequence": c.consequence}
                for c in self.choices
            ],
            "questions": list(self.questions),
            "since": self.since.isoformat(),
            "fingerprint": self.fingerprint,
            "problems": list(self.problems),
            "truncated": self.truncated,
            "notes": list(self.notes),
        }


@dataclass(frozen=True, slots=True)
class Answer:
    """What the operator decided. Exactly one of `choice` or `texts` carries the decision; with
    neither, a `note` alone keeps the block open (`Source.plan_note`)."""

    choice: Choice | None = None
    #: The operator's own words: one entry, or one per question for a multi-question block.
    texts: tuple[str, ...] = ()
    note: str | None = None
    operator: str = "operator"
    when: datetime = field(default_factory=lambda: datetime.now(UTC))
    #: The decision text as edited in the preview; replaces the generated one.
    decision_override: str | None = None
    #: The batch this answer is one of (`answers.batch`: many blocks answered at once), its
    #: journal group id: recorded with the answer's journal entry. None: answered alone.
    batch: str | None = None

    @property
    def date(self) -> str:
        return self.when.astimezone(UTC).strftime("%Y-%m-%d")

    def decided(self, between: str = " | ") -> str:
        """What was decided, as it reads: the decision as edited, else the choice's label, else
        the operator's words (several joined by `between`)."""
        if self.decision_override is not None:
            return self.decision_override
        if self.choice is not None:
            return self.choice.label()
        if not self.texts and self.note:  # a note that keeps the block open (`plan_note`)
            return f"note: {self.note}"
        return between.join(self.texts)


@dataclass(frozen=True, slots=True)
class FileChange:
    """The new bytes of one file (None: delete it), and the bytes they replace (None: create it)."""

    path: Path
    old: bytes | None
    new: bytes | None

    @property
    def action(self) -> str:
        if self.new is None:
            return "remove"
        if self.old is None:
            return "create"
        return "update"

    def diff(self, root: Path | None = None) -> str:
        name = str(self.path.relative_to(root)) if root else str(self.path)
        before = f"a/{name}" if self.old is not None else "/dev/null"
        after = f"b/{name}" if self.new is not None else "/dev/null"
        whole = self.old if self.new is None else self.new if self.old is None else None
        if whole is not None and len(whole) > MAX_DIFF_BYTES:
            # A huge file created or removed (a 50 MB BLOCKED.md): show its head, not all of it.
            sign = "-" if self.new is None else "+"
            shown = _lines(whole[:MAX_DIFF_BYTES])[:-1]
            count = whole.count(b"\n") + (not whole.endswith(b"\n"))
            span = f"-1,{count} +0,0" if sign == "-" else f"-0,0 +1,{count}"
            rest = len(whole) - sum(len(line.encode("utf-8", "replace")) for line in shown)
            return (
                f"--- {before}\n+++ {after}\n@@ {span} @@\n"
                + "".join(sign + line for line in shown)
                + f"{sign}… (about {max(rest, 0):,} more bytes, not shown)\n"
            )
        old = _lines(self.old)
        new = _lines(self.new)
        return "".join(difflib.unified_diff(old, new, before, after, n=2))


#: A file created or removed that is larger than this shows only its head in a diff.
MAX_DIFF_BYTES = 64 * 1024


def _lines(data: bytes | None) -> list[str]:
    if data is None:
        return []
    text = data.decode("utf-8", "replace")
    lines = text.splitlines(keepends=True)
    # Show CR honestly but keep unified diff lines terminated by \n.
    out = []
    for line in lines:
        body = line.rstrip("\r\n")
        ending = line[len(body) :]
        marker = "␍" if "\r" in ending else ""
        out.append(body + marker + "\n")
    if lines and not lines[-1].endswith(("\n", "\r")):
        out[-1] = out[-1][:-1] + "\n\\ No newline at end of file\n"
    return out


@dataclass(frozen=True, slots=True)
class RemoteAction:
    """One request an answer sends to a remote tracker (a GitHub comment, a label change).

    `description` is one line for the preview and the "done" list; `body` is the exact text
    sent, if any (a comment), shown in full; `data` is what the sender needs (paths, names);
    `diff` the changes another machine's hitl will write (`sources.ssh`).
    """

    kind: str
    description: str
    body: str = ""
    data: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    #: A unified diff made where the answer is written (another machine's hitl), shown as is.
    diff: str = ""

    def preview(self) -> str:
        text = f"# {self.description}\n" + self.diff
        if self.body:
            lines = self.body.rstrip("\n").split("\n")
            text += "".join(f"| {line}\n" if line else "|\n" for line in lines)
        return text


@dataclass(frozen=True, slots=True)
class Done:
    """What carrying out an answer did: one line per thing done (a file written, an answer
    sent, a crash finished first), and the journal entry that records it (None: none does).
    `apply.apply_plan` returns it for a plan written here, a remote backend's `send` for one
    it sent."""

    lines: tuple[str, ...] = ()
    entry: str | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    """Every file change an answer makes, in the order they are applied (the block's removal last).

    `expect` maps each path to the sha256 fingerprint its bytes must still have when applying
    (None: the file must not exist), so a block that changed meanwhile writes nothing.
    """

    block: Block
    answer: Answer
    changes: tuple[FileChange, ...]
    expect: dict[Path, str | None]
    summary: str
    #: What the operator should do next, shown after applying (`/agenticloop T-007`).
    hint: str | None = None
    #: Requests to a remote tracker, in order (GitHub blocks); empty for file sources.
    remote: tuple[RemoteAction, ...] = ()

    def diff(self) -> str:
        root = self.block.repo if isinstance(self.block.repo, Path) else None
        text = "".join(change.diff(root) for change in self.changes)
        return text + "".join(action.preview() for action in self.remote)
