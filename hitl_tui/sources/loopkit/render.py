"""The canonical BLOCKED.md (FORMATS.md §1.1), written so that loopkit's parser reads it back.

Loopkit knowledge, beside its parser: what `hitl escalate` writes, and the checks that what it
writes reads back through `parse_blocked` as the same fields. `escalate` validates the agent's
input and raises; the checks here only say why (a reason, or None).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hitl_tui.model import Choice
from hitl_tui.sources.loopkit.source import parse_blocked
from hitl_tui.textio import printable

# What the loopkit parser reads as a heading, and as a code fence.
_HEADING = re.compile(r"^\s{0,3}#{1,4}\s*\S")
_FENCE = ("```", "~~~")


@dataclass(frozen=True, slots=True)
class Escalation:
    """The four fields of a canonical BLOCKED.md, validated and normalised."""

    question: str
    context: str
    attempted: tuple[str, ...]
    choices: tuple[Choice, ...]
    #: Declared on a `Category:` line under the title (the four sections stay the seed's).
    category: str | None = None


def markdown_trouble(text: str) -> str | None:
    """Why `text` would not read back as itself inside a BLOCKED.md section, if it would not."""
    fence = False
    for number, line in enumerate(text.split("\n"), 1):
        if line.strip().startswith(_FENCE):
            fence = not fence
            continue
        if not fence and _HEADING.match(line):
            return f"line {number} starts with '#', which reads as a markdown heading"
    if fence:
        return "it opens a code fence (``` or ~~~) that it does not close"
    return None


def read_back_trouble(esc: Escalation, data: bytes) -> str | None:
    """Why hitl's own parser would read `data` differently from what was asked, if it would."""
    fields, _ = parse_blocked(data.decode("utf-8"))
    if fields["question"] != esc.question:
        return "the question would not read back as written; reword it"
    if fields["context"] != esc.context:
        return "the context would not read back as written; reword it"
    if tuple(fields["attempted"]) != esc.attempted:
        return "an attempted item would not read back as written; reword it"
    if fields["category"] != esc.category:
        return "the category would not read back as written; reword it"
    got = tuple(fields["choices"])
    for i, want in enumerate(esc.choices):
        if i >= len(got) or got[i] != want:
            shown = printable(got[i].label()) if i < len(got) else "nothing"
            return (
                f"choice {want.key} would read back as {shown!r}; reword it "
                "(leading or trailing * and _ are taken as markdown emphasis)"
            )
    if len(got) != len(esc.choices):
        return "the choices would not read back as written; reword them"
    return None


def render(esc: Escalation) -> bytes:
    """The canonical BLOCKED.md (FORMATS.md §1.1): four sections, choices `- A) option — ...`,
    and a given category on a `Category:` line under the title (not a fifth section)."""
    lines = ["# Blocked", ""]
    if esc.category:
        lines += [f"Category: {esc.category}", ""]
    lines += ["## Question:", esc.question, "", "## Context:", esc.context, ""]
    lines.append("## Attempted:")
    lines += [f"- {item}" for item in esc.attempted]
    lines += ["", "## Choices:"]
    lines += [f"- {c.label()}" for c in esc.choices]
    return ("\n".join(lines) + "\n").encode("utf-8")
