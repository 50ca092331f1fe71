"""Taps a hostile client or a hasty thumb makes (issue 28's review): a button's token sent on
another block's message, the same button tapped twice before the inbox has seen the first
answer, Restart tapped twice. Over a real inbox, real files and a real journal, with the
recording stand-in for the Bot API of tests/test_telegram.py."""

from __future__ import annotations

import shutil
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hitl_tui import journal
from hitl_tui.loops.commands import Loop
from tests.hostile_cases import SHOP
from tests.test_telegram import _bot, _repo, _tap

KEEP = "B) Keep invoices, detach them from the workspace"


def test_a_token_of_another_blocks_message_answers_nothing(tmp_path: Path) -> None:
    # Telegram passes callback_data on as the client sent it: a bad client can send the token
    # of block a's button on block b's message.
    a, b = _repo(tmp_path, "a"), _repo(tmp_path, "b")
    bot, api = _bot(tmp_path, a, b)
    bot.sync()
    by_repo = {m["text"].split("\n")[0]: m for m in api.sent}
    forged = _tap(by_repo["b"], 1)
    forged["callback_query"]["data"] = by_repo["a"]["buttons"][1][0]["callback_data"]
    bot.handle(forged)
    assert (a / "BLOCKED.md").exists() and (b / "BLOCKED.md").exists()
    assert list(journal.newest_first()) == []
    assert api.edits == []  # b's message still shows b's buttons, and says nothing false
    assert api.said == [("cb1", "This button is not this message's: nothing done.")]
    bot.handle(_tap(by_repo["b"], 1))  # b's own button still answers b
    assert not (b / "BLOCKED.md").exists() and (a / "BLOCKED.md").exists()


def test_a_double_tap_writes_once_and_the_message_keeps_what_was_written(
    tmp_path: Path,
) -> None:
    # Both taps come in one getUpdates: the second is handled before the inbox has seen the
    # block file go.
    repo = _repo(tmp_path)
    bot, api = _bot(tmp_path, repo)
    bot.sync()
    [sent] = api.sent
    bot.handle(_tap(sent, 1))
    bot.handle(_tap(sent, 1))
    assert len(list(journal.newest_first())) == 1
    assert len(api.sent) == 1  # the answered block is not sent again as "its new version"
    assert api.edits[-1]["text"].endswith(f"✓ {KEEP}, via Telegram")
    assert api.said[-1] == ("cb1", "Already done via Telegram: nothing more done.")
    bot.inbox.handle([repo / "BLOCKED.md"])
    bot.sync()
    bot.handle(_tap(sent, 0))  # later, on the buttons the phone still showed
    assert api.edits[-1]["text"].endswith(f"✓ {KEEP}, via Telegram")
    assert "Cascade" not in (repo / "PROMPT.md").read_text()


def test_restart_tapped_twice_runs_the_restart_once(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    marker = tmp_path / "restarted"
    code = f"open({str(marker)!r}, 'a').write('x')"
    loop = Loop(
        match=(str(repo),), restart=(sys.executable, "-c", code), resume_within=timedelta(seconds=1)
    )
    bot, api = _bot(tmp_path, repo, loops=(loop,))
    bot.sync()
    bot.handle(_tap(api.sent[0], 0))
    assert bot.inbox.resumes is not None
    bot.inbox.resumes.due(datetime.now(UTC) + timedelta(seconds=5))
    bot.sync()
    late = api.sent[-1]
    restart = {"id": late["id"], "buttons": [[late["buttons"][0][0]]]}
    bot.handle(_tap(restart, 0))
    bot.handle(_tap(restart, 0))
    assert marker.read_text() == "xx"  # the answer's restart, then one from the tap
    assert api.said[-1] == ("cb0", "Already done via Telegram: nothing more done.")
    assert api.edits[-1]["text"].endswith("↻ Restarted, via Telegram")


def test_a_remote_blocks_message_is_left_open_until_its_source_has_answered(
    tmp_path: Path,
) -> None:
    # The app starts its bot before the first poll of a remote source (GitHub, a host over
    # ssh) has come back, and `hitl listen` polls none: their blocks are not known yet, not
    # answered. Their messages keep their buttons; once the source reports the block, it is
    # still the same open message (not sent again, not marked answered).

    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.loops.resume import ResumeBook
    from hitl_tui.sources.base import Source
    from hitl_tui.telegram.book import TelegramBook
    from hitl_tui.telegram.bot import Bot
    from hitl_tui.telegram.settings import TelegramConfig
    from tests.test_telegram import CHAT, RecordingApi

    class Tracker(Source):
        name = "tracker"
        remote = True

    repo = _repo(tmp_path)
    [local] = Inbox.open([repo]).blocks.values()
    issue = replace(local, source="tracker", repo="acme/shop", path="https://x/1", id="acme#1")

    def start() -> tuple[Bot, RecordingApi]:  # one hitl process: its own inbox, the same files
        inbox = Inbox.open([repo])
        inbox.use_remotes([Tracker()])
        inbox.use_resumes(ResumeBook.for_state())
        api = RecordingApi()
        book = TelegramBook(tmp_path / "telegram.json")
        return Bot(TelegramConfig(chat_id=CHAT), api, inbox, (), "Ada", book, lambda _: None), api  # type: ignore[arg-type]

    first, sent = start()
    first.inbox.replace_remote("tracker", "acme", [issue])
    first.sync()
    assert sorted(m["text"].split("\n")[0] for m in sent.sent) == ["acme/shop · acme#1", "shop"]
    second, api = start()  # the next hitl: its remote source not polled yet
    second.sync()
    assert api.edits == [] and api.sent == []
    second.inbox.replace_remote("tracker", "acme", [issue])
    second.sync()
    assert api.edits == [] and api.sent == []
    second.inbox.replace_remote("tracker", "acme", [])  # now answered elsewhere: said so
    second.sync()
    [edit] = api.edits
    assert edit["text"].endswith("✓ Answered elsewhere (no longer open).")


def test_a_tap_on_a_block_changed_on_disk_before_the_inbox_saw_it_sends_no_old_version(
    tmp_path: Path,
) -> None:
    # The loop rewrote BLOCKED.md a moment before the tap; the watcher has not told the inbox.
    repo = _repo(tmp_path)
    bot, api = _bot(tmp_path, repo)
    bot.sync()
    [sent] = api.sent
    blocked = repo / "BLOCKED.md"
    blocked.write_text(blocked.read_text().replace("7 years", "10 years"))
    bot.handle(_tap(sent, 1))
    assert list(journal.newest_first()) == [] and "10 years" in blocked.read_text()
    assert api.said == [("cb1", "The block changed since this message: nothing written.")]
    assert len(api.sent) == 1  # not the old version again, as if it were the new one
    bot.inbox.handle([blocked])  # the watcher catches up
    bot.sync()
    assert [("10 years" in m["text"]) for m in api.sent] == [False, True]
    [edit] = api.edits
    assert edit["id"] == sent["id"] and "changed since" in edit["text"]


def test_in_a_group_only_replies_to_hitls_messages_get_an_answer(tmp_path: Path) -> None:
    # A bot that is a group's admin (or has privacy mode off) receives every message there.
    from tests.test_telegram import _reply

    repo = _repo(tmp_path)
    bot, api = _bot(tmp_path, repo)
    bot.cfg = replace(bot.cfg, chat_id=-100123)
    bot.sync()
    [sent] = api.sent
    talk = _reply(sent, "lunch at noon?", chat=-100123)
    del talk["message"]["reply_to_message"]
    for _ in range(3):
        bot.handle(talk)
    assert len(api.sent) == 1  # the group's talk is not answered with a hint, each time
    bot.handle(_reply(sent, "Keep them 7 years, in cold storage", chat=-100123))
    assert "cold storage" in (repo / "PROMPT.md").read_text()


def test_a_reply_to_an_answered_message_writes_nothing_and_keeps_what_it_says(
    tmp_path: Path,
) -> None:
    from tests.test_telegram import _reply

    repo = _repo(tmp_path)
    bot, api = _bot(tmp_path, repo)
    bot.sync()
    [sent] = api.sent
    bot.handle(_reply(sent, "Keep them 7 years, in cold storage"))
    blocked = repo / "BLOCKED.md"
    shutil.copy(SHOP / "BLOCKED.md", blocked)  # the loop asks again, a new version
    blocked.write_text(blocked.read_text().replace("7 years", "10 years"))
    bot.inbox.handle([blocked])
    bot.sync()
    assert "10 years" in api.sent[-1]["text"]
    sends, edits = len(api.sent), len(api.edits)
    bot.handle(_reply(sent, "Keep them 8 years"))  # to the first, answered, message
    assert api.sent[-1]["text"] == "Already answered via Telegram: nothing more written."
    assert len(api.sent) == sends + 1 and len(api.edits) == edits  # its ✓ stays
    assert api.edits[-1]["text"].endswith("✓ “Keep them 7 years, in cold storage”, via Telegram")
    assert "8 years" not in (repo / "PROMPT.md").read_text()


def test_a_reply_longer_than_taken_is_refused_not_cut(tmp_path: Path) -> None:
    from hitl_tui.telegram.bot import MAX_REPLY
    from tests.test_telegram import _reply

    repo = _repo(tmp_path)
    bot, api = _bot(tmp_path, repo)
    bot.sync()
    [sent] = api.sent
    bot.handle(_reply(sent, "keep " * 1000 + "but only the paid ones"))  # a hostile server's
    assert (repo / "BLOCKED.md").exists() and list(journal.newest_first()) == []
    assert api.sent[-1]["text"] == f"Not written: a reply is at most {MAX_REPLY} characters."


def test_a_message_the_server_refuses_does_not_hold_the_next_blocks(tmp_path: Path) -> None:
    import os
    import time

    import pytest

    from hitl_tui.telegram.api import ApiError
    from tests.test_telegram import RecordingApi

    class Refusing(RecordingApi):
        def send_message(self, chat_id, text, buttons=None, reply_to=None) -> int:
            if text.startswith("old"):
                raise ApiError("sendMessage: error 400 Bad Request: something in it", None, 400)
            return super().send_message(chat_id, text, buttons, reply_to)

    old, new = _repo(tmp_path, "old"), _repo(tmp_path, "new")
    hour_ago = time.time() - 3600
    os.utime(old / "BLOCKED.md", (hour_ago, hour_ago))  # the first in line
    bot, _ = _bot(tmp_path, old, new)
    api = Refusing()
    bot.api = api  # type: ignore[assignment]
    for _ in range(3):  # the sender's passes, each after its backoff
        with pytest.raises(ApiError):
            bot.sync()  # the error still reaches the header
    assert [m["text"].split("\n")[0] for m in api.sent] == ["new"]


def test_a_long_blocks_message_is_whole_still_once_answered(tmp_path: Path) -> None:
    from hitl_tui.telegram import book, text

    assert book.TEXT_KEPT >= text.MESSAGE_LIMIT
    repo = _repo(tmp_path)
    question = " ".join(f"q{i:03d}" for i in range(200))  # 1,000 characters
    context = " ".join(f"c{i:03d}" for i in range(100))  # cut to 500
    (repo / "BLOCKED.md").write_text(
        f"## Question:\n{question}\n\n## Context:\n{context}\n\n## Choices:\n- A) go\n- B) stop\n"
    )
    bot, api = _bot(tmp_path, repo)
    bot.sync()
    [sent] = api.sent
    assert "q199" in sent["text"] and len(sent["text"]) > 1500
    bot.handle(_tap(sent, 0))
    assert api.edits[-1]["text"] == f"{sent['text']}\n\n✓ A) go, via Telegram"
