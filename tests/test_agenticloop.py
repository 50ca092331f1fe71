"""agenticloop task files: finding, parsing and answering them, byte for byte (FORMATS.md §2)."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hitl_tui.answers.apply import apply_plan
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.model import Answer, Block, HitlError, StaleError, UsageError
from hitl_tui.sources.agenticloop import parse as agenticloop
from hitl_tui.sources.agenticloop.source import AgenticloopSource

WHEN = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
TASKS = Path(".agenticloop") / "tasks"


def _inbox(*repos: Path) -> Inbox:
    return Inbox.open(list(repos))


def _blocks(repo: Path) -> dict[str, Block]:
    return {b.id: b for b in _inbox(repo).blocks.values() if b.source == "agenticloop"}


def _repo(tmp_path: Path, project: str | None = None, name: str = "proj") -> Path:
    repo = tmp_path / name
    (repo / TASKS).mkdir(parents=True)
    (repo / ".git").mkdir()
    if project is not None:
        (repo / ".agenticloop" / "project.md").write_text(project)
    return repo


def _task(repo: Path, name: str, data: str | bytes, folder: Path = TASKS) -> Path:
    path = repo / folder / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    path.write_bytes(data)
    return path


def _parse(repo: Path, path: Path) -> Block | None:
    return AgenticloopSource().parse(repo, path, repo.name)


def _answer(block: Block, key: str | None = None, **kw) -> bytes:
    """Apply an answer and return the task file's new bytes."""
    choice = block.find_choice(key) if key else None
    answer = Answer(choice=choice, when=WHEN, operator=kw.pop("operator", "ana"), **kw)
    plan = AgenticloopSource().plan(block, answer)
    apply_plan(plan)
    return block.path.read_bytes()


# -- the sample repo ------------------------------------------------------------------------


def test_fixture_lists_the_three_blocked_tasks(billing: Path) -> None:
    blocks = _blocks(billing)
    assert sorted(blocks) == ["billing/T-007", "billing/T-009", "billing/T-012"]
    t7 = blocks["billing/T-007"]
    assert (t7.state, t7.category) == ("blocked", "contract")
    assert t7.title == "Switch session storage from SQLite to Postgres"
    assert t7.question == "a human reviews the doc change and approves it."
    assert t7.attempted == ("nothing in code, per the change-request gate.",)
    assert t7.context == (
        "Task: Switch session storage from SQLite to Postgres\n"
        "Category: contract — the task record is impossible, contradictory, missing key "
        "information, or waiting on a change-request approval\n"
        "Checked: docs/architecture.md still locks SQLite; the docs-only update is drafted in "
        "commit abc1234.\n"
        "Who can unblock: the project owner.\n\n"
        "Replace the SQLite session store with a Postgres-backed store behind the existing "
        "SessionStore interface."
    )
    assert [(c.key, c.option, c.needs_text) for c in t7.choices] == [
        (
            "A",
            "Accept the recommended default: approve, because Postgres already runs in production",
            False,
        ),
        ("B", "Approve the change request", False),
        ("C", "Resume with a note", True),
        ("D", "Keep blocked, add a note", True),
    ]
    assert "approved: true" in t7.choices[1].consequence
    assert "block_category line is deleted" in t7.choices[2].consequence
    assert "only your dated note" in t7.choices[3].consequence
    # Blocked since its note's day, not since the file was last written (issue 12).
    assert t7.since == datetime(2026, 11, 27, tzinfo=UTC)
    assert t7.raw == t7.path.read_text()
    assert t7.problems == ()


def test_fixture_needs_context_has_numbered_questions_and_defaults(billing: Path) -> None:
    t12 = _blocks(billing)["billing/T-012"]
    assert (t12.state, t12.category) == ("needs_context", None)
    assert t12.title == "Round invoice totals per line or per invoice"
    assert t12.questions == (
        "Should rounding happen per line or on the invoice total? Checked: the export rounds "
        "per line, the PDF per total. Recommended: per line, to match the export. "
        "Who: maintainer.",
        "Which rounding mode for halves? Checked: no config key exists. Missing evidence: the "
        "accountant's rule. Who: project owner.",
    )
    assert t12.question.startswith("1. Should rounding happen")
    assert "\n2. Which rounding mode for halves?" in t12.question
    assert t12.defaults == ("per line, to match the export", None)
    assert t12.meta["question_heads"] == (
        "Should rounding happen per line or on the invoice total?",
        "Which rounding mode for halves?",
    )
    assert "Needs context (context_overflow)" in t12.context
    assert [c.option for c in t12.choices] == [
        "Resume with a note",
        "Keep needs_context, add a note",
    ]


def test_fixture_credentials_block(billing: Path) -> None:
    t9 = _blocks(billing)["billing/T-009"]
    assert t9.question == "an operator provides SFTP_PASSWORD in the loop's environment."
    assert "Category: credentials — auth, a token" in t9.context
    assert "Who can unblock: the ops owner." in t9.context
    assert t9.attempted == ("key-based login, refused by the server.",)
    assert [c.key for c in t9.choices] == ["A", "B"]


# -- golden writes for every choice of the sample tasks ---------------------------------------

T7_NOTE_LINE = "## Comments\n- 2026-11-27: Blocked (contract)"


def _t7_expected(original: str, header: str, note: str) -> str:
    old_header = "status: blocked\nblock_category: contract\n"
    assert original.count(old_header) == 1
    text = original.replace(old_header, header)
    return text.replace(
        T7_NOTE_LINE, f"## Comments\n- 2026-11-29: {note}\n- 2026-11-27: Blocked (contract)"
    )


@pytest.mark.parametrize(
    ("key", "kw", "header", "note"),
    [
        (
            "A",
            {},
            "status: agent-ready\napproved: true\n",
            "Unblocked by ana: accepted the recommended default: approve, because Postgres "
            "already runs in production.",
        ),
        (
            "B",
            {},
            "status: agent-ready\napproved: true\n",
            "Approved by ana: the change request is approved.",
        ),
        (
            "B",
            {"note": "doc change reviewed"},
            "status: agent-ready\napproved: true\n",
            "Approved by ana: the change request is approved. Note: doc change reviewed",
        ),
        (
            "C",
            {"texts": ("Keep SQLite; write an ADR first.",)},
            "status: agent-ready\n",
            "Answer from ana: Keep SQLite; write an ADR first.",
        ),
        (
            "C",
            {"note": "Keep SQLite for now."},
            "status: agent-ready\n",
            "Answer from ana: Keep SQLite for now.",
        ),
        (
            "D",
            {"note": "Waiting for the owner to read the doc."},
            "status: blocked\nblock_category: contract\n",
            "Note from ana (still blocked): Waiting for the owner to read the doc.",
        ),
    ],
)
def test_t007_every_choice_writes_exact_bytes(billing, key, kw, header, note) -> None:
    block = _blocks(billing)["billing/T-007"]
    original = block.path.read_text()
    assert _answer(block, key, **kw).decode() == _t7_expected(original, header, note)


def test_t007_approve_golden_file(billing: Path) -> None:
    block = _blocks(billing)["billing/T-007"]
    _answer(block, "B")
    assert block.path.read_bytes() == (
        b"---\n"
        b"task_id: T-007\n"
        b"status: agent-ready\n"
        b"approved: true\n"
        b"backend: files\n"
        b"type: change-request\n"
        b"implementation_artifact:\n"
        b"review_status:\n"
        b"# Minimalism discipline: none | lite | full | ultra.\n"
        b"minimalism: none\n"
        b"attempt_budget: 3\n"
        b"review_budget: 3\n"
        b'allowed_paths: ["src/storage/", "test/storage.test.js", "docs/architecture.md"]\n'
        b"---\n"
        b"\n"
        b"# T-007 - Switch session storage from SQLite to Postgres\n"
        b"\n"
        b"## Task\n"
        b"Replace the SQLite session store with a Postgres-backed store behind the existing "
        b"SessionStore interface.\n"
        b"\n"
        b"## Scope\n"
        b"- Add `src/storage/postgres.js` implementing SessionStore.\n"
        b"\n"
        b"## Out of Scope\n"
        b"- Migrating existing session rows.\n"
        b"\n"
        b"## Acceptance Criteria\n"
        b"- `npm test` passes with the Postgres store selected by `SESSION_STORE=postgres`.\n"
        b"\n"
        b"## Required Checks\n"
        b"- `npm test`\n"
        b"\n"
        b"## Comments\n"
        b"- 2026-11-29: Approved by ana: the change request is approved.\n"
        b"- 2026-11-27: Blocked (contract): change-request approval gate. Checked: "
        b"docs/architecture.md still locks SQLite; the docs-only update is drafted in commit "
        b"abc1234. Tried: nothing in code, per the change-request gate. Needed: a human reviews "
        b"the doc change and approves it. Who can unblock: the project owner. Recommended "
        b"default: approve, because Postgres already runs in production.\n"
        b"- 2026-11-26: Task created from the storage plan.\n"
        b"\n"
        b"## Revision Log\n"
    )


@pytest.mark.parametrize(
    ("key", "kw", "header", "note"),
    [
        (
            None,
            {"texts": ("SFTP_PASSWORD is set in the loop's environment now.",)},
            "status: agent-ready\n",
            "Answer from ana: SFTP_PASSWORD is set in the loop's environment now.",
        ),
        (
            "A",
            {"note": "Password is in the vault entry sftp-acct."},
            "status: agent-ready\n",
            "Answer from ana: Password is in the vault entry sftp-acct.",
        ),
        (
            "B",
            {"note": "I am asking the accountant for the password."},
            "status: blocked\nblock_category: credentials\n",
            "Note from ana (still blocked): I am asking the accountant for the password.",
        ),
    ],
)
def test_t009_every_choice_writes_exact_bytes(billing, key, kw, header, note) -> None:
    block = _blocks(billing)["billing/T-009"]
    original = block.path.read_text()
    expected = original.replace("status: blocked\nblock_category: credentials\n", header)
    expected = expected.replace("## Comments\n", f"## Comments\n- 2026-11-29: {note}\n")
    assert _answer(block, key, **kw).decode() == expected


@pytest.mark.parametrize(
    ("key", "kw", "status", "note"),
    [
        (
            None,
            {"texts": ("per line, to match the export", "half-up")},
            "agent-ready",
            "Answers from ana: 1. per line, to match the export. 2. half-up.",
        ),
        (
            "A",
            {"texts": ("per line", "banker's rounding"), "note": "the accountant confirmed"},
            "agent-ready",
            "Answers from ana: 1. per line. 2. banker's rounding. Note: the accountant confirmed",
        ),
        (
            "A",
            {"note": "Round per line, half-up."},
            "agent-ready",
            "Answer from ana: Round per line, half-up.",
        ),
        (
            "B",
            {"note": "Asked the accountant about halves."},
            "needs_context",
            "Note from ana (still needs_context): Asked the accountant about halves.",
        ),
    ],
)
def test_t012_every_choice_writes_exact_bytes(billing, key, kw, status, note) -> None:
    block = _blocks(billing)["billing/T-012"]
    original = block.path.read_text()
    expected = original.replace("status: needs_context\n", f"status: {status}\n")
    expected = expected.replace("## Comments\n", f"## Comments\n- 2026-11-29: {note}\n")
    assert _answer(block, key, **kw).decode() == expected


def test_t012_wrong_number_of_answers_is_refused(billing: Path) -> None:
    block = _blocks(billing)["billing/T-012"]
    before = block.path.read_bytes()
    source = AgenticloopSource()
    with pytest.raises(UsageError, match="asks 2 questions"):
        source.plan(block, Answer(texts=("per line",), when=WHEN))
    with pytest.raises(UsageError, match="answer 2 is empty"):
        source.plan(block, Answer(texts=("per line", " "), when=WHEN))
    assert block.path.read_bytes() == before


def test_plan_has_expect_hint_and_summary(billing: Path) -> None:
    block = _blocks(billing)["billing/T-007"]
    plan = AgenticloopSource().plan(block, Answer(choice=block.find_choice("B"), when=WHEN))
    assert plan.expect == {block.path: block.fingerprint}
    assert plan.hint == "Restart the loop on the task: /agenticloop T-007"
    assert plan.summary == (
        "billing/T-007: note added under ## Comments; status: blocked → agent-ready; "
        "block_category removed; approved: true"
    )
    assert [c.path for c in plan.changes] == [block.path]


def test_choice_needing_words_without_any_is_refused(billing: Path) -> None:
    block = _blocks(billing)["billing/T-009"]
    with pytest.raises(UsageError, match="needs your words"):
        AgenticloopSource().plan(block, Answer(choice=block.find_choice("A"), when=WHEN))


@pytest.mark.parametrize(
    ("text", "word"),
    [
        ("Password is TBD", "TBD"),
        ("use the vault as needed", "as needed"),
        ("vault, keychain, etc.", "etc."),
        ("Similar To Previous Task", "similar to previous task"),
        ("value to be filled later", "to be filled"),
        ("tbd.", "TBD"),
    ],
)
def test_placeholder_words_are_refused(billing: Path, text: str, word: str) -> None:
    block = _blocks(billing)["billing/T-009"]
    before = block.path.read_bytes()
    with pytest.raises(UsageError) as info:
        AgenticloopSource().plan(block, Answer(texts=(text,), when=WHEN))
    assert f"placeholder {word!r}" in str(info.value)
    assert "block every later step" in str(info.value)
    assert block.path.read_bytes() == before


def test_placeholder_lookalikes_pass(billing: Path) -> None:
    block = _blocks(billing)["billing/T-009"]
    plan = AgenticloopSource().plan(
        block,
        Answer(texts=("Set it; tbdx and etcetera are real names, as needed_flag.",), when=WHEN),
    )
    assert b"etcetera" in plan.changes[0].new


def test_stale_block_is_not_written(billing: Path) -> None:
    block = _blocks(billing)["billing/T-009"]
    plan = AgenticloopSource().plan(block, Answer(texts=("done",), when=WHEN))
    changed = block.path.read_bytes().replace(b"ops owner", b"ops team")
    block.path.write_bytes(changed)
    with pytest.raises(StaleError, match="changed since you read it"):
        apply_plan(plan)
    assert block.path.read_bytes() == changed
    with pytest.raises(StaleError, match="changed since it was read"):
        AgenticloopSource().plan(block, Answer(texts=("done",), when=WHEN))


def test_mode_is_kept(billing: Path) -> None:
    block = _blocks(billing)["billing/T-009"]
    os.chmod(block.path, 0o640)
    _answer(block, None, texts=("done",))
    assert block.path.stat().st_mode & 0o777 == 0o640


# -- variants of real task files ------------------------------------------------------------

TRICKY = """\
---
task_id: T-020
# the loop owns this header; humans edit with care
status: "blocked"\x20\x20\x20
block_category: 'no-progress'
zip: 01234
enabled: no
tags: [a, b,   c]
owner: {name: ana, team: core}
when: 2026-11-01
allowed_paths: ["src/"]
  # an indented comment
scope:
  - src/
  - "docs/a b.md"
notes: |
  status: not this one
  nor this
generated_paths:
  docs/x.md:
    generator: npm run docs
---

# T-020: Ship the thing

## Task
Ship it.

## Comments
- 2026-11-20: Blocked (no-progress): same test failed 3 times. Tried: two fixes. Needed: a decision.
"""


def test_tricky_header_survives_byte_for_byte(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    path = _task(repo, "T-020", TRICKY)
    block = _parse(repo, path)
    assert block is not None and block.state == "blocked" and block.category == "no-progress"
    assert block.title == "Ship the thing"
    assert block.question == "a decision."
    header = block.meta["header"]
    assert (header["zip"], header["enabled"], header["when"]) == ("01234", "no", "2026-11-01")
    assert header["tags"] == ["a", "b", "c"] and header["owner"] == "{name: ana, team: core}"
    assert header["scope"] == ["src/", "docs/a b.md"]
    assert header["notes"] == "status: not this one\nnor this\n"
    assert header["generated_paths"] == {"docs/x.md": {"generator": "npm run docs"}}
    new = _answer(block, None, texts=("Skip the flaky test and file a bug.",))
    assert new.decode() == TRICKY.replace(
        "status: \"blocked\"   \nblock_category: 'no-progress'\n",
        'status: "agent-ready"   \n',
    ).replace(
        "## Comments\n",
        "## Comments\n- 2026-11-29: Answer from ana: Skip the flaky test and file a bug.\n",
    )


def test_existing_approved_false_is_set_true_in_place(tmp_path: Path) -> None:
    """agenticloop reads `false  # gate` as the value, so the whole value is replaced."""
    repo = _repo(tmp_path)
    text = (
        "---\ntask_id: T-030\ntype: change-request\napproved: false  # gate\n"
        "status: blocked\nblock_category: contract\n---\n\n# T-030 - X\n\n## Comments\n"
        "- 2026-11-02: Blocked (contract): approval gate. Needed: approve the ADR.\n"
    )
    block = _parse(repo, _task(repo, "T-030", text))
    assert block is not None
    assert _answer(block, "A").decode() == (
        "---\ntask_id: T-030\ntype: change-request\napproved: true\n"
        "status: agent-ready\n---\n\n# T-030 - X\n\n## Comments\n"
        "- 2026-11-29: Approved by ana: the change request is approved.\n"
        "- 2026-11-02: Blocked (contract): approval gate. Needed: approve the ADR.\n"
    )


def test_crlf_and_bom_are_kept(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    text = (
        "---\r\ntask_id: T-040\r\nstatus: blocked\r\nblock_category: ci-failure\r\n---\r\n\r\n"
        "# T-040 - CI\r\n\r\n## Comments\r\n- 2026-11-03: Blocked (ci-failure): red. "
        "Needed: rerun CI.\r\n"
    )
    path = _task(repo, "T-040", b"\xef\xbb\xbf" + text.encode())
    block = _parse(repo, path)
    assert block is not None and block.question == "rerun CI."
    assert _answer(block, None, texts=("Rerun done.",)) == b"\xef\xbb\xbf" + (
        b"---\r\ntask_id: T-040\r\nstatus: agent-ready\r\n---\r\n\r\n"
        b"# T-040 - CI\r\n\r\n## Comments\r\n- 2026-11-29: Answer from ana: Rerun done.\r\n"
        b"- 2026-11-03: Blocked (ci-failure): red. Needed: rerun CI.\r\n"
    )


def test_comments_missing_goes_before_revision_log(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    text = (
        "---\nstatus: blocked\nblock_category: transient\n---\n\n# T-050 - Y\n\n"
        "## Task\nDo Y.\n\n## Revision Log\n- r1\n"
    )
    block = _parse(repo, _task(repo, "T-050", text))
    assert block is not None and block.id == "proj/T-050"
    assert "(no note under ## Comments says why T-050 is blocked)" in block.question
    assert _answer(block, None, texts=("Retry now.",)).decode() == (
        "---\nstatus: agent-ready\n---\n\n# T-050 - Y\n\n## Task\nDo Y.\n\n"
        "## Comments\n- 2026-11-29: Answer from ana: Retry now.\n\n## Revision Log\n- r1\n"
    )


def test_comments_missing_appended_at_end_without_final_newline(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    text = "---\nstatus: blocked\nblock_category: transient\n---\n\n# T-051 - Y\n\n## Task\nDo Y."
    block = _parse(repo, _task(repo, "T-051", text))
    assert block is not None
    assert _answer(block, "B", note="later").decode() == (
        text + "\n\n## Comments\n- 2026-11-29: Note from ana (still blocked): later\n"
    )


def test_blank_line_after_comments_heading_note_goes_above_first_note(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    text = (
        "---\nstatus: blocked\nblock_category: transient\n---\n\n## Comments\n\n"
        "- 2026-11-04: Blocked: flaky.\n"
    )
    block = _parse(repo, _task(repo, "T-052", text))
    assert block is not None
    assert _answer(block, "B", note="n").decode() == text.replace(
        "\n- 2026-11-04", "\n- 2026-11-29: Note from ana (still blocked): n\n- 2026-11-04"
    )


NOTES_NEWEST_FIRST = """\
---
status: blocked
block_category: merge-conflict
---

## Comments
- 2026-11-10: Blocked (merge-conflict): main moved. Tried: rebase twice. Needed: resolve a.ts.
- 2026-11-05: Blocked (merge-conflict): old. Tried: rebase. Needed: stale question.
- 2026-11-01: Started.
"""

NOTES_OLDEST_FIRST = """\
---
status: blocked
block_category: merge-conflict
---

## Comments
- 2026-11-01: Started.
- 2026-11-05: Blocked (merge-conflict): old. Tried: rebase. Needed: stale question.
- 2026-11-10: Blocked (merge-conflict): main moved. Tried: rebase twice. Needed: resolve a.ts.
- 2026-11-11: Looked at it again, nothing new.
"""


@pytest.mark.parametrize("text", [NOTES_NEWEST_FIRST, NOTES_OLDEST_FIRST])
def test_newest_block_note_explains_in_either_order(tmp_path: Path, text: str) -> None:
    repo = _repo(tmp_path)
    block = _parse(repo, _task(repo, "T-060", text))
    assert block is not None
    assert block.question == "resolve a.ts."
    assert block.attempted == ("rebase twice.", "rebase.")


def test_continuation_lines_belong_to_the_note(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    text = (
        "---\nstatus: blocked\nblock_category: credentials\n---\n\n## Comments\n"
        "- 2026-11-06: Blocked (credentials): no token.\n  Needed: a GITHUB_TOKEN with repo\n"
        "  scope. Who can unblock: ops.\n- 2026-11-01: Started.\n"
    )
    block = _parse(repo, _task(repo, "T-061", text))
    assert block is not None
    assert block.question == "a GITHUB_TOKEN with repo scope."
    assert "Who can unblock: ops." in block.context


def test_unknown_category_shown_as_is(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    text = (
        "---\nstatus: blocked\nblock_category: cosmic-rays\n---\n\n"
        "## Comments\n- 2026-11-07: Blocked.\n"
    )
    block = _parse(repo, _task(repo, "T-070", text))
    assert block is not None and block.category == "cosmic-rays"
    assert "Category: cosmic-rays — not one of the documented categories" in block.context
    assert block.question == "Blocked."


def test_single_question_needs_context_with_default(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    text = (
        "---\nstatus: needs_context\n---\n\n## Comments\n"
        "- 2026-11-08: needs_context. Checked: README. Needed: which port? "
        "Recommended default: 8080. Who can answer: maintainer.\n"
    )
    block = _parse(repo, _task(repo, "T-071", text))
    assert block is not None and block.questions == ()
    assert block.question == "which port?"
    assert block.choices[0].option == "Accept the recommended default: 8080"
    assert _answer(block, "A").decode() == text.replace(
        "status: needs_context", "status: agent-ready"
    ).replace(
        "## Comments\n",
        "## Comments\n- 2026-11-29: Unblocked by ana: accepted the recommended default: 8080.\n",
    )


def test_tasks_that_are_not_blocked_are_not_listed(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    for i, status in enumerate(["draft", "agent-ready", "in-progress", "closed", "'accepted'"]):
        _task(repo, f"T-10{i}", f"---\nstatus: {status}\n---\n# T-10{i} - x\n")
    _task(repo, "README", "# Tasks\nNo header here.\n")
    _task(repo, "T-200", "---\nstatus: Blocked\nblock_category: transient\n---\n")
    assert sorted(_blocks(repo)) == ["proj/T-200"]


def test_task_id_from_header_else_stem(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    _task(repo, "odd-name", "---\ntask_id: T-300\nstatus: blocked\n---\n")
    _task(repo, "T-301", "---\nstatus: blocked\n---\n")
    blocks = _blocks(repo)
    assert sorted(blocks) == ["proj/T-300", "proj/T-301"]
    assert blocks["proj/T-300"].problems == (
        "No dated note under ## Comments explains the block.",
        "status is blocked but block_category is missing.",
    )


# -- broken files are listed, never dropped, never answered ---------------------------------


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("---\nstatus: blocked\nkey: [unclosed\n---\n# T - x\n", "does not parse"),
        ("---\nstatus: blocked\n  bad: indent\n: :\n---\n", "does not parse"),
        ("---\nstatus: blocked\nnever closed\n", "never closed"),
        ("---\n- a list\n- status: blocked\n---\n", "line 2: '- a list' is neither"),
        ("---\nstatus: blocked\nx: 'unclosed\n---\n", 'line 3: the value in "x: \'unclosed"'),
        ("---\nstatus: blocked\nnested:\n  - a\n  b: c\n---\n", "line 5: '  b: c'"),
        ('---\nstatus: blocked\nx: "a" # c\n---\n', "does not parse: line 3"),
    ],
)
def test_unparseable_header_is_a_broken_block(tmp_path: Path, text: str, problem: str) -> None:
    repo = _repo(tmp_path)
    path = _task(repo, "T-400", text)
    blocks = _blocks(repo)
    block = blocks["proj/T-400"]
    assert block.state == "blocked"
    assert problem in block.problems[0]
    assert block.raw == text
    assert block.choices == ()
    with pytest.raises(HitlError, match="does not parse"):
        AgenticloopSource().plan(block, Answer(texts=("x",), when=WHEN))
    assert path.read_text() == text


def test_yaml_syntax_is_only_text(tmp_path: Path) -> None:
    """agenticloop's reader has no tags, aliases or anchors: a YAML bomb is a few strings."""
    repo = _repo(tmp_path)
    rows = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        rows.append(f"{cur}: &{cur} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]")
    rows.append("x: !!python/object:os.system ls")
    text = "---\nstatus: blocked\nblock_category: transient\n" + "\n".join(rows) + "\n---\n"
    _task(repo, "T-500", text)
    start = time.monotonic()
    block = _blocks(repo)["proj/T-500"]
    assert time.monotonic() - start < 2
    assert block.answerable and block.category == "transient"
    assert block.meta["header"]["b"] == "&b [*a,*a,*a,*a,*a,*a,*a]"
    assert block.meta["header"]["x"] == "!!python/object:os.system ls"


def test_deep_nesting_and_huge_header_are_broken(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    _task(repo, "T-501", "---\nstatus: blocked\nx: " + "[" * 5000 + "]" * 5000 + "\n---\n")
    _task(repo, "T-502", "---\nstatus: blocked\nx: '" + "y" * 300_000 + "'\n---\n")
    start = time.monotonic()
    blocks = _blocks(repo)
    assert time.monotonic() - start < 2
    assert "nests more than 32 levels deep" in blocks["proj/T-501"].problems[0]
    assert "larger than 256 KiB" in blocks["proj/T-502"].problems[0]


def test_hostile_text_is_kept_literally(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    text = (
        "---\nstatus: blocked\nblock_category: transient\n---\n\n# T-503 - [b]bold[/x] \x1b[31m\n\n"
        "## Comments\n- 2026-11-09: Blocked: [@click=app.quit]x[/]. Needed: [red]y\n"
    )
    block = _parse(repo, _task(repo, "T-503", text))
    assert block is not None
    assert block.title == "[b]bold[/x] \x1b[31m"
    assert block.question == "[red]y"


def test_duplicate_status_lines_refuse_the_write(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    text = "---\nstatus: in-progress\nstatus: blocked\n---\n\n## Comments\n- 2026-11-09: Blocked.\n"
    path = _task(repo, "T-504", text)
    block = _parse(repo, path)
    assert block is not None and block.state == "blocked"  # YAML: the last key wins
    with pytest.raises(HitlError, match="2 status lines"):
        AgenticloopSource().plan(block, Answer(texts=("go",), when=WHEN))
    # Keep blocked only adds a note, which is still safe.
    assert _answer(block, "B", note="n").decode() == text.replace(
        "## Comments\n", "## Comments\n- 2026-11-29: Note from ana (still blocked): n\n"
    )


def test_status_value_on_continuation_line_is_not_a_status(tmp_path: Path) -> None:
    """`status:` opens a nested mapping for agenticloop, and `  blocked` is an invalid line."""
    repo = _repo(tmp_path)
    text = "---\nstatus:\n  blocked\nblock_category: transient\nx: 1\n---\n\n## Comments\n"
    path = _task(repo, "T-505", text)
    block = _parse(repo, path)
    assert block is not None and not block.answerable
    assert block.problems == (
        "the task header does not parse: line 3: '  blocked' is neither "
        "`key: value`, a `- item` nor a # comment",
    )
    with pytest.raises(HitlError, match="does not parse"):
        AgenticloopSource().plan(block, Answer(texts=("go",), when=WHEN))
    assert path.read_text() == text


# -- the layout: project.md, templates, refusals --------------------------------------------


def test_custom_template_folder(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "---\ntask_file_template: work/items/{taskId}.md\n---\n")
    _task(repo, "T-600", "---\nstatus: blocked\nblock_category: transient\n---\n")
    _task(repo, "T-601", "---\nstatus: blocked\n---\n", folder=Path("work/items"))
    assert sorted(_blocks(repo)) == ["proj/T-601"]


def test_github_backend_lists_nothing(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "---\ntask_backend: github\n---\n")
    _task(repo, "T-602", "---\nstatus: blocked\n---\n")
    assert _blocks(repo) == {}
    assert AgenticloopSource().watch_dirs(repo) == [repo / ".agenticloop"]


@pytest.mark.parametrize(
    ("template", "why"),
    [
        ("../x/{taskId}.md", "points outside the repository"),
        ("/etc/{taskId}.md", "absolute path"),
        ("a/../../{taskId}.md", "points outside the repository"),
        ("..\\x\\{taskId}.md", "points outside the repository"),
        ("{taskId}/task.md", "does not end in a {taskId} file name"),
    ],
)
def test_template_outside_repo_is_a_warning(tmp_path: Path, template: str, why: str) -> None:
    repo = _repo(tmp_path, f"---\ntask_file_template: '{template}'\n---\n")
    outside = tmp_path / "x"
    outside.mkdir()
    (outside / "T-700.md").write_text("---\nstatus: blocked\n---\n")
    _task(repo, "T-701", "---\nstatus: blocked\n---\n")
    inbox = _inbox(repo)
    assert inbox.blocks == {}
    [warning] = inbox.warnings
    assert warning.startswith("proj: the task folder is refused: task_file_template ")
    assert why in warning
    assert warning.endswith("; no task folder is read")


def test_symlinked_task_folder_leaving_repo_is_refused(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / TASKS).rmdir()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "T-702.md").write_text("---\nstatus: blocked\n---\n")
    (repo / TASKS).symlink_to(outside)
    inbox = _inbox(repo)
    assert inbox.blocks == {}
    assert inbox.warnings == [
        "proj: the task folder is refused: .agenticloop/tasks leads outside the repository "
        "(a symlink); no task folder is read"
    ]
    assert AgenticloopSource().watch_dirs(repo) == [repo / ".agenticloop"]


def test_symlinked_task_file_leaving_repo_is_flagged_and_not_written(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    outside = tmp_path / "secret.md"
    text = "---\nstatus: blocked\nblock_category: transient\n---\n\n## Comments\n"
    outside.write_text(text)
    (repo / TASKS / "T-703.md").symlink_to(outside)
    block = _blocks(repo)["proj/T-703"]
    assert "symlink leading outside" in " ".join(block.problems)
    with pytest.raises(HitlError, match="outside"):
        AgenticloopSource().plan(block, Answer(texts=("x",), when=WHEN))
    assert outside.read_text() == text


def test_unreadable_project_md_is_a_warning_naming_the_folder_read(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "---\ntask_backend: [files\n---\n")
    _task(repo, "T-704", "---\nstatus: blocked\n---\n")
    inbox = _inbox(repo)
    assert [b.id for b in inbox.blocks.values()] == ["proj/T-704"]
    assert inbox.warnings == [
        "proj: .agenticloop/project.md could not be read (line 2: the value in "
        "'task_backend: [files' opens a quote or [ that it does not close); "
        ".agenticloop/project.md names an unknown task_backend '[files'; "
        "looking for tasks in .agenticloop/tasks/ (where agenticloop itself looks)"
    ]


def test_watch_claims_and_layout(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    source = AgenticloopSource()
    folder = repo / TASKS
    assert source.watch_dirs(repo) == [repo / ".agenticloop", folder]
    assert source.claims(repo, folder / "T-1.md")
    assert source.claims(repo, folder)
    assert not source.claims(repo, folder / "notes.txt")
    assert not source.claims(repo, repo / "T-1.md")
    assert source.layout_changed(repo, repo / ".agenticloop" / "project.md")
    assert source.layout_changed(repo, repo / ".agenticloop")
    assert source.layout_changed(repo, folder)
    assert not source.layout_changed(repo, folder / "T-1.md")
    assert not source.layout_changed(repo, repo / "README.md")
    assert not source.layout_changed(repo, repo)


# -- the inbox: a big folder, and incremental updates -----------------------------------------


def test_two_thousand_tasks_three_blocked(tmp_path: Path, monkeypatch) -> None:
    repo = _repo(tmp_path)
    for i in range(2000):
        status = "in-progress" if i % 3 else "closed"
        _task(
            repo,
            f"T-{i:04d}",
            f"---\ntask_id: T-{i:04d}\nstatus: {status}\nattempt: 3\n---\n\n# T-{i:04d} - t\n",
        )
    for i in (5, 700, 1999):
        _task(
            repo,
            f"T-{i:04d}",
            f"---\ntask_id: T-{i:04d}\nstatus: blocked\nblock_category: transient\n---\n\n"
            "## Comments\n- 2026-11-10: Blocked (transient): down. Needed: wait.\n",
        )
    loads: list[str] = []
    real_load = agenticloop.load_header
    monkeypatch.setattr(
        agenticloop, "load_header", lambda text: loads.append(text) or real_load(text)
    )
    # The full rules (these plain headers are read by `plain_header`, with no load_header at
    # all: test_agenticloop_fast.py holds the two to the same blocks).
    monkeypatch.setattr(agenticloop, "FAST_HEADER", False)
    start = time.monotonic()
    inbox = _inbox(repo)
    elapsed = time.monotonic() - start
    assert sorted(b.id for b in inbox.blocks.values()) == [
        "proj/T-0005",
        "proj/T-0700",
        "proj/T-1999",
    ]
    assert len(loads) == 3  # no YAML for the 1,997 tasks whose status line says they run
    assert elapsed < 5

    source = next(s for s in inbox.sources if s.name == "agenticloop")
    parsed: list[Path] = []
    real_parse = source.parse
    monkeypatch.setattr(
        source, "parse", lambda r, p, label: parsed.append(p) or real_parse(r, p, label)
    )
    path = repo / TASKS / "T-0700.md"
    path.write_text(path.read_text().replace("status: blocked", "status: agent-ready"))
    delta = inbox.handle([path])
    assert parsed == [path]
    assert delta.removed == [("agenticloop", path)] and not delta.added
    assert len(inbox.blocks) == 2

    other = repo / TASKS / "T-0001.md"
    other.write_text(
        "---\nstatus: needs_context\n---\n\n"
        "## Comments\n- 2026-11-12: needs_context. Needed: which db?\n"
    )
    delta = inbox.handle([other])
    assert parsed == [path, other]
    assert [b.id for b in delta.added] == ["proj/T-0001"]
    assert delta.added[0].state == "needs_context"


def test_inbox_notices_task_folder_and_project_changes(tmp_path: Path) -> None:
    repo = tmp_path / "proj"
    repo.mkdir()
    (repo / ".git").mkdir()
    inbox = _inbox(repo)
    assert inbox.blocks == {}
    (repo / ".agenticloop").mkdir()
    delta = inbox.handle([repo / ".agenticloop"])
    assert delta.rewatch
    assert repo / ".agenticloop" in inbox.watch_dirs()
    (repo / TASKS).mkdir()
    _task(repo, "T-800", "---\nstatus: blocked\nblock_category: transient\n---\n")
    delta = inbox.handle([repo / TASKS])
    assert [b.id for b in delta.added] == ["proj/T-800"]
    assert repo / TASKS in inbox.watch_dirs()

    (repo / ".agenticloop" / "project.md").write_text("---\ntask_backend: github\n---\n")
    delta = inbox.handle([repo / ".agenticloop" / "project.md"])
    assert delta.removed == [("agenticloop", repo / TASKS / "T-800.md")]
    assert inbox.blocks == {}


def test_hitl_own_notes_never_become_the_question(billing: Path) -> None:
    block = _blocks(billing)["billing/T-009"]
    _answer(block, "B", note="Blocked still; asking ops.")
    again = _blocks(billing)["billing/T-009"]
    assert again.question == "an operator provides SFTP_PASSWORD in the loop's environment."
    assert again.attempted == ("key-based login, refused by the server.",)


def test_reblocked_task_shows_the_new_block_note(billing: Path) -> None:
    block = _blocks(billing)["billing/T-009"]
    _answer(block, None, texts=("Password set.",))
    path = block.path
    text = path.read_text().replace(
        "status: agent-ready\n", "status: blocked\nblock_category: ci-failure\n"
    )
    text = text.replace(
        "## Comments\n",
        "## Comments\n- 2026-11-30: Blocked (ci-failure): sftp job red. Needed: fix the runner.\n",
    )
    path.write_text(text)
    again = _blocks(billing)["billing/T-009"]
    assert (again.category, again.question) == ("ci-failure", "fix the runner.")


def test_edited_decision_replaces_the_note_and_is_checked(billing: Path) -> None:
    block = _blocks(billing)["billing/T-007"]
    source = AgenticloopSource()
    answer = Answer(choice=block.find_choice("B"), operator="ana", when=WHEN)
    assert source.decision_text(block, answer) == "Approved by ana: the change request is approved."
    edited = Answer(
        choice=answer.choice, operator="ana", when=WHEN, decision_override="Approved,\n  go on."
    )
    plan = source.plan(block, edited)
    assert b"\n- 2026-11-29: Approved, go on.\n- 2026-11-27" in plan.changes[0].new
    assert b"approved: true\n" in plan.changes[0].new
    with pytest.raises(UsageError, match="placeholder 'TBD'"):
        source.plan(block, Answer(choice=answer.choice, when=WHEN, decision_override="TBD"))


def test_domain_import_does_not_load_textual() -> None:
    import subprocess
    import sys

    code = (
        "import sys, hitl_tui.sources.agenticloop.source, hitl_tui.sources; "
        "sys.exit('textual' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


def test_every_question_with_a_default_offers_accepting_them_all(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    text = (
        "---\nstatus: needs_context\nblock_category: contract  # left over\n---\n\n"
        "## Comments\n- 2026-11-08: needs_context. Questions:\n"
        "  1. Port? Recommended default: 8080. Who: ops.\n"
        "  2. Host? Recommended: localhost. Who: ops.\n"
    )
    block = _parse(repo, _task(repo, "T-072", text))
    assert block is not None and block.defaults == ("8080", "localhost")
    first = block.choices[0]
    assert first.option == "Accept the recommended defaults: 1. 8080; 2. localhost"
    assert first.consequence == (
        "a dated note accepting it under ## Comments; status: needs_context → agent-ready; "
        "the block_category line is deleted"
    )
    plan = AgenticloopSource().plan(block, Answer(choice=first, operator="ana", when=WHEN))
    assert plan.hint == "Restart the loop on the task: /agenticloop T-072"
    apply_plan(plan)
    assert block.path.read_text() == (
        "---\nstatus: agent-ready\n---\n\n## Comments\n"
        "- 2026-11-29: Unblocked by ana: accepted the recommended defaults: 1. 8080; "
        "2. localhost.\n" + text.split("## Comments\n")[1]
    )


def test_keep_blocked_hint(billing: Path) -> None:
    block = _blocks(billing)["billing/T-009"]
    answer = Answer(choice=block.find_choice("B"), note="later", when=WHEN)
    assert (
        AgenticloopSource().plan(block, answer).hint
        == "T-009 stays blocked: only the note was added"
    )


def test_lines_padded_with_spaces_do_not_stall_the_parser(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    pad = " " * 100_000
    text = (
        f"---\nstatus: blocked{pad}\n# why{pad}\nblock_category: transient\n---\n\n"
        f"# x{pad}y\n\n## Task{pad}#{pad}z\n\n## Comments\n"
        f"- 2026-11-09: Note from {'(still a' * 20_000} Blocked. Needed: {pad}room.\n"
    )
    path = _task(repo, "T-506", text)
    start = time.monotonic()
    block = _parse(repo, path)
    assert block is not None and block.title == f"x{pad}y"
    assert block.question == "room."
    new = _answer(block, None, texts=("ok",))
    assert time.monotonic() - start < 2
    assert new.decode() == text.replace(
        f"status: blocked{pad}\n# why{pad}\nblock_category: transient\n",
        f"status: agent-ready{pad}\n# why{pad}\n",
    ).replace("## Comments\n", "## Comments\n- 2026-11-29: Answer from ana: ok\n")


def test_closing_hashes_of_a_heading_are_not_its_text() -> None:
    assert agenticloop.heading("## Comments ##") == (2, "Comments")
    assert agenticloop.heading("# C# tips") == (1, "C# tips")
    assert agenticloop.heading("#hashtag") is None
    assert agenticloop.heading("    # code") is None
    assert agenticloop.heading("###") == (3, "")
