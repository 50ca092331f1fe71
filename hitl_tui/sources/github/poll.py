"""The GitHub poller: read the configured sources on their own schedules, for the app and `list`.

For the app (an async worker; nothing here imports Textual):

    async with GithubPoller(config.github, resolve_token) as poller:   # a token per API host
        await watch_github(poller, inbox, on_update, stop_event)

which amounts to:

    while True:
        for result in await poller.poll_once():
            if result.blocks is not None:
                delta = inbox.replace_remote("github", result.scope, result.blocks)
            show(result.scope, result.state, result.message)   # per-source status
        await asyncio.sleep(poller.next_delay())

`result.blocks` is None when the source could not be read this time: keep what it showed
before, and show its state (rate-limited until HH:MM, unreachable, unauthorised). Sending an
answer is `github_send`; the synchronous entry points of the CLI are `github_sync`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from hitl_tui.model import Block, HitlError, UsageError
from hitl_tui.sources.base import RemoteInbox
from hitl_tui.sources.github import issues as gh
from hitl_tui.sources.github.api import (
    GithubClient,
    GithubError,
    NotFound,
    RateLimited,
    Secret,
    Unauthorised,
    Unreachable,
    request_budget,
)
from hitl_tui.sources.github.issues import GithubSource

#: The longest the poller waits between tries of a failing source.
MAX_BACKOFF = 15 * 60.0

T = TypeVar("T")


@dataclass(frozen=True)
class SourceResult:
    """One source after one poll: its blocks (None: not read this time) and its state."""

    scope: str
    blocks: list[Block] | None
    #: "ok", "rate-limited", "unreachable", "unauthorised" or "error".
    state: str
    #: One line for the app and the CLI ("rate-limited until 14:05"); never holds the token.
    message: str
    until: datetime | None = None


def as_secret(token: Secret | str | None) -> Secret | None:
    if isinstance(token, str):
        return Secret(token) if token else None
    return token


class GithubPoller:
    """Polls every configured source on its own schedule; one failing source never hides others.

    Keeps one client (and ETag cache) per API URL, so repeated polls mostly cost 304s, and
    re-reads an issue's comments only when the issue's `updated_at` or comment count moved.
    """

    def __init__(
        self,
        sources: Sequence[GithubSource] | Sequence[dict[str, Any]],
        token: Secret | str | Callable[[str], Secret | None] | None,
        *,
        timeout: float = 10.0,
        retries: int = 2,
        backoff: float = 1.0,
        max_backoff: float = MAX_BACKOFF,
        concurrency: int = 4,
        sleep: Callable[[float], Awaitable[None]] | None = None,
    ) -> None:
        if sources and isinstance(sources[0], dict):
            sources = gh.parse_config(list(sources))
        self.sources: list[GithubSource] = list(sources)  # type: ignore[arg-type]
        #: A token for every API URL, or a function that finds one (`resolve_token`).
        self._token_source = token
        self._tokens: dict[str, Secret | None] = {}
        self._timeout, self._retries, self._backoff, self._sleep = timeout, retries, backoff, sleep
        self._max_backoff = max_backoff
        self._clients: dict[str, GithubClient] = {}
        self._logins: dict[str, str] = {}
        self._due: dict[str, float] = {}
        self._failures: dict[str, int] = {}
        self._comments: dict[tuple[str, str, int], tuple[Any, Any, list[Any]]] = {}
        self._concurrency = concurrency
        self._wake_event: asyncio.Event | None = None
        #: The latest result of each source, by scope (what the app shows).
        self.results: dict[str, SourceResult] = {}

    def __repr__(self) -> str:
        return f"GithubPoller({[s.scope for s in self.sources]!r})"

    def prepare(self) -> None:
        """Find every host's token now (`gh auth token` blocks: call this in a thread)."""
        for src in self.sources:
            try:
                self.token(src.api_url)
            except HitlError:
                pass  # reported as the source's state by its poll

    def refresh_soon(self, scope: str | None = None) -> None:
        """Make a source (or all) due now, and wake `watch_github` (after an answer, say)."""
        for src in self.sources:
            if scope is None or src.scope == scope:
                self._due[src.scope] = 0.0
        self._wake().set()

    def _wake(self) -> asyncio.Event:
        if self._wake_event is None:
            self._wake_event = asyncio.Event()
        return self._wake_event

    def token(self, api_url: str) -> Secret | None:
        if api_url not in self._tokens:
            source = self._token_source
            self._tokens[api_url] = source(api_url) if callable(source) else as_secret(source)
        return self._tokens[api_url]

    def client(self, api_url: str) -> GithubClient:
        if api_url not in self._clients:
            token = self.token(api_url)
            self._clients[api_url] = GithubClient(
                api_url,
                token,
                timeout=self._timeout,
                retries=self._retries,
                backoff=self._backoff,
                sleep=self._sleep,
            )
        return self._clients[api_url]

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()

    async def __aenter__(self) -> GithubPoller:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- scheduling ------------------------------------------------------------------------

    def next_delay(self) -> float:
        """Seconds until the next source is due (0 when one already is)."""
        if not self.sources:
            return 3600.0
        now = time.monotonic()
        return max(0.0, min(self._due.get(s.scope, 0.0) for s in self.sources) - now)

    async def poll_once(
        self, force: bool = False, scopes: Sequence[str] | None = None
    ) -> list[SourceResult]:
        """Poll every source that is due (all of them with `force`); never raises.

        `scopes` limits the poll to those sources, due or not (after answering one of their
        blocks, say: with ETags a re-read costs little).
        """
        now = time.monotonic()
        if scopes is not None:
            due = [s for s in self.sources if s.scope in scopes]
        else:
            due = [s for s in self.sources if force or self._due.get(s.scope, 0.0) <= now]
        results = await asyncio.gather(*(self._poll_source(s) for s in due))
        for src, result in zip(due, results, strict=True):
            self._schedule(src, result)
            self.results[src.scope] = result
        return list(results)

    def _schedule(self, src: GithubSource, result: SourceResult) -> None:
        now = time.monotonic()
        if result.state == "ok":
            self._failures[src.scope] = 0
            self._due[src.scope] = now + src.poll_seconds
            return
        failures = self._failures.get(src.scope, 0) + 1
        self._failures[src.scope] = failures
        delay = min(self._max_backoff, src.poll_seconds * 2 ** min(failures, 16))
        delay *= random.uniform(0.8, 1.2)
        if result.until is not None:
            wait = (result.until - datetime.now(UTC)).total_seconds()
            delay = max(wait + 1.0, src.poll_seconds)
        self._due[src.scope] = now + delay

    # -- reading ---------------------------------------------------------------------------

    async def _poll_source(self, src: GithubSource) -> SourceResult:
        skipped: list[str] = []
        try:
            async with bounded(src):
                blocks = await self._read_source(src, skipped)
        except RateLimited as exc:
            return SourceResult(src.scope, None, exc.state, str(exc), exc.until)
        except GithubError as exc:
            token = self._tokens.get(src.api_url)
            return SourceResult(src.scope, None, exc.state, gh_message(exc, token))
        except UsageError as exc:  # a malformed token in the environment
            return SourceResult(src.scope, None, "unauthorised", str(exc))
        except Exception as exc:  # hostile or malformed data must not stop the other sources
            message = f"unexpected {type(exc).__name__} while reading {src.scope}"
            return SourceResult(src.scope, None, "error", message)
        message = f"{len(blocks)} open block" + ("" if len(blocks) == 1 else "s")
        if skipped:
            message += f"; skipped {len(skipped)} repo(s): {skipped[0]}"
        return SourceResult(src.scope, blocks, "ok", message)

    async def _read_source(self, src: GithubSource, skipped: list[str]) -> list[Block]:
        client = self.client(src.api_url)
        login = await self.loop_account(src)
        if src.repo:
            repos = [src.repo]
        else:
            repos = await self._org_repos(client, src.org or "")
        blocks: list[Block] = []
        for full_name in repos:
            try:
                blocks.extend(await self._repo_blocks(client, src, full_name, login))
            except (NotFound, Unauthorised) as exc:
                if src.repo:
                    raise
                skipped.append(f"{full_name}: {exc}")
        return blocks

    async def loop_account(self, src: GithubSource) -> str:
        """The configured loop account, else the token's login (`GET /user`, asked once)."""
        if src.loop_account:
            return src.loop_account
        if src.api_url in self._logins:
            return self._logins[src.api_url]
        if not self.token(src.api_url):
            raise Unauthorised(
                "no token: set GITHUB_TOKEN or GH_TOKEN, run 'gh auth login', "
                "or configure loop_account"
            )
        data = (await self.client(src.api_url).get("/user")).data
        login = data.get("login") if isinstance(data, dict) else None
        if not isinstance(login, str) or not login:
            raise GithubError("GET /user returned no login")
        self._logins[src.api_url] = login
        return login

    async def _org_repos(self, client: GithubClient, org: str) -> list[str]:
        items, _ = await client.get_all(f"/orgs/{org}/repos?per_page=100")
        names = []
        for item in items:
            if (
                not isinstance(item, dict)
                or item.get("archived")
                or item.get("has_issues") is False
            ):
                continue
            name = item.get("full_name")
            if isinstance(name, str) and gh.valid_repo(name):
                names.append(name)
        return names

    async def _repo_blocks(
        self, client: GithubClient, src: GithubSource, full_name: str, login: str
    ) -> list[Block]:
        issues, _ = await client.get_all(f"/repos/{full_name}/issues?state=open&per_page=100")
        candidates = []
        for issue in issues:
            number = gh.issue_number(issue)
            if number is None or gh.is_pull_request(issue):
                continue
            labelled = gh.has_label(gh.label_names(issue), src.labels.blocked)
            count = issue.get("comments")
            if not labelled and isinstance(count, int) and count == 0:
                continue  # no label and no comment: it cannot be needs_context
            candidates.append((issue, number))

        async def one(issue: dict[str, Any], number: int) -> Block | None:
            comments = await self._issue_comments(client, full_name, issue, number)
            return gh.build_block(src, full_name, issue, comments, login)

        found = await self._gather([functools.partial(one, i, n) for i, n in candidates])
        # Forget the comments of issues that closed or lost their chance of being a block.
        keep = {(client.api_url, full_name.casefold(), n) for _, n in candidates}
        for key in [k for k in self._comments if k[:2] == (client.api_url, full_name.casefold())]:
            if key not in keep:
                del self._comments[key]
        return [b for b in found if b is not None]

    async def _gather(self, calls: list[Callable[[], Awaitable[T]]]) -> list[T]:
        """Run `calls` at most `concurrency` at a time; the first failure cancels the rest, so
        that no request of a poll that gave up goes on in the background."""
        if self._concurrency <= 0:
            return [await call() for call in calls]
        limit = asyncio.Semaphore(self._concurrency)

        async def bounded(call: Callable[[], Awaitable[T]]) -> T:
            async with limit:
                return await call()

        tasks = [asyncio.ensure_future(bounded(call)) for call in calls]
        try:
            return list(await asyncio.gather(*tasks))
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _issue_comments(
        self, client: GithubClient, full_name: str, issue: dict[str, Any], number: int
    ) -> list[Any]:
        key = (client.api_url, full_name.casefold(), number)
        stamp = (issue.get("updated_at"), issue.get("comments"))
        cached = self._comments.get(key)
        if cached is not None and (cached[0], cached[1]) == stamp and stamp[0] is not None:
            return cached[2]
        comments, _ = await client.get_all(
            f"/repos/{full_name}/issues/{number}/comments?per_page=100"
        )
        self._comments[key] = (stamp[0], stamp[1], comments)
        return comments

    async def read_issue(self, src: GithubSource, full_name: str, number: int) -> Block | None:
        """One issue, read now (for an answer): its block, or None if it holds none."""
        client = self.client(src.api_url)
        async with bounded(src):
            login = await self.loop_account(src)
            issue, comments = await fetch_issue(client, full_name, number)
        return gh.build_block(src, full_name, issue, comments, login)


@contextlib.asynccontextmanager
async def bounded(src: GithubSource) -> AsyncIterator[None]:
    """One poll (or re-read) of `src`: at most `poll_timeout_seconds` in all and
    `poll_max_requests` requests, whatever the server does (a byte every 0.3 s resets a
    per-read timeout for ever; comment pages nest in issue pages). Raises Unreachable at the
    deadline, TooManyRequests past the budget."""
    seconds = src.poll_timeout_seconds
    deadline = asyncio.timeout(seconds)
    try:
        async with deadline:
            with request_budget(src.poll_max_requests):
                yield
    except TimeoutError:
        if not deadline.expired():
            raise
        raise Unreachable(f"no complete answer within {seconds:g} s") from None


async def watch_github(
    poller: GithubPoller,
    inbox: RemoteInbox,
    on_update: Callable[[SourceResult, object], Awaitable[None]],
    stop: asyncio.Event,
) -> None:
    """Poll until `stop` is set, like `watch.watch_inbox` for files (run it in an async worker).

    After each source's poll its blocks are swapped into `inbox` and `on_update(result, delta)`
    is awaited; `delta` is None when the source could not be read (its blocks stay as they
    were; `result.state` and `result.message` say why).
    """
    await asyncio.to_thread(poller.prepare)
    wake = poller._wake()
    while not stop.is_set():
        wake.clear()
        for result in await poller.poll_once():
            delta = None
            if result.blocks is not None:
                delta = inbox.replace_remote(gh.SOURCE, result.scope, result.blocks)
            await on_update(result, delta)
        waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(wake.wait())]
        try:
            await asyncio.wait(
                waiters, timeout=max(poller.next_delay(), 0.05), return_when="FIRST_COMPLETED"
            )
        finally:
            for waiter in waiters:
                waiter.cancel()


async def fetch_issue(
    client: GithubClient, full_name: str, number: int
) -> tuple[dict[str, Any], list[Any]]:
    issue = (await client.get(f"/repos/{full_name}/issues/{number}")).data
    if not isinstance(issue, dict):
        raise GithubError(f"{full_name}#{number}: the API returned no issue")
    comments, _ = await client.get_all(f"/repos/{full_name}/issues/{number}/comments?per_page=100")
    return issue, comments


def gh_message(exc: GithubError, token: Secret | None) -> str:
    from hitl_tui.sources.github.api import scrub

    return scrub(" ".join(str(exc).split()), token)
