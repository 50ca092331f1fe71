"""Generated task files: parsing never crashes, and an answer changes only the lines it may."""

from __future__ import annotations

import difflib
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from hitl_tui.model import Answer, HitlError
from hitl_tui.sources.agenticloop.source import AgenticloopSource
from tests.conftest import FIXTURES

WHEN = datetime(2026, 11, 29, tzinfo=UTC)
NOTE = "- 2026-11-29: Answer from ana: ok"
#: The note for a task that asks several numbered questions: one answer each.
NOTES = "- 2026-11-29: Answers from ana: "

STATUS_LINES = [
    "status: blocked",
    'status: "blocked"',
    "status: 'needs_context'",
    "status: needs_context  # asked twice",
    "status:\n  blocked",
    "status: Blocked",
]
HEADER_LINES = [
    "status: in-progress",
    "block_category: contract",
    "block_category: weird-one",
    "type: change-request",
    "approved: false",
    "approved: true # yes",
    "# a comment",
    "zip: 01234",
    "flag: no",
    "tags: [a, b]",
    "nested:",
    "  key: value",
    "  - item",
    "when: 2026-01-01",
    "text: 'it''s'",
    "bad: [unclosed",
    "a: &x 1",
    "b: *x",
    "weird: \x1b[31m",
    "",
]
BODY_LINES = [
    "# T-001 - Title",
    "## Task",
    "## Comments",
    "## Revision Log",
    "## Scope",
    "- 2026-11-01: Blocked (contract): x. Needed: y. Recommended default: approve.",
    "- 2026-11-02: needs_context. Questions:",
    "  1. First? Recommended: yes.",
    "  2. Second?",
    "- 2026-11-03: Started.",
    "```",
    "- not a note",
    "plain text [b]markup[/b]",
    "",
    "   ",
]
EDITABLE = ("status", "block_category", "approved")


def _is_editable(line: str) -> bool:
    stripped = line.rstrip("\r\n")
    return stripped.split(":", 1)[0] in EDITABLE or (
        stripped[:1] in (" ", "\t") and bool(stripped.strip())
    )


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    status=st.sampled_from(STATUS_LINES),
    before=st.lists(st.sampled_from(HEADER_LINES), max_size=4),
    after=st.lists(st.sampled_from(HEADER_LINES), max_size=4),
    body=st.lists(st.sampled_from(BODY_LINES), max_size=14),
    crlf=st.booleans(),
    final_newline=st.booleans(),
)
def test_parse_and_answer_invariants(
    status: str,
    before: list[str],
    after: list[str],
    body: list[str],
    crlf: bool,
    final_newline: bool,
) -> None:
    newline = "\r\n" if crlf else "\n"
    header = [*before, *status.split("\n"), *after]
    text = newline.join(["---", *header, "---", *body])
    if final_newline:
        text += newline
    _check_answer(text, newline, final_newline)


#: The task files agenticloop's own CLI wrote (four blocks of tests/fixtures/agenticloop-real).
REAL_TASKS = sorted((FIXTURES / "agenticloop-real" / "shop" / ".agenticloop" / "tasks").glob("*"))


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    task=st.sampled_from(REAL_TASKS),
    extra=st.lists(
        st.tuples(st.integers(min_value=1, max_value=120), st.sampled_from(HEADER_LINES)),
        max_size=4,
    ),
    crlf=st.booleans(),
)
def test_real_tasks_with_any_extra_header_lines(
    task: Path, extra: list[tuple[int, str]], crlf: bool
) -> None:
    """agenticloop's own files, with header lines added anywhere: the same invariants."""
    lines = task.read_text().split("\n")
    end = lines.index("---", 1)
    for at, line in extra:
        lines.insert(min(at, end), line)
        end += 1
    newline = "\r\n" if crlf else "\n"
    text = newline.join(lines)
    _check_answer(text, newline, text.endswith(newline))


def _check_answer(text: str, newline: str, final_newline: bool) -> None:
    root = Path(tempfile.mkdtemp())
    try:
        repo = root / "r"
        tasks = repo / ".agenticloop" / "tasks"
        tasks.mkdir(parents=True)
        path = tasks / "T-001.md"
        old = text.encode()
        path.write_bytes(old)
        source = AgenticloopSource()
        block = source.parse(repo, path, "r")
        event("parsed" if block is not None else "not a block")
        if block is None or not block.answerable:
            return
        texts = ("ok",) * max(1, len(block.questions))
        try:
            plan = source.plan(block, Answer(texts=texts, operator="ana", when=WHEN))
        except HitlError:
            event("refused")
            return  # refused: nothing is written, which is always allowed
        event("planned")
        new = plan.changes[0].new
        assert new is not None
        old_lines = old.decode().splitlines()
        new_lines = new.decode().splitlines()
        matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                continue
            for line in old_lines[i1:i2]:
                assert _is_editable(line), (tag, line)  # only the three keys' lines go
            for line in new_lines[j1:j2]:
                assert (
                    line in ("", "## Comments", "status: agent-ready", "approved: true")
                    or line.startswith(NOTE)
                    or line.startswith(NOTES)
                    or _is_editable(line)
                ), (tag, line)
        # Every line ends as the file's lines did (only the last may lack one, as before).
        endings = [line[len(line.rstrip("\r\n")) :] for line in new.decode().splitlines(True)]
        assert set(endings[:-1]) <= {newline}
        assert endings[-1] == newline or (endings[-1] == "" and not final_newline)
        assert new.decode().count(NOTE) + new.decode().count(NOTES) == 1
    finally:
        shutil.rmtree(root)
