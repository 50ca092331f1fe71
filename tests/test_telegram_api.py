"""The local Bot API server (tests/support/telegram_api.py) answers as Telegram does.

Driven with httpx directly, as a bot would: long polling and its 409, offsets, allowed_updates,
what sendMessage / editMessageText / answerCallbackQuery take and refuse (in Telegram's words),
the operator's taps and replies, and the hostile modes.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import pytest

from tests.support import until_sync
from tests.support.telegram_api import (
    CONFLICT,
    NOT_MODIFIED,
    OPERATOR,
    QUERY_TOO_OLD,
    STRANGER,
    TelegramAPI,
)

CHAT = OPERATOR["id"]


@pytest.fixture
def tg():
    with TelegramAPI() as server:
        yield server


def call(tg: TelegramAPI, method: str, **params: Any) -> tuple[int, dict]:
    response = httpx.post(tg.url(method), json=params, timeout=60)
    return response.status_code, response.json()


def ok(tg: TelegramAPI, method: str, **params: Any) -> Any:
    status, body = call(tg, method, **params)
    assert (status, body.get("ok")) == (200, True), body
    return body["result"]


def refused(tg: TelegramAPI, method: str, **params: Any) -> str:
    """The description of a 400 refusal."""
    status, body = call(tg, method, **params)
    assert status == 400 and body["ok"] is False and body["error_code"] == 400, body
    return body["description"]


def keyboard(*data: str) -> dict:
    return {
        "inline_keyboard": [[{"text": f"#{i}", "callback_data": d}] for i, d in enumerate(data)]
    }


def in_thread(fn, *args, **kwargs) -> tuple[threading.Thread, dict]:
    box: dict = {}

    def run() -> None:
        started = time.monotonic()
        try:
            box["value"] = fn(*args, **kwargs)
        except Exception as exc:  # reported by the test that reads the box
            box["error"] = exc
        box["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box


# -- requests and tokens ---------------------------------------------------------------------
def test_a_wrong_token_is_401_and_an_unknown_method_404(tg):
    wrong = httpx.post(tg.url("getMe", token="7000000001:AAHs9fAkEt0kEnF0rTesTsOnLy_x1y2zzzz"))
    assert (wrong.status_code, wrong.json()) == (
        401,
        {"ok": False, "error_code": 401, "description": "Unauthorized"},
    )
    malformed = httpx.get(tg.url("getMe", token="nonsense"))
    assert malformed.status_code == 401
    assert malformed.json()["description"] == "Unauthorized: invalid token specified"
    unknown = httpx.get(tg.url("sendRocket"))
    assert (unknown.status_code, unknown.json()["description"]) == (
        404,
        "Not Found: method not found",
    )
    me = httpx.get(tg.url("getme")).json()  # methods are case-insensitive
    assert me["ok"] and me["result"]["is_bot"] and me["result"]["id"] == 7000000001
    assert tg.counts["getMe"] == 3 and tg.counts["sendRocket"] == 1  # whatever the answer


def test_arguments_come_as_json_a_form_or_a_query_string(tg):
    markup = '{"inline_keyboard": [[{"text": "A", "callback_data": "a"}]]}'
    by_form = httpx.post(
        tg.url("sendMessage"), data={"chat_id": str(CHAT), "text": "form", "reply_markup": markup}
    ).json()
    by_query = httpx.get(tg.url("sendMessage"), params={"chat_id": CHAT, "text": "query"}).json()
    by_json = ok(tg, "sendMessage", chat_id=CHAT, text="json", reply_markup=keyboard("b"))
    assert by_form["ok"] and by_query["ok"]
    assert [m["text"] for m in tg.sent_messages()] == ["form", "query", "json"]
    assert [TelegramAPI.buttons(m) for m in tg.sent_messages()] == [[("A", "a")], [], [("#0", "b")]]
    ids = [m["message_id"] for m in tg.sent_messages()]
    assert ids == sorted(set(ids)) and by_json["chat"] == {
        "id": CHAT,
        "first_name": "Ada",
        "username": "ada_operator",
        "type": "private",
    }
    assert by_json["from"]["is_bot"] is True


# -- getUpdates ------------------------------------------------------------------------------
def test_a_long_poll_is_held_until_an_update_arrives(tg):
    thread, box = in_thread(ok, tg, "getUpdates", timeout=20)
    until_sync(lambda: tg.polling, 5, what="the getUpdates to be held")
    time.sleep(0.3)  # a held request stays held (no answer while nothing arrives)
    assert "value" not in box and "error" not in box
    tg.send_text("hello")
    thread.join(5)
    assert "value" in box, box
    assert box["seconds"] < 5
    (update,) = box["value"]
    message = update["message"]
    assert message["text"] == "hello" and message["chat"]["id"] == CHAT
    assert message["from"] == OPERATOR


def test_a_long_poll_with_nothing_ends_after_its_timeout(tg):
    started = time.monotonic()
    assert ok(tg, "getUpdates", timeout=1) == []
    assert 0.9 <= time.monotonic() - started < 3
    started = time.monotonic()
    assert ok(tg, "getUpdates") == []  # timeout 0: short polling answers at once
    assert time.monotonic() - started < 0.5


def test_offset_confirms_and_drops_the_earlier_updates(tg):
    for word in ("one", "two", "three"):
        tg.send_text(word)
    updates = ok(tg, "getUpdates")
    ids = [u["update_id"] for u in updates]
    assert [u["message"]["text"] for u in updates] == ["one", "two", "three"]
    assert ids == list(range(ids[0], ids[0] + 3))
    assert ok(tg, "getUpdates") == updates  # not confirmed: the same again
    assert [u["update_id"] for u in ok(tg, "getUpdates", offset=ids[1])] == ids[1:]
    assert [u["update_id"] for u in tg.pending_updates()] == ids[1:]  # "one" is gone
    assert ok(tg, "getUpdates", offset=ids[2] + 1) == []
    assert tg.pending_updates() == []
    for word in ("four", "five", "six"):
        tg.send_text(word)
    assert [u["message"]["text"] for u in ok(tg, "getUpdates", limit=2)] == ["four", "five"]
    assert [u["message"]["text"] for u in ok(tg, "getUpdates", offset=-1)] == ["six"]
    assert len(tg.pending_updates()) == 1


def test_allowed_updates_keeps_other_types_out_from_then_on(tg):
    tg.send_text("before")  # arrived before the filter: still delivered
    ok(tg, "getUpdates", allowed_updates=["callback_query"])
    sent = ok(tg, "sendMessage", chat_id=CHAT, text="pick", reply_markup=keyboard("x"))
    tg.send_text("after")  # dropped: messages are not allowed now
    tg.tap(sent, "x")
    kinds = [sorted(set(u) - {"update_id"}) for u in ok(tg, "getUpdates")]
    assert kinds == [["message"], ["callback_query"]]
    assert tg.dropped_updates and tg.dropped_updates[0]["message"]["text"] == "after"
    ok(tg, "getUpdates", allowed_updates=[])  # empty: the default again
    tg.send_text("again")
    assert ok(tg, "getUpdates")[-1]["message"]["text"] == "again"


def test_a_second_long_poll_ends_the_first_with_409_conflict(tg):
    first, first_box = in_thread(call, tg, "getUpdates", timeout=20)
    until_sync(lambda: tg.polling, 5, what="the first poller to be held")
    second, second_box = in_thread(call, tg, "getUpdates", timeout=20)
    first.join(5)
    assert first_box.get("value") == (
        409,
        {"ok": False, "error_code": 409, "description": CONFLICT},
    ), first_box
    assert tg.conflicts == 1 and tg.max_pollers == 2
    tg.send_text("to the newer poller")
    second.join(5)
    status, body = second_box["value"]
    assert status == 200 and body["result"][0]["message"]["text"] == "to the newer poller"


def test_a_short_poll_beside_a_long_one_is_no_conflict(tg):
    thread, box = in_thread(call, tg, "getUpdates", timeout=2)
    until_sync(lambda: tg.polling, 5)
    tg.send_text("x")
    assert ok(tg, "getUpdates")  # the update is there: this one answers at once
    thread.join(5)
    assert box["value"][0] == 200 and tg.conflicts == 0


# -- sendMessage: what Telegram refuses -------------------------------------------------------
def test_text_is_checked_as_telegram_does(tg):
    assert refused(tg, "sendMessage", chat_id=CHAT, text="") == "Bad Request: message text is empty"
    assert refused(tg, "sendMessage", chat_id=CHAT) == "Bad Request: message text is empty"
    assert refused(tg, "sendMessage", chat_id=CHAT, text=" \n ") == (
        "Bad Request: message must be non-empty"
    )
    too_long = "Bad Request: message is too long"
    assert refused(tg, "sendMessage", chat_id=CHAT, text="x" * 4097) == too_long
    assert refused(tg, "sendMessage", chat_id=CHAT, text="🙂" * 2049) == too_long  # UTF-16 units
    assert ok(tg, "sendMessage", chat_id=CHAT, text="x" * 4096)["text"] == "x" * 4096
    assert ok(tg, "sendMessage", chat_id=CHAT, text="🙂" * 2048)
    assert refused(tg, "sendMessage", text="hi") == "Bad Request: chat_id is empty"
    assert refused(tg, "sendMessage", chat_id=STRANGER["id"], text="hi") == (
        "Bad Request: chat not found"
    )
    lone = httpx.post(
        tg.url("sendMessage"),
        content=b'{"chat_id": %d, "text": "a\\ud800b"}' % CHAT,
        headers={"Content-Type": "application/json"},
    ).json()
    assert lone["description"] == "Bad Request: strings must be encoded in UTF-8"
    assert len(tg.sent_messages()) == 2


def test_html_is_parsed_before_the_length_is_counted(tg):
    escaped = "&lt;" * 4096  # 16384 characters sent, 4096 shown
    sent = ok(tg, "sendMessage", chat_id=CHAT, text=escaped, parse_mode="HTML")
    assert sent["text"] == "<" * 4096
    assert (
        ok(tg, "sendMessage", chat_id=CHAT, text="<b>bold</b> &amp; co", parse_mode="HTML")["text"]
        == "bold & co"
    )
    assert refused(tg, "sendMessage", chat_id=CHAT, text="a <x> b", parse_mode="HTML") == (
        'Bad Request: can\'t parse entities: Unsupported start tag "x" at byte offset 2'
    )
    assert "can't parse entities" in refused(
        tg, "sendMessage", chat_id=CHAT, text="if a < b", parse_mode="HTML"
    )
    # the same text without a parse_mode is shown as typed
    assert ok(tg, "sendMessage", chat_id=CHAT, text="a <x> &lt;")["text"] == "a <x> &lt;"


def test_the_inline_keyboard_is_checked_as_telegram_does(tg):
    def markup_refusal(markup: Any) -> str:
        return refused(tg, "sendMessage", chat_id=CHAT, text="t", reply_markup=markup)

    assert markup_refusal(keyboard("x" * 65)) == "Bad Request: BUTTON_DATA_INVALID"
    assert markup_refusal(keyboard("é" * 33)) == "Bad Request: BUTTON_DATA_INVALID"  # 66 bytes
    assert markup_refusal({"inline_keyboard": [[{"text": "no action"}]]}) == (
        "Bad Request: can't parse inline keyboard button: Text buttons are unallowed in the "
        "inline keyboard"
    )
    assert markup_refusal({"inline_keyboard": [{"text": "a", "callback_data": "a"}]}) == (
        'Bad Request: field "inline_keyboard" of the InlineKeyboardMarkup must be an Array of '
        "Arrays"
    )
    assert markup_refusal("not json") == (
        "Bad Request: can't parse reply keyboard markup JSON object"
    )
    assert markup_refusal([1]) == "Bad Request: object expected as reply markup"
    many = {"inline_keyboard": [[{"text": str(i), "callback_data": str(i)}] for i in range(101)]}
    assert markup_refusal(many) == "Bad Request: reply markup is too long"
    assert tg.sent_messages() == []
    many["inline_keyboard"].pop()
    assert (
        len(TelegramAPI.buttons(ok(tg, "sendMessage", chat_id=CHAT, text="t", reply_markup=many)))
        == 100
    )
    assert TelegramAPI.buttons(
        ok(tg, "sendMessage", chat_id=CHAT, text="t", reply_markup=keyboard("x" * 64))
    )
    empty = ok(tg, "sendMessage", chat_id=CHAT, text="t", reply_markup={"inline_keyboard": []})
    assert "reply_markup" not in empty


def test_a_reply_names_a_message_of_the_chat(tg):
    first = ok(tg, "sendMessage", chat_id=CHAT, text="first")
    second = ok(
        tg,
        "sendMessage",
        chat_id=CHAT,
        text="second",
        reply_parameters={"message_id": first["message_id"]},
    )
    assert second["reply_to_message"]["message_id"] == first["message_id"]
    assert (
        refused(tg, "sendMessage", chat_id=CHAT, text="x", reply_parameters={"message_id": 99999})
        == "Bad Request: message to be replied not found"
    )
    alone = ok(
        tg,
        "sendMessage",
        chat_id=CHAT,
        text="x",
        reply_parameters={"message_id": 99999, "allow_sending_without_reply": True},
    )
    assert "reply_to_message" not in alone


def test_a_chat_rate_floods_with_retry_after():
    with TelegramAPI(chat_rate=(2, 60.0)) as tg:
        ok(tg, "sendMessage", chat_id=CHAT, text="1")
        ok(tg, "sendMessage", chat_id=CHAT, text="2")
        status, body = call(tg, "sendMessage", chat_id=CHAT, text="3")
        assert status == 429 and body["parameters"]["retry_after"] > 0
        assert (
            body["description"]
            == f"Too Many Requests: retry after {body['parameters']['retry_after']}"
        )


# -- the operator's side: taps and replies ----------------------------------------------------
def test_a_tap_is_a_callback_query_answered_once(tg):
    sent = ok(tg, "sendMessage", chat_id=CHAT, text="Which?", reply_markup=keyboard("A", "B"))
    query_id = tg.tap(sent, text="#1")
    (update,) = ok(tg, "getUpdates")
    query = update["callback_query"]
    assert query["id"] == query_id and query["data"] == "B"
    assert query["from"] == OPERATOR and query["chat_instance"]
    assert query["message"]["message_id"] == sent["message_id"]
    assert query["message"]["reply_markup"] == keyboard("A", "B")
    assert ok(tg, "answerCallbackQuery", callback_query_id=query_id, text="✓ B") is True
    assert tg.callback_answers == [{"callback_query_id": query_id, "text": "✓ B"}]
    assert refused(tg, "answerCallbackQuery", callback_query_id=query_id) == QUERY_TOO_OLD
    assert refused(tg, "answerCallbackQuery", callback_query_id="12345") == QUERY_TOO_OLD
    second = tg.tap(sent, "A")
    assert refused(tg, "answerCallbackQuery", callback_query_id=second, text="x" * 201) == (
        "Bad Request: MESSAGE_TOO_LONG"
    )
    with pytest.raises(AssertionError, match="no single button"):
        tg.tap(sent, "C")  # not on the message: a user cannot tap it
    forged = tg.tap(sent, "../../etc/passwd", forge=True)
    assert ok(tg, "getUpdates")[-1]["callback_query"]["id"] == forged


def test_an_old_tap_cannot_be_answered():
    with TelegramAPI(callback_window=0.0) as tg:  # every tap is already too old to answer
        sent = ok(tg, "sendMessage", chat_id=CHAT, text="Which?", reply_markup=keyboard("A"))
        query_id = tg.tap(sent)
        assert refused(tg, "answerCallbackQuery", callback_query_id=query_id) == QUERY_TOO_OLD


def test_a_reply_carries_the_message_it_answers(tg):
    sent = ok(tg, "sendMessage", chat_id=CHAT, text="Which?", reply_markup=keyboard("A"))
    tg.reply(sent, "neither: use staging")
    stranger = tg.send_text("hi", user=STRANGER)
    (mine, theirs) = [u["message"] for u in ok(tg, "getUpdates")]
    assert mine["text"] == "neither: use staging"
    assert mine["reply_to_message"]["message_id"] == sent["message_id"]
    assert mine["reply_to_message"]["text"] == "Which?"
    assert theirs["chat"]["id"] == STRANGER["id"] == stranger["from"]["id"] != CHAT
    assert mine["message_id"] > sent["message_id"]


# -- editMessageText -------------------------------------------------------------------------
def test_an_edit_changes_the_text_and_the_buttons(tg):
    sent = ok(tg, "sendMessage", chat_id=CHAT, text="Which?", reply_markup=keyboard("A", "B"))
    key = {"chat_id": CHAT, "message_id": sent["message_id"]}
    edited = ok(tg, "editMessageText", **key, text="✓ B, via Telegram")
    assert edited["text"] == "✓ B, via Telegram" and "reply_markup" not in edited
    assert edited["edit_date"] >= sent["date"]
    assert tg.message(sent["message_id"])["text"] == "✓ B, via Telegram"
    assert TelegramAPI.buttons(tg.sent_messages()[0]) == []
    assert refused(tg, "editMessageText", **key, text="✓ B, via Telegram") == NOT_MODIFIED
    assert (
        refused(
            tg,
            "editMessageText",
            **key,
            text="✓ B, via Telegram",
            reply_markup={"inline_keyboard": []},
        )
        == NOT_MODIFIED
    )
    ok(tg, "editMessageText", **key, text="✓ B, via Telegram", reply_markup=keyboard("C"))
    assert [e["text"] for e in tg.edits] == ["✓ B, via Telegram"] * 2
    assert refused(tg, "editMessageText", chat_id=CHAT, message_id=99999, text="x") == (
        "Bad Request: message to edit not found"
    )
    theirs = tg.send_text("mine")
    assert (
        refused(tg, "editMessageText", chat_id=CHAT, message_id=theirs["message_id"], text="x")
        == "Bad Request: message can't be edited"
    )
    assert refused(tg, "editMessageText", **key, text="") == "Bad Request: message text is empty"
    assert refused(tg, "editMessageText", **key, text="t", reply_markup=keyboard("y" * 65)) == (
        "Bad Request: BUTTON_DATA_INVALID"
    )


# -- hostile modes ---------------------------------------------------------------------------
def test_slow_delays_then_answers(tg):
    tg.slow(0.5, methods="getMe", times=1)
    started = time.monotonic()
    assert ok(tg, "getMe")["is_bot"]
    assert time.monotonic() - started >= 0.5
    started = time.monotonic()
    ok(tg, "getMe")
    assert time.monotonic() - started < 0.4


def test_hang_never_answers_until_cleared(tg):
    tg.hang(methods=["sendMessage"])
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(tg.url("sendMessage"), json={"chat_id": CHAT, "text": "x"}, timeout=0.5)
    assert ok(tg, "getMe")  # other methods answer
    thread, box = in_thread(call, tg, "sendMessage", chat_id=CHAT, text="x")
    until_sync(lambda: len(tg.calls("sendMessage")) == 2, 5)
    tg.clear_faults()
    thread.join(5)
    assert isinstance(box.get("error"), httpx.RemoteProtocolError), box  # dropped, no answer
    assert ok(tg, "sendMessage", chat_id=CHAT, text="x")["text"] == "x"


def test_errors_and_floods_are_telegrams_envelopes(tg):
    tg.fail(500, times=2)
    for _ in range(2):
        assert call(tg, "getMe") == (
            500,
            {"ok": False, "error_code": 500, "description": "Internal Server Error"},
        )
    assert ok(tg, "getMe")
    tg.flood(7, methods="sendMessage", times=1)
    response = httpx.post(tg.url("sendMessage"), json={"chat_id": CHAT, "text": "x"})
    assert response.status_code == 429 and response.headers["Retry-After"] == "7"
    assert response.json() == {
        "ok": False,
        "error_code": 429,
        "description": "Too Many Requests: retry after 7",
        "parameters": {"retry_after": 7},
    }
    tg.fail(502, body=b"<html><body>502 Bad Gateway</body></html>", times=1)
    assert httpx.get(tg.url("getMe")).text.startswith("<html>")
    assert [r.status for r in tg.requests] == [500, 500, 200, 429, 502]


def test_invalid_json_huge_and_endless_bodies(tg):
    tg.invalid_json(times=1)
    response = httpx.get(tg.url("getMe"))
    assert response.status_code == 200
    with pytest.raises(ValueError):
        response.json()

    tg.huge_body(64 << 20, times=1)
    with httpx.stream("GET", tg.url("getUpdates")) as response:
        assert int(response.headers["Content-Length"]) == 64 << 20
    tg.huge_body(3 << 20, declare=False, times=1)
    body = httpx.get(tg.url("getUpdates"), timeout=10).json()
    assert body["ok"] and len(body["pad"]) > 3_000_000

    tg.endless_body(methods="getUpdates", times=1)
    read = 0
    with httpx.stream("GET", tg.url("getUpdates"), timeout=10) as response:
        assert "Content-Length" not in response.headers
        for chunk in response.iter_raw():
            read += len(chunk)
            if read > 4 << 20:
                break
    assert read > 4 << 20
    assert ok(tg, "getMe")  # the server goes on serving


def test_a_trickle_outlasts_a_read_timeout_until_cleared(tg):
    tg.trickle(0.2, methods="sendMessage")
    read = b""
    began = time.monotonic()
    timeout = httpx.Timeout(5.0, read=0.5)  # each byte comes well within the read timeout
    with httpx.stream("POST", tg.url("sendMessage"), json={}, timeout=timeout) as response:
        assert response.status_code == 200
        chunks = response.iter_raw(1)
        while time.monotonic() - began < 1.5:
            read += next(chunks)
        thread, box = in_thread(lambda: b"".join(chunks))
        tg.clear_faults()
        thread.join(5)
    assert read.strip() == b"" and len(read) >= 4
    assert isinstance(box.get("error"), httpx.RemoteProtocolError), box  # cut short, never done
    assert tg.sent_messages() == []


def test_stop_ends_a_held_long_poll(tg):
    thread, box = in_thread(call, tg, "getUpdates", timeout=30)
    until_sync(lambda: tg.polling, 5)
    tg.stop()
    thread.join(5)
    assert not thread.is_alive() and box["seconds"] < 5
