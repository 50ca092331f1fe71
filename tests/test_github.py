"""The GitHub source against a real HTTP server on 127.0.0.1 (tests/github_fake.py).

Every test starts its own fake; nothing reaches the internet. Timeouts and backoff are tiny.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hitl_tui import journal
from hitl_tui.answers import service as answering
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.inbox.workspace import Workspace
from hitl_tui.model import Answer, StaleError, UsageError
from hitl_tui.sources.github import issues as gh
from hitl_tui.sources.github.api import GithubClient, GithubError, Secret, resolve_token
from hitl_tui.sources.github.api import scrub as gh_scrub
from hitl_tui.sources.github.poll import GithubPoller, gh_message, watch_github
from hitl_tui.sources.github.send import PartialAnswer, apply_remote
from hitl_tui.sources.registry import remote_sources
from tests.github_fake import LOGIN, TOKEN, FakeGithub
from tests.hostile_servers import EndlessPages, HugeBody, SlowLoris

REPO = "acme/shop"

BLOCKED_NOTE = (
    "Blocked (credentials): SFTP_PASSWORD is not set.\n"
    "Checked: .env.example, the deploy docs.\n"
    "Tried: key-based login, refused by the server.\n"
    "Needed: an operator provides SFTP_PASSWORD in the loop's environment.\n"
    "Who can unblock: the ops owner.\n\n"
    "AGENT_TASK_STATUS: blocked\n"
    "AGENT_BLOCK_CATEGORY: credentials\n\n"
    "[[agent: engineer]]\n"
)
GATE_NOTE = (
    "Blocked (contract): change-request approval gate. Needed: approve the doc change. "
    "Recommended default: approve.\n\nAGENT_TASK_STATUS: blocked\nAGENT_BLOCK_CATEGORY: contract\n"
)
NEEDS_NOTE = (
    "Questions:\n1. Per line or per invoice? Recommended: per line. Who: maintainer.\n\n"
    "AGENT_TASK_STATUS: needs_context\n"
)


@pytest.fixture
def fake():
    server = FakeGithub().start()
    yield server
    server.stop()


def scope(fake: FakeGithub, name: str = REPO) -> str:
    return f"{name} ({fake.url.removeprefix('http://')})"


def entry(fake: FakeGithub, **extra) -> dict:
    return {"repo": REPO, "api_url": fake.url, **extra}


def poller(fake: FakeGithub, *entries: dict, token: str | None = TOKEN, **kw) -> GithubPoller:
    options = {"timeout": 2.0, "retries": 1, "backoff": 0.01, **kw}
    return GithubPoller(list(entries) or [entry(fake)], token, **options)


async def poll(fake: FakeGithub, *entries: dict, **kw):
    async with poller(fake, *entries, **kw) as p:
        return await p.poll_once()


def blocked_issue(fake: FakeGithub, number: int = 1, note: str = BLOCKED_NOTE, **kw) -> None:
    labels = kw.pop("labels", ("blocked",))
    fake.add_issue(REPO, number, title=f"Task {number}", labels=labels, **kw)
    fake.add_comment(REPO, number, note)


# -- listing -------------------------------------------------------------------------------


async def test_blocked_and_needs_context_issues_become_blocks(fake):
    blocked_issue(fake, 1)
    fake.add_issue(REPO, 2, title="Rounding")
    fake.add_comment(REPO, 2, NEEDS_NOTE)
    fake.add_issue(REPO, 3, labels=("blocked",), pull_request=True)  # a PR: skipped
    fake.add_issue(REPO, 4, title="Plain")  # no label, no comment: not read further
    fake.add_issue(REPO, 5, title="Answered")
    fake.add_comment(REPO, 5, NEEDS_NOTE)
    fake.add_comment(REPO, 5, "Per line.\nAGENT_CONTEXT_STATUS: provided", "ada", "OWNER")
    (result,) = await poll(fake)
    assert (result.scope, result.state, result.message) == (scope(fake), "ok", "2 open blocks")
    blocks = {b.id: b for b in result.blocks}
    assert set(blocks) == {"acme/shop#1", "acme/shop#2"}
    one = blocks["acme/shop#1"]
    assert (one.source, one.repo, one.path, one.state, one.category) == (
        "github",
        REPO,
        "https://github.example/acme/shop/issues/1",
        "blocked",
        "credentials",
    )
    assert one.question == "an operator provides SFTP_PASSWORD in the loop's environment"
    assert one.attempted == ("key-based login, refused by the server.",)
    assert one.to_json()["path"] == "https://github.example/acme/shop/issues/1"
    assert blocks["acme/shop#2"].state == "needs_context"
    # Issue 4 (no label, no comments) and the PR cost no comment requests.
    assert not fake.sent("GET", r"/issues/(3|4)/comments")
    # The token went in the Authorization header of every request.
    assert all(r.headers["authorization"] == f"Bearer {TOKEN}" for r in fake.requests)


@pytest.mark.parametrize(
    ("author", "association", "body"),
    [
        ("mallory", "NONE", "AGENT_TASK_STATUS: needs_context"),  # another account
        ("ada", "OWNER", "AGENT_TASK_STATUS: needs_context"),  # even an owner is not the loop
        (LOGIN, "NONE", "```\nAGENT_TASK_STATUS: needs_context\n```"),  # fenced
        (LOGIN, "NONE", "> AGENT_TASK_STATUS: needs_context"),  # quoted
        (LOGIN, "NONE", "Quoting:\n\n    AGENT_TASK_STATUS: needs_context"),  # indented code
        (LOGIN, "NONE", "say AGENT_TASK_STATUS: needs_context"),  # not at a line start
    ],
)
async def test_markers_that_do_not_count(fake, author, association, body):
    fake.add_issue(REPO, 1)
    fake.add_comment(REPO, 1, body, author, association)
    (result,) = await poll(fake)
    assert result.state == "ok" and result.blocks == []


async def test_the_newest_loop_marker_wins(fake):
    fake.add_issue(REPO, 1)
    fake.add_comment(REPO, 1, "AGENT_TASK_STATUS: needs_context")
    fake.add_comment(REPO, 1, "Back to work.\nAGENT_TASK_STATUS: in-progress")
    fake.add_issue(REPO, 2)
    fake.add_comment(REPO, 2, "AGENT_TASK_STATUS: in-progress")
    fake.add_comment(REPO, 2, "Stuck again.\nAGENT_TASK_STATUS: needs_context")
    # A stranger's marker does not override the loop's, and cannot mark context provided.
    fake.add_comment(REPO, 2, "AGENT_TASK_STATUS: in-progress", "mallory")
    fake.add_comment(REPO, 2, "AGENT_CONTEXT_STATUS: provided", "mallory", "CONTRIBUTOR")
    (result,) = await poll(fake)
    assert [(b.id, b.question) for b in result.blocks] == [("acme/shop#2", "Stuck again.")]


async def test_pagination_of_issues_and_comments(fake):
    fake.page_size = 2
    for n in range(1, 6):
        blocked_issue(fake, n)
    for i in range(4):
        fake.add_comment(REPO, 3, f"chatter {i}", "someone")
    fake.add_comment(REPO, 3, BLOCKED_NOTE.replace("credentials", "ci-failure"))
    (result,) = await poll(fake)
    assert sorted(b.id for b in result.blocks) == [f"acme/shop#{n}" for n in range(1, 6)]
    assert next(b for b in result.blocks if b.id.endswith("#3")).category == "ci-failure"
    pages = [r.query.get("page", "1") for r in fake.sent("GET", r"/repos/acme/shop/issues$")]
    assert pages == ["1", "2", "3"]
    pages = [r.query.get("page", "1") for r in fake.sent("GET", r"/issues/3/comments")]
    assert pages == ["1", "2", "3"]


async def test_a_second_poll_costs_only_304s_and_reuses_the_bodies(fake):
    fake.page_size = 2
    for n in range(1, 4):
        blocked_issue(fake, n)
    async with poller(fake) as p:
        first = await p.poll_once()
        fake.requests.clear()
        second = await p.poll_once(force=True)
    assert [b.fingerprint for b in first[0].blocks] == [b.fingerprint for b in second[0].blocks]
    # Two pages of issues, both conditional, both 304; the Link of page 1 came from the cache.
    assert [r.status for r in fake.requests] == [304, 304]
    assert all(r.headers.get("if-none-match", "").startswith('"') for r in fake.requests)
    # Comments were not asked again: the issues' updated_at did not move.
    assert not fake.sent("GET", "/comments")


async def test_a_new_comment_is_seen_on_the_next_poll(fake):
    fake.add_issue(REPO, 1)
    async with poller(fake) as p:
        assert (await p.poll_once())[0].blocks == []
        fake.add_comment(REPO, 1, NEEDS_NOTE)
        (result,) = await p.poll_once(force=True)
    assert [b.state for b in result.blocks] == ["needs_context"]


async def test_an_org_source_reads_each_of_its_repositories(fake):
    fake.orgs["acme"] = [
        {"full_name": "acme/shop"},
        {"full_name": "acme/old", "archived": True},
        {"full_name": "acme/../evil"},
        {"full_name": "acme/api"},
        "junk",
    ]
    blocked_issue(fake, 1)
    fake.add_issue("acme/api", 9, labels=("blocked",))
    fake.add_issue("acme/old", 1, labels=("blocked",))
    (result,) = await poll(fake, {"org": "acme", "api_url": fake.url})
    assert sorted(b.id for b in result.blocks) == ["acme/api#9", "acme/shop#1"]
    assert not fake.sent("GET", "/repos/acme/old")


# -- failures --------------------------------------------------------------------------------


async def test_401_is_unauthorised_and_does_not_hide_the_other_source(fake):
    blocked_issue(fake, 1)
    fake.add_issue("acme/api", 2, labels=("blocked",))
    fake.fail("GET", r"/repos/acme/api/issues", 401, times=5)
    async with poller(fake, entry(fake), entry(fake, repo="acme/api")) as p:
        ok, bad = await p.poll_once()
        assert (ok.state, [b.id for b in ok.blocks]) == ("ok", ["acme/shop#1"])
        assert (bad.state, bad.blocks) == ("unauthorised", None)
        assert "401" in bad.message
        assert len(fake.sent("GET", r"/repos/acme/api/issues")) == 1  # a 401 is not retried
        # The failing source is polled again later than the healthy one.
        assert p.next_delay() == pytest.approx(60, abs=2)
        assert p._due[scope(fake, "acme/api")] > p._due[scope(fake)] + 30


async def test_a_wrong_token_is_unauthorised(fake):
    (result,) = await poll(fake, token="ghp_wrong")
    assert (result.state, result.blocks) == ("unauthorised", None)
    assert "ghp_wrong" not in result.message


async def test_no_token_and_no_loop_account_says_how_to_fix_it(fake):
    (result,) = await poll(fake, token=None)
    assert result.state == "unauthorised" and "GITHUB_TOKEN" in result.message
    assert fake.requests == []


async def test_each_api_host_gets_its_own_token(fake):
    other = FakeGithub(token="ghp_other", login="other-bot").start()
    try:
        blocked_issue(fake, 1)
        other.add_issue("corp/app", 4, labels=("blocked",))
        asked: list[str] = []

        def token_for(api_url: str) -> Secret | None:
            asked.append(api_url)
            return Secret(TOKEN if api_url == fake.url else "ghp_other")

        entries = [entry(fake), {"repo": "corp/app", "api_url": other.url}]
        async with GithubPoller(entries, token_for) as p:
            results = await p.poll_once()
            await p.poll_once(force=True)
        assert [(r.state, len(r.blocks)) for r in results] == [("ok", 1), ("ok", 1)]
        assert sorted(asked) == sorted([fake.url, other.url])  # asked once per host
        assert {r.headers["authorization"] for r in other.requests} == {"Bearer ghp_other"}
    finally:
        other.stop()


async def test_a_malformed_token_in_the_environment_is_a_source_state(fake):
    def token_for(api_url: str) -> Secret | None:
        return resolve_token(api_url, env={"GITHUB_TOKEN": "two words"})

    async with GithubPoller([entry(fake)], token_for) as p:
        (result,) = await p.poll_once()
    assert result.state == "unauthorised"
    assert result.message == "$GITHUB_TOKEN is not a token (empty, or spaces, control or non-ASCII)"


async def test_403_with_rate_limit_headers_waits_until_the_reset(fake):
    reset = datetime.now(UTC) + timedelta(minutes=10)
    headers = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(reset.timestamp()))}
    fake.fail("GET", r"/issues\?", 403, headers=headers)
    async with poller(fake) as p:
        (result,) = await p.poll_once()
        assert (result.state, result.blocks) == ("rate-limited", None)
        local = reset.replace(microsecond=0).astimezone().strftime("%H:%M")
        assert result.message == f"rate-limited until {local}"
        assert abs((result.until - reset).total_seconds()) < 2
        assert p.next_delay() > 590
        # Until the reset, a forced poll sends nothing at all.
        before = len(fake.requests)
        (again,) = await p.poll_once(force=True)
        assert again.state == "rate-limited" and len(fake.requests) == before


async def test_retry_after_is_honoured(fake):
    fake.fail("GET", r"/issues\?", 429, headers={"Retry-After": "120"})
    (result,) = await poll(fake)
    assert result.state == "rate-limited"
    assert 110 < (result.until - datetime.now(UTC)).total_seconds() <= 121


async def test_a_spent_budget_on_a_200_stops_further_requests(fake):
    blocked_issue(fake, 1)
    reset = int((datetime.now(UTC) + timedelta(minutes=5)).timestamp())
    fake.fail(
        "GET",
        r"/issues\?",
        200,
        headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset)},
        body=[{"number": 1, "labels": [{"name": "blocked"}], "comments": 1, "state": "open"}],
    )
    (result,) = await poll(fake)
    assert result.state == "rate-limited"
    assert not fake.sent("GET", "/comments")


async def test_a_500_is_retried_with_backoff_and_recovers(fake):
    blocked_issue(fake, 1)
    fake.fail("GET", r"/issues\?", 500)
    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    (result,) = await poll(fake, sleep=sleep, backoff=0.5)
    assert result.state == "ok" and len(result.blocks) == 1
    assert [r.status for r in fake.sent("GET", r"/issues$")] == [500, 200]
    assert len(delays) == 1 and 0.25 <= delays[0] <= 0.75  # base 0.5, jitter 0.5-1.5


async def test_persistent_500s_make_the_source_unreachable_and_back_off(fake):
    fake.fail("GET", r"/issues\?", 502, times=100)
    async with poller(fake, retries=2) as p:
        (result,) = await p.poll_once()
        assert (result.state, result.blocks) == ("unreachable", None)
        assert "server error 502" in result.message
        assert len(fake.sent("GET", r"/issues$")) == 3
        first = p.next_delay()
        assert first > 90  # poll_seconds 60, doubled, with jitter
        (result,) = await p.poll_once(force=True)
        assert p.next_delay() > first


async def test_a_timeout_is_unreachable(fake):
    fake.fail("GET", r"/issues\?", 200, delay=1.0)
    (result,) = await poll(fake, timeout=0.2, retries=0)
    assert (result.state, result.blocks) == ("unreachable", None)
    assert result.message.endswith("no complete answer within 0.2 s")


async def test_a_server_that_is_down_is_unreachable():
    server = FakeGithub()
    url = server.url
    server.server.server_close()  # nothing listens on the port any more
    async with GithubPoller([{"repo": REPO, "api_url": url}], TOKEN, retries=0) as p:
        (result,) = await p.poll_once()
    assert result.state == "unreachable" and "cannot connect" in result.message


async def test_garbage_from_the_server_is_an_error_not_a_crash(fake):
    fake.fail("GET", r"/issues\?", 200, body={"not": "a list"})
    fake.fail("GET", r"/user", 200, body=["no", "login"])
    async with poller(fake, entry(fake), entry(fake, repo="acme/api", loop_account="bot")) as p:
        results = await p.poll_once()
    assert [r.state for r in results] == ["error", "error"]


async def test_a_link_to_another_host_is_not_followed(fake):
    blocked_issue(fake, 1)
    fake.fail(
        "GET",
        r"/issues\?",
        200,
        headers={"Link": '<https://evil.example/steal?page=2>; rel="next"'},
        body=[{"number": 1, "labels": [{"name": "blocked"}], "comments": 0, "state": "open"}],
    )
    (result,) = await poll(fake)
    assert result.state == "ok" and [b.id for b in result.blocks] == ["acme/shop#1"]


# -- answering -------------------------------------------------------------------------------


async def read(fake: FakeGithub, number: int, **labels) -> object:
    src = gh.parse_config([entry(fake, **({"labels": labels} if labels else {}))])[0]
    async with poller(fake, entry(fake)) as p:
        return await p.read_issue(src, REPO, number)


async def send(plan, **kw):
    return await apply_remote(plan, TOKEN, record=journal.record_remote, **kw)


async def test_resume_posts_one_comment_then_removes_the_label(fake):
    blocked_issue(fake, 1)
    block = await read(fake, 1)
    choice = block.find_choice("A")
    assert choice.option == "Resume with your answer"
    plan = gh.plan(block, Answer(choice=choice, note="SFTP_PASSWORD is set now", operator="Ada"))
    comment = "SFTP_PASSWORD is set now\n\n— Ada, via hitl\n"
    assert plan.diff() == (
        "# post a comment on acme/shop#1\n"
        "| SFTP_PASSWORD is set now\n|\n| — Ada, via hitl\n"
        "# remove the label 'blocked' from acme/shop#1\n"
    )
    fake.requests.clear()
    done = await send(plan)
    assert done == ["posted the comment", "removed label 'blocked'"]
    assert [(r.method, r.path) for r in fake.requests] == [
        ("GET", "/repos/acme/shop/issues/1"),
        ("GET", "/repos/acme/shop/issues/1/comments"),
        ("POST", "/repos/acme/shop/issues/1/comments"),
        ("DELETE", "/repos/acme/shop/issues/1/labels/blocked"),
    ]
    assert fake.requests[2].body == {"body": comment}
    assert fake.labels_of(REPO, 1) == []
    assert "[[agent" not in fake.comments[(REPO, 1)][-1]["body"]


async def test_approving_a_gate_with_renamed_labels_encodes_the_label_path(fake):
    labels = {"blocked": "needs human", "approved": "ok/approved"}
    fake.add_issue(REPO, 7, labels=("needs human", "type:change-request"))
    fake.add_comment(REPO, 7, GATE_NOTE)
    block = await read(fake, 7, **labels)
    assert [c.option for c in block.choices][:2] == [
        "Accept the recommended default: approve",
        "Approve the change request",
    ]
    plan = gh.plan(block, Answer(choice=block.find_choice("B"), operator="Ada"))
    assert "# add the label 'ok/approved' to acme/shop#7" in plan.diff()
    fake.requests.clear()
    await send(plan)
    writes = [(r.method, r.path, r.body) for r in fake.requests if r.method != "GET"]
    assert writes == [
        (
            "POST",
            "/repos/acme/shop/issues/7/comments",
            {"body": "Approved the change request.\n\n— Ada, via hitl\n"},
        ),
        ("DELETE", "/repos/acme/shop/issues/7/labels/needs%20human", None),
        ("POST", "/repos/acme/shop/issues/7/labels", {"labels": ["ok/approved"]}),
    ]
    assert sorted(fake.labels_of(REPO, 7)) == ["ok/approved", "type:change-request"]


async def test_a_gate_in_the_body_frontmatter_and_its_default_approves(fake):
    body = "---\ntype: change-request\n---\n## Task\nMove to Postgres\n"
    fake.add_issue(REPO, 8, labels=("blocked",), body=body)
    fake.add_comment(REPO, 8, GATE_NOTE)
    block = await read(fake, 8)
    plan = gh.plan(block, Answer(choice=block.find_choice("A"), operator="Ada"))
    assert [a.kind for a in plan.remote] == ["comment", "remove-label", "add-label"]
    await send(plan)
    assert fake.labels_of(REPO, 8) == ["approved"]
    assert fake.sent("DELETE", r"/labels/type%3Achange-request") == []


async def test_answering_needs_context_ends_with_the_provided_marker(fake):
    fake.add_issue(REPO, 2)
    fake.add_comment(REPO, 2, NEEDS_NOTE)
    block = await read(fake, 2)
    plan = gh.plan(block, Answer(texts=("Per line.",), operator="Ada"))
    fake.requests.clear()
    await send(plan)
    (post,) = [r for r in fake.requests if r.method != "GET"]
    assert post.body == {"body": "Per line.\n\n— Ada, via hitl\n\nAGENT_CONTEXT_STATUS: provided\n"}
    (result,) = await poll(fake)
    assert result.blocks == []  # answered: the provided marker closes it


async def test_a_failure_midway_says_what_was_done_and_a_retry_finishes(fake):
    blocked_issue(fake, 1)
    block = await read(fake, 1)
    plan = gh.plan(block, Answer(texts=("Set the password.",), operator="Ada"))
    fake.fail("DELETE", r"/labels/blocked", 500, times=2)
    async with GithubClient(fake.url, Secret(TOKEN), retries=1, backoff=0.01) as client:
        with pytest.raises(PartialAnswer) as caught:
            await send(plan, client=client)
    message = str(caught.value)
    assert message == (
        "acme/shop#1: done: posted the comment. Failed: remove the label 'blocked' from "
        "acme/shop#1 (127.0.0.1:" + fake.url.rsplit(":", 1)[1] + ": server error 500). "
        "Answer again with the same text to finish (the comment is not posted twice)"
    )
    assert fake.labels_of(REPO, 1) == ["blocked"]
    # The same answer again: the comment is found, not posted twice; the label goes.
    done = await send(plan)
    assert done == ["the comment was already posted", "removed label 'blocked'"]
    assert len(fake.sent("POST", "/comments")) == 1
    assert fake.labels_of(REPO, 1) == []
    # Both tries are in the journal (hitl history); neither can be undone from hitl.
    second, first = journal.history()
    assert first.block_id == second.block_id == "acme/shop#1"
    assert first.summary == (
        "acme/shop#1: sent to GitHub: posted the comment; NOT finished (failed: remove the "
        "label 'blocked' from acme/shop#1): answer again to finish"
    )
    assert second.summary == (
        "acme/shop#1: sent to GitHub: the comment was already posted; removed label 'blocked'"
    )
    assert (first.files, first.repo, first.block_source) == ((), Path("acme/shop"), "github")
    with pytest.raises(UsageError, match="nothing to undo"):
        journal.undo()
    with pytest.raises(UsageError, match="cannot undo a posted comment"):
        journal.undo(first.id)


async def test_a_failed_approval_label_says_both_earlier_steps_were_done(fake):
    fake.add_issue(REPO, 7, labels=("blocked", "type:change-request"))
    fake.add_comment(REPO, 7, GATE_NOTE)
    block = await read(fake, 7)
    plan = gh.plan(block, Answer(choice=block.find_choice("B"), operator="Ada"))
    fake.fail("POST", r"/labels$", 422)
    with pytest.raises(PartialAnswer, match=r"^acme/shop#7: done: posted the comment; removed "):
        await send(plan)
    assert fake.labels_of(REPO, 7) == ["type:change-request"]
    # The retry: the comment is found, the blocked label is already gone, approved is added.
    # (The block is no longer "open" — no label — but our comment proves it is our answer.)
    done = await send(plan)
    assert done == [
        "the comment was already posted",
        "label 'blocked' already removed",
        "added label 'approved'",
    ]
    assert len(fake.sent("POST", "/comments")) == 1


async def test_a_label_gone_between_the_check_and_the_delete_is_fine(fake):
    blocked_issue(fake, 1)
    block = await read(fake, 1)
    plan = gh.plan(block, Answer(texts=("Done.",)))
    fake.fail("DELETE", r"/labels/blocked", 404)
    assert await send(plan) == ["posted the comment", "removed label 'blocked'"]


async def test_a_rate_limit_on_the_re_read_sends_nothing(fake):
    blocked_issue(fake, 1)
    block = await read(fake, 1)
    plan = gh.plan(block, Answer(texts=("Done.",)))
    fake.fail("GET", r"/issues/1$", 403, headers={"Retry-After": "60"})
    with pytest.raises(GithubError) as caught:
        await send(plan)
    assert caught.value.state == "rate-limited"
    assert str(caught.value).startswith("acme/shop#1: cannot re-read the issue (rate-limited")
    assert str(caught.value).endswith("); nothing was sent")
    assert not fake.sent("POST") and not fake.sent("DELETE")


async def test_a_failed_comment_sends_nothing_else(fake):
    blocked_issue(fake, 1)
    block = await read(fake, 1)
    plan = gh.plan(block, Answer(texts=("Done.",)))
    fake.fail("POST", r"/comments", 503)
    with pytest.raises(Exception, match=r"could not post the comment .*nothing else was sent"):
        await send(plan)
    assert len(fake.sent("POST")) == 1  # a POST is never retried blindly
    assert not fake.sent("DELETE")


async def test_a_comment_that_landed_but_timed_out_is_not_posted_twice(fake):
    blocked_issue(fake, 1)
    block = await read(fake, 1)
    plan = gh.plan(block, Answer(texts=("Done.",), operator="Ada"))
    fake.fail("POST", r"/comments", 201, delay=1.0, after=True)
    async with GithubClient(fake.url, Secret(TOKEN), timeout=0.3) as client:
        late = r"could not post the comment \(.*no complete answer within 0.3 s\)"
        with pytest.raises(Exception, match=late) as e:
            await send(plan, client=client)
    assert "answering again with the same text finds it" in str(e.value)
    assert len(fake.comments[(REPO, 1)]) == 2  # it did land
    assert fake.labels_of(REPO, 1) == ["blocked"]
    done = await send(plan)
    assert done == ["the comment was already posted", "removed label 'blocked'"]
    assert len(fake.comments[(REPO, 1)]) == 2 and fake.labels_of(REPO, 1) == []


async def test_a_label_removed_meanwhile_is_stale_and_nothing_is_sent(fake):
    blocked_issue(fake, 1)
    block = await read(fake, 1)
    plan = gh.plan(block, Answer(texts=("Done.",)))
    fake.set_labels(REPO, 1, [])
    fake.requests.clear()
    with pytest.raises(StaleError, match=r"no longer open.*nothing was sent"):
        await send(plan)
    assert [r.method for r in fake.requests] == ["GET", "GET"]


async def test_a_new_marker_meanwhile_is_stale(fake):
    blocked_issue(fake, 1)
    block = await read(fake, 1)
    plan = gh.plan(block, Answer(texts=("Done.",)))
    fake.add_comment(REPO, 1, BLOCKED_NOTE.replace("credentials", "merge-conflict"))
    with pytest.raises(StaleError, match="changed since you read it"):
        await send(plan)
    assert not fake.sent("POST") and not fake.sent("DELETE")


async def test_answering_through_the_inbox_api(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    blocked_issue(fake, 1)
    inbox = Inbox(Workspace.discover([tmp_path]))
    inbox.use_remotes(remote_sources({"github": [entry(fake)]}))  # as the config builds them
    (result,) = await poll(fake)
    delta = inbox.replace_remote("github", result.scope, result.blocks)
    assert [b.id for b in delta.added] == ["acme/shop#1"]
    block = inbox.resolve("acme/shop#1")
    plan = answering.plan_answer(inbox, block, Answer(texts=("Done.",)))
    # apply_answer is blocking (the app calls it from a worker thread); it runs its own loop.
    done = await asyncio.to_thread(answering.apply_answer, inbox, plan)
    assert list(done.lines) == ["posted the comment", "removed label 'blocked'"]
    assert not inbox.handle([block.path])  # what the app does after a file answer: a no-op
    async with poller(fake, entry(fake), entry(fake, repo="acme/api")) as p:
        results = await p.poll_once(scopes=[block.meta["scope"]])
    assert [r.scope for r in results] == [scope(fake)]
    (result,) = await poll(fake)
    delta = inbox.replace_remote("github", result.scope, result.blocks)
    assert delta.removed == [("github", "https://github.example/acme/shop/issues/1")]
    assert inbox.blocks == {}


async def test_watch_github_feeds_the_inbox_until_stopped(fake, tmp_path):
    blocked_issue(fake, 1)
    inbox = Inbox(Workspace.discover([tmp_path]))
    stop = asyncio.Event()
    seen: list[tuple[str, object]] = []
    entries = [entry(fake, poll_seconds=3600), entry(fake, repo="acme/gone", poll_seconds=3600)]

    async with poller(fake, *entries) as p:

        async def on_update(result, delta) -> None:
            seen.append((result.state, delta and [b.id for b in delta.added]))
            if len(seen) == 2:
                fake.set_labels(REPO, 1, [])
                p.refresh_soon(scope(fake))  # what the app does after answering
            elif len(seen) == 3:
                stop.set()

        await asyncio.wait_for(watch_github(p, inbox, on_update, stop), timeout=5)
    assert seen == [("ok", ["acme/shop#1"]), ("error", None), ("ok", [])]
    assert inbox.blocks == {}


def test_replace_remote_reports_changes_and_keeps_other_scopes(tmp_path):
    def block(n: int, fp: str):
        issue = {"number": n, "labels": [{"name": "blocked"}], "title": fp, "state": "open"}
        return gh.build_block(gh.GithubSource(repo=REPO), REPO, issue, [], "bot")

    inbox = Inbox(Workspace.discover([tmp_path]))
    inbox.replace_remote("github", "acme/shop", [block(1, "x"), block(2, "x")])
    inbox.replace_remote("github", "acme/*", [block(9, "x")])
    delta = inbox.replace_remote("github", "acme/shop", [block(1, "y")])
    assert [b.id for b in delta.changed] == ["acme/shop#1"] and delta.added == []
    assert delta.removed == [("github", "https://api.github.com/repos/acme/shop/issues/2")]
    inbox.scan()  # a local rescan keeps the remote blocks
    assert sorted(b.id for b in inbox.sorted_blocks()) == ["acme/shop#1", "acme/shop#9"]


# -- the token -------------------------------------------------------------------------------


async def test_the_token_never_appears_in_any_output_or_log(fake, caplog, capsys, tmp_path):
    caplog.set_level(logging.DEBUG)
    blocked_issue(fake, 1)
    fake.fail("GET", r"/issues\?", 500)
    async with poller(fake) as p:
        results = await p.poll_once()
        texts = [repr(p), repr(p.client(fake.url)), *(r.message for r in results)]
    block = results[0].blocks[0]
    plan = gh.plan(block, Answer(texts=("ok",)))
    fake.fail("DELETE", "/labels/", 401)
    with pytest.raises(Exception) as caught:
        await send(plan)
    texts += [str(caught.value), repr(block), repr(plan), plan.diff(), repr(Secret(TOKEN))]
    texts += [str(b.to_json()) for b in results[0].blocks]
    out = capsys.readouterr()
    texts += [out.out, out.err, caplog.text]
    assert "HTTP Request" in caplog.text  # httpx did log, without the token
    for text in texts:
        assert TOKEN not in text
    state = Path(os.environ["HITL_STATE_DIR"])
    for path in [*state.rglob("*"), *tmp_path.rglob("*")]:
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes()


def test_a_malformed_token_is_refused_without_showing_it():
    for bad in ("ghp_abc\nX-Evil: 1", "ghp_é", "two words"):
        with pytest.raises(UsageError) as caught:
            resolve_token(env={"GH_TOKEN": bad})
        assert str(caught.value).startswith("$GH_TOKEN is not a token")
        assert bad not in str(caught.value)
    with pytest.raises(UsageError):
        Secret("ghp\r\nx")


async def test_a_secondary_rate_limit_without_headers_waits_a_minute(fake):
    fake.fail(
        "GET", r"/issues\?", 403, body={"message": "You have exceeded a secondary rate limit"}
    )
    (result,) = await poll(fake)
    assert result.state == "rate-limited"
    assert 50 < (result.until - datetime.now(UTC)).total_seconds() <= 61


def test_the_token_comes_from_the_environment_then_gh(tmp_path):
    assert resolve_token(env={"GITHUB_TOKEN": "a", "GH_TOKEN": "b"}).reveal() == "a"
    assert resolve_token(env={"GH_TOKEN": " b\n"}).reveal() == "b"
    gh_cli = tmp_path / "gh"
    gh_cli.write_text("#!/bin/sh\n[ \"$1 $2\" = 'auth token' ] && echo gho_from_cli\n")
    gh_cli.chmod(gh_cli.stat().st_mode | stat.S_IEXEC)
    old = os.environ["PATH"]
    try:
        os.environ["PATH"] = f"{tmp_path}{os.pathsep}{old}"
        token = resolve_token(env={})
        assert token.reveal() == "gho_from_cli" and "gho" not in repr(token) + str(token)
        os.environ["PATH"] = str(tmp_path / "nowhere")
        assert resolve_token(env={}) is None  # no gh at all is fine
    finally:
        os.environ["PATH"] = old


# -- hostile servers: slow, endless, huge ------------------------------------------------------


@pytest.fixture
def loris():
    server = SlowLoris().start()
    yield server
    server.stop()


def hostile(url: str, **extra) -> dict:
    return {"repo": REPO, "api_url": url, "loop_account": LOGIN, **extra}


@pytest.mark.parametrize("body", [False, True], ids=["headers", "body"])
async def test_one_request_is_bounded_in_total_not_per_read(body):
    """One byte every 0.3 s never trips a per-read timeout; the client's timeout is total."""
    server = SlowLoris(body=body).start()
    try:
        client = GithubClient(server.url, Secret(TOKEN), timeout=1.0, retries=0)
        began = time.monotonic()
        with pytest.raises(GithubError) as caught:
            await asyncio.wait_for(client.get("/repos/acme/shop/issues"), timeout=20)
        took = time.monotonic() - began
        await client.aclose()
    finally:
        server.stop()
    assert caught.value.state == "unreachable"
    assert str(caught.value).endswith(": no complete answer within 1 s")
    assert took < 1 + 2, took


async def test_a_slow_loris_poll_gives_up_at_its_deadline(loris):
    """The poll's own deadline, shorter than a request's: the source gives up as a whole."""
    source = hostile(loris.url, poll_timeout_seconds=1)
    began = time.monotonic()
    async with GithubPoller([source], TOKEN, timeout=10.0, retries=2) as p:
        (result,) = await asyncio.wait_for(p.poll_once(), timeout=20)
    took = time.monotonic() - began
    assert (result.state, result.blocks) == ("unreachable", None)
    assert result.message == "no complete answer within 1 s"
    assert took < 1 + 2, took
    assert loris.connections == 1


async def test_endless_pagination_stops_at_the_request_budget():
    """Comment pages nest in issue pages: 200 x 200 pages unless the poll itself is bounded."""
    server = EndlessPages(max_requests=5000).start()
    try:
        source = hostile(server.url, poll_max_requests=50)
        async with GithubPoller([source], TOKEN, timeout=5.0, retries=0) as p:
            (result,) = await asyncio.wait_for(p.poll_once(), timeout=60)
    finally:
        server.stop()
    assert (result.state, result.blocks) == ("error", None)
    assert result.message == "gave up after 50 requests in one poll (poll_max_requests)"
    assert 45 <= len(server.requests) <= 50  # the last may be cancelled in flight


async def test_the_app_poller_neither_hangs_nor_piles_up_requests(loris, tmp_path):
    """watch_github, as the app runs it: the source reports its state and backs off."""
    inbox = Inbox(Workspace.discover([tmp_path]))
    stop = asyncio.Event()
    seen: list[tuple[str, str]] = []

    async def on_update(result, delta) -> None:
        seen.append((result.state, result.message))

    source = hostile(loris.url, poll_timeout_seconds=1, poll_seconds=1)
    async with GithubPoller([source], TOKEN) as p:  # the app's options: 10 s, 2 retries
        task = asyncio.create_task(watch_github(p, inbox, on_update, stop))
        await asyncio.sleep(4.5)
        stop.set()
        await asyncio.wait_for(task, timeout=5)
    # Polls at 0 s and after a backoff of 2 s (+-20%); never two at once.
    assert seen[0] == ("unreachable", "no complete answer within 1 s")
    assert 1 <= len(seen) <= 3, seen
    assert loris.connections == len(seen)


async def test_a_huge_response_is_capped_and_named():
    server = HugeBody(size=64 << 20).start()
    try:
        async with GithubPoller([hostile(server.url)], TOKEN, retries=0) as p:
            (result,) = await asyncio.wait_for(p.poll_once(), timeout=30)
    finally:
        server.stop()
    assert (result.state, result.blocks) == ("error", None)
    assert result.message == (
        f"{server.url}/repos/acme/shop/issues?state=open&per_page=100: "
        "the response is larger than 16 MiB; not read"
    )
    assert server.sent < 40 << 20  # it stopped reading (what the kernel buffered aside)


async def test_a_declared_huge_length_is_refused_before_reading():
    server = HugeBody(size=32 << 20, declare=True).start()
    try:
        async with GithubPoller([hostile(server.url)], TOKEN, retries=0) as p:
            (result,) = await asyncio.wait_for(p.poll_once(), timeout=30)
    finally:
        server.stop()
    assert result.state == "error" and "larger than 16 MiB" in result.message


def test_the_token_is_scrubbed_in_every_encoded_form():
    token = Secret("ghp_Tok+en/With=Odd~chars")
    encoded = "ghp_Tok%2Ben%2FWith%3DOdd~chars"
    lower = "ghp_Tok%2ben%2fWith%3dOdd~chars"
    text = f"a {token.reveal()} b {encoded} c {lower} d"
    assert gh_scrub(text, token) == "a *** b *** c *** d"


async def test_a_token_echoed_into_a_url_is_not_shown():
    """A hostile server can put the token into the URL an error names (a Link, say)."""
    server = HugeBody(size=32 << 20).start()
    token = Secret("ghp_Tok+en/With=Odd~chars")
    try:
        client = GithubClient(server.url, token, retries=0)
        with pytest.raises(GithubError) as caught:
            await client.get("/repos/acme/shop/issues?x=ghp_Tok%2ben%2FWith%3dOdd%7Echars")
        await client.aclose()
    finally:
        server.stop()
    message = gh_message(caught.value, token)
    assert "larger than 16 MiB" in message and "***" in message
    assert "Tok" not in message and "Odd" not in message
