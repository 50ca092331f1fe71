"""Answering a BLOCKED.md: LoopkitSource.plan + apply.apply_plan, asserted byte for byte.

FORMATS.md §1.4: the decision goes into PROMPT.md's `## Decisions`, a resume note under
IMPLEMENTATION_PLAN.md's `## Notes for the next session` (line 1 untouched), BLOCKED.md is
removed last and only if unchanged. Every other byte (line endings, BOM, final newline, mode)
stays as it was, and nothing is ever written through a symlink that leaves the repository.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import stat
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from hitl_tui.answers.apply import apply_plan
from hitl_tui.fsio import TEMP_PREFIX
from hitl_tui.model import (
    Answer,
    Block,
    HitlError,
    Plan,
    StaleError,
    UnsafePathError,
    UsageError,
)
from hitl_tui.sources.loopkit.source import LoopkitSource

WHEN = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
SOURCE = LoopkitSource()

BLOCKED = (
    "# Blocked\n\n## Question:\nRedis or memory?\n\n## Context:\nThe cache.\n\n"
    "## Choices:\n- A) Redis — one more service\n- B) Memory — lost on restart\n"
)
#: The decision and resume note for `--choice B` on BLOCKED, as written on 2026-11-29 by Ada.
DECISION = "- 2026-11-29: Redis or memory? → B) Memory — lost on restart"
NOTE = (
    "- 2026-11-29: Block answered by Ada via hitl: Redis or memory? → B) Memory — lost on "
    "restart. BLOCKED.md removed; the loop can resume."
)


def make_repo(
    tmp_path: Path,
    prompt: bytes | None = b"# Prompt\n\n## Goal\nShip.\n",
    plan: bytes | None = b"STATUS: in-progress\n\n## Steps\n- [ ] 1. cache\n",
    blocked: bytes = BLOCKED.encode(),
    name: str = "repo",
) -> Path:
    repo = tmp_path / name
    repo.mkdir()
    (repo / ".git").mkdir()
    (repo / "BLOCKED.md").write_bytes(blocked)
    if prompt is not None:
        (repo / "PROMPT.md").write_bytes(prompt)
    if plan is not None:
        (repo / "IMPLEMENTATION_PLAN.md").write_bytes(plan)
    return repo


def read_block(repo: Path) -> Block:
    block = SOURCE.parse(repo, repo / "BLOCKED.md", repo.name)
    assert block is not None
    return block


def make_plan(repo: Path, key: str | None = "B", **kwargs) -> Plan:
    block = read_block(repo)
    kwargs.setdefault("operator", "Ada")
    kwargs.setdefault("when", WHEN)
    choice = block.find_choice(key) if key is not None else None
    return SOURCE.plan(block, Answer(choice=choice, **kwargs))


def answer(repo: Path, key: str | None = "B", **kwargs) -> list[str]:
    """What `apply_plan` did, one line per thing done."""
    return list(apply_plan(make_plan(repo, key, **kwargs)).lines)


def snapshot(repo: Path) -> dict[str, bytes | str]:
    """Every entry under `repo`: file bytes, or where a symlink points."""
    out: dict[str, bytes | str] = {}
    for path in sorted(repo.rglob("*")):
        rel = str(path.relative_to(repo))
        if path.is_symlink():
            out[rel] = "-> " + os.readlink(path)
        elif path.is_file():
            out[rel] = path.read_bytes()
    return out


def no_temp_files(*folders: Path) -> bool:
    return not any(p.name.startswith(TEMP_PREFIX) for f in folders for p in f.rglob("*"))


# -- the canonical fixture --------------------------------------------------------------------


def test_canonical_fixture_golden_bytes(shop: Path, fixtures_dir: Path):
    prompt_before = (shop / "PROMPT.md").read_bytes()
    plan_before = (shop / "IMPLEMENTATION_PLAN.md").read_bytes()
    assert prompt_before == (fixtures_dir / "loopkit-shop" / "PROMPT.md").read_bytes()

    done = answer(shop, "B")

    assert done == ["updated PROMPT.md", "updated IMPLEMENTATION_PLAN.md", "removed BLOCKED.md"]
    assert (shop / "PROMPT.md").read_bytes() == prompt_before + (
        "\n## Decisions\n"
        "- 2026-11-29: Should deleting a workspace also delete its archived invoices, or keep "
        "them for 7 years? → B) Keep invoices, detach them from the workspace — needs a "
        "migration adding owner_id.\n"
    ).encode()
    assert (shop / "IMPLEMENTATION_PLAN.md").read_bytes() == plan_before + (
        "- 2026-11-29: Block answered by Ada via hitl: Should deleting a workspace also delete "
        "its archived invoices, or keep them for 7 years? → B) Keep invoices, detach them from "
        "the workspace — needs a migration adding owner_id. BLOCKED.md removed; the loop can "
        "resume.\n"
    ).encode()
    assert not (shop / "BLOCKED.md").exists()
    assert no_temp_files(shop)


def test_plan_diff_shows_every_change(shop: Path):
    plan = make_plan(shop, "B")
    assert [(c.path.name, c.action) for c in plan.changes] == [
        ("PROMPT.md", "update"),
        ("IMPLEMENTATION_PLAN.md", "update"),
        ("BLOCKED.md", "remove"),
    ]
    diff = plan.diff()
    assert diff.startswith("--- a/PROMPT.md\n+++ b/PROMPT.md\n")
    assert "+## Decisions\n" in diff
    assert "--- a/BLOCKED.md\n+++ /dev/null\n" in diff
    removed = [line[1:] for line in diff.splitlines() if line[:1] == "-" and line[:3] != "---"]
    assert removed == (shop / "BLOCKED.md").read_text().splitlines()  # and nothing else


def test_the_plan_writes_nothing(shop: Path):
    before = snapshot(shop)
    make_plan(shop, "B").diff()
    assert snapshot(shop) == before


def test_utc_date_whatever_the_answer_timezone(tmp_path: Path):
    repo = make_repo(tmp_path, prompt=None)
    late = datetime(2026, 11, 29, 23, 30, tzinfo=timezone(timedelta(hours=-5)))
    answer(repo, "B", when=late)
    assert (repo / "PROMPT.md").read_bytes().splitlines()[1].startswith(b"- 2026-11-30: ")


# -- where the entries go ---------------------------------------------------------------------


def test_decisions_section_in_the_middle(tmp_path: Path):
    prompt = (
        b"# Prompt\n\n## Goal\nShip.\n\n## Decisions\n- 2026-11-01: Use Postgres.\n\n"
        b"## Never touch\n- billing/\n"
    )
    repo = make_repo(tmp_path, prompt=prompt)
    answer(repo, "B")
    assert (repo / "PROMPT.md").read_bytes() == (
        b"# Prompt\n\n## Goal\nShip.\n\n## Decisions\n- 2026-11-01: Use Postgres.\n"
        + DECISION.encode()
        + b"\n\n## Never touch\n- billing/\n"
    )


def test_decisions_heading_any_level_and_case(tmp_path: Path):
    prompt = b"# Prompt\n### decisions:\n- old\n# Next\n"
    repo = make_repo(tmp_path, prompt=prompt)
    answer(repo, "B")
    assert (repo / "PROMPT.md").read_bytes() == (
        b"# Prompt\n### decisions:\n- old\n" + DECISION.encode() + b"\n# Next\n"
    )


def test_decisions_inside_a_code_fence_is_not_the_section(tmp_path: Path):
    prompt = b"# Prompt\n```\n## Decisions\n```\n"
    repo = make_repo(tmp_path, prompt=prompt)
    answer(repo, "B")
    assert (repo / "PROMPT.md").read_bytes() == (
        prompt + b"\n## Decisions\n" + DECISION.encode() + b"\n"
    )


def test_notes_section_in_the_middle_of_the_plan(tmp_path: Path):
    plan = b"STATUS: in-progress\n## Notes for the next session\n- old\n\n\n## Steps\n- [ ] 1\n"
    repo = make_repo(tmp_path, plan=plan)
    answer(repo, "B")
    assert (repo / "IMPLEMENTATION_PLAN.md").read_bytes() == (
        b"STATUS: in-progress\n## Notes for the next session\n- old\n"
        + NOTE.encode()
        + b"\n\n\n## Steps\n- [ ] 1\n"
    )


def test_sections_created_when_missing(tmp_path: Path):
    repo = make_repo(tmp_path)
    answer(repo, "B")
    assert (repo / "PROMPT.md").read_bytes() == (
        b"# Prompt\n\n## Goal\nShip.\n\n## Decisions\n" + DECISION.encode() + b"\n"
    )
    assert (repo / "IMPLEMENTATION_PLAN.md").read_bytes() == (
        b"STATUS: in-progress\n\n## Steps\n- [ ] 1. cache\n\n## Notes for the next session\n"
        + NOTE.encode()
        + b"\n"
    )


def test_missing_prompt_is_created(tmp_path: Path):
    repo = make_repo(tmp_path, prompt=None)
    done = answer(repo, "B")
    assert done[0] == "created PROMPT.md"
    assert (repo / "PROMPT.md").read_bytes() == b"## Decisions\n" + DECISION.encode() + b"\n"


def test_missing_plan_is_created(tmp_path: Path):
    repo = make_repo(tmp_path, plan=None)
    done = answer(repo, "B")
    assert done[1] == "created IMPLEMENTATION_PLAN.md"
    assert (repo / "IMPLEMENTATION_PLAN.md").read_bytes() == (
        b"## Notes for the next session\n" + NOTE.encode() + b"\n"
    )


def test_new_files_get_the_umask_mode(tmp_path: Path):
    repo = make_repo(tmp_path, prompt=None, plan=None)
    old = os.umask(0o027)
    try:
        answer(repo, "B")
    finally:
        os.umask(old)
    assert stat.S_IMODE((repo / "PROMPT.md").stat().st_mode) == 0o640
    assert stat.S_IMODE((repo / "IMPLEMENTATION_PLAN.md").stat().st_mode) == 0o640


# -- bytes kept ---------------------------------------------------------------------------------


def test_crlf_files_get_crlf_lines_and_keep_every_old_byte(tmp_path: Path):
    prompt = b"# Prompt\r\n\r\n## Decisions\r\n- old\r\n\r\n## Goal\r\nShip.\r\n"
    plan = b"STATUS: in-progress\r\n\r\n## Steps\r\n- [ ] 1\r\n"
    repo = make_repo(
        tmp_path, prompt=prompt, plan=plan, blocked=BLOCKED.replace("\n", "\r\n").encode()
    )
    answer(repo, "B")
    assert (repo / "PROMPT.md").read_bytes() == (
        b"# Prompt\r\n\r\n## Decisions\r\n- old\r\n"
        + DECISION.encode()
        + b"\r\n\r\n## Goal\r\nShip.\r\n"
    )
    assert (repo / "IMPLEMENTATION_PLAN.md").read_bytes() == (
        plan + b"\r\n## Notes for the next session\r\n" + NOTE.encode() + b"\r\n"
    )


def test_bom_is_kept(tmp_path: Path):
    prompt = b"\xef\xbb\xbf# Prompt\n"
    plan = b"\xef\xbb\xbfSTATUS: in-progress\n"
    repo = make_repo(tmp_path, prompt=prompt, plan=plan, blocked=b"\xef\xbb\xbf" + BLOCKED.encode())
    answer(repo, "B")
    assert (repo / "PROMPT.md").read_bytes() == (
        prompt + b"\n## Decisions\n" + DECISION.encode() + b"\n"
    )
    assert (repo / "IMPLEMENTATION_PLAN.md").read_bytes() == (
        plan + b"\n## Notes for the next session\n" + NOTE.encode() + b"\n"
    )


def test_no_trailing_newline_at_eof(tmp_path: Path):
    prompt = b"# Prompt\n\n## Decisions\n- old"
    plan = b"STATUS: in-progress\n\n## Notes for the next session\n- old"
    repo = make_repo(tmp_path, prompt=prompt, plan=plan)
    answer(repo, "B")
    assert (repo / "PROMPT.md").read_bytes() == prompt + b"\n" + DECISION.encode() + b"\n"
    assert (repo / "IMPLEMENTATION_PLAN.md").read_bytes() == plan + b"\n" + NOTE.encode() + b"\n"


def test_undecodable_bytes_survive(tmp_path: Path):
    prompt = b"# Prompt \xff\xfe latin-1: caf\xe9\n"
    repo = make_repo(tmp_path, prompt=prompt)
    answer(repo, "B")
    assert (repo / "PROMPT.md").read_bytes() == (
        prompt + b"\n## Decisions\n" + DECISION.encode() + b"\n"
    )


@pytest.mark.parametrize(("prompt_mode", "plan_mode"), [(0o600, 0o755), (0o644, 0o600)])
def test_file_mode_is_preserved(tmp_path: Path, prompt_mode: int, plan_mode: int):
    repo = make_repo(tmp_path)
    os.chmod(repo / "PROMPT.md", prompt_mode)
    os.chmod(repo / "IMPLEMENTATION_PLAN.md", plan_mode)
    answer(repo, "B")
    assert stat.S_IMODE((repo / "PROMPT.md").stat().st_mode) == prompt_mode
    assert stat.S_IMODE((repo / "IMPLEMENTATION_PLAN.md").stat().st_mode) == plan_mode


@pytest.mark.parametrize(
    ("plan", "expected"),
    [
        (b"STATUS: done", b"STATUS: done\n\n## Notes for the next session\n%s\n"),
        (b"STATUS: done\n", b"STATUS: done\n\n## Notes for the next session\n%s\n"),
        (b"STATUS: done\r\n", b"STATUS: done\r\n\r\n## Notes for the next session\r\n%s\r\n"),
        (
            b"STATUS: in-progress\n\n# Plan\n",
            b"STATUS: in-progress\n\n# Plan\n\n## Notes for the next session\n%s\n",
        ),
    ],
)
def test_status_line_one_untouched(tmp_path: Path, plan: bytes, expected: bytes):
    repo = make_repo(tmp_path, plan=plan)
    answer(repo, "B")
    new = (repo / "IMPLEMENTATION_PLAN.md").read_bytes()
    # A lone unterminated line gains only its line ending, so the next lines can follow it.
    assert new.splitlines()[0] == plan.splitlines()[0]
    assert new == expected % NOTE.encode()


def test_status_line_kept_when_notes_heading_is_line_two(tmp_path: Path):
    plan = b"STATUS: done\n## Notes for the next session\n"
    repo = make_repo(tmp_path, plan=plan)
    answer(repo, "B")
    assert (repo / "IMPLEMENTATION_PLAN.md").read_bytes() == plan + NOTE.encode() + b"\n"


# -- what the entries say ---------------------------------------------------------------------


def test_note_in_both_entries(tmp_path: Path):
    repo = make_repo(tmp_path, prompt=None, plan=None)
    answer(repo, "A", note="legal  asked\nfor this")
    decision = (
        "Redis or memory? → A) Redis — one more service (operator note: legal asked for this)"
    )
    assert (repo / "PROMPT.md").read_bytes() == f"## Decisions\n- 2026-11-29: {decision}\n".encode()
    assert (repo / "IMPLEMENTATION_PLAN.md").read_bytes() == (
        "## Notes for the next session\n"
        f"- 2026-11-29: Block answered by Ada via hitl: {decision}. "
        "BLOCKED.md removed; the loop can resume.\n"
    ).encode()


def test_own_words_answer(tmp_path: Path):
    repo = make_repo(tmp_path, prompt=None, plan=None)
    answer(repo, None, texts=("Neither: use the  existing\nMemcached.",))
    assert (repo / "PROMPT.md").read_bytes() == (
        "## Decisions\n- 2026-11-29: Redis or memory? → Neither: use the existing Memcached.\n"
    ).encode()
    assert (repo / "IMPLEMENTATION_PLAN.md").read_bytes() == (
        "## Notes for the next session\n- 2026-11-29: Block answered by Ada via hitl: Redis or "
        "memory? → Neither: use the existing Memcached. BLOCKED.md removed; the loop can "
        "resume.\n"
    ).encode()


def test_decision_override_multi_line(tmp_path: Path):
    repo = make_repo(tmp_path, plan=None)
    answer(repo, "B", decision_override="  Cache in memory.\n\nRevisit when we scale out.  \n")
    assert (repo / "PROMPT.md").read_bytes() == (
        b"# Prompt\n\n## Goal\nShip.\n\n## Decisions\n"
        b"- 2026-11-29: Cache in memory.\n\n  Revisit when we scale out.\n"
    )
    assert (repo / "IMPLEMENTATION_PLAN.md").read_bytes() == (
        b"## Notes for the next session\n- 2026-11-29: Block answered by Ada via hitl: Cache in "
        b"memory. Revisit when we scale out. BLOCKED.md removed; the loop can resume.\n"
    )


def test_second_answer_appends_below_the_first(tmp_path: Path):
    repo = make_repo(tmp_path)
    answer(repo, "B")
    (repo / "BLOCKED.md").write_text(BLOCKED)
    answer(repo, "A")
    lines = (repo / "PROMPT.md").read_bytes().splitlines()
    assert lines[-2:] == [
        DECISION.encode(),
        "- 2026-11-29: Redis or memory? → A) Redis — one more service".encode(),
    ]


@pytest.mark.parametrize(
    "kwargs",
    [{"texts": ()}, {"texts": ("  \n ",)}, {"decision_override": " \n "}],
    ids=["nothing", "blank text", "blank override"],
)
def test_empty_answers_are_refused(tmp_path: Path, kwargs: dict):
    repo = make_repo(tmp_path)
    before = snapshot(repo)
    with pytest.raises(UsageError):
        make_plan(repo, None, **kwargs)
    assert snapshot(repo) == before


def test_unknown_choice_is_a_usage_error(tmp_path: Path):
    block = read_block(make_repo(tmp_path))
    with pytest.raises(UsageError, match=r"no choice 'Z' in repo \(choices: A, B\)"):
        block.find_choice("Z")
    assert [block.find_choice(k).key for k in ("b", "2", "B)", "(a)")] == ["B", "B", "B", "A"]
    with pytest.raises(UsageError):
        block.find_choice("3")


# -- the block is removed last, and only if unchanged -----------------------------------------


def test_blocked_md_is_removed_last(tmp_path: Path):
    repo = make_repo(tmp_path)
    seen: list[tuple[str, bool]] = []
    apply_plan(
        make_plan(repo), hook=lambda step: seen.append((step, (repo / "BLOCKED.md").exists()))
    )
    assert seen == [
        ("checked", True),
        ("update:PROMPT.md", True),
        ("update:IMPLEMENTATION_PLAN.md", True),
        ("remove:BLOCKED.md", False),
    ]


def test_blocked_changed_between_plan_and_apply_writes_nothing(tmp_path: Path):
    repo = make_repo(tmp_path)
    plan = make_plan(repo)
    (repo / "BLOCKED.md").write_text(BLOCKED.replace("Redis or memory?", "Redis or disk?"))
    before = snapshot(repo)
    with pytest.raises(StaleError, match="the block changed since you read it"):
        apply_plan(plan)
    assert snapshot(repo) == before
    assert no_temp_files(repo)


def test_blocked_removed_between_plan_and_apply_writes_nothing(tmp_path: Path):
    repo = make_repo(tmp_path)
    plan = make_plan(repo)
    (repo / "BLOCKED.md").unlink()
    before = snapshot(repo)
    with pytest.raises(StaleError, match="the block is gone"):
        apply_plan(plan)
    assert snapshot(repo) == before


def test_blocked_changed_between_read_and_plan(tmp_path: Path):
    repo = make_repo(tmp_path)
    block = read_block(repo)
    (repo / "BLOCKED.md").write_text(BLOCKED + "- C) Disk\n")
    with pytest.raises(StaleError):
        SOURCE.plan(block, Answer(choice=block.find_choice("B"), when=WHEN))


def test_blocked_rewritten_while_applying_is_not_removed(tmp_path: Path):
    repo = make_repo(tmp_path)
    rewritten = BLOCKED.replace("Redis or memory?", "New question?")

    def agent_rewrites(step: str) -> None:
        if step == "update:IMPLEMENTATION_PLAN.md":
            (repo / "BLOCKED.md").write_text(rewritten)

    with pytest.raises(StaleError):
        apply_plan(make_plan(repo), hook=agent_rewrites)
    assert (repo / "BLOCKED.md").read_text() == rewritten


@pytest.mark.parametrize("name", ["PROMPT.md", "IMPLEMENTATION_PLAN.md"])
def test_prompt_or_plan_changed_between_plan_and_apply_writes_nothing(tmp_path: Path, name: str):
    repo = make_repo(tmp_path)
    plan = make_plan(repo)
    (repo / name).write_bytes((repo / name).read_bytes() + b"- edited by the agent\n")
    before = snapshot(repo)
    with pytest.raises(StaleError, match=f"{name} changed since the preview"):
        apply_plan(plan)
    assert snapshot(repo) == before


def test_prompt_created_between_plan_and_apply_writes_nothing(tmp_path: Path):
    repo = make_repo(tmp_path, prompt=None)
    plan = make_plan(repo)
    (repo / "PROMPT.md").write_bytes(b"# new\n")
    before = snapshot(repo)
    with pytest.raises(StaleError):
        apply_plan(plan)
    assert snapshot(repo) == before


# -- symlinks -----------------------------------------------------------------------------------


def test_prompt_symlink_outside_the_repo_is_refused_at_plan(tmp_path: Path):
    repo = make_repo(tmp_path, prompt=None)
    outside = tmp_path / "outside.md"
    outside.write_bytes(b"# not yours\n")
    (repo / "PROMPT.md").symlink_to(outside)
    before = snapshot(repo)
    with pytest.raises(UnsafePathError, match=r"refusing to write PROMPT\.md"):
        make_plan(repo)
    assert snapshot(repo) == before
    assert outside.read_bytes() == b"# not yours\n"


def test_prompt_symlink_outside_appearing_before_apply_writes_nothing(tmp_path: Path):
    repo = make_repo(tmp_path, prompt=None)
    plan = make_plan(repo)
    outside = tmp_path / "outside.md"
    (repo / "PROMPT.md").symlink_to(outside)  # dangling: the write would create it
    before = snapshot(repo)
    with pytest.raises(UnsafePathError):
        apply_plan(plan)
    assert snapshot(repo) == before
    assert not outside.exists()
    assert no_temp_files(repo, tmp_path)


def test_symlink_chain_leading_outside_is_refused(tmp_path: Path):
    repo = make_repo(tmp_path, plan=None)
    (tmp_path / "elsewhere").mkdir()
    os.rename(repo / "PROMPT.md", tmp_path / "elsewhere" / "PROMPT.md")
    # PROMPT.md points inside the repo's parent, through a folder link that leads elsewhere.
    link = tmp_path / "linked"
    link.symlink_to(tmp_path / "elsewhere")
    (repo / "PROMPT.md").symlink_to(Path("..") / "linked" / "PROMPT.md")
    with pytest.raises(UnsafePathError):
        make_plan(repo)
    assert not (repo / "IMPLEMENTATION_PLAN.md").exists()


def test_symlink_inside_the_repo_is_written_through(tmp_path: Path):
    repo = make_repo(tmp_path, prompt=None)
    (repo / "docs").mkdir()
    target = repo / "docs" / "PROMPT.md"
    target.write_bytes(b"# Prompt\n")
    os.chmod(target, 0o600)
    (repo / "PROMPT.md").symlink_to(Path("docs") / "PROMPT.md")
    answer(repo, "B")
    assert (repo / "PROMPT.md").is_symlink()
    assert os.readlink(repo / "PROMPT.md") == "docs/PROMPT.md"
    assert target.read_bytes() == b"# Prompt\n\n## Decisions\n" + DECISION.encode() + b"\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert no_temp_files(repo)


def test_target_changed_through_the_symlink_is_stale(tmp_path: Path):
    repo = make_repo(tmp_path, prompt=None)
    (repo / "docs").mkdir()
    (repo / "docs" / "PROMPT.md").write_bytes(b"# Prompt\n")
    (repo / "PROMPT.md").symlink_to(Path("docs") / "PROMPT.md")
    plan = make_plan(repo)
    (repo / "docs" / "PROMPT.md").write_bytes(b"# Prompt, edited\n")
    before = snapshot(repo)
    with pytest.raises(StaleError):
        apply_plan(plan)
    assert snapshot(repo) == before


def test_no_temp_files_after_success_or_failure(tmp_path: Path):
    repo = make_repo(tmp_path)
    answer(repo, "B")
    (repo / "BLOCKED.md").write_text(BLOCKED)
    plan = make_plan(repo)
    (repo / "BLOCKED.md").write_text("changed")
    with pytest.raises(StaleError):
        apply_plan(plan)
    assert no_temp_files(repo)
    assert sorted(p.name for p in repo.iterdir()) == [
        ".git",
        "BLOCKED.md",
        "IMPLEMENTATION_PLAN.md",
        "PROMPT.md",
    ]


def test_blocked_md_symlink_outside_is_never_answered(tmp_path: Path):
    """A BLOCKED.md linking to a file outside (a secret, say) must not flow into PROMPT.md."""
    repo = make_repo(tmp_path, blocked=b"x")
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"AWS_SECRET=hunter2\n")
    (repo / "BLOCKED.md").unlink()
    (repo / "BLOCKED.md").symlink_to(secret)
    block = read_block(repo)
    assert "BLOCKED.md is a symlink that leads outside the repository." in block.problems
    plan = SOURCE.plan(block, Answer(texts=("ok",), when=WHEN))
    before = snapshot(repo)
    with pytest.raises(UnsafePathError):
        apply_plan(plan)
    assert snapshot(repo) == before
    assert secret.read_bytes() == b"AWS_SECRET=hunter2\n"


@pytest.mark.parametrize("name", ["PROMPT.md", "IMPLEMENTATION_PLAN.md"])
@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_prompt_or_plan_that_is_not_a_file_is_refused(tmp_path: Path, name: str, kind: str):
    repo = make_repo(tmp_path, prompt=None, plan=None)
    if kind == "folder":
        (repo / name).mkdir()
    else:
        os.mkfifo(repo / name)  # opening it to read would wait for a writer forever
    before = snapshot(repo)
    pool = concurrent.futures.ThreadPoolExecutor(1)
    future = pool.submit(make_plan, repo)
    try:
        with pytest.raises(HitlError, match=rf"^cannot read {re.escape(name)}: "):
            future.result(timeout=5)
    except concurrent.futures.TimeoutError:
        os.close(os.open(repo / name, os.O_WRONLY | os.O_NONBLOCK))  # unblock the reader
        pytest.fail(f"reading a {kind} {name} blocked")
    finally:
        pool.shutdown(wait=False)
    assert snapshot(repo) == before
    assert (repo / "BLOCKED.md").exists()


@pytest.mark.parametrize(
    ("prompt", "newline"),
    [
        (b"# P\n\n## Goal\r\nShip.\n- fast\n", b"\n"),  # one stray CRLF in an LF file
        (b"# P\r\n\r\n## Goal\nShip.\r\n- fast\r\n", b"\r\n"),  # one stray LF in a CRLF file
        (b"# P\r\r## Goal\rShip.\r", b"\r"),  # classic Mac line endings
    ],
    ids=["mostly-lf", "mostly-crlf", "cr"],
)
def test_new_lines_use_the_files_usual_line_ending(tmp_path: Path, prompt: bytes, newline: bytes):
    repo = make_repo(tmp_path, prompt=prompt)
    answer(repo, "B")
    assert (repo / "PROMPT.md").read_bytes() == (
        prompt + newline + b"## Decisions" + newline + DECISION.encode() + newline
    )


def test_unicode_line_separators_are_not_line_endings(tmp_path: Path):
    """U+2028, form feed and NEL are text inside a markdown line, not places to cut it."""
    prompt = "# P\n\n## Decisions\n- old\u2028## not a heading\x0c\x85\n\n## Goal\nShip.\n".encode()
    repo = make_repo(tmp_path, prompt=prompt)
    answer(repo, "B")
    assert (repo / "PROMPT.md").read_bytes() == (
        "# P\n\n## Decisions\n- old\u2028## not a heading\x0c\x85\n".encode()
        + DECISION.encode()
        + b"\n\n## Goal\nShip.\n"
    )
