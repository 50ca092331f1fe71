"""The real-OpenSSH harness (tests/sshd.py) does what the remote tests rely on.

A real sshd on 127.0.0.1: a command runs and sees the remote state folder; killing the server
drops an open session at once and refuses new ones, restarting brings it back with the same
host key; a suspended server is noticed by ssh's keepalives; slow-1 is slower by at least its
delay; down-1 fails fast. Nothing is left running after a stop.
"""

from __future__ import annotations

import select
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hitl_tui import __version__
from tests import sshd as sshd_module
from tests.sshd import Sshd


def open_session(server: Sshd, *options: str) -> subprocess.Popen[bytes]:
    """`ssh build-1` running a 30 s sleep, returned once the remote shell said it started."""
    proc = subprocess.Popen(
        [*server.ssh_argv(), *options, "build-1", "echo started; exec sleep 30"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 10)
    if not ready or proc.stdout.readline() != b"started\n":
        proc.kill()
        proc.wait()
        pytest.fail(f"the session did not start: {proc.stderr.read() if proc.stderr else ''}")
    return proc


def wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> tuple[int, float]:
    """(exit status, seconds it took), killing the client if it outlives `timeout`."""
    began = time.monotonic()
    try:
        code = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"ssh was still connected {timeout} s later")
    return code, time.monotonic() - began


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def test_a_command_runs_on_build_1(sshd: Sshd) -> None:
    result = sshd.ssh("build-1", "echo", "ok")
    assert (result.returncode, result.stdout) == (0, "ok\n"), result.stderr
    piped = sshd.ssh("build-1", "tr", "a-z", "A-Z", input="over stdin\n")
    assert piped.stdout == "OVER STDIN\n"


def test_the_remote_session_has_its_own_state_folder(sshd: Sshd) -> None:
    result = sshd.ssh("build-1", 'printf "%s\\n%s\\n" "$HITL_STATE_DIR" "$HITL_CONFIG"')
    assert result.stdout.splitlines() == [str(sshd.remote_state), str(sshd.remote_config)]
    assert sshd.remote_state.is_dir() and sshd.remote_config.is_file()


def test_the_venvs_hitl_runs_on_the_far_side(sshd: Sshd, shop: Path) -> None:
    hitl = str(sshd.remote_hitl())
    assert sshd.ssh("build-1", hitl, "--version").stdout.strip() == f"hitl {__version__}"
    listed = sshd.ssh("build-1", hitl, "list", str(shop))
    assert listed.returncode == 0, listed.stderr
    assert "shop" in listed.stdout


def test_kill_drops_an_open_session_and_restart_brings_the_server_back(sshd: Sshd) -> None:
    session = open_session(sshd)
    assert len(sshd.pids()) >= 3  # the listener, the connection's sshd, the remote sleep
    sshd.kill()
    code, took = wait_exit(session, 5)
    assert code == 255 and took < 3
    assert sshd.pids() == set(), "a process of the killed server is still alive"
    assert refused(sshd.port)
    began = time.monotonic()
    again = sshd.ssh("build-1", "true", timeout=10)
    assert again.returncode == 255 and time.monotonic() - began < 3

    known_hosts = sshd.known_hosts.read_bytes()
    sshd.restart()
    back = sshd.ssh("build-1", "echo", "ok")  # StrictHostKeyChecking: the same host key
    assert (back.returncode, back.stdout) == (0, "ok\n"), back.stderr
    assert sshd.known_hosts.read_bytes() == known_hosts


def test_a_suspended_server_is_noticed_by_keepalives(sshd: Sshd) -> None:
    session = open_session(sshd, "-o", "ServerAliveInterval=1", "-o", "ServerAliveCountMax=2")
    sshd.suspend()
    try:
        code, took = wait_exit(session, 8)
        assert code == 255 and took < 5
        assert session.stderr is not None and b"Timeout" in session.stderr.read()
        began = time.monotonic()
        hangs = sshd.ssh("build-1", "true", options=["-o", "ConnectTimeout=1"], timeout=10)
        assert hangs.returncode == 255 and time.monotonic() - began < 5
    finally:
        sshd.resume()
    back = sshd.ssh("build-1", "echo", "ok")
    assert (back.returncode, back.stdout) == (0, "ok\n"), back.stderr


def test_slow_1_costs_at_least_its_delay_per_round_trip(sshd: Sshd) -> None:
    delay = sshd.slow_delay_ms / 1000
    began = time.monotonic()
    assert sshd.ssh("build-1", "true").returncode == 0
    fast = time.monotonic() - began

    # A remote `cat` over slow-1: the first line's echo waits for the connection too (several
    # round trips), each later line is one round trip, 2 x the delay.
    began = time.monotonic()
    echo = subprocess.Popen(
        [*sshd.ssh_argv(), "slow-1", "exec cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert echo.stdin is not None and echo.stdout is not None
    try:
        trips = []
        for line in (b"hello\n", b"one\n", b"two\n"):
            echo.stdin.write(line)
            echo.stdin.flush()
            assert select.select([echo.stdout], [], [], 10)[0], "no echo over slow-1"
            assert echo.stdout.readline() == line
            trips.append(time.monotonic() - began)
            began = time.monotonic()
        assert trips[0] - fast >= 3 * 2 * delay, (fast, trips)
        assert all(2 * delay <= trip < 2 * delay + 2 for trip in trips[1:]), trips
        # Bulk data arrives whole and in order (the relay holds chunks, it never reorders).
        bulk = b"".join(b"%d\n" % n for n in range(200_000))
        out, _ = echo.communicate(bulk, timeout=30)
        assert out == bulk and echo.returncode == 0
    finally:
        if echo.poll() is None:
            echo.kill()
            echo.wait()


def test_down_1_fails_fast(sshd: Sshd) -> None:
    began = time.monotonic()
    result = sshd.ssh("down-1", "true", timeout=10)
    assert result.returncode == 255 and time.monotonic() - began < 3
    assert "refused" in result.stderr


def test_stop_leaves_nothing_running(tmp_path: Path) -> None:
    if reason := sshd_module.unavailable_reason():
        pytest.skip(reason)
    server = Sshd(tmp_path).start()
    session = open_session(server)
    server.suspend()  # even a stopped server and its sessions go
    server.stop()
    assert wait_exit(session, 5)[0] == 255
    assert server.pids() == set()
    assert refused(server.port)
    server.stop()  # twice is harmless


def test_no_sshd_outlives_a_test_process_that_dies(tmp_path: Path) -> None:
    if reason := sshd_module.unavailable_reason():
        pytest.skip(reason)
    crash = (
        "import os, sys; from pathlib import Path; from tests.sshd import Sshd; "
        "s = Sshd(Path(sys.argv[1])).start(); print(s.proc.pid, s.port, flush=True); os._exit(1)"
    )
    child = subprocess.run(
        [sys.executable, "-c", crash, str(tmp_path)],
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        timeout=30,
    )
    pid, port = map(int, child.stdout.split())
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid), "the sshd of a dead test process is still running"
    assert refused(port)


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2 :].split()[0] != b"Z"


def test_the_skip_says_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sshd_module, "SSHD", Path("/nonexistent/sshd"))
    assert "/nonexistent/sshd is missing" in (sshd_module.unavailable_reason() or "")
