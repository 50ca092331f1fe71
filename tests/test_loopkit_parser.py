"""The BLOCKED.md parser over every variant FORMATS.md §1.2 asks for, and textio.printable.

Each case asserts the parsed fields exactly. The parser keeps agent text literally (markup and
escape sequences included); making it safe to show is `printable`'s job, tested at the end.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import itertools
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hitl_tui.inbox.inbox import Inbox
from hitl_tui.model import MAX_PARSE_BYTES, Choice, Section
from hitl_tui.sources.loopkit.source import LoopkitSource, parse_blocked
from hitl_tui.textio import printable

CANONICAL = """\
# Blocked

## Question:
Should deleting a workspace also delete its archived invoices?

## Context:
Feature "delete workspace", src/workspaces/delete.ts, commit a1b2c3d.
PROMPT.md says delete removes all data; billing needs invoices kept 7 years.

## Attempted:
- Searched PROMPT.md, AGENTS.md and the last 3 commits: no retention rule.
- Cascade delete: /verify rejected it as a silent decision.

## Choices:
- A) Cascade delete everything — simplest; breaks invoice retention.
- B) Keep invoices, detach them — needs a migration adding owner_id.
- C) Refuse deletion while invoices exist — no data loss; support ticket.
"""

CANONICAL_FIELDS = {
    "title": None,
    "question": "Should deleting a workspace also delete its archived invoices?",
    "context": (
        'Feature "delete workspace", src/workspaces/delete.ts, commit a1b2c3d.\n'
        "PROMPT.md says delete removes all data; billing needs invoices kept 7 years."
    ),
    "attempted": [
        "Searched PROMPT.md, AGENTS.md and the last 3 commits: no retention rule.",
        "Cascade delete: /verify rejected it as a silent decision.",
    ],
    "choices": [
        Choice("A", "Cascade delete everything", "simplest; breaks invoice retention."),
        Choice("B", "Keep invoices, detach them", "needs a migration adding owner_id."),
        Choice("C", "Refuse deletion while invoices exist", "no data loss; support ticket."),
    ],
    "extra": [],
    "category": None,
}

NO_SECTIONS = (
    "No Question / Context / Attempted / Choices sections were found: "
    "the whole file is shown as the question."
)


def parse(text: str) -> dict:
    fields, problems = parse_blocked(text)
    assert problems == [], problems
    return fields


def test_canonical_shape():
    assert parse(CANONICAL) == CANONICAL_FIELDS


# -- headings ---------------------------------------------------------------------------------

HEADING_VARIANTS = list(
    itertools.product(
        [1, 2, 3, 4],  # level
        [str.lower, str.upper, str.title],  # case
        [":", ""],  # trailing colon
        ["\n", ""],  # blank line after the heading
    )
)


@pytest.mark.parametrize(("level", "case", "colon", "blank"), HEADING_VARIANTS)
def test_heading_level_case_colon_and_blank_line(level, case, colon, blank):
    def h(name: str) -> str:
        return f"{'#' * level} {case(name)}{colon}\n{blank}"

    text = (
        f"{h('Question')}Ship it on Friday?\n"
        f"{h('Context')}Release train.\nTwo lines.\n"
        f"{h('Attempted')}- asked in chat\n"
        f"{h('Choices')}- A) Yes — risky\n- B) No — late\n"
    )
    assert parse(text) == {
        "title": None,
        "question": "Ship it on Friday?",
        "context": "Release train.\nTwo lines.",
        "attempted": ["asked in chat"],
        "choices": [Choice("A", "Yes", "risky"), Choice("B", "No", "late")],
        "extra": [],
        "category": None,
    }


@pytest.mark.parametrize(
    "heading",
    [
        "## Question ##",
        "   ## Question",
        "##Question",
        "##\tQuestion:",
        "## Question:\t  ",
        "#QUESTION",
    ],
)
def test_heading_spacing_and_closing_hashes(heading: str):
    fields = parse(f"{heading}\nWhich?\n## Choices ##\n- A) x\n")
    assert (fields["question"], fields["choices"]) == ("Which?", [Choice("A", "x", None)])


def test_a_heading_indented_four_spaces_is_code_not_a_heading():
    fields, problems = parse_blocked("    ## Question\nWhich?\n")
    assert fields["question"] == "## Question\nWhich?"
    assert problems == [NO_SECTIONS]


def test_question_on_the_heading_line():
    fields = parse("## Question: Is Postgres fine?\n## Choices\n- A) yes\n")
    assert fields["question"] == "Is Postgres fine?"
    assert fields["choices"] == [Choice("A", "yes", None)]


def test_bold_heading_names():
    fields = parse("## **Question:**\nWhy?\n## __Context__\nbecause\n")
    assert (fields["question"], fields["context"]) == ("Why?", "because")


def test_heading_inside_a_fenced_block_is_text():
    text = "## Question\nWhich?\n## Context\n```\n## Choices\n- A) not a choice\n```\n"
    fields = parse(text)
    assert fields["context"] == "```\n## Choices\n- A) not a choice\n```"
    assert fields["choices"] == []


# -- title --------------------------------------------------------------------------------------

BODY = "## Question\nWhich port?\n## Choices\n- A) 8080\n"


@pytest.mark.parametrize(
    ("head", "title"),
    [
        ("", None),
        ("# Blocked\n", None),
        ("# BLOCKED:\n\n", None),
        ("# blocked\n", None),
        ("# Stuck on the port\n", "Stuck on the port"),
        ("# **Need a decision:**\n", "Need a decision"),
    ],
)
def test_title_missing_blocked_or_different(head, title):
    fields = parse(head + BODY)
    assert fields["title"] == title
    assert fields["question"] == "Which port?"
    assert fields["choices"] == [Choice("A", "8080", None)]
    assert fields["extra"] == []


# -- extra sections -----------------------------------------------------------------------------


def test_extra_sections_are_kept_in_order_with_their_bodies():
    text = (
        "# Blocked\n\n## Question\nWhich DB?\n\n"
        "## Notes for the human:\nI paused the cron.\n\nIt is safe.\n\n"
        "## Context\nctx\n"
        "### Links\n- https://example.com/[b]\n"
        "## Choices\n- A) Postgres\n"
    )
    fields = parse(text)
    assert fields["extra"] == [
        Section("Notes for the human", "I paused the cron.\n\nIt is safe."),
        Section("Links", "- https://example.com/[b]"),
    ]
    assert fields["question"] == "Which DB?"
    assert fields["context"] == "ctx"
    assert fields["choices"] == [Choice("A", "Postgres", None)]


def test_block_extra_on_a_parsed_file(tmp_path: Path):
    (tmp_path / "BLOCKED.md").write_text("## Question\nQ?\n## Risk\nhigh\n")
    block = LoopkitSource().parse(tmp_path, tmp_path / "BLOCKED.md", "r")
    assert block is not None
    assert block.extra == (Section("Risk", "high"),)


# -- a declared category (issue 27, item 9) ----------------------------------------------------

QUESTION_AND_CHOICES = "## Question:\nWhere is the Stripe key?\n\n## Choices:\n- A) Add it\n"


@pytest.mark.parametrize(
    "head",
    [
        "# Blocked\n\nCategory: credentials\n\n",  # what `hitl escalate --category` writes
        "# Blocked\nCATEGORY:credentials\n",
        "**Category:** credentials\n\n",  # no title, bold label
        "# Blocked\n\n**Category**: `Credentials`\n\n",
        "- category: credentials\n",
        "---\nblock_category: credentials\n---\n\n",  # agenticloop's key, in a header
        "# Blocked\n\nBlock category: credentials\n\n",
        "# Blocked\n\n## Category:\ncredentials\n\n",  # a section of its own
        "## category\n\n- Credentials\n\n",
        "### Category: credentials\n",  # the value on the heading line
        "# Blocked\n\n## **Block category**\n\n  credentials  \n\n",
    ],
)
def test_a_declared_category_is_read_in_every_spelling(head: str):
    fields = parse(head + QUESTION_AND_CHOICES)
    assert fields["category"] == "credentials"
    assert fields["question"] == "Where is the Stripe key?"
    assert fields["choices"] == [Choice("A", "Add it", None)]
    assert fields["extra"] == []  # the category is no extra section to show
    # After the four sections, as a section of its own, too.
    tail = parse(QUESTION_AND_CHOICES + "\n## Category\ncredentials\n")
    assert (tail["category"], tail["choices"]) == ("credentials", [Choice("A", "Add it", None)])


@pytest.mark.parametrize(
    ("declared", "category"),
    [
        ("Merge conflict", "merge-conflict"),  # a documented one, in its own spelling
        ("CI_failure", "ci-failure"),
        ("missing STRIPE key (billing)", "missing STRIPE key (billing)"),  # others as written
        ("x" * 60, "x" * 39 + "…"),
        ("[red]markup[/red]", "[red]markup[/red]"),  # agent text stays literal
    ],
)
def test_a_declared_category_is_normalised_or_kept_as_written(declared: str, category: str):
    assert parse(f"Category: {declared}\n" + QUESTION_AND_CHOICES)["category"] == category


@pytest.mark.parametrize(
    "text",
    [
        CANONICAL,
        # Only before the first section: a Context line about a category is the agent's prose.
        "## Question\nQ?\n## Context\nCategory: credentials, said the old ticket.\n",
        "Category:\n" + QUESTION_AND_CHOICES,  # named, but empty
        "```\nCategory: credentials\n```\n" + QUESTION_AND_CHOICES,
    ],
)
def test_no_declared_category_is_none(text: str):
    assert parse(text)["category"] is None


def test_a_block_carries_its_declared_category(tmp_path: Path):
    (tmp_path / "BLOCKED.md").write_text("Category: Credentials\r\n" + QUESTION_AND_CHOICES)
    block = LoopkitSource().parse(tmp_path, tmp_path / "BLOCKED.md", "shop")
    assert block is not None and block.category == "credentials"
    # Prose with only a category: still the whole text is the question, and the category kept.
    fields, problems = parse_blocked("Category: contract\nShould we ship?\n")
    assert (fields["category"], problems) == ("contract", [NO_SECTIONS])


# -- bullets ------------------------------------------------------------------------------------


@pytest.mark.parametrize("bullet", ["- ", "* ", "+ ", "1. ", "2) ", ""])
def test_attempted_bullets_or_none(bullet):
    second = bullet.replace("1", "2")
    text = f"## Question\nQ?\n## Attempted\n{bullet}read the docs\n{second}ran it\n"
    assert parse(text)["attempted"] == ["read the docs", "ran it"]


def test_attempted_continuation_lines_join_their_bullet():
    text = "## Question\nQ?\n## Attempted\n- read the docs,\n  all of them\n\n- ran it\n"
    assert parse(text)["attempted"] == ["read the docs, all of them", "ran it"]


# -- choices: labels x separators -------------------------------------------------------------

LABELS = {
    "A)": ("A) ", "B) "),
    "A.": ("A. ", "B. "),
    "(A)": ("(A) ", "(B) "),
    "**A)**": ("**A)** ", "**B)** "),
    "A:": ("A: ", "B: "),
    "1)": ("1) ", "2) "),
}
SEPARATORS = {
    "em dash": " — ",
    "en dash": " – ",
    "double hyphen": " -- ",
    "hyphen": " - ",
    "colon": ": ",
    "em dash, no spaces": "—",
}


@pytest.mark.parametrize("bullet", ["- ", "* ", "+ ", ""])
@pytest.mark.parametrize("sep", SEPARATORS.values(), ids=list(SEPARATORS))
@pytest.mark.parametrize("label", LABELS, ids=list(LABELS))
def test_choice_label_separator_and_bullet(label, sep, bullet):
    first, second = LABELS[label]
    text = (
        "## Question\nWhich cache?\n## Choices\n"
        f"{bullet}{first}Redis{sep}one more service to run\n"
        f"{bullet}{second}In memory{sep}lost on restart\n"
    )
    keys = ("1", "2") if label == "1)" else ("A", "B")
    assert parse(text)["choices"] == [
        Choice(keys[0], "Redis", "one more service to run"),
        Choice(keys[1], "In memory", "lost on restart"),
    ]


@pytest.mark.parametrize("label", LABELS, ids=list(LABELS))
def test_choice_without_consequence(label):
    first, second = LABELS[label]
    text = f"## Question\nQ?\n## Choices\n- {first}Redis\n- {second}In memory\n"
    keys = ("1", "2") if label == "1)" else ("A", "B")
    assert parse(text)["choices"] == [
        Choice(keys[0], "Redis", None),
        Choice(keys[1], "In memory", None),
    ]


def test_lowercase_labels_become_upper_keys():
    text = "## Question\nQ?\n## Choices\n- a) one — x\n- b) two — y\n"
    assert [c.key for c in parse(text)["choices"]] == ["A", "B"]


def test_bullets_without_labels_are_lettered():
    text = "## Question\nQ?\n## Choices\n- Redis — a service\n- In memory\n"
    assert parse(text)["choices"] == [
        Choice("A", "Redis", "a service"),
        Choice("B", "In memory", None),
    ]


def test_hyphenated_words_are_not_separators():
    text = "## Question\nQ?\n## Choices\n- A) Keep-invoices flag — a read-only column\n"
    assert parse(text)["choices"] == [Choice("A", "Keep-invoices flag", "a read-only column")]


def test_wrapped_consequence_joins_its_choice():
    text = "## Question\nQ?\n## Choices\n- A) Redis — one more\n  service to run\n- B) Memory\n"
    assert parse(text)["choices"] == [
        Choice("A", "Redis", "one more service to run"),
        Choice("B", "Memory", None),
    ]


def test_duplicate_labels_fall_back_to_positions():
    text = "## Question\nQ?\n## Choices\n- A) one\n- A) two\n"
    assert parse(text)["choices"] == [Choice("1", "one", None), Choice("2", "two", None)]


@pytest.mark.parametrize(
    "choices",
    ["", "## Choices\n", "## Choices:\n\n", "## Choices\n(none: answer in your own words)\n"],
)
def test_zero_choices(choices):
    fields = parse("## Question\nWhat should the retry budget be?\n" + choices)
    assert fields["question"] == "What should the retry budget be?"
    assert fields["choices"] == []


# -- encodings and line endings -----------------------------------------------------------------


@pytest.mark.parametrize(
    "encode",
    [
        lambda t: t.replace("\n", "\r\n"),
        lambda t: "\ufeff" + t,
        lambda t: "\ufeff" + t.replace("\n", "\r\n"),
        lambda t: t.replace("\n", "\r"),
    ],
    ids=["crlf", "bom", "bom+crlf", "cr"],
)
def test_crlf_and_bom_parse_like_the_plain_file(encode):
    assert parse(encode(CANONICAL)) == CANONICAL_FIELDS


@pytest.mark.parametrize(
    "data",
    [
        CANONICAL.replace("\n", "\r\n").encode(),
        b"\xef\xbb\xbf" + CANONICAL.encode(),
        b"\xef\xbb\xbf" + CANONICAL.replace("\n", "\r\n").encode(),
    ],
    ids=["crlf", "bom", "bom+crlf"],
)
def test_crlf_and_bom_files(tmp_path: Path, data: bytes):
    path = tmp_path / "BLOCKED.md"
    path.write_bytes(data)
    block = LoopkitSource().parse(tmp_path, path, "r")
    assert block is not None
    assert block.question == CANONICAL_FIELDS["question"]
    assert block.context == CANONICAL_FIELDS["context"]
    assert list(block.attempted) == CANONICAL_FIELDS["attempted"]
    assert list(block.choices) == CANONICAL_FIELDS["choices"]
    assert block.problems == ()
    assert block.fingerprint == "sha256:" + hashlib.sha256(data).hexdigest()


# -- no sections, empty ---------------------------------------------------------------------------


def test_no_sections_whole_text_is_the_question():
    text = "I am stuck: the [b]staging[/b] DB is read-only.\n\nShould I wait or page someone?\n"
    fields, problems = parse_blocked(text)
    assert fields == {
        "title": None,
        "question": (
            "I am stuck: the [b]staging[/b] DB is read-only.\n\nShould I wait or page someone?"
        ),
        "context": "",
        "attempted": [],
        "choices": [],
        "extra": [],
        "category": None,
    }
    assert problems == [NO_SECTIONS]


def test_title_and_prose_only_prose_is_the_question():
    fields, problems = parse_blocked("# Blocked\n\nShould I page someone?\n")
    assert fields["question"] == "Should I page someone?"
    assert problems == [NO_SECTIONS]


def test_unknown_sections_only_whole_text_is_the_question():
    text = "## Problem\nThe DB is down.\n## Ask\nWait?\n"
    fields, problems = parse_blocked(text)
    assert fields["question"] == "## Problem\nThe DB is down.\n## Ask\nWait?"
    assert fields["extra"] == []
    assert problems == [NO_SECTIONS]


def test_missing_question_section_uses_the_preamble():
    fields, problems = parse_blocked("Redis or memory?\n## Choices\n- A) Redis\n")
    assert fields["question"] == "Redis or memory?"
    assert fields["choices"] == [Choice("A", "Redis", None)]
    assert problems == ["The Question section is missing or empty."]


@pytest.mark.parametrize("text", ["", " ", "\n\n", " \t\r\n  \n", "\ufeff", "\ufeff\r\n"])
def test_empty_or_whitespace_only(text):
    fields, problems = parse_blocked(text)
    assert fields["question"] == "(BLOCKED.md is empty)"
    assert (fields["context"], fields["attempted"], fields["choices"]) == ("", [], [])
    assert problems == [NO_SECTIONS, "The file is empty or only whitespace."]


@pytest.mark.parametrize("data", [b"", b"   \n\t\n", b"no sections at all"])
def test_unparseable_files_are_still_listed_and_answerable(tmp_path: Path, data: bytes):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "BLOCKED.md").write_bytes(data)
    inbox = Inbox.open([repo])
    [block] = inbox.sorted_blocks()
    assert block.path == repo / "BLOCKED.md"
    assert block.problems[0] == NO_SECTIONS
    assert block.choices == ()
    assert block.raw == data.decode()
    assert block.fingerprint == "sha256:" + hashlib.sha256(data).hexdigest()


# -- hostile text is kept literally -----------------------------------------------------------

HOSTILE = "[b]bold [/x] [@click=app.quit]quit[/] \x1b[31mred\x1b[0m \x1b]0;pwned\x07 \x00 \u202e"


def test_markup_and_escapes_are_kept_literally_in_every_field():
    text = (
        f"# {HOSTILE}\n## Question\n{HOSTILE}\n## Context\n{HOSTILE}\n"
        f"## Attempted\n- {HOSTILE}\n## Choices\n- A) {HOSTILE} — {HOSTILE}\n"
        f"## [red]Extra[/red]\n{HOSTILE}\n"
    )
    fields = parse(text)
    assert fields["title"] == HOSTILE
    assert fields["question"] == HOSTILE
    assert fields["context"] == HOSTILE
    assert fields["attempted"] == [HOSTILE]
    assert fields["choices"] == [Choice("A", HOSTILE, HOSTILE)]
    assert fields["extra"] == [Section("[red]Extra[/red]", HOSTILE)]


def test_unclosed_markup_is_kept(tmp_path: Path):
    data = b"## Question\n[b unclosed [link=file:///etc/passwd]x\n## Choices\n- A) [/]\n"
    (tmp_path / "BLOCKED.md").write_bytes(data)
    block = LoopkitSource().parse(tmp_path, tmp_path / "BLOCKED.md", "r")
    assert block is not None
    assert block.question == "[b unclosed [link=file:///etc/passwd]x"
    assert block.choices == (Choice("A", "[/]", None),)


# -- hostile files ------------------------------------------------------------------------------


def test_invalid_utf8_and_nul_bytes_do_not_crash(tmp_path: Path):
    data = b"## Question\nWhich \xff\xfe encoding?\x00\n## Choices\n- A) utf-8\n"
    (tmp_path / "BLOCKED.md").write_bytes(data)
    block = LoopkitSource().parse(tmp_path, tmp_path / "BLOCKED.md", "r")
    assert block is not None
    assert block.question == "Which \ufffd\ufffd encoding?\x00"
    assert block.choices == (Choice("A", "utf-8", None),)
    assert block.problems == ("The file contains NUL bytes: it may be binary.",)


def test_huge_file_is_fingerprinted_in_full_and_parsed_in_part(tmp_path: Path):
    data = b"## Question\nToo long?\n## Context\n" + b"x" * (MAX_PARSE_BYTES + 10)
    (tmp_path / "BLOCKED.md").write_bytes(data)
    block = LoopkitSource().parse(tmp_path, tmp_path / "BLOCKED.md", "r")
    assert block is not None
    assert block.question == "Too long?"
    assert block.truncated is True
    assert len(block.raw) == MAX_PARSE_BYTES
    assert block.fingerprint == "sha256:" + hashlib.sha256(data).hexdigest()
    assert block.problems == (
        f"The file is {len(data):,} bytes; only the first {MAX_PARSE_BYTES:,} are shown.",
    )


def test_parse_fields_from_file(tmp_path: Path):
    path = tmp_path / "BLOCKED.md"
    path.write_text(CANONICAL)
    os.utime(path, (1_700_000_000, 1_700_000_000))
    block = LoopkitSource().parse(tmp_path, path, "shop")
    assert block is not None
    assert (block.id, block.source, block.state, block.repo, block.path) == (
        "shop",
        "loopkit",
        "blocked",
        tmp_path,
        path,
    )
    assert block.since == datetime.fromtimestamp(1_700_000_000, UTC)
    assert block.raw == CANONICAL
    assert block.category is None


def test_missing_file_is_no_block_but_a_folder_is_an_unreadable_one(tmp_path: Path):
    assert LoopkitSource().parse(tmp_path, tmp_path / "BLOCKED.md", "r") is None
    (tmp_path / "BLOCKED.md").mkdir()  # issue 23: a BLOCKED.md that is no file keeps its loop
    block = LoopkitSource().parse(tmp_path, tmp_path / "BLOCKED.md", "r")
    assert block is not None and not block.answerable
    assert block.problems == ("BLOCKED.md could not be read: it is a folder, not a file.",)


# -- printable --------------------------------------------------------------------------------


def test_printable_makes_escapes_visible():
    assert printable("\x1b[31mred\x1b[0m") == "␛[31mred␛[0m"
    assert printable("a\x07b\x00c\x7fd") == "a␇b␀c␡d"
    assert printable("\x9b31m") == "�31m"  # the 8-bit CSI


def test_printable_newlines_are_symbols_unless_kept():
    assert printable("one\ntwo\r\nthree") == "one␊two␍␊three"
    assert printable("one\ntwo\r\nthree\tx", keep_newlines=True) == "one\ntwo\nthree    x"
    assert printable("a\rb", keep_newlines=True) == "a␍b"


def test_printable_hides_nothing_and_leaves_markup_alone():
    assert printable("ok\u202etxt.exe\u200b") == "ok�txt.exe�"
    assert printable("\ufeffBOM") == "BOM"
    assert printable(HOSTILE) == (
        "[b]bold [/x] [@click=app.quit]quit[/] ␛[31mred␛[0m ␛]0;pwned␇ ␀ �"
    )
    assert printable("naïve — 日本語 ✓") == "naïve — 日本語 ✓"


def _without_hanging(fifo: Path, call):
    """Run `call`; if it blocks on the FIFO, unblock it by opening the write end, and fail."""
    pool = concurrent.futures.ThreadPoolExecutor(1)
    future = pool.submit(call)
    try:
        return future.result(timeout=5)
    except concurrent.futures.TimeoutError:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("reading the FIFO blocked")
    finally:
        pool.shutdown(wait=False)


def test_a_fifo_named_blocked_md_does_not_hang(tmp_path: Path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    os.mkfifo(repo / "BLOCKED.md")
    parsed = _without_hanging(
        repo / "BLOCKED.md", lambda: LoopkitSource().parse(repo, repo / "BLOCKED.md", "r")
    )
    # Issue 23: not a file to read, so an unreadable block (the loop stays stopped).
    assert parsed is not None and not parsed.answerable
    assert parsed.question == "(BLOCKED.md could not be read: it is a FIFO, not a file)"
    inbox = _without_hanging(repo / "BLOCKED.md", lambda: Inbox.open([tmp_path]))
    assert [b.question for b in inbox.blocks.values()] == [parsed.question]
