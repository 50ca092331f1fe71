"""loopkit: a `BLOCKED.md` at the repository root (FORMATS.md §1).

The parser is lenient because a language model wrote the file: any heading level and case,
optional colons, any bullet, many choice label and separator styles, CRLF, a BOM. It never drops
a block: when no section can be found, the whole text is the question.

An answer writes the decision into PROMPT.md's `## Decisions`, a resume note under
IMPLEMENTATION_PLAN.md's `## Notes for the next session`, and removes BLOCKED.md last.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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
from hitl_tui.sources.agentic_common import CATEGORIES
from hitl_tui.sources.base import AnswerWaiting, Source
from hitl_tui.sources.loopkit import gitref
from hitl_tui.textio import BOM, TextDoc, heading_of, normalise_heading, one_line

BLOCKED = "BLOCKED.md"
PROMPT = "PROMPT.md"
PLAN = "IMPLEMENTATION_PLAN.md"
DECISIONS = "Decisions"
NOTES = "Notes for the next session"
#: BLOCKED.md's section of the operator's notes on a block that stays open (`plan_note`).
OPERATOR_NOTES = "Operator notes"

_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,2}[.)])\s+")
_CHOICE = re.compile(
    r"""^\s*(?:[-*+•]\s+)?          # an optional bullet
    (?:\*\*|__)?                     # optional bold around the label
    (?:\(([A-Za-z]|\d{1,2})\)        # (A)
      |([A-Za-z]|\d{1,2})[).:]       # A)  A.  A:  1)
    )
    (?:\*\*|__)?[).:]?\s+(.*)$""",
    re.VERBOSE,
)
#: Between a choice's option and its consequence, in the order they are tried (escalate
#: writes with the same list, so that what it writes reads back the same).
SEPARATORS = (" — ", "—", " – ", " -- ", " - ", ": ")

_KNOWN = {
    "question": "question",
    "questions": "question",
    "the question": "question",
    "context": "context",
    "background": "context",
    "attempted": "attempted",
    "tried": "attempted",
    "what i tried": "attempted",
    "attempts": "attempted",
    "choices": "choices",
    "options": "choices",
    "category": "category",
    "block category": "category",
    "block_category": "category",
    "operator notes": "notes",
}
#: A category declared on a line of its own before the first section (under the title, or in
#: a `---` header): `Category: credentials`, `**Category:** credentials`, `block_category: x`.
_CATEGORY_LINE = re.compile(
    r"^\s*(?:[-*+]\s+)?(?:\*\*|__)?(?:block[ _-]?)?category(?:\*\*|__)?\s*:\s*(?:\*\*|__)?"
    r"(.*)",  # the value, spaces and all: `.*?` before `\s*$` is quadratic on a padded line
    re.IGNORECASE,
)
#: A declared category is shown and filtered on as written, cut to this many characters.
CATEGORY_MAX = 40


@dataclass
class _Parsed:
    title: str | None = None
    sections: dict[str, str] = field(default_factory=dict)
    extra: list[Section] = field(default_factory=list)
    preamble: list[str] = field(default_factory=list)


def _split_sections(text: str) -> _Parsed:
    parsed = _Parsed()
    current: str | None = None
    current_title = ""
    body: list[str] = []
    fence = False

    def flush() -> None:
        content = "\n".join(body).strip("\n")
        if current is None:
            parsed.preamble.extend(body)
        elif current.startswith("extra:"):
            parsed.extra.append(Section(current_title, content.strip()))
        elif current in parsed.sections:
            parsed.sections[current] += "\n" + content
        else:
            parsed.sections[current] = content

    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            fence = not fence
        # A heading's `#` is within its first four characters: most lines need no closer look.
        h = None if fence or "#" not in line[:4] else heading_of(line)
        if h is None or h[0] > 4 or not h[1]:
            body.append(line)
            continue
        level, heading = h
        name = normalise_heading(heading)
        inline = ""
        if name not in _KNOWN and ":" in heading:
            head, _, rest = heading.partition(":")
            if normalise_heading(head) in _KNOWN:
                name, inline = normalise_heading(head), rest.strip()
        if name not in _KNOWN:
            # `## Choices (pick one)`, `## Context for the reviewer`: the first word decides.
            first = re.split(r"[^\w]+", name, maxsplit=1)[0]
            if first in _KNOWN:
                name = first
        flush()
        body = [inline] if inline else []
        if name in _KNOWN:
            current = _KNOWN[name]
        elif level == 1 and parsed.title is None and not parsed.sections:
            parsed.title = heading.strip("*_ ").rstrip(":")
            current = None
        else:
            current = "extra:" + heading
            current_title = heading.strip("*_ ").rstrip(":")
    flush()
    return parsed


def _items(body: str) -> list[str]:
    """Bullets as items; lines without a bullet continue the item above (or stand alone)."""
    items: list[str] = []
    has_bullets = any(_BULLET.match(line) for line in body.splitlines())
    for line in body.splitlines():
        if not line.strip():
            continue
        m = _BULLET.match(line)
        if m:
            items.append(line[m.end() :].strip())
        elif has_bullets and items:
            items[-1] += " " + line.strip()
        else:
            items.append(line.strip())
    return items


def _split_option(text: str) -> tuple[str, str | None]:
    for sep in SEPARATORS:
        option, found, consequence = text.partition(sep)
        if found and option.strip() and consequence.strip():
            return option.strip().strip("*_ ").strip(), consequence.strip()
    return text.strip().strip("*_ ").strip(), None


def parse_choices(body: str) -> list[Choice]:
    choices: list[Choice] = []
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    for line in body.splitlines():
        if not line.strip():
            continue
        m = _CHOICE.match(line)
        bullet = _BULLET.match(line)
        if m:
            key = (m.group(1) or m.group(2)).upper()
            rest = m.group(3)
        elif bullet:
            key = letters[len(choices)] if len(choices) < len(letters) else str(len(choices) + 1)
            rest = line[bullet.end() :]
        elif choices:
            last = choices[-1]
            if last.consequence is None:
                option, consequence = _split_option(last.option + " " + line.strip())
            else:
                option, consequence = last.option, last.consequence + " " + line.strip()
            choices[-1] = Choice(last.key, option, consequence)
            continue
        else:
            continue
        option, consequence = _split_option(rest)
        choices.append(Choice(key, option, consequence))
    # Keys must be unique to be answerable: fall back to positions when they are not.
    if len({c.key for c in choices}) != len(choices):
        choices = [Choice(str(i), c.option, c.consequence) for i, c in enumerate(choices, 1)]
    return choices


def parse_blocked(text: str) -> tuple[dict[str, Any], list[str]]:
    """Parse BLOCKED.md text into its fields, plus the problems found on the way."""
    text = text.removeprefix(BOM).replace("\r\n", "\n").replace("\r", "\n")
    parsed = _split_sections(text)
    problems: list[str] = []
    known = parsed.sections
    category = _category(parsed)
    if not known:
        question = text.strip()
        if parsed.title and not parsed.extra:
            # Only a title and prose: the prose is the question.
            question = "\n".join(parsed.preamble).strip() or parsed.title
        problems.append(
            "No Question / Context / Attempted / Choices sections were found: "
            "the whole file is shown as the question."
        )
        if not question:
            question = "(BLOCKED.md is empty)"
            problems.append("The file is empty or only whitespace.")
        return {
            "title": None,
            "question": question,
            "context": "",
            "attempted": [],
            "choices": [],
            "extra": [],
            "category": category,
        }, problems
    question = known.get("question", "").strip()
    if not question:
        preamble = "\n".join(parsed.preamble).strip()
        question = preamble or "(no question given)"
        problems.append("The Question section is missing or empty.")
    title = parsed.title
    if title is not None and normalise_heading(title) == "blocked":
        title = None
    fields = {
        "title": title,
        "question": question,
        "context": known.get("context", "").strip(),
        "attempted": _items(known.get("attempted", "")),
        "choices": parse_choices(known.get("choices", "")),
        "extra": parsed.extra,
        "category": category,
    }
    if "notes" in known:  # `## Operator notes` (`plan_note`): the operator's, oldest first
        fields["notes"] = [one_line(item) for item in _items(known["notes"])]
    return fields, problems


def _category(parsed: _Parsed) -> str | None:
    """The category the file declares, if any: a `Category` section (or heading with its value,
    `## Category: credentials`), else a `Category:` line before the first section. Taken out of
    the sections, so that a file with only a category and prose still reads as prose."""
    body = parsed.sections.pop("category", None)
    lines = body.splitlines() if body is not None else []
    if body is None:
        fence = False
        for line in parsed.preamble:
            if line.strip().startswith(("```", "~~~")):
                fence = not fence
            m = None if fence else _CATEGORY_LINE.match(line)
            if m:
                lines = [m.group(1)]
                break
    for line in lines:
        m = _BULLET.match(line)
        value = one_line(line[m.end() :] if m else line).strip("*_`\"' ")
        if value:
            return normalise_category(value)
    return None


def normalise_category(value: str) -> str:
    """A declared category as blocks carry it: a documented one (FORMATS.md §2.2) in its own
    spelling whatever the case, spaces or underscores (`Merge conflict`: `merge-conflict`);
    any other as written, on one line, cut to CATEGORY_MAX characters."""
    value = one_line(value)
    slug = re.sub(r"[\s_]+", "-", value.casefold())
    if slug in CATEGORIES:
        return slug
    return value if len(value) <= CATEGORY_MAX else value[: CATEGORY_MAX - 1] + "…"


class LoopkitSource(Source):
    """BLOCKED.md at each repository's root."""

    name = "loopkit"
    category_hint = 'BLOCKED.md says "Category: NAME"'

    def watch_dirs(self, repo: Path) -> list[Path]:
        return [repo]

    def block_files(self, repo: Path) -> list[Path]:
        return [fsio.child(repo, BLOCKED)]

    def claims(self, repo: Path, path: Path) -> bool:
        return path == repo / BLOCKED or path == repo

    def layout_changed(self, repo: Path, path: Path) -> bool:
        return False

    def cacheable(self, repo: Path, path: Path) -> bool:
        # The block is BLOCKED.md's bytes, mtime and the label; a symlink is never cached.
        return True

    def parse(self, repo: Path, path: Path, label: str) -> Block | None:
        path = fsio.child(repo, BLOCKED)
        try:
            read = fsio.read_file(path)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            # Something is there but it is no file to read (a folder, a FIFO, a device, a
            # symlink to nothing): the loop must stay stopped, so it is an unreadable block.
            why = fsio.why_not_a_file(path)
            if why is None:
                return None  # nothing there (or it went away meanwhile): no block
            return self._unreadable(repo, path, label, why)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # a socket
                return self._unreadable(repo, path, label, fsio.why_not_a_file(path) or "")
            return self._unreadable(repo, path, label, exc.strerror or str(exc))
        text = read.head.decode("utf-8", "replace")
        fields, problems = parse_blocked(text)
        if b"\x00" in read.head:
            problems.append("The file contains NUL bytes: it may be binary.")
        if read.truncated:
            problems.append(
                f"The file is {read.size:,} bytes; only the first {len(read.head):,} are shown."
            )
        if path.is_symlink() and not fsio.is_inside(path.resolve(), repo.resolve()):
            problems.append("BLOCKED.md is a symlink that leads outside the repository.")
        return Block(
            id=label,
            source=self.name,
            repo=repo,
            path=path,
            state="blocked",
            question=fields["question"],
            context=fields["context"],
            attempted=tuple(fields["attempted"]),
            choices=tuple(fields["choices"]),
            since=read.mtime,
            fingerprint=read.fingerprint,
            raw=text,
            title=fields["title"],
            extra=tuple(fields["extra"]),
            problems=tuple(problems),
            truncated=read.truncated,
            category=fields["category"],
            notes=tuple(fields.get("notes", ())),
        )

    def _unreadable(self, repo: Path, path: Path, label: str, reason: str) -> Block:
        reason = reason or "it is not a regular file"
        return Block.shown_only(
            label,
            self.name,
            repo,
            path,
            f"(BLOCKED.md could not be read: {reason})",
            f"BLOCKED.md could not be read: {reason}.",
        )

    # -- answering ---------------------------------------------------------------------------

    def decision_text(self, block: Block, answer: Answer) -> str:
        """The PROMPT.md decision, without its date; the operator may edit it in the preview."""
        if answer.decision_override is not None:
            return answer.decision_override.strip()
        question = one_line(block.question)
        if answer.choice is not None:
            decided = one_line(answer.choice.label())
        elif answer.texts and answer.texts[0].strip():
            decided = one_line(answer.texts[0])
        else:
            raise UsageError("the answer is empty: pick a choice or type an answer")
        text = f"{question} → {decided}"
        if answer.note and answer.note.strip():
            text += f" (operator note: {one_line(answer.note)})"
        return text

    def plan(self, block: Block, answer: Answer) -> Plan:
        if not block.answerable:
            raise HitlError(f"{block.id}: BLOCKED.md cannot be read, so it cannot be answered")
        decision = self.decision_text(block, answer)
        if not decision:
            raise UsageError("the decision text is empty")
        repo = Path(block.repo)
        changes: list[FileChange] = []
        expect: dict[Path, str | None] = {}

        prompt_path = repo / PROMPT
        fsio.resolve_for_write(repo, prompt_path)
        old = fsio.read_bytes(prompt_path)
        new = append_to_section(old, DECISIONS, _bullet(answer.date, decision))
        changes.append(FileChange(prompt_path, old, new))
        expect[prompt_path] = _fp(old)

        plan_path = repo / PLAN
        fsio.resolve_for_write(repo, plan_path)
        old = fsio.read_bytes(plan_path)
        who = one_line(answer.operator)
        what = one_line(decision).rstrip(".")
        note = f"Block answered by {who} via hitl: {what}. BLOCKED.md removed; the loop can resume."
        new = append_to_section(old, NOTES, _bullet(answer.date, note), keep_first_line=True)
        changes.append(FileChange(plan_path, old, new))
        expect[plan_path] = _fp(old)

        blocked = repo / BLOCKED
        blocked_bytes = fsio.read_bytes(blocked)
        if blocked_bytes is None or fingerprint(blocked_bytes) != block.fingerprint:
            raise StaleError(f"{block.id}: BLOCKED.md changed since it was read")
        changes.append(FileChange(blocked, blocked_bytes, None))
        expect[blocked] = block.fingerprint
        summary = (
            f"{block.id}: decision added to {PROMPT}, resume note to {PLAN}, {BLOCKED} removed"
        )
        return Plan(block, answer, tuple(changes), expect, summary, hint=restart_hint(repo))

    def plan_note(self, block: Block, note: str, operator: str, when: datetime) -> Plan:
        """A dated line under BLOCKED.md's `## Operator notes` (made at its end if missing):
        every other byte kept (line endings, BOM, a missing final newline). BLOCKED.md stays,
        so the loop stays stopped and reads the note when it resumes."""
        if not block.answerable:
            raise HitlError(f"{block.id}: BLOCKED.md cannot be read, so it cannot take a note")
        text = one_line(note)
        if not text:
            raise UsageError("the note is empty")
        repo = Path(block.repo)
        blocked = repo / BLOCKED
        fsio.resolve_for_write(repo, blocked)
        old = fsio.read_bytes(blocked)
        if old is None or fingerprint(old) != block.fingerprint:
            raise StaleError(f"{block.id}: BLOCKED.md changed since it was read")
        date = when.astimezone(UTC).strftime("%Y-%m-%d")
        line = f"- {date}, {one_line(operator) or 'operator'}: {text}"
        new = append_to_section(old, OPERATOR_NOTES, [line])
        if not old.endswith((b"\n", b"\r")):  # the file ended without a newline: so does it now
            new = new.removesuffix(TextDoc.from_bytes(old).newline.encode())
        # Read back as the loop and the next operator will: the note must be the last of the
        # notes, and the choices unchanged (a `##### Operator notes` the parser takes for text,
        # or an unclosed code fence, would hide the note or make it a choice).
        before, _ = parse_blocked(old.decode("utf-8", "replace"))
        after, _ = parse_blocked(new.decode("utf-8", "replace"))
        notes = after.get("notes") or []
        if not notes or notes[-1] != one_line(line[2:]) or after["choices"] != before["choices"]:
            raise HitlError(
                f"{block.id}: {BLOCKED} would not read the note back as a note (an unclosed code "
                f"fence, or an {OPERATOR_NOTES} heading it does not see as one): nothing written; "
                "add the note by hand"
            )
        summary = f"{block.id}: note added under {BLOCKED}'s ## {OPERATOR_NOTES}; it stays blocked"
        hint = f"{BLOCKED} stays: the loop stays stopped, and reads the note when it resumes"
        return Plan(
            block,
            Answer(note=note, operator=operator, when=when),
            (FileChange(blocked, old, new),),
            {blocked: block.fingerprint},
            summary,
            hint=hint,
        )

    # -- did the loop resume? ------------------------------------------------------------------

    def resume_signs(self, block: Block, plan: Plan) -> dict[str, Any]:
        """HEAD, the fingerprints of PROMPT.md and IMPLEMENTATION_PLAN.md as the answer wrote
        them (a file it did not write: as it is now), and BLOCKED.md's (None: removed)."""
        repo = Path(block.repo)
        wrote = {c.path: c.new for c in plan.changes}
        files: dict[str, str | None] = {}
        for name in (PROMPT, PLAN):
            path = repo / name
            if path in wrote:
                files[name] = _fp(wrote[path])
            else:
                files[name] = fsio.current_fingerprint(path)
        return {
            "head": gitref.head(repo),
            "files": files,
            "blocked": fsio.current_fingerprint(repo / BLOCKED),
        }

    def resumed(self, waiting: AnswerWaiting) -> str | None:
        """A new BLOCKED.md (asked again), a new commit (HEAD moved), or PROMPT.md /
        IMPLEMENTATION_PLAN.md changed from what the answer wrote."""
        repo = Path(waiting.repo)
        signs = waiting.signs if isinstance(waiting.signs, dict) else {}
        if not os.path.isdir(repo):
            return None
        blocked = fsio.current_fingerprint(repo / BLOCKED)
        if blocked is not None and blocked != signs.get("blocked"):
            return "asked again (new BLOCKED.md)"
        now = gitref.head(repo)
        if now is not None and now != signs.get("head"):
            return f"new commit {now[:7]}"
        files = signs.get("files")
        if isinstance(files, dict):
            for name in (PROMPT, PLAN):
                if name in files and fsio.current_fingerprint(repo / name) != files[name]:
                    return f"{name} changed by the loop"
        return None

    def resume_dirs(self, waiting: AnswerWaiting) -> list[Path]:
        """The repository (BLOCKED.md, PROMPT.md, IMPLEMENTATION_PLAN.md), its git folder and
        the git folder's logs/ (every commit appends to logs/HEAD)."""
        repo = Path(waiting.repo)
        return [repo, *gitref.watch_dirs(repo)]


def restart_hint(repo: Path) -> str:
    """How to restart this repo's loop once BLOCKED.md is gone, as far as hitl can tell.

    loopkit's runner is a `run.sh` at the root; a loop started another way gets no made-up
    command. The folder is named, since the operator's shell is rarely in it.
    """
    import shlex

    runner = repo / "run.sh"
    if not runner.is_file():
        return (
            f"The loop can resume: restart it the way you started it ({repo.name} has no run.sh)."
        )
    command = "./run.sh" if os.access(runner, os.X_OK) else "bash run.sh"
    return f"Restart the loop: cd {shlex.quote(str(repo))} && {command}"


def _fp(data: bytes | None) -> str | None:
    return None if data is None else fingerprint(data)


def _bullet(date: str, text: str) -> list[str]:
    """A dated bullet; extra lines of an edited decision are indented under it."""
    lines = [line.rstrip() for line in text.strip().splitlines()] or [""]
    out = [f"- {date}: {lines[0]}"]
    out.extend(f"  {line}" if line else "" for line in lines[1:])
    return out


def append_to_section(
    data: bytes | None, heading: str, lines: list[str], keep_first_line: bool = False
) -> bytes:
    """Append `lines` at the end of the `## heading` section, creating it (or the file) if needed.

    Every existing byte stays: the new lines use the file's own line ending, and only the end of
    the line they follow may gain a line ending it lacked.
    """
    doc = TextDoc.from_bytes(data)
    found = doc.find_heading(heading)
    if found is not None:
        start, level = found
        index = doc.section_end(start, level)
        if keep_first_line and index == 0:
            index = 1
        doc.insert(index, lines)
        return doc.to_bytes()
    block = [f"## {heading}", *lines]
    if doc.lines and doc.lines[-1].strip():
        block.insert(0, "")
    doc.insert(len(doc.lines), block)
    return doc.to_bytes()
