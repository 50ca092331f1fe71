"""The network half of the GitHub source: poll the configured sources, answer one issue.

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
before, and show its state (rate-limited until HH:MM, unreachable, unauthorised). To answer:
`answering.plan_answer` then `answering.apply_answer` (or `await apply_remote(plan)`).

`GithubBackend` is this backend behind the one interface of `sources.base.Source`: the
registry builds it from the `[[github]]` tables, and the CLI, the app, answering and the
journal only ever ask it (`read_into`, `watch`, `owns`/`read`, `plan`, `send`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import os
import random
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from hitl_tui.github_api import (
    GithubClient,
    GithubError,
    NotFound,
    RateLimited,
    Secret,
    Unauthorised,
    Unreachable,
    request_budget,
    resolve_token,
)
from hitl_tui.model import Block, HitlError, Plan, StaleError, UsageError
from hitl_tui.sources import github as gh
from hitl_tui.sources.base import OnUpdate, Source
from hitl_tui.sources.github import GithubSource

ISSUE_REF = re.compile(r"^([A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+)#(\d{1,9})$")

#: A command waits less than the app for a source that does not answer.
CLI_OPTIONS = {"timeout": 5.0, "retries": 1}

#: The longest the poller waits between tries of a failing source.
MAX_BACKOFF = 15 * 60.0

T = TypeVar("T")


class PartialAnswer(HitlError):
    """Some requests of an answer were sent and a later one failed; the message says which."""

    exit_code = 1


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


def _token(token: Secret | str | None) -> Secret | None:
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
        sources: Sequence[GithubSource] | Sequence[dict],
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
        self._options = {"timeout": timeout, "retries": retries, "backoff": backoff, "sleep": sleep}
        self._max_backoff = max_backoff
        self._clients: dict[str, GithubClient] = {}
        self._logins: dict[str, str] = {}
        self._due: dict[str, float] = {}
        self._failures: dict[str, int] = {}
        self._comments: dict[tuple[str, str, int], tuple[Any, Any, list]] = {}
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
            self._tokens[api_url] = source(api_url) if callable(source) else _token(source)
        return self._tokens[api_url]

    def client(self, api_url: str) -> GithubClient:
        if api_url not in self._clients:
            token = self.token(api_url)
            self._clients[api_url] = GithubClient(api_url, token, **self._options)
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

        async def one(issue: dict, number: int) -> Block | None:
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
        self, client: GithubClient, full_name: str, issue: dict, number: int
    ) -> list:
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
            issue, comments = await _fetch_issue(client, full_name, number)
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
    inbox: Any,
    on_update: Callable[[SourceResult, Any], Awaitable[None]],
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


async def _fetch_issue(client: GithubClient, full_name: str, number: int) -> tuple[dict, list]:
    issue = (await client.get(f"/repos/{full_name}/issues/{number}")).data
    if not isinstance(issue, dict):
        raise GithubError(f"{full_name}#{number}: the API returned no issue")
    comments, _ = await client.get_all(f"/repos/{full_name}/issues/{number}/comments?per_page=100")
    return issue, comments


def gh_message(exc: GithubError, token: Secret | None) -> str:
    from hitl_tui.github_api import scrub

    return scrub(" ".join(str(exc).split()), token)


# -- answering ------------------------------------------------------------------------------------


def _same_text(a: str, b: str) -> bool:
    def norm(text: str) -> str:
        return "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").strip().split("\n"))

    return norm(a) == norm(b)


async def apply_remote(
    plan: Plan, token: Secret | str | None = None, client: GithubClient | None = None
) -> list[str]:
    """Send a GitHub plan: re-read the issue, refuse if it moved, then comment and relabel.

    Returns one line per thing done. Raises StaleError (nothing sent), PartialAnswer (what was
    sent and what not; applying the same plan again finishes it without posting twice), or
    another GithubError when the first request already fails (nothing sent).
    """
    block = plan.block
    src: GithubSource = block.meta["config"]
    own = client is None
    if client is None:
        secret = _token(token) if token is not None else resolve_token(src.api_url)
        if not secret:
            raise Unauthorised(
                "no GitHub token: set GITHUB_TOKEN or GH_TOKEN, or run 'gh auth login'"
            )
        client = GithubClient(src.api_url, secret)
    try:
        return await _apply(plan, client)
    finally:
        if own:
            await client.aclose()


async def _apply(plan: Plan, client: GithubClient) -> list[str]:
    block = plan.block
    src: GithubSource = block.meta["config"]
    login: str = block.meta["loop_account"]
    full_name = str(block.repo)
    number: int = block.meta["number"]
    try:
        async with bounded(src):
            issue, raw_comments = await _fetch_issue(client, full_name, number)
    except GithubError as exc:
        raise _again(
            exc, f"{block.id}: cannot re-read the issue ({exc}); nothing was sent"
        ) from None
    current = gh.build_block(src, full_name, issue, raw_comments, login)
    comments = [c for c in (gh.Comment.from_json(r) for r in raw_comments) if c is not None]
    marker_id = block.meta.get("marker_id")
    marker = next((c for c in comments if c.id == marker_id), None)
    comment_action = next((a for a in plan.remote if a.kind == "comment"), None)
    posted = None
    if comment_action is not None:
        for comment in comments:
            later = marker is None or (comment.created, comment.id) > (marker.created, marker.id)
            if later and _same_text(comment.body, comment_action.body):
                posted = comment
    if posted is None:
        if current is None:
            raise StaleError(
                f"{block.id}: no longer open (answered, unlabelled or closed meanwhile); "
                "nothing was sent"
            )
        if current.fingerprint != block.fingerprint:
            raise StaleError(f"{block.id}: the block changed since you read it; nothing was sent")
    else:
        # A retry: our comment is there already. Finish only if the loop has not moved on.
        status = gh.newest_status(comments, login)
        if gh.issue_number(issue) is None or issue.get("state") == "closed":
            raise StaleError(f"{block.id}: the issue was closed; nothing more was sent")
        if status is not None and status[0].id != marker_id:
            raise StaleError(
                f"{block.id}: the loop wrote a new marker after your answer; nothing more was sent"
            )
    labels = gh.label_names(issue)
    done: list[str] = []
    for index, action in enumerate(plan.remote):
        path = action.data.get("path", "")
        try:
            if action.kind == "comment":
                if posted is not None:
                    done.append("the comment was already posted")
                    continue
                await client.post(path, {"body": action.body})
                done.append("posted the comment")
            elif action.kind == "remove-label":
                name = action.data["label"]
                if not gh.has_label(labels, name):
                    done.append(f"label {name!r} already removed")
                    continue
                try:
                    await client.delete(path)
                except NotFound:
                    pass  # removed meanwhile: the outcome we wanted
                done.append(f"removed label {name!r}")
            elif action.kind == "add-label":
                name = action.data["label"]
                if gh.has_label(labels, name):
                    done.append(f"label {name!r} already present")
                    continue
                await client.post(path, {"labels": [name]})
                done.append(f"added label {name!r}")
            else:
                raise GithubError(f"unknown action {action.kind!r}")
        except GithubError as exc:
            error = _partial(block, plan, index, done, exc)
            if done:
                _journal(plan, done, f"failed: {action.description}")
            raise error from None
    note = _journal(plan, done, None)
    return [*done, note] if note else done


def _journal(plan: Plan, done: list[str], problem: str | None) -> str | None:
    """Record what was sent in the answer journal (`hitl history`); never fails the answer.

    A GitHub entry has no file steps; `hitl undo` refuses it (a comment cannot be unposted).
    """
    try:
        from hitl_tui import journal
    except ImportError:
        return None
    summary = f"{plan.block.id}: sent to GitHub: {'; '.join(done)}"
    if problem:
        summary += f"; NOT finished ({problem}): answer again to finish"
    try:
        entry = journal.begin(
            dataclasses.replace(plan, summary=summary),
            remote=True,
            not_undoable=_not_undoable(plan.block),
        )
        journal.commit(entry)
    except (OSError, HitlError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return f"(the journal could not record it: {reason})"
    return None


def _not_undoable(block: Block) -> str:
    return (
        f"answered a GitHub issue ({block.id}): hitl cannot undo a posted comment; answer the "
        "issue again or edit it on GitHub"
    )


def _partial(block: Block, plan: Plan, index: int, done: list[str], exc: GithubError) -> HitlError:
    action = plan.remote[index]
    rest = [a.description for a in plan.remote[index + 1 :]]
    reason = " ".join(str(exc).split())
    if not done:
        if action.kind == "comment":
            return _again(
                exc,
                f"{block.id}: could not post the comment ({reason}); nothing else was sent. "
                "If it landed anyway, answering again with the same text finds it and does "
                "not post it twice",
            )
        return _again(exc, f"{block.id}: {action.description} failed ({reason}); nothing was sent")
    text = (
        f"{block.id}: done: {'; '.join(done)}. Failed: {action.description} ({reason})."
        + (f" Not done: {'; '.join(rest)}." if rest else "")
        + " Answer again with the same text to finish (the comment is not posted twice)"
    )
    return PartialAnswer(text)


def _again(exc: GithubError, message: str) -> GithubError:
    """The same kind of failure (its `state`), said with more context."""
    error = GithubError(" ".join(message.split()))
    error.state = exc.state
    return error


def run_sync(factory: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine from sync code, also when called on a thread with a running loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_call(factory))
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(_call(factory))).result()


async def _call(factory: Callable[[], Awaitable[T]]) -> T:
    return await factory()


def apply_sync(plan: Plan, token: Secret | str | None = None) -> list[str]:
    return run_sync(lambda: apply_remote(plan, token))


# -- the backend ----------------------------------------------------------------------------------


class GithubBackend(Source):
    """Every `[[github]]` table of the config, as one backend (see `sources.base.Source`)."""

    name = gh.SOURCE
    title = "GitHub"
    config_key = "github"
    remote = True
    undoable = False

    def __init__(self, entries: Sequence[GithubSource]) -> None:
        self.entries = list(entries)
        self._poller: GithubPoller | None = None
        #: The token that read a block for `hitl answer`, by block id: sent with the same.
        self._secrets: dict[str, Secret | None] = {}

    def __repr__(self) -> str:
        return f"GithubBackend({[e.scope for e in self.entries]!r})"

    @classmethod
    def from_config(cls, tables: list) -> GithubBackend:
        return cls(gh.parse_config(tables))

    def plan(self, block: Block, answer: Any) -> Plan:
        return gh.plan(block, answer)

    def send(self, plan: Plan) -> list[str]:
        return apply_sync(plan, self._secrets.get(plan.block.id))

    def why_not_undoable(self, block: Block) -> str:
        return _not_undoable(block)

    def owns(self, target: str) -> bool:
        """`owner/name#12` (and no such file): an issue, answered over the API."""
        return ISSUE_REF.fullmatch(target) is not None and not os.path.exists(target)

    def read(self, target: str) -> Block:
        block, secret = read_issue_block(self.entries, target)
        self._secrets[block.id] = secret
        return block

    def read_into(self, inbox: Any, warn: Callable[[str], None]) -> None:
        add_to_inbox(self.entries, inbox, warn=warn)

    async def watch(self, inbox: Any, on_update: OnUpdate, stop: asyncio.Event) -> None:
        async def update(result: SourceResult, delta: Any) -> None:
            await on_update(result.scope, result.state, result.message, delta)

        async with GithubPoller(self.entries, resolve_token) as poller:
            self._poller = poller
            try:
                await watch_github(poller, inbox, update, stop)
            finally:
                self._poller = None

    def refresh_soon(self) -> None:
        if self._poller is not None:
            self._poller.refresh_soon()


# -- one read, for a command --------------------------------------------------------------------


def add_to_inbox(
    sources: Sequence[GithubSource],
    inbox: Any,
    token: Secret | str | None = None,
    *,
    warn: Callable[[str], None],
) -> list[SourceResult]:
    """`hitl list`: read every [[github]] source once into `inbox`; one warning per failure."""
    if not sources:
        return []
    secret = _token(token) if token is not None else resolve_token

    async def poll() -> list[SourceResult]:
        async with GithubPoller(sources, secret, **CLI_OPTIONS) as poller:
            return await poller.poll_once(force=True)

    results = run_sync(poll)
    for result in results:
        if result.blocks is None:
            warn(
                f"github {result.scope}: {result.state}: {result.message}; "
                "its blocks are not listed"
            )
            continue
        inbox.replace_remote(gh.SOURCE, result.scope, result.blocks)
    return results


def find_source(sources: Sequence[GithubSource], full_name: str) -> GithubSource:
    for src in sources:
        if src.covers(full_name):
            return src
    raise UsageError(f"{full_name} is not in the [[github]] config (repo or org)")


def read_issue_block(sources: Sequence[GithubSource], target: str) -> tuple[Block, Secret | None]:
    """The open block of `owner/name#12`, read afresh, and the token that read it.

    Raises UsageError for a reference outside the [[github]] config, StaleError when the issue
    holds no open block, GithubError (as a one-line HitlError) when it cannot be read.
    """
    match = ISSUE_REF.match(target)
    if match is None:
        raise UsageError(f"{target!r} is not owner/name#NUMBER")
    full_name, number = match.group(1), int(match.group(2))
    src = find_source(sources, full_name)
    secret = resolve_token(src.api_url)

    async def read() -> Block | None:
        async with GithubPoller([src], secret, **CLI_OPTIONS) as poller:
            return await poller.read_issue(src, full_name, number)

    try:
        block = run_sync(read)
    except GithubError as exc:  # say which issue could not be read
        raise _again(exc, f"{full_name}#{number}: {gh_message(exc, secret)}") from None
    if block is None:
        raise StaleError(f"{full_name}#{number}: no open block (answered, closed or not blocked)")
    return block, secret
