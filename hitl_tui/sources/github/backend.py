"""The GitHub backend behind the one interface of `sources.base.Source`, and its synchronous
entry points (`hitl list`, `hitl answer owner/name#12`).

`GithubBackend` is built by the registry from the `[[github]]` tables; the CLI, the app,
answering and the journal only ever ask it (`read_into`, `watch`, `owns`/`read`, `plan`,
`send`). The poller is `github_poll`; sending an answer is `github_send`.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from hitl_tui.model import Answer, Block, Done, Plan, StaleError, UsageError
from hitl_tui.sources.base import (
    AnswerWaiting,
    OnUpdate,
    RecordSent,
    RemoteInbox,
    Source,
    keep_answer,
)
from hitl_tui.sources.github import issues as gh
from hitl_tui.sources.github.api import GithubError, Secret, resolve_token
from hitl_tui.sources.github.issues import GithubSource
from hitl_tui.sources.github.poll import (
    GithubPoller,
    SourceResult,
    as_secret,
    fetch_issue,
    gh_message,
    watch_github,
)
from hitl_tui.sources.github.send import apply_remote, not_undoable, restate
from hitl_tui.sources.remote import RemoteJournal

if TYPE_CHECKING:
    from hitl_tui.sources.remote import RemoteBackend

ISSUE_REF = re.compile(r"^([A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+)#(\d{1,9})$")

#: A command waits less than the app for a source that does not answer: seconds an exchange
#: may take, and how often one is tried again.
CLI_TIMEOUT = 5.0
CLI_RETRIES = 1

T = TypeVar("T")


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


def apply_sync(
    plan: Plan, token: Secret | str | None = None, record: RecordSent | None = None
) -> list[str]:
    return run_sync(lambda: apply_remote(plan, token, record=record))


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

    def use_journal(self, journal: RemoteJournal) -> None:
        """What this backend sends is journaled here (`hitl history`): the registry hands it
        the journal as it builds it (`remote.Journaling`)."""
        self.record_sent = journal.record_remote

    @classmethod
    def from_config(cls, tables: list[Any]) -> GithubBackend:
        return cls(gh.parse_config(tables))

    def plan(self, block: Block, answer: Answer) -> Plan:
        return gh.plan(block, answer)

    def plan_note(self, block: Block, note: str, operator: str, when: datetime) -> Plan:
        """The issue's "keep blocked, add a note" (its `keep` choice): one comment, the
        labels unchanged."""
        return gh.plan(block, keep_answer(block, note, operator, when))

    def send(self, plan: Plan) -> Done:
        return Done(tuple(apply_sync(plan, self._secrets.get(plan.block.id), self.record_sent)))

    def why_not_undoable(self, block: Block) -> str:
        return not_undoable(block)

    def owns(self, target: str) -> bool:
        """`owner/name#12` (and no such file): an issue, answered over the API."""
        return ISSUE_REF.fullmatch(target) is not None and not os.path.exists(target)

    def read(self, target: str) -> Block:
        block, secret = read_issue_block(self.entries, target)
        self._secrets[block.id] = secret
        return block

    def read_into(self, inbox: RemoteInbox, warn: Callable[[str], None]) -> None:
        add_to_inbox(self.entries, inbox, warn=warn)

    async def watch(self, inbox: RemoteInbox, on_update: OnUpdate, stop: asyncio.Event) -> None:
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

    # -- did the loop resume? (read afresh, two requests; `hitl status` and start-up only) ---

    def resume_signs(self, block: Block, plan: Plan) -> dict[str, Any]:
        """The issue right after the answer was sent: its labels, and the comments it has (the
        answer's own among them), so that only what came after counts."""
        meta = block.meta
        full_name = f"{meta.get('owner')}/{meta.get('name')}"
        number = meta.get("number")
        if not isinstance(number, int):
            return {}
        issue, comments = self._fetch(full_name, number, self._secrets.get(block.id))
        return {
            "repo": full_name,
            "number": number,
            "loop_account": meta.get("loop_account")
            if isinstance(meta.get("loop_account"), str)
            else None,
            "labels": sorted(gh.label_names(issue)),
            "comments": sorted(c["id"] for c in comments if isinstance(c, dict) and "id" in c),
            "state": issue.get("state"),
        }

    def resumed(self, waiting: AnswerWaiting) -> str | None:
        """A comment after the answer (by the loop account, when one is known), the labels
        changed, or the issue closed. GithubError (unreachable, rate-limited): None, not yet."""
        signs = waiting.signs if isinstance(waiting.signs, dict) else {}
        full_name, number = signs.get("repo"), signs.get("number")
        if not isinstance(full_name, str) or not isinstance(number, int):
            return None
        try:
            issue, comments = self._fetch(full_name, number, None)
        except GithubError:
            return None
        seen = set(signs.get("comments") or ())
        loop = signs.get("loop_account")
        for comment in comments:
            if not isinstance(comment, dict) or comment.get("id") in seen:
                continue
            user = comment.get("user")
            login = user.get("login") if isinstance(user, dict) else None
            if not isinstance(login, str):
                continue
            if loop is None or login.casefold() == str(loop).casefold():
                return f"new comment by {login}"
        before = set(signs.get("labels") or ())
        now = set(gh.label_names(issue))
        if now != before:
            change = [f"+{n}" for n in sorted(now - before)] + [
                f"-{n}" for n in sorted(before - now)
            ]
            return "labels changed: " + " ".join(change)
        if issue.get("state") != signs.get("state") and issue.get("state") == "closed":
            return "the issue was closed"
        return None

    def _fetch(
        self, full_name: str, number: int, secret: Secret | None
    ) -> tuple[dict[str, Any], list[Any]]:
        src = find_source(self.entries, full_name)
        token = secret if secret is not None else resolve_token(src.api_url)

        async def read() -> tuple[dict[str, Any], list[Any]]:
            async with GithubPoller(
                [src], token, timeout=CLI_TIMEOUT, retries=CLI_RETRIES
            ) as poller:
                return await fetch_issue(poller.client(src.api_url), full_name, number)

        return run_sync(read)


# -- one read, for a command --------------------------------------------------------------------


def add_to_inbox(
    sources: Sequence[GithubSource],
    inbox: RemoteInbox,
    token: Secret | str | None = None,
    *,
    warn: Callable[[str], None],
) -> list[SourceResult]:
    """`hitl list`: read every [[github]] source once into `inbox`; one warning per failure."""
    if not sources:
        return []
    secret = as_secret(token) if token is not None else resolve_token

    async def poll() -> list[SourceResult]:
        async with GithubPoller(
            sources, secret, timeout=CLI_TIMEOUT, retries=CLI_RETRIES
        ) as poller:
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
        async with GithubPoller([src], secret, timeout=CLI_TIMEOUT, retries=CLI_RETRIES) as poller:
            return await poller.read_issue(src, full_name, number)

    try:
        block = run_sync(read)
    except GithubError as exc:  # say which issue could not be read
        raise restate(exc, f"{full_name}#{number}: {gh_message(exc, secret)}") from None
    if block is None:
        raise StaleError(f"{full_name}#{number}: no open block (answered, closed or not blocked)")
    return block, secret


if TYPE_CHECKING:  # the backend is what answering, the app and undo call a remote one
    _typed: type[RemoteBackend] = GithubBackend
