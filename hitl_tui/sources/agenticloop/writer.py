"""Writing an answer into an agenticloop task file, the way the loop's own CLI would: one dated
note directly under `## Comments`, and only the `status`, `block_category` and `approved` lines
of the header edited, by line, so comments, key order, quoting and every other byte survive.
The result is parsed again with the same reader and the write refused if anything else moved.

Layer: sources (the agenticloop backend package).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import hitl_tui.sources.agenticloop.frontmatter as frontmatter
from hitl_tui import fsio
from hitl_tui.model import (
    Answer,
    Block,
    FileChange,
    HitlError,
    Plan,
    StaleError,
    UsageError,
    fingerprint,
)
from hitl_tui.sources.agenticloop.parse import (
    FENCE,
    NOTE_LINE,
    RESUMED,
    HeaderError,
    Split,
    heading,
    load_header,
    split_header,
)
from hitl_tui.textio import TextDoc, normalise_heading, one_line, placeholder_in

EDITABLE_KEYS = ("status", "block_category", "approved")

#: Sections that follow `## Comments` in the loop's template: a new Comments goes before them.
AFTER_COMMENTS = ("revision log",)

_KEY_LINE = "^{key}[ \t]*:"


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


def decision_text(block: Block, answer: Answer) -> str:
    """The dated note's text, without its date; the operator may edit it in the preview."""
    if answer.decision_override is not None:
        return one_line(answer.decision_override)
    return decide(block, answer).note


def plan(block: Block, answer: Answer) -> Plan:
    """The exact new bytes of the task file that answer `block` (`AgenticloopSource.plan`)."""
    if not block.answerable:
        raise HitlError(f"{block.id}: the task header does not parse; fix the file by hand")
    task_id = block.meta["task_id"]
    path = Path(block.path)  # a local block's: a file here (remote blocks' are URLs)
    fsio.resolve_for_write(Path(block.repo), path)
    old = fsio.read_bytes(path)
    if old is None:
        raise StaleError(f"{block.id}: the task file is gone")
    if fingerprint(old) != block.fingerprint:
        raise StaleError(f"{block.id}: the task file changed since it was read")
    decision = decide(block, answer)
    note = decision_text(block, answer)
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
        (FileChange(path, old, new),),
        {path: block.fingerprint},
        f"{block.id}: " + "; ".join(effects),
        hint=hint,
    )


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
        if line.strip().startswith(FENCE):
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
        if k > at and k < len(doc.lines) and NOTE_LINE.match(doc.lines[k].rstrip("\r\n")):
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
