"""Past the kernel's limit on inotify watches (`fs.inotify.max_user_watches`), no repository is
missed silently: hitl says once how many it could not watch and the sysctl that raises the
limit, and polls them every `watch.POLL_EVERY` seconds, so a block written there still shows.

The limit is met for real: `inotify_add_watch` made to fail with ENOSPC by strace from the Nth
call on (a real `hitl list --json --watch`), or a lowered limit in a private user namespace
(`/proc/sys/user/max_inotify_watches`, which binds that namespace alone). The app's header and
notice are checked through Pilot, with watchfiles refusing past a count as it does (the same
error, the same words).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hitl_tui.inbox import watch as watch_module
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.inbox.watch import POLL_EVERY, SUGGESTED_WATCHES, watch_inbox
from tests.support import until, until_sync
from tests.support.pilot import settle, static_text
from tests.tui_support import SIZE, make_app

HITL = [sys.executable, "-m", "hitl_tui"]
BLOCK = "# Blocked\n\n## Question:\n{q}\n\n## Choices:\n- A) yes\n- B) no\n"
SYSCTL = f"sudo sysctl fs.inotify.max_user_watches={SUGGESTED_WATCHES}"
#: A polled block shows within POLL_EVERY; this much more for a loaded 2-core machine (a
#: watched one shows in ~50 ms, an unpolled one only at the next 30 s catch-up).
LATE = 1.0


def fleet(root: Path, count: int) -> list[Path]:
    repos = []
    for i in range(count):
        repo = root / f"repo-{i:02d}"
        (repo / ".git").mkdir(parents=True)
        (repo / "PROMPT.md").write_text("# PROMPT.md\n")
        repos.append(repo)
    return repos


def write_block(repo: Path, question: str) -> float:
    """An agent's atomic write of a BLOCKED.md; when it was made (monotonic)."""
    tmp = repo / ".BLOCKED.md.tmp"
    tmp.write_text(BLOCK.format(q=question))
    os.replace(tmp, repo / "BLOCKED.md")
    return time.monotonic()


class Stream:
    """A running `hitl list --json --watch` (under `wrap`), its lines and stderr read by threads,
    each line stamped with when it came."""

    def __init__(self, wrap: list[str], root: Path) -> None:
        self.proc = subprocess.Popen(
            [*wrap, *HITL, "list", "--json", "--watch", "--alive", "5", str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: list[tuple[float, dict]] = []
        self.errors: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_errors, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), json.loads(line)))

    def _read_errors(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.errors.append(line.decode("utf-8", "replace"))

    def added(self, repo: Path) -> float | None:
        """When the block of `repo` was first streamed, if it was."""
        path = str(repo / "BLOCKED.md")
        for at, event in list(self.lines):
            if event.get("event") == "added" and event["block"]["path"] == path:
                return at
        return None

    def saw(self) -> str:
        events = [e.get("event") for _, e in self.lines]
        return f"events {events}; stderr {''.join(self.errors)[-2000:]!r}"

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(5)


def said(stream: Stream) -> list[str]:
    return [line for line in stream.errors if "could not be watched" in line]


def check_polled(stream: Stream, repos: list[Path]) -> None:
    """The limit said once on stderr and in the stream's warnings; a block written into a
    repository past it (the last ones are) shows within the poll interval, twice over."""
    until_sync(lambda: stream.lines, 20, what="the list", saw=stream.saw)
    until_sync(lambda: said(stream), 20, what="the watch limit said", saw=stream.saw)
    message = said(stream)[0]
    assert message.startswith("hitl: "), message
    assert f"of {len(repos)} repositories could not be watched" in message, message
    assert "fs.inotify.max_user_watches" in message and SYSCTL in message, message
    assert "/etc/sysctl.d/" in message, message  # how to keep it after a reboot
    assert f"polled every {POLL_EVERY:g} s" in message, message
    warned = until_sync(
        lambda: [e for _, e in stream.lines if e.get("event") == "warnings" and e.get("warnings")],
        10,
        what="a warnings event",
        saw=stream.saw,
    )
    assert warned[0]["warnings"][0] == message.removeprefix("hitl: ").strip()
    for repo, question in ((repos[-1], "Past the limit?"), (repos[-2], "And this one?")):
        written = write_block(repo, question)
        seen = until_sync(
            lambda repo=repo: stream.added(repo),
            POLL_EVERY + 10,
            every=0.01,
            what=f"{repo.name}'s block streamed",
            saw=stream.saw,
        )
        assert seen - written <= POLL_EVERY + LATE, (repo.name, seen - written)
    assert len(said(stream)) == 1, stream.errors  # once


def strace_works() -> str | None:
    if shutil.which("strace") is None:
        return "strace is not installed"
    out = subprocess.run(
        ["strace", "-f", "-qq", "-o", os.devnull, "-e", "trace=none", "true"],
        capture_output=True,
        text=True,
    )
    return None if out.returncode == 0 else f"strace cannot trace here: {out.stderr.strip()}"


def test_enospc_from_the_sixth_watch_on_is_said_once_and_the_rest_polled(tmp_path: Path):
    why = strace_works()
    if why:
        pytest.skip(why)
    root = tmp_path / "loops"
    repos = fleet(root, 12)  # 13 folders to watch: the root, then each repository
    wrap = [
        "strace",
        "-f",
        "-qq",
        "-o",
        os.devnull,
        "-e",
        "trace=inotify_add_watch",
        "-e",
        "inject=inotify_add_watch:error=ENOSPC:when=6+",
    ]
    stream = Stream(wrap, root)
    try:
        check_polled(stream, repos)
    finally:
        stream.close()


def userns_limit_works() -> str | None:
    if shutil.which("unshare") is None:
        return "unshare is not installed"
    out = subprocess.run(
        ["unshare", "-U", "-r", "sh", "-c", "echo 6 > /proc/sys/user/max_inotify_watches"],
        capture_output=True,
        text=True,
    )
    if out.returncode:
        return f"no private user namespace with its own watch limit: {out.stderr.strip()}"
    return None


def test_a_lowered_limit_in_a_private_user_namespace_is_said_once_and_the_rest_polled(
    tmp_path: Path,
):
    why = userns_limit_works()
    if why:
        pytest.skip(why)
    root = tmp_path / "loops"
    repos = fleet(root, 12)
    # The namespace's own limit (`user.max_inotify_watches`): it binds this process alone,
    # nothing else on the machine.
    wrap = [
        "unshare",
        "-U",
        "-r",
        "sh",
        "-c",
        'echo 6 > /proc/sys/user/max_inotify_watches && exec "$@"',
        "sh",
    ]
    stream = Stream(wrap, root)
    try:
        check_polled(stream, repos)
        message = said(stream)[0]
        assert "7 of 12 repositories could not be watched" in message, message
    finally:
        stream.close()


def refusing_past(limit: list[int], refusals: list[str] | None = None):
    """watchfiles' awatch, refusing the watch of the folder past `limit[0]` as it does past the
    kernel's limit (the error it raises for notify's MaxFilesWatch, its very words)."""
    real = watch_module.watchfiles.awatch

    def limited(*paths: str, **kwargs):
        if len(paths) > limit[0]:
            refused = json.dumps(paths[limit[0]])
            if refusals is not None:
                refusals.append(paths[limit[0]])

            async def refuse():
                raise OSError(
                    f"OS file watch limit reached. about [{refused}] "
                    f"(Error {{ kind: MaxFilesWatch, paths: [{refused}] }})"
                )
                yield

            return refuse()
        return real(*paths, **kwargs)

    return limited


async def test_once_the_limit_is_raised_every_folder_is_watched_again(tmp_path: Path, monkeypatch):
    """The operator runs the sysctl the message gives: within a catch-up's interval the watch
    starts again over every folder, and says none is polled now."""
    limit = [4]
    monkeypatch.setattr(watch_module.watchfiles, "awatch", refusing_past(limit))
    monkeypatch.setattr(watch_module, "max_user_watches", lambda: limit[0])
    monkeypatch.setattr(watch_module, "CATCH_UP_EVERY", 0.3)
    root = tmp_path / "loops"
    repos = fleet(root, 8)
    inbox = Inbox.open([root])
    said: list = []
    stop = asyncio.Event()
    task = asyncio.create_task(watch_inbox(inbox, lambda delta: None, stop, on_limit=said.append))
    try:
        await until(None, lambda: said and said[-1] is not None, 10, saw=lambda: said)
        assert said[-1].repos == 5 and len(inbox.polled) == 5
        limit[0] = 100  # sudo sysctl fs.inotify.max_user_watches=...
        await until(None, lambda: said[-1] is None, 10, saw=lambda: said)
        assert inbox.polled == frozenset() and inbox.watch_warning is None
        assert inbox.warnings == []
        written = write_block(repos[-1], "Watched now?")
        await until(
            None, lambda: any(b.repo == repos[-1] for b in inbox.blocks.values()), 10, every=0.01
        )
        assert time.monotonic() - written < POLL_EVERY / 2  # by its event, not a poll
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


async def test_the_app_says_it_once_in_a_notice_and_its_header(tmp_path: Path, monkeypatch):
    """watchfiles refusing the fifth folder on, as it does past the limit (the error it raises
    for notify's MaxFilesWatch): a notice with the sysctl, once; the header counts the polled
    repositories; a block written in one shows within the interval."""
    refusals: list[str] = []
    monkeypatch.setattr(watch_module.watchfiles, "awatch", refusing_past([4], refusals))
    root = tmp_path / "loops"
    repos = fleet(root, 8)  # the root and three repositories watched, five polled
    app = make_app([root], watch=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)

        def notices() -> list[str]:
            return [n.message for n in app._notifications if "could not be watched" in n.message]

        await until(pilot, notices, 10, what="the notice", saw=lambda: app._notifications)
        await until(
            pilot,
            lambda: "watching 8 repos (5 polled every 2 s)" in static_text(app, "#topbar"),
            5,
            saw=lambda: static_text(app, "#topbar"),
        )
        assert "5 of 8 repositories could not be watched" in notices()[0]
        assert SYSCTL in notices()[0]
        written = write_block(repos[-1], "Polled?")
        await until(
            pilot,
            lambda: any(b.repo == repos[-1] for b in app.inbox.blocks.values()),
            POLL_EVERY + 10,
            every=0.02,
            what="the polled repository's block",
        )
        assert time.monotonic() - written <= POLL_EVERY + LATE
        assert "watching 8 (5 polled every 2 s)" in static_text(app, "#topbar")
        assert len(notices()) == 1  # once (not again with the warnings' toasts)
        app.stop_event.set()
    assert refusals


def test_hitl_listen_says_it_once_and_notices_a_block_in_a_polled_repository(tmp_path: Path):
    """`hitl listen` (a server, a systemd unit: nobody at a terminal) past the limit: one line
    in its log, and a block written into a repository it could not watch is still a notice."""
    why = strace_works()
    if why:
        pytest.skip(why)
    root = tmp_path / "loops"
    repos = fleet(root, 12)
    out = tmp_path / "notices.txt"
    code = "import sys; open(sys.argv[1], 'a').write(sys.stdin.read() + '\\n')"
    config = tmp_path / "config.toml"
    config.write_text(
        f"repos = {json.dumps([str(root)])}\n[notify]\ndesktop = false\n"
        f"command = {json.dumps([sys.executable, '-c', code, str(out)])}\n"
    )
    err = tmp_path / "listen.err"
    proc = subprocess.Popen(
        [
            *("strace", "-f", "-qq", "-o", os.devnull, "-e", "trace=inotify_add_watch"),
            *("-e", "inject=inotify_add_watch:error=ENOSPC:when=6+"),
            *(*HITL, "listen", "--config", str(config)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=err.open("wb"),
        start_new_session=True,  # SIGTERM to hitl listen itself, not only to strace
    )

    def log() -> str:
        return err.read_text(errors="replace")

    try:
        until_sync(lambda: "could not be watched" in log(), 30, what="the limit said", saw=log)
        write_block(repos[-1], "Past the limit, from listen?")
        until_sync(
            lambda: out.exists() and "Past the limit, from listen?" in out.read_text(),
            POLL_EVERY + 15,
            what="the polled repository's notice",
            saw=log,
        )
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    lines = [line for line in log().splitlines() if "could not be watched" in line]
    assert len(lines) == 1, log()
    assert lines[0].startswith("hitl listen: ") and SYSCTL in lines[0], lines[0]
