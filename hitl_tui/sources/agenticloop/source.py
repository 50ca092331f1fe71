"""agenticloop, files backend: task files with a frontmatter header (FORMATS.md §2).

Headers and `.agenticloop/project.md` are read by agenticloop's own rules (`frontmatter`), not as
YAML: what its reader makes of a header is what the loop acts on. A task is blocked when its
header says `status: blocked` (with `block_category`) or `status: needs_context`. The layout
comes from project.md as agenticloop loads it; a project.md that cannot be read, or a task
folder that would lead outside the repository, is a warning for the repository (`warnings`),
never a block.

Answers are written the way the loop's own CLI would: one dated note directly under
`## Comments`, and only the `status`, `block_category` and `approved` lines of the header edited,
by line, so comments, key order, quoting and every other byte survive. The result is parsed
again with the same reader and the write refused if anything else moved.

A folder of thousands of tasks stays cheap: a task whose one `status:` line plainly says it is
not blocked is dismissed before its header is parsed.
"""

from __future__ import annotations

import errno
import itertools
import os
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import hitl_tui.sources.agenticloop.frontmatter as frontmatter
from hitl_tui import fsio
from hitl_tui.model import (
    Answer,
    Block,
    Choice,
    FileChange,
    HitlError,
    Plan,
    Section,
    StaleError,
    UsageError,
    fingerprint,
)
from hitl_tui.sources.agentic_common import CATEGORIES, labelled_parts, lettered
from hitl_tui.sources.base import Source
from hitl_tui.textio import (
    _LINE,
    TextDoc,
    heading_of,
    normalise_heading,
    one_line,
    placeholder_in,
)

NAME = "agenticloop"
PROJECT = Path(".agenticloop") / "project.md"
DEFAULT_TEMPLATE = ".agenticloop/tasks/{taskId}.md"
DEFAULT_FOLDER = DEFAULT_TEMPLATE.rpartition("/")[0]
#: A header larger than this is not parsed (it is shown as a broken block).
MAX_FRONTMATTER = 256 * 1024
#: Deepest `[`/`{` nesting parsed; real headers nest two or three levels.
MAX_DEPTH = frontmatter.MAX_DEPTH

BLOCK_STATES = ("blocked", "needs_context")
#: Statuses that are plainly not a block: a task saying so is dismissed without YAML.
OTHER_STATES = frozenset(
    {"draft", "agent-ready", "in-progress", "needs_revision", "accepted", "closed"}
)
RESUMED = "agent-ready"
EDITABLE_KEYS = ("status", "block_category", "approved")
EPOCH = datetime.fromtimestamp(0, UTC)

#: Sections that follow `## Comments` in the loop's template: a new Comments goes before them.
AFTER_COMMENTS = ("revision log",)

_FENCE = ("```", "~~~")
_NOTE = re.compile(r"^\s{0,3}[-*+]\s+(\d{4}-\d{2}-\d{2})\s*:\s?(.*)$")
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
_KEY_LINE = "^{key}[ \t]*:"


# -- the header, read as agenticloop reads it -------------------------------------------------


class HeaderError(Exception):
    """The frontmatter cannot be read as agenticloop's strict reader reads it; the message
    (naming the line) is shown to the operator."""


def load_header(text: str) -> dict:
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
        if line.strip().startswith(_FENCE):
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
        m = _NOTE.match(line)
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


def _summary(title: str | None, question: str, split_items: list) -> str:
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


# -- the layout of a repo ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Layout:
    """Where a repo keeps its tasks, read from `.agenticloop/project.md`."""

    backend: str = "files"
    folder: Path | None = None
    #: What is wrong with project.md or its template, and which folder is read instead: a
    #: warning for the repository, never a block.
    warning: str | None = None
    stamp: str = "layout"


def _mtime(path: str | Path) -> datetime | None:
    try:
        return datetime.fromtimestamp(os.lstat(path).st_mtime, UTC)
    except OSError:
        return None


def _read_project(project: Path) -> tuple[str | None, dict, str]:
    """(what is wrong with project.md or None, the mapping agenticloop loads from it, stamp).

    agenticloop loads project.md with its lenient reader (`loadProjectMap`: invalid lines are
    skipped, no header means every default), so that mapping decides the task folder, exactly
    as the loop's own commands find it. What its strict reader refuses is the warning.
    """
    if not os.path.isfile(project):  # a folder, a FIFO, a dangling symlink: never opened
        return "it is not a regular file", {}, "layout"
    read = fsio.read_file(project)
    raw = read.head
    if read.truncated:
        return f"it is larger than {len(raw) // 1024} KiB", {}, read.fingerprint
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or "\0" in text:
        loose = raw.decode("utf-8", "replace")  # what agenticloop's readFileSync gives
        lenient = _lenient(loose)
        return "it is not UTF-8 text", lenient, read.fingerprint
    lenient = _lenient(text)
    try:
        strict = frontmatter.read_frontmatter(text)
    except frontmatter.TooDeep:
        return f"its header nests more than {MAX_DEPTH} levels deep", lenient, read.fingerprint
    if strict.state == "absent":
        return "it has no --- header", lenient, read.fingerprint
    if strict.state == "malformed":
        problem = frontmatter.describe(strict.reason or "", strict.text)
        return problem, lenient, read.fingerprint
    if text.startswith("\ufeff"):
        return (
            "it starts with a byte-order mark, so agenticloop ignores its header",
            {},
            (read.fingerprint),
        )
    return None, lenient, read.fingerprint


def _lenient(text: str) -> dict:
    try:
        return frontmatter.read_lenient(text) or {}
    except frontmatter.TooDeep:
        return {}


def _shown_folder(repo: Path, folder: Path) -> str:
    rel = os.path.relpath(folder, repo)
    return "the repository's top folder" if rel == "." else f"{rel}/"


def read_layout(repo: Path) -> Layout:
    """The task backend and folder of `repo`, and a warning when project.md or its template
    is not what agenticloop accepts (saying which folder is read instead, if any)."""
    own = fsio.child(repo, ".agenticloop")
    project = fsio.child(own, PROJECT.name)
    project_time = _mtime(project)
    if project_time is None and _mtime(own) is None:
        # No .agenticloop at all (most repos of a mixed fleet): the default folder, which
        # cannot lead anywhere because none of it exists.
        return Layout("files", fsio.child(own, "tasks"))
    problems: list[str] = []
    meta: dict = {}
    stamp = "layout"
    if project_time is not None:  # no project.md: agenticloop's defaults, nothing to say
        try:
            problem, meta, stamp = _read_project(project)
        except OSError as exc:
            problem = exc.strerror or str(exc)
        if problem is not None:
            problems.append(f"{PROJECT} could not be read ({problem})")
    backend = meta.get("task_backend", "files")
    if backend == "github":
        warning = None
        if problems:
            warning = "; ".join(problems) + "; task_backend is github, so no task folder is read"
        return Layout("github", None, warning, stamp)
    if backend != "files":
        problems.append(f"{PROJECT} names an unknown task_backend {_shown(backend)}")
    folder, refused = _task_folder(repo, meta.get("task_file_template", DEFAULT_TEMPLATE))
    if refused:
        problems.append(f"the task folder is refused: {refused}")
    if not problems:
        return Layout("files", folder, None, stamp)
    if folder is None:
        where = "no task folder is read"
    else:
        where = f"looking for tasks in {_shown_folder(repo, folder)}"
        if project_time is not None and problems[0].startswith(str(PROJECT) + " could not"):
            where += " (where agenticloop itself looks)"
    return Layout("files", folder, "; ".join([*problems, where]), stamp)


def _shown(value: object) -> str:
    text = value if isinstance(value, str) else ("an empty value" if value == {} else str(value))
    return repr(one_line(text)) if isinstance(value, str) else text


def _task_folder(repo: Path, template: object) -> tuple[Path | None, str | None]:
    if not isinstance(template, str) or not template.strip():
        return None, f"task_file_template is {_shown(template)}, not a path"
    shown = one_line(template)
    # agenticloop reads a backslash as a folder separator (`task_file_template` on Windows).
    head, _, name = template.strip().replace("\\", "/").rpartition("/")
    if "{taskId}" not in name:
        return None, f"task_file_template {shown!r} does not end in a {{taskId}} file name"
    if "{" in head:
        return None, f"task_file_template {shown!r} puts a placeholder in the folder part"
    if head.startswith(("/", "~")) or os.path.isabs(head):
        return None, f"task_file_template {shown!r} is an absolute path"
    # Strings, not Paths: this runs for every repository at every scan.
    top = os.fspath(repo)
    where = os.path.normpath(os.path.join(top, head)) if head else top
    if not _real_inside(where, top):  # both absolute and normalised, like realpath's results
        return None, f"task_file_template {shown!r} points outside the repository"
    folder = Path(where) if where != top else repo
    existing = where
    while not os.path.lexists(existing) and existing != top:
        existing = os.path.dirname(existing)
    # The repo itself is inside itself: only a folder below it can lead out, through a symlink.
    if (
        existing != top
        and _has_symlink_below(top, existing)
        and not _real_inside(os.path.realpath(existing), os.path.realpath(top))
    ):
        return None, f"{head or '.'} leads outside the repository (a symlink)"
    return folder, None


def _unlisted(repo: Path, folder: Path, exc: OSError) -> str | None:
    """Why the task folder, whose listing failed with `exc`, is there but unreadable, or None
    when it is simply not there (nor the one it would be made in: a repo with no tasks yet)."""
    if folder == repo:
        return None
    if not isinstance(exc, (FileNotFoundError, NotADirectoryError)):
        return exc.strerror or str(exc)  # there, but not for us (EACCES, EIO)
    here = folder
    while here != repo and not os.path.lexists(here):
        here = here.parent
    if here == repo:
        return None
    if os.path.isdir(here):
        return None  # a folder on the way, without the task folder in it yet
    why = fsio.why_not_a_file(here) or "it is a file"  # None: a regular file
    why = why.removesuffix(", not a file") + ", not a folder"
    rel = os.path.relpath(here, repo)
    return why if here == folder else f"{rel} is in the way: {why}"


def _has_symlink_below(top: str, inner: str) -> bool:
    """Whether a folder on the way from `top` down to `inner` (normalised, below it) is a
    symlink. A few lstats: os.path.realpath costs a dozen, and this runs for every repo."""
    here = top
    for part in inner[len(top) :].strip(os.sep).split(os.sep):
        here = os.path.join(here, part)
        if os.path.islink(here):
            return True
    return False


def _real_inside(child: str, parent: str) -> bool:
    """is_inside for two results of os.path.realpath (absolute, normalised, no symlinks)."""
    return child == parent or child.startswith(parent.rstrip("/") + "/")


# -- the source -------------------------------------------------------------------------------


class AgenticloopSource(Source):
    """Task files of agenticloop's files backend."""

    name = NAME

    def __init__(self) -> None:
        self._layouts: dict[Path, Layout] = {}

    def layout(self, repo: Path, fresh: bool = False) -> Layout:
        """The repo's layout, cached until `block_files` (a full scan) reads it again."""
        if fresh or repo not in self._layouts:
            self._layouts[repo] = read_layout(repo)
        return self._layouts[repo]

    def watch_dirs(self, repo: Path) -> list[Path]:
        layout = self.layout(repo)
        dirs = [repo / ".agenticloop"]
        if layout.folder is not None:
            existing = layout.folder
            while not os.path.isdir(existing) and existing != repo:
                existing = existing.parent
            dirs.append(existing)
        return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]

    def block_files(self, repo: Path) -> list[Path]:
        layout = self.layout(repo, fresh=True)
        files: list[Path] = []
        if layout.folder is None:
            return files
        try:
            entries = list(os.scandir(layout.folder))
        except OSError as exc:
            if _unlisted(repo, layout.folder, exc) is not None:
                files.append(layout.folder)  # `parse` makes it an unreadable block
            return files
        # Every `.md` entry, files or not: one that is not a file to read (a FIFO, a folder, a
        # symlink to nothing) may hide a blocked task, so `parse` makes it an unreadable block.
        names = [
            entry.name
            for entry in entries
            if entry.name.endswith(".md") and not entry.name.startswith(fsio.TEMP_PREFIX)
        ]
        # Names in one folder sort as their paths do; sorting strings skips pathlib's parts.
        folder = layout.folder
        files.extend(fsio.child(folder, name) for name in sorted(names))
        return files

    def warnings(self, repo: Path) -> list[str]:
        """What is wrong with the repo's project.md or template (read by the last scan), each
        saying which task folder is read instead: warnings, never blocks."""
        warning = self.layout(repo).warning
        return [warning] if warning else []

    def layout_files(self, repo: Path) -> list[Path]:
        return [repo / PROJECT]

    def claims(self, repo: Path, path: Path) -> bool:
        folder = self.layout(repo).folder
        if folder is None:
            return False
        return path == folder or (path.parent == folder and path.name.endswith(".md"))

    def layout_changed(self, repo: Path, path: Path) -> bool:
        if path in (repo / PROJECT, repo / ".agenticloop"):
            return True
        folder = self.layout(repo).folder
        if folder is None:
            return False
        inside = path != repo and fsio.is_inside(path, repo)
        return inside and (path == folder or path in folder.parents)

    # -- parsing ---------------------------------------------------------------------------

    def cacheable(self, repo: Path, path: Path) -> bool:
        # A task's block is its file's bytes, mtime and the label. project.md's block is the
        # layout, which depends on other files, and the task folder's is a failed listing:
        # always read afresh.
        if path.name == PROJECT.name and path == repo / PROJECT:
            return False
        return path != self.layout(repo).folder

    def parse(self, repo: Path, path: Path, label: str) -> Block | None:
        if path.name == PROJECT.name and path == repo / PROJECT:
            return None  # a layout problem is a warning (`warnings`), never a block
        if path == self.layout(repo).folder:
            return self._unlisted_folder(repo, path, label)
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
            return self._broken(
                repo, path, label, path.stem, "", f"the task file could not be read: {why}", None
            )
        text = read.head.decode("utf-8", "replace")
        lines = split_lines(text)
        try:
            split = split_header(lines)
            if split is None:
                return None  # no header, no status: not a task this loop can block
            if quick_not_blocked(split.header):
                return None
            header = load_header(split.header)
        except HeaderError as exc:
            return self._broken(
                repo, path, label, path.stem, text, f"the task header does not parse: {exc}", read
            )
        state = frontmatter.string(header.get("status")).lower()
        if state not in BLOCK_STATES:
            return None
        body_text = "".join(lines[split.end + 1 :])
        return self._task_block(repo, path, label, header, state, body_text, text, read)

    def _task_block(
        self,
        repo: Path,
        path: Path,
        label: str,
        header: dict,
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
            question = (
                parts.get("needed") or (head if single else "") or (note.text if note else "")
            )
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
        sections = [
            Section(t, b.strip())
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

    def _unlisted_folder(self, repo: Path, folder: Path, label: str) -> Block | None:
        """The task folder that is there but cannot be listed (a FIFO or a file in its place,
        a symlink to nothing, no permission): its tasks may be blocked, so it is a block."""
        try:
            os.scandir(folder).close()
        except OSError as exc:
            why = _unlisted(repo, folder, exc)
        else:
            return None
        if why is None:
            return None
        problem = f"the task folder {_shown_folder(repo, folder)} cannot be read: {why}"
        return self._broken(repo, folder, label, folder.name, "", problem, None)

    def _broken(
        self,
        repo: Path,
        path: Path,
        label: str,
        task_id: str,
        text: str,
        problem: str,
        read: fsio.FileRead | None,
    ) -> Block:
        return Block(
            id=f"{label}/{task_id}",
            source=NAME,
            repo=repo,
            path=path,
            state="blocked",
            question=f"({task_id}: {problem})",
            context="Fix the file by hand; hitl answers a task only when its header parses.",
            attempted=(),
            choices=(),
            since=read.mtime if read else datetime.now(UTC),
            fingerprint=read.fingerprint if read else "unreadable",
            raw=text,
            problems=(problem,),
            truncated=read.truncated if read else False,
            answerable=False,
            meta={"task_id": task_id},
        )

    # -- answering -------------------------------------------------------------------------

    def decision_text(self, block: Block, answer: Answer) -> str:
        """The dated note's text, without its date; the operator may edit it in the preview."""
        if answer.decision_override is not None:
            return one_line(answer.decision_override)
        return decide(block, answer).note

    def plan(self, block: Block, answer: Answer) -> Plan:
        if not block.answerable:
            raise HitlError(f"{block.id}: the task header does not parse; fix the file by hand")
        task_id = block.meta["task_id"]
        fsio.resolve_for_write(block.repo, block.path)
        old = fsio.read_bytes(block.path)
        if old is None:
            raise StaleError(f"{block.id}: the task file is gone")
        if fingerprint(old) != block.fingerprint:
            raise StaleError(f"{block.id}: the task file changed since it was read")
        decision = decide(block, answer)
        note = self.decision_text(block, answer)
        if not note:
            raise UsageError("the note is empty")
        check_placeholders(note)
        new = write_answer(old, answer.date, note, decision.resume, decision.approve)
        effects = ["note added under ## Comments"]
        if decision.resume:
            effects.append(f"status: {block.state} → {RESUMED}")
            if "block_category" in block.meta["header"]:
                effects.append("block_category removed")
        if decision.approve:
            effects.append("approved: true")
        hint = f"Restart the loop on the task: /agenticloop {task_id}"
        if not decision.resume:
            hint = f"{task_id} stays {block.state}: only the note was added"
        return Plan(
            block,
            answer,
            (FileChange(block.path, old, new),),
            {block.path: block.fingerprint},
            f"{block.id}: " + "; ".join(effects),
            hint=hint,
        )

    # -- did the loop resume? ------------------------------------------------------------------

    def resume_signs(self, block: Block, plan: Plan) -> dict:
        """The task file's fingerprint as the answer wrote it, and the status it set."""
        path = Path(block.path)
        new = next((c.new for c in plan.changes if c.path == path), None)
        if new is None:
            return {"file": fsio.current_fingerprint(path), "status": block.state}
        return {"file": fingerprint(new), "status": status_of(new)}

    def resumed(self, waiting) -> str | None:
        """The task's status moved on from what the answer set, or the loop changed the file
        (a note, a comment) since."""
        signs = waiting.signs if isinstance(waiting.signs, dict) else {}
        path = Path(waiting.path)
        try:
            read = fsio.read_file(path)
        except FileNotFoundError:
            return "the task file was moved or removed"
        except OSError:
            return None
        if read.fingerprint == signs.get("file"):
            return None
        before, now = signs.get("status"), status_of(read.head)
        if now is not None and now != before:
            return f"status {before or '?'} → {now}"
        return "the task file changed (a note by the loop)"

    def resume_dirs(self, waiting) -> list[Path]:
        """The task's folder (already watched while the repository is)."""
        return [Path(waiting.path).parent]


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


@dataclass(frozen=True, slots=True)
class Decision:
    note: str
    resume: bool
    approve: bool


def decide(block: Block, answer: Answer) -> Decision:
    """What an answer means for a task: the note's text, and whether it resumes or approves."""
    who = one_line(answer.operator) or "operator"
    remark = f" Note: {one_line(answer.note)}" if answer.note and answer.note.strip() else ""
    texts = [one_line(t) for t in answer.texts]
    if answer.choice is None:
        if not texts or not any(texts):
            raise UsageError(f"{block.id}: the answer is empty: pick a choice or type an answer")
        return Decision(_answers(block, who, texts) + remark, True, False)
    kind = next((c.kind for c in block.choices if c.key == answer.choice.key), None)
    if kind is None:
        block.find_choice(answer.choice.key)  # raises UsageError naming the valid keys
        raise UsageError(f"{block.id}: choice {answer.choice.key} is not one of this task's")
    if kind == "default":
        default = block.meta["recommended"]
        approve = bool(block.meta["approval_gate"]) and default.lower().startswith("approv")
        what = "the recommended defaults" if block.questions else "the recommended default"
        return Decision(f"Unblocked by {who}: accepted {what}: {default}.{remark}", True, approve)
    if kind == "approve":
        return Decision(f"Approved by {who}: the change request is approved.{remark}", True, True)
    # Resume and Keep take the operator's words: the texts (TUI), else --note (CLI).
    if any(texts):
        words = texts
    elif answer.note and answer.note.strip():
        words, remark = [one_line(answer.note)], ""
    else:
        raise UsageError(
            f"{block.id}: choice {answer.choice.key} ({answer.choice.option}) needs your words: "
            "add --note TEXT"
        )
    if kind == "keep":
        return Decision(
            f"Note from {who} (still {block.state}): {' '.join(words)}{remark}", False, False
        )
    if len(words) == 1 and block.questions:
        return Decision(f"Answer from {who}: {words[0]}{remark}", True, False)
    return Decision(_answers(block, who, words) + remark, True, False)


def _answers(block: Block, who: str, texts: list[str]) -> str:
    wanted = max(1, len(block.questions))
    if len(texts) != wanted:
        raise UsageError(
            f"{block.id} asks {wanted} question{'s' if wanted > 1 else ''}: give one answer "
            f"per question, in order (got {len(texts)})"
        )
    for i, text in enumerate(texts, 1):
        if not text:
            raise UsageError(f"{block.id}: answer {i} is empty")
    if wanted == 1:
        return f"Answer from {who}: {texts[0]}"
    numbered = " ".join(f"{i}. {_sentence(t)}" for i, t in enumerate(texts, 1))
    return f"Answers from {who}: {numbered}"


def _sentence(text: str) -> str:
    return text if text.endswith((".", "!", "?")) else text + "."


def check_placeholders(text: str) -> None:
    """Refuse text the loop's linter would reject (it would block every later step)."""
    found = placeholder_in(text)
    if found:
        raise UsageError(
            f"the answer contains {found}: agenticloop's task linter rejects a task file "
            "holding it, which would block every later step of the loop; say it concretely"
        )


def _task_id(header: dict, path: Path) -> str:
    return one_line(frontmatter.string(header.get("task_id"))) or path.stem


def _context(
    title: str | None,
    state: str,
    category: str | None,
    parts: dict[str, str],
    body: Body,
    header: dict,
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
            task = text.strip()
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


def _choices(
    state: str, has_category: bool, gate: bool, recommended: str | None, multi: bool
) -> tuple[dict[str, str], tuple[Choice, ...]]:
    """The ways out, keyed A, B, C... in a fixed order; each says which lines it changes."""
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
            "Resume (agent-ready)",
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


# -- writing ----------------------------------------------------------------------------------


def write_answer(old: bytes, date: str, note: str, resume: bool, approve: bool) -> bytes:
    """The task file with the dated note under `## Comments` and the header lines edited.

    Refuses (HitlError) when the header lines cannot be found one per key, or when parsing the
    result shows anything else changed.
    """
    doc = TextDoc.from_bytes(old)
    try:
        split = split_header(doc.lines)
    except HeaderError as exc:
        raise HitlError(f"the task header does not parse: {exc}") from None
    if split is None:
        raise HitlError("the task file has no --- header")
    header_end = split.end
    if resume:
        header_end = _edit_header(doc, split, approve)
    inserted = _insert_note(doc, header_end + 1, f"- {date}: {note}")
    new = doc.to_bytes()
    _verify(old, new, resume, approve, inserted)
    return new


def _key_span(doc: TextDoc, start: int, end: int, key: str) -> tuple[int, int] | None:
    """Lines [i, j) holding top-level `key` (its line plus indented continuation lines)."""
    pattern = re.compile(_KEY_LINE.format(key=re.escape(key)))
    found = [i for i in range(start + 1, end) if pattern.match(doc.lines[i])]
    if not found:
        return None
    if len(found) > 1:
        raise HitlError(f"the task header has {len(found)} {key} lines; fix it by hand")
    i = found[0]
    j = i + 1
    while j < end and doc.lines[j][:1] in (" ", "\t") and doc.lines[j].strip():
        j += 1
    return i, j


def _set_value(line: str, value: str) -> str:
    """`key: old` with only `old` replaced, its quotes and the spaces around it kept.

    agenticloop reads the whole rest of the line as the value (a ` # ...` after it is part of
    it), so the whole value is replaced, as its own `task status` does.
    """
    body = line.rstrip("\r\n")
    ending = line[len(body) :]
    colon = body.find(":")
    if colon < 0:
        raise HitlError(f"cannot edit the header line {body!r}; fix it by hand")
    head, rest = body[: colon + 1], body[colon + 1 :]
    old = frontmatter.trim(rest)
    if not old:
        return f"{head} {value}{ending}"  # `approved:` (an empty mapping to agenticloop)
    at = rest.index(old)
    lead, tail = rest[:at], rest[at + len(old) :]
    quote = old[0] if len(old) >= 2 and old[0] == old[-1] and old[0] in "'\"" else ""
    return f"{head}{lead}{quote}{value}{quote}{tail}{ending}"


def _edit_header(doc: TextDoc, split: Split, approve: bool) -> int:
    """Set status, delete block_category, maybe set approved; returns the new closing line."""
    end = split.end
    status = _key_span(doc, split.start, end, "status")
    if status is None:
        raise HitlError("the task header has no status line to change")
    i, j = status
    doc.lines[i:j] = [_set_value(doc.lines[i], RESUMED)]
    end -= j - i - 1
    category = _key_span(doc, split.start, end, "block_category")
    if category is not None:
        i, j = category
        del doc.lines[i:j]
        end -= j - i
    if approve:
        approved = _key_span(doc, split.start, end, "approved")
        if approved is not None:
            i, j = approved
            doc.lines[i:j] = [_set_value(doc.lines[i], "true")]
            end -= j - i - 1
        else:
            at = _key_span(doc, split.start, end, "status")
            assert at is not None
            doc.lines.insert(at[1], "approved: true" + _ending(doc.lines[at[0]], doc.newline))
            end += 1
    return end


def _ending(line: str, default: str) -> str:
    body = line.rstrip("\r\n")
    return line[len(body) :] or default


def _insert_note(doc: TextDoc, body_start: int, note: str) -> tuple[int, int]:
    """Insert the note directly under `## Comments` (creating it); returns the new lines' span."""
    fence = False
    comments: int | None = None
    follower: int | None = None
    for i in range(body_start, len(doc.lines)):
        line = doc.lines[i].rstrip("\r\n")
        if line.strip().startswith(_FENCE):
            fence = not fence
        found = None if fence else heading(line)
        if found is None:
            continue
        name = normalise_heading(found[1])
        if comments is None and name == "comments":
            comments = i
            break
        if follower is None and name in AFTER_COMMENTS:
            follower = i
    if comments is not None:
        at = comments + 1
        # `## Comments`, a blank line, then notes: the new note goes above the first note.
        k = at
        while k < len(doc.lines) and not doc.lines[k].strip():
            k += 1
        if k > at and k < len(doc.lines) and _NOTE.match(doc.lines[k].rstrip("\r\n")):
            at = k
        doc.insert(at, [note])
        return at, at + 1
    if follower is not None:
        lines = ["## Comments", note, ""]
        at = follower
        if at > 0 and doc.lines[at - 1].strip():
            lines.insert(0, "")
        doc.insert(at, lines)
        return at, at + len(lines)
    lines = ["## Comments", note]
    if doc.lines and doc.lines[-1].strip():
        lines.insert(0, "")
    at = len(doc.lines)
    doc.insert(at, lines)
    return at, at + len(lines)


def _verify(old: bytes, new: bytes, resume: bool, approve: bool, inserted: tuple[int, int]) -> None:
    """Parse the result again: only the three keys and the inserted lines may differ."""
    before_doc = TextDoc.from_bytes(old)
    after_doc = TextDoc.from_bytes(new)
    try:
        before_split = split_header(before_doc.lines)
        after_split = split_header(after_doc.lines)
        assert before_split is not None and after_split is not None
        before = load_header(before_split.header)
        after = load_header(after_split.header)
    except (HeaderError, AssertionError) as exc:
        raise HitlError(f"refusing to write: the edited header does not parse ({exc})") from None
    # repr, not ==: a `.nan` value is never equal to itself.
    rest_before = repr({k: v for k, v in before.items() if k not in EDITABLE_KEYS})
    rest_after = repr({k: v for k, v in after.items() if k not in EDITABLE_KEYS})
    wanted_status = RESUMED if resume else before.get("status")
    wanted_approved = "true" if approve else before.get("approved")
    if (
        rest_before != rest_after
        or after.get("status") != wanted_status
        or after.get("approved") != wanted_approved
        or (resume and "block_category" in after)
        or (not resume and after.get("block_category") != before.get("block_category"))
    ):
        raise HitlError("refusing to write: the edit would change more of the header than it may")
    body_before = before_doc.lines[before_split.end + 1 :]
    lines = after_doc.lines[:]
    start, end = inserted
    del lines[start:end]
    body_after = lines[after_split.end + 1 :]
    # The line above the insertion may have gained the line ending it lacked.
    if [x.rstrip("\r\n") for x in body_before] != [x.rstrip("\r\n") for x in body_after] or len(
        "".join(body_after)
    ) - len("".join(body_before)) not in (0, len(after_doc.newline)):
        raise HitlError("refusing to write: the edit would change the task text")
    if after_doc.bom != before_doc.bom:
        raise HitlError("refusing to write: the edit would change the file's encoding mark")
