"""Issue 23: agent text stays data in the operator's loop commands.

A `[[loop]]` command may type into a terminal: `tmux send-keys -t {name} "echo resuming
{task_id}" Enter`. There a control character in a value is a key: Ctrl-O (and a newline, a
carriage return) makes bash's readline run the line so far. So a value holding any C0 or C1
control character or DEL is never put into a command: the restart, `open` or `t` is refused
with one line naming the value, its control characters written as `\\xNN`.

These tests drive a real bash in a real tmux server of their own (TMUX_TMPDIR), and see
whether the agent's `touch PWNED` ran in the pane.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from tests.hostile_cases import SHOP, run_hitl

#: Typed into the pane by the restart of the issue's report (the README's pattern, with a value).
TYPED = "echo resuming {task_id}"


@dataclass
class Pane:
    """A bash pane in a tmux server of the test's own: the session `name`, started in `cwd`."""

    name: str
    cwd: Path

    def tmux(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=10)

    def settled(self, mark: Path) -> None:
        """Everything typed into the pane so far has run: a `touch MARK` typed after it ran."""
        self.tmux("send-keys", "-t", self.name, f"touch {mark}", "Enter")
        deadline = time.monotonic() + 15
        while not mark.exists():
            if time.monotonic() > deadline:
                seen = self.tmux("capture-pane", "-p", "-t", self.name).stdout
                raise AssertionError(f"the pane never ran `touch {mark}`; it shows:\n{seen}")
            time.sleep(0.02)

    def pwned(self) -> list[Path]:
        return sorted(self.cwd.parent.rglob("PWNED*"))


def start_pane(root: Path, name: str) -> Pane:
    cwd = root / "pane"
    cwd.mkdir(parents=True, exist_ok=True)
    pane = Pane(name, cwd)
    shell = (
        f"env -i HOME={cwd} TERM=xterm PATH=/usr/bin:/bin PS1='ready$ ' bash --norc --noprofile -i"
    )
    size = ("-x", "120", "-y", "30")
    started = pane.tmux("new-session", "-d", "-s", name, *size, "-c", str(cwd), shell)
    assert started.returncode == 0, started.stderr
    deadline = time.monotonic() + 15
    while "ready$" not in (seen := pane.tmux("capture-pane", "-p", "-t", name).stdout):
        if time.monotonic() > deadline:
            raise AssertionError(f"bash never showed its prompt in the pane; it shows:\n{seen}")
        time.sleep(0.02)
    return pane


@pytest.fixture
def tmux_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A tmux server of the test's own (its socket in a short folder of its own)."""
    folder = tempfile.mkdtemp(prefix="hitl-tmux-", dir="/tmp")
    monkeypatch.setenv("TMUX_TMPDIR", folder)
    monkeypatch.delenv("TMUX", raising=False)
    monkeypatch.delenv("TMUX_PANE", raising=False)
    try:
        yield
    finally:
        subprocess.run(["tmux", "kill-server"], capture_output=True, timeout=10)
        shutil.rmtree(folder, ignore_errors=True)


def billing_with(root: Path, task_id: str) -> Path:
    """The billing repository with one blocked task whose header says `task_id: TASK_ID`."""
    repo = root / "loops" / "billing"
    shutil.copytree(FIXTURES / "agenticloop-billing", repo)
    (repo / ".git").mkdir()
    tasks = repo / ".agenticloop" / "tasks"
    for other in ("T-003", "T-009", "T-012"):
        (tasks / f"{other}.md").unlink()
    task = tasks / "T-007.md"
    text = task.read_text(encoding="utf-8")
    task.write_text(text.replace("task_id: T-007", f"task_id: {task_id}", 1), encoding="utf-8")
    return task


def config_for(root: Path, **commands: list[str]) -> Path:
    lines = [
        f"repos = [{json.dumps(str(root / 'loops'))}]",
        "[[loop]]",
        f"match = [{json.dumps(str(root / 'loops' / '*'))}]",
    ]
    lines += [f"{key} = {json.dumps(value)}" for key, value in commands.items()]
    path = root / "config.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def escaped(value: str) -> str:
    return "".join(
        f"\\x{ord(c):02x}" if ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F else c for c in value
    )


@pytest.mark.parametrize(
    "bad", ["\x0f", "\x1b", "\x7f", "\x9b", "\x15", "\x03"], ids=lambda c: f"x{ord(c):02x}"
)
def test_a_control_character_in_task_id_never_reaches_the_shell(
    tmp_path: Path, tmux_server: None, bad: str
) -> None:
    """`hitl restart` and the restart `hitl answer` runs: refused in one line naming the value
    as `\\x0f`; the pane never runs the agent's `touch PWNED` (without the refusal it does:
    Ctrl-O is readline's "accept line")."""
    value = f"T-007{bad}touch PWNED{bad}"
    task = billing_with(tmp_path, value)
    pane = start_pane(tmp_path, "billing")
    restart = ["tmux", "send-keys", "-t", "{name}", TYPED, "Enter"]
    config = config_for(tmp_path, restart=restart)
    line = (
        f"hitl: restart refused: {{task_id}} holds a control character ({escaped(bad)}) "
        f"in '{escaped(value)}'\n"
    )

    again = run_hitl("restart", task, "--config", config)
    pane.settled(tmp_path / "settled-1")
    assert pane.pwned() == [], pane.tmux("capture-pane", "-p", "-t", "billing").stdout
    assert again.stderr.decode() == line and again.stdout == b""
    assert again.returncode == 1

    done = run_hitl("answer", task, "--choice", "A", "--config", config)
    pane.settled(tmp_path / "settled-2")
    assert pane.pwned() == [], pane.tmux("capture-pane", "-p", "-t", "billing").stdout
    assert done.returncode == 0, done.stderr
    assert done.stderr.decode() == line
    assert "status: agent-ready" in task.read_text(encoding="utf-8")  # the answer stands
    # Nothing ran: no log of it either.
    assert not list((Path(os.environ["HITL_STATE_DIR"]) / "loops").glob("*.log"))


def test_dry_run_says_the_restart_is_refused(tmp_path: Path, tmux_server: None) -> None:
    task = billing_with(tmp_path, "T-007\x0ftouch PWNED\x0f")
    config = config_for(tmp_path, restart=["tmux", "send-keys", "-t", "{name}", TYPED, "Enter"])
    dry = run_hitl("answer", task, "--choice", "A", "--dry-run", "--config", config)
    assert dry.returncode == 0
    assert dry.stderr.decode() == (
        "hitl: restart refused: {task_id} holds a control character (\\x0f) in "
        "'T-007\\x0ftouch PWNED\\x0f'\n"
    )


def test_a_clean_value_is_still_typed(tmp_path: Path, tmux_server: None) -> None:
    """The refusal is not a blanket one: the same restart with a plain task id runs in the pane."""
    task = billing_with(tmp_path, "T-007")
    pane = start_pane(tmp_path, "billing")
    config = config_for(
        tmp_path, restart=["tmux", "send-keys", "-t", "{name}", "touch RESUMED-{task_id}", "Enter"]
    )
    done = run_hitl("answer", task, "--choice", "A", "--config", config)
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    pane.settled(tmp_path / "settled")
    assert (pane.cwd / "RESUMED-T-007").exists()


def test_a_folder_name_with_a_newline_never_reaches_the_shell(
    tmp_path: Path, tmux_server: None
) -> None:
    """`{name}`, `{repo}` and `{id}` are folder names: a repository folder an agent made,
    `shop<LF>touch PWNED<LF>`, is refused as well (a newline typed is Enter)."""
    name = "shop\ntouch PWNED\n"
    repo = tmp_path / "loops" / name
    shutil.copytree(SHOP, repo)
    (repo / ".git").mkdir()
    pane = start_pane(tmp_path, "main")
    for field in ("name", "repo", "id"):
        config = config_for(
            tmp_path, restart=["tmux", "send-keys", "-t", "main", f"echo {{{field}}}", "Enter"]
        )
        ran = run_hitl("restart", repo / "BLOCKED.md", "--config", config)
        pane.settled(tmp_path / f"settled-{field}")
        assert pane.pwned() == [], pane.tmux("capture-pane", "-p", "-t", "main").stdout
        value = str(repo) if field == "repo" else name
        assert ran.returncode == 1
        assert ran.stderr.decode() == (
            f"hitl: restart refused: {{{field}}} holds a control character (\\x0a) "
            f"in '{escaped(value)}'\n"
        )


# -- in the app: R, the restart after an answer, t (open), t (a shell) ----------------------------


async def test_the_app_refuses_restart_and_open_with_a_control_character(
    tmp_path: Path, tmux_server: None
) -> None:
    """R, the restart after an answer and `t` (the loop's open command) in the app: each is
    refused in one toast line naming `\\x0f`; the preview's title says so before the answer; the
    pane never runs the agent's `touch PWNED`."""
    from textual.widgets import Static

    from hitl_tui.loops.commands import Loop
    from tests.support import until
    from tests.support.pilot import preview_of
    from tests.test_loops import _app
    from tests.tui_support import SIZE

    value = "T-007\x0ftouch PWNED\x0f"
    billing_with(tmp_path, value)
    pane = start_pane(tmp_path, "billing")
    typed = ("tmux", "send-keys", "-t", "{name}", TYPED, "Enter")
    loop = Loop(
        (str(tmp_path / "loops" / "*"),),
        restart=typed,
        open=("tmux", "send-keys", "-t", "{name}", "echo open {task_id}", "Enter"),
    )
    refused = "{task_id} holds a control character (\\x0f) in 'T-007\\x0ftouch PWNED\\x0f'"
    app = _app(tmp_path, loop)

    def toasts() -> list[str]:
        return [str(n.message) for n in app._notifications]

    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.inbox_screen.current is not None)
        await pilot.press("R")
        await until(pilot, lambda: f"restart refused: {refused}" in toasts(), saw=toasts)
        await pilot.press("t")
        await until(pilot, lambda: f"open refused: {refused}" in toasts(), saw=toasts)
        pane.settled(tmp_path / "settled-1")
        assert pane.pwned() == [], pane.tmux("capture-pane", "-p", "-t", "billing").stdout
        await preview_of(pilot, app, f"billing/{value}", "1")
        title = str(app.screen.query_one("#preview-title", Static).render())
        assert "restart refused: {task_id} holds a control character (\\x0f)" in title, title
        assert "then runs" not in title
        await pilot.press("y")
        await until(
            pilot, lambda: any(f"\nrestart refused: {refused}" in t for t in toasts()), saw=toasts
        )
    pane.settled(tmp_path / "settled-2")
    assert pane.pwned() == [], pane.tmux("capture-pane", "-p", "-t", "billing").stdout
    assert not any("restarting" in t or "restarted" in t for t in toasts()), toasts()


async def test_t_refuses_a_shell_in_a_folder_named_with_escapes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`t` without an open command starts $SHELL in the repository, whose prompt shows the
    folder's name as it is: a name holding ESC / BEL (an OSC that retitles the terminal) is
    refused, and the shell never starts."""
    from hitl_tui.loops.commands import Loop
    from tests.support import until
    from tests.test_loops import _app
    from tests.tui_support import SIZE

    name = "shop\x1b]2;pwned\x07"
    repo = tmp_path / "loops" / name
    shutil.copytree(SHOP, repo)
    (repo / ".git").mkdir()
    started = tmp_path / "shell-started"
    shell = tmp_path / "fake-shell"
    shell.write_text(f"#!/bin/sh\ntouch {started}\n")
    shell.chmod(0o755)
    monkeypatch.setenv("SHELL", str(shell))
    app = _app(tmp_path, Loop((str(tmp_path / "loops" / "*"),)))
    want = (
        f"t refused: {{repo}} holds control characters (\\x1b, \\x07) in "
        f"'{tmp_path}/loops/shop\\x1b]2;pwned\\x07'"
    )
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.inbox_screen.current is not None)
        await pilot.press("t")
        await until(pilot, lambda: any(want == str(n.message) for n in app._notifications))
    assert not started.exists()


def test_the_refusal_names_what_it_found() -> None:
    """Unit: C0, DEL, C1 and a path's undecodable byte are refused; text that only looks odd
    (non-ASCII letters, spaces, quotes, `;`) is not (the argument list keeps it one word)."""
    from hitl_tui.loops.commands import ControlInValue, fill

    template = ("x", "{name}")
    for bad in ["\x00", "\x01", "\t", "\n", "\x1f", "\x7f", "\x80", "\x9f", "\udc9b", "\udce9"]:
        with pytest.raises(ControlInValue) as caught:
            fill(template, {"name": f"a{bad}b"})
        code = ord(bad) - 0xDC00 if ord(bad) >= 0xDC00 else ord(bad)
        assert str(caught.value) == (
            f"{{name}} holds a control character (\\x{code:02x}) in 'a\\x{code:02x}b'"
        )
    odd = "café; rm -rf ~ 'x' \u00a0"
    assert fill(template, {"name": odd}) == ["x", odd]
    # Only what the template uses is looked at.
    assert fill(("x", "{name}"), {"name": "shop", "task_id": "T\x0f"}) == ["x", "shop"]


# -- a restart's output never fills the state folder ----------------------------------------------

#: A loop that floods its output: `yes`-like, about 60 MB/s, for SECONDS; as a shell loop would,
#: it dies of SIGPIPE if its output's reader goes away, and blocks while the pipe is full. Every
#: MiB it says how much it wrote in PROGRESS; at the end `done N`.
WRITER = """\
import os, signal, sys, time
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
progress, seconds = sys.argv[1], float(sys.argv[2])
with open(progress + ".pid", "w") as f:
    f.write(str(os.getpid()))
def say(text):
    with open(progress + ".tmp", "w") as f:
        f.write(text)
    os.replace(progress + ".tmp", progress)
chunk = b"y" * 65535 + b"\\n"
written = 0
end = time.monotonic() + seconds
while time.monotonic() < end:
    written += os.write(1, chunk)
    if written % (1 << 20) == 0:
        say(str(written))
    time.sleep(0.001)
say(f"done {written}")
"""


def _logs() -> list[Path]:
    return sorted((Path(os.environ["HITL_STATE_DIR"]) / "loops").glob("*.log"))


def test_a_restart_whose_loop_floods_its_output_keeps_a_bounded_log(tmp_path: Path) -> None:
    """The restart starts its loop in the background (the normal case) and returns; the loop
    writes ~60 MB/s for 3 s into the output it inherited. hitl returns at once; the log never
    passes 1 MiB while the loop runs; the loop runs on after hitl exited, is never stalled (it
    writes far more than a pipe holds) nor killed (it says `done`)."""
    import sys

    from hitl_tui.loops.commands import MAX_LOG

    repo = tmp_path / "loops" / "shop"
    shutil.copytree(SHOP, repo)
    (repo / ".git").mkdir()
    writer = tmp_path / "writer.py"
    writer.write_text(WRITER)
    progress = tmp_path / "progress"
    restart = ["sh", "-c", '"$0" "$1" "$2" 3 & echo started', sys.executable, writer, progress]
    config = config_for(tmp_path, restart=[str(a) for a in restart])
    try:
        ran = run_hitl("restart", repo / "BLOCKED.md", "--config", config, timeout=30)
        assert ran.returncode == 0, ran.stderr
        assert ran.seconds < 10
        seen: list[str] = []
        deadline = time.monotonic() + 20
        while not seen or not seen[-1].startswith("done"):
            assert time.monotonic() < deadline, f"the loop never said done; it said {seen[-5:]}"
            sizes = [log.stat().st_size for log in _logs()]
            assert all(size <= MAX_LOG for size in sizes), f"a log passed 1 MiB: {sizes}"
            said = progress.read_text() if progress.exists() else ""
            if said and (not seen or said != seen[-1]):
                seen.append(said)
            time.sleep(0.02)
    finally:
        pid = tmp_path / "progress.pid"
        if pid.exists():
            try:
                os.kill(int(pid.read_text()), 9)
            except (ProcessLookupError, ValueError):
                pass
    # It ran on after hitl had exited, writing all along: far more than a pipe holds (64 KiB)
    # and than the log keeps.
    assert len(seen) > 10, seen
    written = int(seen[-1].split()[1])
    assert written > 16 * MAX_LOG, seen[-3:]
    [log] = _logs()
    data = log.read_bytes()
    assert len(data) <= MAX_LOG
    assert data.startswith(b"$ sh -c ") and b"started\n" in data
    assert data.endswith(b"\n[hitl: output past 1 MiB not kept]\n"), data[-200:]
    assert log.stat().st_mode & 0o777 == 0o400  # done: it grows no more


def test_a_restart_that_floods_in_the_foreground_and_fails(tmp_path: Path) -> None:
    """Output past the bound while hitl waits, then exit 3: the log keeps the first of it, says
    the rest was not kept, and ends with hitl's line for the exit."""
    from hitl_tui.loops.commands import MAX_LOG

    repo = tmp_path / "loops" / "shop"
    shutil.copytree(SHOP, repo)
    (repo / ".git").mkdir()
    flood = "head -c 5000000 /dev/zero | tr '\\0' y; exit 3"
    config = config_for(tmp_path, restart=["sh", "-c", flood])
    ran = run_hitl("restart", repo / "BLOCKED.md", "--config", config, timeout=30)
    assert ran.returncode == 1 and b"restart failed (exit 3)" in ran.stderr
    [log] = _logs()
    data = log.read_bytes()
    assert len(data) <= MAX_LOG
    assert b"\n[hitl: output past 1 MiB not kept]\n" in data
    assert data.endswith(b"[hitl: exit 3]\n"), data[-200:]


def test_the_logs_folder_stays_under_its_total(tmp_path: Path) -> None:
    """Old logs of 1 MiB each (150 MiB of them): a restart's new log makes the oldest go until
    the folder holds at most 64 MiB, a log still written counted as 1 MiB; the newest stay."""
    from hitl_tui.loops.commands import MAX_LOG

    repo = tmp_path / "loops" / "shop"
    shutil.copytree(SHOP, repo)
    (repo / ".git").mkdir()
    folder = Path(os.environ["HITL_STATE_DIR"]) / "loops"
    folder.mkdir(mode=0o700)
    for n in range(150):
        old = folder / f"20000101T0000{n // 60:02d}.{n % 60:06d}Z-restart-shop.log"
        with open(old, "wb") as f:
            f.truncate(MAX_LOG - 200)
        old.chmod(0o400 if n % 10 else 0o600)  # one in ten still being written
    config = config_for(tmp_path, restart=["true"])
    for _ in range(3):
        assert run_hitl("restart", repo / "BLOCKED.md", "--config", config).returncode == 0
    logs = _logs()
    assert sum(log.stat().st_size for log in logs) <= 64 << 20  # as the README says
    assert len(logs) <= 200
    kept = [log.name for log in logs if log.name.startswith("2000")]
    assert len(logs) - len(kept) == 3  # the new ones
    assert len(kept) > 40 and kept[-1].startswith("20000101T000002.000029Z")  # the newest old


def _hidden_logs(folder: Path) -> list[str]:
    """Logs removed from `folder` that a process still writes (on disk, seen by nobody)."""
    found = []
    prefix = os.fspath(folder) + os.sep
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith(prefix) and target.endswith(" (deleted)"):
                found.append(target)
    return found


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc to see open logs")
def test_logs_still_being_written_stay_and_the_total_holds_past_64_loops(
    tmp_path: Path,
) -> None:
    """62 loops are writing their logs (held open for writing, as their keepers do) and 20
    finished logs are there: three restarts whose loops go on writing in the background. No log
    still being written is removed (its loop would write on into a file nobody sees, past the
    bound: 80 such restarts hid 16 MiB), the finished ones go first, the new logs get what is
    left of the 64 MiB (the last one none, and says why), and the folder never holds more."""
    from hitl_tui.loops.commands import LOGS_TOTAL, MAX_LOG

    repo = tmp_path / "loops" / "shop"
    shutil.copytree(SHOP, repo)
    (repo / ".git").mkdir()
    folder = Path(os.environ["HITL_STATE_DIR"]) / "loops"
    folder.mkdir(mode=0o700)
    held = []
    for n in range(20):  # finished: the oldest
        old = folder / f"19990101T000000.{n:06d}Z-restart-shop.log"
        old.write_bytes(b"x" * (100 << 10))
        old.chmod(0o400)
    for n in range(62):  # still being written
        log = folder / f"20000101T000000.{n:06d}Z-restart-shop.log"
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.ftruncate(fd, MAX_LOG - 200)
        held.append(fd)
    # Each loop writes a line every 0.1 s for 4 s: its log is being written all that time.
    loop = "(i=0; while [ $i -lt 40 ]; do echo tick $i; i=$((i+1)); sleep 0.1; done) & exit 0"
    config = config_for(tmp_path, restart=["sh", "-c", loop])
    try:
        for _ in range(3):
            ran = run_hitl("restart", repo / "BLOCKED.md", "--config", config, timeout=30)
            assert ran.returncode == 0, ran.stderr
            assert all(os.fstat(fd).st_nlink == 1 for fd in held), "a log being written went"
        new = [log for log in _logs() if not log.name.startswith(("1999", "2000"))]
        assert len(new) == 3
        deadline = time.monotonic() + 20
        while any(log.stat().st_mode & 0o200 for log in new):  # until each keeper is done
            assert time.monotonic() < deadline, [oct(log.stat().st_mode) for log in new]
            assert sum(log.stat().st_size for log in _logs()) <= LOGS_TOTAL
            time.sleep(0.05)
        assert _hidden_logs(folder) == []
        assert sum(log.stat().st_size for log in _logs()) <= LOGS_TOTAL
        assert not [log for log in _logs() if log.name.startswith("1999")]  # went first
        first, second, third = (log.read_bytes() for log in new)
        assert first.startswith(b"$ sh -c ") and first.endswith(b"tick 39\n")  # all of it
        assert second.endswith(b"tick 39\n")
        assert b"0 KiB not kept: 64 other logs are still being written" in third, third[-300:]
    finally:
        for fd in held:
            os.close(fd)


async def test_t_refuses_a_far_shell_in_a_folder_named_with_escapes(
    tmp_path: Path, sshd, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`t` on another machine's block runs ssh into FAR-REPO (its hitl enters it and execs the
    login shell): a far folder named with ESC / BEL is refused in one line, as a local {repo}
    is, and ssh never starts."""
    from hitl_tui.tui.widgets import BlockList
    from tests.support import until
    from tests.test_remote_ssh import loop_repo, write_config
    from tests.test_tui_remote import _app
    from tests.tui_support import SIZE

    config, loops = write_config(tmp_path, sshd)
    loop_repo(loops, "shop\x1b]2;pwned\x07")
    app = _app(config)
    ran: list = []
    real_run = subprocess.run

    def run(argv, *args, **kwargs):
        ran.append(argv)
        return real_run(argv, *args, **kwargs)

    async with app.run_test(size=SIZE) as pilot:
        rows = app.query_one(BlockList)
        await until(pilot, lambda: len(rows.blocks) == 1)
        assert app.inbox_screen.current is not None
        monkeypatch.setattr(subprocess, "run", run)
        await pilot.press("t")
        want = "t refused: {repo} holds control characters (\\x1b, \\x07) in '"
        await until(
            pilot,
            lambda: any(str(n.message).startswith(want) for n in app._notifications),
            what="the refusal",
            saw=lambda: [str(n.message) for n in app._notifications],
        )
        [toast] = [str(n.message) for n in app._notifications if str(n.message).startswith(want)]
        assert "shop\\x1b]2;pwned\\x07" in toast and "\n" not in toast
    assert ran == []


def test_a_refused_restart_after_an_answer_is_restart_failed(tmp_path: Path) -> None:
    """Review of issue 23: the restart `hitl answer` runs, refused (a control character in
    {task_id}), left the answer *waiting* in `hitl status` (exit 0), then *not resumed*: a
    loop nothing restarted shown as one that may resume. It is *restart failed*, saying why
    (exit 5), as when `hitl restart` or the app's restart is refused."""
    value = "T-007\x0ftouch PWNED\x0f"
    task = billing_with(tmp_path, value)
    config = config_for(tmp_path, restart=["echo", "{task_id}"])
    done = run_hitl("answer", task, "--choice", "A", "--config", config)
    assert done.returncode == 0, done.stderr
    status = run_hitl("status", "--json", "--config", config)
    report = json.loads(status.stdout)
    assert report["counts"]["waiting"] == 0, report["counts"]
    assert report["counts"]["restart_failed"] == 1, report["counts"]
    [failed] = report["repos"][0]["restart_failed"]
    assert failed["restart_problem"].startswith("restart refused: {task_id} holds a control")
    assert failed["restart_log"] is None  # nothing ran: no log
    assert status.returncode == 5, status.stderr
