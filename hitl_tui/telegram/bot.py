"""The bot: each new block sent with its choices as buttons; a tap or a reply answered through
the answer service (`answers.service`: the same plan, fingerprint check, journal, restart and
resume tracking as a key in the app); a message whose block was answered elsewhere edited to
say so. `Runner` runs it: one thread long-polls `getUpdates`, one sends what the inbox's
changes call for (`wake`), each with backoff on errors; the app and `hitl listen` start it.

Only the hitl holding the poller claim (`poller.PollerClaim`) sends: the taps come back to it,
and it answers from its own inbox. Each block's message is also claimed like every notice
channel's (`notices.claim`), so that no block is sent twice across the operator's hitl.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hitl_tui import journal
from hitl_tui.answers import service
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.loops import notices
from hitl_tui.loops.commands import Loop, loop_for
from hitl_tui.model import Answer, Block, HitlError, StaleError, UsageError
from hitl_tui.state import files as statefile
from hitl_tui.telegram import text as words
from hitl_tui.telegram.api import ApiError, BotApi
from hitl_tui.telegram.book import Row, TelegramBook
from hitl_tui.telegram.poller import PollerClaim
from hitl_tui.telegram.settings import TelegramConfig
from hitl_tui.textio import printable

#: Seconds getUpdates asks the server to hold a request open while nothing happens.
POLL_TIMEOUT = 25
#: At most BURST messages each WINDOW seconds; past that, one summary.
BURST = 5
WINDOW = 60.0
#: The longest reply taken as an answer (Telegram's own limit is 4096).
MAX_REPLY = 4096
#: The most (chat, user) pairs remembered as logged once.
MAX_IGNORED = 1000
#: What a tap or reply on a block this hitl does not watch is told.
NOT_WATCHED = "The hitl polling now does not watch this block's repository: nothing written."
#: How many of the newest journal entries are looked at for what answered a block elsewhere.
JOURNAL_LOOK = 50
#: The most claimed keys remembered in memory (then forgotten: the claim file still knows).
MAX_ASKED = 100_000
#: The longest wait between two errors (the backoff doubles up to it).
MAX_BACKOFF = 60.0


def stderr_log(line: str) -> None:
    print(f"hitl: telegram: {printable(line)}", file=sys.stderr, flush=True)


class Bot:
    """The bot of one `[telegram]` table, answering from `inbox`. Its methods are called from
    the Runner's threads, one at a time (`lock`)."""

    def __init__(
        self,
        cfg: TelegramConfig,
        api: BotApi,
        inbox: Inbox,
        loops: Sequence[Loop] = (),
        operator: str = "operator",
        book: TelegramBook | None = None,
        log: Callable[[str], None] = stderr_log,
    ) -> None:
        self.cfg = cfg
        self.api = api
        self.inbox = inbox
        self.loops = tuple(loops)
        self.operator = operator
        self.book = book if book is not None else TelegramBook.for_state()
        self.log = log
        self.lock = threading.RLock()
        self.offset: int | None = None
        self.channel = f"telegram:{cfg.chat_id}"
        self._sent: deque[float] = deque()
        self._ignored: set[tuple[object, object]] = set()
        #: New blocks claimed by this hitl whose message could not be sent yet.
        self._unsent: set[str] = set()
        #: The keys already claimed (by this hitl or, first, another): never claimed again.
        self._asked: set[str] = set()

    def __repr__(self) -> str:
        return f"Bot(chat_id={self.cfg.chat_id})"

    # -- what the inbox holds -------------------------------------------------------------------

    def _blocks(self) -> dict[tuple[str, str], Block]:
        with self.inbox.lock:
            blocks = list(self.inbox.blocks.values())
        return {statefile.block_key(b): b for b in blocks}

    def _current(self, row: Row) -> Block | None:
        key = (str(row.get("src", "")), str(row.get("path", "")))
        return self._blocks().get(key)

    def _watches(self, row: Row) -> bool:
        """Whether this hitl's inbox covers the block of `row` (an app opened on a few repos
        does not, nor `hitl listen` or a starting app a remote source's before it has been
        polled: a message of such a block is left as it is, never "answered")."""
        source = self.inbox.source_named(str(row.get("src", "")))
        if source is None:
            return False
        if source.remote:  # before its first poll has come back, its blocks are unknown
            return self.inbox.has_heard(source.name)
        repo = row.get("repo")
        return isinstance(repo, str) and Path(repo) in set(self.inbox.workspace.repos)

    # -- sending ----------------------------------------------------------------------------------

    def budget(self) -> int:
        now = time.monotonic()
        while self._sent and self._sent[0] <= now - WINDOW:
            self._sent.popleft()
        return BURST - len(self._sent)

    def _count(self) -> None:
        self._sent.append(time.monotonic())

    def sync(self) -> float | None:
        """Bring the chat up to date with the inbox: edit the messages of blocks answered or
        changed elsewhere, send the new blocks (BURST a WINDOW, then one summary) and the
        answers not resumed. Returns in how many seconds to look again (None: on a change)."""
        with self.lock:
            blocks = self._blocks()
            shown = self._settle(blocks)
            fresh = [b for key, b in blocks.items() if (key, b.fingerprint) not in shown]
            later = self._send_new(fresh)
            self._send_late()
            return later

    def _settle(self, blocks: dict[tuple[str, str], Block]) -> set[tuple[tuple[str, str], str]]:
        """Edit the open messages whose block is gone or changed; the (key, fingerprint) of the
        blocks still shown."""
        shown = set()
        for message_id, row in self.book.messages("open").items():
            if row.get("k") == "late":
                continue
            key = (str(row.get("src", "")), str(row.get("path", "")))
            block = blocks.get(key)
            if block is not None and block.fingerprint == row.get("fp"):
                shown.add((key, block.fingerprint))
                continue
            if block is None and not self._watches(row):
                continue
            if not self.book.set_state(message_id, "gone", when="open"):
                continue
            said = str(row.get("text", ""))
            if block is None:
                edited = words.answered_elsewhere(said, self._journaled(row))
            else:
                edited = words.changed(said)
            self._edit(message_id, edited)
        return shown

    def _journaled(self, row: Row) -> str | None:
        """What the journal says was answered to the block of `row` (its newest JOURNAL_LOOK
        answers looked at), and by whom; None when it is not there (the loop took the block
        away itself, or it was answered on another machine)."""
        try:
            for entry in journal.history(limit=JOURNAL_LOOK):
                if str(entry.block_path) == row.get("path") and (
                    entry.block_fingerprint == row.get("fp")
                ):
                    return f"{entry.answered} ({entry.operator})"
        except Exception:  # the chat's view only
            return None
        return None

    def _claimed(self, keys: list[str]) -> set[str]:
        """The notice claim, on this chat's channel (a key hushed for every channel, by an
        undo, is not sent either)."""
        asked = [key for key in keys if key not in self._asked]
        if not asked:  # each key is claimed once: a long-open block costs no write per change
            return set()
        if len(self._asked) > MAX_ASKED:
            self._asked.clear()
        self._asked.update(asked)
        mine = {f"{self.channel} {key}": key for key in asked}
        hushed = {full: f"{notices.ANY} {key}" for full, key in mine.items()}
        fresh = notices.claim(list(mine), hushed=hushed)
        return {mine[full] for full in fresh}

    def _send_new(self, blocks: list[Block]) -> float | None:
        if not blocks:
            return None
        left = self.budget()
        if left <= 0:  # the burst's bound: look again when the window has room
            return max(0.5, self._sent[0] + WINDOW - time.monotonic())
        keys = {notices.new_key(b.source, b.path, b.fingerprint, b.since): b for b in blocks}
        fresh = self._claimed([k for k in keys if k not in self._unsent]) | (
            self._unsent & set(keys)
        )
        self._unsent = set(fresh)  # claimed here: sent by this hitl, retried until they are
        chosen = sorted(fresh, key=lambda k: keys[k].since)
        alone = chosen if len(chosen) <= left else chosen[: left - 1]
        refused: ApiError | None = None
        for key in alone:
            try:
                self.send_block(keys[key])
            except ApiError as exc:
                if exc.code != 400:  # the server's trouble: the next pass retries them all
                    raise
                refused = refused or exc  # this message's: not a reason to hold the others
                continue
            self._unsent.discard(key)
        if refused is not None:
            raise refused
        rest = chosen[len(alone) :]
        if rest:
            self.send_summary([keys[k] for k in rest])
            self._unsent -= set(rest)
        return None

    def send_block(self, block: Block) -> int | None:
        """One block's message: its text, a button per choice, noted in the book."""
        key = statefile.block_key(block)
        what = {"src": key[0], "path": key[1], "fp": block.fingerprint, "repo": _repo(block)}
        choices = words.shown_choices(block)
        tokens = self.book.add_tokens([{**what, "k": "choice", "c": c.key} for c in choices])
        buttons = [
            [{"text": words.button(c), "callback_data": t}]
            for c, t in zip(choices, tokens, strict=True)
        ]
        hidden = words.hidden_choices(block)
        if hidden:  # the rest: a button that says where they are
            [more] = self.book.add_tokens([{**what, "k": "more", "n": hidden}])
            buttons.append([{"text": f"+{hidden} more: open in hitl", "callback_data": more}])
        said = words.block_message(block)
        message_id = self._send(said, buttons)
        if message_id is not None:
            self.book.note_message(
                message_id, {**what, "k": "block", "state": "open", "text": said}
            )
        return message_id

    def send_summary(self, blocks: Sequence[Block]) -> None:
        listed = blocks[: words.SUMMARY_MAX]
        rows = []
        for block in listed:
            key = statefile.block_key(block)
            rows.append(
                {"src": key[0], "path": key[1], "fp": block.fingerprint, "repo": _repo(block)}
                | {"k": "send"}
            )
        tokens = self.book.add_tokens(rows)
        buttons = [
            [{"text": words.plain(words.title(b), words.BUTTON_LIMIT), "callback_data": t}]
            for b, t in zip(listed, tokens, strict=True)
        ]
        self._send(words.summary_message(blocks), buttons)

    def _send_late(self) -> None:
        book = self.inbox.resumes
        if book is None:
            return
        try:
            late = [r for r in book.open() if r.state == "not-resumed"]
        except Exception:
            return
        if not late:
            return
        keys = {f"late {r.id} {r.deadline.isoformat()}": r for r in late}
        for key in sorted(self._claimed(list(keys))):
            record = keys[key]
            rows = [{"k": "restart", "r": record.id}, {"k": "drop", "r": record.id}]
            if loop_for(self.loops, record.as_block()) is None:
                rows = rows[1:]
            tokens = self.book.add_tokens(rows)
            buttons = [
                [
                    {"text": row["k"].title(), "callback_data": t}
                    for row, t in zip(rows, tokens, strict=True)
                ]
            ]
            said = words.late_message(record.block_id, record.answered)
            message_id = self._send(said, buttons)
            if message_id is not None:
                self.book.note_message(
                    message_id, {"k": "late", "r": record.id, "state": "open", "text": said}
                )

    def _send(
        self, said: str, buttons: list[list[dict[str, str]]], reply_to: int | None = None
    ) -> int | None:
        self._count()
        return self.api.send_message(self.cfg.chat_id, said, buttons, reply_to)

    def _edit(self, message_id: int, said: str) -> None:
        try:
            self.api.edit_message(self.cfg.chat_id, message_id, said)
        except ApiError as exc:
            self.log(f"could not edit message {message_id}: {exc}")

    def _say(self, callback_id: str, said: str) -> None:
        try:
            self.api.answer_callback(callback_id, said)
        except ApiError as exc:
            self.log(str(exc))

    # -- what comes back --------------------------------------------------------------------------

    def poll_once(self, timeout: int | None = None) -> int:
        """One long poll: the updates since the last, each handled; how many came."""
        wait = POLL_TIMEOUT if timeout is None else timeout
        updates = self.api.get_updates(self.offset, wait)
        for update in updates:
            uid = update.get("update_id")
            if isinstance(uid, int) and not isinstance(uid, bool):
                # Confirmed before it is handled: an update that fails is not retried forever.
                self.offset = max(self.offset or 0, uid + 1)
            try:
                self.handle(update)
            except ApiError as exc:
                self.log(str(exc))
            except Exception as exc:  # untrusted input never ends the bot
                self.log(f"an update could not be handled ({type(exc).__name__})")
        return len(updates)

    def handle(self, update: dict[str, Any]) -> None:
        with self.lock:
            if isinstance(update.get("callback_query"), dict):
                self._tap(update["callback_query"])
            elif isinstance(update.get("message"), dict):
                self._reply(update["message"])

    def _allowed(self, chat: object, user: object) -> bool:
        if self.cfg.allows(chat, user):
            return True
        pair = (chat if isinstance(chat, int) else None, user if isinstance(user, int) else None)
        if pair not in self._ignored and len(self._ignored) < MAX_IGNORED:
            self._ignored.add(pair)
            who = "allowed_user_ids" if self.cfg.allowed_user_ids else "its own user"
            self.log(
                f"ignored updates from chat {pair[0]}, user {pair[1]}: only [telegram] "
                f"chat_id, by {who}, may answer"
            )
        return False

    def _tap(self, query: dict[str, Any]) -> None:
        message = query.get("message")
        message = message if isinstance(message, dict) else {}
        chat = _get(message, "chat", "id")
        user = _get(query, "from", "id")
        callback_id = query.get("id")
        if not isinstance(callback_id, str) or not self._allowed(chat, user):
            return
        row = self.book.token(query.get("data"))
        message_id = message.get("message_id")
        if row is None:
            self._say(callback_id, "This button is not hitl's, or too old: nothing done.")
            return
        kind = row.get("k")
        if kind in ("choice", "restart", "drop"):
            # The token must be this message's own (a hostile client can send any data): a
            # token of another block's message neither answers it nor edits this one.
            shown = self.book.message(message_id)
            if shown is None or any(shown.get(f) != row.get(f) for f in _SAME[str(kind)]):
                self._say(callback_id, "This button is not this message's: nothing done.")
                return
            if (kind, shown.get("state")) in _DONE:  # a second tap: never twice
                self._say(callback_id, "Already done via Telegram: nothing more done.")
                return
        if kind == "choice" and isinstance(message_id, int):
            self._tap_choice(callback_id, message_id, row, message.get("text"))
        elif kind == "more":
            self._say(callback_id, "Its other choices are in hitl: answer it there.")
        elif kind == "send":
            block = self._current(row)
            if block is None:
                gone = "No longer open: answered elsewhere."
                self._say(callback_id, gone if self._watches(row) else NOT_WATCHED)
            else:
                self._say(callback_id, "Sent.")
                self.send_block(block)
        elif kind in ("restart", "drop") and isinstance(message_id, int):
            self._tap_late(callback_id, message_id, row, str(kind), message.get("text"))

    def _tap_choice(self, callback_id: str, message_id: int, row: Row, shown: object) -> None:
        said = self._message_text(message_id, shown)
        block = self._current(row)
        if block is None and not self._watches(row):
            self._say(callback_id, NOT_WATCHED)
            return
        if block is None:
            self._say(callback_id, "Already answered elsewhere: nothing written.")
            if self.book.set_state(message_id, "gone"):
                self._edit(message_id, words.answered_elsewhere(said))
            return
        if block.fingerprint != row.get("fp"):
            self._changed(callback_id, message_id, block, said)
            return
        choice = next((c for c in block.choices if c.key == row.get("c")), None)
        if choice is None or choice.needs_text:
            self._say(callback_id, "This choice needs your words: answer it in hitl.")
            return
        what = f"{choice.key}) {choice.option}"
        try:
            plan = service.plan_answer(
                self.inbox, block, Answer(choice=choice, operator=self.operator)
            )
            done = service.write_answer(self.inbox, plan, replan=True)
        except StaleError:
            # Changed on disk, not yet seen by the inbox: what it holds is the old version.
            # The message is left to `sync`, which edits it and sends the new version once the
            # inbox has it.
            self._say(callback_id, "The block changed since this message: nothing written.")
            return
        except HitlError as exc:
            self._say(callback_id, f"Not written: {printable(str(exc))}")
            return
        self._written(message_id, said, what, done, callback_id)

    def _written(
        self, message_id: int, said: str, what: str, done: service.Answered, callback_id: str | None
    ) -> None:
        self.book.set_state(message_id, "answered")
        if callback_id is not None:
            self._say(callback_id, f"✓ Written: {what}"[:200])
        edited = words.answered(said, what)
        self._edit(message_id, edited)
        block_id = words.plain(done.plan.block.id, 80)
        self.log(f"answered {block_id}: {words.plain(what, 200)}, via Telegram")
        done = service.restart_after(done, self.loops, self.inbox.resumes)
        if done.ran is not None:
            ran = done.ran
            line = "↻ Loop restarted." if ran.ok else f"Restart failed: {ran.problem}"
            self._edit(message_id, f"{edited}\n{printable(line)}")
            self.log(f"{block_id}: {line}")

    def _changed(self, callback_id: str, message_id: int, block: Block, said: str) -> None:
        self._say(
            callback_id,
            "The block changed since this message: nothing written. Its new version is sent.",
        )
        if self.book.set_state(message_id, "gone"):
            self._edit(message_id, words.changed(said))
        self._send_again(block)

    def _send_again(self, block: Block) -> None:
        """`block`'s message, unless one is open for it as it is now (sent already)."""
        key = statefile.block_key(block)
        for row in self.book.messages("open").values():
            if (row.get("src"), row.get("path"), row.get("fp")) == (*key, block.fingerprint):
                return
        self.send_block(block)

    def _message_text(self, message_id: int, shown: object = None) -> str:
        """The text the message was sent with (the book's), else as Telegram showed it with
        the tap (`shown`)."""
        row = self.book.message(message_id)
        if row and isinstance(row.get("text"), str):
            return str(row["text"])
        return shown if isinstance(shown, str) else ""

    def _reply(self, message: dict[str, Any]) -> None:
        chat = _get(message, "chat", "id")
        if not self._allowed(chat, _get(message, "from", "id")):
            return
        body = message.get("text")
        to = _get(message, "reply_to_message", "message_id")
        own_id = message.get("message_id")
        reply_to = own_id if isinstance(own_id, int) and not isinstance(own_id, bool) else None
        row = self.book.message(to)
        if not isinstance(body, str) or row is None or row.get("k") != "block":
            if row is None and self.cfg.chat_id < 0:
                return  # a group's talk, not a reply to hitl: not answered (each, otherwise)
            self._send("Reply to a block's message to answer it in your own words.", [], reply_to)
            return
        assert isinstance(to, int)
        if row.get("state") == "answered":  # its answer is written; the block may be asked anew
            self._send("Already answered via Telegram: nothing more written.", [], reply_to)
            return
        if len(body) > MAX_REPLY:  # never cut: an answer is written whole or not at all
            self._send(f"Not written: a reply is at most {MAX_REPLY} characters.", [], reply_to)
            return
        said = str(row.get("text", ""))
        block = self._current(row)
        if block is None and not self._watches(row):
            self._send(NOT_WATCHED, [], reply_to)
            return
        if block is None:
            self._send("Already answered elsewhere: nothing written.", [], reply_to)
            return
        if block.fingerprint != row.get("fp"):
            self._send(
                "The block changed since: nothing written. Its new version follows.", [], reply_to
            )
            if self.book.set_state(to, "gone"):
                self._edit(to, words.changed(said))
            self._send_again(block)
            return
        if len(block.questions) > 1:
            self._send(words.SEVERAL, [], reply_to)
            return
        typed = body
        try:
            answer = Answer(texts=(typed,), operator=self.operator)
            plan = service.plan_answer(self.inbox, block, answer)
            done = service.write_answer(self.inbox, plan, replan=True)
        except UsageError as exc:
            self._send(f"Not written: {printable(str(exc))}", [], reply_to)
            return
        except HitlError as exc:
            self._send(f"Not written: {printable(str(exc))}", [], reply_to)
            return
        self._written(to, said, f"“{typed}”", done, None)

    def _tap_late(
        self, callback_id: str, message_id: int, row: Row, kind: str, shown: object
    ) -> None:
        book = self.inbox.resumes
        record = book.get(str(row.get("r", ""))) if book is not None else None
        said = self._message_text(message_id, shown)
        if book is None or record is None or not record.is_open:
            self._say(callback_id, "No longer waiting for its loop: nothing done.")
            if self.book.set_state(message_id, "gone"):
                self._edit(message_id, f"{said}\n\n✓ No longer waiting.")
            return
        if kind == "drop":
            book.dismiss(record.id)
            self._say(callback_id, "Dropped.")
            self.book.set_state(message_id, "done")
            self._edit(message_id, f"{said}\n\n✓ Dropped, via Telegram")
            return
        block = record.as_block()
        loop = loop_for(self.loops, block)
        if loop is None or loop.restart is None:
            self._say(callback_id, "No [[loop]] restart covers it: nothing run.")
            return
        self._say(callback_id, "Restarting…")
        ran, _again = service.run_restart(block, loop, book, record.id, waits_again=True)
        self.book.set_state(message_id, "done")
        line = "↻ Restarted, via Telegram" if ran.ok else f"Restart failed: {ran.problem}"
        self._edit(message_id, f"{said}\n\n{printable(line)}")


#: What a message's row and a token of its buttons both name (`Bot._tap`).
_SAME = {"choice": ("src", "path", "fp"), "restart": ("r",), "drop": ("r",)}
#: A second tap refused: an answer written, a restart run, from this message already.
_DONE = {("choice", "answered"), ("restart", "done")}


def _repo(block: Block) -> str:
    return block.repo if isinstance(block.repo, str) else os.fsdecode(block.repo)


def _get(data: dict[str, Any], *path: str) -> object:
    value: object = data
    for name in path:
        if not isinstance(value, dict):
            return None
        value = value.get(name)
    return value


class Runner:
    """The bot's two threads: the poller (long polling, handling taps and replies) and the
    sender (on `wake`, or when the burst bound allows again). `state` says how it goes, for
    the app's header: ("ok", ...), ("warning", another hitl polls), ("error", why)."""

    def __init__(
        self,
        bot: Bot,
        claim: PollerClaim,
        on_state: Callable[[str, str], None] | None = None,
        poll_timeout: int | None = None,
    ) -> None:
        self.bot = bot
        self.claim = claim
        self.on_state = on_state
        self.poll_timeout = POLL_TIMEOUT if poll_timeout is None else poll_timeout
        self.state: tuple[str, str] = ("ok", "starting")
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []
        self._errors: dict[str, str] = {}

    def _set(self, state: str, message: str) -> None:
        if (state, message) != self.state:
            self.state = (state, message)
            if self.on_state is not None:
                self.on_state(state, message)

    def _trouble(self, part: str, why: str | None) -> None:
        if why is None:
            self._errors.pop(part, None)
        else:
            if self._errors.get(part) != why:
                self.bot.log(why)
            self._errors[part] = why
        if self._errors:
            self._set("error", "; ".join(self._errors.values()))
        else:
            self._set("ok", "polling")

    def start(self) -> bool:
        """Take the poller claim and start polling; False when another hitl holds it: the
        state says who, and this one takes over once that one lets it go."""
        if self.claim.acquire():
            self._run()
            return True
        holder = self.claim.holder.line() if self.claim.holder else "another process"
        self._set("warning", f"another hitl polls this bot ({holder}); this one does not")
        self.bot.log(f"another hitl polls this bot ({holder}); this one waits for its turn")
        thread = threading.Thread(target=self._wait_turn, name="hitl-telegram-claim", daemon=True)
        thread.start()
        return False

    def _wait_turn(self) -> None:
        if not self.claim.acquire(wait=True):
            return
        if self._stop.is_set():
            self.claim.release()
            return
        self.bot.log("this hitl polls the bot now")
        self._run()

    def _run(self) -> None:
        self._set("ok", "polling")
        for target, name in (
            (self._poll, "hitl-telegram-poll"),
            (self._sync, "hitl-telegram-send"),
        ):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def wake(self) -> None:
        """The inbox changed: the sender looks again."""
        self._wake.set()

    def stop(self, wait: float = 1.0) -> None:
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(wait)
        self.claim.release()

    @property
    def running(self) -> bool:
        return bool(self._threads) and not self._stop.is_set()

    def _poll(self) -> None:
        backoff = 1.0
        while not self._stop.is_set():
            # After an error, one short poll first: the header says the server is back at
            # once, not when the next long poll ends (up to POLL_TIMEOUT s later).
            wait = 0 if "poll" in self._errors else self.poll_timeout
            try:
                self.bot.poll_once(wait)
            except ApiError as exc:
                why = str(exc)
                if exc.code == 409:
                    why = "getUpdates: another program polls this bot (409 Conflict)"
                self._trouble("poll", why)
                self._stop.wait(exc.retry_after if exc.retry_after is not None else backoff)
                backoff = min(backoff * 2, MAX_BACKOFF)
                continue
            except Exception as exc:
                self._trouble("poll", f"getUpdates: {type(exc).__name__}")
                self._stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF)
                continue
            backoff = 1.0
            self._trouble("poll", None)

    def _sync(self) -> None:
        backoff = 1.0
        later: float | None = 0.0
        while not self._stop.is_set():
            if later is None or later > 0:
                self._wake.wait(later)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                later = self.bot.sync()
            except ApiError as exc:
                self._trouble("send", str(exc))
                later = exc.retry_after if exc.retry_after is not None else backoff
                backoff = min(backoff * 2, MAX_BACKOFF)
                continue
            except Exception as exc:
                self._trouble("send", f"sending: {type(exc).__name__}")
                later = backoff
                backoff = min(backoff * 2, MAX_BACKOFF)
                continue
            backoff = 1.0
            self._trouble("send", None)


def start_bot(
    cfg: TelegramConfig,
    inbox: Inbox,
    loops: Sequence[Loop],
    operator: str,
    env: Mapping[str, str],
    log: Callable[[str], None] = stderr_log,
    on_state: Callable[[str, str], None] | None = None,
) -> Runner:
    """The Runner of `[telegram]` for `inbox`, started (see `Runner.state` for whether it
    polls). Raises UsageError when the token is missing or malformed."""
    token = cfg.token(env)
    api = BotApi(cfg.api, token)
    bot = Bot(cfg, api, inbox, loops, operator, log=log)
    runner = Runner(bot, PollerClaim(token), on_state)
    runner.start()
    return runner
