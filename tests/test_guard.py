"""`hitl guard`: the gate a loop runner checks before each iteration, and the README's run.sh."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from hitl_tui.inbox.inbox import Inbox
from hitl_tui.sources.registry import default_sources

SHOP_QUESTION = (
    "Should deleting a workspace also delete its archived invoices, or keep them for 7 years?"
)

TASK = """\
---
task_id: T-007
status: {status}
block_category: contract
backend: files
type: change-request
---

# T-007 - Switch session storage from SQLite to Postgres

## Task
Move sessions to Postgres.

## Comments
- 2026-08-21: Blocked (contract): change-request approval gate. Needed: a human approves.
- 2026-08-19: Started.
"""

#: The loop the README shows, word for word.
RUN_SH = """\
#!/usr/bin/env bash
while true; do
  hitl guard || exit $?
  grep -q '^STATUS: done' IMPLEMENTATION_PLAN.md 2>/dev/null && exit 0
  claude -p "$(cat PROMPT.md)"
done
"""


def guard(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hitl_tui", "guard", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=30,
    )


def hitl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hitl_tui", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.fixture
def task_repo(tmp_path: Path) -> Path:
    """A repository whose only block is an agenticloop task file."""
    repo = tmp_path / "billing"
    (repo / ".agenticloop" / "tasks").mkdir(parents=True)
    (repo / ".git").mkdir()
    (repo / ".agenticloop" / "tasks" / "T-007.md").write_text(TASK.format(status="blocked"))
    return repo


def _agenticloop_registered() -> bool:
    return "agenticloop" in [s.name for s in default_sources()]


def test_a_blocked_repo_exits_2_with_its_question(shop: Path) -> None:
    result = guard(str(shop), cwd=shop.parent)
    assert result.returncode == 2
    assert result.stdout == f"shop: blocked: {SHOP_QUESTION}\n"
    assert result.stderr == ""


def test_an_unblocked_repo_exits_0_silently(shop: Path) -> None:
    (shop / "BLOCKED.md").unlink()
    result = guard(str(shop), cwd=shop.parent)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_default_is_the_git_top_level_of_the_cwd(shop: Path) -> None:
    deep = shop / "src" / "workspaces"
    deep.mkdir(parents=True)
    result = guard(cwd=deep)
    assert result.returncode == 2
    assert result.stdout == f"shop: blocked: {SHOP_QUESTION}\n"


def test_a_folder_of_repos_is_blocked_while_any_is(shop: Path, tmp_path: Path) -> None:
    clean = tmp_path / "clean"
    (clean / ".git").mkdir(parents=True)
    result = guard(str(tmp_path), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == f"shop: blocked: {SHOP_QUESTION}\n"
    (shop / "BLOCKED.md").unlink()
    assert guard(str(tmp_path), cwd=tmp_path).returncode == 0


def test_hostile_text_is_printed_inert(tmp_path: Path) -> None:
    repo = tmp_path / "evil"
    (repo / ".git").mkdir(parents=True)
    (repo / "BLOCKED.md").write_bytes(
        b"## Question:\n\x1b]0;pwned\x07[b]Really\x1b[2J? [@click=app.quit]\n## Choices:\n- A) x\n"
    )
    result = guard(str(repo), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == "evil: blocked: ␛]0;pwned␇[b]Really␛[2J? [@click=app.quit]\n"
    assert "\x1b" not in result.stdout


def test_an_unreadable_block_still_blocks(tmp_path: Path) -> None:
    repo = tmp_path / "locked"
    (repo / ".git").mkdir(parents=True)
    (repo / "BLOCKED.md").write_text("## Question:\nq?\n")
    (repo / "BLOCKED.md").chmod(0)
    if os.access(repo / "BLOCKED.md", os.R_OK):
        pytest.skip("running as root: the file stays readable")
    result = guard(str(repo), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == "locked: blocked: (BLOCKED.md could not be read: Permission denied)\n"


#: A BLOCKED.md (or a task file) that is there but is no file to read (issue 23): how to make
#: it, and the reason `guard` and `list` give.
NOT_A_FILE = {
    "folder": (lambda p: p.mkdir(), "it is a folder, not a file"),
    "fifo": (os.mkfifo, "it is a FIFO, not a file"),
    "dev-zero": (lambda p: p.symlink_to("/dev/zero"), "it is a device, not a file"),
    "dangling": (
        lambda p: p.symlink_to(p.parent / "share" / "not-mounted.md"),
        "it is a symlink to nothing there",
    ),
}


@pytest.mark.parametrize("kind", NOT_A_FILE)
def test_a_blocked_md_that_is_no_file_stops_the_loop(tmp_path: Path, kind: str) -> None:
    make, why = NOT_A_FILE[kind]
    repo = tmp_path / "shop"
    (repo / ".git").mkdir(parents=True)
    make(repo / "BLOCKED.md")
    result = guard(str(repo), cwd=tmp_path)  # never hangs: subprocess.run's timeout says so
    assert (result.returncode, result.stderr) == (2, "")
    assert result.stdout == f"shop: blocked: (BLOCKED.md could not be read: {why})\n"
    listed = hitl("list", str(repo), cwd=tmp_path)
    assert listed.returncode == 0 and "no open blocks" not in listed.stdout, listed.stdout
    assert f"(BLOCKED.md could not be read: {why})" in listed.stdout
    [block] = json.loads(hitl("list", "--json", str(repo), cwd=tmp_path).stdout)
    assert block["problems"] == [f"BLOCKED.md could not be read: {why}."]
    answered = hitl("answer", str(repo / "BLOCKED.md"), "--text", "go", cwd=tmp_path)
    assert answered.returncode == 1
    assert answered.stderr == "hitl: shop: BLOCKED.md cannot be read, so it cannot be answered\n"
    assert os.path.lexists(repo / "BLOCKED.md") and not (repo / "PROMPT.md").exists()


def test_a_blocked_md_linked_to_a_file_in_the_repo_still_reads(tmp_path: Path) -> None:
    repo = tmp_path / "shop"
    (repo / ".git").mkdir(parents=True)
    (repo / "docs").mkdir()
    (repo / "docs" / "blocked.md").write_text("## Question\nShip it?\n## Choices\n- A) yes\n")
    (repo / "BLOCKED.md").symlink_to(Path("docs") / "blocked.md")
    result = guard(str(repo), cwd=tmp_path)
    assert (result.returncode, result.stdout) == (2, "shop: blocked: Ship it?\n")


@pytest.mark.skipif(not _agenticloop_registered(), reason="the agenticloop source is not landed")
@pytest.mark.parametrize("kind", NOT_A_FILE)
def test_a_task_file_that_is_no_file_stops_the_loop(task_repo: Path, kind: str) -> None:
    make, why = NOT_A_FILE[kind]
    make(task_repo / ".agenticloop" / "tasks" / "T-008.md")
    result = guard(cwd=task_repo)
    assert result.returncode == 2
    assert f"billing/T-008: blocked: (T-008: the task file could not be read: {why})\n" in (
        result.stdout
    )
    (task_repo / ".agenticloop" / "tasks" / "T-007.md").unlink()
    result = guard(cwd=task_repo)
    assert (result.returncode, result.stdout.count("\n")) == (2, 1), result.stdout


@pytest.mark.skipif(not _agenticloop_registered(), reason="the agenticloop source is not landed")
@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda r: os.mkfifo(r / ".agenticloop"), ".agenticloop is in the way: it is a FIFO"),
        (
            lambda r: (r / ".agenticloop").symlink_to("unmounted"),
            ".agenticloop is in the way: it is a symlink to nothing there",
        ),
        (lambda r: (r / ".agenticloop" / "tasks").symlink_to("../gone"), "it is a symlink"),
        (lambda r: (r / ".agenticloop" / "tasks").write_text("x"), "it is a file, not a folder"),
    ],
    ids=["agenticloop-fifo", "agenticloop-dangling", "tasks-dangling", "tasks-a-file"],
)
def test_a_task_folder_that_cannot_be_listed_stops_the_loop(
    task_repo: Path, make: Callable[[Path], object], why: str
) -> None:
    shutil.rmtree(task_repo / ".agenticloop" / "tasks")
    if "agenticloop-" in why or why.startswith(".agenticloop"):
        (task_repo / ".agenticloop").rmdir()
    make(task_repo)
    result = guard(cwd=task_repo)
    assert result.returncode == 2, result.stdout
    assert result.stdout.startswith(
        "billing/tasks: blocked: (tasks: the task folder .agenticloop/tasks/ cannot be read: "
    )
    assert why in result.stdout


def test_a_repo_without_tasks_or_block_is_not_stopped(tmp_path: Path) -> None:
    repo = tmp_path / "clean"
    (repo / ".git").mkdir(parents=True)
    (repo / ".agenticloop").mkdir()  # no task folder yet: nothing to read, nothing blocked
    assert guard(str(repo), cwd=tmp_path).returncode == 0


def test_a_missing_path_stops_the_loop_too(tmp_path: Path) -> None:
    result = guard(str(tmp_path / "nope"), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == f"hitl: no such folder: {tmp_path / 'nope'}\n"


@pytest.mark.skipif(not _agenticloop_registered(), reason="the agenticloop source is not landed")
def test_a_task_file_blocked_repo_exits_2(task_repo: Path) -> None:
    inbox = Inbox.open([task_repo])
    assert [b.source for b in inbox.sorted_blocks()] == ["agenticloop"]
    result = guard(str(task_repo), cwd=task_repo)
    assert result.returncode == 2
    assert result.stdout.startswith("billing/T-007: blocked (contract): ")
    assert result.stdout.count("\n") == 1


@pytest.mark.skipif(not _agenticloop_registered(), reason="the agenticloop source is not landed")
@pytest.mark.parametrize(("status", "code"), [("needs_context", 2), ("agent-ready", 0)])
def test_task_status_decides(task_repo: Path, status: str, code: int) -> None:
    task = task_repo / ".agenticloop" / "tasks" / "T-007.md"
    task.write_text(TASK.format(status=status))
    result = guard(cwd=task_repo)
    assert result.returncode == code
    assert result.stdout.startswith("billing/T-007: needs_context: ") if code else not result.stdout


def test_escalate_then_guard_then_answer(tmp_path: Path) -> None:
    repo = tmp_path / "shopx"
    (repo / ".git").mkdir(parents=True)
    assert guard(cwd=repo).returncode == 0
    escalated = hitl(
        "escalate",
        "--question",
        "Keep invoices?",
        "--context",
        "delete workspace",
        "--attempted",
        "read PROMPT.md",
        "--choice",
        "Cascade — loses invoices",
        "--choice",
        "Keep — needs a migration",
        cwd=repo,
    )
    assert escalated.returncode == 2, escalated.stderr
    blocked = guard(cwd=repo)
    assert (blocked.returncode, blocked.stdout) == (2, "shopx: blocked: Keep invoices?\n")
    answered = hitl("answer", str(repo), "--choice", "B", cwd=repo)
    assert answered.returncode == 0, answered.stderr
    assert guard(cwd=repo).returncode == 0


def test_the_readme_run_sh_stops_on_a_block_and_resumes(tmp_path: Path) -> None:
    """The five-line loop, with a fake agent that escalates on its second session."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "hitl"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m hitl_tui "$@"\n')
    shim.chmod(0o755)
    agent = bin_dir / "claude"
    agent.write_text(
        "#!/bin/sh\n"
        "echo session >> sessions.log\n"
        'n=$(wc -l < sessions.log | tr -d " ")\n'
        'if [ "$n" = 2 ]; then\n'
        "  hitl escalate --question 'Which DB?' --context 'storage layer' \\\n"
        "    --attempted 'read PROMPT.md' --choice 'SQLite — simple' --choice 'Postgres — ops'\n"
        '  echo "escalate exited $?" >> sessions.log\n'
        'elif [ "$n" -ge 4 ]; then\n'
        "  echo 'STATUS: done' > IMPLEMENTATION_PLAN.md\n"
        "fi\n"
    )
    agent.chmod(0o755)
    repo = tmp_path / "loop"
    (repo / ".git").mkdir(parents=True)
    (repo / "PROMPT.md").write_text("# Goal\nBuild it.\n")
    (repo / "run.sh").write_text(RUN_SH)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    env = {k: v for k, v in env.items() if not k.startswith("LOOPKIT_HITL_")}
    bash = shutil.which("bash") or "/bin/bash"

    first = subprocess.run([bash, "run.sh"], cwd=repo, env=env, capture_output=True, timeout=60)
    assert first.returncode == 2, first.stderr
    assert b"loop: blocked: Which DB?\n" in first.stdout
    log = (repo / "sessions.log").read_text()
    assert log == "session\nsession\nescalate exited 2\n"
    assert (repo / "BLOCKED.md").exists()

    answered = hitl("answer", str(repo), "--choice", "B", cwd=repo)
    assert answered.returncode == 0, answered.stderr
    second = subprocess.run([bash, "run.sh"], cwd=repo, env=env, capture_output=True, timeout=60)
    assert second.returncode == 0, second.stderr
    assert (repo / "sessions.log").read_text() == log + "session\n"
    assert (repo / "IMPLEMENTATION_PLAN.md").read_text() == "STATUS: done\n"


# -- a runner shaped like loopkit's run.sh: it stops only when the agent CLI exits non-zero ----

#: The real loopkit run.sh, reduced to its shape: `set -euo pipefail`, no BLOCKED.md check, one
#: `$CLI` call per step (the verify call's failure is swallowed); the loop ends only when
#: `set -e` meets a non-zero exit of the agent CLI, or when the plan says done.
LOOPKIT_RUN_SH = """\
#!/usr/bin/env bash
set -euo pipefail
CLI="${LOOPKIT_CLI:-claude -p}"
while true; do
  $CLI "Read PROMPT.md and IMPLEMENTATION_PLAN.md. Do the next step. Commit on green."
  $CLI "/verify" || echo "verify failed, will retry"
  grep -q "^STATUS: done$" IMPLEMENTATION_PLAN.md && { echo "done"; break; }
done
"""

#: The README's one-line fix for that runner: `hitl guard || exit $?` before each agent call.
GUARDED_RUN_SH = """\
#!/usr/bin/env bash
set -euo pipefail
CLI="${LOOPKIT_CLI:-claude -p}"
while true; do
  hitl guard || exit $?
  $CLI "Read PROMPT.md and IMPLEMENTATION_PLAN.md. Do the next step. Commit on green."
  hitl guard || exit $?
  $CLI "/verify" || echo "verify failed, will retry"
  grep -q "^STATUS: done$" IMPLEMENTATION_PLAN.md && { echo "done"; break; }
done
"""

#: An agent CLI that escalates on its first call and exits 0 anyway (as `claude -p` does when
#: the session ends normally). It counts its calls and gives up at the 6th, so that a loop that
#: spins is bounded.
ESCALATES_THEN_EXITS_0 = """\
#!/bin/sh
echo "$*" >> calls.log
n=$(wc -l < calls.log | tr -d " ")
if [ "$n" -ge 6 ]; then echo "runaway: call $n" >&2; exit 99; fi
if [ "$n" = 1 ]; then
  hitl escalate --question 'Which DB?' --context 'storage layer' \\
    --attempted 'read PROMPT.md' --choice 'SQLite — simple' --choice 'Postgres — ops' >/dev/null
fi
exit 0
"""


@pytest.fixture
def loop(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A loopkit repository, and an environment with `hitl` and the fake agent `fake-cli`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "hitl"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m hitl_tui "$@"\n')
    shim.chmod(0o755)
    agent = bin_dir / "fake-cli"
    agent.write_text(ESCALATES_THEN_EXITS_0)
    agent.chmod(0o755)
    repo = tmp_path / "loop"
    (repo / ".git").mkdir(parents=True)
    (repo / "PROMPT.md").write_text("# Goal\nBuild it.\n")
    (repo / "IMPLEMENTATION_PLAN.md").write_text("STATUS: in progress\n")
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    env = {k: v for k, v in env.items() if not k.startswith("LOOPKIT_")}
    return repo, env


def _run_loop(repo: Path, env: dict[str, str], script: str, cli: str):
    (repo / "run.sh").write_text(script)
    bash = shutil.which("bash") or "/bin/bash"
    return subprocess.run(
        [bash, "run.sh"],
        cwd=repo,
        env={**env, "LOOPKIT_CLI": cli},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _calls(repo: Path) -> int:
    return len((repo / "calls.log").read_text().splitlines())


def test_unwrapped_the_loopkit_runner_spins_past_the_block(loop) -> None:
    """The defect the wrapper fixes: the agent escalated, exited 0, and was called again."""
    repo, env = loop
    result = _run_loop(repo, env, LOOPKIT_RUN_SH, "fake-cli")
    # Called again and again after the block: the 6th call (a verify, whose failure the runner
    # swallows) and the 7th gave up; only the fake agent's own bound ended the loop.
    assert result.returncode == 99, result.stderr
    assert "runaway: call 7" in result.stderr
    assert _calls(repo) == 7
    assert (repo / "BLOCKED.md").exists()


def test_guard_then_stops_the_loopkit_runner_after_the_first_escalation(loop) -> None:
    repo, env = loop
    result = _run_loop(repo, env, LOOPKIT_RUN_SH, "hitl guard --then fake-cli")
    assert result.returncode == 2, result.stderr
    assert _calls(repo) == 1
    assert result.stdout == "loop: blocked: Which DB?\n"
    assert result.stderr == ""
    assert (repo / "BLOCKED.md").exists()

    # Answered, the same runner goes on, and the agent gets its arguments untouched.
    answered = hitl("answer", str(repo), "--choice", "B", cwd=repo)
    assert answered.returncode == 0, answered.stderr
    (repo / "IMPLEMENTATION_PLAN.md").write_text("STATUS: done\n")
    again = _run_loop(repo, env, LOOPKIT_RUN_SH, "hitl guard --then fake-cli")
    assert again.returncode == 0, again.stderr
    assert again.stdout == "done\n"
    assert (repo / "calls.log").read_text().splitlines()[1:] == [
        "Read PROMPT.md and IMPLEMENTATION_PLAN.md. Do the next step. Commit on green.",
        "/verify",
    ]


def test_the_readme_guard_before_each_call_stops_the_loopkit_runner(loop) -> None:
    repo, env = loop
    assert GUARDED_RUN_SH in (Path(__file__).parent.parent / "docs" / "agent.md").read_text()
    result = _run_loop(repo, env, GUARDED_RUN_SH, "fake-cli")
    assert result.returncode == 2, result.stderr
    assert _calls(repo) == 1
    assert result.stdout == "loop: blocked: Which DB?\n"


def test_the_readme_names_the_loopkit_cli_wrapper() -> None:
    readme = (Path(__file__).parent.parent / "docs" / "agent.md").read_text()
    assert 'LOOPKIT_CLI="hitl guard --then claude -p" ./run.sh' in readme


# -- guard --then CMD: check, run CMD only when not blocked, check again -----------------------


def test_then_runs_the_command_and_passes_its_exit_code(shop: Path) -> None:
    (shop / "BLOCKED.md").unlink()
    script = 'echo "args: $*"; echo "on stderr" >&2; exit 7'
    result = guard("--then", "sh", "-c", script, "sh", "--help", "-x", "PATH", cwd=shop)
    assert result.returncode == 7
    assert result.stdout == "args: --help -x PATH\n"
    assert result.stderr == "on stderr\n"


def test_then_with_a_path_and_a_command_that_succeeds(shop: Path, tmp_path: Path) -> None:
    (shop / "BLOCKED.md").unlink()
    result = guard(str(shop), "--then", "touch", "ran", cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert (tmp_path / "ran").exists()


def test_then_does_not_run_the_command_while_blocked(shop: Path, tmp_path: Path) -> None:
    result = guard("--then", "touch", str(tmp_path / "ran"), cwd=shop)
    assert result.returncode == 2
    assert result.stdout == f"shop: blocked: {SHOP_QUESTION}\n"
    assert not (tmp_path / "ran").exists()


def test_then_exits_2_when_the_command_left_a_block(shop: Path) -> None:
    blocked = (shop / "BLOCKED.md").read_bytes()
    (shop / "BLOCKED.md").unlink()
    (shop / "block.md").write_bytes(blocked)
    result = guard("--then", "sh", "-c", "mv block.md BLOCKED.md; exit 0", cwd=shop)
    assert result.returncode == 2
    assert result.stdout == f"shop: blocked: {SHOP_QUESTION}\n"


def test_then_a_command_killed_by_a_signal_exits_128_plus_it(shop: Path) -> None:
    (shop / "BLOCKED.md").unlink()
    result = guard("--then", "sh", "-c", "kill -TERM $$", cwd=shop)
    assert result.returncode == 128 + 15


def test_then_a_missing_command_is_127_in_one_line(shop: Path) -> None:
    (shop / "BLOCKED.md").unlink()
    result = guard("--then", "no-such-agent-cli", "-p", "x", cwd=shop)
    assert result.returncode == 127
    assert result.stdout == ""
    assert result.stderr == "hitl: no-such-agent-cli: command not found\n"


def test_then_without_a_command_is_a_usage_error(shop: Path) -> None:
    result = guard("--then", cwd=shop)
    assert result.returncode == 2
    assert result.stderr.startswith("hitl: --then needs a command")
    assert result.stderr.count("\n") == 1


def test_guard_help_explains_then(shop: Path) -> None:
    result = guard("--help", cwd=shop)
    assert result.returncode == 0
    assert "--then CMD [ARG ...]" in result.stdout
    assert 'LOOPKIT_CLI="hitl guard --then claude -p"' in result.stdout
    assert "exit code" in result.stdout


def test_then_passes_sigterm_on_to_the_command(shop: Path) -> None:
    """A supervisor stopping hitl stops the agent too, and hitl reports how the agent ended."""
    import signal
    import time

    (shop / "BLOCKED.md").unlink()
    script = 'trap "echo stopped; exit 5" TERM; touch started; while :; do sleep 0.05; done'
    proc = subprocess.Popen(
        [sys.executable, "-m", "hitl_tui", "guard", "--then", "sh", "-c", script],
        cwd=shop,
        stdout=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 20
    while not (shop / "started").exists():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    assert (proc.returncode, out) == (5, "stopped\n")
