"""`[[remote]]` whatever the far user's login shell: sh, dash, bash, zsh, fish, tcsh and csh,
each as the login shell of a real sshd on 127.0.0.1 (tests/sshd.py: a private mount namespace
gives the far user that shell and a home of its own). What the operator typed reaches that
machine's hitl byte for byte: backslashes, quotes, `$()`, backticks, a trailing backslash,
newlines, `;*~%!`, undecodable bytes; nothing of it runs there. `t` lands in the repository
there, and a hitl too old for the encoded command is still one line naming both versions."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hitl_tui import __version__
from hitl_tui.answers.service import apply_answer, plan_answer, source_for
from hitl_tui.config import load_config
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.inbox.workspace import Workspace
from hitl_tui.model import Answer
from tests.sshd import Sshd, login_shell_reason
from tests.test_remote_ssh import Watch, loop_repo

SHELLS = {
    "sh": "/bin/sh",
    "dash": shutil.which("dash") or "/usr/bin/dash",
    "bash": shutil.which("bash") or "/usr/bin/bash",
    "zsh": shutil.which("zsh") or "/usr/bin/zsh",
    "fish": shutil.which("fish") or "/usr/bin/fish",
    "tcsh": shutil.which("tcsh") or "/usr/bin/tcsh",
    "csh": shutil.which("bsd-csh") or "/usr/bin/bsd-csh",
}
#: A folder name the far shell would read as code, ending in a backslash.
FOLDER = 'it\'s "$(touch PWNED)" a\\\\b `touch PWNED`;*~%!\\'
#: An answer in the operator's own words: every shell's special characters, a newline, an
#: undecodable byte (0xE9, a lone surrogate in Python, as in sys.argv), a trailing backslash.
TEXT = (
    "a\\\\b 'single' \"double\" $(touch PWNED) `touch PWNED` ${HOME} $HOME ; * ~ % ! "
    "{a,b} #hash &\n second line caf\udce9 \\"
)
NOTE = "--note-like \\"
OPERATOR = "Ada 'O\\Brien'\\"


@pytest.fixture(scope="module", params=list(SHELLS), ids=list(SHELLS))
def far(request, tmp_path_factory) -> Iterator[Sshd]:
    """One sshd per login shell, for the whole module; `~/bin/hitl` there is this venv's."""
    shell = SHELLS[request.param]
    reason = login_shell_reason(shell)
    if reason:
        pytest.skip(reason)
    server = Sshd(tmp_path_factory.mktemp(request.param), login_shell=shell)
    (server.home / "bin").mkdir()
    (server.home / "bin" / "hitl").symlink_to(server.remote_hitl())
    try:
        server.start()
        yield server
    finally:
        server.stop()


def _config(tmp_path: Path, far: Sshd, hitl: str = "~/bin/hitl") -> tuple[Path, Path]:
    """The operator's config (its hitl with a `~/` the far shell expands), and a folder of
    loops there whose name is hostile."""
    loops = far.tmp / f"loops-{uuid.uuid4().hex[:8]}" / FOLDER
    loops.mkdir(parents=True)
    config = tmp_path / "config.toml"
    config.write_text(
        f'[[remote]]\nhost = "build-1"\npaths = [{json.dumps(str(loops))}]\n'
        f"hitl = {json.dumps(hitl)}\nssh = {json.dumps(far.ssh_argv())}\n"
    )
    return config, loops


def _no_pwned(*folders: Path) -> None:
    for folder in folders:
        assert not list(folder.rglob("PWNED")), f"something ran in {folder}"


def test_hostile_answers_reach_the_far_hitl_byte_for_byte(tmp_path: Path, far: Sshd):
    config, loops = _config(tmp_path, far)
    shop = loop_repo(loops)
    reference = loop_repo(tmp_path / "here")  # the same repository, answered here directly
    [backend] = load_config(config).remotes
    [block] = backend._read_host(backend.hosts["build-1"])
    assert block.meta["remote_repo"] == str(shop)
    answer = Answer(texts=(TEXT,), note=NOTE, operator=OPERATOR)

    plan = backend.plan(block, answer)  # `hitl answer FILE ... --dry-run --json` there
    inbox = Inbox(Workspace.discover([reference]))
    inbox.scan()
    [local] = inbox.sorted_blocks()
    expected = plan_answer(inbox, local, answer)
    decision = backend.decision_text(block, answer)
    assert decision == source_for(inbox, local).decision_text(local, answer)
    assert "a\\\\b 'single' \"double\" $(touch PWNED)" in decision  # not `a\b`
    assert decision.endswith("caf\udce9 \\ (operator note: --note-like \\)")
    assert plan.remote[0].diff == expected.diff()

    backend.send(plan)  # written there, by its hitl
    apply_answer(inbox, expected)
    for name in ("PROMPT.md", "IMPLEMENTATION_PLAN.md"):
        assert (shop / name).read_bytes() == (reference / name).read_bytes(), name
    assert b"caf\xe9 \\ (operator note: --note-like \\)\n" in (shop / "PROMPT.md").read_bytes()
    plan_md = (shop / "IMPLEMENTATION_PLAN.md").read_bytes()
    assert b"answered by Ada 'O\\Brien'\\ via hitl" in plan_md
    assert not (shop / "BLOCKED.md").exists()
    _no_pwned(far.tmp, tmp_path)


def test_undecodable_bytes_in_a_path_reach_the_far_hitl(tmp_path: Path, far: Sshd):
    config, loops = _config(tmp_path, far)
    folder = loops / os.fsdecode(b"caf\xe9 '\\")
    shop = loop_repo(folder)
    [backend] = load_config(config).remotes
    ran = backend._run(backend.hosts["build-1"], ["list", "--json", "--local", str(folder)])
    assert ran.code == 0, ran.err
    [item] = json.loads(ran.out)  # that hitl found the folder: the bytes arrived as they are
    assert os.fsencode(item["repo"]) == os.fsencode(shop)
    _no_pwned(far.tmp, tmp_path)


def test_t_opens_the_login_shell_in_the_repository_there(tmp_path: Path, far: Sshd):
    config, loops = _config(tmp_path, far)
    shop = loop_repo(loops)
    [backend] = load_config(config).remotes
    [block] = backend._read_host(backend.hosts["build-1"])
    argv = backend.shell_argv(block)
    assert argv is not None and "-t" in argv and argv[-2] == "build-1"
    # no terminal here, so ssh allocates none; the login shell there reads our commands
    out = subprocess.run(
        argv, input=b"pwd\necho $SHELL\nexit\n", capture_output=True, timeout=30, env=os.environ
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-2:] == [os.fsencode(shop), os.fsencode(far.login_shell)]
    _no_pwned(far.tmp, tmp_path)


async def test_a_hitl_too_old_for_the_encoded_command_says_both_versions(tmp_path: Path, far: Sshd):
    """A real hitl parser that does not know `--argv` (what any older hitl is), version 0.0.9."""
    old = far.home / "old-hitl"
    code = (
        "import sys; from hitl_tui.cli import commands as cli; cli.wire.ARGV = '--not-known-then'; "
        "cli.__version__ = '0.0.9'; sys.exit(cli.main())"
    )
    old.write_text(f'#!/bin/sh\nexec {sys.executable} -c "{code}" "$@"\n')
    old.chmod(0o755)
    config, loops = _config(tmp_path, far, hitl="~/old-hitl")
    loop_repo(loops)
    watch = Watch(config)
    with watch:
        await watch.until(lambda: watch.state()[0] == "error", what="the version problem")
    await watch.close()
    message = watch.state()[1]
    assert message.startswith(
        f"its hitl 0.0.9 is too old for the remote protocol 1 (this hitl is {__version__})"
    ), message
    assert "retrying in 300 s" in message
