"""The remote protocol: what `hitl list --json --watch` prints, and how the far side reads it.

One JSON object per line, UTF-8, newline-terminated. Stable: a field is only ever added, and a
change that an older reader would misread raises `PROTOCOL`.

- first line, the whole list::

    {"event": "list", "protocol": 1, "hitl": "0.1.0", "blocks": [BLOCK, ...], "warnings": [...]}

- then one line per change, until the reader closes our stdin::

    {"event": "added", "block": BLOCK}
    {"event": "changed", "block": BLOCK}
    {"event": "removed", "source": "loopkit", "path": "/home/u/loops/shop/BLOCKED.md"}
    {"event": "warnings", "warnings": ["..."]}
    {"event": "alive", "time": "2026-12-01T17:40:00+00:00"}      (every ALIVE_EVERY seconds)

A BLOCK is `Block.to_json()` (what `hitl list --json` prints) plus what the app shows of it:
`raw`, `summary`, `extra` ([{title, body}]), `defaults`, `answerable`, and each choice's
`needs_text`. A block is known by its (`source`, `path`): `removed` names it so.

`hitl answer ID --dry-run --json` prints the plan (`plan_json`), `hitl answer ... --json` what
was done (`done_json`), `hitl undo ID --json` the undo: each one object, the same `protocol`.

The commands themselves travel as `HITL --argv ENCODED` (`encode_argv`): the far login shell
(sh, dash, bash, zsh, fish, csh) sees only words of `[A-Za-z0-9_-]`, and the far hitl runs the
decoded words, byte for byte, as if typed.

Everything read here came from another machine's agents and is as untrusted as a local file:
`block_from_wire` checks every field's type and size and returns None for what is not a block.
Nothing here imports Textual.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from hitl_tui import __version__
from hitl_tui.model import MAX_PARSE_BYTES, Block, Choice, Plan, Section

#: The protocol this hitl speaks. A reader refuses a higher one (`too_new`).
PROTOCOL = 1
#: Seconds between two `alive` lines: a reader that hears nothing for a few of them knows the
#: far side (or the link) hangs.
ALIVE_EVERY = 10.0

#: Bounds on what a remote block may carry (a local file is bounded by MAX_PARSE_BYTES too).
MAX_TEXT = MAX_PARSE_BYTES + 4096
MAX_ITEMS = 1000
MAX_LINE = 8 * MAX_PARSE_BYTES  # one event line: a block's raw text and its panes, escaped
#: What one host may list at once: so many blocks, so many characters of their text in all
#: (`weight`); what is over is not listed, and the host's state says how many.
MAX_BLOCKS = 10_000
MAX_HOST_TEXT = 32 * MAX_PARSE_BYTES
#: The first line (`list`) carries every block at once: it may be as long as their text.
MAX_LIST_LINE = 2 * MAX_HOST_TEXT

_FINGERPRINT = re.compile(r"sha256:[0-9a-f]{64}")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: The states a block has (a row's `waiting` and `not-resumed` are hitl's own, never a file's).
BLOCK_STATES = ("blocked", "needs_context")


def block_to_wire(block: Block) -> dict[str, Any]:
    """`block` as a BLOCK of the protocol (JSON-able)."""
    data = block.to_json()
    data["choices"] = [
        {
            "key": c.key,
            "option": c.option,
            "consequence": c.consequence,
            "needs_text": c.needs_text,
        }
        for c in block.choices
    ]
    data["raw"] = block.raw
    data["summary"] = block.summary
    data["extra"] = [{"title": s.title, "body": s.body} for s in block.extra]
    data["defaults"] = list(block.defaults)
    data["answerable"] = block.answerable
    return data


def list_event(blocks: list[Block], warnings: list[str]) -> dict[str, Any]:
    return {
        "event": "list",
        "protocol": PROTOCOL,
        "hitl": __version__,
        "blocks": [block_to_wire(b) for b in blocks],
        "warnings": list(warnings),
    }


def removed_event(key: tuple[str, object]) -> dict[str, Any]:
    source, path = key
    return {"event": "removed", "source": source, "path": str(path)}


def alive_event(now: datetime | None = None) -> dict[str, Any]:
    return {"event": "alive", "time": (now or datetime.now(UTC)).isoformat()}


# -- reading (the operator's side) ------------------------------------------------------------


class WireError(ValueError):
    """A line that is not the protocol: its one-line reason (never the line itself)."""


#: The hidden option a far hitl is run with: `hitl --argv ENCODED` runs the decoded words. An
#: option, not a subcommand: a hitl too old to know it fails as with any unknown option
#: (`unrecognized arguments: --argv`), which says "too old" here.
ARGV = "--argv"
#: The hidden command `t` runs there (decoded from `--argv`): `--shell-in REPO` enters REPO and
#: execs the login shell.
SHELL_IN = "--shell-in"
ENCODED = re.compile(r"[A-Za-z0-9_-]*")


def encode_argv(words: list[str] | tuple[str, ...]) -> str:
    """`words` as one word of `[A-Za-z0-9_-]` (base64url of each word's bytes, each ended by a
    NUL; no padding): no shell changes it. Undecodable bytes (lone surrogates) go as the bytes.
    ValueError for a NUL in a word (no command line can carry one)."""
    data = bytearray()
    for word in words:
        raw = os.fsencode(word)
        if b"\0" in raw:
            raise ValueError("a NUL character cannot be sent over ssh")
        data += raw + b"\0"
    return base64.urlsafe_b64encode(bytes(data)).decode("ascii").rstrip("=")


def decode_argv(words: list[str]) -> list[str]:
    """The words `encode_argv` made (`os.fsdecode`: undecodable bytes as lone surrogates, as
    in `sys.argv`); WireError when `words` is not one such word."""
    if len(words) != 1 or not ENCODED.fullmatch(words[0]) or len(words[0]) % 4 == 1:
        raise WireError(f"{ARGV} takes one word of base64url")
    text = words[0]
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if data and not data.endswith(b"\0"):
        raise WireError(f"{ARGV}: not a list of words")
    return [os.fsdecode(w) for w in data.split(b"\0")[:-1]]


def too_new(protocol: object) -> bool:
    return not isinstance(protocol, int) or isinstance(protocol, bool) or protocol > PROTOCOL


def _text(value: object, limit: int = MAX_TEXT, empty: str = "") -> str:
    if value is None:
        return empty
    if not isinstance(value, str):
        raise WireError("a text field is not a string")
    return value if len(value) <= limit else value[:limit]


def _opt_text(value: object, limit: int = 4096) -> str | None:
    return None if value is None else _text(value, limit)


def _list(value: object) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise WireError("a list field is not a list")
    return value[:MAX_ITEMS]


def _choice(value: object) -> Choice:
    if not isinstance(value, dict):
        raise WireError("a choice is not an object")
    key = _text(value.get("key"), 64)
    if not key:
        raise WireError("a choice has no key")
    return Choice(
        key,
        _text(value.get("option"), 64 * 1024),
        _opt_text(value.get("consequence"), 64 * 1024),
        value.get("needs_text") is True,
    )


def _since(value: object) -> datetime:
    if not isinstance(value, str):
        raise WireError("since is not a time")
    try:
        when = datetime.fromisoformat(value[:64])
        # in UTC: a time at the edge of the calendar with an offset cannot be shown locally
        when = (when if when.tzinfo else when.replace(tzinfo=UTC)).astimezone(UTC)
    except (ValueError, OverflowError):
        raise WireError("since is not a time") from None
    if not _EPOCH <= when <= datetime.now(UTC) + timedelta(days=2):  # clocks differ a little
        raise WireError("since is not a time")
    return when


def block_from_wire(data: object, host: str) -> Block:
    """The Block a remote BLOCK describes, as this machine lists it: its id, repo and path
    prefixed with `host:` (`build-1:shop`), and where it is on the far side in `meta`.
    Raises WireError (one line) for anything that is not a BLOCK."""
    if not isinstance(data, dict):
        raise WireError("a block is not an object")
    rid = _text(data.get("id"), 1024)
    source = _text(data.get("source"), 64)
    path = _text(data.get("path"), 8192)
    repo = _text(data.get("repo"), 8192)
    fp = data.get("fingerprint")
    if not rid or not source or not path:
        raise WireError("a block has no id, source or path")
    if not isinstance(fp, str) or not _FINGERPRINT.fullmatch(fp):
        raise WireError(f"block {rid[:80]!r} has no valid fingerprint")
    attempted = tuple(_text(a, 64 * 1024) for a in _list(data.get("attempted")))
    questions = tuple(_text(q, 64 * 1024) for q in _list(data.get("questions")))
    defaults = tuple(_opt_text(d, 64 * 1024) for d in _list(data.get("defaults")))
    extra = []
    for section in _list(data.get("extra")):
        if not isinstance(section, dict):
            raise WireError("a section is not an object")
        extra.append(Section(_text(section.get("title"), 4096), _text(section.get("body"))))
    problems = tuple(_text(p, 4096) for p in _list(data.get("problems")))
    notes = tuple(_text(n, 64 * 1024) for n in _list(data.get("notes")))
    return Block(
        id=f"{host}:{rid}",
        source=REMOTE_SOURCE,
        repo=f"{host}:{repo}",
        path=f"{host}:{path}",
        state=state if (state := _text(data.get("state"), 64)) in BLOCK_STATES else "blocked",
        question=_text(data.get("question")),
        context=_text(data.get("context")),
        attempted=attempted,
        choices=tuple(_choice(c) for c in _list(data.get("choices"))),
        since=_since(data.get("since")),
        fingerprint=fp,
        raw=_text(data.get("raw")),
        category=_opt_text(data.get("category"), 256),
        title=_opt_text(data.get("title"), 4096),
        summary=_opt_text(data.get("summary"), 4096),
        extra=tuple(extra),
        problems=problems,
        truncated=data.get("truncated") is True,
        questions=questions,
        defaults=defaults,
        answerable=data.get("answerable") is not False,
        notes=notes,
        meta={
            "host": host,
            "remote_id": rid,
            "remote_source": source,
            "remote_repo": repo,
            "remote_path": path,
        },
    )


def weight(block: Block) -> int:
    """About how much text `block` holds (what `MAX_HOST_TEXT` bounds)."""
    texts = [block.raw, block.question, block.context, *block.attempted, *block.questions]
    texts += [s.title + s.body for s in block.extra]
    texts += [c.option + (c.consequence or "") for c in block.choices]
    return sum(map(len, texts)) + len(block.id) + len(str(block.path))


#: The `source` of every block read from another machine (`src:remote` in a filter).
REMOTE_SOURCE = "remote"


def remote_key(host: str, source: object, path: object) -> tuple[str, str] | None:
    """The key (`view.key_of`) of the block a `removed` event names, or None if malformed."""
    if not isinstance(source, str) or not isinstance(path, str):
        return None
    return (REMOTE_SOURCE, f"{host}:{path}")


def plan_json(plan: Plan, editable: str | None, then_runs: str | None) -> dict[str, Any]:
    """`hitl answer --dry-run --json`: the exact plan, for a preview on another machine."""
    return {
        "protocol": PROTOCOL,
        "hitl": __version__,
        "id": plan.block.id,
        "fingerprint": plan.block.fingerprint,
        "summary": plan.summary,
        "diff": plan.diff(),
        "hint": plan.hint,
        "decision_text": editable,
        "then_runs": then_runs,
    }


def done_json(
    plan: Plan, done: Sequence[str], entry: str | None, restarted: bool
) -> dict[str, Any]:
    """`hitl answer --json`: what was written, and its journal entry (for `hitl undo`)."""
    return {
        "protocol": PROTOCOL,
        "hitl": __version__,
        "id": plan.block.id,
        "fingerprint": plan.block.fingerprint,
        "done": list(done),
        "entry": entry,
        "hint": None if restarted else plan.hint,
        "restarted": restarted,
    }
