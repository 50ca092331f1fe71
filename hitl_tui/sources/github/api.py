"""A polite GitHub REST client over httpx: the token, conditional requests, rate limits, backoff.

Everything that comes back is untrusted text. The token lives in a `Secret` whose repr and str
are masked, goes only into the Authorization header of requests to the configured API origin
(never to another host a Link header names), and never into a message: every error here is
built from the status code or the exception type, not from httpx's own text (which can carry
URLs and headers), and any text that is still passed on is scrubbed of the token.

No Textual here: the CLI and the app's worker share this client.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import random
import re
import ssl
import subprocess
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote, unquote, urljoin, urlsplit

import httpx

from hitl_tui import __version__
from hitl_tui.model import HitlError, UsageError
from hitl_tui.net import MAX_BODY, BodyTooLarge, read_capped

DEFAULT_API = "https://api.github.com"

#: The longest a hostile or confused server can make us wait for a rate-limit reset.
MAX_RATE_WAIT = timedelta(hours=6)
#: Pagination stops after this many pages (a Link header that loops, or a huge org).
MAX_PAGES = 200
#: ETag cache entries kept per client (one per URL, least recently used dropped first).
CACHE_SIZE = 4096
#: How much of an error response is read (only to see whether it mentions a rate limit).
ERROR_BODY = 64 * 1024


_TOKEN_CHARS = re.compile(r"[\x21-\x7e]{1,1000}")


class Secret:
    """A token that never shows itself: repr, str and format print a mask."""

    __slots__ = ("_value",)

    def __init__(self, value: str, origin: str = "the GitHub token") -> None:
        # Checked here, so that no HTTP library ever echoes a malformed header value back.
        if not _TOKEN_CHARS.fullmatch(value):
            raise UsageError(f"{origin} is not a token (empty, or spaces, control or non-ASCII)")
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __bool__(self) -> bool:
        return bool(self._value)


def resolve_token(
    api_url: str = DEFAULT_API, env: Mapping[str, str] | None = None
) -> Secret | None:
    """`GITHUB_TOKEN`, else `GH_TOKEN`, else `gh auth token` (a missing gh is fine)."""
    names: Mapping[str, str] = os.environ if env is None else env
    for name in ("GITHUB_TOKEN", "GH_TOKEN"):
        value = (names.get(name) or "").strip()
        if value:
            return Secret(value, f"${name}")
    host = urlsplit(api_url).hostname or "github.com"
    command = ["gh", "auth", "token"]
    if host not in ("api.github.com", "github.com"):
        command += ["--hostname", host]
    try:
        out = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=3,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    value = out.stdout.strip() if out.returncode == 0 else ""
    if not _TOKEN_CHARS.fullmatch(value):
        return None
    return Secret(value)


def scrub(text: str, token: Secret | None) -> str:
    """Text with the token (if any) masked, also URL-encoded (either hex case) or decoded from
    a URL the text quotes; used on anything that did not come from us."""
    if not token or not token.reveal():
        return text
    value = token.reveal()
    encoded = quote(value, safe="")
    for form in sorted({value, encoded, encoded.lower(), quote(value)}, key=len, reverse=True):
        text = text.replace(form, "***")
    text = re.sub(re.escape(encoded), "***", text, flags=re.IGNORECASE)
    if value in unquote(text):  # encoded some other way (%67hp_...): show the decoded text
        text = unquote(text).replace(value, "***")
    return text


# -- errors ------------------------------------------------------------------------------------


class GithubError(HitlError):
    """A request failed. `state` is what the app shows for the source."""

    state = "error"


class Unauthorised(GithubError):
    state = "unauthorised"


class RateLimited(GithubError):
    state = "rate-limited"

    def __init__(self, until: datetime) -> None:
        self.until = until
        super().__init__(f"rate-limited until {until.astimezone().strftime('%H:%M')}")


class Unreachable(GithubError):
    state = "unreachable"


class NotFound(GithubError):
    state = "error"


class TooManyRequests(GithubError):
    """A poll spent its request budget (endless pagination, or a source bigger than allowed)."""

    state = "error"


# -- the request budget of one poll --------------------------------------------------------------


@dataclass
class RequestBudget:
    """At most `limit` requests (every retry counts) for one poll of one source."""

    limit: int
    used: int = 0

    def spend(self) -> None:
        if self.used >= self.limit:
            raise TooManyRequests(
                f"gave up after {self.limit} requests in one poll (poll_max_requests)"
            )
        self.used += 1


#: The budget of the poll this task belongs to; tasks it starts share it (contexts copy it).
_BUDGET: ContextVar[RequestBudget | None] = ContextVar("hitl_github_budget", default=None)


@contextlib.contextmanager
def request_budget(limit: int) -> Iterator[RequestBudget]:
    """Count every request made inside (also by tasks started inside) against `limit`."""
    budget = RequestBudget(limit)
    reset = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(reset)


# -- the client --------------------------------------------------------------------------------


@dataclass
class Response:
    status: int
    data: Any
    headers: httpx.Headers
    #: True when a 304 let us reuse the cached body.
    cached: bool = False
    #: The Link header of the body (the cached one after a 304, which may omit it).
    link: str | None = None


@dataclass
class _Cached:
    etag: str
    data: Any
    link: str | None


Sleep = Callable[[float], Awaitable[None]]


class GithubClient:
    """One API origin, one token, one ETag cache; safe to reuse across polls."""

    def __init__(
        self,
        api_url: str,
        token: Secret | None,
        *,
        timeout: float = 10.0,
        retries: int = 2,
        backoff: float = 1.0,
        backoff_cap: float = 30.0,
        sleep: Sleep | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        #: Seconds one request may take in all (connect, headers, body), not per read.
        self.timeout = timeout
        self._origin = _origin(self.api_url)
        self._token = token
        self.retries = retries
        self.backoff = backoff
        self.backoff_cap = backoff_cap
        self._sleep: Sleep = sleep or asyncio.sleep
        self._cache: OrderedDict[str, _Cached] = OrderedDict()
        #: Set when the server said the budget is spent; requests fail fast until then.
        self.limited_until: datetime | None = None
        headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": f"hitl/{__version__}",
        }
        if token:
            headers["Authorization"] = f"Bearer {token.reveal()}"
        self._http = httpx.AsyncClient(
            headers=headers,
            verify=_ssl_context(),
            timeout=httpx.Timeout(timeout),
            follow_redirects=False,
            transport=transport,
        )

    def __repr__(self) -> str:
        return f"GithubClient({self.api_url!r})"

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> GithubClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def url(self, path: str) -> str:
        return self.api_url + path

    # -- requests --------------------------------------------------------------------------

    async def get(self, path_or_url: str) -> Response:
        """A conditional GET: a 304 returns the cached body (and costs no rate limit)."""
        return await self._request("GET", path_or_url, conditional=True)

    async def get_all(self, path_or_url: str) -> tuple[list[Any], bool]:
        """Every page of a list endpoint (Link rel="next"); (items, all pages came from cache)."""
        url: str | None = self._absolute(path_or_url)
        items: list[Any] = []
        seen: set[str] = set()
        all_cached = True
        while url and url not in seen and len(seen) < MAX_PAGES:
            seen.add(url)
            resp = await self._request("GET", url, conditional=True)
            all_cached = all_cached and resp.cached
            if not isinstance(resp.data, list):
                raise GithubError(f"{self._host()}: expected a list, got something else")
            items.extend(resp.data)
            url = self._next_link(resp.link)
        return items, all_cached

    async def post(self, path: str, body: dict[str, Any]) -> Response:
        # Never retried: a POST that timed out may have landed; the caller checks and retries.
        return await self._request("POST", path, body=body, retry=False)

    async def delete(self, path: str) -> Response:
        return await self._request("DELETE", path)

    def _absolute(self, path_or_url: str) -> str:
        if path_or_url.startswith(("http://", "https://")):
            return path_or_url
        return self.api_url + path_or_url

    def _next_link(self, header: str | None) -> str | None:
        """The rel="next" URL, only if it stays on our API origin (the token goes with it)."""
        if not header:
            return None
        for part in header.split(","):
            segments = part.split(";")
            target = segments[0].strip()
            if not (target.startswith("<") and target.endswith(">")):
                continue
            rels = {s.strip().replace('"', "").lower() for s in segments[1:]}
            if "rel=next" in rels:
                url = urljoin(self.api_url + "/", target[1:-1])
                return url if _origin(url) == self._origin else None
        return None

    async def _request(
        self,
        method: str,
        path_or_url: str,
        *,
        body: dict[str, Any] | None = None,
        conditional: bool = False,
        retry: bool = True,
    ) -> Response:
        url = self._absolute(path_or_url)
        if _origin(url) != self._origin:
            raise GithubError("refused a request outside the configured API URL")
        attempt = 0
        while True:
            self._check_budget()
            headers: dict[str, str] = {}
            cached = self._cache.get(url) if conditional else None
            if cached is not None:
                headers["If-None-Match"] = cached.etag
            error: GithubError
            retry_after: float | None = None
            budget = _BUDGET.get()
            if budget is not None:
                budget.spend()
            try:
                status, resp_headers, content = await self._send(method, url, body, headers)
            except (TimeoutError, httpx.TimeoutException):
                error = Unreachable(f"{self._host()}: no complete answer within {self.timeout:g} s")
            except httpx.TransportError as exc:
                error = Unreachable(f"{self._host()}: cannot connect ({type(exc).__name__})")
            except BodyTooLarge as exc:
                raise GithubError(f"{_shown(url)}: the response is {exc}; not read") from None
            else:
                self._note_budget(status, resp_headers)
                if status == 304 and cached is not None:
                    self._cache.move_to_end(url)
                    return Response(304, cached.data, resp_headers, True, cached.link)
                if 200 <= status < 300:
                    data = _json(status, content)
                    etag = resp_headers.get("etag")
                    if conditional and etag:
                        self._remember(url, _Cached(etag, data, resp_headers.get("link")))
                    link = resp_headers.get("link")
                    return Response(status, data, resp_headers, False, link)
                error = self._status_error(status, resp_headers, content)
                if not isinstance(error, Unreachable):
                    raise error
                retry_after = _retry_after_seconds(resp_headers.get("retry-after"))
            if not retry or attempt >= self.retries:
                raise error
            delay = min(self.backoff_cap, self.backoff * (2**attempt)) * random.uniform(0.5, 1.5)
            if retry_after is not None:
                delay = max(delay, min(retry_after, self.backoff_cap))
            await self._sleep(delay)
            attempt += 1

    async def _send(
        self, method: str, url: str, body: dict[str, Any] | None, headers: dict[str, str]
    ) -> tuple[int, httpx.Headers, bytes]:
        """One exchange within `timeout` seconds in all, its body read up to a cap."""
        async with (
            asyncio.timeout(self.timeout),
            self._http.stream(method, url, json=body, headers=headers) as resp,
        ):
            ok = 200 <= resp.status_code < 300
            content = await read_capped(resp, MAX_BODY if ok else ERROR_BODY, truncate=not ok)
            return resp.status_code, resp.headers, content

    def _remember(self, url: str, entry: _Cached) -> None:
        self._cache[url] = entry
        self._cache.move_to_end(url)
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)

    def _host(self) -> str:
        return urlsplit(self.api_url).netloc or self.api_url

    def _check_budget(self) -> None:
        if self.limited_until is None:
            return
        if datetime.now(UTC) >= self.limited_until:
            self.limited_until = None
            return
        raise RateLimited(self.limited_until)

    def _note_budget(self, status: int, headers: httpx.Headers) -> None:
        """Remember an exhausted budget so the next request waits instead of burning a 403."""
        if status == 304:
            return
        if headers.get("x-ratelimit-remaining", "").strip() == "0":
            until = _reset_time(headers.get("x-ratelimit-reset"))
            if until is not None and 200 <= status < 300:
                self.limited_until = until

    def _status_error(self, status: int, headers: httpx.Headers, content: bytes) -> GithubError:
        if status == 401:
            return Unauthorised(f"{self._host()}: the token was refused (401)")
        if status in (403, 429):
            until = _limit_from(headers)
            if until is None and status == 429:
                until = datetime.now(UTC) + timedelta(seconds=60)
            if until is None and status == 403 and _mentions_rate_limit(content):
                # A secondary rate limit may come without headers: wait at least a minute.
                until = datetime.now(UTC) + timedelta(seconds=60)
            if until is not None:
                self.limited_until = until
                return RateLimited(until)
            return Unauthorised(f"{self._host()}: forbidden (403): the token lacks access")
        if status == 404:
            return NotFound(f"{self._host()}: not found (404), or not visible to the token")
        if status >= 500:
            return Unreachable(f"{self._host()}: server error {status}")
        return GithubError(f"{self._host()}: unexpected response {status}")


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One TLS context per process (loading the CA bundle takes ~0.1 s); honours SSL_CERT_FILE."""
    return httpx.create_ssl_context(trust_env=True)


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return (parts.scheme.lower(), parts.netloc.lower())


def _shown(url: str) -> str:
    """A URL for a message: at most 200 characters (a Link header can be any length)."""
    return url if len(url) <= 200 else url[:199] + "…"


def _json(status: int, content: bytes) -> Any:
    if not content:
        return None
    try:
        return json.loads(content)
    except (ValueError, UnicodeDecodeError):
        raise GithubError(f"response {status} is not valid JSON") from None


def _mentions_rate_limit(content: bytes) -> bool:
    try:
        data = json.loads(content[:10000]) if content else None
    except (ValueError, UnicodeDecodeError):
        return False
    message = data.get("message") if isinstance(data, dict) else None
    return isinstance(message, str) and "rate limit" in message.lower()


def _retry_after_seconds(value: str | None) -> float | None:
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _reset_time(value: str | None) -> datetime | None:
    if not value or not value.strip().isdigit():
        return None
    try:
        when = datetime.fromtimestamp(int(value.strip()), UTC)
    except (OverflowError, OSError, ValueError):
        return None
    now = datetime.now(UTC)
    return min(max(when, now), now + MAX_RATE_WAIT)


def _limit_from(headers: httpx.Headers) -> datetime | None:
    """When a 403/429 says we may try again: Retry-After, else an exhausted X-RateLimit."""
    seconds = _retry_after_seconds(headers.get("retry-after"))
    now = datetime.now(UTC)
    if seconds is not None:
        return now + min(timedelta(seconds=seconds), MAX_RATE_WAIT)
    if headers.get("x-ratelimit-remaining", "").strip() == "0":
        return _reset_time(headers.get("x-ratelimit-reset")) or now + timedelta(seconds=60)
    return None
