"""The app with a `[[remote]]` host behind a real OpenSSH server: its blocks beside the local
ones, answered with the same keys, the host's state in the header when it goes away."""

from __future__ import annotations

from pathlib import Path

from hitl_tui.config import load_config
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.inbox.workspace import Workspace
from hitl_tui.sources.ssh.backend import SshBackend
from hitl_tui.tui.app import HitlApp
from hitl_tui.tui.widgets import BlockList
from tests.sshd import Sshd
from tests.support import until
from tests.test_remote_ssh import QUESTION, blocked, loop_repo, write_config
from tests.tui_support import SIZE


def _app(config_path: Path) -> HitlApp:
    config = load_config(config_path)
    [backend] = config.remotes
    assert isinstance(backend, SshBackend)
    backend.alive_every = 0.5
    return HitlApp(Inbox(Workspace.discover(list(config.repos))), config=config)


async def test_a_remote_block_is_listed_answered_and_its_host_state_shown(
    tmp_path: Path, sshd: Sshd
) -> None:
    config, loops = write_config(tmp_path, sshd)
    shop = loop_repo(loops)
    blocked(tmp_path / "here", "api", "Local question?")
    app = _app(config)
    async with app.run_test(size=SIZE) as pilot:
        rows = app.query_one(BlockList)
        await until(pilot, lambda: len(rows.blocks) == 2)
        ids = sorted(b.id for b in rows.blocks.values())
        assert ids == ["api", "build-1:shop"]
        bar = str(app.query_one("#topbar").render())
        assert "SSH 1/1 ok" in bar

        # highlight the remote block, then answer it as any other: 2, then apply
        for key in ("k", "k", "j", "j"):
            current = app.inbox_screen.current
            if current is not None and current.id == "build-1:shop":
                break
            await pilot.press(key)
        assert app.inbox_screen.current.id == "build-1:shop"
        question = app.screen.query_one("#question")
        assert QUESTION in str(question.render())
        assert str(question.border_subtitle) == "build-1:shop · loopkit on build-1 · blocked"
        await pilot.press("2")
        await until(pilot, lambda: app.screen.id == "preview" or len(app.screen_stack) > 1)
        await pilot.press("enter")
        await until(pilot, lambda: not (shop / "BLOCKED.md").exists())
        assert "B) Keep invoices" in (shop / "PROMPT.md").read_text()
        await until(
            pilot,
            lambda: (
                "build-1:shop" not in {b.id for b in rows.blocks.values()}
                or any(
                    r
                    for r in rows.blocks.values()
                    if r.id == "build-1:shop" and r.state == "waiting"
                )
            ),
        )

        sshd.kill()
        await until(pilot, lambda: "build-1: " in str(app.query_one("#topbar").render()))
        bar = str(app.query_one("#topbar").render())
        assert "SSH 0/1 ok" in bar and "retrying in" in bar
        assert "api" in {b.id for b in rows.blocks.values()}  # local blocks unaffected


def test_the_header_names_the_hosts_in_trouble(tmp_path: Path) -> None:
    from hitl_tui.tui.header import header_parts

    inbox = Inbox(Workspace.discover([tmp_path]))
    states = {
        "SSH": {
            "build-1": ("ok", "connected, 3 blocks"),
            "build-2": ("unreachable", "unreachable (connection refused), retrying in 30 s"),
            "build-3": ("unreachable", "the connection dropped, retrying in 4 s"),
            "build-4": ("unauthorised", "ssh was refused (permission denied: the key?)"),
        }
    }
    tail = header_parts(inbox, states).tail
    assert tail == (
        " · SSH 1/4 ok (build-2: unreachable (connection refused), retrying in 30 s; "
        "build-3: the connection dropped, retrying in 4 s; +1 more)"
    )


async def test_a_host_whose_far_side_warns_is_named_in_the_header(
    tmp_path: Path, sshd: Sshd, spawned: list
) -> None:
    """Connected, but a repo there cannot be read as it should: the operator sees that host
    and why in the header (it still counts as read), and one toast says so."""
    config, loops = write_config(tmp_path, sshd)
    loop_repo(loops)
    broken = loops / "proj"
    (broken / ".git").mkdir(parents=True)
    (broken / ".agenticloop" / "tasks").mkdir(parents=True)
    (broken / ".agenticloop" / "project.md").write_text("---\ntask_backend: [files\n---\n")
    app = _app(config)
    async with app.run_test(size=SIZE) as pilot:
        rows = app.query_one(BlockList)
        await until(pilot, lambda: len(rows.blocks) == 1)
        await until(pilot, lambda: "warning there" in str(app.query_one("#topbar").render()))
        bar = str(app.query_one("#topbar").render())
        assert "SSH 1/1 ok (build-1: connected, 1 block (1 warning there: proj: " in bar
        assert ".agenticloop/project.md could not be read" in bar
        toasts = [n for n in app._notifications if "warning there" in n.message]
        assert len(toasts) == 1 and toasts[0].title == "SSH source"

        # fixed there: the warning leaves the header
        (broken / ".agenticloop" / "project.md").write_text("---\ntask_backend: files\n---\n")
        await until(pilot, lambda: "warning there" not in str(app.query_one("#topbar").render()))
        assert "SSH 1/1 ok" in str(app.query_one("#topbar").render())
    # Quitting ended the live connection: its ssh has exited and both pipes were read to
    # the end (none left open for the garbage collector, after the event loop is gone).
    assert spawned
    for proc in spawned:
        assert proc.returncode is not None
        assert proc.stdout.at_eof() and proc.stderr.at_eof()


async def test_an_answer_left_not_known_by_the_last_app_is_told_by_this_one(
    tmp_path: Path, sshd: Sshd
) -> None:
    """The last app sent an answer and lost the connection before it could tell whether it
    was written (it did get written there), then quit. This app reads what it left, asks
    that machine's journal as the host connects, says so in a toast, and journals it here."""
    from datetime import UTC, datetime

    from hitl_tui import journal
    from hitl_tui.model import Answer, Plan
    from hitl_tui.sources.ssh.backend import Pending, answer_words

    config, loops = write_config(tmp_path, sshd)
    shop = loop_repo(loops)
    [last] = load_config(config).remotes
    host = last.hosts["build-1"]
    [block] = last._read_host(host)
    answer = Answer(choice=block.choices[1], operator="Ada")
    began = datetime.now(UTC)
    ran = last._run(host, [*answer_words(block, answer), "--json"])  # written there, unheard
    assert ran.code == 0 and not (shop / "BLOCKED.md").exists()
    last.keeps_pending = True
    plan = Plan(block, answer, (), {}, "s")
    fields = journal.remote_fields(plan)
    repo = block.meta["remote_repo"]
    last._keep(Pending("P1", "build-1", began, block.fingerprint, block.id, repo, fields))
    assert journal.history() == []

    app = _app(config)
    async with app.run_test(size=SIZE) as pilot:
        await until(
            pilot,
            lambda: any("was written" in str(n.message) for n in app._notifications),
        )
        [toast] = [n for n in app._notifications if "was written" in str(n.message)]
        assert str(toast.message).startswith("build-1: the answer to build-1:shop was written (")
    [entry] = journal.history()
    assert entry.block_id == "build-1:shop" and entry.sent["host"] == "build-1"
    assert entry.answered == block.choices[1].label()


async def test_quitting_is_quick_with_a_far_side_that_ignores_eof_and_sigterm(
    tmp_path: Path, spawned: list
) -> None:
    """A far hitl that neither stops when its stdin closes nor on SIGTERM: quitting ends it
    (SIGKILL) in about a second, not the watch's patient seconds, and no ssh is left."""
    import json
    import sys
    import time

    from tests.test_remote_hostile import LIST, _block, _fake_ssh

    far = tmp_path / "far-hitl"
    listed = json.dumps({**LIST, "blocks": [_block()]})
    far.write_text(
        f"#!{sys.executable}\nimport sys, time, signal\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"sys.stdout.write({listed!r} + '\\n'); sys.stdout.flush()\n"
        "while True:\n"
        '    time.sleep(0.2); sys.stdout.write(\'{"event": "alive"}\\n\'); sys.stdout.flush()\n'
    )
    far.chmod(0o755)
    (tmp_path / "here").mkdir()
    config = tmp_path / "config.toml"
    config.write_text(
        f"repos = [{json.dumps(str(tmp_path / 'here'))}]\n"
        f'[[remote]]\nhost = "h1"\npaths = ["/far"]\nhitl = {json.dumps(str(far))}\n'
        f"ssh = [{json.dumps(_fake_ssh(tmp_path))}]\n"
    )
    app = _app(config)
    app.config.remotes[0]._control = None
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "h1:shop" in {b.id for b in app.inbox.blocks.values()})
        began = time.monotonic()
    assert time.monotonic() - began < 2.5
    assert spawned and all(p.returncode is not None for p in spawned)
    # The preview of the highlighted block, asked of that hung far side, was ended too: the
    # event loop's end (asyncio.run's, the real app's) does not wait a minute for it.
    backend = app.config.remotes[0]
    deadline = time.monotonic() + 2
    while backend._reading and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not backend._reading


async def test_an_answer_told_does_not_toast_the_hosts_warning_again(tmp_path: Path) -> None:
    from types import SimpleNamespace

    app = HitlApp(Inbox(Workspace.discover([tmp_path])))
    source = SimpleNamespace(title="SSH")
    async with app.run_test(size=SIZE) as pilot:
        warned = "connected, 1 block (1 warning there: x)"
        await app._on_remote(source, "h1", "warning", warned, None)
        await app._on_remote(source, "h1", "answer", "the answer to h1:shop was written", None)
        await app._on_remote(source, "h1", "warning", warned, None)
        await pilot.pause()
        toasts = [str(n.message) for n in app._notifications]
        assert toasts == ["h1: " + warned, "h1: the answer to h1:shop was written"]
        assert app.source_states["SSH"]["h1"] == ("warning", warned)


async def test_a_host_that_floods_is_named_throttled_and_the_keys_still_move(
    tmp_path: Path,
) -> None:
    """A far hitl sending `changed` lines for its 2,000 blocks as fast as the pipe takes them:
    the header names it as flooding and throttled, the operator's keys move the cursor
    meanwhile, and the inbox ends as the far side's last state, the host calm again. (Row 9b
    of bench/bench.py times the keys.)"""
    import json
    import sys
    import time

    from tests.test_remote_hostile import _fake_ssh, flood_body

    far = tmp_path / "far-hitl"
    far.write_text(f"#!{sys.executable}\nimport sys, json, time\n{flood_body(seconds=3.0)}\n")
    far.chmod(0o755)
    blocked(tmp_path / "here", "api", "Local question?")
    config = tmp_path / "config.toml"
    config.write_text(
        f"repos = [{json.dumps(str(tmp_path / 'here'))}]\n"
        f'[[remote]]\nhost = "h1"\npaths = ["/far"]\nhitl = {json.dumps(str(far))}\n'
        f"ssh = [{json.dumps(_fake_ssh(tmp_path))}]\n"
    )
    app = _app(config)
    app.config.remotes[0]._control = None

    def bar() -> str:
        return str(app.query_one("#topbar").render())

    def question(n: int) -> str | None:
        rows = app.inbox_screen.blocklist.blocks
        block = next((b for b in rows.values() if b.id == f"h1:r{n}"), None)
        return None if block is None else block.question

    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "h1: flooding, throttled (" in bar(), seconds=20)
        assert "SSH 1/1 ok (h1: flooding, throttled (" in bar()
        assert " changes/s); connected, 2000 blocks)" in bar()
        toasts = [str(n.message) for n in app._notifications if "flooding" in str(n.message)]
        assert len(toasts) == 1 and toasts[0].startswith("h1: flooding, throttled (")
        moved = 0
        for key in "kkkkjjjj":  # each key moves the cursor while the host floods (from api,
            # the newest, at the end)
            before = app.inbox_screen.current
            await pilot.press(key)
            await until(
                pilot, lambda b=before: getattr(app.inbox_screen.current, "id", None) != b.id
            )
            moved += 1
        assert "h1: flooding, throttled" in bar()
        assert moved == 8
        began = time.monotonic()
        await until(pilot, lambda: question(1999) == "Ship 1999? (final)", seconds=30)
        await until(pilot, lambda: "flooding" not in bar(), seconds=10)
        assert time.monotonic() - began < 30
        assert bar().endswith("SSH 1/1 ok")
        rows = app.inbox_screen.blocklist.blocks
        remote = [b for b in rows.values() if b.id.startswith("h1:")]
        assert len(remote) == 1999 and question(7) is None and question(0) == "Ship 0? (final)"
        assert all(b.question.endswith("(final)") for b in remote)
