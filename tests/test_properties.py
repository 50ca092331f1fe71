"""Property-based tests (hypothesis): any bytes in, no exception out, the raw text always kept.

Over both parsers: loopkit (`parse_blocked`, `LoopkitSource.parse`) and agenticloop
(`AgenticloopSource.parse` on task files). The byte strategies mix plain random bytes with
fragments of the real formats (headings, choice labels, frontmatter, CRLF, BOM, NUL, invalid
UTF-8) so that the parsers' interesting paths are reached, not only the "no sections" one.
And, for loopkit, an answer to any such block is written and then undone byte for byte.
"""

from __future__ import annotations

import contextlib
import hashlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hitl_tui import journal
from hitl_tui.answers.apply import apply_plan
from hitl_tui.model import MAX_PARSE_BYTES, Answer, Block, HitlError
from hitl_tui.sources.agenticloop.source import AgenticloopSource
from hitl_tui.sources.loopkit.source import LoopkitSource, parse_blocked
from tests.conftest import FIXTURES
from tests.hostile_cases import snapshot

SETTINGS = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

LOOPKIT_BITS = [
    b"# Blocked\n",
    b"## Question:\n",
    b"## question\n",
    b"### Context\n",
    b"## Attempted:\n",
    b"## Choices:\n",
    b"#### OPTIONS:",
    b"- A) Cascade \xe2\x80\x94 breaks it\n",
    b"* (B) Keep -- slow\n",
    b"+ **C)** Refuse: safe\n",
    b"1) one\n",
    b"A. dot\n",
    b"- bullet\n",
    b"```\n",
    b"\r\n",
    b"\n",
    b"\r",
    b"\xef\xbb\xbf",
    b"\x00",
    b"\xff\xfe",
    b"\xed\xa0\x80",
    b"\x1b[31m",
    b"[b]",
    b"[/x]",
    b"   ",
    b"\t",
    "é日本\u202e".encode(),
]

AGENTICLOOP_BITS = [
    b"---\n",
    b"task_id: T-007\n",
    b"status: blocked\n",
    b"status: needs_context\n",
    b"block_category: contract\n",
    b"type: change-request\n",
    b"# comment\n",
    b'allowed_paths: ["src/"]\n',
    b"a: &x [1, 2]\nb: *x\n",
    b"key: {unclosed\n",
    b"# T-007 - Title\n",
    b"## Comments\n",
    b"- 2026-08-21: Blocked (contract): approval. Needed: a human.\n",
    b"- 2026-08-22: Needs context: 1. Which? Recommended default: yes. 2. Who?\n",
    b"## Task\n",
    b"\r\n",
    b"\n",
    b"\xef\xbb\xbf",
    b"\x00",
    b"\xff",
    b"\x1b]0;t\x07",
    b"[@click=app.quit]",
    b":",
    b"  ",
]


#: Lines of the files agenticloop's own CLI wrote (tests/fixtures/agenticloop-real): its
#: headers, its comments, its project.md, its notes.
REAL_LINES = sorted(
    {
        line.encode() + b"\n"
        for path in (FIXTURES / "agenticloop-real").glob("*/.agenticloop/**/*.md")
        for line in path.read_text().split("\n")[:130]
        if line.strip() and not line.startswith("status:")  # the tests choose the status
    }
)
AGENTICLOOP_BITS += REAL_LINES

#: Whole header lines (a header line cut in two can turn `status: blocked` into another value).
HEADER_LINES = [b for b in AGENTICLOOP_BITS if b.endswith(b"\n") and b not in (b"---\n", b"\n")]


def mixed(bits: list[bytes]) -> st.SearchStrategy[bytes]:
    piece = st.one_of(st.sampled_from(bits), st.binary(max_size=24))
    return st.one_of(
        st.binary(max_size=3000),
        st.lists(piece, max_size=60).map(b"".join),
    )


def head_text(data: bytes) -> str:
    return data[:MAX_PARSE_BYTES].decode("utf-8", "replace")


def check_block(block: Block, data: bytes, path: Path) -> None:
    assert block.path == path
    assert block.raw == head_text(data)
    assert block.fingerprint == "sha256:" + hashlib.sha256(data).hexdigest()
    assert isinstance(block.question, str) and block.question.strip()
    assert len({c.key for c in block.choices}) == len(block.choices)
    block.to_json()
    block.one_line_question()


@SETTINGS
@given(st.text(max_size=3000))
def test_parse_blocked_never_raises(text: str):
    fields, problems = parse_blocked(text)
    assert fields["question"].strip()
    assert all(isinstance(p, str) for p in problems)


@SETTINGS
@given(mixed(LOOPKIT_BITS))
def test_loopkit_parse_any_bytes(data: bytes):
    with tempfile.TemporaryDirectory() as folder:
        repo = Path(folder)
        (repo / "BLOCKED.md").write_bytes(data)
        block = LoopkitSource().parse(repo, repo / "BLOCKED.md", "repo")
        assert block is not None  # a BLOCKED.md is never dropped
        check_block(block, data, repo / "BLOCKED.md")


@settings(max_examples=60, deadline=None)
@given(mixed(LOOPKIT_BITS), mixed(LOOPKIT_BITS), mixed(LOOPKIT_BITS), st.text(max_size=200))
def test_loopkit_answer_and_undo_any_bytes(blocked: bytes, prompt: bytes, plan: bytes, text: str):
    """Whatever the three files hold, an answer is written or refused cleanly, and undone."""
    source = LoopkitSource()
    with tempfile.TemporaryDirectory() as folder:
        repo = Path(folder) / "repo"
        repo.mkdir()
        (repo / "BLOCKED.md").write_bytes(blocked)
        (repo / "PROMPT.md").write_bytes(prompt)
        (repo / "IMPLEMENTATION_PLAN.md").write_bytes(plan)
        before = snapshot(repo)
        block = source.parse(repo, repo / "BLOCKED.md", "repo")
        assert block is not None
        try:
            planned = source.plan(block, Answer(texts=(text,), operator="Ada"))
        except HitlError:
            assert not text.strip()
            return
        apply_plan(planned)
        assert not (repo / "BLOCKED.md").exists()
        # Line 1 of the plan (STATUS: ...) is never disturbed.
        first = plan.splitlines(keepends=True)[:1]
        if first and first[0].endswith(b"\n"):
            assert (repo / "IMPLEMENTATION_PLAN.md").read_bytes().startswith(first[0])
        journal.undo(operator="Ada")
        assert snapshot(repo) == before


@contextlib.contextmanager
def task_file(data: bytes) -> Iterator[tuple[Path, Path]]:
    """A throwaway repo whose one task file, T-007.md, holds `data`: (repo, path)."""
    with tempfile.TemporaryDirectory() as folder:
        repo = Path(folder)
        tasks = repo / ".agenticloop" / "tasks"
        tasks.mkdir(parents=True)
        path = tasks / "T-007.md"
        path.write_bytes(data)
        yield repo, path


@SETTINGS
@given(mixed(AGENTICLOOP_BITS))
def test_agenticloop_parse_any_bytes(data: bytes):
    with task_file(data) as (repo, path):
        source = AgenticloopSource()
        assert path in source.block_files(repo)
        block = source.parse(repo, path, "repo")
        if block is not None:
            check_block(block, data, path)


@SETTINGS
@given(
    st.lists(st.sampled_from(HEADER_LINES), max_size=12).map(b"".join),
    mixed(AGENTICLOOP_BITS),
)
def test_agenticloop_blocked_header_with_any_body(header: bytes, body: bytes):
    """A header that says blocked, then anything: a block, with its raw text, never a crash."""
    data = b"---\nstatus: blocked\n" + header + b"---\n" + body
    with task_file(data) as (repo, path):
        block = AgenticloopSource().parse(repo, path, "repo")
        assert block is not None
        check_block(block, data, path)


@SETTINGS
@given(mixed([b"---\n", *REAL_LINES, *AGENTICLOOP_BITS]), mixed(AGENTICLOOP_BITS))
def test_any_project_md_is_a_warning_at_most(project: bytes, task: bytes):
    """Whatever project.md holds, it is never a block: at most one one-line warning."""
    with task_file(task) as (repo, _path):
        (repo / ".agenticloop" / "project.md").write_bytes(project)
        source = AgenticloopSource()
        files = source.block_files(repo)
        assert repo / ".agenticloop" / "project.md" not in files
        assert source.parse(repo, repo / ".agenticloop" / "project.md", "repo") is None
        warnings = source.warnings(repo)
        assert len(warnings) <= 1 and all("\n" not in w for w in warnings)
        if warnings and source.layout(repo).folder is not None:
            assert "looking for tasks in " in warnings[0]
