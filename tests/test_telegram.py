"""The Telegram bot's parts that need no server (issue 28): `[telegram]` validated at load,
the token from the environment only and scrubbed from every error, the buttons' short tokens,
the poller claim, and the bot's logic over a real inbox, real files and a real journal, with a
recording stand-in for the Bot API (the end-to-end tests run a real Bot API server:
tests/test_telegram_e2e.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hitl_tui import journal
from hitl_tui.config import load_config
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.loops.commands import Loop
from hitl_tui.loops.resume import ResumeBook
from hitl_tui.model import UsageError
from hitl_tui.telegram import book as tgbook
from hitl_tui.telegram.api import ApiError, BotApi
from hitl_tui.telegram.bot import BURST, Bot
from hitl_tui.telegram.poller import PollerClaim
from hitl_tui.telegram.settings import TelegramConfig
from tests.hostile_cases import SHOP

TOKEN = "123456789:AAHsecretSECRETsecret_0123456789-xyz"
CHAT = 4242


# -- the config -------------------------------------------------------------------------------


def _config(tmp_path: Path, body: str):
    path = tmp_path / "config.toml"
    path.write_text(textwrap.dedent(body))
    return load_config(path)


def test_the_telegram_table_is_read_with_its_defaults(tmp_path: Path) -> None:
    cfg = _config(tmp_path, "[telegram]\nchat_id = -1001234\nallowed_user_ids = [7, 8]\n")
    assert cfg.telegram == TelegramConfig(chat_id=-1001234, allowed_user_ids=frozenset({7, 8}))
    assert cfg.telegram.token_env == "HITL_TELEGRAM_TOKEN"
    assert cfg.telegram.api == "https://api.telegram.org"
    assert _config(tmp_path, "repos = []\n").telegram is None


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("[telegram]\n", "chat_id is missing"),
        ('[telegram]\nchat_id = "42"\n', "chat_id must be a number"),
        (f'[telegram]\nchat_id = 1\ntoken = "{TOKEN}"\n', "the token comes from the environment"),
        ('[telegram]\nchat_id = 1\ntoken_env = "A B"\n', "token_env must be the name"),
        ("[telegram]\nchat_id = 1\nallowed_user_ids = [true]\n", "allowed_user_ids must be"),
        ('[telegram]\nchat_id = 1\napi = "ftp://x"\n', "api must be the http(s) URL"),
        ('telegram = "yes"\n', "must be a [telegram] table"),
    ],
)
def test_a_bad_telegram_table_is_one_line_naming_the_key(
    tmp_path: Path, body: str, said: str
) -> None:
    with pytest.raises(UsageError) as caught:
        _config(tmp_path, body)
    message = str(caught.value)
    assert said in message and "\n" not in message
    assert TOKEN not in message and "AAHsecret" not in message


def test_the_token_comes_from_the_environment_only_and_is_never_quoted() -> None:
    cfg = TelegramConfig(chat_id=1, token_env="MY_BOT")
    with pytest.raises(UsageError, match=r"\$MY_BOT \(\[telegram\] token_env\) is not set"):
        cfg.token({})
    with pytest.raises(UsageError) as caught:
        cfg.token({"MY_BOT": "AAHsecretSECRETsecret"})
    assert "AAHsecret" not in str(caught.value)
    assert cfg.token({"MY_BOT": f" {TOKEN}\n"}) == TOKEN
    assert "AAH" not in repr(cfg) and "AAH" not in repr(BotApi(cfg.api, TOKEN))


def test_an_error_echoing_the_token_is_scrubbed() -> None:
    api = BotApi("http://127.0.0.1:9", TOKEN)
    echoed = (
        b'{"ok": false, "error_code": 401, "description": "Unauthorized: /bot'
        + TOKEN.encode()
        + b"/getUpdates and "
        + TOKEN.split(":")[1].encode()
        + b' and bot987:otherSECRETtoken_x"}'
    )
    with pytest.raises(ApiError) as caught:
        api._result("getUpdates", 401, echoed)
    text = str(caught.value)
    assert "AAHsecret" not in text and "123456789" not in text and "otherSECRET" not in text
    assert text.startswith("getUpdates: error 401 Unauthorized")


def test_a_429_waits_as_told_but_never_past_the_bound() -> None:
    api = BotApi("http://127.0.0.1:9", TOKEN)
    for told, waited in ((3, 3.0), (86400, 60.0)):
        body = (
            b'{"ok":false,"error_code":429,"description":"Too Many Requests",'
            b'"parameters":{"retry_after":' + str(told).encode() + b"}}"
        )
        with pytest.raises(ApiError) as caught:
            api._result("sendMessage", 429, body)
        assert caught.value.retry_after == waited


# -- the buttons' tokens ----------------------------------------------------------------------


def test_callback_data_is_short_random_and_checked(tmp_path: Path) -> None:
    book = tgbook.TelegramBook(tmp_path / "telegram.json")
    rows = [{"k": "choice", "src": "loopkit", "path": "/x" * 400, "fp": "f" * 64, "c": "B"}]
    [data] = book.add_tokens(rows)
    assert len(data.encode()) <= 64 and data.startswith("h1:")
    assert book.token(data)["c"] == "B"
    again = tgbook.TelegramBook(tmp_path / "telegram.json")  # another process reads it
    assert again.token(data)["path"] == "/x" * 400
    for hostile in (None, 7, "", data + "x", "h1:../../etc/pa", "h1:" + "A" * 12, "x" * 5000):
        assert again.token(hostile) is None


# -- the poller claim -------------------------------------------------------------------------


def test_a_second_claim_on_the_token_says_who_holds_it(_isolated_state: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from hitl_tui.telegram.poller import PollerClaim;"
            f"c = PollerClaim({TOKEN!r}); print(c.acquire(), flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "True"
        mine = PollerClaim(TOKEN)
        assert not mine.acquire()
        assert mine.holder is not None and mine.holder.pid == holder.pid
        assert f"pid {holder.pid} on " in mine.holder.line() and " since " in mine.holder.line()
        assert PollerClaim("987:other-token-other-token-xx").acquire()  # another bot: free
    finally:
        holder.stdin.close()
        holder.wait(10)
    assert mine.acquire()  # the holder ended: the claim is free
    mine.release()
    lock = next(_isolated_state.glob("telegram-*.lock"))
    assert TOKEN not in lock.name and "AAH" not in lock.name


# -- the bot's logic --------------------------------------------------------------------------


class RecordingApi:
    """The Bot API methods the bot calls, recorded; message ids count up."""

    def __init__(self) -> None:
        self.sent: list[dict] = []
        self.edits: list[dict] = []
        self.said: list[tuple[str, str]] = []
        self.updates: list[list[dict]] = []
        self.next_id = 100

    def send_message(self, chat_id, text, buttons=None, reply_to=None) -> int:
        self.next_id += 1
        self.sent.append(
            {
                "id": self.next_id,
                "chat": chat_id,
                "text": text,
                "buttons": buttons or [],
                "reply_to": reply_to,
            }
        )
        return self.next_id

    def edit_message(self, chat_id, message_id, text, buttons=None) -> None:
        self.edits.append({"id": message_id, "text": text, "buttons": buttons or []})

    def answer_callback(self, callback_id, text) -> None:
        self.said.append((callback_id, text))

    def get_updates(self, offset, timeout):
        return self.updates.pop(0) if self.updates else []


def _repo(tmp_path: Path, name: str = "shop") -> Path:
    repo = tmp_path / "loops" / name
    shutil.copytree(SHOP, repo)
    (repo / ".git").mkdir()
    return repo


def _bot(tmp_path: Path, *repos: Path, loops: tuple[Loop, ...] = ()) -> tuple[Bot, RecordingApi]:
    inbox = Inbox.open(list(repos or [_repo(tmp_path)]))
    inbox.use_resumes(ResumeBook.for_state(), loops)
    api = RecordingApi()
    cfg = TelegramConfig(chat_id=CHAT, allowed_user_ids=frozenset({7}))
    logged: list[str] = []
    bot = Bot(cfg, api, inbox, loops, "Ada", tgbook.TelegramBook(None), log=logged.append)  # type: ignore[arg-type]
    bot.logged = logged  # type: ignore[attr-defined]
    return bot, api


def _tap(message: dict, button: int, chat: int = CHAT, user: int = 7) -> dict:
    return {
        "update_id": 1,
        "callback_query": {
            "id": f"cb{button}",
            "from": {"id": user},
            "message": {"message_id": message["id"], "chat": {"id": chat}},
            "data": message["buttons"][button][0]["callback_data"],
        },
    }


def _reply(message: dict, text: str, chat: int = CHAT, user: int = 7) -> dict:
    return {
        "update_id": 2,
        "message": {
            "message_id": 900,
            "from": {"id": user},
            "chat": {"id": chat},
            "text": text,
            "reply_to_message": {"message_id": message["id"]},
        },
    }


def test_a_block_is_one_plain_message_with_a_button_per_choice(tmp_path: Path) -> None:
    bot, api = _bot(tmp_path)
    bot.sync()
    [sent] = api.sent
    assert sent["chat"] == CHAT
    assert sent["text"].startswith("shop\n\nShould deleting a workspace also delete")
    assert "Reply to this message to answer in your own words." in sent["text"]
    labels = [row[0]["text"] for row in sent["buttons"]]
    assert labels == [
        "A) Cascade delete everything",
        "B) Keep invoices, detach them from the workspace",
        "C) Block deletion while invoices exist",
    ]
    bot.sync()
    assert len(api.sent) == 1  # sent once


def test_a_tap_writes_the_answer_journals_it_and_edits_the_message(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    bot, api = _bot(tmp_path, repo)
    bot.sync()
    [sent] = api.sent
    bot.handle(_tap(sent, 1))
    assert not (repo / "BLOCKED.md").exists()
    assert "Keep invoices" in (repo / "PROMPT.md").read_text()
    [entry] = journal.newest_first()
    assert entry.operator == "Ada"
    assert api.said == [("cb1", "✓ Written: B) Keep invoices, detach them from the workspace")]
    assert api.edits[-1]["id"] == sent["id"] and api.edits[-1]["buttons"] == []
    assert api.edits[-1]["text"].endswith(
        "✓ B) Keep invoices, detach them from the workspace, via Telegram"
    )


def test_a_stale_tap_is_refused_and_the_new_block_sent(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    bot, api = _bot(tmp_path, repo)
    bot.sync()
    [sent] = api.sent
    blocked = repo / "BLOCKED.md"
    blocked.write_text(blocked.read_text().replace("7 years", "10 years"))
    bot.inbox.handle([blocked])
    before = (repo / "PROMPT.md").read_bytes()
    bot.handle(_tap(sent, 0))
    assert (repo / "PROMPT.md").read_bytes() == before and blocked.exists()
    assert list(journal.newest_first()) == []
    assert "changed since this message: nothing written" in api.said[-1][1]
    assert "10 years" in api.sent[-1]["text"] and len(api.sent) == 2
    assert "changed since" in api.edits[-1]["text"] and api.edits[-1]["id"] == sent["id"]


def test_a_reply_is_own_words_and_a_placeholder_is_refused(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    bot, api = _bot(tmp_path, repo)
    bot.sync()
    [sent] = api.sent
    bot.handle(_reply(sent, "TBD"))
    assert (repo / "BLOCKED.md").exists()
    assert api.sent[-1]["text"].startswith("Not written: the answer contains the placeholder 'TBD'")
    assert api.sent[-1]["reply_to"] == 900
    bot.handle(_reply(sent, "Keep them 7 years, in cold storage"))
    assert not (repo / "BLOCKED.md").exists()
    assert "Keep them 7 years, in cold storage" in (repo / "PROMPT.md").read_text()
    assert api.edits[-1]["text"].endswith("✓ “Keep them 7 years, in cold storage”, via Telegram")


def test_a_foreign_chat_or_user_is_ignored_and_logged_once(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    bot, api = _bot(tmp_path, repo)
    bot.sync()
    [sent] = api.sent
    for _ in range(3):
        bot.handle(_tap(sent, 0, chat=666))
        bot.handle(_reply(sent, "do it", user=666))
    assert (repo / "BLOCKED.md").exists() and list(journal.newest_first()) == []
    assert api.said == [] and len(api.sent) == 1
    assert len(bot.logged) == 2  # type: ignore[attr-defined]
    assert "ignored updates from chat 666" in bot.logged[0]  # type: ignore[attr-defined]


def test_a_block_answered_elsewhere_has_its_message_edited(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    bot, api = _bot(tmp_path, repo)
    bot.sync()
    [sent] = api.sent
    (repo / "BLOCKED.md").unlink()
    bot.inbox.handle([repo / "BLOCKED.md"])
    bot.sync()
    [edit] = api.edits
    assert edit["id"] == sent["id"] and edit["buttons"] == []
    assert edit["text"].endswith("✓ Answered elsewhere (no longer open).")
    bot.handle(_tap(sent, 0))  # a tap on the old message
    assert api.said[-1][1] == "Already answered elsewhere: nothing written."
    assert list(journal.newest_first()) == []


def test_a_burst_is_bounded_by_one_summary(tmp_path: Path) -> None:
    repos = [_repo(tmp_path, f"r{i}") for i in range(BURST + 3)]
    bot, api = _bot(tmp_path, *repos)
    bot.sync()
    assert len(api.sent) == BURST
    summary = api.sent[-1]
    assert summary["text"].startswith(f"{4} new blocks (more than a few a minute)")
    assert len(summary["buttons"]) == 4
    bot.handle(_tap(summary, 0))
    assert len(api.sent) == BURST + 1 and "Should deleting" in api.sent[-1]["text"]
    bot.sync()  # the window is spent: nothing more is sent now
    assert len(api.sent) == BURST + 1


def test_who_may_answer() -> None:
    private = TelegramConfig(chat_id=42)
    assert private.allows(42, 42)
    assert not private.allows(42, 666)  # a stranger's tap on the operator's message
    assert not private.allows(666, 666) and not private.allows(True, 42)
    group = TelegramConfig(chat_id=-100)
    assert group.allows(-100, 5) and not group.allows(-101, 5)
    named = TelegramConfig(chat_id=-100, allowed_user_ids=frozenset({5}))
    assert named.allows(-100, 5) and not named.allows(-100, 6)


def test_an_answer_not_resumed_is_sent_with_restart_and_drop(tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    repo = _repo(tmp_path)
    marker = tmp_path / "restarted"
    code = f"open({str(marker)!r}, 'a').write('x')"
    loop = Loop(
        match=(str(repo),),
        restart=(sys.executable, "-c", code),
        resume_within=timedelta(seconds=1),
    )
    bot, api = _bot(tmp_path, repo, loops=(loop,))
    bot.sync()
    bot.handle(_tap(api.sent[0], 0))
    assert marker.read_text() == "x"  # the answer's own restart
    book = bot.inbox.resumes
    assert book is not None
    book.due(datetime.now(UTC) + timedelta(seconds=5))  # the loop showed no sign in time
    bot.sync()
    late = api.sent[-1]
    assert late["text"].startswith("shop: no sign of the loop since the answer")
    assert [row["text"] for row in late["buttons"][0]] == ["Restart", "Drop"]
    bot.sync()
    assert api.sent[-1] is late  # sent once
    restart = {"id": late["id"], "buttons": [[late["buttons"][0][0]]]}
    bot.handle(_tap(restart, 0))
    assert marker.read_text() == "xx"
    assert api.edits[-1]["text"].endswith("↻ Restarted, via Telegram")
    [record] = book.open()
    assert record.state == "waiting"  # waits anew, with a new deadline
    drop = {"id": late["id"], "buttons": [[late["buttons"][0][1]]]}
    bot.handle(_tap(drop, 0))
    assert book.open() == []
    assert api.edits[-1]["text"].endswith("✓ Dropped, via Telegram")


def test_a_hitl_on_fewer_repos_leaves_the_others_messages_alone(tmp_path: Path) -> None:
    shop, api_repo = _repo(tmp_path, "shop"), _repo(tmp_path, "api")
    book = tgbook.TelegramBook(tmp_path / "telegram.json")
    everything, api = _bot(tmp_path, shop, api_repo)
    everything.book = book
    everything.sync()
    assert len(api.sent) == 2
    # The app, opened on shop alone, polls next (the same chat, the same book).
    some, its_api = _bot(tmp_path, shop)
    some.book = book
    some.sync()
    assert its_api.edits == [] and its_api.sent == []
    other = next(m for m in api.sent if m["text"].startswith("api"))
    some.handle(_tap(other, 0))
    assert its_api.said[-1][1].startswith("The hitl polling now does not watch")
    assert (api_repo / "BLOCKED.md").exists() and its_api.edits == []


def test_hostile_updates_are_ignored_without_a_crash(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    bot, api = _bot(tmp_path, repo)
    bot.sync()
    [sent] = api.sent
    good = _tap(sent, 0)["callback_query"]
    api.updates = [
        [
            {"update_id": 10, "callback_query": {**good, "data": "h1:" + "A" * 12}},
            {"update_id": 11, "callback_query": {**good, "data": {"$": 1}}},
            {"update_id": 12, "callback_query": {**good, "message": "x", "id": None}},
            {"update_id": 13, "message": {"chat": {"id": CHAT}, "from": {"id": 7}, "text": None}},
            {"update_id": True, "message": []},
            {
                "update_id": 14,
                "message": {
                    "chat": {"id": CHAT},
                    "from": {"id": 7},
                    "text": "x" * 100_000,
                    "reply_to_message": {"message_id": "1e9"},
                },
            },
            {"update_id": 15, "callback_query": {**good, "data": "h1:" + "A" * 12 + "\x00"}},
        ]
    ]
    assert bot.poll_once(0) == 7
    assert bot.offset == 16
    assert (repo / "BLOCKED.md").exists() and list(journal.newest_first()) == []
    assert {text for _, text in api.said} == {
        "This button is not hitl's, or too old: nothing done."
    }


def test_a_long_open_block_is_claimed_once_not_on_every_change(
    tmp_path: Path, _isolated_state: Path
) -> None:
    bot, api = _bot(tmp_path, _repo(tmp_path))
    bot.sync()
    bot.handle(_tap(api.sent[0], 0))  # answered; its message no longer open
    claims = _isolated_state / "notified.json"
    before = os.stat(claims).st_ino
    for _ in range(3):
        bot.sync()  # the inbox changed (the watcher has not dropped the block yet)
    assert os.stat(claims).st_ino == before  # not rewritten
    assert len(api.sent) == 1


def test_choices_that_need_words_and_several_questions_get_no_buttons(tmp_path: Path) -> None:
    from tests.conftest import FIXTURES

    repo = tmp_path / "billing"
    shutil.copytree(FIXTURES / "agenticloop-billing", repo)
    (repo / ".git").mkdir()
    bot, api = _bot(tmp_path, repo)
    bot.sync()
    sent = {m["text"].split("\n")[0]: m for m in api.sent}
    several = sent["billing/T-012"]
    assert several["buttons"] == []
    assert several["text"].endswith("This block asks several questions: answer it in hitl.")
    bot.handle(_reply(several, "Use the EU region"))
    assert api.sent[-1]["text"] == "This block asks several questions: answer it in hitl."
    worded = sent["billing/T-009"]
    assert (
        worded["buttons"] == [] and "2 choices need your words: open it in hitl." in worded["text"]
    )
    mixed = sent["billing/T-007"]
    assert len(mixed["buttons"]) == 2 and "2 choices need your words" in mixed["text"]


def test_the_book_keeps_the_newest_messages_and_a_bounded_text_of_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At most MAX_MESSAGES messages, each text kept to TEXT_KEPT characters: the file stays
    a few MB at 1,000 messages (here 20, for speed), never past what it reads back."""
    row = tgbook.TEXT_KEPT * 4 + 300  # the most a message's row takes on disk
    assert tgbook.MAX_MESSAGES * row + tgbook.MAX_ROWS * 300 < tgbook.MAX_BYTES
    monkeypatch.setattr(tgbook, "MAX_MESSAGES", 20)
    path = tmp_path / "telegram.json"
    book = tgbook.TelegramBook(path)
    text = "😀" * (tgbook.TEXT_KEPT + 500)  # past the bound, 4 bytes a character on disk
    for message_id in range(1, 31):
        book.note_message(message_id, {"k": "block", "state": "open", "text": text})
    assert path.stat().st_size < 20 * row
    shown = tgbook.TelegramBook(path).messages()  # another process reads it whole
    assert sorted(shown) == list(range(11, 31))
    assert shown[30]["text"].startswith("😀" * 100) and shown[30]["text"].endswith("…")


def test_after_an_error_the_state_is_ok_again_as_soon_as_the_server_answers(
    tmp_path: Path,
) -> None:
    """A failed poll is followed by a short one: the header says the server is back at once,
    not when the next long poll ends (25 s later)."""
    import threading

    from hitl_tui.telegram.bot import Runner
    from tests.support import until_sync

    bot, api = _bot(tmp_path)
    held = threading.Event()
    calls: list[int] = []

    def get_updates(offset, timeout):
        calls.append(timeout)
        if len(calls) == 1:
            raise ApiError("getUpdates: could not connect (refused)")
        if timeout:
            held.wait(30)  # a long poll: nothing comes
        return []

    api.get_updates = get_updates  # type: ignore[method-assign]
    states: list[tuple[str, str]] = []
    runner = Runner(bot, PollerClaim(TOKEN, tmp_path / "poll.lock"), lambda *s: states.append(s))
    try:
        assert runner.start()
        until_sync(
            lambda: states[-1:] == [("ok", "polling")] and len(calls) >= 3,
            10,
            saw=lambda: (states, calls),
        )
        assert ("error", "getUpdates: could not connect (refused)") in states
        assert calls[:2] == [25, 0]
    finally:
        held.set()
        runner.stop()


def test_the_next_poller_does_not_send_a_block_again(tmp_path: Path) -> None:
    """One message per block across every hitl: the hitl that polls next (the app after
    `hitl listen`, a restart) finds the block claimed and its message in the book."""
    repo = _repo(tmp_path)
    book = tgbook.TelegramBook(tmp_path / "telegram.json")
    first, api = _bot(tmp_path, repo)
    first.book = book
    first.sync()
    assert len(api.sent) == 1
    second, its_api = _bot(tmp_path, repo)
    second.book = tgbook.TelegramBook(tmp_path / "telegram.json")
    second.sync()
    assert its_api.sent == [] and its_api.edits == []
    second.handle(_tap(api.sent[0], 1))  # the tap on the first one's message is answered
    assert not (repo / "BLOCKED.md").exists()
    assert its_api.said == [("cb1", "✓ Written: B) Keep invoices, detach them from the workspace")]


def test_past_eight_choices_a_last_button_says_to_open_hitl(tmp_path: Path) -> None:
    repo = tmp_path / "loops" / "wide"
    (repo / ".git").mkdir(parents=True)
    choices = "".join(f"- {chr(65 + i)}) option {i}\n" for i in range(11))
    (repo / "BLOCKED.md").write_text(f"## Question:\nWhich one?\n\n## Choices:\n{choices}")
    bot, api = _bot(tmp_path, repo)
    bot.sync()
    [sent] = api.sent
    labels = [row[0]["text"] for row in sent["buttons"]]
    assert labels == [f"{chr(65 + i)}) option {i}" for i in range(8)] + ["+3 more: open in hitl"]
    assert "3 more choices: open in hitl." in sent["text"]
    bot.handle(_tap(sent, 8))
    assert api.said == [("cb8", "Its other choices are in hitl: answer it there.")]
    assert (repo / "BLOCKED.md").exists()


def test_the_context_keeps_its_lines_on_the_phone(tmp_path: Path) -> None:
    """A task's context is several labelled lines (Task:, Category:, Checked:): on a phone they
    stay lines, each made plain; blank runs fold to one, the whole still cut to its limit."""
    from hitl_tui.telegram.text import CONTEXT_LIMIT

    repo = _repo(tmp_path)
    (repo / "BLOCKED.md").write_text(
        "## Question\nShip it?\n\n## Context\nTask: ship\n\n\n\nChecked:  the \x1b[31mdocs\n"
        "Who can unblock: the owner.\n" + "x" * 2000 + "\n\n## Choices\n- A) yes\n- B) no\n"
    )
    bot, api = _bot(tmp_path, repo)
    bot.sync()
    [sent] = api.sent
    assert "Task: ship\n\nChecked: the [31mdocs\nWho can unblock: the owner.\nxxx" in sent["text"]
    assert "\x1b" not in sent["text"]
    context = sent["text"].split("\n\n", 2)[2].split("\n\nReply to this message")[0]
    assert len(context) <= CONTEXT_LIMIT and context.endswith("…")
