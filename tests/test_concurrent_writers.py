"""A loop still writing while hitl answers or undoes: its bytes are kept, or hitl writes nothing.

Two kinds of test for each window:

- tight loops, no tools needed: a real writer process appends (or writes a new BLOCKED.md)
  every few milliseconds while a real `hitl` process answers; many rounds;
- `strace` fault injection: every rename / unlink of the `hitl` process is delayed
  (`-e inject=...:delay_enter=`) so the writer lands, deterministically, in the window between
  hitl's last check and its write. Skipped, saying why, where strace is missing or ptrace is
  not allowed.

In every round the invariant is the one a user relies on: every line the loop wrote is still
there, in order, and the answer is either wholly written or not at all.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from hitl_tui import journal
from tests.hostile_cases import DRIVER, SHOP, copy_shop, hitl_env, run_hitl, temp_files
from tests.support import until_sync

DECISION = "Keep invoices, detach them"
TASK = """\
---
task_id: T-001
status: blocked
block_category: credentials
---

# T-001 - Ship the billing export

## Comments
- 2026-11-20: Blocked (credentials): Needed: a token for the export bucket.
"""

#: A loop's writer: appends "loop line N" to a file every `every` seconds until `stop` exists.
APPENDER = r"""
import os, sys, time
path, stop, every = sys.argv[1], sys.argv[2], float(sys.argv[3])
n = 0
deadline = time.monotonic() + 20
while not os.path.exists(stop) and time.monotonic() < deadline:
    with open(path, "ab") as f:
        f.write(b"loop line %d\n" % n)
    n += 1
    time.sleep(every)
print(n)
"""


def start_appender(path: Path, stop: Path, every: float = 0.003) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", APPENDER, str(path), str(stop), str(every)],
        stdout=subprocess.PIPE,
        text=True,
    )


def stop_appender(proc: subprocess.Popen, stop: Path) -> int:
    stop.touch()
    out, _ = proc.communicate(timeout=30)
    return int(out.strip())


def assert_lines_kept(data: bytes, count: int) -> None:
    """Every line the appender wrote is in `data`, once each and in order."""
    lines = [line for line in data.split(b"\n") if line.startswith(b"loop line ")]
    assert lines == [b"loop line %d" % n for n in range(count)], (len(lines), count)


# -- tight loops: a loop appending while `hitl answer` runs --------------------------------------


@pytest.mark.parametrize("name", ["PROMPT.md", "IMPLEMENTATION_PLAN.md"])
def test_a_loop_appending_while_an_answer_is_written_loses_no_line(tmp_path: Path, name):
    """12 rounds at least, and more (40 at most) until one answer was written while the loop
    appended: the rounds that refused prove nothing about the lines kept by a write. (The
    later rounds append less often, so that a loaded machine still gets one written.)"""
    written = refused = 0
    for round_ in range(40):
        if round_ >= 12 and written:
            break
        repo = copy_shop(tmp_path / f"r{round_}" / "shop")
        before = (repo / name).read_bytes()
        stop = tmp_path / f"r{round_}" / "stop"
        # A loop appending every 3 ms; on a machine so loaded that every answer meets an
        # append (and is refused), a slower loop, so that some answer is written under it.
        every = 0.003 if round_ < 20 else 0.02 if round_ < 30 else 0.08
        proc = start_appender(repo / name, stop, every)
        time.sleep(0.03)
        done = run_hitl("answer", repo / "BLOCKED.md", "--choice", "B")
        time.sleep(0.02)
        count = stop_appender(proc, stop)
        data = (repo / name).read_bytes()
        assert data.startswith(before.rstrip(b"\n"))
        assert_lines_kept(data, count)
        assert not temp_files(repo)
        if done.returncode == 0:
            written += 1
            assert not (repo / "BLOCKED.md").exists()
            assert (repo / "PROMPT.md").read_bytes().count(DECISION.encode()) == 1
            assert count > 0  # the loop did append around this answer
        else:
            refused += 1
            assert done.returncode == 3, done.err
            [line] = done.err.splitlines()
            assert name in line and "changed" in line, line
            assert (repo / "BLOCKED.md").read_bytes() == (SHOP / "BLOCKED.md").read_bytes()
            assert DECISION.encode() not in (repo / "PROMPT.md").read_bytes()
    assert written >= 1, f"no answer was written in {refused} rounds (each refused)"


def test_a_task_file_edited_as_the_journal_begins_keeps_the_edit(tmp_path: Path, monkeypatch):
    """The loop edits the task file the moment the answer's journal entry appears (the worst
    moment for a check made before journaling)."""
    for round_ in range(10):
        folder = tmp_path / f"r{round_}"
        state = folder / "state"
        monkeypatch.setenv("HITL_STATE_DIR", str(state))
        repo = folder / "billing"
        tasks = repo / ".agenticloop" / "tasks"
        tasks.mkdir(parents=True)
        (repo / ".git").mkdir()
        task = tasks / "T-001.md"
        task.write_text(TASK)
        blobs = state / "journal" / "blobs"
        edit = b"- 2026-11-21: loop: found the token in the vault after all.\n"

        finished = threading.Event()

        def edit_when_journaled(blobs=blobs, task=task, edit=edit, finished=finished) -> None:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not finished.is_set():
                try:
                    if os.listdir(blobs):
                        break
                except FileNotFoundError:
                    pass
            with open(task, "ab") as f:
                f.write(edit)

        writer = threading.Thread(target=edit_when_journaled)
        writer.start()
        done = run_hitl("answer", task, "--choice", "A", "--note", "token is in vault/billing")
        finished.set()
        writer.join(30)
        data = task.read_bytes()
        assert data.endswith(edit) or edit in data, data.decode()
        assert done.returncode in (0, 3), done.err
        if done.returncode == 3:
            assert data == TASK.encode() + edit
        assert not temp_files(repo)


def when_undo_is_journaled(state: Path, act, delay: float, finished: threading.Event) -> None:
    """Run `act` `delay` seconds after the undo's journal entry appears: after its checks,
    before (or while) it writes."""
    log = state / "journal" / "journal.jsonl"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not finished.is_set():
        try:
            if b'"kind":"undo"' in log.read_bytes():
                break
        except FileNotFoundError:
            pass
    time.sleep(delay)
    act()


def undo_while(state: Path, act, delay: float) -> tuple[int, bytes]:
    finished = threading.Event()
    writer = threading.Thread(target=when_undo_is_journaled, args=(state, act, delay, finished))
    writer.start()
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, "undo"],
        env=hitl_env({"HITL_TEST_FAULT": "{}"}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _out, err = proc.communicate(timeout=60)
    finished.set()
    writer.join(30)
    return proc.returncode, err


def answered_shop(tmp_path: Path, monkeypatch, round_: int) -> tuple[Path, Path]:
    """A fresh shop and state folder for one round, its block answered (B)."""
    folder = tmp_path / f"r{round_}"
    state = folder / "state"
    monkeypatch.setenv("HITL_STATE_DIR", str(state))
    repo = copy_shop(folder / "shop")
    assert run_hitl("answer", repo / "BLOCKED.md", "--choice", "B").returncode == 0
    return repo, state


def test_undo_never_replaces_the_loops_next_block(tmp_path: Path, monkeypatch):
    """Between undo's checks and its writes, the resumed loop writes its next question."""
    for round_ in range(20):
        repo, state = answered_shop(tmp_path, monkeypatch, round_)
        nxt = b"## Question:\nThe next question, round %d?\n" % round_

        def write_next(repo=repo, nxt=nxt) -> None:
            tmp = repo / ".next.tmp"
            tmp.write_bytes(nxt)
            os.replace(tmp, repo / "BLOCKED.md")

        code, err = undo_while(state, write_next, (round_ % 5) * 0.0005)
        # Whenever the undo ran, the loop's new question is what BLOCKED.md holds now.
        assert (repo / "BLOCKED.md").read_bytes() == nxt, (round_, code, err)
        assert code in (0, 3), err
        assert not temp_files(repo)


def test_undo_keeps_a_prompt_edit_made_meanwhile(tmp_path: Path, monkeypatch):
    for round_ in range(20):
        repo, state = answered_shop(tmp_path, monkeypatch, round_)
        line = b"- loop: a note written while the undo ran %d\n" % round_

        def append(repo=repo, line=line) -> None:
            with open(repo / "PROMPT.md", "ab") as f:
                f.write(line)

        code, err = undo_while(state, append, (round_ % 5) * 0.002)
        assert line in (repo / "PROMPT.md").read_bytes(), (round_, code, err)
        assert code in (0, 3), err
        assert not temp_files(repo)


# -- strace: the window itself, widened ------------------------------------------------------


def _strace_works() -> str | None:
    """None when `strace -e inject` can run here; otherwise why not."""
    if shutil.which("strace") is None:
        return "strace is not installed (Debian: apt-get install strace)"
    probe = subprocess.run(
        ["strace", "-f", "-o", "/dev/null", "-e", "inject=getpid:delay_enter=1", "true"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        return f"strace cannot trace here: {probe.stderr.strip()[:200]}"
    return None


needs_strace = pytest.mark.skipif(_strace_works() is not None, reason=str(_strace_works()))

RENAMES = "rename,renameat,renameat2"


def start_slowed(
    syscalls: str, micros: int, *args: object, cwd: Path | None = None
) -> subprocess.Popen:
    """`hitl ARGS` under strace, each of `syscalls` delayed by `micros` on entry."""
    return subprocess.Popen(
        [
            "strace",
            "-f",
            "-o",
            "/dev/null",
            "-e",
            f"trace={syscalls}",
            "-e",
            f"inject={syscalls}:delay_enter={micros}",
            sys.executable,
            "-c",
            DRIVER,
            *map(str, args),
        ],
        env=hitl_env({"HITL_TEST_FAULT": "{}"}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
    )


def wait_for(check, seconds: float = 30) -> None:
    """Poll `check` often (the window it waits for is short)."""
    until_sync(check, seconds, every=0.001, what="the writer's moment")


@needs_strace
def test_a_line_appended_between_the_check_and_the_rename_is_kept(tmp_path: Path):
    """The loop appends to PROMPT.md after hitl compared its bytes, while the rename that
    replaces it is held up: the swap finds it and gives the loop its file back."""
    repo = copy_shop(tmp_path / "shop")
    proc = start_slowed(RENAMES, 400_000, "answer", repo / "BLOCKED.md", "--choice", "B")
    wait_for(lambda: temp_files(repo))  # PROMPT.md's new bytes are in their temp file
    time.sleep(0.15)  # well inside the 400 ms the rename is held up
    line = b"- loop: a line written between the check and the rename\n"
    with open(repo / "PROMPT.md", "ab") as f:
        f.write(line)
    out, err = proc.communicate(timeout=120)
    prompt = (repo / "PROMPT.md").read_bytes()
    assert line in prompt
    # The swap was undone; `hitl answer` then planned again on the new bytes (or refused,
    # had the loop kept writing): never half done.
    if proc.returncode == 0:
        assert b"planned again on the new bytes of PROMPT.md" in out
        assert DECISION.encode() in prompt.split(line)[1]
        assert not (repo / "BLOCKED.md").exists()
    else:
        assert proc.returncode == 3, err
        assert (repo / "BLOCKED.md").exists() and DECISION.encode() not in prompt
    assert not temp_files(repo)


@needs_strace
def test_a_new_block_written_before_the_old_one_is_removed_stays(tmp_path: Path):
    """The loop writes its next question between hitl's last look at BLOCKED.md and its
    removal: that new BLOCKED.md is never deleted, and the answer is rolled back."""
    repo = copy_shop(tmp_path / "shop")
    plan = repo / "IMPLEMENTATION_PLAN.md"
    calls = f"{RENAMES},unlink,unlinkat"
    proc = start_slowed(calls, 300_000, "answer", repo / "BLOCKED.md", "--choice", "B")
    wait_for(lambda: b"Block answered by" in plan.read_bytes(), 120)
    time.sleep(0.1)  # inside the 300 ms the next unlink / rename is held up
    nxt = b"## Question:\nThe loop's next question?\n"
    tmp = repo / ".next.tmp"
    tmp.write_bytes(nxt)
    os.replace(tmp, repo / "BLOCKED.md")
    _out, err = proc.communicate(timeout=120)
    assert (repo / "BLOCKED.md").read_bytes() == nxt, err
    assert proc.returncode == 3, err
    assert "BLOCKED.md" in err.decode() and "nothing was changed" in err.decode()
    # Rolled back: the plan and the prompt are as they were.
    assert (repo / "PROMPT.md").read_bytes() == (SHOP / "PROMPT.md").read_bytes()
    assert plan.read_bytes() == (SHOP / "IMPLEMENTATION_PLAN.md").read_bytes()
    assert not temp_files(repo)


@needs_strace
def test_undo_leaves_a_block_written_during_its_rename(tmp_path: Path):
    repo = copy_shop(tmp_path / "shop")
    assert run_hitl("answer", repo / "BLOCKED.md", "--choice", "B").returncode == 0
    answered = (repo / "PROMPT.md").read_bytes()
    proc = start_slowed(RENAMES, 400_000, "undo")
    wait_for(lambda: temp_files(repo))  # the old BLOCKED.md is in its temp file
    time.sleep(0.15)
    nxt = b"## Question:\nThe loop's next question?\n"
    (repo / "BLOCKED.md").write_bytes(nxt)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err
    assert (repo / "BLOCKED.md").read_bytes() == nxt
    assert (repo / "PROMPT.md").read_bytes() == answered  # nothing undone
    assert "BLOCKED.md" in err.decode() and "nothing was changed" in err.decode()
    assert not temp_files(repo)


# -- the repository moved while an answer is written -----------------------------------------


def test_a_repository_renamed_mid_answer_gets_the_whole_answer(tmp_path: Path):
    repo = copy_shop(tmp_path / "loops" / "shop")
    moved = tmp_path / "loops" / "shop-renamed"
    fault = {"move_repo_after_write": [str(repo), str(moved), 1]}
    done = run_hitl("answer", repo / "BLOCKED.md", "--choice", "B", fault=fault)
    assert done.returncode == 0, done.err
    assert not repo.exists()
    assert DECISION.encode() in (moved / "PROMPT.md").read_bytes()
    assert b"Block answered by" in (moved / "IMPLEMENTATION_PLAN.md").read_bytes()
    assert not (moved / "BLOCKED.md").exists()
    [entry] = journal.history()
    assert entry.status == "done"


def test_a_crash_in_a_moved_repository_is_recovered_where_it_went(tmp_path: Path):
    repo = copy_shop(tmp_path / "loops" / "shop")
    moved = tmp_path / "elsewhere" / "shop-renamed"
    moved.parent.mkdir()
    fault = {"move_repo_after_write": [str(repo), str(moved), 1], "crash_after_write": 1}
    crashed = run_hitl("answer", repo / "BLOCKED.md", "--choice", "B", fault=fault)
    assert crashed.returncode == 86
    assert DECISION.encode() in (moved / "PROMPT.md").read_bytes()  # half-written
    after = run_hitl("list", tmp_path / "loops")
    assert after.returncode == 0, after.err
    [line] = after.err.splitlines()
    assert "rolled back" in line and f"moved to {moved}" in line, line
    for name in ("PROMPT.md", "IMPLEMENTATION_PLAN.md", "BLOCKED.md"):
        assert (moved / name).read_bytes() == (SHOP / name).read_bytes(), name
    assert not temp_files(moved)


def test_a_crash_in_a_deleted_repository_says_what_is_left_where(tmp_path: Path):
    repo = copy_shop(tmp_path / "loops" / "shop")
    crashed = run_hitl(
        "answer", repo / "BLOCKED.md", "--choice", "B", fault={"crash_after_write": 1}
    )
    assert crashed.returncode == 86
    shutil.rmtree(repo)
    after = run_hitl("list", tmp_path / "loops")
    [line] = after.err.splitlines()
    assert f"the repository {repo} is gone" in line
    assert "PROMPT.md (old bytes: " in line and "BLOCKED.md (old bytes: " in line
    blob = line.split("PROMPT.md (old bytes: ")[1].split(")")[0]
    assert Path(blob).read_bytes() == (SHOP / "PROMPT.md").read_bytes()


# -- the primitive, where renameat2 is missing ------------------------------------------------


def test_without_renameat2_writes_still_check_what_they_replace(tmp_path: Path):
    """No RENAME_EXCHANGE (another OS, or a file system without it): a check right before a
    plain rename, and link() instead of RENAME_NOREPLACE."""
    script = textwrap.dedent(
        f"""
        import errno, json
        from pathlib import Path
        from hitl_tui.answers import repofs
        def missing(*a):
            raise OSError(errno.ENOSYS, "no renameat2")
        repofs.renameat2 = missing
        repo = Path({str(tmp_path)!r})
        (repo / "a.md").write_bytes(b"old\\n")
        out = {{}}
        with repofs.RepoDir(repo) as rd:
            spot = rd.spot(repo / "a.md")
            rd.replace(spot, b"old\\n", b"new\\n")
            out["updated"] = (repo / "a.md").read_bytes().decode()
            try:
                rd.replace(spot, b"old\\n", b"newer\\n")
            except repofs.ConcurrentWrite as exc:
                out["stale"] = str(exc)
            rd.replace(rd.spot(repo / "b.md"), None, b"made\\n")
            try:
                rd.replace(rd.spot(repo / "b.md"), None, b"again\\n")
            except repofs.ConcurrentWrite as exc:
                out["exists"] = str(exc)
            rd.replace(spot, b"new\\n", None)
            out["removed"] = not (repo / "a.md").exists()
            out["windows"] = len(rd.windows)
        print(json.dumps(out))
        """
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["updated"] == "new\n"
    assert out["stale"] == "a.md changed since it was read"
    assert (tmp_path / "b.md").read_bytes() == b"made\n"
    assert "appeared meanwhile" in out["exists"]
    assert out["removed"] and out["windows"] == 2
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".hitl-tmp-")]


@needs_strace
def test_escalate_never_replaces_a_block_written_meanwhile(tmp_path: Path):
    """Two agents escalate in one repo at once: the second never overwrites the first."""
    repo = tmp_path / "shop"
    (repo / ".git").mkdir(parents=True)
    args = ["escalate", "--question", "Which region?", "--context", "Deploy, commit a1b2c3d."]
    args += ["--attempted", "Read PROMPT.md", "--choice", "eu-west-1", "--choice", "us-east-1"]
    proc = start_slowed(RENAMES, 400_000, *args, cwd=repo)
    wait_for(lambda: temp_files(repo))
    time.sleep(0.15)
    first = b"## Question:\nThe other agent's question?\n"
    (repo / "BLOCKED.md").write_bytes(first)
    _out, err = proc.communicate(timeout=120)
    assert (repo / "BLOCKED.md").read_bytes() == first
    assert proc.returncode == 1, err
    assert b"already exists" in err
    assert not temp_files(repo)


def test_a_writer_holding_the_file_open_keeps_its_bytes(tmp_path: Path):
    """A program opened PROMPT.md for writing before the answer and writes after it: a rename
    alone would leave that write in the replaced file, lost. hitl waits for it to close the
    file, and refuses while it does not."""
    repo = copy_shop(tmp_path / "shop")
    line = b"- loop: written through a file opened before the answer\n"
    with open(repo / "PROMPT.md", "ab") as held:
        done = run_hitl("answer", repo / "BLOCKED.md", "--choice", "B")
        held.write(line)
    prompt = (repo / "PROMPT.md").read_bytes()
    assert line in prompt
    assert done.returncode == 3, done.err
    [message] = done.err.splitlines()
    assert "PROMPT.md is open for writing by another program" in message, message
    assert DECISION.encode() not in prompt
    assert (repo / "BLOCKED.md").read_bytes() == (SHOP / "BLOCKED.md").read_bytes()
    assert not temp_files(repo)


def test_a_writer_that_closes_the_file_soon_is_waited_for(tmp_path: Path):
    repo = copy_shop(tmp_path / "shop")
    line = b"- loop: the last line of a session, written just before it ended\n"
    held = open(repo / "PROMPT.md", "ab")  # noqa: SIM115 - closed by the timer below

    def finish() -> None:
        held.write(line)
        held.close()

    timer = threading.Timer(0.25, finish)  # hitl starts, checks, swaps, then waits on it
    timer.start()
    done = run_hitl("answer", repo / "BLOCKED.md", "--choice", "B")
    timer.join()
    prompt = (repo / "PROMPT.md").read_bytes()
    assert line in prompt
    assert done.returncode in (0, 3), done.err
    if done.returncode == 0:
        assert DECISION.encode() in prompt.split(line)[1]  # planned again, after the line


# -- found in review: rollback, recovery and sweeping must not drop or double anything -------


def test_a_file_the_loop_changed_after_hitl_wrote_it_is_not_rolled_back(tmp_path: Path):
    """PROMPT.md is written, then the loop appends to it and to the plan before the plan is
    swapped: the rollback must not restore PROMPT.md (the loop's line would go) and must not
    say "nothing was changed"; answering again must not write the decision twice."""
    repo = copy_shop(tmp_path / "shop")
    prompt_line, plan_line = "- loop: prompt note\n", "- loop: plan note\n"
    fault = {
        "after_write": {
            "n": 1,
            "append": {
                str(repo / "PROMPT.md"): prompt_line,
                str(repo / "IMPLEMENTATION_PLAN.md"): plan_line,
            },
        }
    }
    done = run_hitl("answer", repo / "BLOCKED.md", "--choice", "B", fault=fault)
    prompt = (repo / "PROMPT.md").read_text()
    assert done.returncode == 1, done.err
    [line] = done.err.splitlines()
    assert "rolled back, except PROMPT.md" in line and "nothing was changed" not in line, line
    assert prompt.count(DECISION) == 1 and prompt.endswith(prompt_line)
    assert (repo / "IMPLEMENTATION_PLAN.md").read_text().endswith(plan_line)
    assert (repo / "BLOCKED.md").exists()
    assert not temp_files(repo)


def test_recovery_leaves_a_live_answer_in_a_repo_moved_far_away(tmp_path: Path, monkeypatch):
    repo = copy_shop(tmp_path / "a" / "b" / "shop")
    far = tmp_path / "far" / "x" / "y" / "shop"
    far.parent.mkdir(parents=True)
    fault = {"move_repo_after_write": [str(repo), str(far), 1], "after_write": {"n": 1}}
    fault["after_write"]["sleep"] = 1.5
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, "answer", str(repo / "BLOCKED.md"), "--choice", "B"],
        env=hitl_env({"HITL_TEST_FAULT": json.dumps(fault)}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_for(lambda: far.exists(), 30)
    other = run_hitl("list", tmp_path / "far")
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert other.err == "", other.err  # it did not "recover" the live answer
    [entry] = journal.history()
    assert entry.status == "done" and entry.ended_by == "apply"
    assert not (far / "BLOCKED.md").exists()


def test_a_crash_after_the_block_was_removed_is_finished_even_if_a_new_one_came(tmp_path):
    repo = copy_shop(tmp_path / "loops" / "shop")
    crashed = run_hitl(
        "answer", repo / "BLOCKED.md", "--choice", "B", fault={"crash_after_write": 3}
    )
    assert crashed.returncode == 86
    nxt = b"## Question:\nThe loop's next question?\n"
    (repo / "BLOCKED.md").write_bytes(nxt)
    after = run_hitl("list", tmp_path / "loops")
    [line] = after.err.splitlines()
    assert line.startswith("hitl: finished an interrupted answer"), line
    assert (repo / "BLOCKED.md").read_bytes() == nxt
    assert DECISION.encode() in (repo / "PROMPT.md").read_bytes()


def test_a_new_folder_that_reused_the_inode_is_not_the_repository(tmp_path: Path):
    loops = tmp_path / "loops"
    repo = copy_shop(loops / "shop")
    crashed = run_hitl(
        "answer", repo / "BLOCKED.md", "--choice", "B", fault={"crash_after_write": 2}
    )
    assert crashed.returncode == 86
    shutil.rmtree(repo)
    clone = copy_shop(loops / "shop-clone")  # ext4 hands it the inode just freed, often
    before = {p.name: p.read_bytes() for p in clone.iterdir() if p.is_file()}
    after = run_hitl("list", loops)
    [line] = after.err.splitlines()
    assert f"the repository {repo} is gone" in line, line
    assert {p.name: p.read_bytes() for p in clone.iterdir() if p.is_file()} == before


def test_a_crash_right_after_a_swap_keeps_the_loops_bytes(tmp_path: Path):
    """hitl dies between swapping PROMPT.md and comparing what it swapped out, and the loop
    had appended a line just before the swap: that line must survive recovery."""
    repo = copy_shop(tmp_path / "loops" / "shop")
    line = "- loop: appended just before the swap\n"
    fault = {"append_before_exchange": [str(repo / "PROMPT.md"), line]}
    crashed = run_hitl("answer", repo / "BLOCKED.md", "--choice", "B", fault=fault)
    assert crashed.returncode == 86
    after = run_hitl("list", tmp_path / "loops")
    [message] = after.err.splitlines()
    assert "rolled back" in message and "kept as" in message, message
    kept = [p for p in repo.iterdir() if "hitl-conflict" in p.name]
    assert len(kept) == 1 and kept[0].read_text().endswith(line)
    assert not temp_files(repo)


def test_an_io_error_while_checking_is_one_line(tmp_path: Path):
    repo = copy_shop(tmp_path / "shop")
    fault = {"fail": {"func": "open", "match": "/PROMPT.md", "errno": "EIO", "nth": 2}}
    done = run_hitl("answer", repo / "BLOCKED.md", "--choice", "B", fault=fault)
    assert done.returncode == 1, done.err
    [line] = done.err.splitlines()
    assert "internal error" not in line and "PROMPT.md" in line, line
    assert (repo / "BLOCKED.md").exists()


def test_a_repository_deleted_mid_answer_says_so(tmp_path: Path):
    repo = copy_shop(tmp_path / "shop")
    fault = {"after_write": {"n": 1, "rmtree": str(repo)}}
    done = run_hitl("answer", repo / "BLOCKED.md", "--choice", "B", fault=fault)
    assert done.returncode == 3, done.err
    [line] = done.err.splitlines()
    assert "was deleted while it was being answered" in line, line
    [entry] = journal.history()
    assert entry.status == "rolled back"


def test_a_symlinked_block_file_loses_its_link(tmp_path: Path):
    repo = copy_shop(tmp_path / "shop")
    (repo / "docs").mkdir()
    os.replace(repo / "BLOCKED.md", repo / "docs" / "blocked.md")
    os.symlink("docs/blocked.md", repo / "BLOCKED.md")
    done = run_hitl("answer", repo / "BLOCKED.md", "--choice", "B")
    assert done.returncode == 0, done.err
    assert not os.path.lexists(repo / "BLOCKED.md")
    assert (repo / "docs" / "blocked.md").read_bytes() == (SHOP / "BLOCKED.md").read_bytes()
    assert run_hitl("guard", repo).returncode == 0
