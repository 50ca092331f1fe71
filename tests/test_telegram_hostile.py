"""A hostile or slow Bot API server is bounded and named (issue 28): the real `hitl listen`
(this checkout's .venv/bin/hitl, a real process on a real repository) against the local Bot
API server of tests/support/telegram_api.py switched to its hostile modes, and the app's
header against the same server.

What a user would see: `hitl listen` logs one line naming the problem, never the token (not
even when the server quotes it back); it backs off instead of hammering a failing server,
waits out a 429's retry_after, reads at most its cap of a huge or endless answer (its memory
stays flat), gives up on a hung call in a bounded time, still stops at once on SIGTERM, and
answers a tap through a slow server. The app's header says "telegram 0/1 ok (bot: why)".
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hitl_tui.config import Config
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.inbox.workspace import Workspace
from hitl_tui.telegram.settings import TelegramConfig
from hitl_tui.tui.app import HitlApp
from tests.hostile_cases import copy_shop
from tests.support import until, until_sync
from tests.support.telegram_api import OPERATOR, TelegramAPI
from tests.tui_support import NOW

HITL = Path(sys.executable).parent / "hitl"
MIB = 1 << 20
#: The peak memory `hitl listen` may reach here. It runs at about 50 MiB; a 64 MiB answer held
#: whole would take it past this bound.
PEAK = 100 * MIB


class Listen:
    """`hitl listen` on a copy of the shop repository (one block, three choices), its bot
    pointed at `tg`; everything it prints goes to one file."""

    def __init__(self, tmp_path: Path, tg: TelegramAPI) -> None:
        self.tg = tg
        tmp_path.mkdir(parents=True, exist_ok=True)
        self.repo = copy_shop(tmp_path / "shop")
        config = tmp_path / "config.toml"
        config.write_text(
            f'repos = ["{self.repo}"]\n\n[telegram]\nchat_id = {OPERATOR["id"]}\napi = "{tg.api}"\n'
        )
        self.output = tmp_path / "listen.log"
        env = {
            **os.environ,
            "HITL_TELEGRAM_TOKEN": tg.token,
            "HITL_STATE_DIR": str(tmp_path / "state"),
            "HITL_CONFIG": str(config),
        }
        with self.output.open("wb") as out:
            self.proc = subprocess.Popen(
                [str(HITL), "listen", "--config", str(config)],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    def log(self) -> str:
        return self.output.read_text(errors="replace")

    def logged(self, words: str, seconds: float = 15) -> None:
        until_sync(lambda: words in self.log(), seconds, what=f"{words!r} logged", saw=self.log)

    def peak_rss(self) -> int:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return int(status.split("VmHWM:")[1].split()[0]) * 1024

    def stop(self, seconds: float = 5) -> tuple[int, float]:
        """SIGTERM; its exit code and how long it took to exit."""
        began = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(seconds)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            raise AssertionError(f"hitl listen still ran {seconds} s after SIGTERM") from None
        return code, time.monotonic() - began

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def assert_no_token(self) -> None:
        log = self.log()
        secret = self.tg.token.split(":", 1)[1]
        assert self.tg.token not in log and secret not in log and secret[:12] not in log, log


@pytest.fixture
def tg():
    with TelegramAPI() as server:
        yield server


@pytest.fixture
def listen(tmp_path: Path, tg: TelegramAPI):
    started: list[Listen] = []

    def start(folder: str = "") -> Listen:
        started.append(Listen(tmp_path / folder if folder else tmp_path, tg))
        return started[-1]

    yield start
    for each in started:
        each.kill()


def gaps(tg: TelegramAPI, method: str) -> list[float]:
    times = [r.at for r in tg.calls(method)]
    return [later - earlier for earlier, later in itertools.pairwise(times)]


def test_a_flood_of_500s_is_named_without_the_token_backed_off_and_recovered(tg, listen):
    """The server fails every call with a 500 whose description quotes the request's URL,
    token and all: the log names the error with the token masked, getUpdates is retried after
    1 s then 2 s (no busy loop), and once the server is well the block is sent."""
    tg.fail(500, description=f"Internal Server Error at /bot{tg.token}/getUpdates")
    hitl = listen()
    hitl.logged("getUpdates: error 500 Internal Server Error at /bot***/getUpdates")
    hitl.logged("sendMessage: error 500 Internal Server Error")
    until_sync(lambda: len(tg.calls("getUpdates")) >= 3, 10, saw=tg.summary)
    first, second = gaps(tg, "getUpdates")[:2]
    assert first >= 0.9 and second >= 1.9, tg.summary()
    tg.clear_faults()
    sent = until_sync(tg.sent_messages, 15, what="the block sent once the server is well")
    assert sent[0]["text"].startswith("shop\n\nShould deleting a workspace")
    assert hitl.stop()[0] == 0
    hitl.assert_no_token()


def test_a_429_is_waited_out_for_its_retry_after(tg, listen):
    tg.flood(2)
    hitl = listen()
    hitl.logged("getUpdates: error 429 Too Many Requests: retry after 2")
    until_sync(lambda: len(tg.calls("getUpdates")) >= 2, 10, saw=tg.summary)
    assert gaps(tg, "getUpdates")[0] >= 1.9, tg.summary()  # not the 1 s of a plain error
    tg.clear_faults()
    until_sync(tg.sent_messages, 15, what="the block sent after the flood")
    assert hitl.stop()[0] == 0
    hitl.assert_no_token()


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda tg: tg.invalid_json(), "getUpdates: HTTP 200, not a Bot API answer"),
        (lambda tg: tg.huge_body(64 * MIB), "getUpdates: an answer larger than 2 MiB"),
        (lambda tg: tg.huge_body(64 * MIB, declare=False), "an answer larger than 2 MiB"),
        (lambda tg: tg.endless_body(), "getUpdates: an answer larger than 2 MiB"),
    ],
    ids=["invalid-json", "huge", "huge-undeclared", "endless"],
)
def test_a_bad_body_is_named_and_read_no_further_than_its_cap(tg, listen, make, said):
    """Every answer is broken: not JSON, 64 MiB (declared or not) or endless. The log names
    it, the bot polls again (it is not stuck on the body), and its memory stays flat."""
    make(tg)
    hitl = listen()
    hitl.logged(said)
    until_sync(lambda: len(tg.calls("getUpdates")) >= 2, 10, saw=tg.summary)
    assert hitl.peak_rss() < PEAK, f"peak {hitl.peak_rss() / MIB:.0f} MiB"
    assert hitl.proc.poll() is None, hitl.log()
    assert hitl.stop()[0] == 0
    hitl.assert_no_token()


def test_a_hung_server_is_given_up_on_and_sigterm_still_stops_listen(tg, listen):
    """The server never finishes an answer: sendMessage's comes a byte every half second
    (no read ever times out), getUpdates' never starts. sendMessage gives up after its 10 s
    in all and says so; with getUpdates still hanging, SIGTERM ends hitl listen at once."""
    tg.trickle(0.5, methods="sendMessage")
    tg.hang(methods="getUpdates")
    hitl = listen()
    until_sync(lambda: tg.calls("getUpdates") and tg.calls("sendMessage"), 10, saw=tg.summary)
    hitl.logged("sendMessage: no answer within 10 s", 20)
    assert hitl.proc.poll() is None
    code, seconds = hitl.stop()
    assert code == 0 and seconds < 5, (code, seconds)
    assert "hitl listen: stopped" in hitl.log()
    hitl.assert_no_token()


def test_a_slow_server_still_takes_a_tap(tg, listen):
    """Every answer takes 1 s: the block is sent, the tap is answered, the answer is written
    on disk and the message edited to say so."""
    tg.slow(1.0)
    hitl = listen()
    (message,) = until_sync(tg.sent_messages, 15, what="the block sent")
    tg.tap(message, text="B) Keep invoices, detach them from the workspace")
    until_sync(
        lambda: "via Telegram" in tg.message(message["message_id"])["text"],
        20,
        what="the message edited",
        saw=tg.summary,
    )
    assert not (hitl.repo / "BLOCKED.md").exists()
    assert "→ B) Keep invoices" in (hitl.repo / "PROMPT.md").read_text()
    assert [a["text"] for a in tg.callback_answers] == [
        "✓ Written: B) Keep invoices, detach them from the workspace"
    ]
    assert hitl.stop()[0] == 0
    hitl.assert_no_token()


def test_another_machine_polling_the_same_bot_is_named(tg, listen):
    """Two hitl listen with state folders of their own (two machines: no shared lock) poll
    the same bot. Telegram ends the older long poll with 409 Conflict; the one that got it
    says another program polls the bot."""
    here, there = listen("here"), listen("there")
    until_sync(lambda: tg.conflicts >= 1, 15, what="a 409 Conflict", saw=tg.summary)
    until_sync(
        lambda: [h for h in (here, there) if "another program polls this bot (409" in h.log()],
        15,
        what="a hitl listen naming the conflict",
        saw=lambda: (here.log(), there.log()),
    )
    assert tg.max_pollers == 2
    for each in (here, there):
        assert each.stop()[0] == 0
        each.assert_no_token()


async def test_the_apps_header_names_a_failing_bot_server(tmp_path, tg, monkeypatch):
    """The app with `[telegram]` on a server that fails every call: the header says
    "telegram 0/1 ok" and why, without the token; the inbox is still listed."""
    monkeypatch.setenv("HITL_TELEGRAM_TOKEN", tg.token)
    repo = copy_shop(tmp_path / "shop")
    tg.fail(502, description=f"Bad Gateway for /bot{tg.token}/getUpdates")
    config = Config(
        operator="Ada",
        bell=False,
        telegram=TelegramConfig(chat_id=OPERATOR["id"], api=tg.api),
    )
    app = HitlApp(Inbox(Workspace.discover([repo])), config=config, clock=lambda: NOW)
    async with app.run_test(size=(200, 40)) as pilot:

        def state() -> tuple[str, str] | None:
            return app.source_states.get("telegram", {}).get("bot")

        await until(pilot, lambda: (state() or ("",))[0] == "error", 15, saw=state)
        bar = str(app.query_one("#topbar").render())
        assert "telegram 0/1 ok (bot: " in bar, bar
        assert "getUpdates: error 502 Bad Gateway for /bot***/getUpdates" in bar, bar
        assert tg.token not in bar and tg.token.split(":")[1] not in bar
        assert "1 block" in bar
        app.stop_event.set()
