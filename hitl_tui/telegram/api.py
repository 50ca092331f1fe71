"""The Bot API client: one bounded exchange per call (`net.run_bounded`, capped bodies).

Every failure is an `ApiError` whose text is scrubbed of the token and the api URL; a 429's
`retry_after` is kept (bounded by MAX_RETRY_AFTER) for the caller to wait. Long polling:
`get_updates` asks the server to hold the request up to `timeout` s, and gives the whole
exchange that long plus POLL_SLACK before it is a failure.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from hitl_tui import net
from hitl_tui.telegram.settings import scrub

#: The most of a response read: getUpdates' 100 updates are far below it.
MAX_BODY = 2 * 1024 * 1024
#: Seconds an ordinary call may take in all.
CALL_TIMEOUT = 10.0
#: Seconds getUpdates may take past its own long-polling timeout.
POLL_SLACK = 10.0
#: The longest a 429's retry_after is honoured (a server asking for an hour is not obeyed).
MAX_RETRY_AFTER = 60.0
#: Telegram's bounds, in UTF-16 code units (as it counts): a message, a callback's answer.
MAX_TEXT = 4096
MAX_ANSWER = 200
#: What getUpdates asks for: nothing else reaches the bot.
ALLOWED_UPDATES = ("message", "callback_query")


def fit(text: str, units: int) -> str:
    """`text` cut to `units` UTF-16 code units (an emoji counts two), with "…" when cut."""
    if len(text) * 2 <= units or len(text.encode("utf-16-le")) // 2 <= units:
        return text
    out: list[str] = []
    used = 0
    for char in text:
        size = 2 if ord(char) > 0xFFFF else 1
        if used + size > units - 1:
            break
        out.append(char)
        used += size
    return "".join(out) + "…"


class ApiError(Exception):
    """A call failed; the text is free of secrets. `retry_after`: a 429's wait, bounded."""

    def __init__(self, text: str, retry_after: float | None = None, code: int | None = None):
        super().__init__(text)
        self.retry_after = retry_after
        self.code = code


class BotApi:
    """Calls to one bot (its token) on one Bot API server."""

    def __init__(self, api: str, token: str, secrets: Sequence[str] = ()) -> None:
        self._base = f"{api.rstrip('/')}/bot{quote(token, safe=':')}"
        self._secrets = [token, api, *secrets]

    def __repr__(self) -> str:  # never the token
        return "BotApi(***)"

    def scrub(self, text: str) -> str:
        return scrub(text, self._secrets)

    def call(self, method: str, params: dict[str, Any], timeout: float | None = None) -> Any:
        """The `result` of `method` within `timeout` s in all (CALL_TIMEOUT); ApiError
        otherwise (a timeout, a refusal, a bad body)."""
        import httpx

        timeout = CALL_TIMEOUT if timeout is None else timeout
        url = f"{self._base}/{method}"

        async def post() -> tuple[int, bytes]:
            async with (
                httpx.AsyncClient(timeout=timeout) as client,
                client.stream("POST", url, json=params) as response,
            ):
                body = await net.read_capped(response, MAX_BODY)
                return response.status_code, body

        try:
            status, body = net.run_bounded(post, timeout)
        except (TimeoutError, httpx.TimeoutException):
            raise ApiError(f"{method}: no answer within {timeout:g} s") from None
        except net.BodyTooLarge as exc:
            raise ApiError(f"{method}: an answer {exc}") from None
        except httpx.ConnectError as exc:
            raise ApiError(self.scrub(f"{method}: could not connect ({exc})")) from None
        except (httpx.InvalidURL, httpx.UnsupportedProtocol, ValueError):
            raise ApiError(f"{method}: not a valid http(s) URL in [telegram] api") from None
        except httpx.HTTPError as exc:
            raise ApiError(f"{method}: {type(exc).__name__}") from None
        return self._result(method, status, body)

    def _result(self, method: str, status: int, body: bytes) -> Any:
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            data = None
        if not isinstance(data, dict):
            raise ApiError(f"{method}: HTTP {status}, not a Bot API answer", code=status)
        if data.get("ok") is True and "result" in data:
            return data["result"]
        code = data.get("error_code")
        code = code if isinstance(code, int) and not isinstance(code, bool) else status
        description = data.get("description")
        said = str(description)[:200] if isinstance(description, str) else ""
        retry = None
        params = data.get("parameters")
        if isinstance(params, dict):
            wait = params.get("retry_after")
            if isinstance(wait, int | float) and not isinstance(wait, bool) and wait >= 0:
                retry = min(float(wait), MAX_RETRY_AFTER)
        if code == 429 and retry is None:
            retry = 5.0
        text = self.scrub(f"{method}: error {code} {said}".strip())
        raise ApiError(text, retry, code)

    # -- the methods hitl uses ------------------------------------------------------------------

    def get_updates(self, offset: int | None, timeout: int) -> list[dict[str, Any]]:
        """Long polling: the updates after `offset`, waiting up to `timeout` s for one."""
        params: dict[str, Any] = {"timeout": timeout, "allowed_updates": list(ALLOWED_UPDATES)}
        if offset is not None:
            params["offset"] = offset
        result = self.call("getUpdates", params, timeout + POLL_SLACK)
        if not isinstance(result, list):
            raise ApiError("getUpdates: not a list of updates")
        return [u for u in result if isinstance(u, dict)]

    def send_message(
        self,
        chat_id: int,
        text: str,
        buttons: list[list[dict[str, str]]] | None = None,
        reply_to: int | None = None,
    ) -> int:
        """Send plain `text` (no parse_mode: shown as typed); the new message's id."""
        params: dict[str, Any] = {"chat_id": chat_id, "text": fit(text, MAX_TEXT)}
        if buttons:
            params["reply_markup"] = {"inline_keyboard": buttons}
        if reply_to is not None:
            params["reply_parameters"] = {
                "message_id": reply_to,
                "allow_sending_without_reply": True,
            }
        result = self.call("sendMessage", params)
        message_id = result.get("message_id") if isinstance(result, dict) else None
        if not isinstance(message_id, int) or isinstance(message_id, bool):
            raise ApiError("sendMessage: no message_id in the answer")
        return message_id

    def edit_message(
        self,
        chat_id: int,
        message_id: int,
        text: str,
        buttons: list[list[dict[str, str]]] | None = None,
    ) -> None:
        """Replace a message's text (plain) and its buttons (none: removed)."""
        params: dict[str, Any] = {
            "chat_id": chat_id,
            "message_id": message_id,
            "text": fit(text, MAX_TEXT),
            "reply_markup": {"inline_keyboard": buttons or []},
        }
        try:
            self.call("editMessageText", params)
        except ApiError as exc:
            if "message is not modified" not in str(exc):
                raise

    def answer_callback(self, callback_id: str, text: str) -> None:
        """Stop the button's spinner, saying `text` (at most 200 characters)."""
        answer = {"callback_query_id": callback_id, "text": fit(text, MAX_ANSWER)}
        self.call("answerCallbackQuery", answer)
