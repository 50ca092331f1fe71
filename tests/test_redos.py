"""Heading lines padded with thousands of spaces must not stall the parsers (regex backtracking).

A single heading regex like `^#+\\s*(.*?)\\s*#*\\s*$` took minutes on such a line; the parsers
now match headings with bounded string work. Each case here finished in well under a second.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hitl_tui.sources.loopkit.source import LoopkitSource, parse_blocked
from hitl_tui.textio import TextDoc, heading_of

PADDED = "# x" + " " * 30_000 + "y"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("## Question:", (2, "Question:")),
        ("##Question", (2, "Question")),
        ("   ### Choices ###", (3, "Choices")),
        ("## C#", (2, "C#")),
        ("####### too deep", None),
        ("    ## indented code", None),
        ("no heading", None),
    ],
)
def test_heading_of(line: str, expected) -> None:
    assert heading_of(line) == expected


def test_padded_heading_lines_parse_at_once(tmp_path: Path) -> None:
    text = PADDED + "\n## Question\nShould we?\n## Choices\n- A) yes" + " " * 20_000 + "#\n"
    started = time.perf_counter()
    fields, _ = parse_blocked(text)
    doc = TextDoc.from_bytes((PADDED + "\n").encode() * 3)
    assert doc.find_heading("Decisions") is None
    (tmp_path / "BLOCKED.md").write_text(text)
    block = LoopkitSource().parse(tmp_path, tmp_path / "BLOCKED.md", "r")
    assert time.perf_counter() - started < 5
    assert fields["question"] == "Should we?"
    assert block is not None and block.question == "Should we?"


def test_headings_with_words_after_the_known_name() -> None:
    fields, problems = parse_blocked(
        "## Question for the human\nQ?\n## Context (short)\nC.\n## Choices (pick one)\n- A) x — y\n"
    )
    assert (fields["question"], fields["context"], problems) == ("Q?", "C.", [])
    assert [(c.key, c.option, c.consequence) for c in fields["choices"]] == [("A", "x", "y")]


def test_a_padded_category_line_parses_at_once() -> None:
    """Issue 27, item 9: `Category: x<30,000 spaces>y` took 8 s with a lazy value before `\\s*$`."""
    started = time.perf_counter()
    fields, _ = parse_blocked("Category: x" + " " * 30_000 + "y\n## Question\nQ?\n")
    assert time.perf_counter() - started < 1
    assert fields["category"] == "x y" and fields["question"] == "Q?"
