"""The agent's half of the loop: write BLOCKED.md, call a human, and tell the runner to stop.

A stuck agent runs `hitl escalate` instead of hand-writing the file and a curl command (and
getting one of them wrong). The order is fixed by the seed's contract (FORMATS.md §1.5):

1. validate everything, so that invalid input writes nothing and sends nothing (exit 1);
2. write the canonical BLOCKED.md atomically at the repo root, refusing to replace an open block;
   the bytes are checked to read back through hitl's own parser with the same fields;
3. notify through `LOOPKIT_HITL_CHANNEL`; any failure there is one line on stderr, never fatal;
4. exit 2, the code the loop runner treats as "blocked".

The canonical file and its read-back checks are loopkit knowledge (`sources/loopkit/render.py`);
the channels are in `notify.py`. Nothing here imports Textual; httpx is imported only when a
channel needs it.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hitl_tui import fsio
from hitl_tui.agent import channels as notify
from hitl_tui.answers.repofs import ConcurrentWrite, RepoDir
from hitl_tui.model import MAX_PARSE_BYTES, Choice, HitlError
from hitl_tui.sources.agentic_common import CATEGORIES
from hitl_tui.sources.loopkit.render import Escalation, markdown_trouble, read_back_trouble, render
from hitl_tui.sources.loopkit.source import (
    BLOCKED,
    CATEGORY_MAX,
    SEPARATORS,
    normalise_category,
    parse_blocked,
)
from hitl_tui.textio import one_line, printable

#: Exit code after BLOCKED.md is written, whatever the channel did: the runner's "blocked".
EXIT_BLOCKED = 2

LABELS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


#: A message field longer than this is cut: Telegram refuses messages over 4096 characters.
FIELD_LIMIT = 600

_LABEL = re.compile(r"^\(?[A-Za-z]\)\s+")
#: What `--category` takes: a short name, letters, digits, `-`, `_` or spaces.
_CATEGORY = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _-]*")


class EscalationError(HitlError):
    """Invalid escalation content, or an open block in the way: nothing written, nothing sent."""

    exit_code = 1


@dataclass(frozen=True, slots=True)
class Outcome:
    """What `escalate` did: the file it wrote, and how the notification went."""

    path: Path
    channel: str
    #: One line saying why the human was not notified; None when notified (or channel none).
    failure: str | None
    message: str


# -- building and validating ------------------------------------------------------------------


def split_choice(text: str) -> tuple[str, str | None]:
    """`"option — consequence"` as (option, consequence), split as the parser will read it."""
    text = one_line(text)
    text = _LABEL.sub("", text, count=1)
    for sep in SEPARATORS:
        option, found, consequence = text.partition(sep)
        if found and option.strip() and consequence.strip():
            return option.strip(), consequence.strip()
    return text.strip(), None


def from_args(
    question: str | None,
    context: str | None,
    attempted: list[str] | None,
    choices: list[str] | None,
    category: str | None = None,
) -> Escalation:
    """An Escalation from command-line values; raises EscalationError when they are invalid."""
    question = (question or "").strip()
    if len(question.splitlines()) > 1:
        raise EscalationError("--question must be one line (put details in --context)")
    parsed = [split_choice(c) for c in choices or []]
    return _build(
        question,
        context or "",
        attempted or [],
        parsed,
        names=("--question", "--context", "--attempted", "--choice"),
        category=check_category(category),
    )


def check_category(value: str | None) -> str | None:
    """`--category`, as BLOCKED.md will carry it (a documented one in its own spelling:
    `Credentials` is `credentials`); None when not given. EscalationError when it is no short
    name."""
    if value is None:
        return None
    value = value.strip()
    if not _CATEGORY.fullmatch(value) or len(value) > CATEGORY_MAX:
        raise EscalationError(
            f"--category must be a short name (letters, digits, '-', at most {CATEGORY_MAX} "
            f"characters), like: {', '.join(CATEGORIES)}"
        )
    return normalise_category(value)


def from_draft(text: str, category: str | None = None) -> tuple[Escalation, list[str]]:
    """An Escalation from a markdown draft, parsed the way hitl reads BLOCKED.md; `category`
    (`--category`) wins over one the draft declares.

    Returns the escalation and the titles of sections the draft had beyond the four (they are
    not part of the canonical file, so they are left out).
    """
    fields, _problems = parse_blocked(text)
    question = fields["question"].strip()
    if question in ("(no question given)", "(BLOCKED.md is empty)"):
        question = ""
    if not fields["context"] and not fields["choices"] and not fields["attempted"]:
        raise EscalationError(
            "the draft has no '## Context:', '## Attempted:' or '## Choices:' section "
            "(see 'hitl escalate --help')"
        )
    paragraphs = [p for p in re.split(r"\n\s*\n", question) if p.strip()]
    if len(paragraphs) > 1:
        raise EscalationError("the draft's question must be one line (put details in Context)")
    # A question soft-wrapped over several lines is one markdown paragraph: join its lines.
    question = " ".join(line.strip() for line in question.splitlines())
    choices = [(c.option, c.consequence) for c in fields["choices"]]
    escalation = _build(
        question,
        fields["context"],
        list(fields["attempted"]),
        choices,
        names=("the Question section", "the Context section", "the Attempted section", "Choices"),
        category=check_category(category) if category is not None else fields["category"],
    )
    return escalation, [s.title for s in fields["extra"]]


def _build(
    question: str,
    context: str,
    attempted: list[str],
    choices: list[tuple[str, str | None]],
    names: tuple[str, str, str, str],
    category: str | None = None,
) -> Escalation:
    q_name, c_name, a_name, ch_name = names
    if not question:
        raise EscalationError(f"{q_name} is missing or empty")
    context = context.replace("\r\n", "\n").replace("\r", "\n").strip()
    if not context:
        raise EscalationError(f"{c_name} is missing or empty")
    items = tuple(one_line(a) for a in attempted if one_line(a))
    if not items:
        raise EscalationError(f"{a_name} is missing or empty: say what you tried")
    if len(choices) < 2:
        raise EscalationError(
            f"at least two choices are needed ({ch_name}: 'option — consequence'), "
            f"got {len(choices)}"
        )
    if len(choices) > len(LABELS):
        raise EscalationError(f"at most {len(LABELS)} choices, got {len(choices)}")
    made: list[Choice] = []
    for i, (option, consequence) in enumerate(choices):
        option = one_line(option)
        consequence = one_line(consequence) if consequence else None
        if not option:
            raise EscalationError(f"choice {i + 1} is empty")
        made.append(Choice(LABELS[i], option, consequence or None))
    escalation = Escalation(question, context, items, tuple(made), category)
    for name, value in ((q_name, question), (c_name, context)):
        trouble = markdown_trouble(value)
        if trouble:
            raise EscalationError(f"{name}: {trouble}; reword it")
    for name, value in _all_text(escalation):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise EscalationError(f"{name} is not valid UTF-8 text") from None
    trouble = read_back_trouble(escalation, render(escalation))
    if trouble:
        raise EscalationError(trouble)
    return escalation


def _all_text(esc: Escalation) -> list[tuple[str, str]]:
    out = [("the question", esc.question), ("the context", esc.context)]
    out += [("an attempted item", a) for a in esc.attempted]
    for c in esc.choices:
        out.append((f"choice {c.key}", c.option))
        if c.consequence:
            out.append((f"choice {c.key}", c.consequence))
    return out


# -- the message ------------------------------------------------------------------------------


def _field(text: str) -> str:
    text = one_line(text)
    return text if len(text) <= FIELD_LIMIT else text[: FIELD_LIMIT - 1] + "…"


def message(esc: Escalation, repo_name: str, when: datetime) -> str:
    """The five-line notification of FORMATS.md §1.5, each field collapsed to one line."""
    stamp = when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return "\n".join(
        [
            # printable: a folder name's undecodable bytes as `\xe9` (no channel takes them raw)
            f"[loopkit] blocked in {printable(one_line(repo_name))} on {stamp}",
            f"Q: {_field(esc.question)}",
            f"Context: {_field(esc.context)}",
            f"Attempted: {_field('; '.join(esc.attempted))}",
            f"Choices: {_field(' | '.join(c.option for c in esc.choices))}",
        ]
    )


# -- writing ----------------------------------------------------------------------------------


def find_repo(start: Path) -> Path:
    """The git top level above `start` (a `.git` folder or file), else `start` itself."""
    start = Path(os.path.abspath(start))
    for folder in (start, *start.parents):
        if os.path.lexists(folder / ".git"):
            return folder
    return start


def write_blocked(repo: Path, esc: Escalation, replace: bool = False) -> Path:
    """Write BLOCKED.md atomically at `repo`'s root; an open block is kept unless `replace`."""
    from hitl_tui.answers.locks import repo_lock

    if not repo.is_dir():
        raise EscalationError(f"not a folder: {printable(str(repo))}")
    path = repo / BLOCKED
    data = render(esc)
    with contextlib.ExitStack() as stack:
        try:
            # Serialises with an operator answering this repo; `hitl answer` re-checks anyway.
            stack.enter_context(repo_lock(repo))
        except OSError:
            pass  # no writable state folder (a sandboxed agent): the write is still atomic
        if os.path.lexists(path) and not replace:
            raise EscalationError(
                f"{BLOCKED} already exists in {printable(repo.name)}: the loop is already "
                "blocked (use --replace to overwrite it)"
            )
        if os.path.isdir(path):
            raise EscalationError(f"{BLOCKED} in {printable(repo.name)} is a folder")
        try:
            if replace:
                fsio.atomic_write(fsio.resolve_for_write(repo, path), data)
            else:
                # Created with RENAME_NOREPLACE: a BLOCKED.md that appears meanwhile is kept.
                with RepoDir(repo) as rd:
                    rd.replace(rd.spot(path), None, data)
        except ConcurrentWrite:
            raise EscalationError(
                f"{BLOCKED} already exists in {printable(repo.name)}: the loop is already "
                "blocked (use --replace to overwrite it)"
            ) from None
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise EscalationError(f"could not write {BLOCKED}: {reason}") from None
    return path


# -- the whole escalation ---------------------------------------------------------------------


def escalate(
    esc: Escalation,
    repo: Path,
    env: Mapping[str, str] | None = None,
    replace: bool = False,
    when: datetime | None = None,
) -> Outcome:
    """Write BLOCKED.md, then notify. Raises EscalationError (nothing written, nothing sent)."""
    env = os.environ if env is None else env
    repo = Path(os.path.abspath(repo))
    path = write_blocked(repo, esc, replace=replace)
    text = message(esc, repo.name, when or datetime.now(UTC))
    channel, failure = notify.notify(text, env)
    return Outcome(path, channel, failure, text)


def read_draft(name: str, stdin: object = None) -> str:
    """The draft's text from a file, or from standard input for `-`; at most 1 MB."""
    import sys

    try:
        if name == "-":
            stream: Any = stdin if stdin is not None else sys.stdin.buffer
            data: bytes = stream.read(MAX_PARSE_BYTES + 1)
        else:
            with open(name, "rb") as f:
                data = f.read(MAX_PARSE_BYTES + 1)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise EscalationError(f"cannot read the draft {printable(name)}: {reason}") from None
    if len(data) > MAX_PARSE_BYTES:
        raise EscalationError("the draft is larger than 1 MB")
    return data.decode("utf-8", "replace")
