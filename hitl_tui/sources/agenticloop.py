"""agenticloop, files backend: task files with YAML frontmatter (FORMATS.md §2).

A task is blocked when its frontmatter says `status: blocked` (with `block_category`) or
`status: needs_context`. The layout comes from `.agenticloop/project.md`; a task folder that
would lead outside the repository is refused and shown as a problem, never read.

Answers are written the way the loop's own CLI would: one dated note directly under
`## Comments`, and only the `status`, `block_category` and `approved` lines of the header edited,
by line, so comments, key order, quoting and every other byte survive. The result is parsed
again and the write refused if anything else moved.

A folder of thousands of tasks stays cheap: a task whose one `status:` line plainly says it is
not blocked is dismissed before any YAML is parsed.
"""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import yaml

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
from hitl_tui.textio import BOM, TextDoc, heading_of, normalise_heading, one_line

NAME = "agenticloop"
PROJECT = Path(".agenticloop") / "project.md"
DEFAULT_TEMPLATE = ".agenticloop/tasks/{taskId}.md"
DEFAULT_FOLDER = DEFAULT_TEMPLATE.rpartition("/")[0]
#: A header larger than this is not parsed (it is shown as a broken block).
MAX_FRONTMATTER = 256 * 1024
#: Deepest `[`/`{` nesting parsed; real headers nest two or three levels.
MAX_DEPTH = 32

BLOCK_STATES = ("blocked", "needs_context")
#: Statuses that are plainly not a block: a task saying so is dismissed without YAML.
OTHER_STATES = frozenset(
    {"draft", "agent-ready", "in-progress", "needs_revision", "accepted", "closed"}
)
RESUMED = "agent-ready"
EDITABLE_KEYS = ("status", "block_category", "approved")
EPOCH = datetime.fromtimestamp(0, UTC)

#: FORMATS.md §2.2 (wording after the blocked-state seed); unknown categories show as they are.
CATEGORIES = {
    "transient": "a retryable failure persisted after a reasonable retry",
    "credentials": "auth, a token, a provider or a permission is missing or invalid",
    "contract": "the task record is impossible, contradictory, missing key information, "
    "or waiting on a change-request approval",
    "review-exhausted": "review rounds are no longer making progress",
    "review-unknown": "a review gave no clear accepted or needs_revision result",
    "merge-conflict": "the implementation cannot be merged cleanly",
    "ci-failure": "required remote checks are failing or incomplete",
    "tooling-failure": "the diagnostic budget for a command or host-tool defect ran out",
    "no-artifact": "the implementation ran but produced nothing reviewable",
    "no-progress": "the attempt budget or self-loop guard tripped with no new progress",
}

#: Words the loop's linter rejects; a task file holding one blocks every later transition.
PLACEHOLDERS = (
    ("TBD", re.compile(r"(?<![A-Za-z0-9])tbd(?![A-Za-z0-9])", re.IGNORECASE)),
    ("as needed", re.compile(r"\bas\s+needed\b", re.IGNORECASE)),
    ("etc.", re.compile(r"\betc\b", re.IGNORECASE)),
    ("similar to previous task", re.compile(r"\bsimilar\s+to\s+previous\s+task\b", re.I)),
    ("to be filled", re.compile(r"\bto\s+be\s+filled\b", re.IGNORECASE)),
)

#: Sections that follow `## Comments` in the loop's template: a new Comments goes before them.
AFTER_COMMENTS = ("revision log",)

_FENCE = ("```", "~~~")
_NOTE = re.compile(r"^\s{0,3}[-*+]\s+(\d{4}-\d{2}-\d{2})\s*:\s?(.*)$")
_NUMBERED = re.compile(r"^\s*(\d{1,2})[.)]\s+(.*)$")
_STATUS_LINE = re.compile(r"^status[ \t]*:(.*)$", re.MULTILINE)
_LABELS = (
    "Recommended default",
    "Recommended",
    "Missing evidence",
    "Who can unblock",
    "Who can answer",
    "Who",
    "Checked",
    "Tried",
    "Needed",
)
_LABEL = re.compile(
    r"(?:^|(?<=[\s.;,(]))(" + "|".join(re.escape(x) for x in _LABELS) + r")\s*:\s",
    re.IGNORECASE,
)
#: _LABEL for lower-cased ASCII text (see `labelled_parts`).
_LABEL_LOWER = re.compile(
    r"(?:^|(?<=[\s.;,(]))(" + "|".join(re.escape(x.lower()) for x in _LABELS) + r")\s*:\s"
)
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
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


# -- YAML, safely ---------------------------------------------------------------------------


class _HeaderLoader(yaml.SafeLoader):
    """safe_load without aliases: `*ref` is how a few hundred bytes expand to gigabytes."""

    def compose_node(self, parent, index):  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, "aliases (*name) are not accepted in a task header", event.start_mark
            )
        return super().compose_node(parent, index)


def _load_without_aliases(text: str) -> object:
    """safe_load, refusing aliases; libyaml's C parser when present (about 10x faster).

    libyaml composes an alias as the very node its anchor named, so a node reached twice in the
    tree is an alias: refuse before constructing, which is where a bomb would expand.
    """
    c_loader = getattr(yaml, "CSafeLoader", None)
    if c_loader is None:
        return yaml.load(text, Loader=_HeaderLoader)  # a SafeLoader subclass
    loader = c_loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        seen: set[int] = set()
        stack = [node]
        while stack:
            current = stack.pop()
            if id(current) in seen:
                raise HeaderError("aliases (*name) are not accepted in a task header")
            seen.add(id(current))
            if isinstance(current, yaml.MappingNode):
                for key, value in current.value:
                    stack.extend((key, value))
            elif isinstance(current, yaml.SequenceNode):
                stack.extend(current.value)
        return loader.construct_document(node)
    finally:
        loader.dispose()


#: Tags the fast reader constructs; anything else (merge keys, `=`, ...) goes to the full loader.
_SIMPLE_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "timestamp")
)
_STR_TAG = "tag:yaml.org,2002:str"
_RESOLVER = yaml.resolver.Resolver()
_CONSTRUCTOR = yaml.constructor.SafeConstructor()
#: What a plain scalar may not hold here: an indicator first (`-?:,[]{}#&*!|>'"%@` and a
#: backtick), `: `, ` #`, a final `:`, or brackets; in a flow list also `:#'",`.
_NOT_PLAIN = re.compile(r"^[-?:,\[\]{}#&*!|>'\"%@`]|: | #|:$|[\[\]{}]")
_NOT_PLAIN_IN_FLOW = re.compile(r"^[-?:,\[\]{}#&*!|>'\"%@`]|[:#'\",\[\]{}]")
#: Tabs, control characters and non-ASCII have subtle YAML rules: the full loader reads them.
_NOT_PLAIN_ASCII = re.compile(r"[^\x20-\x7e\n]")


def _simple_header(text: str) -> dict | None:
    """The header exactly as the YAML loader reads it, when it is plainly simple; else None.

    Nearly every task header is top-level `key: value` lines (comments, quoted values, one-line
    `[a, "b"]` lists, `- item` lists). Reading that subset by hand, with PyYAML's own resolver and
    scalar constructors, is several times faster than libyaml plus PyYAML's generic constructor.
    Anything else, or anything in doubt, returns None and goes to the full loader.
    """
    if _NOT_PLAIN_ASCII.search(text):
        return None
    data: dict = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip(" ") or line.lstrip(" ")[0] == "#":
            continue
        if line[0] == " ":
            return None  # an indented line: a nested value or a continued scalar
        colon = line.find(": ")
        if colon < 0:
            if not line.endswith(":"):
                return None
            colon = len(line) - 1
        key_text = line[:colon].rstrip(" ")
        if not key_text or len(key_text) > 128 or key_text.startswith("..."):
            return None
        key = _plain(key_text, flow=False)
        if key is _NOT_SIMPLE:
            return None
        rest = line[colon + 1 :]
        value = _block_value(rest)
        if value is _NOT_SIMPLE:
            return None
        if value is None and _comment_or_empty(rest) and i < len(lines):
            items, i = _block_list(lines, i)
            if items is _NOT_SIMPLE:
                return None
            if items is not None:
                value = items
        data[key] = value
    return data


_NOT_SIMPLE = object()


def _comment_or_empty(rest: str) -> bool:
    stripped = rest.strip(" ")
    return not stripped or (stripped[0] == "#" and rest[0] == " ")


def _block_value(rest: str) -> object:
    """The value after `key:` (the rest of the line), or _NOT_SIMPLE."""
    stripped = rest.strip(" ")
    if not stripped:
        return _plain("", flow=False)
    if rest[0] != " ":
        return _NOT_SIMPLE
    if stripped[0] in "'\"":
        return _quoted(stripped)
    if stripped[0] == "[":
        return _flow_list(stripped)
    cut = rest.find(" #")
    return _plain((rest[:cut] if cut >= 0 else rest).strip(" "), flow=False)


def _after_ok(after: str) -> bool:
    """Only a comment may follow a closed quote or list on its line."""
    return not after or (after[0] == " " and after.lstrip(" ")[0] == "#")


def _quoted(text: str) -> object:
    """`"text"` or `'text'` without escapes, then nothing but a comment; a str, or _NOT_SIMPLE."""
    quote = text[0]
    close = text.find(quote, 1)
    if close < 0 or not _after_ok(text[close + 1 :]):
        return _NOT_SIMPLE
    content = text[1:close]
    if quote == '"' and "\\" in content:
        return _NOT_SIMPLE
    return content


def _flow_list(text: str) -> object:
    """`[a, "b", 'c']` on one line, items plain or quoted; a list, or _NOT_SIMPLE."""
    close = text.find("]")
    if close < 0 or not _after_ok(text[close + 1 :]):
        return _NOT_SIMPLE
    inner = text[1:close]
    if any(c in inner for c in "[{}"):
        return _NOT_SIMPLE
    if not inner.strip(" "):
        return []
    items = []
    for raw in inner.split(","):
        item = raw.strip(" ")
        if not item:
            return _NOT_SIMPLE
        value = _quoted(item) if item[0] in "'\"" else _plain(item, flow=True)
        if value is _NOT_SIMPLE:
            return _NOT_SIMPLE
        items.append(value)
    return items


def _block_list(lines: list[str], i: int) -> tuple[object, int]:
    """`- item` lines below an empty `key:`: (list or None if there are none, next line index)."""
    items: list = []
    indent = -1
    while i < len(lines):
        line = lines[i]
        body = line.lstrip(" ")
        if not body or body[0] == "#":
            i += 1
            continue
        if not body.startswith("- "):
            if line[0] == " ":
                return _NOT_SIMPLE, i  # nested mapping, continuation line, ...
            break
        at = len(line) - len(body)
        if indent < 0:
            indent = at
        elif at != indent:
            return _NOT_SIMPLE, i
        if _comment_or_empty(body[1:]):
            return _NOT_SIMPLE, i  # an empty item
        value = _block_value(body[1:])
        if value is _NOT_SIMPLE or isinstance(value, list):
            return _NOT_SIMPLE, i
        items.append(value)
        i += 1
    return (items if items else None), i


#: Plain scalars already read as strings, in block and in flow context: keys and most values
#: repeat in every task file. Bounded; strings are immutable, so sharing them changes nothing.
_KNOWN_STRINGS: tuple[set[str], set[str]] = (set(), set())
_KNOWN_MAX = 4096


def _plain(text: str, flow: bool) -> object:
    """A one-line plain scalar resolved and constructed as PyYAML would, or _NOT_SIMPLE."""
    known = _KNOWN_STRINGS[flow]
    if text in known:
        return text
    if text and (_NOT_PLAIN_IN_FLOW if flow else _NOT_PLAIN).search(text):
        return _NOT_SIMPLE
    implicit = _RESOLVER.yaml_implicit_resolvers
    if text and text[0] not in implicit and None not in implicit:
        tag = _STR_TAG  # no implicit type starts with this character: `resolve` says str
    else:
        tag = _RESOLVER.resolve(yaml.ScalarNode, text, (True, False))
    if tag == _STR_TAG:
        if len(known) < _KNOWN_MAX:
            known.add(text)
        return text
    if tag not in _SIMPLE_TAGS:
        return _NOT_SIMPLE
    try:
        return _CONSTRUCTOR.yaml_constructors[tag](_CONSTRUCTOR, yaml.ScalarNode(tag, text))
    except Exception:  # the full loader reports it the way it always has
        return _NOT_SIMPLE


class HeaderError(Exception):
    """The frontmatter cannot be read as a YAML mapping; the message is shown to the operator."""


def load_header(text: str) -> dict:
    """The frontmatter as a dict, bounded in size and refusing aliases; raises HeaderError."""
    # A character encodes to at most 4 bytes: a short header needs no encoding to be measured.
    if len(text) * 4 > MAX_FRONTMATTER and len(text.encode("utf-8", "surrogateescape")) > (
        MAX_FRONTMATTER
    ):
        raise HeaderError(f"the header is larger than {MAX_FRONTMATTER // 1024} KiB")
    if _flow_depth(text) > MAX_DEPTH:
        # PyYAML takes seconds on a few KiB of `[[[[`: refuse before it starts.
        raise HeaderError(f"the header nests more than {MAX_DEPTH} levels deep")
    simple = _simple_header(text)
    if simple is not None:
        return simple
    try:
        data = _load_without_aliases(text)
    except HeaderError:
        raise
    except yaml.YAMLError as exc:
        raise HeaderError(one_line(str(exc))) from None
    except (RecursionError, MemoryError):
        raise HeaderError("the header is nested too deeply") from None
    except Exception as exc:  # PyYAML raises odd things on odd input; never crash on it
        raise HeaderError(f"{type(exc).__name__}: {one_line(str(exc))}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise HeaderError(f"the header is a {type(data).__name__}, not a mapping of keys")
    return data


def _flow_depth(text: str) -> int:
    """How deep `[` and `{` nest (quotes ignored: an overestimate only refuses odd headers)."""
    if "[" not in text and "{" not in text:  # the usual header: no need to walk it
        return 0
    depth = deepest = 0
    for char in _NOT_BRACKET.sub("", text):  # only the brackets count
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth = max(0, depth - 1)
    return deepest


@dataclass(frozen=True, slots=True)
class Split:
    """Where the frontmatter sits in a file's lines: `---` at `start`, closing line at `end`."""

    start: int
    end: int
    header: str


def split_header(lines: list[str]) -> Split | None:
    """Find the `---` ... `---` header; None when the file has none. HeaderError if unclosed."""
    if not lines or lines[0].rstrip() not in ("---", BOM + "---"):
        return None
    for i in range(1, len(lines)):
        if lines[i].rstrip() in ("---", "..."):
            header = "".join(line.rstrip("\r\n") + "\n" for line in lines[1:i])
            return Split(0, i, header)
    raise HeaderError("the header opened with --- is never closed")


def quick_not_blocked(header: str) -> bool:
    """True when the header plainly says the task is not blocked (no YAML parse needed)."""
    found = _STATUS_LINE.findall(header)
    if len(found) != 1:
        return False
    value = _plain_value(found[0])
    return value is not None and value.lower() in OTHER_STATES


def _plain_value(raw: str) -> str | None:
    value = raw.strip()
    if " #" in value:
        value = value.split(" #", 1)[0].strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    if not value or any(c in value for c in "[]{}&*!|>'\"#"):
        return None
    return value


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


def labelled_parts(text: str) -> tuple[str, dict[str, str]]:
    """Split `head. Checked: x. Tried: y. Needed: z.` into the head and {label: text}."""
    if ":" not in text:
        return text.strip(), {}
    # Lower-casing ASCII keeps every position, and a case-sensitive match is about twice as fast.
    matches = list(_LABEL_LOWER.finditer(text.lower()) if text.isascii() else _LABEL.finditer(text))
    if not matches:
        return text.strip(), {}
    head = text[: matches[0].start()].strip()
    parts: dict[str, str] = {}
    for m, nxt in zip(matches, [*matches[1:], None], strict=False):
        label = m.group(1).lower()
        end = nxt.start() if nxt is not None else len(text)
        value = text[m.end() : end].strip()
        if label not in parts and value:
            parts[label] = value
    return head, parts


def _recommended(parts: dict[str, str]) -> str | None:
    value = parts.get("recommended default") or parts.get("recommended") or ""
    return value.strip().rstrip(".").strip() or None


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
    #: Why the template or project.md could not be used as written (shown as a broken block).
    problem: str | None = None
    since: datetime = EPOCH
    stamp: str = "layout"


def _head_text(path: Path) -> str:
    """A file's text for the raw view, or nothing when it cannot be read."""
    try:
        return fsio.read_file(path).head.decode("utf-8", "replace")
    except OSError:
        return ""


def _mtime(path: str | Path) -> datetime | None:
    try:
        return datetime.fromtimestamp(os.lstat(path).st_mtime, UTC)
    except OSError:
        return None


def read_layout(repo: Path) -> Layout:
    """The task backend and folder of `repo`; a template leading outside it is refused."""
    project = repo / PROJECT
    project_time = _mtime(project)
    since = project_time or _mtime(os.path.join(repo, ".agenticloop")) or EPOCH
    if since is EPOCH:
        # No .agenticloop at all (most repos of a mixed fleet): the default folder, which
        # cannot lead anywhere because none of it exists.
        return Layout("files", repo / DEFAULT_FOLDER)
    meta: dict = {}
    problem: str | None = None
    stamp = "layout"
    try:
        # No lstat means no stat either: most repos have no project.md, so ask once.
        if project_time is not None and os.path.isfile(project):
            read = fsio.read_file(project)
            stamp = read.fingerprint
            doc = TextDoc.from_bytes(read.head)
            split = split_header(doc.lines)
            if split is not None:
                meta = load_header(split.header)
    except (OSError, HeaderError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        problem = f"{PROJECT} could not be read ({reason}); using the default task folder"
    backend = str(meta.get("task_backend") or "files").strip().lower()
    if backend == "github":
        return Layout("github", None, problem, since, stamp)
    if backend != "files":
        problem = f"{PROJECT} names an unknown task_backend {backend!r}; reading task files"
    template = meta.get("task_file_template", DEFAULT_TEMPLATE)
    folder, refused = _task_folder(repo, template)
    if refused:
        return Layout("files", None, f"agenticloop task folder refused: {refused}", since, stamp)
    return Layout("files", folder, problem, since, stamp)


def _task_folder(repo: Path, template: object) -> tuple[Path | None, str | None]:
    if not isinstance(template, str) or not template.strip():
        return None, f"task_file_template {template!r} is not a path"
    shown = one_line(template)
    head, _, name = template.strip().rpartition("/")
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


class AgenticloopSource:
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
        if layout.problem is not None:
            files.append(repo / PROJECT)
        if layout.folder is None:
            return files
        try:
            entries = list(os.scandir(layout.folder))
        except OSError:
            return files
        names: list[str] = []
        for entry in entries:
            if not entry.name.endswith(".md") or entry.name.startswith(fsio.TEMP_PREFIX):
                continue
            try:
                if entry.is_file():
                    names.append(entry.name)
            except OSError:
                continue
        # Names in one folder sort as their paths do; sorting strings skips pathlib's parts.
        files.extend(layout.folder / name for name in sorted(names))
        return sorted(files) if layout.problem is not None else files

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
        # layout, which depends on other files: always read afresh.
        return path.name != PROJECT.name or path != repo / PROJECT

    def parse(self, repo: Path, path: Path, label: str) -> Block | None:
        if path.name == PROJECT.name and path == repo / PROJECT:
            return self._layout_block(repo, label)
        try:
            if not os.path.isfile(path):  # also keeps a FIFO from blocking the open
                return None
            read = fsio.read_file(path)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as exc:
            return self._broken(
                repo, path, label, path.stem, "", f"the task file could not be read: {exc}", None
            )
        text = read.head.decode("utf-8", "replace")
        lines = text.splitlines(keepends=True)
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
        status = header.get("status")
        state = status.strip().lower() if isinstance(status, str) else None
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
        raw_category = header.get("block_category")
        category = one_line(str(raw_category)) if raw_category not in (None, "") else None
        body = parse_body(body_text)
        problems: list[str] = []
        title = strip_title(body.title, task_id) if body.title else None
        notes = newest_first(body.notes)
        # hitl's own notes ("Note from Ada (still blocked): ...") never explain the block.
        notes = [n for n in notes if not _HITL_NOTE.match(n.text[:300])]
        mentioning = [n for n in notes if _mentions_block(n, state, category)]
        note = mentioning[0] if mentioning else (notes[0] if notes else None)
        items = numbered_items(note) if note is not None and state == "needs_context" else []
        # With numbered questions, each question carries its own Checked/Who parts.
        head, parts = labelled_parts((note.first if items else note.text) if note else "")
        # The parts of a note's text, each split once (`_tried` reads the same notes again).
        split_notes = {note.text: parts} if note is not None and not items else {}
        split_items = [labelled_parts(q) for q in items]
        gate = (
            str(header.get("type", "")).strip().lower() == "change-request"
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
            question = parts.get("needed") or (note.text if note else "")
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
        has_category = header.get("block_category") is not None
        kinds, choices = _choices(state, has_category, gate, recommended, bool(items))
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
            meta={
                "kind": "task",
                "task_id": task_id,
                "status": state,
                "approval_gate": gate,
                "recommended": recommended,
                "defaults": defaults if len(questions) > 1 else (recommended,),
                "question_heads": tuple(h for h, _ in split_items),
                "choice_kinds": kinds,
                "note": note.text if note else None,
                # The day of that note: when the block began (`inbox.began`).
                "note_date": note.date if note else None,
                "header": header,
                "head": head,
            },
        )

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
            meta={"kind": "broken", "task_id": task_id},
        )

    def _layout_block(self, repo: Path, label: str) -> Block | None:
        layout = self.layout(repo)
        if layout.problem is None:
            return None
        return Block(
            id=f"{label}/.agenticloop",
            source=NAME,
            repo=repo,
            path=repo / PROJECT,
            state="blocked",
            question=layout.problem,
            context=f"Fix task_file_template / task_backend in {PROJECT}.",
            attempted=(),
            choices=(),
            since=layout.since,
            fingerprint=layout.stamp,
            raw=_head_text(repo / PROJECT),
            title="agenticloop layout",
            problems=(layout.problem,),
            meta={"kind": "layout"},
        )

    # -- answering -------------------------------------------------------------------------

    def decision_text(self, block: Block, answer: Answer) -> str:
        """The dated note's text, without its date; the operator may edit it in the preview."""
        if answer.decision_override is not None:
            return one_line(answer.decision_override)
        return decide(block, answer).note

    def plan(self, block: Block, answer: Answer) -> Plan:
        kind = block.meta.get("kind")
        if kind == "layout":
            raise HitlError(f"{block.id}: fix {PROJECT} by hand; it is not a task to answer")
        if kind != "task":
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
            if block.meta["header"].get("block_category") is not None:
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


@dataclass(frozen=True, slots=True)
class Decision:
    note: str
    resume: bool
    approve: bool


def decide(block: Block, answer: Answer) -> Decision:
    """What an answer means for a task: the note's text, and whether it resumes or approves."""
    who = one_line(answer.operator) or "operator"
    kinds: dict[str, str] = block.meta.get("choice_kinds", {})
    remark = f" Note: {one_line(answer.note)}" if answer.note and answer.note.strip() else ""
    texts = [one_line(t) for t in answer.texts]
    if answer.choice is None:
        if not texts or not any(texts):
            raise UsageError(f"{block.id}: the answer is empty: pick a choice or type an answer")
        return Decision(_answers(block, who, texts) + remark, True, False)
    kind = kinds.get(answer.choice.key)
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
    for word, pattern in PLACEHOLDERS:
        if pattern.search(text):
            raise UsageError(
                f"the answer contains the placeholder {word!r}: agenticloop rejects task files "
                "holding placeholder words, which would block every later step of the loop; "
                "say it concretely"
            )


def _task_id(header: dict, path: Path) -> str:
    value = header.get("task_id")
    if isinstance(value, str | int) and not isinstance(value, bool) and str(value).strip():
        return one_line(str(value))
    return path.stem


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
        reason = header.get("context_reason")
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
            parts = split[note.text] = labelled_parts(note.text)[1]
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
    kinds: dict[str, str] = {}
    choices: list[Choice] = []
    for i, (kind, option, consequence, needs_text) in enumerate(found):
        key = "ABCDEFGH"[i]
        kinds[key] = kind
        choices.append(Choice(key, option, consequence, needs_text))
    return kinds, tuple(choices)


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
    """`key: old  # comment` with only `old` replaced (its quotes kept)."""
    body = line.rstrip("\r\n")
    ending = line[len(body) :]
    colon = body.find(":")
    if colon < 0:
        raise HitlError(f"cannot edit the header line {body!r}; fix it by hand")
    rest = body[colon + 1 :]
    head = body[: colon + 1] + rest[: len(rest) - len(rest.lstrip(" \t"))]
    rest = rest.lstrip(" \t")
    quote = rest[:1] if rest[:1] in ("'", '"') else ""
    if quote:
        close = rest.find(quote, 1)
        if close < 0:
            raise HitlError(f"cannot edit the header line {body!r}; fix it by hand")
        tail = rest[close + 1 :]
    else:
        cut = len(rest)
        for mark in (" #", "\t#"):
            at = rest.find(mark)
            if at >= 0:
                cut = min(cut, at)
        tail = rest[len(rest[:cut].rstrip(" \t")) :]
    if head.endswith(":"):  # `status:` with the value on the next line
        head += " "
    return f"{head}{quote}{value}{quote}{tail}{ending}"


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
    wanted_approved = True if approve else before.get("approved")
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
