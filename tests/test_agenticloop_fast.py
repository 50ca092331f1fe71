"""The fast reading of a plain task header (`parse.plain_header`) gives the very block the full
rules give (`split_header`, `quick_not_blocked`, `load_header`), on agenticloop's own files, the
fixtures, and on hostile variants of them: CRLF, a BOM, NUL bytes, bytes that are not UTF-8,
quotes, lists, block scalars, duplicate keys, `__proto__`, comments, a huge header, no closing
line, no sections. Each file is read both ways and the blocks (every field, the planner's
`meta`, the `list --json` object) must be equal."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hitl_tui.sources.agenticloop import parse
from tests.conftest import FIXTURES

TASK = """---
task_id: T-{n:03d}
status: {status}
{extra}backend: files
---

# T-{n:03d} - Task {n}

## Task
Do thing {n}.

## Comments
- 2026-11-20: Blocked (credentials): Checked: env. Tried: nothing. Needed: a token {n}.
"""

#: Header lines: plain ones the fast path reads, and every kind it must leave to the full rules.
HEADER_LINES = [
    "status: blocked",
    "status: needs_context",
    "status: agent-ready",
    "status: draft",
    "status: Blocked",
    "status:blocked",
    "status:  blocked",
    "status:\tblocked",
    'status: "blocked"',
    "status: 'needs_context'",
    "status: blocked  # yes",
    "status: blocked ",
    "status: [blocked]",
    "status:\n  blocked",
    "block_category: credentials",
    "block_category: contract",
    "block_category: weird one",
    "type: change-request",
    "approved: true # yes",
    "task_id: T-042",
    "task_id: T-042: extra",
    "task_id: 'T-7'",
    "context_reason: context_overflow",
    "__proto__: x",
    "# a comment",
    "  # an indented comment",
    "",
    "   ",
    "tags: [a, b]",
    "bad: [unclosed",
    'quoted: "open',
    "nested:",
    "  key: value",
    "  - item",
    "text: |",
    "  block text",
    "fold: >-",
    "x: a:b:c",
    "x: -dash",
    "x: {brace}",
    "x: back\\slash",
    "x: ~tilde",
    "x: @at",
    "x: >not-a-block",
    "x: |pipe",
    "x: #hash",
    "x: caf\u00e9",
    "x: \u2028sep",
    "x: nul\x00byte",
    "x: esc\x1b[31m",
    "x: lone\rcr",
    "Key-2_x: v",
    "_k: v",
    "9key: v",
    "k y: v",
    "-k: v",
    "not a key line",
    "- item at top",
]
BODY_LINES = [
    "# T-001 - Title",
    "## Task",
    "Do it.",
    "## Comments",
    "## Scope",
    "- 2026-11-01: Blocked (contract): x. Needed: y. Recommended default: approve.",
    "- 2026-11-02: needs_context. Questions:",
    "  1. First? Recommended: yes.",
    "  2. Second?",
    "```",
    "---",
    "",
]


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.md") if p.is_file())


def _both_ways(repo: Path, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """read_task with the fast path and without: the same block, field for field."""
    monkeypatch.setattr(parse, "FAST_HEADER", False)
    full = parse.read_task(repo, path, "r")
    monkeypatch.setattr(parse, "FAST_HEADER", True)
    fast = parse.read_task(repo, path, "r")
    if full is None or fast is None:
        assert full is fast, path.read_bytes()[:300]
        return
    assert fast == full, path.read_bytes()[:300]
    assert fast.meta == full.meta, path.read_bytes()[:300]
    assert fast.to_json() == full.to_json()
    if "header" in full.meta:  # the key order too (a header is written back in it)
        assert list(fast.meta["header"].items()) == list(full.meta["header"].items())


def _plain_agrees(text: str) -> None:
    """Where plain_header reads a header, the full rules read the same mapping and body."""
    plain = parse.plain_header(text)
    if plain is None:
        return
    lines = parse.split_lines(text)
    split = parse.split_header(lines)
    assert split is not None
    header = parse.load_header(split.header)
    assert list(plain[0].items()) == list(header.items()), text[:300]
    assert text[plain[1] :] == "".join(lines[split.end + 1 :])


def _variants(text: str) -> list[bytes]:
    """A file's text and hostile versions of it."""
    data = text.encode()
    lines = text.split("\n")
    out = [
        data,
        text.replace("\n", "\r\n").encode(),
        b"\xef\xbb\xbf" + data,
        data.replace(b"status:", b"status :", 1),
        data.replace(b"status: ", b"status:\t", 1),
        data.replace(b"status: ", b"status:", 1),
        data.replace(b"status: ", b"status:   ", 1),
        data.replace(b"\nstatus: ", b"\n status: ", 1),
        data.replace(b"\nbackend: files", b"\nbackend: files\t", 1),
        data.replace(b"\nbackend: files", b"\nbackend: files ", 1),
        data.replace(b"\nbackend: files", b"\nbackend: 'files'", 1),
        data.replace(b"\nbackend: files", b"\nbackend: files'", 1),
        data.replace(b"\nbackend: files", b"\nbackend: [files]", 1),
        data.replace(b"\nbackend: files", b"\nbackend: |", 1),
        data.replace(b"\nbackend: files", b"\nbackend: >+", 1),
        data.replace(b"\nbackend: files", b"\nbackend:", 1),
        data.replace(b"\nbackend: files", b"\nbackend: a" + b" " * 50_000 + b"z", 1),
        data.replace(b"\nbackend: files", b"\nbackend: a" + b" " * 50_000, 1),
        data.replace(b"\nbackend: files", b"\n" + b"a" * 50_000, 1),
        data.replace(b"\n---\n", b"\n--- \n", 1),
        data.replace(b"\n---\n", b"\n---", 1),
        data.replace(b"\n---\n", b"\n----\n", 1),
        data.replace(b"---\n", b"---\t\n", 1),
        data.replace(b"\n", b"\r", 2),
        data.replace(b"status:", b"\x00status:", 1),
        data.replace(b"status: ", b"status: \xff\xfe", 1),
        data.replace(b"backend: files", b"backend: \xe9t\xe9", 1),
        data.replace(b"backend:", b"status: draft\nbackend:", 1),
        data.replace(b"backend:", b"task_id: T-999\nbackend:", 1),
        data.replace(b"backend:", b"__proto__: polluted\nbackend:", 1),
        data.replace(b"backend:", b"# note: not a key\nbackend:", 1),
        data.replace(b"backend:", b"\nbackend:", 1),
        data.replace(b"backend:", b"big: " + b"x" * 70_000 + b"\nbackend:", 1),
        data.replace(b"backend:", b"".join(b"k%d: v\n" % i for i in range(20_000)) + b"backend:"),
        data.split(b"\n## ", 1)[0],  # no sections
        b"\n".join(line.encode() for line in lines[: lines.index("---", 1)]),  # never closed
        b"---\n---\n" + data,
        data + b"\x00\x01binary\xff" * 50,
        bytes(range(256)) * 4,
        b"",
        b"---\n",
        b"---\n---\n",
    ]
    return out


def _corpus() -> list[bytes]:
    texts = [TASK.format(n=1, status="blocked", extra="block_category: credentials\n")]
    texts.append(TASK.format(n=2, status="needs_context", extra=""))
    texts.append(TASK.format(n=3, status="agent-ready", extra=""))
    texts.append(TASK.format(n=4, status="blocked", extra="type: change-request\n"))
    for path in _files(FIXTURES):
        texts.append(path.read_bytes().decode("utf-8", "surrogateescape"))
    out: list[bytes] = []
    for text in texts:
        try:
            out.extend(_variants(text))
        except ValueError:  # a file without a `---` line: itself only
            out.append(text.encode("utf-8", "surrogateescape"))
    return out


CORPUS = _corpus()


def test_the_corpus_holds_fixtures_and_hostile_files() -> None:
    assert len(CORPUS) > 300
    assert any(b"\r\n" in c for c in CORPUS) and any(b"\x00" in c for c in CORPUS)
    # Both sides are exercised: many files read fast, many left to the full rules.
    fast = sum(parse.plain_header(c.decode("utf-8", "replace")) is not None for c in CORPUS)
    assert 30 < fast < len(CORPUS) - 100


def test_every_file_of_the_corpus_gives_the_same_block_both_ways(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "r"
    tasks = repo / ".agenticloop" / "tasks"
    tasks.mkdir(parents=True)
    for i, data in enumerate(CORPUS):
        path = tasks / f"T-{i:04d}.md"
        path.write_bytes(data)
        _both_ways(repo, path, monkeypatch)
        _plain_agrees(data.decode("utf-8", "replace"))


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    header=st.lists(st.sampled_from(HEADER_LINES), max_size=8),
    body=st.lists(st.sampled_from(BODY_LINES), max_size=10),
    crlf=st.sampled_from(["\n", "\n", "\r\n"]),
)
def test_generated_headers_give_the_same_block_both_ways(
    header: list[str], body: list[str], crlf: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = crlf.join(["---", *header, "---", *body]) + crlf
    _plain_agrees(text)
    root = Path(tempfile.mkdtemp())
    try:
        tasks = root / ".agenticloop" / "tasks"
        tasks.mkdir(parents=True)
        path = tasks / "T-001.md"
        path.write_bytes(text.encode("utf-8", "surrogateescape"))
        _both_ways(root, path, monkeypatch)
    finally:
        shutil.rmtree(root)
