"""agenticloop's task files read as blocks: the header as agenticloop's strict reader reads
it (`frontmatter`), the body's sections and dated notes, and what the operator is asked.

A task is blocked when its header says `status: blocked` (with `block_category`) or
`status: needs_context`. A task whose one `status:` line plainly says it is not blocked is
dismissed before its header is parsed, so a folder of thousands of tasks stays cheap.

Layer: sources (the agenticloop backend package).
"""

from __future__ import annotations

import errno
import functools
import itertools
import os
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from sys import intern
from typing import Any

import hitl_tui.sources.agenticloop.frontmatter as frontmatter
import hitl_tui.sources.agenticloop.template as template
from hitl_tui import fsio
from hitl_tui.model import Block, Choice, Section
from hitl_tui.sources.agentic_common import CATEGORIES, labelled_parts, lettered
from hitl_tui.sources.agenticloop.layout import MAX_DEPTH, shown_folder, unlisted
from hitl_tui.textio import _LINE, heading_of, normalise_heading, one_line

NAME = "agenticloop"
#: A header larger than this is not parsed (it is shown as a broken block).
MAX_FRONTMATTER = 256 * 1024

BLOCK_STATES = ("blocked", "needs_context")
#: Statuses that are plainly not a block: a task saying so is dismissed without YAML.
OTHER_STATES = frozenset(
    {"draft", "agent-ready", "in-progress", "needs_revision", "accepted", "closed"}
)
RESUMED = "agent-ready"

FENCE = ("```", "~~~")
NOTE_LINE = re.compile(r"^\s{0,3}[-*+]\s+(\d{4}-\d{2}-\d{2})\s*:\s?(.*)$")
_NUMBERED = re.compile(r"^\s*(\d{1,2})[.)]\s+(.*)$")
_INLINE_NUMBER = re.compile(r"(?:(?<=\s)|^)(\d{1,2})[.)]\s+")
_BLOCK_WORD = re.compile(r"\bblock(ed|er|ing)?\b")
#: `T-007 - Title`: what follows the task id (matched after it), or any T-number.
_TITLE_REST = re.compile(r"\s*(?:[-–—:]\s*)+(.+)$")
_TITLE_ANY_ID = re.compile(r"T-\d+\s*(?:[-–—:]\s*)+(.+)$")
#: The notes hitl itself writes (see `decide`).
_HITL_NOTE = re.compile(
    r"^(?:Note from .+? \(still [a-z_]+\)|Answers? from [^:]+|Approved by [^:]+"
    r"|Unblocked by [^:]+): "
)
#: hitl's "keep blocked, add a note" note (`writer.decide`, kind keep): the block stays open.
_KEPT_NOTE = re.compile(r"^Note from .+? \(still [a-z_]+\): ")


# -- the header, read as agenticloop reads it -------------------------------------------------


class HeaderError(Exception):
    """The frontmatter cannot be read as agenticloop's strict reader reads it; the message
    (naming the line) is shown to the operator."""


def load_header(text: str) -> dict[str, Any]:
    """The frontmatter's text as a dict, by agenticloop's strict rules (`frontmatter`);
    bounded in size and nesting; raises HeaderError naming the line it refuses."""
    # A character encodes to at most 4 bytes: a short header needs no encoding to be measured.
    if len(text) * 4 > MAX_FRONTMATTER and len(text.encode("utf-8", "surrogateescape")) > (
        MAX_FRONTMATTER
    ):
        raise HeaderError(f"the header is larger than {MAX_FRONTMATTER // 1024} KiB")
    try:
        data, reason = frontmatter.parse_data(text)
    except frontmatter.TooDeep:
        raise HeaderError(f"the header nests more than {MAX_DEPTH} levels deep") from None
    if data is None:
        raise HeaderError(frontmatter.describe(reason or "", text))
    return data


@dataclass(frozen=True, slots=True)
class Split:
    """Where the frontmatter sits in a file's lines: `---` at `start`, closing line at `end`."""

    start: int
    end: int
    header: str


#: The delimiter lines of agenticloop's strict reader (one BOM allowed before the first).
_OPEN_LINE = re.compile(r"\ufeff?---[ \t]*\r?\n\Z")
_CLOSE_LINE = re.compile(r"---[ \t]*(?:\r?\n)?\Z")


def split_header(lines: list[str]) -> Split | None:
    """Find the `---` ... `---` header in lines that keep their endings (TextDoc's, or the same
    split); None when the file has none. HeaderError if it is never closed.

    The header's text is exactly what agenticloop parses: the lines between the delimiters,
    without the line break before the closing one. A line ends only at LF or CRLF there, so a
    delimiter after a lone CR is not one.
    """
    if not lines or not _OPEN_LINE.match(lines[0]):
        return None  # also `----` or `---x`: agenticloop's lenient reader sees no header there
    for i in range(1, len(lines)):
        if lines[i - 1].endswith("\n") and _CLOSE_LINE.match(lines[i]):
            header = "".join(lines[1:i])
            header = header[:-2] if header.endswith("\r\n") else header[:-1]
            return Split(0, i, header)
    raise HeaderError("the header opened with --- is never closed")


def split_lines(text: str) -> list[str]:
    """A text's lines with their endings, cut as TextDoc cuts them (LF, CRLF, CR)."""
    return _LINE.findall(text)


#: Lines that may set the top-level status: any that starts with `status` once trimmed.
_STATUS_ANY = re.compile(
    r"^[" + re.escape(frontmatter.JS_SPACE.replace("\n", "")) + r"]*[\"']?status", re.MULTILINE
)
_STATUS_LINE = re.compile(r"^status[ \t]*:([^\n]*)$", re.MULTILINE)


def quick_not_blocked(header: str) -> bool:
    """True when the header plainly says the task is not blocked (no full parse needed)."""
    if len(_STATUS_ANY.findall(header)) != 1:
        return False
    found = _STATUS_LINE.findall(header)
    if len(found) != 1:
        return False
    value = frontmatter.trim(found[0])
    if value[:1] == "[":
        return False
    text, _ = frontmatter.parse_scalar(value)
    return isinstance(text, str) and text.lower() in OTHER_STATES


#: The common header, read without its line-by-line rules (`plain_header`): the file starts
#: `---` LF, then only lines `key: value` (an ASCII name, spaces, a plain ASCII value that
#: neither starts with a quote, `[`, `|`, `>` nor `#`, nor ends in a space), `# comments` or
#: empty lines, each ending in LF, then `---` LF.
_PLAIN_HEADER = re.compile(
    r"---\n((?:(?:[A-Za-z_][A-Za-z0-9_-]*:[ ]*[!$-&(-=?-Z\\\]-{}~](?:[ -~]*[!-~])?"
    r"|#[ -~]*|)\n)*)---\n"
)
_PLAIN_ITEM = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*):[ ]*([^\n]+)$", re.MULTILINE)
#: Whether read_task tries `plain_header` first (the equivalence tests turn it off).
FAST_HEADER = True


def plain_header(text: str) -> tuple[dict[str, Any], int] | None:
    """(the header, where the body starts) of a file whose header is all plain `key: value`
    lines, as `split_header` and `load_header` read it, in one pass; None for any other file
    (read by the full rules then). `tests/test_agenticloop_fast.py` holds it to them."""
    m = _PLAIN_HEADER.match(text)
    if m is None or (m.end(1) - m.start(1)) * 4 > MAX_FRONTMATTER:
        return None
    # The names repeat from file to file: each held once, not once per block.
    data = {intern(k): v for k, v in _PLAIN_ITEM.findall(text, m.start(1), m.end(1))}
    data.pop("__proto__", None)  # as `frontmatter._assign`: JavaScript sets no such key
    return data, m.end()


# -- reading the body -------------------------------------------------------------------------


def heading(line: str) -> tuple[int, str] | None:
    """(level, text) of a CommonMark ATX heading line (a space after the hashes), else None."""
    return heading_of(line, require_space=True)


@dataclass(frozen=True, slots=True)
class Note:
    """One dated comment, `- 2026-08-21: text`, with its indented continuation lines."""

    date: str
    first: str
    more: tuple[str, ...]
    position: int
    #: The note on one line; computed once, as every step of the parse reads it.
    text: str


@dataclass
class Body:
    """What the markdown below the header holds, as far as the operator needs it."""

    title: str | None = None
    sections: list[tuple[str, str]] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    #: normalise_heading of each section's title, in the same order (computed once).
    names: list[str] = field(default_factory=list)


def parse_body(text: str) -> Body:
    """The H1, the H2 sections, and the dated notes (from `## Comments`, else anywhere)."""
    body = Body()
    current: str | None = None
    buffer: list[str] = []
    fence = False
    comment_lines: list[str] = []
    all_lines = text.split("\n")

    current_name = ""

    def flush() -> None:
        if current is not None:
            body.sections.append((current, "\n".join(buffer).strip("\n")))
            body.names.append(current_name)

    for line in all_lines:
        line = line.rstrip("\r")
        if ("```" in line or "~~~" in line) and line.strip().startswith(FENCE):
            fence = not fence
        # A heading's `#` is within its first four characters: most lines need no closer look.
        found = None if fence or "#" not in line[:4] else heading(line)
        if found and found[0] == 1 and body.title is None and current is None:
            body.title = found[1]
            continue
        if found and found[0] <= 2:
            flush()
            current = found[1]
            current_name = normalise_heading(current)
            buffer = []
            continue
        if current is not None:
            buffer.append(line)
            if current_name == "comments":
                comment_lines.append(line)
    flush()
    body.notes = parse_notes(comment_lines) or parse_notes(all_lines)
    return body


def parse_notes(lines: list[str]) -> list[Note]:
    """Dated notes in file order; indented lines below a note belong to it."""
    notes: list[Note] = []
    first: str | None = None
    date = ""
    more: list[str] = []

    def close() -> None:
        if first is not None:
            stripped = first.strip()
            text = one_line(" ".join((stripped, *more)))
            notes.append(Note(date, stripped, tuple(more), len(notes), text))

    for raw in lines:
        line = raw.rstrip("\r")
        m = NOTE_LINE.match(line)
        if m:
            close()
            date, first, more = m.group(1), m.group(2), []
        elif first is not None and line[:1] in (" ", "\t") and line.strip():
            more.append(line.strip())
        elif first is not None and line.strip():
            close()
            first = None
    close()
    return notes


def newest_first(notes: list[Note]) -> list[Note]:
    """Notes by date, newest first. Same-day notes follow the file's own direction."""
    ups = sum(1 for a, b in itertools.pairwise(notes) if b.date > a.date)
    downs = sum(1 for a, b in itertools.pairwise(notes) if b.date < a.date)
    appended = ups > downs  # oldest first in the file: a later line is the newer note
    return sorted(notes, key=lambda n: (n.date, n.position if appended else -n.position))[::-1]


def _labelled(text: str) -> tuple[str, dict[str, str]]:
    """`head. Checked: x. Tried: y.` as the head and {label: its first non-empty text}."""
    head, found = labelled_parts(text)
    parts: dict[str, str] = {}
    for label, value in found:
        if value:
            parts.setdefault(label, value)
    return head, parts


def _recommended(parts: dict[str, str]) -> str | None:
    value = parts.get("recommended default") or parts.get("recommended") or ""
    return value.rstrip(" .") or None


def numbered_items(note: Note) -> list[str]:
    """The numbered questions of a note: on their own lines, else inline `1. ... 2. ...`."""
    items: list[str] = []
    expected = 1
    for line in note.more:
        m = _NUMBERED.match(line)
        if m and int(m.group(1)) == expected:
            items.append(m.group(2).strip())
            expected += 1
        elif items:
            items[-1] += " " + line.strip()
    if items:
        return [one_line(item) for item in items]
    starts = []
    expected = 1
    for m in _INLINE_NUMBER.finditer(note.text):
        if int(m.group(1)) == expected:
            starts.append(m)
            expected += 1
    if len(starts) < 2:
        return []
    return [
        note.text[m.end() : (nxt.start() if nxt else len(note.text))].strip()
        for m, nxt in zip(starts, [*starts[1:], None], strict=False)
    ]


def _single_inline_question(text: str) -> str | None:
    """The question of `... Questions for the maintainer: 1. How long ...?` (only a `1.`)."""
    found = [m for m in _INLINE_NUMBER.finditer(text) if m.group(1) in ("1", "2")]
    if len(found) != 1 or found[0].group(1) != "1":
        return None
    return text[found[0].end() :].strip() or None


def _summary(
    title: str | None, question: str, split_items: list[tuple[str, dict[str, str]]]
) -> str:
    """The list's one line: the task's title, then what is needed (the question itself)."""
    if split_items:
        heads = " ".join(h or " ".join(p.values()) for h, p in split_items)
        what = f"{len(split_items)} questions: {heads}"
    else:
        what = question
    return f"{title} — {what}" if title else what


def strip_title(h1: str, task_id: str) -> str:
    """`T-007 - Switch storage` gives `Switch storage`."""
    m = _TITLE_REST.match(h1, len(task_id)) if h1.startswith(task_id) else None
    if m is None:
        m = _TITLE_ANY_ID.match(h1)
    return m.group(1).strip() if m else h1


def _mentions_block(note: Note, state: str, category: str | None) -> bool:
    text = note.text.lower()
    if state == "needs_context":
        return bool(
            "needs_context" in text
            or "needs context" in text
            or "question" in text
            or len(numbered_items(note)) > 0
        )
    return bool(_BLOCK_WORD.search(text) or (category and category in text))


def status_of(data: bytes) -> str | None:
    """A task file's status as agenticloop reads its header (lower case); None without one."""
    try:
        split = split_header(split_lines(data.decode("utf-8", "replace")))
        if split is None:
            return None
        header = load_header(split.header)
    except HeaderError:
        return None
    status = frontmatter.string(header.get("status")).lower()
    return status or None


def _task_id(header: dict[str, Any], path: Path) -> str:
    return one_line(frontmatter.string(header.get("task_id"))) or path.stem


def _context(
    title: str | None,
    state: str,
    category: str | None,
    parts: dict[str, str],
    body: Body,
    header: dict[str, Any],
    note: Note | None,
) -> str:
    lines: list[str] = []
    if title:
        lines.append(f"Task: {title}")
    if state == "blocked":
        if category is None:
            lines.append("Category: (none given)")
        else:
            meaning = CATEGORIES.get(category, "not one of the documented categories")
            lines.append(f"Category: {category} — {meaning}")
    else:
        reason = frontmatter.string(header.get("context_reason")) or None
        if reason is None and note is not None and "context_overflow" in note.text:
            reason = "context_overflow"
        lines.append("Needs context" + (f" ({one_line(str(reason))})" if reason else ""))
    if "checked" in parts:
        lines.append(f"Checked: {parts['checked']}")
    who = parts.get("who can unblock") or parts.get("who can answer") or parts.get("who")
    if who:
        lines.append(f"Who can unblock: {who}")
    task = ""
    for (_, text), name in zip(body.sections, body.names, strict=True):
        if name == "task":
            task = "" if template.unfilled(text) else text.strip()
            break
    if task:
        lines.extend(["", task])
    return "\n".join(lines)


def _tried(mentioning: list[Note], split: dict[str, dict[str, str]]) -> tuple[str, ...]:
    """The `Tried:` parts of the notes that mention the block, newest first, each once."""
    tried: list[str] = []
    for note in mentioning:
        parts = split.get(note.text)
        if parts is None:
            parts = split[note.text] = _labelled(note.text)[1]
        value = parts.get("tried")
        if value and value not in tried:
            tried.append(value)
    return tuple(tried)


@functools.lru_cache(maxsize=1024)
def _choices(
    state: str, has_category: bool, gate: bool, recommended: str | None, multi: bool
) -> tuple[Choice, ...]:
    """The ways out, keyed A, B, C... in a fixed order; each says which lines it changes.

    Made once for each combination (they repeat from task to task): a fleet's blocks share
    their frozen choices, as `codec.thaw`'s do."""
    resume = f"status: {state} → {RESUMED}"
    if has_category:
        resume += "; the block_category line is deleted"
    found: list[tuple[str, str, str, bool]] = []
    if recommended:
        word = "defaults" if multi else "default"
        effects = resume + (
            "; approved: true" if gate and recommended.lower().startswith("approv") else ""
        )
        found.append(
            (
                "default",
                f"Accept the recommended {word}: {recommended}",
                f"a dated note accepting it under ## Comments; {effects}",
                False,
            )
        )
    if gate:
        found.append(
            (
                "approve",
                "Approve the change request",
                f"a dated approval note under ## Comments; {resume}; approved: true",
                False,
            )
        )
    found.append(
        (
            "resume",
            "Resume with a note",
            f"your answer as a dated note under ## Comments; {resume}",
            True,
        )
    )
    found.append(
        (
            "keep",
            f"Keep {state}, add a note",
            "only your dated note under ## Comments is written; status and the rest stay",
            True,
        )
    )
    return lettered(found)


# -- a task file to a block ------------------------------------------------------------------


def read_task(repo: Path, path: Path, label: str) -> Block | None:
    """The block of the task file `path`: None when it holds no open block (not blocked,
    no header, gone); an unreadable block when it cannot be read or its header parsed."""
    try:
        # No stat first: read_file opens without blocking (a FIFO) and refuses anything
        # that is not a regular file (IsADirectoryError).
        read = fsio.read_file(path)
    except OSError as exc:
        why: str | None = str(exc)
        if isinstance(exc, (FileNotFoundError, NotADirectoryError, IsADirectoryError)) or (
            exc.errno == errno.ENXIO  # a socket
        ):
            # Something that is no file to read (a FIFO, a folder, a device, a symlink to
            # nothing) may hide a blocked task: an unreadable block keeps the loop stopped.
            why = fsio.why_not_a_file(path)
            if why is None:
                return None  # nothing there (or it went away meanwhile): no block
        return broken(
            repo, path, label, path.stem, "", f"the task file could not be read: {why}", None
        )
    text = read.head.decode("utf-8", "replace")
    plain = plain_header(text) if FAST_HEADER else None
    if plain is not None:
        header, start = plain
        state = frontmatter.string(header.get("status")).lower()
        if state not in BLOCK_STATES:
            return None
        return task_block(repo, path, label, header, state, text[start:], text, read)
    lines = split_lines(text)
    try:
        split = split_header(lines)
        if split is None:
            return None  # no header, no status: not a task this loop can block
        if quick_not_blocked(split.header):
            return None
        header = load_header(split.header)
    except HeaderError as exc:
        return broken(
            repo, path, label, path.stem, text, f"the task header does not parse: {exc}", read
        )
    state = frontmatter.string(header.get("status")).lower()
    if state not in BLOCK_STATES:
        return None
    body_text = "".join(lines[split.end + 1 :])
    return task_block(repo, path, label, header, state, body_text, text, read)


def task_block(
    repo: Path,
    path: Path,
    label: str,
    header: dict[str, Any],
    state: str,
    body_text: str,
    text: str,
    read: fsio.FileRead,
) -> Block:
    task_id = _task_id(header, path)
    category = one_line(frontmatter.string(header.get("block_category"))) or None
    body = parse_body(body_text)
    problems: list[str] = []
    title = strip_title(body.title, task_id) if body.title else None
    notes = newest_first(body.notes)
    # The operator's "keep blocked, add a note" notes newer than any other: it waits on them.
    kept = list(itertools.takewhile(lambda n: _KEPT_NOTE.match(n.text[:300]) is not None, notes))
    # hitl's own notes ("Note from Ada (still blocked): ...") never explain the block.
    notes = [n for n in notes if not _HITL_NOTE.match(n.text[:300])]
    mentioning = [n for n in notes if _mentions_block(n, state, category)]
    note = mentioning[0] if mentioning else (notes[0] if notes else None)
    items = numbered_items(note) if note is not None and state == "needs_context" else []
    single = None
    if note is not None and state == "needs_context" and len(items) < 2:
        # One question (`needs_context. Questions for the maintainer: 1. How long...?`):
        # the question is that item; its Checked/Recommended/Who parts are the note's.
        single = items[0] if items else _single_inline_question(note.text)
        items = []
    # With numbered questions, each question carries its own Checked/Who parts.
    head, parts = _labelled(
        single if single is not None else (note.first if items else note.text) if note else ""
    )
    # The parts of a note's text, each split once (`_tried` reads the same notes again).
    split_notes = {note.text: parts} if note is not None and not items else {}
    split_items = [_labelled(q) for q in items]
    gate = (
        frontmatter.string(header.get("type")).lower() == "change-request"
        and category == "contract"
    )

    questions = tuple(items)
    defaults: tuple[str | None, ...] = tuple(_recommended(p) for _, p in split_items)
    if items:
        question = "\n".join(f"{i}. {q}" for i, q in enumerate(items, 1))
        recommended = None
        if all(defaults):
            recommended = "; ".join(f"{i}. {d}" for i, d in enumerate(defaults, 1))
    else:
        question = parts.get("needed") or (head if single else "") or (note.text if note else "")
        recommended = _recommended(parts)
        defaults = (recommended,)
    if not question:
        question = f"(no note under ## Comments says why {task_id} is {state})"
        problems.append("No dated note under ## Comments explains the block.")
    if state == "blocked" and category is None:
        problems.append("status is blocked but block_category is missing.")
    if path.is_symlink() and not fsio.is_inside(path.resolve(), repo.resolve()):
        problems.append("The task file is a symlink leading outside the repository.")
    if read.truncated:
        problems.append(
            f"The file is {read.size:,} bytes; only the first {len(read.head):,} are shown."
        )

    context = _context(title, state, category, parts, body, header, note)
    attempted = _tried(mentioning, split_notes)
    has_category = "block_category" in header
    choices = _choices(state, has_category, gate, recommended, bool(items))
    # A section still holding the template's instructions is empty: the detail folds it.
    sections = [
        Section(t, "" if template.unfilled(b) else b.strip())
        for (t, b), name in zip(body.sections, body.names, strict=True)
        if name not in ("task", "comments")
    ]
    return Block(
        id=f"{label}/{task_id}",
        source=NAME,
        repo=repo,
        path=path,
        state=state,
        question=question,
        context=context,
        attempted=attempted,
        choices=choices,
        since=read.mtime,
        fingerprint=read.fingerprint,
        raw=text,
        category=category if state == "blocked" else None,
        title=title,
        extra=tuple(sections),
        problems=tuple(problems),
        truncated=read.truncated,
        notes=tuple(f"{n.date}, {n.text}" for n in reversed(kept)),
        questions=questions if len(questions) > 1 else (),
        defaults=defaults if len(questions) > 1 else (recommended,),
        summary=_summary(title, question, split_items),
        meta={
            "task_id": task_id,
            "status": state,
            "approval_gate": gate,
            "recommended": recommended,
            "question_heads": tuple(h for h, _ in split_items),
            "note": note.text if note else None,
            # The day of that note: when the block began (`inbox.began`).
            "note_date": note.date if note else None,
            "header": header,
            "head": head,
        },
    )


def unlisted_folder(repo: Path, folder: Path, label: str) -> Block | None:
    """The task folder that is there but cannot be listed (a FIFO or a file in its place,
    a symlink to nothing, no permission): its tasks may be blocked, so it is a block."""
    try:
        os.scandir(folder).close()
    except OSError as exc:
        why = unlisted(repo, folder, exc)
    else:
        return None
    if why is None:
        return None
    problem = f"the task folder {shown_folder(repo, folder)} cannot be read: {why}"
    return broken(repo, folder, label, folder.name, "", problem, None)


def broken(
    repo: Path,
    path: Path,
    label: str,
    task_id: str,
    text: str,
    problem: str,
    read: fsio.FileRead | None,
) -> Block:
    return Block.shown_only(
        f"{label}/{task_id}",
        NAME,
        repo,
        path,
        f"({task_id}: {problem})",
        problem,
        context="Fix the file by hand; hitl answers a task only when its header parses.",
        since=read.mtime if read else datetime.now(UTC),
        fingerprint=read.fingerprint if read else "unreadable",
        raw=text,
        truncated=read.truncated if read else False,
        meta={"task_id": task_id},
    )
