"""The ask file: one question (or one permission request) an agent asked over MCP (`hitl mcp`).

Each ask is its own file, `.hitl/asks/<id>.json` in the repository, so several can be open in
one repository at once (two agents, or an agent and its subagents) and none touches loopkit's
BLOCKED.md. The folder `.hitl/` holds a `.gitignore` of `*`: a loop that commits everything
never commits it.

The file is JSON that hitl writes in one canonical shape, one key per line, so that every later
change is a change of whole lines (FORMATS: "change only the lines the answer needs"):

    {
     "hitl_ask": 1,
     "id": "ask-7k2m9q",
     "kind": "question",
     "status": "open",
     "asked": "2026-12-03T10:45:00.123456+00:00",
     ...the agent's fields, one per line...
    }

- The operator's answer turns `"status": "open",` into `"status": "answered",` and puts one
  `"answer": {...},` line right below it (`answered_bytes`).
- A note from the operator that keeps the ask open (`w`, `hitl note`) is one `"notes": [...],`
  line right below `"status": "open",` (each note `{"note", "by", "at"}`, oldest first); a
  later note replaces that line with the longer list (`noted_bytes`). The status stays open:
  `check_answer` says "waiting", with the notes.
- The agent's side, when the answer has reached the agent, turns it into
  `"status": "delivered",` with a `"delivered": "<time>",` line below (`delivered_bytes`).

A file is read back as untrusted (an agent may edit it): any JSON that is not an object of the
expected types is a problem the block shows, never a crash. Every text an agent gives is bounded
(`LIMITS`) before it is written; a file larger than `MAX_FILE` is not parsed.

Layer: sources (the asks backend package). Pure: bytes in, bytes and records out.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

#: The folder of hitl's own files in a repository, and its asks' folder below it.
HITL_DIR = ".hitl"
ASKS_DIR = "asks"
#: What `.hitl/.gitignore` holds: the folder ignores itself, whole.
GITIGNORE = b"# hitl's asks and grants: never committed\n*\n"
#: The version of the format this hitl writes (the first key of every file).
VERSION = 1

KINDS = ("question", "permission")
STATUSES = ("open", "answered", "delivered")

#: An ask's id: `ask-` and ten characters that read unambiguously aloud and in a terminal.
_ALPHABET = "23456789abcdefghjkmnpqrstuvwxyz"
ID_RE = re.compile(r"^ask-[a-z0-9]{4,16}$")

#: The bounds of what an agent may put in an ask (characters; bytes for the tool input). An ask
#: beyond them is refused with a one-line error and nothing is written.
LIMITS = {
    "question": 4_000,
    "context": 16_000,
    "attempted_item": 1_000,
    "attempted": 20,
    "choice": 500,
    "choices": 20,
    "tool_name": 200,
    "tool_use_id": 200,
    "client": 200,
    "input_bytes": 256 * 1024,
    "answer": 16_000,
}
#: A file larger than this is not parsed (shown as an unreadable block).
MAX_FILE = 1 << 20
#: How many open asks one repository may hold: the one-more is refused, not written.
MAX_OPEN = 100

#: The keys a file is written with, in this order (each on its own line).
_ORDER = (
    "hitl_ask",
    "id",
    "kind",
    "status",
    "asked",
    "client",
    "question",
    "context",
    "attempted",
    "choices",
    "tool",
    "input",
    "input_sha",
    "tool_use_id",
)


_EPOCH = datetime.fromtimestamp(0, UTC)


class AskFormatError(ValueError):
    """The bytes are not an ask file hitl can read or change; one line saying why."""


def new_id() -> str:
    """A fresh ask id (`ask-` and ten characters: about 10^15 of them, never reused)."""
    return "ask-" + "".join(secrets.choice(_ALPHABET) for _ in range(10))


def input_sha(tool_input: dict[str, Any]) -> str:
    """The identity of a tool's input: the same input (whatever its keys' order) is the same."""
    data = orjson.dumps(tool_input, option=orjson.OPT_SORT_KEYS)
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _value(value: Any) -> str:
    return orjson.dumps(value).decode("utf-8")


def render(fields: dict[str, Any]) -> bytes:
    """The canonical file for a new ask (status open): one key per line, in `_ORDER`."""
    keys = [k for k in _ORDER if k in fields and fields[k] is not None]
    lines = ["{"]
    for i, key in enumerate(keys):
        comma = "," if i < len(keys) - 1 else ""
        lines.append(f" {_value(key)}: {_value(fields[key])}{comma}")
    lines.append("}")
    return ("\n".join(lines) + "\n").encode("utf-8")


@dataclass(frozen=True, slots=True)
class Ask:
    """An ask file as read: its fields checked for type; `problems` says what was not right."""

    id: str
    kind: str
    status: str
    asked: datetime | None
    question: str
    context: str = ""
    attempted: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    client: str = ""
    tool: str = ""
    input: dict[str, Any] = field(default_factory=dict)
    input_sha: str = ""
    tool_use_id: str = ""
    #: The operator's answer, once answered: {"key", "choice", "answer", "verdict", "by", "at"}.
    answer: dict[str, Any] | None = None
    delivered: datetime | None = None
    #: The operator's notes while the ask stays open: {"note", "by", "at"}, oldest first.
    notes: tuple[dict[str, Any], ...] = ()
    problems: tuple[str, ...] = ()


def _text(data: dict[str, Any], key: str, problems: list[str]) -> str:
    value = data.get(key, "")
    if isinstance(value, str):
        return value
    problems.append(f"{key!r} is not text")
    return ""


def _texts(data: dict[str, Any], key: str, problems: list[str]) -> tuple[str, ...]:
    value = data.get(key, [])
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    problems.append(f"{key!r} is not a list of texts")
    return ()


def parse_time(value: object) -> datetime | None:
    """An ISO time with its zone, as hitl writes them; None for anything else, and for a time
    before 1970 or one that is no time in UTC (year 10000): an agent may write any."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        when = datetime.fromisoformat(value)
        when = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
        when.astimezone(UTC)
    except (ValueError, OverflowError):
        return None
    return when if when >= _EPOCH else None


def parse(data: bytes) -> Ask:
    """An ask file's bytes as an Ask; AskFormatError when they are no ask at all (not JSON, not
    an object, no valid id). Fields of the wrong type are dropped and named in `problems`."""
    if len(data) > MAX_FILE:
        raise AskFormatError(f"the file is {len(data):,} bytes (at most {MAX_FILE:,} are read)")
    try:
        loaded = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise AskFormatError(f"it is not JSON ({str(exc).splitlines()[0]})") from None
    if not isinstance(loaded, dict):
        raise AskFormatError("it is not a JSON object")
    ask_id = loaded.get("id")
    if not isinstance(ask_id, str) or not ID_RE.match(ask_id):
        raise AskFormatError("it has no valid 'id'")
    problems: list[str] = []
    kind = loaded.get("kind")
    if kind not in KINDS:
        problems.append(f"unknown kind {str(kind)[:40]!r}: read as a question")
        kind = "question"
    status = loaded.get("status")
    if status not in STATUSES:
        problems.append(f"unknown status {str(status)[:40]!r}: read as open")
        status = "open"
    tool_input = loaded.get("input", {})
    if not isinstance(tool_input, dict):
        problems.append("'input' is not an object")
        tool_input = {}
    notes = loaded.get("notes", [])
    if not isinstance(notes, list) or not all(
        isinstance(n, dict) and isinstance(n.get("note"), str) for n in notes
    ):
        problems.append("'notes' is not a list of notes")
        notes = []
    answer = loaded.get("answer")
    if answer is not None and not isinstance(answer, dict):
        problems.append("'answer' is not an object")
        answer = None
    return Ask(
        id=ask_id,
        kind=str(kind),
        status=str(status),
        asked=parse_time(loaded.get("asked")),
        question=_text(loaded, "question", problems),
        context=_text(loaded, "context", problems),
        attempted=_texts(loaded, "attempted", problems),
        choices=_texts(loaded, "choices", problems),
        client=_text(loaded, "client", problems),
        tool=_text(loaded, "tool", problems),
        input=tool_input,
        input_sha=_text(loaded, "input_sha", problems),
        tool_use_id=_text(loaded, "tool_use_id", problems),
        answer=answer,
        delivered=parse_time(loaded.get("delivered")),
        notes=tuple(notes),
        problems=tuple(problems),
    )


def _status_line(data: bytes, status: str) -> tuple[list[bytes], int]:
    """The file's lines (each with its ending) and the index of its one `"status": "<status>",`
    line; AskFormatError when there is not exactly one (the file is not as hitl wrote it)."""
    lines = data.splitlines(keepends=True)
    wanted = f' "status": "{status}",'.encode()
    found = [i for i, line in enumerate(lines) if line.rstrip(b"\r\n") == wanted]
    if len(found) != 1:
        raise AskFormatError(
            f"its status line is not as hitl writes it (looked for {wanted.decode().strip()})"
        )
    return lines, found[0]


def _replace_status(data: bytes, old: str, new: str, key: str, value: Any) -> bytes:
    lines, index = _status_line(data, old)
    line = lines[index]
    ending = line[len(line.rstrip(b"\r\n")) :] or b"\n"
    lines[index] = f' "status": "{new}",'.encode() + ending
    lines.insert(index + 1, f" {_value(key)}: {_value(value)},".encode() + ending)
    return b"".join(lines)


def answered_bytes(data: bytes, answer: dict[str, Any]) -> bytes:
    """The file with its status `answered` and the operator's `answer` below that line: two
    lines changed, every other byte kept."""
    return _replace_status(data, "open", "answered", "answer", answer)


def noted_bytes(data: bytes, notes: list[dict[str, Any]]) -> bytes:
    """The open ask with its `"notes"` line (right below the status line) holding `notes`: one
    line added, or the one there replaced; every other byte kept."""
    lines, index = _status_line(data, "open")
    line = lines[index]
    ending = line[len(line.rstrip(b"\r\n")) :] or b"\n"
    new = f" {_value('notes')}: {_value(notes)},".encode() + ending
    found = [i for i, old in enumerate(lines) if old.startswith(b' "notes": ')]
    if len(found) > 1 or (found and found[0] != index + 1):
        raise AskFormatError("its notes line is not as hitl writes it (right below its status)")
    if found:
        lines[index + 1] = new
    else:
        lines.insert(index + 1, new)
    return b"".join(lines)


def delivered_bytes(data: bytes, when: datetime) -> bytes:
    """The file with its status `delivered` (the answer reached the agent) and when."""
    return _replace_status(data, "answered", "delivered", "delivered", when.isoformat())


def bounded(value: str, limit: int, name: str) -> str:
    """`value` if it is within `limit` characters; AskFormatError naming the field if not."""
    if len(value) > limit:
        raise AskFormatError(f"{name} is {len(value):,} characters (at most {limit:,})")
    return value
