"""A real OpenSSH server on 127.0.0.1 for the remote tests, with everything in a temp folder.

`Sshd(tmp_path)` makes a throwaway host key, user key, `authorized_keys`, `sshd_config` and a
client `ssh_config` naming three hosts:

- `build-1`: the server, straight;
- `slow-1`:  the same server through `tests/ssh_slowlink.py`, a relay that holds every chunk
  for `slow_delay_ms` in both directions (a slow link);
- `down-1`:  127.0.0.1 on a port nothing listens on (an unreachable host).

`ssh_argv()` is the ssh command that reads that config; `remote_hitl()` the `hitl` of this
venv to run on the far side. Sessions get `HITL_STATE_DIR` and `HITL_CONFIG` pointing into the
temp folder (`SetEnv`), so the remote hitl never touches the user's own state.

The server can be killed (sshd and every session process it forked, SIGKILL: open connections
drop as if the host crashed), restarted on the same port with the same host key, suspended
(SIGSTOP: a host that hangs) and resumed. Every process of one server carries a tag in its
environment, so `stop()` finds them all, even those orphaned by a kill, and leaves none.

`Sshd(tmp_path, login_shell="/usr/bin/fish")` gives the far user another login shell (and the
home folder `home` in the temp folder) without touching the machine's /etc/passwd: sshd runs
in a private mount namespace (`unshare --mount`, root only) where a copy of /etc/passwd with
that user's line changed is bind-mounted over it. `login_shell_reason(shell)` says why that
cannot be had here, or None.

The `sshd` fixture skips, with the reason, only where a server cannot run at all (no
`/usr/sbin/sshd`, `ssh` or `ssh-keygen`, or a user without a login shell).
"""

from __future__ import annotations

import atexit
import os
import pwd
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

SSHD = Path("/usr/sbin/sshd")
SLOWLINK = Path(__file__).resolve().parent / "ssh_slowlink.py"
PRIVSEP_DIR = Path("/run/sshd")
TAG = "HITL_SSHD_TAG"
NO_SHELLS = {"/usr/sbin/nologin", "/sbin/nologin", "/bin/false", "/usr/bin/false", ""}


def unavailable_reason() -> str | None:
    """Why no sshd can run here at all, or None."""
    if not os.access(SSHD, os.X_OK):
        return f"no OpenSSH server ({SSHD} is missing; apt-get install openssh-server)"
    for tool in ("ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"no `{tool}` on PATH (apt-get install openssh-client)"
    shell = pwd.getpwuid(os.getuid()).pw_shell
    if shell in NO_SHELLS:
        return f"the current user has no login shell ({shell or 'none'}), so ssh cannot log in"
    if os.getuid() == 0 and not PRIVSEP_DIR.is_dir():
        try:
            PRIVSEP_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
        except OSError as exc:
            return f"cannot create sshd's privilege separation folder {PRIVSEP_DIR}: {exc}"
    return None


def login_shell_reason(shell: str) -> str | None:
    """Why no sshd with `shell` as the login shell can run here, or None."""
    reason = unavailable_reason()
    if reason:
        return reason
    if not os.access(shell, os.X_OK):
        return f"no {shell} here (apt-get install {Path(shell).name})"
    if os.getuid() != 0:
        return "changing the far user's login shell needs root (a private mount namespace)"
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return "no `unshare` or `mount` here (util-linux)"
    probe = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "true"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=30,
    )
    if probe.returncode != 0:
        return f"no private mount namespace here: {probe.stderr.strip()[:200]}"
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _q(value: object) -> str:
    """One ssh_config / sshd_config argument, double-quoted when it holds blanks."""
    text = str(value)
    if any(c in text for c in '"\n'):
        raise ValueError(f"cannot put {text!r} in an ssh config file")
    return f'"{text}"' if any(c.isspace() for c in text) else text


def _keygen(path: Path, comment: str) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=30,
    )


class Sshd:
    """One sshd on 127.0.0.1:`port`, its keys and configs under `tmp_path / "ssh"`."""

    def __init__(
        self,
        tmp_path: Path,
        *,
        slow_delay_ms: int = 150,
        login_shell: str | None = None,
        aliases: Sequence[str] = (),
    ) -> None:
        self.tmp = Path(tmp_path)
        #: More names for the server, each its own `Host` as build-1 (a fleet of machines).
        self.aliases = tuple(aliases)
        self.dir = self.tmp / "ssh"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.user = pwd.getpwuid(os.getuid()).pw_name
        self.port = free_port()
        self.down_port = free_port()
        self.slow_delay_ms = slow_delay_ms
        self.tag = uuid.uuid4().hex
        self.host_key = self.dir / "host_ed25519"
        self.user_key = self.dir / "id_ed25519"
        self.authorized_keys = self.dir / "authorized_keys"
        self.sshd_config = self.dir / "sshd_config"
        self.config = self.dir / "ssh_config"
        self.known_hosts = self.dir / "known_hosts"
        self.log = self.dir / "sshd.log"
        self.remote_state = self.tmp / "remote-state"
        self.remote_config = self.tmp / "remote-config.toml"
        self.login_shell = login_shell
        self.home = self.tmp / "home"
        self.passwd = self.dir / "passwd"
        self.proc: subprocess.Popen[bytes] | None = None
        self.suspended = False
        self._checked = False
        self._write_files()

    # --- files ------------------------------------------------------------------------------

    def _write_files(self) -> None:
        _keygen(self.host_key, "hitl-test-host")
        _keygen(self.user_key, "hitl-test-user")
        shutil.copyfile(self.user_key.with_suffix(".pub"), self.authorized_keys)
        self.remote_state.mkdir(parents=True, exist_ok=True)
        self.remote_config.touch()
        if self.login_shell is not None:
            self.home.mkdir(exist_ok=True)
            lines = Path("/etc/passwd").read_bytes().splitlines(keepends=True)
            self.passwd.write_bytes(b"".join(self._passwd_line(line) for line in lines))
        host_pub = " ".join(self.host_key.with_suffix(".pub").read_text().split()[:2])
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {host_pub}\n")
        self.sshd_config.write_text(
            "\n".join(
                [
                    "ListenAddress 127.0.0.1",
                    f"Port {self.port}",
                    f"HostKey {_q(self.host_key)}",
                    f"AuthorizedKeysFile {_q(self.authorized_keys)}",
                    "AuthenticationMethods publickey",
                    "PubkeyAuthentication yes",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "PermitRootLogin prohibit-password",
                    "UsePAM no",
                    f"PidFile {_q(self.dir / 'sshd.pid')}",
                    "StrictModes no",
                    f"AllowUsers {self.user}",
                    "PermitUserEnvironment no",
                    "PermitUserRC no",
                    "PrintMotd no",
                    "PrintLastLog no",
                    "UseDNS no",
                    "X11Forwarding no",
                    "MaxStartups 100:30:200",
                    "MaxSessions 50",
                    "LogLevel VERBOSE",
                    "SetEnv "
                    + " ".join(
                        _q(f"{k}={v}")
                        for k, v in (
                            ("HITL_STATE_DIR", self.remote_state),
                            ("HITL_CONFIG", self.remote_config),
                            (TAG, self.tag),
                        )
                    ),
                    "",
                ]
            )
        )
        common = [
            f"  User {self.user}",
            f"  IdentityFile {_q(self.user_key)}",
            "  IdentitiesOnly yes",
            "  IdentityAgent none",
            f"  UserKnownHostsFile {_q(self.known_hosts)}",
            "  GlobalKnownHostsFile /dev/null",
            "  StrictHostKeyChecking yes",
            "  UpdateHostKeys no",
            "  BatchMode yes",
            "  ControlMaster no",
            "  ControlPath none",
            "  ConnectTimeout 10",
        ]
        relay = shlex.join(
            [sys.executable, str(SLOWLINK), "127.0.0.1", str(self.port), str(self.slow_delay_ms)]
        ).replace("%", "%%")
        self.config.write_text(
            "\n".join(
                [
                    "Host build-1",
                    "  HostName 127.0.0.1",
                    f"  Port {self.port}",
                    *common,
                    "Host slow-1",
                    "  HostName 127.0.0.1",
                    f"  Port {self.port}",
                    f"  ProxyCommand {relay}",
                    *common,
                    "Host down-1",
                    "  HostName 127.0.0.1",
                    f"  Port {self.down_port}",
                    *common,
                    *(
                        line
                        for alias in self.aliases
                        for line in (
                            f"Host {alias}",
                            "  HostName 127.0.0.1",
                            f"  Port {self.port}",
                            *common,
                        )
                    ),
                    "",
                ]
            )
        )

    def _passwd_line(self, line: bytes) -> bytes:
        """`line` of /etc/passwd, with this user's home and login shell changed."""
        fields = line.rstrip(b"\n").split(b":")
        if len(fields) != 7 or fields[0] != self.user.encode():
            return line
        fields[5], fields[6] = bytes(self.home), os.fsencode(self.login_shell or "")
        return b":".join(fields) + b"\n"

    # --- the client side ----------------------------------------------------------------------

    def ssh_argv(self) -> list[str]:
        """The ssh command that knows build-1, slow-1 and down-1: append host and command."""
        return ["ssh", "-F", str(self.config)]

    def ssh(
        self,
        host: str,
        *command: str,
        options: Sequence[str] = (),
        timeout: float = 30,
        **kwargs,
    ) -> subprocess.CompletedProcess[str]:
        """Run `ssh [OPTIONS] HOST COMMAND...` to the end: text output captured, no stdin
        unless `input=` is given; other keywords go to `subprocess.run`."""
        kwargs.setdefault("capture_output", True)
        if "input" not in kwargs:
            kwargs.setdefault("stdin", subprocess.DEVNULL)
        return subprocess.run(
            [*self.ssh_argv(), *options, host, *command], text=True, timeout=timeout, **kwargs
        )

    def remote_hitl(self) -> Path:
        """The `hitl` of this venv (absolute), for commands run on the far side."""
        self.remote_config.touch()
        hitl = Path(sys.executable).parent / "hitl"
        if not os.access(hitl, os.X_OK):
            raise FileNotFoundError(f"no hitl next to {sys.executable} (pip install -e .)")
        return hitl

    # --- the server -------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no sshd log)"

    def start(self, timeout: float = 15) -> Sshd:
        """Start sshd; return once a real `ssh build-1 true` succeeded (or raise)."""
        if self.running:
            return self
        if not self._checked:
            check = subprocess.run(
                [str(SSHD), "-t", "-f", str(self.sshd_config)],
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                timeout=30,
            )
            if check.returncode != 0:
                raise RuntimeError(f"sshd rejects its config: {check.stderr.strip()}")
            self._checked = True
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), TAG: self.tag}
        # If this process dies without stop() (a killed pytest), the kernel kills the listener:
        # no sshd outlives its tests. (The signal follows the thread that started it.)
        orphan_guard = []
        if shutil.which("setpriv") and threading.current_thread() is threading.main_thread():
            orphan_guard = ["setpriv", "--pdeathsig", "KILL", "--"]
        namespace = []
        if self.login_shell is not None:  # its own /etc/passwd, seen by sshd alone
            mount = 'mount --bind "$0" /etc/passwd && exec "$@"'
            namespace = ["unshare", "--mount", "--propagation", "private", "--"]
            namespace += ["sh", "-c", mount, str(self.passwd)]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    *orphan_guard,
                    *namespace,
                    str(SSHD),
                    "-D",
                    "-e",
                    "-f",
                    str(self.sshd_config),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        atexit.register(self.stop)
        self.suspended = False
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"sshd exited with {self.proc.returncode} at start:\n{self.log_tail()}"
                )
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            except OSError as exc:
                last = f"port {self.port}: {exc}"
                time.sleep(0.05)
                continue
            left = max(1.0, deadline - time.monotonic())
            try:
                probe = self.ssh("build-1", "true", timeout=left)
            except subprocess.TimeoutExpired:
                last = "ssh build-1 true timed out"
                continue
            if probe.returncode == 0:
                return self
            last = f"ssh build-1 true exited {probe.returncode}: {probe.stderr.strip()}"
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"sshd did not come up in {timeout:.0f} s ({last}):\n{self.log_tail()}")

    def pids(self) -> set[int]:
        """Every live process of this server: sshd itself, its connection and session
        processes and what they run (by the tag in their environment, and by parentage)."""
        table: dict[int, int] = {}
        found: set[int] = set()
        marker = f"{TAG}={self.tag}".encode()
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            pid = int(entry)
            try:
                stat = Path(f"/proc/{pid}/stat").read_bytes()
                state, ppid = stat[stat.rindex(b")") + 2 :].split()[:2]
            except (OSError, ValueError):
                continue
            if state == b"Z":
                continue
            table[pid] = int(ppid)
            try:
                if marker in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                    found.add(pid)
            except OSError:
                pass
        if self.running and self.proc is not None:
            found.add(self.proc.pid)
        # Whatever descends from one of ours is ours too (a session that cleared its env).
        grew = True
        while grew:
            more = {pid for pid, ppid in table.items() if ppid in found} - found
            found |= more
            grew = bool(more)
        found.discard(os.getpid())
        return found

    def _signal(self, sig: int, pids: set[int]) -> None:
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def _freeze(self) -> set[int]:
        """SIGSTOP every process of this server until no new one appears; return them."""
        frozen: set[int] = set()
        for _ in range(50):
            new = self.pids() - frozen
            if not new:
                break
            self._signal(signal.SIGSTOP, new)
            frozen |= new
        return frozen

    def kill(self) -> None:
        """SIGKILL sshd and every process it forked: open connections drop at once, new ones
        are refused (a crashed host). `restart()` brings it back."""
        self._signal(signal.SIGKILL, self._freeze())
        if self.proc is not None:
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        self.suspended = False
        deadline = time.monotonic() + 5
        while self.pids() and time.monotonic() < deadline:
            self._signal(signal.SIGKILL, self.pids())
            time.sleep(0.02)

    def restart(self, timeout: float = 15) -> Sshd:
        """Kill if running, then start again: same port, same host key (known_hosts matches)."""
        if self.running or self.suspended:
            self.kill()
        return self.start(timeout)

    def suspend(self) -> None:
        """SIGSTOP sshd and its sessions: connections stay open but nothing answers (a host
        that hangs; new connections hang too)."""
        self._freeze()
        self.suspended = True

    def resume(self) -> None:
        """SIGCONT everything `suspend()` stopped."""
        self._signal(signal.SIGCONT, self.pids())
        self.suspended = False

    def stop(self) -> None:
        """Kill everything of this server; safe to call twice (teardown)."""
        if self.proc is None:
            return
        self.kill()
        self.proc = None
        atexit.unregister(self.stop)

    def __enter__(self) -> Sshd:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[Sshd]:
    """A started `Sshd` in this test's tmp folder (skips where sshd cannot run at all)."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    server = Sshd(tmp_path)
    try:
        server.start()
        yield server
    finally:
        server.stop()
