"""Task headers and project.md read by agenticloop's own rules (its `src/frontmatter.js`).

Every expected value here is what agenticloop 0.4.6's reader returns for the same text (checked
against it while writing these; no part of agenticloop is needed to run them).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hitl_tui.sources.agenticloop import frontmatter
from hitl_tui.sources.agenticloop.parse import HeaderError, load_header, quick_not_blocked
from tests.conftest import FIXTURES

REAL = FIXTURES / "agenticloop-real"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('a: "^T-\\d{3,}$"\n', {"a": "^T-\\d{3,}$"}),  # quoted: literal, no escapes
        ("a: 'it''s'\n", {"a": "it''s"}),
        (
            "n: 5\nb: true\nz: ~\nd: 2026-01-01\n",
            {"n": "5", "b": "true", "z": "~", "d": "2026-01-01"},
        ),
        ("l: [a, \"b, c\", 'd', [e], , ]\n", {"l": ["a", "b, c", "d", ["e"], {}]}),
        ("l: [[a, b]]\n", {"l": ["[a", "b]"]}),
        ('l: []\ne:\nf: ""\n', {"l": [], "e": {}, "f": ""}),
        ("s: blocked  # why\n", {"s": "blocked  # why"}),  # a trailing comment is the value
        ("a:b\n\"k:q\": v\n'x': y\n", {"a": "b", "k:q": "v", "x": "y"}),
        ("p:\n  - a\n  - 'b'\n  # c\n  - k: v\nq: 1\n", {"p": ["a", "b", "k: v"], "q": "1"}),
        ("m:\n  k: v\n  n:\n    deep: x\nq: 1\n", {"m": {"k": "v", "n": {"deep": "x"}}, "q": "1"}),
        ("p:\n- a\n", None),  # a dash at the key's own indent: an invalid line for agenticloop
        ("t: |\n  one\n\n  two\n\nu: x\n", {"t": "one\n\ntwo\n", "u": "x"}),
        ("t: >-\n  a\n  b\n\n\n\n  c\n", {"t": "a b\n\nc"}),
        ("t: |+\n  a\n\n", {"t": "a\n\n"}),
        ("a: b\n  c: d\n", {"a": "b", "c": "d"}),  # indentation under a scalar is ignored
        ("  : x\n", {"": "x"}),
        ("__proto__: x\n", {}),
        ("x: &a [*a]\ny: !!binary aGk=\n", {"x": "&a [*a]", "y": "!!binary aGk="}),
        ("- a\n", None),
        ('a: "b" # c\n', None),
        ("a: [b\n", None),
        ("just words\n", None),
        ("a: b\rc\n", None),  # a lone CR ends no line, and `.` does not cross it
    ],
)
def test_values_are_agenticloops(text: str, expected: dict | None) -> None:
    data, reason = frontmatter.parse_data(text)
    assert data == expected
    if expected is None:
        assert reason is not None and reason.startswith("invalid_yaml_")
        with pytest.raises(HeaderError, match=r"^line \d+: "):
            load_header(text)


def test_invalid_lines_are_named_as_the_file_numbers_them() -> None:
    content = "---\na: 1\nb: 2\nnot a key\n---\n"
    found = frontmatter.read_frontmatter(content)
    assert (found.state, found.reason) == ("malformed", "invalid_yaml_line:3")
    assert frontmatter.describe(found.reason, found.text) == (
        "line 4: 'not a key' is neither `key: value`, a `- item` nor a # comment"
    )
    # The lenient reader (how agenticloop loads project.md) skips the line instead.
    assert frontmatter.read_lenient(content) == {"a": "1", "b": "2"}


@pytest.mark.parametrize(
    ("content", "state", "data"),
    [
        ("---\na: 1\n---\nbody", "valid", {"a": "1"}),
        ("\ufeff---\r\na: 1\r\n---  \r\n", "valid", {"a": "1"}),
        ("---\n---\n", "valid", {}),
        ("no header\n", "absent", None),
        ("---x\na: 1\n---\n", "malformed", None),
        ("---\na: 1\n", "malformed", None),
        ("---\na: 1\n...\n", "malformed", None),  # `...` closes nothing for agenticloop
        ("---\na: 1\r---\n", "malformed", None),  # nor does a `---` after a lone CR
    ],
)
def test_delimiters_are_the_strict_readers(content: str, state: str, data: dict | None) -> None:
    found = frontmatter.read_frontmatter(content)
    assert (found.state, found.data) == (state, data)


@pytest.mark.parametrize(
    "path",
    sorted(str(p.relative_to(REAL)) for p in REAL.glob("*/.agenticloop/**/*.md")),
)
def test_every_real_header_reads_cleanly(path: str) -> None:
    text = (REAL / path).read_text()
    found = frontmatter.read_frontmatter(text)
    if path.endswith("README.md"):
        return
    assert found.state == "valid", (found.reason, path)
    assert found.data == frontmatter.read_lenient(text)


def test_real_task_headers() -> None:
    data = frontmatter.read_frontmatter((REAL / "shop/.agenticloop/tasks/T-001.md").read_text())
    assert data.data is not None
    header = data.data
    assert (header["task_id"], header["status"], header["block_category"]) == (
        "T-001",
        "blocked",
        "contract",
    )
    assert header["type"] == "change-request" and header["allowed_paths"] == []
    assert header["implementation_artifact"] == {} and header["attempt_budget"] == "5"


_ATOM = st.sampled_from(
    [
        "a", "status", "blocked", "draft", "x y", "1", "", " ", "\t", ":", ": ", "#", " #",
        "# c", '"', "'", '"q"', "'q'", '"a', "[", "]", "[a, b]", '[a, "b, c"]', "[[a]]", "-",
        "- ", "- x", "|", ">-", "é", "\xa0", "\ufeff", "\r", "\u2028", "k: v", "\\d", "&a",
    ]
)  # fmt: skip
_LINE = st.tuples(
    st.sampled_from(["", " ", "  ", "\t"]),
    _ATOM,
    st.sampled_from([":", ": ", " : ", "", "- "]),
    _ATOM,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(st.lists(_LINE, max_size=8), st.sampled_from(["\n", "\r\n"]))
def test_strict_and_lenient_agree_where_strict_reads(lines: list[str], newline: str) -> None:
    text = newline.join(lines)
    data, reason = frontmatter.parse_data(text)
    lenient, _ = frontmatter.parse_data(text, strict=False)
    assert (data is None) == (reason is not None)
    if data is not None:
        assert data == lenient


@settings(max_examples=400, deadline=None)
@given(st.lists(_LINE, max_size=8))
def test_the_quick_look_never_hides_a_block(lines: list[str]) -> None:
    """A header the quick status check dismisses is never a block when read in full."""
    text = "\n".join(["status: draft", *lines]) + "\n"
    if not quick_not_blocked(text):
        return
    try:
        header = load_header(text)
    except HeaderError:
        return
    status = frontmatter.string(header.get("status")).lower()
    assert status not in ("blocked", "needs_context")


def test_fixtures_exist() -> None:
    assert Path(REAL / "fresh/.agenticloop/project.md").is_file()
