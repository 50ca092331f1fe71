"""Notices beyond the bell (`[notify]`): what the operator gets on each channel.

No D-Bus: a `notify-send` stub on PATH records its arguments; a webhook on 127.0.0.1 records
each POST; a command writes its standard input to a file. The app tests run the real app under
Pilot, new blocks arriving as the watcher reports them (`inbox.handle`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from hitl_tui.config import Config, load_config
from hitl_tui.loops import notices
from hitl_tui.loops.notices import Notice, NoticeConfig
from hitl_tui.model import UsageError
from tests.conftest import FIXTURES
from tests.fake_chat import FakeChat, serve_chat
from tests.support import until, until_sync

HOOK_PATH = "/services/T000/B000/SECRETHOOKxyz"
#: Agent text at its worst: CSI and OSC sequences, BEL, C1 controls, Pango and Rich markup.
HOSTILE = (
    "Ship\x1b[31m red\x1b[0m?\x07 \x1b]0;owned\x07 \x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\"
    " \x9b2J \x9d9;x\x9c <b>bold</b> & <span foreground='red'>x</span> [bold]rich[/bold] "
    "[@click=app.quit]q[/] <!channel>"
)


# -- fixtures: the stub, the webhook, the command ---------------------------------------------


@pytest.fixture
def desktop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `notify-send` on PATH that appends its arguments (one JSON list a line) to a file,
    and a desktop session for `desktop = "auto"` to find."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "notify-send.jsonl"
    stub = bin_dir / "notify-send"
    stub.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        f"with open({str(calls)!r}, 'a', encoding='utf-8') as f:\n"
        "    f.write(json.dumps(sys.argv[1:]) + '\\n')\n"
    )
    stub.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("DISPLAY", ":99")
    return calls


def _desktop_calls(calls: Path) -> list[list[str]]:
    if not calls.exists():
        return []
    return [json.loads(line) for line in calls.read_text(encoding="utf-8").splitlines()]


#: The notice tests' webhook: a chat server whose error reason echoes the path (the key).
Hook = FakeChat


@pytest.fixture
def hook():
    yield from serve_chat(FakeChat(reason="nope {path}"), HOOK_PATH)


def _capture(out: Path) -> tuple[str, ...]:
    """A `[notify] command` that appends its standard input to `out`."""
    code = "import sys; open(sys.argv[1], 'ab').write(sys.stdin.buffer.read())"
    return (sys.executable, "-c", code, str(out))


def _stdin_of(out: Path) -> list[str]:
    return out.read_text(encoding="utf-8").splitlines() if out.exists() else []


# -- the text ---------------------------------------------------------------------------------


def _block(repo: str, question: str, block_id: str | None = None):
    from datetime import UTC, datetime

    from hitl_tui.model import Block

    when = datetime(2026, 11, 29, tzinfo=UTC)
    path = Path("/loops") / repo
    return Block(block_id or repo, "loopkit", path, path / "BLOCKED.md", "blocked", question,
                 "", (), (), when, "f", "")  # fmt: skip


def test_one_block_is_its_repo_and_question_a_burst_counts_blocks_and_repos() -> None:
    one = notices.new_blocks([_block("shop", "Keep   the\ninvoices?")])
    assert (one.title, one.body) == ("hitl: new block", "shop: Keep the invoices?")
    assert one.line == "hitl: shop: Keep the invoices?"
    task = notices.new_blocks([_block("billing", "Which currency?", "T-007")])
    assert task.body == "billing T-007: Which currency?"
    burst = notices.new_blocks(
        [_block("shop", "a"), _block("billing", "b", "T-7"), _block("billing", "c", "T-9")]
    )
    assert (burst.title, burst.body) == (
        "hitl: 3 new blocks",
        "3 new blocks in 2 repos: shop, billing",
    )
    many = notices.new_blocks([_block(f"r{i}", "q") for i in range(12)])
    assert many.body == "12 new blocks in 12 repos: r0, r1, r2, r3, r4 and 7 more"
    same = notices.new_blocks([_block("api", "q", "T-1"), _block("api", "q", "T-2")])
    assert same.body == "2 new blocks in 1 repo: api"


def test_not_resumed_names_the_answers() -> None:
    @dataclass
    class Late:
        block_id: str

    one = notices.not_resumed([Late("shop")])
    assert (one.kind, one.title) == ("not-resumed", "hitl: not resumed")
    assert one.body == "shop: no sign of the loop since the answer"
    assert notices.not_resumed([Late("a"), Late("b")]).body == "2 answers not resumed: a, b"


def _is_plain(text: str) -> bool:
    return not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in text)


def test_hostile_text_is_plain_and_bounded() -> None:
    text = notices.plain(HOSTILE)
    assert _is_plain(text)
    assert "\x1b" not in text and "\x07" not in text
    assert text.startswith("Ship[31m red[0m? ]0;owned ]8;;http://evil")
    huge = notices.plain("x" * 1_000_000 + HOSTILE)
    assert len(huge) == notices.BODY_LIMIT and huge.endswith("…")
    # Direction overrides cannot reorder what the line says.
    assert "\u202e" not in notices.plain("a\u202eb")


def test_pango_markup_is_escaped_for_notify_send() -> None:
    assert notices.pango("<b>x</b> & y") == "&lt;b&gt;x&lt;/b&gt; &amp; y"


# -- the terminal's escape --------------------------------------------------------------------

NOTICE = Notice("new", "hitl: 3 new blocks", "3 new blocks in 2 repos: shop; api")


def test_osc_9_777_and_99_exactly() -> None:
    assert notices.osc(NOTICE, "osc9") == "\x1b]9;hitl: 3 new blocks in 2 repos: shop; api\x07"
    assert notices.osc(NOTICE, "osc777") == (
        "\x1b]777;notify;hitl: 3 new blocks;3 new blocks in 2 repos: shop, api\x07"
    )
    assert notices.osc(NOTICE, "osc99") == (
        "\x1b]99;i=hitl:d=0;hitl: 3 new blocks\x1b\\"
        "\x1b]99;i=hitl:d=1:p=body;3 new blocks in 2 repos: shop; api\x1b\\"
    )


def test_osc_under_tmux_is_wrapped_for_passthrough() -> None:
    assert notices.osc(NOTICE, "osc9", tmux=True) == (
        "\x1bPtmux;\x1b\x1b]9;hitl: 3 new blocks in 2 repos: shop; api\x07\x1b\\"
    )
    assert notices.osc(NOTICE, "osc99", tmux=True) == (
        "\x1bPtmux;\x1b\x1b]99;i=hitl:d=0;hitl: 3 new blocks\x1b\x1b\\"
        "\x1b\x1b]99;i=hitl:d=1:p=body;3 new blocks in 2 repos: shop; api\x1b\x1b\\\x1b\\"
    )


@pytest.mark.parametrize("form", notices.FORMS)
def test_agent_text_cannot_end_or_add_to_the_escape(form: str) -> None:
    notice = notices.new_blocks([_block("shop", HOSTILE + "x" * 1_000_000)])
    seq = notices.osc(notice, form)
    framing = {"osc9": 1, "osc777": 1, "osc99": 4}[form]  # each ESC the sequence itself needs
    assert seq.count("\x1b") == framing
    assert seq.count("\x07") == (0 if form == "osc99" else 1)
    assert _is_plain(seq.replace("\x1b", "").replace("\x07", ""))
    assert len(seq) < 2 * notices.BODY_LIMIT


@pytest.mark.parametrize(
    ("env", "form"),
    [
        ({"TERM": "xterm-kitty"}, "osc99"),
        ({"TERM": "tmux-256color", "TMUX": "/tmp/t,1,0", "KITTY_WINDOW_ID": "3"}, "osc99"),
        ({"TERM": "xterm-256color", "TERM_PROGRAM": "iTerm.app"}, "osc9"),
        ({"TERM": "xterm-256color", "TERM_PROGRAM": "WezTerm"}, "osc9"),
        ({"TERM": "xterm-256color", "VTE_VERSION": "7600"}, "osc777"),
        ({"TERM": "rxvt-unicode-256color"}, "osc777"),
        ({"TERM": "foot"}, "osc777"),
        ({"TERM": "xterm-256color"}, "osc9"),  # not known: a guess (terminal = true)
        ({"TERM": "linux"}, None),
        ({"TERM": "dumb"}, None),
        ({}, None),
    ],
)
def test_the_escape_is_chosen_from_the_terminal(env: dict, form: str | None) -> None:
    assert notices.terminal_form(env) == form
    known = form if env.get("TERM") != "xterm-256color" or len(env) > 1 else None
    assert notices.terminal_form(env, guess=False) == known


def test_terminal_escape_follows_the_config() -> None:
    env = {"TERM": "tmux-256color", "TMUX": "/tmp/tmux-1/default,1,0", "WEZTERM_PANE": "0"}
    seq = notices.terminal_escape(NOTICE, NoticeConfig(), env)
    assert seq is not None and seq.startswith("\x1bPtmux;\x1b\x1b]9;")
    assert notices.terminal_escape(NOTICE, NoticeConfig(terminal=False), env) is None
    # "auto" writes nothing to a terminal it does not know; true guesses OSC 9.
    unknown = {"TERM": "xterm-256color"}
    assert notices.terminal_escape(NOTICE, NoticeConfig(), unknown) is None
    guessed = notices.terminal_escape(NOTICE, NoticeConfig(terminal=True), unknown)
    assert guessed is not None and guessed.startswith("\x1b]9;")
    forced = notices.terminal_escape(NOTICE, NoticeConfig(terminal="osc777"), {"TERM": "xterm"})
    assert forced is not None and forced.startswith("\x1b]777;notify;")
    assert notices.terminal_escape(NOTICE, NoticeConfig(), {"TERM": "linux"}) is None


# -- the channels, without the app ------------------------------------------------------------


def test_desktop_auto_needs_a_session_and_notify_send(
    desktop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:

    env = dict(os.environ)
    assert notices.channels(NoticeConfig(), env) == ["desktop"]
    assert notices.channels(NoticeConfig(desktop=False), env) == []
    no_session = {k: v for k, v in env.items() if k != "DISPLAY"}
    assert notices.channels(NoticeConfig(), no_session) == []
    assert notices.channels(NoticeConfig(), {**env, "PATH": "/nonexistent"}) == []
    # Asked for, but not installed: one line says so.
    failures = notices.send(NOTICE, NoticeConfig(desktop=True), {**env, "PATH": "/nonexistent"})
    assert failures == ["desktop: notify-send is not on PATH"]


def test_every_channel_gets_hostile_text_plain_and_bounded(
    desktop: Path, hook: Hook, tmp_path: Path
) -> None:

    out = tmp_path / "stdin.txt"
    cfg = NoticeConfig(command=_capture(out), webhook=hook.url)
    notice = notices.new_blocks([_block("shop", HOSTILE + " " + "y" * 1_000_000)])
    assert notices.send(notice, cfg, dict(os.environ)) == []
    [argv] = _desktop_calls(desktop)
    assert argv[:3] == ["--app-name=hitl", "--", "hitl: new block"]
    body = argv[3]
    assert _is_plain(body) and len(body) <= notices.BODY_LIMIT + 40  # + the Pango entities
    assert "<" not in body and ">" not in body  # Pango markup shown, not rendered
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; &lt;span" in body
    [line] = _stdin_of(out)
    assert line.startswith("hitl: shop: Ship[31m red[0m? ]0;owned")
    assert _is_plain(line) and len(line) <= notices.BODY_LIMIT + 6
    assert "[bold]rich[/bold] [@click=app.quit]q[/]" in line  # as typed: no markup anywhere
    [text] = hook.texts()
    assert json.loads(hook.bodies[0])["mrkdwn"] is False
    assert "&lt;!channel&gt;" in text  # Slack's escapes: nobody is paged by the agent
    assert "<" not in text and _is_plain(text) and len(text) <= notices.BODY_LIMIT + 60


def test_a_command_gets_the_notice_on_stdin_and_a_failing_one_is_one_line(tmp_path: Path) -> None:
    out = tmp_path / "stdin.txt"
    assert notices.send(NOTICE, NoticeConfig(desktop=False, command=_capture(out)), {}) == []
    assert out.read_text() == "hitl: 3 new blocks in 2 repos: shop; api\n"
    secret = "tk_SECRET_123456"
    failing = (sys.executable, "-c", "import sys; sys.exit(3)", secret)
    [line] = notices.send(NOTICE, NoticeConfig(desktop=False, command=failing), {})
    assert line == f"command: [notify] command {Path(sys.executable).name} exited with status 3"
    missing = ("/nonexistent/ntfy", "publish", secret)
    [line] = notices.send(NOTICE, NoticeConfig(desktop=False, command=missing), {})
    assert line == "command: [notify] command ntfy could not start: No such file or directory"
    slow = (sys.executable, "-c", "import time; time.sleep(30)", secret)
    [line] = notices.send(NOTICE, NoticeConfig(desktop=False, command=slow, timeout=0.5), {})
    assert line.endswith("did not finish within 0.5 s") and secret not in line


def test_the_webhook_from_the_environment(hook: Hook) -> None:
    cfg = NoticeConfig(desktop=False, webhook_env="HITL_TEST_HOOK")
    assert notices.send(NOTICE, cfg, {"HITL_TEST_HOOK": hook.url}) == []
    assert hook.texts() == ["hitl: 3 new blocks in 2 repos: shop; api"]
    assert notices.send(NOTICE, cfg, {}) == [
        "webhook: $HITL_TEST_HOOK ([notify] webhook_env) is not set"
    ]


@pytest.mark.parametrize("how", ["status", "timeout", "refused"])
def test_a_failing_webhook_is_one_line_without_its_url(hook: Hook, how: str) -> None:
    url = hook.url
    if how == "status":
        hook.status = 500
    elif how == "timeout":
        hook.delay = 5
    else:
        url = "http://127.0.0.1:9" + HOOK_PATH  # the discard port: nothing listens
    cfg = NoticeConfig(desktop=False, webhook=url, timeout=0.5)
    [line] = notices.send(NOTICE, cfg, {})
    assert line.startswith("webhook: ")
    for part in ("SECRETHOOKxyz", "T000", "B000", "/services", "127.0.0.1:"):
        assert part not in line, line
    expected = {
        "status": "webhook: HTTP 500 nope ***",
        "timeout": "webhook: no answer within 0.5 s",
    }
    if how in expected:
        assert line == expected[how]
    assert "SECRET" not in repr(cfg)  # nor in a repr (a log, a traceback)
    assert "tk_SECRET" not in repr(Config(notify=NoticeConfig(command=("ntfy", "tk_SECRET"))))


# -- the config -------------------------------------------------------------------------------


def test_the_notify_table_is_read(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        "[notify]\n"
        "desktop = false\n"
        'terminal = "osc777"\n'
        'command = ["ntfy", "publish", "topic"]\n'
        'webhook_env = "HITL_HOOK"\n'
        'on = ["not-resumed"]\n'
        "timeout = 2\n"
    )
    cfg = load_config(config).notify
    assert cfg == NoticeConfig(
        desktop=False,
        terminal="osc777",
        command=("ntfy", "publish", "topic"),
        webhook_env="HITL_HOOK",
        on=frozenset({"not-resumed"}),
        timeout=2.0,
    )
    assert not cfg.wants("new") and cfg.wants("not-resumed")
    # No table: desktop and terminal "auto", both kinds.
    assert Config().notify == NoticeConfig(
        desktop="auto", terminal="auto", on=frozenset(notices.KINDS)
    )


def test_a_webhook_in_the_config_never_shows_in_an_error(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[notify]\nwebhook = "hooks.slack.com/services/T0/B0/SECRET"\n')
    with pytest.raises(UsageError) as caught:
        load_config(config)
    assert str(caught.value) == f"{config}: [notify]: webhook must be an http(s) URL in quotes"


# -- in the app -------------------------------------------------------------------------------


def _notice_app(root: Path, cfg: NoticeConfig):
    from tests.tui_support import make_app

    app = make_app([root])
    app.config = dataclasses.replace(app.config, notify=cfg)
    written: list[str] = []
    app.write_terminal = written.append  # type: ignore[method-assign]
    return app, written


def _arrive_three_in_two_repos(app, root: Path) -> None:
    """A loopkit repo and an agenticloop repo with two blocked tasks appear at once."""
    alpha = root / "alpha"
    (alpha / ".git").mkdir(parents=True)
    (alpha / "BLOCKED.md").write_text("## Question\nWhich region?\n")
    ledger = root / "ledger"
    shutil.copytree(FIXTURES / "agenticloop-billing", ledger)
    (ledger / ".agenticloop" / "tasks" / "T-012.md").unlink()
    for repo in (alpha, ledger):
        app.apply_delta(app.inbox.handle([repo]), announce=True)


async def test_a_burst_of_three_new_blocks_is_one_notice_on_every_channel(
    tmp_path: Path, desktop: Path, hook: Hook, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.pilot import settle
    from tests.tui_support import SIZE, demo_workspace

    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("TERM_PROGRAM", "WezTerm")
    for name in ("TMUX", "KITTY_WINDOW_ID", "VTE_VERSION", "ITERM_SESSION_ID"):
        monkeypatch.delenv(name, raising=False)
    root = demo_workspace(tmp_path / "ws")
    out = tmp_path / "stdin.txt"
    app, written = _notice_app(root, NoticeConfig(command=_capture(out), webhook=hook.url))
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot, app)
        assert _desktop_calls(desktop) == [] and written == []  # the first scan: no notice
        _arrive_three_in_two_repos(app, root)
        await until(pilot, lambda: len(_stdin_of(out)) >= 1 and hook.bodies)
        await until(pilot, lambda: _desktop_calls(desktop))
        await pilot.pause(0.3)
        [argv] = _desktop_calls(desktop)
        assert argv == [
            "--app-name=hitl",
            "--",
            "hitl: 3 new blocks",
            "3 new blocks in 2 repos: alpha, ledger",
        ]
        line = "hitl: 3 new blocks in 2 repos: alpha, ledger"
        assert _stdin_of(out) == [line]
        assert hook.texts() == [line]
        assert written == [f"\x1b]9;{line}\x07"]
        assert not [n for n in app._notifications if n.title == "Notice not sent"]


async def test_a_failing_webhook_is_one_toast_without_the_url(tmp_path: Path, hook: Hook) -> None:
    from tests.support.pilot import arrive, settle
    from tests.tui_support import SIZE, demo_workspace

    hook.status = 403
    root = demo_workspace(tmp_path / "ws")
    app, _ = _notice_app(root, NoticeConfig(desktop=False, terminal=False, webhook=hook.url))
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot, app)

        def failed() -> list[str]:
            return [str(n.message) for n in app._notifications if n.title == "Notice not sent"]

        arrive(app, root, ["alpha"])
        await until(pilot, lambda: failed())
        arrive(app, root, ["bravo"])  # fails the same way: said once
        await until(pilot, lambda: len(hook.bodies) == 2)
        await pilot.pause(0.3)
        assert failed() == ["webhook: HTTP 403 nope ***"]
        assert hook.texts()[0] == "hitl: alpha: What about alpha?"


async def test_a_loop_that_did_not_resume_is_a_notice(
    tmp_path: Path, desktop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datetime import timedelta

    from hitl_tui.tui.inbox_screen import InboxScreen
    from tests.support.pilot import preview_of
    from tests.support.repos import git_loops
    from tests.test_tui_waiting import _app, _rows
    from tests.tui_support import SIZE

    if shutil.which("git") is None:
        pytest.skip("needs git")
    monkeypatch.setattr(InboxScreen, "LOOK_EVERY", 0.2)
    root = git_loops(tmp_path / "loops")
    out = tmp_path / "stdin.txt"
    app = _app(root, tmp_path / "calls.jsonl", within=timedelta(seconds=1))
    app.config = dataclasses.replace(app.config, notify=NoticeConfig(command=_capture(out)))
    app.bell = lambda: None  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await preview_of(pilot, app, "shop", "1")
        await pilot.press("r", "y")  # no restart: the loop never acts
        await until(pilot, lambda: any(b.state == "not-resumed" for b in _rows(app)))
        await until(pilot, lambda: _stdin_of(out) != [])
        await pilot.pause(0.3)
        assert _stdin_of(out) == ["hitl: shop: no sign of the loop since the answer"]
        assert _desktop_calls(desktop) == [
            [
                "--app-name=hitl",
                "--",
                "hitl: not resumed",
                "shop: no sign of the loop since the answer",
            ]
        ]


async def test_on_picks_what_is_noticed(tmp_path: Path, desktop: Path) -> None:
    from tests.support.pilot import arrive, settle
    from tests.tui_support import SIZE, demo_workspace

    root = demo_workspace(tmp_path / "ws")
    app, written = _notice_app(root, NoticeConfig(on=frozenset({"not-resumed"})))
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot, app)
        arrive(app, root, ["alpha"])
        await until(pilot, lambda: any(n.title == "New block" for n in app._notifications))
        await pilot.pause(0.5)
        assert _desktop_calls(desktop) == [] and written == []


async def test_a_block_written_on_disk_is_a_desktop_notice(tmp_path: Path, desktop: Path) -> None:
    """The real watcher: a BLOCKED.md written in a watched repo, one notice with its question."""
    import asyncio

    from tests.support.pilot import settle
    from tests.tui_support import SIZE, demo_workspace, make_app

    root = demo_workspace(tmp_path / "ws")
    app = make_app([root], watch=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await asyncio.sleep(0.3)
        (root / "infra" / "BLOCKED.md").write_text("## Question\nRotate the <b>password</b> now?\n")
        await until(pilot, lambda: _desktop_calls(desktop), 20)
        assert _desktop_calls(desktop) == [
            [
                "--app-name=hitl",
                "--",
                "hitl: new block",
                "infra: Rotate the &lt;b&gt;password&lt;/b&gt; now?",
            ]
        ]


def _read_until(fd: int, wanted: bytes, seconds: float) -> bytes:
    import select
    import time

    seen = b""
    ends = time.monotonic() + seconds
    while wanted not in seen and time.monotonic() < ends:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
    return seen


def _hitl_in_pty(root: Path, config: Path):
    """`hitl ROOT` in a real pseudo-terminal of 100x30, outside tmux: (process, pty leader)."""
    import pty
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TERM_PROGRAM")}
    env.update(TERM="xterm-256color", HITL_CONFIG=str(config), COLUMNS="100", LINES="30")
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "hitl_tui", str(root)],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=env,
        start_new_session=True,
    )
    os.close(follower)
    return proc, leader


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")
def test_the_app_writes_the_osc_escape_to_its_real_terminal(tmp_path: Path) -> None:
    """`hitl` in a real pseudo-terminal: a new block writes OSC 9 there, between frames."""
    import subprocess
    import time

    root = tmp_path / "loops"
    (root / "shop" / ".git").mkdir(parents=True)
    config = tmp_path / "config.toml"
    config.write_text('bell = false\n[notify]\ndesktop = false\nterminal = "osc9"\n')
    proc, leader = _hitl_in_pty(root, config)
    try:
        # The first scan is over and the watcher starts: what is written now is new.
        assert b"watching 1 repo" in _read_until(leader, b"watching 1 repo", 30)
        time.sleep(0.5)
        (root / "shop" / "BLOCKED.md").write_text("## Question\nShip it?\x1b]9;fake\x07\n")
        want = b"\x1b]9;hitl: shop: Ship it?]9;fake\x07"
        out = _read_until(leader, want, 30)
        assert want in out, out[-2000:]
        assert b"\x1b]9;fake" not in out  # the agent's own escape never reached the terminal
    finally:
        os.write(leader, b"q")
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        os.close(leader)


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")
@pytest.mark.parametrize("channel", ["command", "webhook"])
def test_quitting_does_not_wait_for_a_notice_nor_leave_its_command_running(
    tmp_path: Path, channel: str
) -> None:
    """A notice command that ignores SIGTERM, or a webhook that never answers, with a long
    timeout: `q` exits at once (it held the process until the timeout: the interpreter waits
    for worker and executor threads), and the command is killed, not left behind."""
    import select
    import socket
    import subprocess
    import time

    root = tmp_path / "loops"
    (root / "shop" / ".git").mkdir(parents=True)
    marker = tmp_path / "still-running"
    started = tmp_path / "started"
    script = f"touch '{started}'; trap '' TERM; sleep 40; touch '{marker}'"
    silent = socket.socket()  # listens, never accepts: the POST waits for its answer
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    if channel == "command":
        setting = f"command = {json.dumps(['sh', '-c', script])}\n"
    else:
        setting = f'webhook = "http://127.0.0.1:{silent.getsockname()[1]}/hook"\n'
    config = tmp_path / "config.toml"
    config.write_text(
        "bell = false\n[notify]\ndesktop = false\nterminal = false\ntimeout = 40\n" + setting
    )
    proc, leader = _hitl_in_pty(root, config)
    try:
        assert b"watching 1 repo" in _read_until(leader, b"watching 1 repo", 30)
        time.sleep(0.5)
        (root / "shop" / "BLOCKED.md").write_text("## Question\nShip it?\n")
        # The burst ends, the command starts (or the POST connects).
        if channel == "command":
            until_sync(started.exists, 30, what="the notice command to start")
        else:
            until_sync(
                lambda: select.select([silent], [], [], 0)[0],  # a connection is waiting
                30,
                what="the webhook's POST to connect",
            )
        began = time.monotonic()
        os.write(leader, b"q")
        while proc.poll() is None and time.monotonic() - began < 60:
            _read_until(leader, b"\0never", 0.3)
        assert proc.poll() == 0
        assert time.monotonic() - began < 15
        alive = subprocess.run(["pgrep", "-f", str(marker)], capture_output=True, text=True)
        assert alive.stdout == ""
    finally:
        silent.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)


# -- one notice per item for all of the operator's hitl -----------------------------------------


def test_an_item_is_claimed_once_a_day() -> None:
    from datetime import UTC, datetime, timedelta

    now = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    assert notices.claim(["a", "b"], now) == {"a", "b"}
    assert notices.claim(["a", "b", "c"], now + timedelta(minutes=5)) == {"c"}
    later = now + timedelta(hours=24, minutes=1)  # a and b are forgotten; c is not yet
    assert notices.claim(["a", "b", "c"], later) == {"a", "b"}


def test_the_claims_file_is_bounded_and_a_damaged_one_claims_everything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from datetime import UTC, datetime, timedelta

    from hitl_tui.state import files as statefile

    monkeypatch.setattr(notices, "NOTIFIED_MAX", 50)
    now = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    for n in range(4):
        notices.claim([f"k{n}-{i}" for i in range(40)], now + timedelta(seconds=n))
    path = statefile.in_state(notices.NOTIFIED_FILE)
    kept = json.loads(path.read_text())["sent"]
    assert len(kept) == 50  # the newest kept
    assert notices._digest("k3-0") in kept and notices._digest("k0-0") not in kept
    path.write_text('{"format": 1, "sent": {"x": 5, "y": [1]}}')  # wrong types: not claims
    assert notices.claim(["x", "y"], now) == {"x", "y"}
    path.write_bytes(b"\xff\x00 not json")
    assert notices.claim(["x"], now) == {"x"}  # unreadable: this app sends, nothing raised


def test_two_processes_claiming_at_once_send_each_item_once(tmp_path: Path) -> None:
    """Two real processes claim the same 300 keys at the same moment, 30 at a time: each key
    is claimed by exactly one of them (the file's lock), and none is lost."""
    import subprocess

    go = tmp_path / "go"
    program = (
        "import os, sys, time, json\n"
        "from hitl_tui.loops import notices\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.005)\n"
        "mine = set()\n"
        "for start in range(0, 300, 30):\n"
        "    mine |= notices.claim([f'k{i}' for i in range(start, start + 30)])\n"
        "print(json.dumps(sorted(mine)))\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    go.touch()
    got = [set(json.loads(p.communicate(timeout=60)[0])) for p in procs]
    assert got[0] | got[1] == {f"k{i}" for i in range(300)}
    assert not got[0] & got[1]


async def test_a_block_two_apps_see_arrive_is_one_notice_on_the_shared_channels(
    tmp_path: Path, desktop: Path, hook: Hook
) -> None:
    """Two apps of the operator's (a terminal and a browser tab) both see a block arrive:
    the desktop, the command and the webhook get one notice; each app's terminal still gets
    its own escape. A block the other app did not see is still noticed."""
    from hitl_tui.inbox.inbox import Delta
    from hitl_tui.sources.loopkit.source import LoopkitSource
    from tests.support.pilot import arrive, settle
    from tests.tui_support import SIZE, demo_workspace

    root = demo_workspace(tmp_path / "ws")
    out = tmp_path / "stdin.txt"
    cfg = NoticeConfig(command=_capture(out), webhook=hook.url, terminal=True)
    first, first_terminal = _notice_app(root, cfg)
    async with first.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot, first)
        arrive(first, root, ["alpha"])
        await until(pilot, lambda: first_terminal != [] and len(hook.bodies) == 1)
    second, second_terminal = _notice_app(root, cfg)
    async with second.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot, second)
        alpha = root / "alpha"  # the same block arriving in this app too
        block = LoopkitSource().parse(alpha, alpha / "BLOCKED.md", "alpha")
        second.apply_delta(Delta(added=[block]), announce=True)
        await until(pilot, lambda: second_terminal != [])
        await pilot.pause(0.5)
        arrive(second, root, ["bravo"])
        await until(pilot, lambda: len(hook.bodies) == 2)
        await pilot.pause(0.3)
    assert first_terminal == ["\x1b]9;hitl: alpha: What about alpha?\x07"]
    assert second_terminal[0] == first_terminal[0]  # each app's own terminal
    assert _stdin_of(out) == ["hitl: alpha: What about alpha?", "hitl: bravo: What about bravo?"]
    assert hook.texts() == _stdin_of(out)
    assert len(_desktop_calls(desktop)) == 2


def test_a_late_answer_is_claimed_once_per_deadline_and_a_hushed_block_never() -> None:
    """A late answer is its entry and the deadline it missed: a second app's claim of it is
    empty; after a restart, its next deadline is a notice again. A block an undo brought back
    (`hush`) is claimed for no channel, by any app."""
    from datetime import UTC, datetime, timedelta

    @dataclass
    class Late:
        block_id: str
        id: str
        deadline: datetime

    due = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    late = Late("shop", "20261201T085000Z-3f9a1c", due)
    channels = ["desktop", "command:x"]
    first = notices.shared_late([late]).claimed(channels)
    assert [n.body for n in first] == ["shop: no sign of the loop since the answer"] * 2
    assert notices.shared_late([late]).claimed(channels) == [None, None]
    again = Late("shop", late.id, due + timedelta(minutes=12))  # restarted, late again
    assert [n is not None for n in notices.shared_late([again]).claimed(channels)] == [True] * 2
    back, other = _block("shop", "Ship?"), _block("api", "Ship?")
    notices.hush([notices.new_key(back.source, back.path, back.fingerprint, back.since)])
    claimed = notices.shared_new([back, other]).claimed(channels)
    assert [n.body for n in claimed] == ["api: Ship?", "api: Ship?"]


def test_a_path_of_any_bytes_is_claimed_and_remembered() -> None:
    """A block file whose name is not UTF-8 (a lone surrogate from far away, say): claimed,
    remembered (the file stays readable), and claimed once."""
    import os

    odd = os.fsdecode(b"/r/caf\xe9/BLOCKED.md")
    keys = [f"new loopkit {odd} sha256:x t", "new ssh h:/r/\ud800 x t"]
    assert notices.claim(keys) == set(keys)
    assert notices.claim(keys) == set()


def test_a_fifo_for_the_claims_file_never_hangs_a_notice(tmp_path: Path) -> None:
    import time

    from hitl_tui.state import files as statefile

    path = statefile.in_state(notices.NOTIFIED_FILE)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    began = time.monotonic()
    assert notices.claim(["a"]) == {"a"}  # this app sends; nothing waits on the FIFO
    assert time.monotonic() - began < 2


def test_a_full_day_of_claims_fits_the_file() -> None:
    from datetime import UTC, datetime, timedelta

    from hitl_tui.state import files as statefile

    now = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    path = "/home/operator/src/loops/" + "x" * 60 + "/BLOCKED.md"
    for batch in range(20):
        keys = [f"new loopkit {path}{batch}-{i} sha256:{'f' * 64} t" for i in range(1000)]
        notices.claim(keys, now + timedelta(seconds=batch))
    size = statefile.in_state(notices.NOTIFIED_FILE).stat().st_size
    assert size < notices.NOTIFIED_MAX_BYTES / 2
    assert notices.claim([f"new loopkit {path}19-0 sha256:{'f' * 64} t"], now) == set()


async def test_an_app_without_a_channel_does_not_take_its_notice_from_one_with_it(
    tmp_path: Path, hook: Hook
) -> None:
    """The first app (a browser tab, say) posts the webhook only; the second also runs a
    command: the webhook gets one post, and the command still gets its notice."""
    from hitl_tui.inbox.inbox import Delta
    from hitl_tui.sources.loopkit.source import LoopkitSource
    from tests.support.pilot import arrive, settle
    from tests.tui_support import SIZE, demo_workspace

    root = demo_workspace(tmp_path / "ws")
    out = tmp_path / "stdin.txt"
    only_hook = NoticeConfig(desktop=False, terminal=False, webhook=hook.url)
    both = dataclasses.replace(only_hook, command=_capture(out))
    first, _ = _notice_app(root, only_hook)
    async with first.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot, first)
        arrive(first, root, ["alpha"])
        await until(pilot, lambda: len(hook.bodies) == 1)
    second, _ = _notice_app(root, both)
    async with second.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot, second)
        alpha = root / "alpha"
        block = LoopkitSource().parse(alpha, alpha / "BLOCKED.md", "alpha")
        second.apply_delta(Delta(added=[block]), announce=True)
        await until(pilot, lambda: _stdin_of(out) != [])
        await pilot.pause(0.5)
    assert _stdin_of(out) == ["hitl: alpha: What about alpha?"]
    assert len(hook.bodies) == 1


# -- two real apps: a late answer and an undo ---------------------------------------------------


class _PtyApp:
    """`hitl` in a pseudo-terminal of its own, its output read all along by a thread (two apps
    at once: one left unread would block on a full terminal)."""

    def __init__(self, root: Path, config: Path) -> None:
        import threading

        self.proc, self.leader = _hitl_in_pty(root, config)
        self.seen = b""
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        import select

        while True:
            try:
                ready, _, _ = select.select([self.leader], [], [], 0.2)
                chunk = os.read(self.leader, 65536) if ready else b""
            except (OSError, ValueError):
                return
            if ready and not chunk:
                return
            with self._lock:
                self.seen = (self.seen + chunk)[-200_000:]

    def mark(self) -> None:
        """Forget what was drawn so far: `shows` looks at what comes next."""
        with self._lock:
            self.seen = b""

    def shows(self, text: bytes) -> bool:
        with self._lock:
            return text in self.seen

    def press(self, key: bytes) -> None:
        os.write(self.leader, key)

    def stop(self) -> None:
        import subprocess

        try:
            self.press(b"q")
            self.proc.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        os.close(self.leader)
        self._reader.join(5)


def _poll(done, seconds: float, what) -> None:
    """Wait (at most `seconds`) for `done()`; fail saying what `what()` saw."""
    until_sync(done, seconds, every=0.1, saw=what)


def _stays(done, seconds: float, what) -> None:
    """`done()` holds now and for `seconds` (what must not happen has had its time)."""
    import time

    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        assert done(), what()
        time.sleep(0.1)


def _two_apps_config(tmp_path: Path, root: Path, out: Path) -> Path:
    config = tmp_path / "config.toml"
    config.write_text(
        "\n".join(
            [
                f"repos = [{json.dumps(str(root))}]",
                "bell = false",
                "[notify]",
                "desktop = false",
                "terminal = false",
                f"command = {json.dumps(list(_capture(out)))}",
                "[[loop]]",
                f"match = [{json.dumps(str(root / '*'))}]",
                'open = ["true"]',
                'resume_within = "2s"',
            ]
        )
        + "\n"
    )
    return config


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")
def test_two_real_apps_notice_a_late_answer_once_and_an_undo_not_at_all(tmp_path: Path) -> None:
    """Two `hitl` apps of the operator's in two terminals, a [notify] command that appends to
    a file. An answer whose loop never acts turns late: one notice, though both apps show it
    (each sent one). The operator undoes it in one app: its block is back in both, and no
    "new block" notice is sent for it. A block that is new after all that is noticed once:
    the notices were not merely slow."""
    if shutil.which("git") is None:
        pytest.skip("needs git")
    from tests.hostile_cases import run_hitl
    from tests.support.repos import git_loops

    root = git_loops(tmp_path / "loops")
    out = tmp_path / "notices.txt"
    config = _two_apps_config(tmp_path, root, out)
    apps = [_PtyApp(root, config), _PtyApp(root, config)]

    def seen() -> str:
        return f"notices: {_stdin_of(out)}; screens: {[a.seen[-600:] for a in apps]}"

    try:
        for app in apps:
            _poll(lambda app=app: app.shows(b"in 2 repos \xc2\xb7 watching 2"), 30, seen)
        done = run_hitl("answer", "shop", "--choice", "A", "--no-restart", "--config", config)
        assert done.returncode == 0, done.stderr
        # Both apps see it turn late (they look every 5 s); each would have noticed it.
        for app in apps:
            _poll(lambda app=app: app.shows(b"1 not resumed"), 30, seen)
        late = "hitl: shop: no sign of the loop since the answer"
        _poll(lambda: _stdin_of(out) != [], 30, seen)
        # The undo, in the first app (u: the last answer; it asks first): the block is back in
        # both.
        for app in apps:
            app.mark()
        apps[0].press(b"u")
        _poll(lambda: apps[0].shows(b"y undo"), 30, seen)
        apps[0].press(b"y")
        for app in apps:
            _poll(lambda app=app: app.shows(b"2 blocks in 2 repos"), 30, seen)
        # A block that is new: noticed once, after whatever the late answer and the undo sent.
        (root / "api" / "BLOCKED.md").unlink()
        for app in apps:
            _poll(lambda app=app: app.shows(b"1 block in 1 repo"), 30, seen)
        fresh = root / "api" / "BLOCKED.md"
        fresh.write_text("## Question\nShip the api today?\n")
        new = "hitl: api: Ship the api today?"
        _poll(lambda: new in _stdin_of(out), 30, seen)
        # Each app's burst holding it has been sent by now (one claimed it); a notice of the
        # other app's that came late would come within this.
        _stays(lambda: _stdin_of(out) == [late, new], 2.0, seen)
    finally:
        for app in apps:
            app.stop()
