"""`[[remote]]`: the config table, the ssh command hitl builds, and its one-line reasons.
(The backend against a real OpenSSH server is tests/test_remote_ssh.py.)"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from hitl_tui.config import load_config
from hitl_tui.model import UsageError
from hitl_tui.sources.ssh import backend as ssh
from hitl_tui.sources.ssh import wire


def _config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(body)
    return path


def test_a_remote_table_builds_one_backend_for_every_host(tmp_path: Path):
    path = _config(
        tmp_path,
        '[[remote]]\nhost = "build-1"\npaths = ["~/loops"]\n'
        '[[remote]]\nhost = "ada@10.0.0.7"\npaths = "/srv/loops"\nhitl = "~/.local/bin/hitl"\n'
        'ssh = ["ssh", "-F", "/etc/hitl/ssh_config"]\n',
    )
    [backend] = load_config(path).remotes
    assert isinstance(backend, ssh.SshBackend)
    one, two = backend.hosts.values()
    assert (one.host, one.paths, one.hitl, one.ssh) == (
        "build-1",
        ("~/loops",),
        ("hitl",),
        ("ssh",),
    )
    assert two.paths == ("/srv/loops",) and two.hitl == ("~/.local/bin/hitl",)
    assert two.ssh == ("ssh", "-F", "/etc/hitl/ssh_config")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('[[remote]]\npaths = ["x"]\n', "'host' must be an ssh destination"),
        ('[[remote]]\nhost = "-oProxyCommand=evil"\npaths = ["x"]\n', "'host' must be"),
        ('[[remote]]\nhost = "a b"\npaths = ["x"]\n', "'host' must be"),
        ('[[remote]]\nhost = "b"\n', "'paths' must be a list of folders on b"),
        ('[[remote]]\nhost = "b"\npaths = []\n', "'paths' must be"),
        ('[[remote]]\nhost = "b"\npaths = ["x"]\nhitl = ""\n', "'hitl' must be"),
        ('[[remote]]\nhost = "b"\npaths = ["x"]\nhitl = "\'unclosed"\n', "'hitl' must be"),
        ('[[remote]]\nhost = "b"\npaths = ["x"]\nssh = []\n', "'ssh' must be a command"),
        ('[[remote]]\nhost = "b"\npaths = ["x"]\nport = 22\n', "unknown key 'port'"),
        (
            '[[remote]]\nhost = "b"\npaths = ["x"]\n[[remote]]\nhost = "b"\npaths = ["y"]\n',
            "host 'b' is named twice",
        ),
        ('remote = "b"\n', "'remote' must be a [[remote]] table"),
    ],
)
def test_a_bad_remote_table_is_one_line_naming_the_file(tmp_path: Path, body: str, message: str):
    path = _config(tmp_path, body)
    with pytest.raises(UsageError) as err:
        load_config(path)
    text = str(err.value)
    assert text.startswith(f"{path}: ") and message in text and "\n" not in text


SHELLS = [s for s in ("sh", "dash", "bash", "zsh", "fish", "tcsh", "bsd-csh") if shutil.which(s)]


@pytest.mark.parametrize("shell", SHELLS)
def test_the_remote_command_is_safe_words_and_keeps_the_hitl_tilde(tmp_path: Path, shell: str):
    """Whatever the far login shell: the configured hitl command is quoted so that each reads
    it (its `~/` expanded there), and the words go as one word of [A-Za-z0-9_-] that decodes to
    them byte for byte (the far hitl expands a path's `~/` itself, as a typed one would be)."""
    hitl = ("~/my hitl's\\dir\\/hitl", "--config=a b\\")
    backend = ssh.SshBackend([ssh.Host("build-1", ("~/loops", "/srv/it's here\\"), hitl, ("ssh",))])
    host = backend.hosts["build-1"]
    words = ["list", "--json", "--watch", *host.paths]
    argv = backend.argv(host, words)
    assert argv[0] == "ssh" and "BatchMode=yes" in argv
    assert argv[-3:-1] == ["--", "build-1"]  # nothing after the options is read as one
    command = argv[-1]
    option, encoded = command.split(" ")[-2:]
    assert option == "--argv" and re.fullmatch(r"[A-Za-z0-9_-]+", encoded)
    assert wire.decode_argv([encoded]) == words
    out = subprocess.run(
        [shell, "-c", f"printf '%s\\n' {command}"],
        capture_output=True,
        text=True,
        env={"HOME": "/home/ada", "PATH": "/usr/bin:/bin"},
        check=True,
    )
    assert out.stdout.splitlines() == [
        "/home/ada/my hitl's\\dir\\/hitl",
        "--config=a b\\",
        "--argv",
        encoded,
    ]
    assert backend.argv(host, ["--version"])[-1].endswith(" --version")  # an old hitl knows it


@pytest.mark.parametrize(
    "hostile", ["; touch pwned", "$(touch pwned)", "`touch pwned`", "a\nb", "'\"", "--help"]
)
def test_an_answer_text_reaches_the_far_side_as_one_word(tmp_path: Path, hostile: str):
    code = "import sys; print(repr(sys.argv[1:]))"
    command = f"{shlex.quote(sys.executable)} -c {shlex.quote(code)} {ssh.shell_word(hostile)}"
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, cwd=tmp_path)
    assert out.stdout.strip() == repr([hostile])
    assert not (tmp_path / "pwned").exists()


def test_connection_sharing_goes_in_a_private_folder(monkeypatch):
    runtime = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))  # short: a socket path is short
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    folder = ssh.control_dir()
    assert folder == runtime / "hitl-ssh"
    assert folder.stat().st_mode & 0o777 == 0o700
    folder.chmod(0o755)  # someone else could plant a socket there: not used
    assert ssh.control_dir() is None


@pytest.mark.parametrize(
    ("stderr", "reason"),
    [
        ("ssh: Could not resolve hostname nope: Name or service not known", "unknown host"),
        ("ssh: connect to host 127.0.0.1 port 1: Connection refused", "connection refused"),
        ("Host key verification failed.", "host key is not trusted"),
        ("ada@h: Permission denied (publickey).", "permission denied"),
        ("Timeout, server 127.0.0.1 not responding.", "hung"),
        ("", "unreachable"),
    ],
)
def test_ssh_failures_read_as_a_few_words(stderr: str, reason: str):
    assert reason in ssh.ssh_reason(stderr)


def test_the_far_sides_exit_codes_keep_their_meaning():
    from hitl_tui.model import HitlError, StaleError

    stale = ssh.far_error(
        "b", ssh.Ran(3, b"", "hitl: shop: the block changed since you read it\n"), "x"
    )
    assert isinstance(stale, StaleError)
    assert str(stale) == "b: shop: the block changed since you read it"
    assert isinstance(ssh.far_error("b", ssh.Ran(2, b"", "hitl: no choice 'Z'"), "x"), UsageError)
    old = ssh.far_error("b", ssh.Ran(2, b"", "hitl: unrecognized arguments: --json"), "the undo")
    assert "too old for the undo" in str(old)
    missing = ssh.far_error("b", ssh.Ran(127, b"", "sh: 1: hitl: not found"), "x")
    assert type(missing) is HitlError and "no hitl command there" in str(missing)
    hostile = ssh.far_error("b", ssh.Ran(1, b"", "hitl: \x1b]0;pwn\x07 [red]x[/red]"), "x")
    assert "\x1b" not in str(hostile) and "\x07" not in str(hostile)


@pytest.mark.parametrize("value", ["0", "-1", "true", '"5"', "3601"])
def test_list_timeout_seconds_is_a_bound_in_seconds(tmp_path: Path, value: str):
    base = '[[remote]]\nhost = "b"\npaths = ["x"]\n'
    [backend] = load_config(_config(tmp_path, base)).remotes
    assert backend.hosts["b"].list_timeout == ssh.LIST_TIMEOUT == 5.0
    path = _config(tmp_path, base + "list_timeout_seconds = 2.5\n")
    [backend] = load_config(path).remotes
    assert backend.hosts["b"].list_timeout == 2.5
    path = _config(tmp_path, base + f"list_timeout_seconds = {value}\n")
    with pytest.raises(UsageError) as err:
        load_config(path)
    assert "(b): 'list_timeout_seconds' must be a number of seconds" in str(err.value)
