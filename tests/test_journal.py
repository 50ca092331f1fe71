"""The journal: what is recorded before the first write, undo, history, and recovery in-process.

The crash tests that kill real processes are in test_faults.py; these drive `apply_plan` and
`journal` directly (the step hook stands in for a crash) and check the bytes on disk.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hitl_tui import journal
from hitl_tui.answers import repofs
from hitl_tui.answers.apply import apply_plan
from hitl_tui.answers.locks import LockBusy, repo_lock
from hitl_tui.answers.service import plan_answer
from hitl_tui.cli.commands import main
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.model import Answer, HitlError, Plan, StaleError, UsageError
from tests.hostile_cases import SHOP, copy_shop, snapshot, temp_files


class Crash(BaseException):
    """Stands in for a kill: nothing in hitl catches it, so no rollback runs."""


def crash_at(step: str):
    def hook(name: str) -> None:
        if name == step:
            raise Crash

    return hook


def plan_for(repo: Path, key: str = "B", note: str | None = None) -> Plan:
    inbox = Inbox.open([repo])
    block = inbox.resolve(str(repo))
    answer = Answer(choice=block.find_choice(key), note=note, operator="Ada")
    return plan_answer(inbox, block, answer)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def records() -> list[dict]:
    return [json.loads(line) for line in journal.journal_file().read_bytes().splitlines()]


def answered(repo: Path) -> dict:
    """The snapshot a clean answer with choice B gives, from a fresh copy."""
    other = copy_shop(repo.parent / "reference" / repo.name)
    apply_plan(plan_for(other))
    return snapshot(other)


# -- what is journaled ---------------------------------------------------------------------


def test_answer_is_journaled_before_its_first_write(shop: Path, monkeypatch):
    old = {name: (shop / name).read_bytes() for name in os.listdir(shop) if name.endswith(".md")}
    seen: list[list[dict]] = []
    real = repofs.RepoDir.replace

    def watching(self, spot, expected, new, mode=None) -> None:
        seen.append(records())
        real(self, spot, expected, new, mode)

    monkeypatch.setattr(repofs.RepoDir, "replace", watching)
    plan = plan_for(shop, note="legal asked")
    apply_plan(plan)

    first = seen[0]
    assert [r["type"] for r in first] == ["begin"]
    begin = first[0]
    assert begin["operator"] == "Ada"
    assert begin["kind"] == "answer"
    assert begin["repo"] == str(shop)
    assert begin["block"]["id"] == "shop"
    assert begin["block"]["source"] == "loopkit"
    assert begin["block"]["path"] == str(shop / "BLOCKED.md")
    assert begin["block"]["fingerprint"] == "sha256:" + sha(old["BLOCKED.md"])
    assert begin["answer"]["choice"]["key"] == "B"
    assert begin["answer"]["choice"]["option"].startswith("Keep invoices")
    assert begin["answer"]["note"] == "legal asked"
    steps = {Path(f["path"]).name: f for f in begin["files"]}
    assert list(steps) == ["PROMPT.md", "IMPLEMENTATION_PLAN.md", "BLOCKED.md"]
    for name, step in steps.items():
        assert step["old_sha256"] == sha(old[name])
        # The old bytes are kept in the state folder, never in the repo.
        blob = journal.journal_dir() / "blobs" / step["old_sha256"]
        assert blob.read_bytes() == old[name]
        assert not str(blob).startswith(str(shop))
    assert steps["BLOCKED.md"]["new_sha256"] is None
    assert steps["PROMPT.md"]["new_sha256"] == sha((shop / "PROMPT.md").read_bytes())
    assert [r["type"] for r in records()] == ["begin", "commit"]
    assert sorted(os.listdir(shop)) == [".git", "IMPLEMENTATION_PLAN.md", "PROMPT.md"]


def test_history_lists_who_what_where_newest_first(tmp_path: Path, capsys):
    a = copy_shop(tmp_path / "a")
    b = copy_shop(tmp_path / "b")
    apply_plan(plan_for(a, "A"))
    apply_plan(plan_for(b, "C"))
    entries = journal.history()
    assert [(e.block_id, e.answered[:2], e.operator, e.status) for e in entries] == [
        ("b", "C)", "Ada", "done"),
        ("a", "A)", "Ada", "done"),
    ]
    assert main(["undo", entries[1].id]) == 0
    assert main(["history", "--json"]) == 0
    out = capsys.readouterr().out
    data = json.loads(out[out.index("[") :])
    assert [(d["block"]["id"], d["undone"]) for d in data] == [("b", False), ("a", True)]
    assert data[1]["undone_by"]
    assert main(["history"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "  b (loopkit)  C) Block deletion" in lines[0]
    assert lines[0].endswith("[done]")
    assert "undone by" in lines[1]


# -- undo ------------------------------------------------------------------------------------


def test_undo_restores_every_byte_and_mode(shop: Path):
    (shop / "PROMPT.md").write_bytes(b"\xef\xbb\xbf# P\r\n\r\n## Goal\r\nno newline at end")
    (shop / "IMPLEMENTATION_PLAN.md").unlink()  # created by the answer, removed by the undo
    os.chmod(shop / "PROMPT.md", 0o640)
    os.chmod(shop / "BLOCKED.md", 0o600)
    before = snapshot(shop)
    apply_plan(plan_for(shop))
    assert snapshot(shop) != before
    message = journal.undo(operator="Bob")
    assert message.startswith("undid ")
    assert "restored BLOCKED.md" in message
    assert snapshot(shop) == before
    [entry] = journal.history()
    assert entry.undone and entry.undone_operator == "Bob"
    assert journal.history(include_undos=True)[0].kind == "undo"


def test_undo_cli_twice_then_nothing_left(shop: Path, capsys):
    before = snapshot(shop)
    apply_plan(plan_for(shop))
    assert main(["undo"]) == 0
    assert snapshot(shop) == before
    assert main(["undo"]) == 2
    assert "nothing to undo" in capsys.readouterr().err
    assert main(["undo", "no-such-id"]) == 2


@pytest.mark.parametrize(
    ("name", "change", "why"),
    [
        ("PROMPT.md", lambda p: p.write_bytes(p.read_bytes() + b"- agent\n"), "changed since"),
        ("IMPLEMENTATION_PLAN.md", lambda p: p.unlink(), "was removed since"),
        ("BLOCKED.md", lambda p: p.write_bytes(b"## Question\nnew?\n"), "exists again"),
    ],
)
def test_undo_refuses_when_a_file_moved_on(shop: Path, capsys, name, change, why):
    apply_plan(plan_for(shop))
    change(shop / name)
    after = snapshot(shop)
    assert main(["undo"]) == 3
    err = capsys.readouterr().err
    assert f"{name} {why}" in err
    assert "nothing was changed" in err
    assert len(err.splitlines()) == 1
    assert snapshot(shop) == after
    assert not journal.history()[0].undone
    with pytest.raises(StaleError):
        journal.undo(operator="x")


def test_undo_of_an_older_answer_by_id(tmp_path: Path):
    a = copy_shop(tmp_path / "a")
    b = copy_shop(tmp_path / "b")
    before_a = snapshot(a)
    apply_plan(plan_for(a))
    apply_plan(plan_for(b))
    after_b = snapshot(b)
    newer, older = journal.history()[:2]
    assert older.block_id == "a"
    # The shortest prefix that names it alone (both answers may share a second).
    size = next(n for n in range(1, len(older.id) + 1) if older.id[:n] != newer.id[:n])
    journal.undo(older.id[: max(size, 17)], operator="x")
    assert snapshot(a) == before_a
    assert snapshot(b) == after_b
    with pytest.raises(UsageError, match="already undone"):
        journal.undo(older.id, operator="x")


def test_second_answer_in_a_repo_blocks_undo_of_the_first(shop: Path):
    apply_plan(plan_for(shop))
    first = journal.history()[0]
    (shop / "BLOCKED.md").write_bytes((SHOP / "BLOCKED.md").read_bytes())
    apply_plan(plan_for(shop, "A"))
    with pytest.raises(StaleError, match=r"PROMPT\.md changed since"):
        journal.undo(first.id, operator="x")
    journal.undo(operator="x")  # the last one can go: the second block is back
    with pytest.raises(StaleError, match=r"BLOCKED\.md exists again"):
        journal.undo(first.id, operator="x")


# -- failures and crashes in-process ---------------------------------------------------------

STEPS = ["checked", "update:PROMPT.md", "update:IMPLEMENTATION_PLAN.md", "remove:BLOCKED.md"]


@pytest.mark.parametrize("step", STEPS)
def test_crash_at_each_step_is_recovered(shop: Path, step: str):
    old = snapshot(shop)
    new = answered(shop)

    with pytest.raises(Crash):
        apply_plan(plan_for(shop), hook=crash_at(step))
    messages = journal.recover()
    state = snapshot(shop)
    assert state in (old, new)
    if step == "checked":  # before the journal entry: nothing to recover
        assert messages == [] and state == old
    elif step == "remove:BLOCKED.md":
        assert state == new
        assert messages[0].startswith("finished an interrupted answer to shop")
    else:
        assert state == old
        assert messages[0].startswith("rolled back an interrupted answer to shop")
        assert "the block is still open" in messages[0]
    assert len(messages) <= 1
    assert journal.recover() == []
    assert all(e.status != "in progress" for e in journal.history())


@pytest.mark.parametrize("step", STEPS[1:])
def test_error_mid_answer_rolls_back(shop: Path, step: str):
    old = snapshot(shop)

    def fail(name: str) -> None:
        if name == step:
            raise OSError(28, "No space left on device")

    with pytest.raises(HitlError, match="nothing was changed") as info:
        apply_plan(plan_for(shop), hook=fail)
    assert snapshot(shop) == old
    assert "restored" in str(info.value)
    [entry] = journal.history()
    assert entry.status == "rolled back"
    assert journal.recover() == []


def test_block_rewritten_mid_answer_rolls_back_everything(shop: Path):
    old = snapshot(shop)
    rewritten = b"## Question\nA different question now?\n"

    def agent(name: str) -> None:
        if name == "update:IMPLEMENTATION_PLAN.md":
            (shop / "BLOCKED.md").write_bytes(rewritten)

    with pytest.raises(StaleError, match="the block changed") as info:
        apply_plan(plan_for(shop), hook=agent)
    assert "nothing was changed" in str(info.value)
    now = snapshot(shop)
    assert now.pop("BLOCKED.md")[1] == rewritten
    old.pop("BLOCKED.md")
    assert now == old


UNDO_STEPS = ["journaled", "create:BLOCKED.md", "update:IMPLEMENTATION_PLAN.md", "update:PROMPT.md"]


@pytest.mark.parametrize("step", UNDO_STEPS)
def test_crash_during_undo_is_recovered(shop: Path, step: str):
    old = snapshot(shop)
    apply_plan(plan_for(shop))
    new = snapshot(shop)

    with pytest.raises(Crash):
        journal.undo(operator="x", hook=crash_at(step))
    [message] = journal.recover()
    assert "an interrupted undo of shop" in message
    if step == "update:PROMPT.md":  # the undo's last step was done: it is finished
        assert message.startswith("finished")
        assert snapshot(shop) == old
        assert journal.history()[0].undone
        return
    assert message.startswith("rolled back")
    assert snapshot(shop) == new
    assert not journal.history()[0].undone
    journal.undo(operator="x")
    assert snapshot(shop) == old


def test_recovery_leaves_an_answer_a_live_process_is_writing(shop: Path):
    with pytest.raises(Crash):
        apply_plan(plan_for(shop), hook=crash_at("update:PROMPT.md"))
    half = snapshot(shop)
    with repo_lock(shop):  # as if the writer were still alive and holding it
        assert journal.recover() == []
        assert snapshot(shop) == half
        with pytest.raises(LockBusy), repo_lock(shop, timeout=0):
            pass
    [message] = journal.recover()
    assert message.startswith("rolled back")


def test_next_answer_in_the_repo_recovers_first(shop: Path):
    old = snapshot(shop)
    with pytest.raises(Crash):
        apply_plan(plan_for(shop), hook=crash_at("update:IMPLEMENTATION_PLAN.md"))
    assert snapshot(shop) != old
    # A long-running app never restarts: its next answer in the repo recovers under the lock.
    plan = plan_for(shop)  # planned from the half-written state: stale after recovery
    with pytest.raises(StaleError):
        apply_plan(plan)
    assert snapshot(shop) == old
    done = apply_plan(plan_for(shop))
    assert done.lines[-1] == "removed BLOCKED.md"


def test_torn_journal_line_is_skipped(shop: Path):
    apply_plan(plan_for(shop))
    with open(journal.journal_file(), "ab") as f:
        f.write(b'{"v":1,"type":"begin","id":"torn","repo":"/x","fi')
    assert [e.block_id for e in journal.history()] == ["shop"]
    journal.undo(operator="x")
    lines = journal.journal_file().read_bytes().splitlines()
    assert lines[-3].endswith(b'"fi')
    assert json.loads(lines[-1])["type"] == "commit"
    assert journal.recover() == []


def test_recovery_runs_before_any_command_and_says_so_once(shop: Path, capsys):
    old = snapshot(shop)
    with pytest.raises(Crash):
        apply_plan(plan_for(shop), hook=crash_at("update:PROMPT.md"))
    assert main(["list", str(shop)]) == 0
    captured = capsys.readouterr()
    [line] = captured.err.splitlines()
    assert line.startswith("hitl: rolled back an interrupted answer to shop")
    assert "shop" in captured.out
    assert snapshot(shop) == old
    assert not temp_files(shop)
    assert main(["list", str(shop)]) == 0
    assert capsys.readouterr().err == ""


def test_undo_and_history_never_load_textual(shop: Path):
    apply_plan(plan_for(shop))
    code = (
        "import sys\n"
        "from hitl_tui.cli.commands import main\n"
        "assert main(['history']) == 0\n"
        "assert main(['history', '--json', '--all', '-n', '1']) == 0\n"
        "assert main(['undo']) == 0\n"
        "assert 'textual' not in sys.modules, 'textual was imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "[done]" in done.stdout
    assert '"kind": "answer"' in done.stdout
    assert "undid " in done.stdout
    assert (shop / "BLOCKED.md").exists()


def test_a_remote_block_with_a_path_like_a_files_is_never_taken_for_a_local_file(shop: Path):
    """A block on another machine (`host:/path`): what its source recorded decides, not the
    shape of the path, so undo never restores local files for it."""
    import dataclasses

    plan = plan_for(shop)
    block = dataclasses.replace(plan.block, source="elsewhere", path="host:/srv/shop/BLOCKED.md")
    sent = dataclasses.replace(plan, block=block, changes=(), expect={})
    entry_id = journal.begin(sent, remote=True, not_undoable="was sent to host: not undoable")
    journal.commit(entry_id)
    [entry] = journal.history()
    assert entry.remote and entry.block_path == "host:/srv/shop/BLOCKED.md"
    with pytest.raises(UsageError, match="was sent to host: not undoable"):
        journal.undo(entry_id, operator="x")


def test_a_remote_answer_is_history_only(shop: Path):
    """A GitHub answer is journaled with no files: shown, never undone, closed by recovery."""
    import dataclasses

    plan = plan_for(shop)
    block = dataclasses.replace(
        plan.block, source="github", repo="acme/shop", path="https://github.com/acme/shop/issues/7"
    )
    sent = dataclasses.replace(plan, block=block, changes=(), expect={})
    # What the source can do is recorded with it: the journal never asks the source's name.
    why = "answered a GitHub issue (acme/shop#7): hitl cannot undo a posted comment"
    entry_id = journal.begin(sent, remote=True, not_undoable=why)  # crashed before its commit
    [message] = journal.recover()
    assert message.startswith("recorded an interrupted answer to shop")
    [entry] = journal.history()
    assert entry.status == "done" and entry.id == entry_id
    assert entry.block_path == "https://github.com/acme/shop/issues/7"
    assert entry.to_json()["repo"] == "acme/shop"
    assert entry.to_json()["block"]["path"] == "https://github.com/acme/shop/issues/7"
    with pytest.raises(UsageError, match="cannot undo a posted comment"):
        journal.undo(entry_id, operator="x")
    with pytest.raises(UsageError, match="nothing to undo"):
        journal.undo(operator="x")


def test_records_an_older_hitl_wrote_read_as_it_meant_them(shop: Path):
    """Records from before a block's `remote` was journaled: an answer with no files and a
    URL for a path was sent to GitHub (shown remote, never undone); one with files is local."""
    import dataclasses

    from hitl_tui.journal import store

    plan = plan_for(shop)
    block = dataclasses.replace(
        plan.block, source="github", repo="acme/shop", path="https://github.com/acme/shop/issues/7"
    )
    sent = dataclasses.replace(plan, block=block, changes=(), expect={})
    journal.commit(journal.begin(sent, remote=True, not_undoable="said by today's source"))
    apply_plan(plan_for(shop, "C"))
    path = store.active_file()
    records = [json.loads(line) for line in path.read_bytes().splitlines()]
    for record in records:  # as an older hitl wrote them
        for key in ("remote", "not_undoable"):
            record.get("block", {}).pop(key, None)
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records))
    local, remote = journal.history()
    assert (remote.remote, remote.block_path, remote.not_undoable) == (
        True,
        "https://github.com/acme/shop/issues/7",
        "answered shop on github: hitl cannot undo what was sent there",
    )
    assert (local.remote, local.not_undoable, local.block_path) == (
        False,
        None,
        shop / "BLOCKED.md",
    )
    with pytest.raises(UsageError, match="hitl cannot undo what was sent there"):
        journal.undo(remote.id, operator="x")
