"""hitl's own asks (`hitl mcp`): `.hitl/asks/<id>.json`, one block per open ask, as one `Source`
(the registry builds it).

A question ask shows the agent's Question / Context / Attempted / Choices; a permission ask
(Claude Code's `--permission-prompt-tool`) shows the tool and its input literally, with three
choices: Allow once, Allow always (a grant, `grants.py`), Deny; own words deny with that message.
An answer changes two lines of the ask file (and, for Allow always, adds a line to the grants
file): the agent's side reads it there (`agent.asking`), so it works wherever the answer was
written from (this machine, over ssh, the browser).

Layer: sources (the asks backend package).
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

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
from hitl_tui.sources.asks import format as fmt
from hitl_tui.sources.asks import grants as grantfile
from hitl_tui.sources.base import AnswerWaiting, Source
from hitl_tui.textio import one_line

NAME = "ask"
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

#: A permission ask's choices: (kind, option, consequence).
PERMISSION_CHOICES = (
    ("allow_once", "Allow once", "this one call; the same request is asked again next time"),
    (
        "allow_always",
        "Allow always",
        "this tool with exactly this input in this repo, from now on without asking (a "
        "grant: hitl grants, or A in the app, lists and revokes it)",
    ),
    ("deny", "Deny", "the agent is told no; answer in your own words to deny with a reason"),
)
#: How much of a tool's input a permission ask shows in its question line.
SHOWN_INPUT = 300


#: A label an agent put before its option (`A) `, `(b) `, `1. `, `C: `): hitl gives each choice
#: its own letter, so the agent's is dropped rather than shown as "A) A) ...".
_LABEL = re.compile(r"^\(?(?:[A-Za-z]|\d{1,2})[).:]\s+(?=\S)")
#: An option that is only such a label (`A — Postgres`): the text after the dash is the option.
_BARE_LABEL = re.compile(r"^\(?(?:[A-Za-z]|\d{1,2})[).:]?$")


def split_choice(text: str, labelled: bool = True) -> tuple[str, str | None]:
    """`"option — consequence"` as its two parts (the agent's choice, as written), without a
    label the agent put first (`"A — Postgres — safe"` is the option Postgres, not A)."""
    text = _LABEL.sub("", text.strip(), count=1) if labelled else text.strip()
    option, found, consequence = text.partition(" — ")
    if found and option.strip() and consequence.strip():
        if labelled and _BARE_LABEL.match(option.strip()):
            return split_choice(consequence, labelled=False)
        return option.strip(), consequence.strip()
    return text.strip(), None


def input_line(tool: str, tool_input: dict[str, Any]) -> str:
    """The tool's input as the operator reads it in one place: a Bash command as it is, a
    file tool's path, anything else as compact JSON; cut at SHOWN_INPUT characters."""
    shown: str
    command = tool_input.get("command")
    path = tool_input.get("file_path")
    if isinstance(command, str):
        shown = command
    elif isinstance(path, str) and tool in ("Edit", "Write", "Read", "MultiEdit", "NotebookEdit"):
        shown = path
    else:
        shown = orjson.dumps(tool_input).decode("utf-8")
    if len(shown) > SHOWN_INPUT:
        shown = shown[: SHOWN_INPUT - 1] + "…"
    return shown


def multiline_fields(tool_input: dict[str, Any]) -> str:
    """The input's texts of several lines (a heredoc, an Edit's old and new string, a file's
    content) as the tool gets them, line by line: in JSON they are one line of `\\n`s. Empty
    when there are none."""
    parts = [
        f"\n\n{key}, line by line:\n"
        + "\n".join(f"│ {line}" for line in value.removesuffix("\n").split("\n"))
        for key, value in tool_input.items()
        if isinstance(value, str) and "\n" in value.rstrip("\n")
    ]
    return "".join(parts)


def permission_question(tool: str, tool_input: dict[str, Any]) -> str:
    """`Allow Bash: \\`rm -rf build/\\`?`"""
    return f"Allow {tool}: `{input_line(tool, tool_input)}`?"


def note_line(note: dict[str, Any]) -> str:
    """One operator note of an ask as the list shows it: `2026-12-03, alice: text`."""
    at = fmt.parse_time(note.get("at"))
    by = note.get("by") if isinstance(note.get("by"), str) else ""
    date = at.astimezone(UTC).strftime("%Y-%m-%d") if at is not None else "?"
    return one_line(f"{date}, {by or 'operator'}: {note.get('note', '')}")


class AskSource(Source):
    """The asks an agent filed through `hitl mcp`, in `.hitl/asks/`."""

    name = NAME

    # -- where blocks live -----------------------------------------------------------------

    def watch_dirs(self, repo: Path) -> list[Path]:
        # One watch per repository at most: the asks' folder; until it exists, `.hitl/` (to
        # see it made there); until that exists, the root (which loopkit watches anyway).
        for folder in (grantfile.asks_dir(repo), repo / fmt.HITL_DIR):
            if os.path.isdir(folder) and not os.path.islink(folder):
                return [folder]
        return []

    def block_files(self, repo: Path) -> list[Path]:
        try:
            # Most repositories have no `.hitl/`: one lstat, and nothing more to ask.
            top = os.lstat(os.path.join(repo, fmt.HITL_DIR))
        except OSError:
            return []
        folder = grantfile.asks_dir(repo)
        try:
            inner = os.lstat(folder)
        except OSError:
            return []  # no asks folder: one more lstat, where the listing would fail too
        if stat.S_ISLNK(top.st_mode) or stat.S_ISLNK(inner.st_mode):
            return []  # hitl never reads or writes its own files through a symlink
        try:
            names = [
                entry.name
                for entry in os.scandir(folder)
                if entry.name.endswith(".json") and not entry.name.startswith(fsio.TEMP_PREFIX)
            ]
        except OSError:
            return []
        return [fsio.child(folder, name) for name in sorted(names)]

    def claims(self, repo: Path, path: Path) -> bool:
        return path.parent == grantfile.asks_dir(repo) and path.name.endswith(".json")

    def layout_changed(self, repo: Path, path: Path) -> bool:
        # `.hitl/` or its asks folder made, removed or swapped: read the repository again.
        return path in (repo / fmt.HITL_DIR, grantfile.asks_dir(repo))

    def cacheable(self, repo: Path, path: Path) -> bool:
        return True

    # -- parsing ---------------------------------------------------------------------------

    def parse(self, repo: Path, path: Path, label: str) -> Block | None:
        if path.parent != grantfile.asks_dir(repo) or not path.name.endswith(".json"):
            return None
        stem = path.name[: -len(".json")]
        block_id = f"{label}/{stem}"
        if os.path.islink(path):
            # hitl never reads its own files through a symlink (the agent's side does not
            # either): one planted here, dangling or leading anywhere, is shown, never followed.
            why = "it is a symlink (hitl reads asks only as files)"
            return self._unreadable(repo, path, block_id, why)
        try:
            read = fsio.read_file(path, limit=fmt.MAX_FILE)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except IsADirectoryError:
            # Something that is no regular file: a folder, a FIFO, a device (said as it is).
            why = fsio.why_not_a_file(path) or "it is not a regular file"
            return self._unreadable(repo, path, block_id, why)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # a socket
                why = fsio.why_not_a_file(path) or "it is not a regular file"
                return self._unreadable(repo, path, block_id, why)
            return self._unreadable(repo, path, block_id, exc.strerror or str(exc))
        if read.truncated:
            return self._unreadable(
                repo, path, block_id, f"it is {read.size:,} bytes (at most {fmt.MAX_FILE:,})"
            )
        try:
            ask = fmt.parse(read.head)
        except fmt.AskFormatError as exc:
            return self._unreadable(repo, path, block_id, str(exc))
        if ask.status != "open":
            return None
        problems = list(ask.problems)
        if ask.id != stem:
            problems.append(f"the file's id is {ask.id}, its name says {stem}")
        raw = read.head.decode("utf-8", errors="replace")  # `r` shows the file as it is
        return self.block_of(ask, repo, path, block_id, read.fingerprint, read.mtime, problems, raw)

    def block_of(
        self,
        ask: fmt.Ask,
        repo: Path,
        path: Path,
        block_id: str,
        print_: str,
        mtime: datetime,
        problems: list[str],
        raw: str | None = None,
    ) -> Block:
        extra: list[Section] = []
        if ask.client:
            extra.append(Section("Asked by", f"{ask.client}, over MCP (hitl mcp)"))
        meta: dict[str, Any] = {"ask": ask.id, "kind": ask.kind, "asked": ask.asked}
        notes = tuple(note_line(n) for n in ask.notes)
        if ask.kind == "permission":
            tool = ask.tool or "(no tool named)"
            pretty = orjson.dumps(ask.input, option=orjson.OPT_INDENT_2).decode("utf-8")
            context = f"Tool: {tool}\nInput, exactly as the agent would run it:\n{pretty}"
            context += multiline_fields(ask.input)
            choices = tuple(
                Choice(LETTERS[i], option, consequence, kind=kind)
                for i, (kind, option, consequence) in enumerate(PERMISSION_CHOICES)
            )
            meta.update(tool=ask.tool, input_sha=ask.input_sha)
            return Block(
                id=block_id,
                source=self.name,
                repo=repo,
                path=path,
                state="blocked",
                question=permission_question(tool, ask.input),
                context=context,
                attempted=(),
                choices=choices,
                since=ask.asked or mtime,
                fingerprint=print_,
                raw=pretty if raw is None else raw,
                category="permission",
                title=f"Permission: {one_line(tool)}",
                extra=tuple(extra),
                problems=tuple(problems),
                notes=notes,
                meta=meta,
            )
        agent_choices = [split_choice(text) for text in ask.choices if text.strip()]
        return Block(
            id=block_id,
            source=self.name,
            repo=repo,
            path=path,
            state="blocked",
            question=ask.question or "(no question given)",
            context=ask.context,
            attempted=ask.attempted,
            choices=tuple(
                Choice(LETTERS[i] if i < len(LETTERS) else str(i + 1), option, consequence)
                for i, (option, consequence) in enumerate(agent_choices)
            ),
            since=ask.asked or mtime,
            fingerprint=print_,
            raw=ask.question if raw is None else raw,
            category="question",
            extra=tuple(extra),
            problems=tuple(problems),
            notes=notes,
            meta=meta,
        )

    def _unreadable(self, repo: Path, path: Path, block_id: str, reason: str) -> Block:
        return Block.shown_only(
            block_id,
            self.name,
            repo,
            path,
            f"(this ask could not be read: {reason})",
            f"{path.name} could not be read: {reason}; remove it by hand.",
        )

    def began(self, block: Block, first_seen: datetime) -> datetime:
        """When the agent asked (never later than hitl first saw it)."""
        asked = block.meta.get("asked")
        if isinstance(asked, datetime) and asked <= first_seen:
            return asked
        return first_seen

    # -- answering -------------------------------------------------------------------------

    def decision_text(self, block: Block, answer: Answer) -> str:
        """What the agent is told: the choice (with the operator's note), or own words."""
        if answer.decision_override is not None:
            return answer.decision_override.strip()
        if answer.choice is not None:
            text = answer.choice.option
            if block.meta.get("kind") == "permission" and answer.choice.kind == "deny":
                text = "The operator denied this."
        elif answer.texts and answer.texts[0].strip():
            text = answer.texts[0].strip()
        else:
            raise UsageError("the answer is empty: pick a choice or type an answer")
        if answer.note and answer.note.strip():
            text += f" (operator note: {answer.note.strip()})"
        return text

    def plan(self, block: Block, answer: Answer) -> Plan:
        if not block.answerable:
            raise HitlError(f"{block.id}: this ask cannot be read, so it cannot be answered")
        repo, path = Path(block.repo), Path(block.path)
        old, ask = self._open_ask(block)
        if ask.answer is not None or ask.delivered is not None:
            # An open ask holds no answer as hitl writes it: one put there by hand would be
            # the one read (JSON's last key wins), whatever the operator answers.
            raise HitlError(f"{block.id}: the ask already holds an answer it was not given here")
        decision = self.decision_text(block, answer)
        if not decision:
            raise UsageError("the answer text is empty")
        try:
            fmt.bounded(decision, fmt.LIMITS["answer"], "the answer")
        except fmt.AskFormatError as exc:
            raise UsageError(f"{block.id}: {exc}") from None
        when = answer.when.astimezone(UTC).isoformat()
        choice = answer.choice
        record: dict[str, Any] = {
            "key": choice.key if choice is not None else None,
            "choice": choice.option if choice is not None else None,
            "answer": decision,
            "by": answer.operator,
            "at": when,
        }
        # The ask file is the block's own file: it changes last (after a grant), as a block's
        # removal does, so that an agent never reads an answer whose grant is not written yet.
        changes: list[FileChange] = []
        expect: dict[Path, str | None] = {path: block.fingerprint}
        summary = f"{block.id}: answered; the agent reads it at its next check"
        if ask.kind == "permission":
            # The choice's kind as parsed from the file (a caller's copy may carry none);
            # anything unknown denies.
            kind = "deny"
            if choice is not None:
                kind = next((c.kind for c in block.choices if c.key == choice.key), None) or kind
            record["verdict"] = "deny" if kind == "deny" else "allow"
            record["always"] = kind == "allow_always"
            verdict = {"allow_once": "allowed once", "allow_always": "allowed always"}
            summary = f"{block.id}: {ask.tool or 'the tool'} {verdict.get(kind, 'denied')}"
            if kind == "allow_always":
                grant = self._grant(repo, ask, answer.operator, when)
                changes.append(grant)
                expect[grant.path] = None if grant.old is None else fingerprint(grant.old)
                summary += f" (a grant in {fmt.HITL_DIR}/{grantfile.GRANTS})"
        try:
            new = fmt.answered_bytes(old, record)
        except fmt.AskFormatError as exc:
            raise HitlError(f"{block.id}: the ask cannot be answered: {exc}") from None
        if len(new) > fmt.MAX_FILE:  # the agent's side would never read it back
            raise UsageError(
                f"{block.id}: with this answer the ask file would be {len(new):,} bytes (at most "
                f"{fmt.MAX_FILE:,}): answer in fewer words"
            )
        changes.append(FileChange(path, old, new))
        hint = "The agent gets the answer now if it is waiting, else at its next check_answer."
        return Plan(block, answer, tuple(changes), expect, summary, hint=hint)

    def plan_note(self, block: Block, note: str, operator: str, when: datetime) -> Plan:
        """A note the agent reads with `check_answer` (status "waiting", and the notes) while
        the ask stays open: the file's `"notes"` line (`format.noted_bytes`)."""
        if not block.answerable:
            raise HitlError(f"{block.id}: this ask cannot be read, so it cannot take a note")
        text = note.strip()
        if not text:
            raise UsageError("the note is empty")
        try:
            fmt.bounded(text, fmt.LIMITS["answer"], "the note")
        except fmt.AskFormatError as exc:
            raise UsageError(f"{block.id}: {exc}") from None
        path = Path(block.path)
        old, ask = self._open_ask(block)
        try:
            at = when.astimezone(UTC).isoformat()
            notes = [*ask.notes, {"note": text, "by": one_line(operator) or "operator", "at": at}]
            new = fmt.noted_bytes(old, notes)
            if list(fmt.parse(new).notes) != notes:  # another "notes" key would win
                raise fmt.AskFormatError("it holds notes hitl did not write")
        except fmt.AskFormatError as exc:
            raise HitlError(f"{block.id}: the ask cannot take a note: {exc}") from None
        return Plan(
            block,
            Answer(note=note, operator=operator, when=when),
            (FileChange(path, old, new),),
            {path: block.fingerprint},
            f"{block.id}: note added; the ask stays open",
            hint="The agent reads the note at its next check_answer (status: waiting).",
        )

    def _open_ask(self, block: Block) -> tuple[bytes, fmt.Ask]:
        """The ask file's bytes and the ask, as the operator read it and still open; StaleError
        when it is gone, changed or answered, HitlError when it cannot be read."""
        old = fsio.read_bytes(Path(block.path))
        if old is None:
            raise StaleError(f"{block.id}: the ask is gone (answered elsewhere, or removed)")
        if fingerprint(old) != block.fingerprint:
            raise StaleError(f"{block.id}: the ask changed since it was read")
        try:
            ask = fmt.parse(old)
        except fmt.AskFormatError as exc:
            raise HitlError(f"{block.id}: the ask cannot be read: {exc}") from None
        if ask.status != "open":
            raise StaleError(f"{block.id}: the ask was already answered")
        return old, ask

    def _grant(self, repo: Path, ask: fmt.Ask, operator: str, when: str) -> FileChange:
        """The grants file with a grant for `ask`'s tool and input as its new last line."""
        path = grantfile.grants_path(repo)
        fsio.resolve_for_write(repo, path)
        old = fsio.read_bytes(path)
        grant = {
            "id": "grant-" + secrets.token_hex(5),
            "tool": ask.tool,
            "input_sha": fmt.input_sha(ask.input),  # of the input shown, never as the file says
            "summary": f"{ask.tool}: {input_line(ask.tool, ask.input)}",
            "granted": when,
            "by": operator,
            "ask": ask.id,
        }
        return FileChange(path, old, grantfile.with_grant(old, grant))

    # -- did the agent get it? ---------------------------------------------------------------

    def resume_signs(self, block: Block, plan: Plan) -> dict[str, Any]:
        path = Path(block.path)
        new = next((c.new for c in plan.changes if c.path == path), None)
        return {"file": None if new is None else fingerprint(new)}

    def resumed(self, waiting: AnswerWaiting) -> str | None:
        """The agent's side marked the answer delivered (or the ask is gone)."""
        path = Path(waiting.path)
        data = fsio.read_small(path, fmt.MAX_FILE)
        if data is None:
            return None if os.path.lexists(path) else "the ask was removed"
        try:
            ask = fmt.parse(data)
        except fmt.AskFormatError:
            return None
        if ask.status == "delivered":
            return "the agent received the answer"
        return None

    def resume_dirs(self, waiting: AnswerWaiting) -> list[Path]:
        return [Path(waiting.path).parent]

    def loop_acts_on(self, block_id: str) -> bool:
        """A revoked grant (`shop/grant-...`) is no answer a loop acts on: a commit after it
        does not stop `hitl undo` putting it back."""
        return not grantfile.GRANT_ID_RE.match(block_id.rsplit("/", 1)[-1])
