"""Hostile and broken input through the real CLI: one row per case (tests/hostile_cases.py).

For every case: `list`, `list --json`, `answer --dry-run` and `answer` exit with the documented
code and no traceback; the plain output holds no escape sequence or control byte; a refused
answer leaves every byte (and the files outside the repo) as they were; a written answer is
undone byte for byte by `hitl undo`, so nothing the agent or the operator wrote is ever lost.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.hostile_cases import (
    CASES,
    HOSTILE,
    MARKUP,
    Case,
    Run,
    copy_shop,
    run_hitl,
    snapshot,
    temp_files,
)

#: C0 controls but newline, DEL, and C1 controls: none may reach the terminal.
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def clean_exit(run: Run, code: int) -> None:
    assert run.returncode == code, (run.returncode, run.out[-2000:], run.err[-2000:])
    assert "Traceback" not in run.err
    assert "internal error" not in run.err
    for line in run.err.splitlines():
        assert line.startswith("hitl: "), line
    assert not CONTROL.search(run.err), run.err


def no_controls(run: Run) -> None:
    assert b"\x1b" not in run.stdout
    assert not CONTROL.search(run.out), CONTROL.search(run.out)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_cli_survives(case: Case, tmp_path: Path):
    root = tmp_path / "case"
    root.mkdir()
    repo = case.build(root)
    fault = case.fault(repo) if case.fault else None
    before = snapshot(root)

    listed = run_hitl("list", repo, fault=fault)
    clean_exit(listed, case.list_rc)
    no_controls(listed)
    assert (repo.name in listed.out) == case.listed, listed.out
    assert listed.max_rss < case.max_rss

    as_json = run_hitl("list", "--json", repo, fault=fault)
    clean_exit(as_json, case.list_rc)
    blocks = json.loads(as_json.stdout)
    assert len(blocks) == (1 if case.listed else 0)
    if "truncated" in case.tags:
        assert blocks[0]["truncated"] is True
        assert any("only the first" in p for p in blocks[0]["problems"])

    target = repo / case.target
    dry = run_hitl("answer", target, *case.answer, "--dry-run", fault=fault)
    clean_exit(dry, case.dry_rc)
    no_controls(dry)
    assert dry.max_rss < case.max_rss
    assert snapshot(root) == before

    answer = run_hitl("answer", target, *case.answer, fault=fault)
    clean_exit(answer, case.answer_rc)
    no_controls(answer)
    assert answer.max_rss < case.max_rss, answer.max_rss
    assert answer.seconds < 30
    assert not temp_files(root)
    moved = Path(f"{repo}-moved")
    if moved.exists():
        moved.rename(repo)
    if case.answer_rc:
        assert case.message in answer.err, answer.err
        assert len(answer.err.splitlines()) == 1, answer.err
        assert snapshot(root) == before
        history = run_hitl("history", "--json")
        assert [e["status"] for e in json.loads(history.stdout)] in ([], ["rolled back"])
        return

    if case.target == "BLOCKED.md":
        assert not os.path.lexists(repo / "BLOCKED.md")
        assert b"## Decisions" in (repo / "PROMPT.md").read_bytes()
    for name in case.outside:
        assert snapshot(root)[name] == before[name]
    history = run_hitl("history")
    clean_exit(history, 0)
    no_controls(history)
    assert "[done]" in history.out

    undo = run_hitl("undo")
    clean_exit(undo, 0)
    assert snapshot(root) == before, "undo did not restore every byte"


def test_hostile_text_survives_literally_in_json(tmp_path: Path):
    case = next(c for c in CASES if c.name == "markup and escapes in every field")
    repo = case.build(tmp_path)
    block = json.loads(run_hitl("list", "--json", repo).stdout)[0]
    assert block["question"] == HOSTILE + " retention?"
    assert block["context"] == HOSTILE
    assert block["attempted"] == [HOSTILE, "tried " + MARKUP]
    answer = run_hitl("answer", repo, "--choice", "B", "--note", MARKUP + " \x1b[5m")
    clean_exit(answer, 0)
    history = json.loads(run_hitl("history", "--json").stdout)[0]
    assert history["answer"]["note"] == MARKUP + " \x1b[5m"
    assert history["block"]["question"].startswith("[b]bold [/x] [@click=app.quit]")
    plain = run_hitl("history")
    no_controls(plain)
    assert "[@click=app.quit]" in plain.out


def test_repo_deleted_while_listing(tmp_path: Path):
    root = tmp_path / "loops"
    root.mkdir()
    keep = copy_shop(root / "a-keep")
    doomed = copy_shop(root / "b-doomed")
    run = run_hitl("list", root, fault={"delete_repo_during_scan": str(doomed)})
    clean_exit(run, 0)
    assert "a-keep" in run.out
    assert "b-doomed" not in run.out
    assert (keep / "BLOCKED.md").exists()


def test_repo_deleted_before_answer(tmp_path: Path):
    repo = copy_shop(tmp_path / "shop")
    shutil.rmtree(repo)
    run = run_hitl("answer", repo / "BLOCKED.md", "--choice", "B")
    assert run.returncode in (2, 3)
    clean_exit(run, run.returncode)


def test_unreadable_folder_among_repos(tmp_path: Path):
    root = tmp_path / "loops"
    root.mkdir()
    copy_shop(root / "good")
    secret = root / "secret"
    secret.mkdir()
    copy_shop(secret / "inner")
    run = run_hitl("list", root, fault={"unreadable": str(secret)})
    clean_exit(run, 0)
    assert "good" in run.out
    answer = run_hitl("answer", root / "good", "--choice", "A", fault={"unreadable": str(secret)})
    clean_exit(answer, 0)


def test_unreadable_block_is_listed_with_reason(tmp_path: Path):
    repo = copy_shop(tmp_path / "shop")
    fault = {"unreadable": str(repo / "BLOCKED.md")}
    block = json.loads(run_hitl("list", "--json", repo, fault=fault).stdout)[0]
    assert block["problems"] == ["BLOCKED.md could not be read: Permission denied."]
