"""Unusable state folders and wrongly typed config values: one line naming the file and what
to do, the README's exit code, and nothing written. Real subprocesses, as a user runs hitl."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hostile_cases import DRIVER, copy_shop, hitl_env, run_hitl, snapshot

HINT = "set HITL_STATE_DIR to a writable folder"


def _one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert "internal error" not in err and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    return copy_shop(tmp_path / "loops" / "shop")


# -- the state folder -------------------------------------------------------------------------

#: The commands that must write the state folder (the journal, the repo lock).
WRITERS = [
    ("answer", "shop", "--choice", "A"),
    ("undo",),
    (),  # the app
]


def _file_state(tmp_path: Path) -> tuple[Path, str]:
    state = tmp_path / "state-file"
    state.write_text("not a folder\n")
    return state, "it is a file, not a folder"


def _under_a_file(tmp_path: Path) -> tuple[Path, str]:
    parent = tmp_path / "plain-file"
    parent.write_text("x")
    return parent / "state", f"{parent} is a file, not a folder"


@pytest.mark.parametrize("make", [_file_state, _under_a_file], ids=["file", "under-a-file"])
@pytest.mark.parametrize("command", WRITERS, ids=["answer", "undo", "app"])
def test_a_state_folder_that_is_a_file(
    make, command: tuple, shop: Path, tmp_path: Path, monkeypatch
) -> None:
    state, why = make(tmp_path)
    monkeypatch.setenv("HITL_STATE_DIR", str(state))
    before = snapshot(tmp_path)
    run = run_hitl(*command, shop.parent, timeout=20)
    line = _one_line(run.err)
    assert run.returncode == 1
    assert line == f"hitl: cannot use the state folder {state}: {why} ({HINT})"
    assert snapshot(tmp_path) == before


def test_history_names_the_state_folder_too(tmp_path: Path, monkeypatch) -> None:
    state, why = _file_state(tmp_path)
    monkeypatch.setenv("HITL_STATE_DIR", str(state))
    run = run_hitl("history")
    assert run.returncode == 1
    assert _one_line(run.err) == f"hitl: cannot use the state folder {state}: {why} ({HINT})"


def test_a_state_folder_that_is_not_writable(shop: Path, tmp_path: Path, monkeypatch) -> None:
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setenv("HITL_STATE_DIR", str(state))
    before = snapshot(tmp_path)
    run = run_hitl("answer", "shop", "--choice", "A", shop.parent, fault={"deny_access": "state"})
    assert run.returncode == 1
    assert _one_line(run.err) == (
        f"hitl: cannot use the state folder {state}: it is not writable ({HINT})"
    )
    assert snapshot(tmp_path) == before
    # Reading needs no write: history still works, and says there is nothing yet.
    run = run_hitl("history", fault={"deny_access": "state"})
    assert (run.returncode, run.err) == (0, "")


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or shutil.which("unshare") is None,
    reason="needs unshare(1) to mount a read-only file system privately",
)
@pytest.mark.parametrize("command", WRITERS, ids=["answer", "undo", "app"])
def test_a_state_folder_on_a_read_only_file_system(command: tuple, shop: Path, tmp_path: Path):
    mnt = tmp_path / "ro"
    mnt.mkdir()
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o ro tmpfs '{mnt}'"],
        capture_output=True,
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip(f"cannot mount privately: {probe.stderr.decode(errors='replace').strip()}")
    before = snapshot(shop)
    script = f"mount -t tmpfs -o ro tmpfs '{mnt}' && exec \"$@\""
    argv = ["unshare", "-rm", "sh", "-c", script, "sh", sys.executable, "-c", DRIVER]
    env = hitl_env({"HITL_STATE_DIR": str(mnt), "HITL_TEST_FAULT": "{}"})
    argv += [*command, str(shop.parent)]
    done = subprocess.run(argv, env=env, capture_output=True, timeout=30, check=False)
    err = done.stderr.decode()
    assert done.returncode == 1, err
    assert _one_line(err) == (
        f"hitl: cannot use the state folder {mnt}: it is on a read-only file system ({HINT})"
    )
    assert snapshot(shop) == before


# -- the config: every key with wrong types ---------------------------------------------------

KEEP = """'journal_keep' must be a duration such as "90d" (days), "12w" (weeks), "48h" """
KEEP += """(hours) or "forever"; """

CONFIG_CASES = [
    ("repos = 5", "'repos' must be a list of paths"),
    ("repos = true", "'repos' must be a list of paths"),
    ("repos = [5]", "'repos' must be a list of paths"),
    ('repos = [["a"]]', "'repos' must be a list of paths"),
    ("repos = {a = 1}", "'repos' must be a list of paths"),
    ('repos = ["~nosuchuser/x"]', "'repos': no user nosuchuser for ~nosuchuser/x"),
    ('repos = "~nosuchuser/x"', "'repos': no user nosuchuser for ~nosuchuser/x"),
    ('repos = ["a\\u0000b"]', "'repos': a path cannot contain a NUL character"),
    ("operator = 5", "'operator' must be a string"),
    ('operator = ["Ada"]', "'operator' must be a string"),
    ("operator = 1979-05-27", "'operator' must be a string"),
    ('bell = "yes"', "'bell' must be true or false"),
    ('sla = "1h"', '\'sla\' must be a [sla] table (warn = "15m", alert = "1h")'),
    (
        '[sla]\nwarn = "soon"',
        "[sla]: warn: 'soon' is not a duration (like 90s, 15m, 1h30m, 2d, 1w)",
    ),
    ("[sla]\nalert = 60", '[sla]: alert: 60 is not a duration in quotes (like "15m")'),
    ('[sla]\nwarning = "1h"', "[sla]: unknown key 'warning' (known: alert, warn)"),
    ('[sla]\nwarn = "2h"', "[sla]: warn (2h) is after alert"),
    (
        '[keys]\n"hitl.quit" = "u"',
        "[keys]: 'u' is both 'hitl.quit' and 'hitl.undo'; give one of them other keys",
    ),
    ("bell = 1", "'bell' must be true or false"),
    ("github = 5", "'github' must be a [[github]] table or an array of them"),
    ("github = true", "'github' must be a [[github]] table or an array of them"),
    ('github = "acme/shop"', "'github' must be a [[github]] table or an array of them"),
    ("github = [5]", "[[github]] #1: must be a table"),
    ("[[github]]\nrepo = 5", '[[github]] #1: repo must be "owner/name"'),
    ("[[github]]\norg = 5", "[[github]] #1: org must be an organisation name"),
    ('[[github]]\nrepo = "a/b"\napi_url = 5', "[[github]] #1: api_url must be an http(s) URL"),
    (
        '[[github]]\nrepo = "a/b"\nloop_account = 5',
        "[[github]] #1: loop_account must be a GitHub login",
    ),
    (
        '[[github]]\nrepo = "a/b"\npoll_seconds = "60"',
        "[[github]] #1: poll_seconds must be a number from 1 to 86400",
    ),
    (
        '[[github]]\nrepo = "a/b"\npoll_seconds = true',
        "[[github]] #1: poll_seconds must be a number from 1 to 86400",
    ),
    ('[[github]]\nrepo = "a/b"\nlabels = 5', "[[github]] #1: labels must be a table"),
    (
        '[[github]]\nrepo = "a/b"\n[github.labels]\nblocked = 5',
        "[[github]] #1: labels.blocked must be a label name",
    ),
    ("journal_keep = 90", KEEP + "got 90"),
    ('journal_keep = "soon"', KEEP + "got 'soon'"),
    (
        '[[github]]\nrepo = "a/b"\npoll_max_requests = "9"',
        "[[github]] #1: poll_max_requests must be a whole number from 1 to 100000",
    ),
    (
        '[[github]]\nrepo = "a/b"\npoll_timeout_seconds = 0',
        "[[github]] #1: poll_timeout_seconds must be a number from 1 to 3600",
    ),
    (
        '[keys]\n"hitl.answer1" = "f1"',
        "[keys]: unknown binding id 'hitl.answer1'; did you mean 'hitl.answer-1'?",
    ),
    ('[keys]\n"hitl.quit" = 5', "[keys]: 'hitl.quit' must be a string of keys, like \"f1\""),
    ("keys = 5", "'keys' must be a [keys] table of binding id = \"keys\""),
    ("notify = 5", "'notify' must be a [notify] table (desktop = \"auto\", ...)"),
    ('[notify]\ndesktop = "yes"', '[notify]: desktop must be "auto", true or false'),
    (
        '[notify]\nterminal = "osc8"',
        '[notify]: terminal must be true, false, "auto" or one of osc9, osc777, osc99',
    ),
    (
        '[notify]\ncommand = "ntfy publish s3cr3t-topic"',
        '[notify]: command must be a list of arguments, like ["ntfy", "publish", "mytopic"]',
    ),
    # The line never quotes the webhook: it holds the key.
    (
        '[notify]\nwebhook = "ftp://hooks.example/T0/SECRET"',
        "[notify]: webhook must be an http(s) URL in quotes",
    ),
    (
        '[notify]\nwebhook = "https://a.example/x"\nwebhook_env = "HOOK"',
        "[notify]: give webhook or webhook_env, not both",
    ),
    (
        '[notify]\nwebhook_env = "my hook"',
        '[notify]: webhook_env must be the name of an environment variable, like "HITL_HOOK"',
    ),
    ('[notify]\non = ["new", "later"]', "[notify]: on: unknown 'later' (known: new, not-resumed)"),
    (
        "[notify]\ntimeout = 0",
        "[notify]: timeout must be a number of seconds, more than 0 and at most 60",
    ),
    (
        "[notify]\nsound = true",
        "[notify]: unknown key 'sound' "
        "(known: command, desktop, on, terminal, timeout, webhook, webhook_env)",
    ),
    (
        "unknown = 1",
        "unknown key 'unknown' "
        "(known: bell, github, journal_keep, keys, loop, mcp, notify, operator, remote, repos, "
        "sla, telegram)",
    ),
]


def _config_run(toml: str, command: tuple, shop: Path, tmp_path: Path, monkeypatch):
    config = tmp_path / "config.toml"
    config.write_text(toml + "\n")
    monkeypatch.setenv("HITL_CONFIG", str(config))
    state = Path(os.environ["HITL_STATE_DIR"])
    before = snapshot(state), snapshot(shop)
    run = run_hitl(*command, cwd=shop, timeout=20)
    assert run.returncode == 2, run.err
    assert (snapshot(state), snapshot(shop)) == before
    return config, _one_line(run.err)


@pytest.mark.parametrize(("toml", "message"), CONFIG_CASES, ids=[c[0] for c in CONFIG_CASES])
def test_a_wrongly_typed_config_value(
    toml: str, message: str, shop: Path, tmp_path: Path, monkeypatch
) -> None:
    config, line = _config_run(toml, ("list",), shop, tmp_path, monkeypatch)
    assert line == f"hitl: {config}: {message}"


@pytest.mark.parametrize("toml", ["github = 5", 'repos = ["~nosuchuser/x"]'])
@pytest.mark.parametrize(
    "command", [("answer", "shop", "--choice", "A"), ()], ids=["answer", "app"]
)
def test_every_command_reports_the_config_the_same_way(
    toml: str, command: tuple, shop: Path, tmp_path: Path, monkeypatch
) -> None:
    config, line = _config_run(toml, command, shop, tmp_path, monkeypatch)
    assert line.startswith(f"hitl: {config}: '")
