"""A local Telegram Bot API server for the tests, on 127.0.0.1 (threads, a free port).

Built from Telegram's published Bot API reference (core.telegram.org/bots/api: Making requests,
getUpdates, Update, Message, CallbackQuery, InlineKeyboardMarkup, sendMessage, editMessageText,
answerCallbackQuery, ResponseParameters), with the exact error descriptions and the long-poll
and conflict rules taken from Telegram's own server (github.com/tdlib/telegram-bot-api,
telegram-bot-api/Client.cpp), so a bot that would be refused by the real service is refused
here, in the same words.

    with TelegramAPI() as tg:                 # tg.api: the `[telegram] api` URL; tg.token
        ...run the bot against tg.api with tg.token...
        message = until_sync(lambda: tg.sent_messages())[0]
        tg.tap(message, text="B) Keep invoices")     # the operator taps a button
        tg.reply(message, "use the staging DB")      # ...or replies in own words
        tg.message(message["message_id"])["text"]    # the message as it reads now (edits)

**Requests.** `/bot<TOKEN>/<method>`, GET (query string) or POST (JSON, or a url-encoded form);
every argument is read as Telegram reads it: a string, objects and lists as JSON text (so
`reply_markup` may come as an object in a JSON body or as JSON text in a form). Methods are
case-insensitive. A malformed token is 401 "Unauthorized: invalid token specified", a
well-formed wrong one 401 "Unauthorized", an unknown method 404 "Not Found: method not found".
Every answer is Telegram's envelope: {"ok": true, "result": ...} or {"ok": false, "error_code":
N, "description": "...", ["parameters": {"retry_after": N}]}.

**Methods.** getMe, getUpdates, sendMessage, editMessageText, answerCallbackQuery,
deleteMessage, deleteWebhook, getWebhookInfo.

- getUpdates: `offset` confirms (drops) every update below it, a negative one keeps only the
  last -offset; `limit` 1..100 (clamped); `timeout` 0..50 s (clamped), real long polling: the
  request is held until an update arrives or the timeout passes. `allowed_updates` (a JSON
  list; empty = the default, every type but chat_member, message_reaction and
  message_reaction_count) is remembered, and an update of a type not allowed when it arrives
  is never queued (as Telegram does). A getUpdates that would wait while another is waiting
  ends the older one with 409 "Conflict: terminated by other getUpdates request; make sure
  that only one bot instance is running" (at most one such answer at once every 3 s, the
  others 3 s late, as Telegram's server does). `conflicts` counts them; `max_pollers` is the
  most getUpdates ever in flight at once.
- sendMessage / editMessageText: `text` is checked as Telegram does: empty is "message text is
  empty", only spaces "message must be non-empty", over 4096 characters (UTF-16 units, after
  parse_mode's entities are parsed) "message is too long", over 32 KiB "text is too long", a
  lone surrogate "strings must be encoded in UTF-8". `parse_mode` HTML is parsed (the tags
  Telegram knows; others are "can't parse entities: Unsupported start tag ..."); Markdown and
  MarkdownV2 are taken as they are (not validated). `reply_markup` must be an object; its
  `inline_keyboard` an Array of Arrays of buttons, each with a `text` and an action
  (callback_data 1-64 bytes, else BUTTON_DATA_INVALID; no action is "Text buttons are
  unallowed in the inline keyboard"); more than 100 buttons is "reply markup is too long".
  An empty keyboard is no keyboard. `reply_parameters` (or the older reply_to_message_id)
  must name a message of the chat unless allow_sending_without_reply. A chat the operator
  never opened is "chat not found". Editing a message to the same text and buttons is
  "message is not modified: ...", someone else's message "message can't be edited".
- answerCallbackQuery: a query unknown, answered already, or older than `callback_window`
  seconds (15 by default) is "query is too old and response timeout expired or query ID is
  invalid"; a text over 200 characters is MESSAGE_TOO_LONG.

**What a test does.** Inject: `tap` (a callback_query on a sent message's button), `send_text`
and `reply` (a message from a user in a chat, optionally replying to a message), `inject`
(any update). Read: `sent_messages()` (the bot's messages as they read now: text and
reply_markup after every edit), `message(id)`, `buttons(message)`, `edits`,
`callback_answers`, `counts` (requests per method), `requests`, `conflicts`, `max_pollers`,
`pending_updates()`.

**Hostile modes**, switchable at run time, for every method or some (`methods=`), for ever or
`times=` requests: `slow(seconds)` (delay, then answer), `hang()` (never answer, until
`clear_faults()` or `stop()`, which drop the connection), `fail(status)` (a 500 by default),
`flood(retry_after)` (429 with parameters.retry_after and Retry-After), `invalid_json()`,
`huge_body(size)` (a complete body of `size` bytes), `endless_body()` (a body that never ends,
until the client hangs up), `trickle(interval)` (a byte of the body now and then, never
done). `clear_faults()` ends them all. Optional `chat_rate=(n, seconds)`: past n messages in a
chat within the window, sendMessage is 429 (Telegram publishes no exact figure; off by
default).

Nothing here talks to any address but 127.0.0.1, and every wait is bounded (`max_hang`).
"""

from __future__ import annotations

import collections
import copy
import html
import itertools
import json
import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

#: A bot token of the right shape (<bot id>:<35 characters>); it is a test value, not a secret.
TOKEN = "7000000001:AAHs9fAkEt0kEnF0rTesTsOnLy_x1y2z3w4"
#: The operator: one user, whose private chat with the bot has the same id.
OPERATOR = {
    "id": 123456789,
    "is_bot": False,
    "first_name": "Ada",
    "username": "ada_operator",
    "language_code": "en",
}
#: Someone else, for "updates from any other chat or user are ignored".
STRANGER = {"id": 987654321, "is_bot": False, "first_name": "Mallory", "username": "mallory"}

MAX_TEXT = 4096  # characters (UTF-16 code units), after entities are parsed
MAX_TEXT_BYTES = 1 << 15
MAX_CALLBACK_DATA = 64  # bytes
MAX_BUTTONS = 100
MAX_CALLBACK_ANSWER = 200
LONG_POLL_MAX_TIMEOUT = 50
MAX_REQUEST_BODY = 1 << 20
CONFLICT = (
    "Conflict: terminated by other getUpdates request; make sure that only one bot instance is "
    "running"
)
NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup are "
    "exactly the same as a current content and reply markup of the message"
)
QUERY_TOO_OLD = "Bad Request: query is too old and response timeout expired or query ID is invalid"
#: The update types Telegram delivers when allowed_updates is empty or never given.
DEFAULT_ALLOWED = frozenset(
    {
        "message",
        "edited_message",
        "channel_post",
        "edited_channel_post",
        "business_connection",
        "business_message",
        "edited_business_message",
        "deleted_business_messages",
        "inline_query",
        "chosen_inline_result",
        "callback_query",
        "shipping_query",
        "pre_checkout_query",
        "purchased_paid_media",
        "poll",
        "poll_answer",
        "my_chat_member",
        "chat_join_request",
        "chat_boost",
        "removed_chat_boost",
    }
)
ALL_TYPES = DEFAULT_ALLOWED | {"chat_member", "message_reaction", "message_reaction_count"}
#: The HTML tags Telegram's parse_mode HTML knows.
HTML_TAGS = frozenset(
    {
        "b",
        "strong",
        "i",
        "em",
        "u",
        "ins",
        "s",
        "strike",
        "del",
        "span",
        "tg-spoiler",
        "a",
        "code",
        "pre",
        "blockquote",
        "tg-emoji",
    }
)
#: The methods served, by their lower-case name (Telegram's methods are case-insensitive).
_CANONICAL = {
    name.lower(): name
    for name in (
        "getMe",
        "getUpdates",
        "sendMessage",
        "editMessageText",
        "answerCallbackQuery",
        "deleteMessage",
        "deleteWebhook",
        "getWebhookInfo",
    )
}
_TOKEN_SHAPE = re.compile(r"[1-9][0-9]{0,15}:[A-Za-z0-9_-]{30,45}")


class ApiError(Exception):
    """Answer the request with Telegram's error envelope."""

    def __init__(self, code: int, description: str, retry_after: int | None = None) -> None:
        super().__init__(description)
        self.code = code
        self.description = description
        self.retry_after = retry_after


def bad(description: str) -> ApiError:
    return ApiError(400, f"Bad Request: {description}")


@dataclass
class Request:
    """One request as the server saw it."""

    method: str  # as sent (case kept), "" when the path named none
    http_method: str
    args: dict[str, str]
    at: float
    token_ok: bool
    status: int = 0
    fault: str = ""


@dataclass
class Fault:
    kind: str  # slow hang status invalid_json huge endless trickle
    methods: frozenset[str] | None
    times: int | None
    seconds: float = 0.0
    status: int = 500
    description: str = ""
    retry_after: int | None = None
    body: bytes | None = None
    size: int = 0
    declare: bool = True

    def matches(self, method: str) -> bool:
        return self.methods is None or method.lower() in self.methods


@dataclass
class _Poller:
    aborted: bool = False


@dataclass
class _CallbackQuery:
    query: dict[str, Any]
    created: float
    answered: bool = False


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that hangs up half-way is what the hostile tests do


class TelegramAPI:
    def __init__(
        self,
        token: str = TOKEN,
        *,
        operator: dict[str, Any] | None = None,
        bot_username: str = "hitl_test_bot",
        first_update_id: int = 734_000_001,
        callback_window: float = 15.0,
        chat_rate: tuple[int, float] | None = None,
        max_hang: float = 120.0,
        port: int = 0,
    ) -> None:
        self.token = token
        self.operator = dict(operator or OPERATOR)
        self.bot = {
            "id": int(token.split(":", 1)[0]) if token.split(":", 1)[0].isdigit() else 1,
            "is_bot": True,
            "first_name": "hitl",
            "username": bot_username,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }
        self.callback_window = callback_window
        self.chat_rate = chat_rate
        self.max_hang = max_hang
        self.port = port

        self.requests: list[Request] = []
        self.counts: collections.Counter[str] = collections.Counter()
        self.edits: list[dict[str, Any]] = []
        self.callback_answers: list[dict[str, str]] = []
        self.dropped_updates: list[dict[str, Any]] = []
        self.conflicts = 0
        self.max_pollers = 0

        self._cond = threading.Condition()
        self._stopping = threading.Event()
        self._release = threading.Event()  # set to drop every hung request
        self._updates: list[dict[str, Any]] = []
        self._next_update_id = first_update_id
        self._allowed = DEFAULT_ALLOWED
        self._chats: dict[int, dict[str, Any]] = {}
        self._messages: dict[tuple[int, int], dict[str, Any]] = {}
        self._sent: list[tuple[int, int]] = []
        self._next_message_id: dict[int, int] = {}
        self._queries: dict[str, _CallbackQuery] = {}
        self._query_ids = itertools.count(4_382_190_001_000_000_001)
        self._faults: list[Fault] = []
        self._waiting: _Poller | None = None
        self._in_flight = 0
        self._next_conflict = 0.0
        self._chat_sends: dict[int, collections.deque[float]] = {}
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.add_chat(self.operator)

    # -- life ---------------------------------------------------------------------------------
    def __enter__(self) -> TelegramAPI:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> TelegramAPI:
        stub = self

        class Handler(_Handler):
            api = stub

        self._stopping.clear()
        self._server = _Server(("127.0.0.1", self.port), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: long polls end, hung and endless answers are dropped."""
        self._stopping.set()
        self._release.set()
        with self._cond:
            self._cond.notify_all()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def api(self) -> str:
        """The server's base URL: what `[telegram] api` names."""
        return f"http://127.0.0.1:{self.port}"

    def url(self, method: str, token: str | None = None) -> str:
        return f"{self.api}/bot{self.token if token is None else token}/{method}"

    # -- chats and users ---------------------------------------------------------------------
    def add_chat(
        self, user: dict[str, Any] | None = None, *, chat_id: int | None = None, title: str = ""
    ) -> dict[str, Any]:
        """A chat the bot may write to: a user's private chat (the user opened the bot), or a
        group (`chat_id` negative, with a `title`)."""
        if chat_id is None or chat_id > 0:
            assert user is not None, "a private chat needs its user"
            chat = {"id": user["id"], "first_name": user["first_name"], "type": "private"}
            if user.get("username"):
                chat["username"] = user["username"]
        else:
            chat = {"id": chat_id, "title": title or "a group", "type": "supergroup"}
        with self._cond:
            self._chats[chat["id"]] = chat
        return dict(chat)

    # -- injecting what the operator does ----------------------------------------------------
    def send_text(
        self,
        text: str,
        *,
        user: dict[str, Any] | None = None,
        chat_id: int | None = None,
        reply_to: dict[str, Any] | int | None = None,
    ) -> dict[str, Any]:
        """A user writes `text` in a chat (their private chat by default), as a reply to
        `reply_to` (a message or its id) when given; the Message, queued as an update."""
        user = dict(user or self.operator)
        with self._cond:
            chat = self._chats.get(chat_id if chat_id is not None else user["id"])
            if chat is None:
                chat = self.add_chat(user) if chat_id is None else self.add_chat(chat_id=chat_id)
            message = {
                "message_id": self._new_message_id(chat["id"]),
                "from": user,
                "chat": dict(chat),
                "date": int(time.time()),
                "text": text,
            }
            if reply_to is not None:
                message["reply_to_message"] = self._replied(chat["id"], reply_to)
            self._messages[(chat["id"], message["message_id"])] = message
            self._queue("message", copy.deepcopy(message))
        return copy.deepcopy(message)

    def reply(
        self,
        message: dict[str, Any] | int,
        text: str,
        *,
        user: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A user replies to `message` (one the bot sent) with `text`, in that message's chat."""
        target = self._find(message)
        return self.send_text(text, user=user, chat_id=target["chat"]["id"], reply_to=target)

    def tap(
        self,
        message: dict[str, Any] | int,
        data: str | None = None,
        *,
        text: str | None = None,
        user: dict[str, Any] | None = None,
        forge: bool = False,
    ) -> str:
        """A user taps a button of `message` (chosen by its callback `data` or its `text`, or
        the only one); queues the callback_query and returns its id. Only a button the message
        shows now can be tapped, unless `forge` (a hostile client's made-up data)."""
        with self._cond:
            current = self._find(message)
            buttons = self.buttons(current)
            if not forge:
                chosen = [
                    b
                    for b in buttons
                    if (data is None or b[1] == data) and (text is None or b[0] == text)
                ]
                if len(chosen) != 1:
                    raise AssertionError(
                        f"no single button data={data!r} text={text!r} on message "
                        f"{current['message_id']}; it shows {buttons!r}"
                    )
                data = chosen[0][1]
            query_id = str(next(self._query_ids))
            query = {
                "id": query_id,
                "from": dict(user or self.operator),
                "message": copy.deepcopy(current),
                "chat_instance": str(-(8_000_000_000_000_000_000 + current["chat"]["id"])),
                "data": data if data is not None else "",
            }
            self._queries[query_id] = _CallbackQuery(query, time.monotonic())
            self._queue("callback_query", copy.deepcopy(query))
        return query_id

    def inject(self, kind: str, payload: dict[str, Any]) -> int | None:
        """Queue any update (`kind` is its field name, e.g. "my_chat_member"); its update_id,
        or None when allowed_updates dropped it."""
        with self._cond:
            return self._queue(kind, copy.deepcopy(payload))

    # -- reading what the bot did ------------------------------------------------------------
    def sent_messages(self, chat_id: int | None = None) -> list[dict[str, Any]]:
        """The bot's messages in the order sent, each as it reads now (after edits; a deleted
        one is gone)."""
        with self._cond:
            return [
                copy.deepcopy(self._messages[key])
                for key in self._sent
                if key in self._messages and (chat_id is None or key[0] == chat_id)
            ]

    def message(self, message_id: int, chat_id: int | None = None) -> dict[str, Any]:
        with self._cond:
            return copy.deepcopy(
                self._find(message_id if chat_id is None else (chat_id, message_id))
            )

    @staticmethod
    def buttons(message: dict[str, Any]) -> list[tuple[str, str]]:
        """A message's inline buttons, row by row: (text, callback_data or url)."""
        rows = (message.get("reply_markup") or {}).get("inline_keyboard") or []
        return [
            (b.get("text", ""), b.get("callback_data") or b.get("url") or "")
            for row in rows
            for b in row
        ]

    def pending_updates(self) -> list[dict[str, Any]]:
        """The updates queued and not yet confirmed by an offset."""
        with self._cond:
            return copy.deepcopy(self._updates)

    @property
    def polling(self) -> bool:
        """A getUpdates is being held (long polling) now."""
        with self._cond:
            return self._waiting is not None

    def calls(self, method: str) -> list[Request]:
        """The requests to `method` (case-insensitive), in order."""
        return [r for r in list(self.requests) if r.method.lower() == method.lower()]

    def summary(self) -> list[str]:
        """One line per request, for failure messages."""
        return [
            f"{r.http_method} {r.method} -> {r.status}{' (' + r.fault + ')' if r.fault else ''}"
            for r in list(self.requests)
        ]

    # -- hostile modes -----------------------------------------------------------------------
    def slow(self, seconds: float, *, methods: Any = None, times: int | None = None) -> None:
        """Delay each answer by `seconds`, then answer normally."""
        self._add(Fault("slow", _methods(methods), times, seconds=seconds))

    def hang(self, *, methods: Any = None, times: int | None = None) -> None:
        """Never answer: the request is held until clear_faults() or stop() (then the
        connection is closed with no answer), or `max_hang` seconds."""
        self._release.clear()
        self._add(Fault("hang", _methods(methods), times))

    def fail(
        self,
        status: int = 500,
        *,
        description: str = "",
        body: bytes | None = None,
        methods: Any = None,
        times: int | None = None,
    ) -> None:
        """Answer with `status`: Telegram's envelope (or the raw `body`, e.g. a proxy's HTML)."""
        self._add(
            Fault(
                "status",
                _methods(methods),
                times,
                status=status,
                description=description,
                body=body,
            )
        )

    def flood(self, retry_after: int = 5, *, methods: Any = None, times: int | None = None) -> None:
        """429 "Too Many Requests: retry after N", parameters.retry_after and Retry-After."""
        self._add(Fault("status", _methods(methods), times, status=429, retry_after=retry_after))

    def invalid_json(
        self, *, body: bytes | None = None, methods: Any = None, times: int | None = None
    ) -> None:
        """A 200 whose body is not JSON (by default, an answer cut off half-way)."""
        self._add(Fault("invalid_json", _methods(methods), times, body=body))

    def huge_body(
        self,
        size: int = 64 << 20,
        *,
        declare: bool = True,
        methods: Any = None,
        times: int | None = None,
    ) -> None:
        """A complete, valid answer of `size` bytes (with its Content-Length, or `declare=False`
        without one), streamed until done or until the client hangs up."""
        self._add(Fault("huge", _methods(methods), times, size=size, declare=declare))

    def endless_body(self, *, methods: Any = None, times: int | None = None) -> None:
        """A 200 whose JSON body never ends (no Content-Length), until the client hangs up."""
        self._add(Fault("endless", _methods(methods), times))

    def trickle(
        self, interval: float = 0.5, *, methods: Any = None, times: int | None = None
    ) -> None:
        """Headers at once, then the body one byte every `interval` seconds, never complete
        (a per-read timeout never fires: only a bound on the whole exchange ends it)."""
        self._release.clear()
        self._add(Fault("trickle", _methods(methods), times, seconds=interval))

    def clear_faults(self) -> None:
        """Back to normal; hung requests are dropped."""
        with self._cond:
            self._faults.clear()
        self._release.set()

    def _add(self, fault: Fault) -> None:
        with self._cond:
            self._faults.append(fault)

    def _take_faults(self, method: str) -> tuple[float, Fault | None]:
        """The delay of the slow faults that match, and the first other fault that does."""
        delay = 0.0
        chosen: Fault | None = None
        with self._cond:
            for fault in list(self._faults):
                if not fault.matches(method):
                    continue
                if fault.kind == "slow":
                    delay += fault.seconds
                elif chosen is None:
                    chosen = fault
                else:
                    continue
                if fault.times is not None:
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults.remove(fault)
        return delay, chosen

    # -- internals (the caller holds self._cond) ----------------------------------------------
    def _new_message_id(self, chat_id: int) -> int:
        value = self._next_message_id.get(chat_id, 101)
        self._next_message_id[chat_id] = value + 1
        return value

    def _find(self, message: dict[str, Any] | int | tuple[int, int]) -> dict[str, Any]:
        if isinstance(message, dict):
            key = (message["chat"]["id"], message["message_id"])
        elif isinstance(message, tuple):
            key = message
        else:
            found = [k for k in self._messages if k[1] == message]
            if len(found) != 1:
                raise AssertionError(f"message {message}: {len(found)} messages have that id")
            key = found[0]
        if key not in self._messages:
            raise AssertionError(f"no message {key[1]} in chat {key[0]}")
        return self._messages[key]

    def _replied(self, chat_id: int, reply_to: dict[str, Any] | int) -> dict[str, Any]:
        key = (chat_id, reply_to if isinstance(reply_to, int) else reply_to["message_id"])
        target = copy.deepcopy(self._find(key))
        target.pop("reply_to_message", None)  # Telegram nests one level only
        return target

    def _queue(self, kind: str, payload: dict[str, Any]) -> int | None:
        if kind not in self._allowed:
            self.dropped_updates.append({kind: payload})
            return None
        update_id = self._next_update_id
        self._next_update_id += 1
        self._updates.append({"update_id": update_id, kind: payload})
        self._cond.notify_all()
        return update_id

    # -- serving -----------------------------------------------------------------------------
    def _serve(self, handler: _Handler, http_method: str) -> None:
        parts = urlsplit(handler.path)
        match = re.fullmatch(r"/bot([^/]*)/([^/]*)", parts.path)
        args: dict[str, str] = dict(parse_qsl(parts.query, keep_blank_values=True))
        request = Request(
            method=match.group(2) if match else "",
            http_method=http_method,
            args=args,
            at=time.monotonic(),
            token_ok=bool(match and match.group(1) == self.token),
        )
        with self._cond:
            self.requests.append(request)
            if request.method:
                name = _CANONICAL.get(request.method.lower(), request.method)
                self.counts[name] += 1
        try:
            args.update(self._body_args(handler))
        except ApiError as exc:
            return self._answer_error(handler, request, exc)

        delay, fault = self._take_faults(request.method)
        if delay:
            request.fault = f"slow {delay:g}s"
            if self._stopping.wait(delay):
                return self._drop(handler, request)
        if fault is not None:
            request.fault = fault.kind
            return self._hostile(handler, request, fault)

        if match is None:
            return self._answer_error(handler, request, ApiError(404, "Not Found"))
        token = match.group(1)
        if not _TOKEN_SHAPE.fullmatch(token):
            error = ApiError(401, "Unauthorized: invalid token specified")
            return self._answer_error(handler, request, error)
        if token != self.token:
            return self._answer_error(handler, request, ApiError(401, "Unauthorized"))
        method = request.method.lower()
        serve = {
            "getme": lambda a: dict(self.bot),
            "getupdates": self._get_updates,
            "sendmessage": self._send_message,
            "editmessagetext": self._edit_message_text,
            "answercallbackquery": self._answer_callback_query,
            "deletemessage": self._delete_message,
            "deletewebhook": lambda a: True,
            "getwebhookinfo": lambda a: {
                "url": "",
                "has_custom_certificate": False,
                "pending_update_count": len(self._updates),
            },
        }.get(method)
        if serve is None:
            error = ApiError(404, "Not Found: method not found")
            return self._answer_error(handler, request, error)
        try:
            result = serve(args)
        except ApiError as exc:
            return self._answer_error(handler, request, exc)
        self._send(handler, request, 200, {"ok": True, "result": result})

    def _body_args(self, handler: _Handler) -> dict[str, str]:
        length = int(handler.headers.get("Content-Length") or 0)
        if length > MAX_REQUEST_BODY:
            handler.close_connection = True
            raise ApiError(413, "Request Entity Too Large")
        raw = handler.rfile.read(length) if length else b""
        if not raw:
            return {}
        kind = (handler.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if kind == "application/json":
            try:
                data = json.loads(raw)
            except ValueError:
                raise bad("can't parse JSON object") from None
            if not isinstance(data, dict):
                raise bad("JSON object expected")
            return {k: _arg_text(v) for k, v in data.items() if v is not None}
        if kind == "application/x-www-form-urlencoded":
            try:
                return dict(parse_qsl(raw.decode(), keep_blank_values=True))
            except UnicodeDecodeError:
                raise bad("strings must be encoded in UTF-8") from None
        return {}

    def _get_updates(self, args: dict[str, str]) -> list[dict[str, Any]]:
        offset = _int(args.get("offset"), 0)
        limit = min(max(_int(args.get("limit"), 100), 1), 100)
        timeout = min(max(_int(args.get("timeout"), 0), 0), LONG_POLL_MAX_TIMEOUT)
        me = _Poller()
        with self._cond:
            if "allowed_updates" in args:
                self._allowed = _allowed(args["allowed_updates"]) or self._allowed
            if offset < 0:
                self._updates = (
                    self._updates[offset:] if -offset < len(self._updates) else self._updates
                )
            elif offset > 0:
                self._updates = [u for u in self._updates if u["update_id"] >= offset]
            self._in_flight += 1
            self.max_pollers = max(self.max_pollers, self._in_flight)
            try:
                if timeout and not self._updates:
                    if self._waiting is not None:
                        self._waiting.aborted = True
                        self._cond.notify_all()
                    self._waiting = me
                deadline = time.monotonic() + timeout
                while True:
                    if me.aborted:
                        self.conflicts += 1
                        late = time.monotonic() < self._next_conflict
                        self._next_conflict = max(self._next_conflict, time.monotonic()) + 3.0
                        break
                    if self._updates or self._stopping.is_set():
                        return copy.deepcopy(self._updates[:limit])
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return []
                    self._cond.wait(min(left, 0.5))
            finally:
                self._in_flight -= 1
                if self._waiting is me:
                    self._waiting = None
        if late:  # Telegram answers one conflict at once every 3 s, the others 3 s late
            self._stopping.wait(3.0)
        raise ApiError(409, CONFLICT)

    def _send_message(self, args: dict[str, str]) -> dict[str, Any]:
        text = _text(args)
        markup = _reply_markup(args.get("reply_markup", ""))
        with self._cond:
            chat = self._chat(args)
            reply = _reply_parameters(args)
            message: dict[str, Any] = {
                "message_id": 0,
                "from": dict(self.bot),
                "chat": dict(chat),
                "date": int(time.time()),
                "text": text,
            }
            if reply is not None:
                reply_id, allow_without = reply
                if (chat["id"], reply_id) in self._messages:
                    message["reply_to_message"] = self._replied(chat["id"], reply_id)
                elif not allow_without:
                    raise bad("message to be replied not found")
            if self.chat_rate is not None:
                self._check_rate(chat["id"])
            if markup is not None:
                message["reply_markup"] = markup
            message["message_id"] = self._new_message_id(chat["id"])
            self._messages[(chat["id"], message["message_id"])] = message
            self._sent.append((chat["id"], message["message_id"]))
            return copy.deepcopy(message)

    def _edit_message_text(self, args: dict[str, str]) -> dict[str, Any] | bool:
        text = _text(args)
        markup = _reply_markup(args.get("reply_markup", ""))
        with self._cond:
            if not args.get("chat_id") and not args.get("message_id"):
                if args.get("inline_message_id"):
                    raise bad("message to edit not found")
                raise bad("message identifier is not specified")
            chat = self._chat(args)
            message_id = _int(args.get("message_id"), 0)
            if message_id <= 0:
                raise bad("message identifier is not specified")
            message = self._messages.get((chat["id"], message_id))
            if message is None:
                raise bad("message to edit not found")
            if message["from"].get("id") != self.bot["id"]:
                raise bad("message can't be edited")
            if message["text"] == text and message.get("reply_markup") == markup:
                raise ApiError(400, NOT_MODIFIED)
            message["text"] = text
            if markup is None:
                message.pop("reply_markup", None)
            else:
                message["reply_markup"] = markup
            message["edit_date"] = int(time.time())
            self.edits.append(
                {
                    "chat_id": chat["id"],
                    "message_id": message_id,
                    "text": text,
                    "reply_markup": markup,
                }
            )
            return copy.deepcopy(message)

    def _answer_callback_query(self, args: dict[str, str]) -> bool:
        text = args.get("text", "")
        with self._cond:
            query = self._queries.get(args.get("callback_query_id", "").strip())
            too_old = (
                query is None
                or query.answered
                or (time.monotonic() - query.created > self.callback_window)
            )
            if too_old:
                raise ApiError(400, QUERY_TOO_OLD)
            if len(text.encode("utf-16-le")) // 2 > MAX_CALLBACK_ANSWER:
                raise bad("MESSAGE_TOO_LONG")
            query.answered = True
            self.callback_answers.append(dict(args))
        return True

    def _delete_message(self, args: dict[str, str]) -> bool:
        with self._cond:
            chat = self._chat(args)
            key = (chat["id"], _int(args.get("message_id"), 0))
            if key not in self._messages:
                raise bad("message to delete not found")
            del self._messages[key]
        return True

    def _chat(self, args: dict[str, str]) -> dict[str, Any]:
        raw = args.get("chat_id", "").strip()
        if not raw:
            raise bad("chat_id is empty")
        if raw.startswith("@"):
            found = [c for c in self._chats.values() if c.get("username") == raw[1:]]
        else:
            found = [self._chats[int(raw)]] if _is_int(raw) and int(raw) in self._chats else []
        if not found:
            raise bad("chat not found")
        return found[0]

    def _check_rate(self, chat_id: int) -> None:
        count, seconds = self.chat_rate  # type: ignore[misc]
        now = time.monotonic()
        sends = self._chat_sends.setdefault(chat_id, collections.deque())
        while sends and now - sends[0] > seconds:
            sends.popleft()
        if len(sends) >= count:
            wait = max(1, int(seconds - (now - sends[0])) + 1)
            raise ApiError(429, f"Too Many Requests: retry after {wait}", retry_after=wait)
        sends.append(now)

    # -- answering ---------------------------------------------------------------------------
    def _answer_error(self, handler: _Handler, request: Request, error: ApiError) -> None:
        body: dict[str, Any] = {
            "ok": False,
            "error_code": error.code,
            "description": error.description,
        }
        headers = {}
        if error.retry_after is not None:
            body["parameters"] = {"retry_after": error.retry_after}
            headers["Retry-After"] = str(error.retry_after)
        self._send(handler, request, error.code, body, headers)

    def _send(
        self,
        handler: _Handler,
        request: Request,
        status: int,
        data: Any,
        headers: dict[str, str] | None = None,
        raw: bytes | None = None,
    ) -> None:
        # compact, as Telegram's own answers are (`"chat":{"id":123`, with no spaces)
        payload = (
            raw
            if raw is not None
            else json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
        )
        request.status = status
        try:
            handler.send_response(status)
            for key, value in (headers or {}).items():
                handler.send_header(key, value)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
        except OSError:
            handler.close_connection = True

    def _drop(self, handler: _Handler, request: Request) -> None:
        request.status = -1
        handler.close_connection = True

    def _hostile(self, handler: _Handler, request: Request, fault: Fault) -> None:
        if fault.kind == "hang":
            self._release.wait(self.max_hang)
            return self._drop(handler, request)
        if fault.kind == "status":
            if fault.body is not None:
                return self._send(handler, request, fault.status, None, raw=fault.body)
            description = fault.description or {
                429: f"Too Many Requests: retry after {fault.retry_after}",
                500: "Internal Server Error",
                502: "Bad Gateway",
                503: "Service Unavailable",
            }.get(fault.status, f"Error {fault.status}")
            error = ApiError(fault.status, description, fault.retry_after)
            return self._answer_error(handler, request, error)
        if fault.kind == "invalid_json":
            body = fault.body if fault.body is not None else b'{"ok":true,"result":[{"update_id":'
            return self._send(handler, request, 200, None, raw=body)
        request.status = 200
        handler.close_connection = True
        try:
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            if fault.kind == "huge" and fault.declare:
                handler.send_header("Content-Length", str(fault.size))
            elif fault.kind == "trickle":
                handler.send_header("Content-Length", str(1 << 20))
            else:
                handler.send_header("Connection", "close")
            handler.end_headers()
            if fault.kind == "huge":
                self._stream_huge(handler, fault.size)
            elif fault.kind == "trickle":
                self._stream_trickle(handler, fault.seconds)
            else:
                self._stream_endless(handler)
        except OSError:
            return  # the client hung up: the point of these modes

    def _stream_huge(self, handler: _Handler, size: int) -> None:
        head = b'{"ok":true,"result":[],"pad":"'
        tail = b'"}'
        handler.wfile.write(head)
        left = max(0, size - len(head) - len(tail))
        chunk = b"a" * (1 << 20)
        while left > 0 and not self._stopping.is_set():
            piece = chunk[: min(left, len(chunk))]
            handler.wfile.write(piece)
            left -= len(piece)
        handler.wfile.write(tail)

    def _stream_trickle(self, handler: _Handler, interval: float) -> None:
        ends = time.monotonic() + self.max_hang
        while not self._release.wait(interval) and time.monotonic() < ends:
            handler.wfile.write(b" ")  # JSON's own whitespace: a body that is never done
            handler.wfile.flush()

    def _stream_endless(self, handler: _Handler) -> None:
        handler.wfile.write(b'{"ok":true,"result":[')
        item = b'{"update_id":1,"message":{"message_id":1,"text":"more"}},' * 1024
        ends = time.monotonic() + self.max_hang
        while not self._stopping.is_set() and time.monotonic() < ends:
            handler.wfile.write(item)


class _Handler(BaseHTTPRequestHandler):
    api: TelegramAPI
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args: object) -> None:
        pass  # quiet, and a URL here would carry the token

    def do_GET(self) -> None:
        self.api._serve(self, "GET")

    def do_POST(self) -> None:
        self.api._serve(self, "POST")


# -- arguments, read as Telegram reads them --------------------------------------------------
def _arg_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _is_int(raw: str) -> bool:
    return bool(re.fullmatch(r"-?[0-9]{1,19}", raw.strip()))


def _int(raw: str | None, default: int) -> int:
    """An integer argument: absent or blank is `default`, junk reads as 0 (as Telegram's
    to_integer does)."""
    if raw is None or not raw.strip():
        return default
    match = re.match(r"\s*(-?[0-9]+)", raw)
    return int(match.group(1)) if match else 0


def _methods(methods: Any) -> frozenset[str] | None:
    if methods is None:
        return None
    if isinstance(methods, str):
        methods = [methods]
    return frozenset(m.lower() for m in methods)


def _allowed(raw: str) -> frozenset[str] | None:
    """allowed_updates: a JSON list of update types; empty (or unreadable) means the default."""
    try:
        value = json.loads(raw) if raw.strip() else []
    except ValueError:
        value = [raw]  # a bare word, as some clients send one type
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return None
    kinds = frozenset(v for v in value if isinstance(v, str) and v in ALL_TYPES)
    return kinds or DEFAULT_ALLOWED


def _text(args: dict[str, str]) -> str:
    """`text` as Telegram takes it, or its refusal."""
    text = args.get("text", "")
    if not text:
        raise bad("message text is empty")
    if any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        raise bad("strings must be encoded in UTF-8")
    if len(text.encode()) > MAX_TEXT_BYTES:
        raise bad("text is too long")
    mode = args.get("parse_mode", "").strip().lower()
    if mode == "html":
        text = _parse_html(text)
    elif mode not in ("", "none", "markdown", "markdownv2"):
        raise bad("unsupported parse_mode")
    text = text.strip(" \t\r\n")
    if not text:
        raise bad("message must be non-empty")
    if len(text.encode("utf-16-le")) // 2 > MAX_TEXT:
        raise bad("message is too long")
    return text


_HTML_TOKEN = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9-]*)?([^<>]*)(>?)")


def _parse_html(text: str) -> str:
    """The plain text of parse_mode HTML, or Telegram's "can't parse entities" refusal."""
    out: list[str] = []
    stack: list[str] = []
    position = 0
    for match in re.finditer(r"<", text):
        if match.start() < position:
            continue
        out.append(text[position : match.start()])
        offset = len(text[: match.start()].encode())
        token = _HTML_TOKEN.match(text, match.start())
        assert token is not None
        closing, name, _, end = token.groups()
        if not name or not end:
            raise bad(f"can't parse entities: Unexpected end of name token at byte offset {offset}")
        name = name.lower()
        if closing:
            if not stack:
                raise bad(f"can't parse entities: Unexpected end tag at byte offset {offset}")
            if stack[-1] != name:
                raise bad(
                    f"can't parse entities: Unmatched end tag at byte offset {offset}, "
                    f'expected "</{stack[-1]}>", found "</{name}>"'
                )
            stack.pop()
        else:
            if name not in HTML_TAGS:
                raise bad(
                    f'can\'t parse entities: Unsupported start tag "{name}" at byte offset {offset}'
                )
            stack.append(name)
        position = token.end()
    out.append(text[position:])
    if stack:
        raise bad(
            f"can't parse entities: Can't find end tag corresponding to start tag \"{stack[-1]}\""
        )
    plain = "".join(out)
    return re.sub(
        r"&(lt|gt|amp|quot|#[0-9]+|#x[0-9a-fA-F]+);",
        lambda m: html.unescape(m.group(0)),
        plain,
    )


def _reply_markup(raw: str) -> dict[str, Any] | None:
    """The reply_markup a message keeps (only an inline keyboard), or the refusal."""
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        raise bad("can't parse reply keyboard markup JSON object") from None
    if not isinstance(value, dict):
        raise bad("object expected as reply markup")
    rows = value.get("inline_keyboard")
    if rows is None:
        return None
    if not isinstance(rows, list):
        raise bad('field "inline_keyboard" of the InlineKeyboardMarkup must be an Array of Arrays')
    kept: list[list[dict[str, Any]]] = []
    for row in rows:
        if not isinstance(row, list):
            raise bad(
                'field "inline_keyboard" of the InlineKeyboardMarkup must be an Array of Arrays'
            )
        kept.append([_button(b) for b in row])
    if sum(len(row) for row in kept) > MAX_BUTTONS:
        raise bad("reply markup is too long")
    kept = [row for row in kept if row]
    return {"inline_keyboard": kept} if kept else None


def _button(button: Any) -> dict[str, Any]:
    prefix = "can't parse inline keyboard button: "
    if not isinstance(button, dict):
        raise bad(prefix + "InlineKeyboardButton must be an Object")
    text = button.get("text")
    if not isinstance(text, str):
        raise bad(prefix + 'Field "text" must be of type String')
    if not text.strip():
        raise bad("BUTTON_TEXT_INVALID")
    url = button.get("url")
    if isinstance(url, str) and url:
        return {"text": text, "url": url}
    data = button.get("callback_data")
    if data is not None and not isinstance(data, str):
        raise bad(prefix + 'Field "callback_data" must be of type String')
    if data:
        if len(data.encode()) > MAX_CALLBACK_DATA or any(0xD800 <= ord(c) <= 0xDFFF for c in data):
            raise bad("BUTTON_DATA_INVALID")
        return {"text": text, "callback_data": data}
    raise bad(prefix + "Text buttons are unallowed in the inline keyboard")


def _reply_parameters(args: dict[str, str]) -> tuple[int, bool] | None:
    """The message replied to and allow_sending_without_reply, from reply_parameters (or the
    older reply_to_message_id)."""
    allow = args.get("allow_sending_without_reply", "").lower() in ("true", "1")
    raw = args.get("reply_parameters", "")
    if raw:
        try:
            value = json.loads(raw)
        except ValueError:
            raise bad("can't parse reply parameters JSON object") from None
        if not isinstance(value, dict):
            raise bad("object expected as reply parameters")
        message_id = value.get("message_id")
        if not isinstance(message_id, int) or isinstance(message_id, bool):
            raise bad('can\'t parse reply parameters: Field "message_id" must be a valid Number')
        return message_id, bool(value.get("allow_sending_without_reply")) or allow
    message_id = _int(args.get("reply_to_message_id"), 0)
    return (message_id, allow) if message_id > 0 else None
