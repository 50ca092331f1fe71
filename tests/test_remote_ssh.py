"""`[[remote]]` against a real OpenSSH server on 127.0.0.1 (tests/sshd.py) and the hitl of this
venv on the far side: list, live changes, answer, undo, a server killed and restarted, a host
that hangs, a slow link, a hitl too old, and an answer whose connection drops."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hitl_tui import __version__, journal
from hitl_tui.config import load_config
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.model import Answer, HitlError
from hitl_tui.sources.ssh.backend import SshBackend, control_dir
from tests.conftest import FIXTURES
from tests.sshd import Sshd
from tests.support import until

HITL = [sys.executable, "-m", "hitl_tui"]
QUESTION = "Should deleting a workspace also delete its archived invoices"


def loop_repo(folder: Path, name: str = "shop") -> Path:
    repo = folder / name
    shutil.copytree(FIXTURES / "loopkit-shop", repo)
    (repo / ".git").mkdir()
    return repo


def blocked(folder: Path, name: str, question: str) -> Path:
    repo = folder / name
    (repo / ".git").mkdir(parents=True, exist_ok=True)
    (repo / "BLOCKED.md").write_text(
        f"# Blocked\n\n## Question:\n{question}\n\n## Choices:\n- A) yes\n- B) no\n"
    )
    return repo


def write_config(
    tmp_path: Path, server: Sshd, host: str = "build-1", hitl: str | None = None
) -> tuple[Path, Path]:
    """The operator's config naming `host`, and the far side's folder of loops."""
    loops = server.tmp / "far" / "loops"
    loops.mkdir(parents=True, exist_ok=True)
    local = tmp_path / "here"
    local.mkdir(exist_ok=True)
    config = tmp_path / "config.toml"
    ssh = json.dumps(server.ssh_argv())
    config.write_text(
        f'repos = [{json.dumps(str(local))}]\noperator = "Ada"\n'
        f"[[remote]]\nhost = {json.dumps(host)}\npaths = [{json.dumps(str(loops))}]\n"
        f"hitl = {json.dumps(hitl or str(server.remote_hitl()))}\nssh = {ssh}\n"
    )
    return config, loops


def hitl(config: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "HITL_CONFIG": str(config)}
    return subprocess.run([*HITL, *args], capture_output=True, text=True, env=env, timeout=timeout)


# -- the commands ----------------------------------------------------------------------------


def test_list_answer_and_undo_a_block_on_another_machine(tmp_path: Path, sshd: Sshd):
    config, loops = write_config(tmp_path, sshd)
    shop = loop_repo(loops)
    blocked(tmp_path / "here", "api", "Local question?")
    before = {p.name: p.read_bytes() for p in shop.iterdir() if p.is_file()}

    out = hitl(config, "list")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert any(line.startswith("build-1:shop ") and QUESTION in line for line in lines)
    assert any(line.startswith("api ") for line in lines)
    listed = json.loads(hitl(config, "list", "--json").stdout)
    remote = next(b for b in listed if b["id"] == "build-1:shop")
    assert remote["source"] == "remote" and remote["path"] == f"build-1:{shop / 'BLOCKED.md'}"

    preview = hitl(config, "answer", "build-1:shop", "--choice", "B", "--dry-run")
    assert preview.returncode == 0, preview.stderr
    assert "written on build-1 by its hitl" in preview.stdout
    assert "+- " in preview.stdout and "B) Keep invoices" in preview.stdout
    assert {p.name: p.read_bytes() for p in shop.iterdir() if p.is_file()} == before

    out = hitl(config, "answer", "build-1:shop", "--choice", "B")
    assert out.returncode == 0, out.stderr
    assert "on build-1: removed BLOCKED.md" in out.stdout
    assert not (shop / "BLOCKED.md").exists()
    assert "B) Keep invoices" in (shop / "PROMPT.md").read_text()
    assert "Ada" in (shop / "IMPLEMENTATION_PLAN.md").read_text()  # who answered, from here

    again = hitl(config, "answer", "build-1:shop", "--choice", "B")
    assert again.returncode == 2 and "no open block" in again.stderr  # never twice

    history = hitl(config, "history")
    assert "build-1:shop (remote)" in history.stdout and "Ada" in history.stdout
    out = hitl(config, "undo")
    assert out.returncode == 0, out.stderr
    assert "on build-1: undid" in out.stdout
    assert {p.name: p.read_bytes() for p in shop.iterdir() if p.is_file()} == before
    assert "undone by Ada" in hitl(config, "history").stdout
    # the far side journaled it too, with its own journal
    far = sshd.ssh("build-1", str(sshd.remote_hitl()), "history", "--json")
    [far_entry] = json.loads(far.stdout)
    assert far_entry["status"] == "done" and far_entry["undone_operator"] == "Ada"


def test_an_unreachable_host_is_one_line_and_the_rest_is_listed(tmp_path: Path, sshd: Sshd):
    config, _loops = write_config(tmp_path, sshd, host="down-1")
    blocked(tmp_path / "here", "api", "Local question?")
    started = time.monotonic()
    out = hitl(config, "list")
    assert time.monotonic() - started < 20
    assert out.returncode == 0
    assert out.stdout.startswith("api ")
    assert out.stderr.strip() == (
        "hitl: down-1: unreachable (connection refused) (its blocks are not listed)"
    )


@pytest.mark.parametrize("app_open", [False, True], ids=["alone", "app-connected"])
def test_a_host_that_hangs_holds_list_and_status_only_for_its_bound(
    tmp_path: Path, sshd: Sshd, app_open: bool
):
    """A host whose sshd accepts the connection and never answers (SIGSTOP): `hitl list` and
    `hitl status` (a status bar's) wait `list_timeout_seconds` for it, name it, and print the
    local blocks. With the app open, its connection to the host (the one the commands share,
    ssh's ControlMaster) hung too: they waited 60 s."""
    config, loops = write_config(tmp_path, sshd)
    loop_repo(loops)
    blocked(tmp_path / "here", "api", "Local question?")
    out = hitl(config, "answer", "build-1:shop", "--choice", "B")  # an answer waiting there
    assert out.returncode == 0, out.stderr
    config.write_text(config.read_text() + "list_timeout_seconds = 2\n")
    master = None
    if app_open:  # the connection the app's watch holds, which the commands reuse
        control = control_dir()
        assert control is not None
        options = ["ControlMaster=yes", f"ControlPath={control}/%C", "ControlPersist=no"]
        words = [w for o in options for w in ("-o", o)]
        master = subprocess.Popen(
            [*sshd.ssh_argv(), *words, "-N", "build-1"], stdin=subprocess.DEVNULL
        )
        shared = [*sshd.ssh_argv(), "-o", f"ControlPath={control}/%C", "-O", "check", "build-1"]
        deadline = time.monotonic() + 15
        while subprocess.run(shared, capture_output=True).returncode != 0:
            assert time.monotonic() < deadline, "the shared connection did not come up"
            time.sleep(0.05)
    try:
        sshd.suspend()
        said = "hitl: build-1: no answer within 2 s (its blocks are not listed)"
        for args in (("list",), ("status", "--json")):
            started = time.monotonic()
            try:
                out = hitl(config, *args, timeout=20)
            except subprocess.TimeoutExpired:
                pytest.fail(f"hitl {' '.join(args)} still waits for the hung host after 20 s")
            took = time.monotonic() - started
            assert took < 2 + 5, f"hitl {' '.join(args)} took {took:.1f} s"
            assert out.returncode == 0, out.stderr
            assert said in out.stderr.splitlines(), out.stderr
            if args == ("list",):
                assert out.stdout.splitlines()[0].startswith("api "), out.stdout
            else:
                status = json.loads(out.stdout)
                assert status["counts"]["open"] == 1 and status["counts"]["waiting"] == 1, status
                assert [r["name"] for r in status["repos"] if r["open"]["count"]] == ["api"]
    finally:
        if master is not None:
            master.kill()
            master.wait(5)


# -- the watch (what the app runs) -----------------------------------------------------------


class Watch:
    """The backend's `watch` in this event loop, its updates kept."""

    def __init__(self, config: Path, alive: float = 0.5) -> None:
        [self.backend] = load_config(config).remotes
        assert isinstance(self.backend, SshBackend)
        self.backend.alive_every = alive
        self.inbox = Inbox.open([])
        self.updates: list[tuple[str, str, str]] = []
        self.stop = asyncio.Event()
        self.task: asyncio.Task | None = None

    async def on_update(self, scope, state, message, delta) -> None:
        self.updates.append((scope, state, message))

    def __enter__(self) -> Watch:
        self.task = asyncio.ensure_future(self.backend.watch(self.inbox, self.on_update, self.stop))
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()

    async def close(self) -> None:
        self.stop.set()
        assert self.task is not None
        await asyncio.wait_for(self.task, 15)

    def ids(self) -> list[str]:
        return sorted(b.id for b in self.inbox.blocks.values())

    async def until(self, condition, seconds: float = 30, what: str = "") -> None:
        await until(None, condition, seconds, what=what, saw=lambda: self.updates[-5:])

    def state(self) -> tuple[str, str]:
        return self.updates[-1][1:] if self.updates else ("", "")


async def test_live_changes_a_server_killed_and_restarted(tmp_path: Path, sshd: Sshd):
    config, loops = write_config(tmp_path, sshd)
    loop_repo(loops)
    watch = Watch(config)
    with watch:
        await watch.until(lambda: watch.ids() == ["build-1:shop"], what="the list")
        assert watch.state() == ("ok", "connected, 1 block")

        blocked(loops, "api", "Ship on Friday?")
        await watch.until(lambda: "build-1:api" in watch.ids(), what="a new block there")
        api = next(b for b in watch.inbox.blocks.values() if b.id == "build-1:api")
        assert api.question == "Ship on Friday?"

        sshd.kill()
        await watch.until(
            lambda: watch.state()[0] == "unreachable" and "retrying in" in watch.state()[1],
            what="unreachable",
        )
        assert watch.ids() == ["build-1:api", "build-1:shop"]  # still listed, as last known
        # while it is down, the loops move on
        (loops / "api" / "BLOCKED.md").unlink()
        blocked(loops, "web", "Which CDN?")
        sshd.restart()
        watch.backend.refresh_soon()
        await watch.until(
            lambda: watch.ids() == ["build-1:shop", "build-1:web"], what="resynchronised"
        )
        assert watch.state()[0] == "ok"
        assert len(watch.inbox.blocks) == 2  # nothing twice, nothing lost
    await watch.close()


async def test_a_host_that_hangs_is_noticed_and_comes_back(tmp_path: Path, sshd: Sshd):
    config, loops = write_config(tmp_path, sshd)
    loop_repo(loops)
    watch = Watch(config, alive=0.5)
    with watch:
        await watch.until(lambda: watch.ids() == ["build-1:shop"], what="the list")
        sshd.suspend()
        began = time.monotonic()
        await watch.until(lambda: watch.state()[0] == "unreachable", seconds=20, what="hang")
        assert time.monotonic() - began < 12
        sshd.resume()
        watch.backend.refresh_soon()
        await watch.until(lambda: watch.state()[0] == "ok", seconds=30, what="back")
        assert watch.ids() == ["build-1:shop"]
    await watch.close()


async def test_a_slow_link_still_lists_and_follows(tmp_path: Path, sshd: Sshd):
    config, loops = write_config(tmp_path, sshd, host="slow-1")
    loop_repo(loops)
    watch = Watch(config)
    with watch:
        await watch.until(lambda: watch.ids() == ["slow-1:shop"], seconds=60, what="the list")
        blocked(loops, "api", "Ship on Friday?")
        await watch.until(lambda: "slow-1:api" in watch.ids(), seconds=30, what="a change")
    await watch.close()


async def test_a_hitl_too_old_there_is_one_line_naming_both_versions(tmp_path: Path, sshd: Sshd):
    old = sshd.tmp / "old-hitl"
    old.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = --version ]; then echo "hitl 0.0.9"; exit 0; fi\n'
        'echo "usage: hitl list [-h] [--json] [PATH ...]" >&2\n'
        'echo "hitl list: error: unrecognized arguments: --watch --alive" >&2\n'
        "exit 2\n"
    )
    old.chmod(0o755)
    config, _loops = write_config(tmp_path, sshd, hitl=str(old))
    watch = Watch(config)
    with watch:
        await watch.until(lambda: watch.state()[0] == "error", what="the version problem")
    await watch.close()
    message = watch.state()[1]
    assert message.startswith(
        f"its hitl 0.0.9 is too old for the remote protocol 1 (this hitl is {__version__})"
    )
    assert "retrying in 300 s" in message


# -- an answer whose connection drops ---------------------------------------------------------


def _hitl_that_stops(sshd: Sshd, before: bool, command: str = "answer") -> Path:
    """A hitl there that, for `command` (not --dry-run), signals and waits before (or after)
    the real one runs: the test kills the server at that moment. (It reads the words as the
    real one does: `--argv ENCODED`.)"""
    script = sshd.tmp / "pausing-hitl"
    mark = sshd.tmp / "paused"
    real = str(sshd.remote_hitl())
    script.write_text(
        f"#!{sys.executable}\n"
        "import os, subprocess, sys, time\n"
        "from hitl_tui.sources.ssh import wire\n"
        "words = sys.argv[1:]\n"
        "if words[:1] == [wire.ARGV]: words = wire.decode_argv(words[1:])\n"
        f"real, mark, before = {real!r}, {str(mark)!r}, {before!r}\n"
        f"if words[:1] != [{command!r}] or '--dry-run' in words:\n"
        "    os.execv(real, [real, *words])\n"
        "def pause():\n"
        "    open(mark, 'w').close(); time.sleep(30)\n"
        "if before: pause()\n"
        "code = subprocess.call([real, *words])\n"
        "if not before: pause()\n"
        "sys.exit(code)\n"
    )
    script.chmod(0o755)
    return script


def _kill_when_paused(sshd: Sshd) -> threading.Thread:
    mark = sshd.tmp / "paused"

    def kill() -> None:
        deadline = time.monotonic() + 30
        while not mark.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        sshd.kill()

    killer = threading.Thread(target=kill)
    killer.start()
    return killer


@pytest.mark.parametrize("written", [False, True])
def test_an_answer_whose_connection_drops_says_what_is_known(
    tmp_path: Path, sshd: Sshd, written: bool
):
    config, loops = write_config(tmp_path, sshd)
    config, loops = write_config(tmp_path, sshd, hitl=str(_hitl_that_stops(sshd, not written)))
    shop = loop_repo(loops)
    [backend] = load_config(config).remotes
    backend.settle_waits = (0.2, 0.2)
    backend.far_lifetime = 0  # the hitl there was killed with the server: it writes no more
    backend.keeps_pending = True  # as the app does
    [block] = backend._read_host(backend.hosts["build-1"])
    plan = backend.plan(block, Answer(choice=block.choices[1], operator="Ada"))

    killer = _kill_when_paused(sshd)
    with pytest.raises(HitlError) as err:
        backend.send(plan)
    killer.join()
    assert "whether the answer was written is not known yet" in str(err.value)
    assert (shop / "BLOCKED.md").exists() is not written

    # The operator quits; the host comes back; the next app asks that machine's journal.
    sshd.restart()
    [backend] = load_config(config).remotes
    backend.far_lifetime = 0
    backend.load_pending()
    said = backend.settle_pending(backend.hosts["build-1"])
    if written:
        # The line names the far journal's entry, the one journaled here for that answer.
        [entry] = journal.history()
        assert entry.block_id == "build-1:shop" and entry.sent["host"] == "build-1"
        far_entry = entry.sent["entry"]
        assert far_entry
        assert said == [f"the answer to build-1:shop was written ({far_entry})"]
    else:
        assert said == ["the answer to build-1:shop was not written (answer again)"]
        assert journal.history() == []
    assert backend.settle_pending(backend.hosts["build-1"]) == []  # said once


@pytest.mark.parametrize("undone", [False, True])
def test_an_undo_whose_connection_drops_is_told_and_can_be_given_again(
    tmp_path: Path, sshd: Sshd, undone: bool
):
    """The connection drops during `u` (before, or after, the hitl there undid it): hitl says
    it cannot tell, never "nothing was undone"; undoing again once the host is back undoes it,
    or finds it undone there, and the journal here records the undo once."""
    from hitl_tui.journal.undo import undo

    config, loops = write_config(tmp_path, sshd)
    shop = loop_repo(loops)
    original = (shop / "BLOCKED.md").read_bytes()
    out = hitl(config, "answer", "build-1:shop", "--choice", "B")
    assert out.returncode == 0, out.stderr
    [answer] = journal.history()

    pausing = _hitl_that_stops(sshd, before=not undone, command="undo")
    config, _ = write_config(tmp_path, sshd, hitl=str(pausing))
    [backend] = load_config(config).remotes
    backend.settle_waits = (0.2, 0.2)
    killer = _kill_when_paused(sshd)
    with pytest.raises(HitlError) as err:
        undo(answer.id, "Ada", sources=[backend])
    killer.join()
    assert "not known yet: 'hitl history' on build-1 says (undoing again is safe)" in str(err.value)
    assert ((shop / "BLOCKED.md").exists()) is undone
    assert not journal.history()[0].undone  # nothing recorded here yet

    sshd.restart()
    config, _ = write_config(tmp_path, sshd)  # the hitl there no longer pauses
    said = undo(answer.id, "Ada", sources=load_config(config).remotes)
    expected = "it was already undone there" if undone else "on build-1: "
    assert expected in str(said)
    assert (shop / "BLOCKED.md").read_bytes() == original
    [entry] = journal.history()
    assert entry.undone


def test_whether_the_loop_resumed_there_is_asked_of_that_machine(tmp_path: Path, sshd: Sshd):
    config, loops = write_config(tmp_path, sshd)
    shop = loop_repo(loops)
    out = hitl(config, "answer", "build-1:shop", "--choice", "B")
    assert out.returncode == 0, out.stderr
    status = json.loads(hitl(config, "status", "--json").stdout)
    assert status["counts"]["waiting"] == 1 and status["counts"]["resumed"] == 0

    with (shop / "PROMPT.md").open("a") as f:  # the loop there reads the decision and moves on
        f.write("\n## Progress\n- step 3 done\n")
    status = json.loads(hitl(config, "status", "--json").stdout)
    assert status["counts"]["resumed"] == 1, status
    [row] = [r for r in status["repos"] if r["resumed"]]
    [answer] = row["resumed"]
    assert answer["id"] == "build-1:shop"
    assert answer["how"].endswith("(on build-1)") and "PROMPT.md" in answer["how"]


def test_t_opens_a_shell_in_the_repository_there(tmp_path: Path, sshd: Sshd):
    config, loops = write_config(tmp_path, sshd)
    shop = loop_repo(loops)
    [backend] = load_config(config).remotes
    [block] = backend._read_host(backend.hosts["build-1"])
    argv = backend.shell_argv(block)
    assert argv[:3] == [*sshd.ssh_argv()[:1], "-F", str(sshd.config)]
    assert "-t" in argv and argv[-2] == "build-1"
    # no terminal here, so ssh allocates none; the shell there reads our commands
    out = subprocess.run(
        argv, input="pwd\nexit\n", capture_output=True, text=True, timeout=30, env=os.environ
    )
    assert out.stdout.strip().splitlines()[-1] == str(shop)
