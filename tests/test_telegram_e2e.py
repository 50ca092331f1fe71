"""The Telegram bot end to end (issue 28), against a real Bot API server on 127.0.0.1
(`tests/support/telegram_api.py`, built from Telegram's published reference): `hitl listen` as
a real process, and the app under Pilot. A block arrives, its message comes with buttons, a
tap writes the answer on disk, journals it and runs the `[[loop]]` restart, and the message is
edited; a reply is own words; a stale tap is refused; a foreign chat is ignored; two hitl at
once make one poller and one message; the token is never in any output; a hostile or slow
server is bounded and named in the header."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import until, until_sync
from tests.support.repos import git_shop
from tests.support.telegram_api import OPERATOR, STRANGER, TOKEN, TelegramAPI

ROOT = Path(__file__).resolve().parent.parent
HITL = ROOT / ".venv" / "bin" / "hitl"
SECRET = TOKEN.split(":")[1]
KEEP = "B) Keep invoices, detach them from the workspace"


@pytest.fixture
def tg():
    with TelegramAPI() as server:
        yield server


def _config(tmp_path: Path, tg: TelegramAPI, repos: list[Path], restart: Path | None = None):
    lines = [
        f"repos = {json.dumps([str(r) for r in repos])}",
        'operator = "Ada"',
        "[telegram]",
        f"chat_id = {OPERATOR['id']}",
        f'api = "{tg.api}"',
    ]
    if restart is not None:
        code = f"open({str(restart)!r}, 'a').write('restarted\\n')"
        lines += [
            "[[loop]]",
            f"match = [{json.dumps(str(repos[0]))}]",
            f"restart = {json.dumps([sys.executable, '-c', code])}",
        ]
    config = tmp_path / "config.toml"
    config.write_text("\n".join(lines) + "\n")
    return config


class Listen:
    """`hitl listen` as a real process, its stderr read into a file."""

    def __init__(self, config: Path, tmp_path: Path, name: str = "listen") -> None:
        self.err = tmp_path / f"{name}.err"
        env = {**os.environ, "HITL_TELEGRAM_TOKEN": TOKEN}
        self.proc = subprocess.Popen(
            [str(HITL), "listen", "--config", str(config)],
            stdout=subprocess.PIPE,
            stderr=self.err.open("wb"),
            env=env,
        )

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    def stop(self) -> tuple[int, str, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            out, _ = self.proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
            raise AssertionError(f"hitl listen did not end on SIGTERM: {self.stderr()}") from None
        return self.proc.returncode, out.decode(errors="replace"), self.stderr()


@pytest.fixture
def listens():
    started: list[Listen] = []
    yield started
    for one in started:
        if one.proc.poll() is None:
            one.proc.kill()
            one.proc.wait()


def _no_token(*texts: str) -> None:
    for text in texts:
        assert TOKEN not in text and SECRET not in text, text


def _journal(state: Path) -> list[dict]:
    done = subprocess.run(
        [str(HITL), "history", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "HITL_STATE_DIR": str(state)},
        timeout=60,
    )
    return json.loads(done.stdout or "[]")


def test_listen_tap_writes_journals_restarts_and_edits(
    tmp_path: Path, tg: TelegramAPI, listens: list, _isolated_state: Path
) -> None:
    repo = git_shop(tmp_path / "loops" / "shop")
    restarted = tmp_path / "restarted.txt"
    listen = Listen(_config(tmp_path, tg, [repo], restarted), tmp_path)
    listens.append(listen)
    [message] = until_sync(lambda: tg.sent_messages(), 30, saw=listen.stderr, what="a message")
    assert message["chat"]["id"] == OPERATOR["id"]
    assert message["text"].startswith("shop\n\nShould deleting a workspace also delete")
    assert "parse_mode" not in tg.calls("sendMessage")[0].args
    assert [b[0] for b in tg.buttons(message)] == [
        "A) Cascade delete everything",
        KEEP,
        "C) Block deletion while invoices exist",
    ]
    tg.tap(message, text=KEEP)
    until_sync(lambda: not (repo / "BLOCKED.md").exists(), 20, saw=listen.stderr)
    assert "Keep invoices" in (repo / "PROMPT.md").read_text()
    until_sync(lambda: restarted.exists(), 20, saw=listen.stderr, what="the loop's restart")
    edited = until_sync(
        lambda: (
            "via Telegram" in tg.message(message["message_id"])["text"]
            and tg.message(message["message_id"])
        ),
        20,
        saw=lambda: tg.message(message["message_id"]),
    )
    assert f"✓ {KEEP}, via Telegram" in edited["text"]
    assert tg.buttons(edited) == []
    assert [a["text"] for a in tg.callback_answers] == [f"✓ Written: {KEEP}"]
    code, out, err = listen.stop()
    assert code == 0, err
    assert f"hitl listen: telegram: answered shop: {KEEP}, via Telegram\n" in err
    assert "hitl listen: telegram: shop: ↻ Loop restarted.\n" in err
    [entry] = _journal(_isolated_state)
    assert entry["operator"] == "Ada" and "Keep invoices" in json.dumps(entry)
    _no_token(out, err, *(p.read_text(errors="replace") for p in _isolated_state.rglob("*.json*")))
    polls = tg.calls("getUpdates")
    assert json.loads(polls[0].args["allowed_updates"]) == ["message", "callback_query"]
    assert all(int(p.args["timeout"]) >= 20 for p in polls)  # long polling, never a busy loop


def test_listen_reply_stale_tap_and_foreign_chat(
    tmp_path: Path, tg: TelegramAPI, listens: list
) -> None:
    shop = git_shop(tmp_path / "loops" / "shop")
    api = git_shop(tmp_path / "loops" / "api")
    listen = Listen(_config(tmp_path, tg, [shop, api]), tmp_path)
    listens.append(listen)
    first, second = until_sync(lambda: len(tg.sent_messages()) == 2 and tg.sent_messages(), 30)
    by_repo = {m["text"].split("\n")[0]: m for m in (first, second)}

    # A stranger's tap and reply: ignored, logged once.
    tg.add_chat(STRANGER)
    for _ in range(2):
        tg.tap(by_repo["api"], text=KEEP, user=STRANGER)  # in the operator's chat
        tg.send_text("cascade it", user=STRANGER)  # in the stranger's own
    until_sync(lambda: not tg.pending_updates(), 20, saw=listen.stderr, what="updates taken")

    # The api block changes after its message was sent: its new version is sent, the old
    # message says so, and a tap on the old message's button (sent before it was edited) is
    # refused.
    old = by_repo["api"]
    data = dict(tg.buttons(old))[KEEP]
    blocked = api / "BLOCKED.md"
    blocked.write_text(blocked.read_text().replace("7 years", "10 years"))
    until_sync(lambda: len(tg.sent_messages()) == 3, 20, saw=listen.stderr, what="the new block")
    assert "10 years" in tg.sent_messages()[-1]["text"]
    assert "changed since" in tg.message(old["message_id"], OPERATOR["id"])["text"]
    tg.tap(old, data=data, forge=True)
    until_sync(lambda: tg.callback_answers, 20, saw=listen.stderr)
    assert "changed since this message: nothing written" in tg.callback_answers[-1]["text"]
    assert blocked.exists() and "10 years" in blocked.read_text()

    # A reply to the shop block's message: own words.
    tg.reply(by_repo["shop"], "Keep them for 7 years in cold storage")
    until_sync(lambda: not (shop / "BLOCKED.md").exists(), 20, saw=listen.stderr)
    assert "Keep them for 7 years in cold storage" in (shop / "PROMPT.md").read_text()
    code, out, err = listen.stop()
    assert code == 0
    assert err.count("ignored updates from chat") == 2  # once for each chat and user
    assert f"chat {OPERATOR['id']}, user {STRANGER['id']}: only" in err
    assert tg.callback_answers[0]["text"].startswith("The block changed")  # none to strangers
    assert not (api / "PROMPT.md").read_text().count("Cascade")
    _no_token(out, err)


def test_a_block_answered_with_the_cli_has_its_message_edited(
    tmp_path: Path, tg: TelegramAPI, listens: list
) -> None:
    repo = git_shop(tmp_path / "loops" / "shop")
    config = _config(tmp_path, tg, [repo])
    listen = Listen(config, tmp_path)
    listens.append(listen)
    [message] = until_sync(lambda: tg.sent_messages(), 30, saw=listen.stderr)
    done = subprocess.run(
        [str(HITL), "answer", str(repo), "--choice", "C", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    edited = until_sync(
        lambda: (
            "Answered elsewhere" in tg.message(message["message_id"])["text"]
            and tg.message(message["message_id"])
        ),
        20,
        saw=listen.stderr,
    )
    assert tg.buttons(edited) == []
    assert edited["text"].endswith(
        "✓ Answered elsewhere: C) Block deletion while invoices exist — no data loss; users "
        "must contact support. (Ada)"
    )
    tg.tap(message, data=dict(tg.buttons(message))["A) Cascade delete everything"], forge=True)
    until_sync(lambda: tg.callback_answers, 20, saw=listen.stderr)
    assert tg.callback_answers[-1]["text"] == "Already answered elsewhere: nothing written."
    assert "Block deletion" in (repo / "PROMPT.md").read_text()
    assert "Cascade delete everything" not in (repo / "PROMPT.md").read_text()
    assert listen.stop()[0] == 0


def test_two_hitl_one_poller_one_message(tmp_path: Path, tg: TelegramAPI, listens: list) -> None:
    repo = git_shop(tmp_path / "loops" / "shop")
    config = _config(tmp_path, tg, [repo])
    first = Listen(config, tmp_path, "first")
    listens.append(first)
    until_sync(lambda: tg.sent_messages() and tg.polling, 30, saw=first.stderr)
    second = Listen(config, tmp_path, "second")
    listens.append(second)
    said = until_sync(
        lambda: "another hitl polls this bot" in second.stderr() and second.stderr(), 30
    )
    assert f"pid {first.proc.pid} on " in said and " since " in said
    tg.send_text("hello")  # an update, so both would poll again if they could
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:  # a bounded look: nothing more must happen
        assert len(tg.sent_messages()) <= 2
        time.sleep(0.1)
    assert tg.max_pollers == 1 and tg.conflicts == 0
    assert len([m for m in tg.sent_messages() if m["text"].startswith("shop")]) == 1
    # The first ends: the second takes over the polling.
    first.stop()
    until_sync(lambda: "polls the bot now" in second.stderr(), 30, saw=second.stderr)
    code, out, err = second.stop()
    assert code == 0
    _no_token(out, err, first.stderr())


def test_listen_against_a_server_that_hangs_up_backs_off_and_ends_on_sigint(
    tmp_path: Path, listens: list
) -> None:
    """A server that accepts and closes every connection: each failure is said once while it
    lasts, retries back off (a busy loop would make hundreds of connections), no token."""
    import socket
    import threading

    repo = git_shop(tmp_path / "loops" / "shop")
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    accepted: list[float] = []

    def hang_up() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append(time.monotonic())
            conn.close()

    threading.Thread(target=hang_up, daemon=True).start()
    config = tmp_path / "config.toml"
    config.write_text(
        f'repos = ["{repo}"]\n[telegram]\nchat_id = {OPERATOR["id"]}\n'
        f'api = "http://127.0.0.1:{port}"\n'
    )
    try:
        listen = Listen(config, tmp_path)
        listens.append(listen)
        until_sync(lambda: len(accepted) >= 2, 20, saw=listen.stderr)
        first = accepted[0]
        until_sync(lambda: accepted[-1] - first >= 3, 20, saw=lambda: accepted)
        window = [t for t in accepted if t - first <= 3]
        assert len(window) <= 8, f"{len(window)} connections in 3 s: no backoff"
        listen.proc.send_signal(signal.SIGINT)
        code, out, err = listen.stop()
    finally:
        server.close()
    assert code == 0 and err.endswith("hitl listen: stopped\n")
    said = [line for line in err.splitlines() if "telegram: getUpdates" in line]
    assert len(said) == 1, err  # said once while it lasts
    _no_token(out, err)


def test_listen_runs_the_notices_once_per_block_across_two(tmp_path: Path, listens: list) -> None:
    """`hitl listen` with `[notify]` alone: a block that arrives is one notice on the
    command, even with two of them running (the notice claim)."""
    repo = tmp_path / "loops" / "shop"
    (repo / ".git").mkdir(parents=True)
    out = tmp_path / "notices.txt"
    code = "import sys; open(sys.argv[1], 'ab').write(sys.stdin.buffer.read())"
    command = [sys.executable, "-c", code, str(out)]
    config = tmp_path / "config.toml"
    config.write_text(
        f"repos = {json.dumps([str(repo)])}\n[notify]\ndesktop = false\n"
        f"command = {json.dumps(command)}\n"
    )
    both = [Listen(config, tmp_path, "one"), Listen(config, tmp_path, "two")]
    listens.extend(both)
    for one in both:
        until_sync(lambda one=one: "watching 1 repository" in one.stderr(), 30, saw=one.stderr)
    (repo / "BLOCKED.md").write_text("## Question:\nShip it?\n")
    until_sync(lambda: out.exists() and out.read_text(), 30, saw=both[0].stderr)
    time.sleep(1.0)  # a bounded look: the other listen sends nothing more
    assert out.read_text().splitlines() == ["hitl: shop: Ship it?"]
    assert [one.stop()[0] for one in both] == [0, 0]


def test_listen_without_a_token_or_with_nothing_to_do_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[telegram]\nchat_id = 1\n")
    env = {k: v for k, v in os.environ.items() if k != "HITL_TELEGRAM_TOKEN"}
    done = subprocess.run(
        [str(HITL), "listen", "--config", str(config)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == "hitl: $HITL_TELEGRAM_TOKEN ([telegram] token_env) is not set\n"
    config.write_text("repos = []\n")
    done = subprocess.run(
        [str(HITL), "listen", "--config", str(config)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "nothing to listen for" in done.stderr
    done = subprocess.run([str(HITL), "listen", "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "[telegram]" in done.stdout and "SIGTERM" in done.stdout


# -- the app ------------------------------------------------------------------------------------


def _app(tmp_path: Path, tg: TelegramAPI, monkeypatch: pytest.MonkeyPatch):
    import dataclasses

    from hitl_tui.telegram.settings import TelegramConfig
    from tests.tui_support import make_app

    monkeypatch.setenv("HITL_TELEGRAM_TOKEN", TOKEN)
    repo = git_shop(tmp_path / "loops" / "shop")
    app = make_app([repo], watch=True)
    cfg = TelegramConfig(chat_id=OPERATOR["id"], api=tg.api)
    app.config = dataclasses.replace(app.config, telegram=cfg)
    return app, repo


def _bar(app) -> str:
    return str(app.query_one("#topbar").render())


async def test_the_app_runs_the_bot_and_a_tap_answers(
    tmp_path: Path, tg: TelegramAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.tui_support import SIZE

    app, repo = _app(tmp_path, tg, monkeypatch)
    async with app.run_test(size=SIZE) as pilot:
        [message] = await until(pilot, lambda: tg.sent_messages(), 30)
        await until(
            pilot,
            lambda: "telegram 1/1 ok" in _bar(app),
            20,
            saw=lambda: (_bar(app), tg.summary()[-12:], tg.polling),
        )
        tg.tap(message, text=KEEP)
        await until(pilot, lambda: not (repo / "BLOCKED.md").exists(), 20)
        await until(pilot, lambda: not app.inbox.blocks, 20, what="the app's list to follow")
        await until(pilot, lambda: "via Telegram" in tg.message(message["message_id"])["text"])


async def test_a_hanging_server_is_bounded_and_named_in_the_header(
    tmp_path: Path, tg: TelegramAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hitl_tui.telegram import api as tgapi
    from hitl_tui.telegram import bot as tgbot
    from tests.tui_support import SIZE

    monkeypatch.setattr(tgbot, "POLL_TIMEOUT", 1)
    monkeypatch.setattr(tgapi, "POLL_SLACK", 1.0)
    monkeypatch.setattr(tgapi, "CALL_TIMEOUT", 1.0)
    tg.hang()
    app, _repo = _app(tmp_path, tg, monkeypatch)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        began = time.monotonic()
        bar = await until(
            pilot,
            lambda: (
                "telegram 0/1 ok" in _bar(app) and "no answer within" in _bar(app) and _bar(app)
            ),
            20,
            saw=lambda: _bar(app),
        )
        assert time.monotonic() - began < 10
        _no_token(bar, *(str(n.message) for n in app._notifications))
        # The UI answers meanwhile: a key is handled while the server hangs.
        await pilot.press("question_mark")
        await until(pilot, lambda: app.screen.__class__.__name__ == "HelpScreen", 5)
        tg.clear_faults()
        await pilot.press("escape")
        await until(
            pilot,
            lambda: "telegram 1/1 ok" in _bar(app),
            20,
            saw=lambda: (_bar(app), tg.summary()[-12:], tg.polling),
        )
        await until(pilot, lambda: tg.sent_messages(), 20)


@pytest.mark.parametrize("mode", ["huge_body", "endless_body", "invalid_json", "flood"])
def test_hostile_answers_are_bounded_errors_without_the_token(
    tg: TelegramAPI, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    from hitl_tui.telegram import api as tgapi
    from hitl_tui.telegram.api import ApiError, BotApi

    monkeypatch.setattr(tgapi, "CALL_TIMEOUT", 2.0)
    if mode == "huge_body":
        tg.huge_body(tgapi.MAX_BODY + 10)
    elif mode == "flood":
        tg.flood(100000)
    else:
        getattr(tg, mode)()
    api = BotApi(tg.api, TOKEN)
    began = time.monotonic()
    with pytest.raises(ApiError) as caught:
        api.send_message(OPERATOR["id"], "hello")
    assert time.monotonic() - began < 5
    _no_token(str(caught.value), repr(caught.value))
    if mode == "flood":
        assert caught.value.retry_after == tgapi.MAX_RETRY_AFTER


async def test_the_app_beside_a_polling_listen_does_not_poll_and_says_who(
    tmp_path: Path, tg: TelegramAPI, monkeypatch: pytest.MonkeyPatch, listens: list
) -> None:
    app, repo = _app(tmp_path, tg, monkeypatch)
    listen = Listen(_config(tmp_path, tg, [repo]), tmp_path)
    listens.append(listen)
    until_sync(lambda: tg.sent_messages() and tg.polling, 30, saw=listen.stderr)
    async with app.run_test(size=(200, 30), notifications=True) as pilot:  # the whole reason
        bar = await until(
            pilot,
            lambda: "another hitl polls" in _bar(app) and _bar(app),
            30,
            saw=lambda: _bar(app),
        )
        assert "telegram 1/1 ok" in bar and f"pid {listen.proc.pid} on " in bar
        assert tg.max_pollers == 1 and tg.conflicts == 0
        assert len(tg.sent_messages()) == 1


def test_hostile_agent_text_is_sent_plain_and_within_telegrams_bounds(
    tmp_path: Path, tg: TelegramAPI, _isolated_state: Path
) -> None:
    """A question of 3,000 emoji with markup, escapes and control characters in it, and a
    choice of the same: the real server (which counts UTF-16 units and parses nothing without
    parse_mode) takes the message, the tap, the answer and the edit."""
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.loops.resume import ResumeBook
    from hitl_tui.telegram.api import BotApi
    from hitl_tui.telegram.book import TelegramBook
    from hitl_tui.telegram.bot import Bot
    from hitl_tui.telegram.settings import TelegramConfig

    hostile = "<b>bold</b> [bold]x[/] \x1b[31mred\x07 *_`~ 😀" * 3 + "😀" * 3000
    repo = tmp_path / "loops" / "evil"
    (repo / ".git").mkdir(parents=True)
    (repo / "BLOCKED.md").write_text(
        f"## Question:\n{hostile}\n\n## Context:\n{hostile}\n\n"
        f"## Choices:\n- A) {'😀' * 200} <i>go</i>\n- B) stop\n"
    )
    inbox = Inbox.open([repo])
    inbox.use_resumes(ResumeBook.for_state(), ())
    cfg = TelegramConfig(chat_id=OPERATOR["id"], api=tg.api)
    logged: list[str] = []
    bot = Bot(cfg, BotApi(tg.api, TOKEN), inbox, (), "Ada", TelegramBook(None), logged.append)
    bot.sync()
    [message] = tg.sent_messages()
    text = message["text"]
    assert len(text.encode("utf-16-le")) // 2 <= 4096
    assert "<b>bold</b> [bold]x[/]" in text and "\x1b" not in text and "\x07" not in text
    assert "entities" not in message  # nothing was parsed as markup
    [first, _second] = tg.buttons(message)
    tg.tap(message, data=first[1])
    bot.poll_once(0)
    assert not (repo / "BLOCKED.md").exists()
    edited = tg.message(message["message_id"])
    assert "via Telegram" in edited["text"] and tg.buttons(edited) == []
    assert len(tg.callback_answers) == 1
    assert [line.split(":")[0] for line in logged] == ["answered evil"]  # no refusal logged


async def test_in_the_app_an_answer_not_resumed_comes_with_restart_and_drop(
    tmp_path: Path, tg: TelegramAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tap answers; the loop shows no sign within its resume_within; the app turns the
    answer late, and the bot sends it with Restart and Drop; Restart runs the [[loop]]
    restart again and the answer waits anew (Drop: tests/test_telegram.py)."""
    from datetime import timedelta

    from hitl_tui.config import Config
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.inbox.workspace import Workspace
    from hitl_tui.loops.commands import Loop
    from hitl_tui.telegram.settings import TelegramConfig
    from hitl_tui.tui.app import HitlApp
    from hitl_tui.tui.inbox_screen import InboxScreen
    from tests.tui_support import SIZE

    monkeypatch.setattr(InboxScreen, "LOOK_EVERY", 0.2)
    monkeypatch.setenv("HITL_TELEGRAM_TOKEN", TOKEN)
    repo = git_shop(tmp_path / "loops" / "shop")
    calls = tmp_path / "restarts.txt"
    code = f"open({str(calls)!r}, 'a').write('restart\\n')"
    loop = Loop(
        (str(repo),), restart=(sys.executable, "-c", code), resume_within=timedelta(seconds=1)
    )
    cfg = TelegramConfig(chat_id=OPERATOR["id"], api=tg.api)
    config = Config(operator="Ada", bell=False, loops=(loop,), telegram=cfg)
    app = HitlApp(Inbox(Workspace.discover([repo])), config=config, watch=True)
    async with app.run_test(size=SIZE) as pilot:
        [message] = await until(pilot, lambda: tg.sent_messages(), 30)
        tg.tap(message, text=KEEP)
        await until(pilot, lambda: calls.exists(), 20, what="the answer's restart")
        late = await until(
            pilot,
            lambda: len(tg.sent_messages()) == 2 and tg.sent_messages()[1],
            30,
            saw=lambda: [m["text"] for m in tg.sent_messages()],
        )
        assert late["text"].startswith("shop: no sign of the loop since the answer")
        assert [b[0] for b in tg.buttons(late)] == ["Restart", "Drop"]
        tg.tap(late, text="Restart")
        await until(pilot, lambda: calls.read_text().count("restart") == 2, 20)
        edited = await until(
            pilot,
            lambda: (
                "Restarted, via Telegram" in tg.message(late["message_id"])["text"]
                and tg.message(late["message_id"])
            ),
            20,
        )
        assert tg.buttons(edited) == []
        book = app.inbox.resumes
        assert book is not None and [r.state for r in book.open()] == ["waiting"]


def test_listen_a_second_tap_keeps_what_the_first_wrote(
    tmp_path: Path, tg: TelegramAPI, listens: list, _isolated_state: Path
) -> None:
    # The phone still shows the buttons until the edit arrives: the operator taps again.
    repo = git_shop(tmp_path / "loops" / "shop")
    listen = Listen(_config(tmp_path, tg, [repo]), tmp_path)
    listens.append(listen)
    [message] = until_sync(lambda: tg.sent_messages(), 30, saw=listen.stderr, what="a message")
    tg.tap(message, text=KEEP)
    until_sync(
        lambda: "via Telegram" in tg.message(message["message_id"])["text"], 20, saw=listen.stderr
    )
    until_sync(lambda: not (repo / "BLOCKED.md").exists(), 20, saw=listen.stderr)
    tg.tap(message, data=dict(tg.buttons(message))[KEEP], forge=True)
    until_sync(lambda: len(tg.callback_answers) == 2, 20, saw=listen.stderr)
    assert tg.callback_answers[-1]["text"] == "Already done via Telegram: nothing more done."
    assert tg.message(message["message_id"])["text"].endswith(f"✓ {KEEP}, via Telegram")
    assert len(tg.sent_messages()) == 1
    assert listen.stop()[0] == 0
    assert len(_journal(_isolated_state)) == 1
