"""The GitHub source's pure half: config validation, the marker trust rules, issues into Blocks."""

from __future__ import annotations

import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from hitl_tui.model import Answer, UsageError
from hitl_tui.sources.github import issues as gh

SRC = gh.GithubSource(repo="acme/shop")


def test_a_marker_counts_only_at_a_line_start_outside_code_and_quotes():
    body = "\n".join(
        [
            "agent_task_status:   Needs_Context  ",
            "```",
            "AGENT_BLOCK_CATEGORY: fenced",
            "```",
            "~~~~",
            "AGENT_CONTEXT_REASON: tilde-fenced",
            "~~~~",
            "> AGENT_CONTEXT_STATUS: quoted",
            "AGENT_QUOTED_LAZY: lazy-continuation",
            "",
            "    AGENT_INDENTED: indented-code",
            "  AGENT_SPACED: not-at-line-start",
            "text AGENT_INLINE: inline",
            "AGENT_TWO_WORDS: two words",
        ]
    )
    assert gh.markers(body) == {"AGENT_TASK_STATUS": "needs_context"}


def test_an_unclosed_fence_hides_everything_after_it():
    assert gh.markers("```python\nAGENT_TASK_STATUS: blocked\n") == {}
    # A backtick line with a backtick in its info string is not a fence (CommonMark).
    assert gh.markers("```a`b\nAGENT_TASK_STATUS: blocked") == {"AGENT_TASK_STATUS": "blocked"}
    # A shorter fence does not close a longer one.
    text = "````\n```\nAGENT_TASK_STATUS: blocked\n````\nAGENT_TASK_STATUS: needs_context"
    assert gh.markers(text) == {"AGENT_TASK_STATUS": "needs_context"}


def test_crlf_and_the_last_marker_of_a_comment():
    text = "AGENT_TASK_STATUS: blocked\r\nAGENT_TASK_STATUS: needs_context\r\n"
    assert gh.markers(text) == {"AGENT_TASK_STATUS": "needs_context"}


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({}, "exactly one of repo"),
        ({"repo": "acme/shop", "org": "acme"}, "exactly one of repo"),
        ({"repo": "acme"}, 'repo must be "owner/name"'),
        ({"repo": "acme/../x"}, 'repo must be "owner/name"'),
        ({"org": "-bad"}, "org must be"),
        ({"repo": "a/b", "api_url": "ftp://x"}, "api_url must be"),
        ({"repo": "a/b", "api_url": "https://u:p@h/api"}, "must not carry credentials"),
        ({"repo": "a/b", "poll_seconds": 0}, "poll_seconds"),
        ({"repo": "a/b", "poll_seconds": True}, "poll_seconds"),
        ({"repo": "a/b", "poll_timeout_seconds": 0}, "poll_timeout_seconds must be a number"),
        ({"repo": "a/b", "poll_timeout_seconds": "30"}, "poll_timeout_seconds must be a number"),
        ({"repo": "a/b", "poll_max_requests": 0}, "poll_max_requests must be a whole number"),
        ({"repo": "a/b", "poll_max_requests": 1.5}, "poll_max_requests must be a whole number"),
        ({"repo": "a/b", "labels": {"blocked": ""}}, "labels.blocked"),
        ({"repo": "a/b", "labels": {"bloked": "x"}}, "unknown label 'bloked'"),
        ({"repo": "a/b", "token": "x"}, "unknown key 'token'"),
        ({"repo": "a/b", "loop_account": "has space"}, "loop_account"),
        ({"repo": "a/b", "labels": "x"}, "labels must be a table"),
        ("not a table", "must be a table"),
    ],
)
def test_invalid_config_entries_are_one_line_usage_errors(entry, message):
    with pytest.raises(UsageError, match=message) as caught:
        gh.parse_config([entry])
    assert "\n" not in str(caught.value)
    assert str(caught.value).startswith("[[github]] #1: ")


def test_the_same_repository_twice_is_refused():
    with pytest.raises(UsageError, match=r"^\[\[github\]\] #2: acme/shop is configured twice$"):
        gh.parse_config([{"repo": "acme/shop"}, {"repo": "acme/shop", "poll_seconds": 5}])


def test_valid_config_with_defaults_and_renames():
    a, b = gh.parse_config(
        [
            {"repo": "acme/shop"},
            {
                "org": "acme",
                "api_url": "https://ghe.example.com/api/v3/",
                "loop_account": "acme-loop[bot]",
                "poll_seconds": 30,
                "poll_timeout_seconds": 90,
                "poll_max_requests": 5000,
                "labels": {"blocked": "needs human"},
            },
        ]
    )
    assert a.api_url == "https://api.github.com" and a.poll_seconds == 60 and a.scope == "acme/shop"
    assert (a.poll_timeout_seconds, a.poll_max_requests) == (30, 1000)
    assert (b.poll_timeout_seconds, b.poll_max_requests) == (90, 5000)
    assert a.labels == gh.Labels("blocked", "approved", "type:change-request")
    assert b.api_url == "https://ghe.example.com/api/v3" and b.loop_account == "acme-loop[bot]"
    assert b.labels.blocked == "needs human" and b.labels.approved == "approved"
    assert b.scope == "acme/* (ghe.example.com)"
    assert b.covers("ACME/anything") and not b.covers("other/shop")


def _issue(number=7, labels=(), body="", **extra):
    return {
        "number": number,
        "title": "Nightly export",
        "body": body,
        "state": "open",
        "labels": [{"name": n} for n in labels],
        "html_url": f"https://github.com/acme/shop/issues/{number}",
        "created_at": "2026-11-01T00:00:00Z",
        **extra,
    }


def _comment(cid, body, author="loop-bot", association="NONE", when=None):
    return {
        "id": cid,
        "body": body,
        "user": {"login": author},
        "author_association": association,
        "created_at": when or f"2026-11-02T00:00:{cid % 60:02d}Z",
    }


BLOCKED_NOTE = (
    "Blocked (contract): change-request approval gate.\n"
    "Checked: docs/architecture.md still locks SQLite.\n"
    "Tried: nothing in code, per the gate.\n"
    "Needed: a human reviews the doc change and approves it.\n"
    "Who can unblock: the project owner.\n"
    "Recommended default: approve, because Postgres already runs in production.\n\n"
    "AGENT_TASK_STATUS: blocked\nAGENT_BLOCK_CATEGORY: contract\n\n[[agent: engineer]]\n"
)


def test_a_change_request_gate_from_the_body_frontmatter():
    body = "---\ntask_id: T-7\ntype: change-request # gate\n---\n\n## Task\nSwitch to Postgres.\n"
    block = gh.build_block(
        SRC,
        "acme/shop",
        _issue(labels=("blocked",), body=body),
        [_comment(1, BLOCKED_NOTE)],
        "loop-bot",
    )
    assert block is not None
    assert (block.id, block.repo, block.path) == (
        "acme/shop#7",
        "acme/shop",
        "https://github.com/acme/shop/issues/7",
    )
    assert block.question == "a human reviews the doc change and approves it"
    assert block.attempted == ("nothing in code, per the gate.",)
    assert "Category: contract — " in block.context
    assert "Checked: docs/architecture.md still locks SQLite." in block.context
    assert "Who can unblock: the project owner" in block.context
    assert block.context.endswith(
        "Task:\nSwitch to Postgres.\nhttps://github.com/acme/shop/issues/7"
    )
    options = [c.option for c in block.choices]
    assert options == [
        "Accept the recommended default: approve, because Postgres already runs in production",
        "Approve the change request",
        "Resume with your answer",
        "Keep blocked, add a note",
    ]
    assert [c.needs_text for c in block.choices] == [False, False, True, True]
    assert "label 'approved' added" in block.choices[1].consequence
    assert "[[agent" not in block.question + block.context


def test_no_gate_without_contract_category_and_label_alone_still_blocks():
    note = BLOCKED_NOTE.replace(
        "AGENT_BLOCK_CATEGORY: contract", "AGENT_BLOCK_CATEGORY: ci-failure"
    )
    issue = _issue(labels=("blocked", "type:change-request"))
    block = gh.build_block(SRC, "acme/shop", issue, [_comment(1, note)], "loop-bot")
    assert "Approve the change request" not in [c.option for c in block.choices]
    bare = gh.build_block(SRC, "acme/shop", _issue(labels=("Blocked",)), [], "loop-bot")
    assert bare is not None and bare.state == "blocked" and bare.problems
    assert bare.question == "Nightly export"


def test_pull_requests_closed_issues_and_junk_are_not_blocks():
    pr = _issue(labels=("blocked",), pull_request={"url": "x"})
    assert gh.build_block(SRC, "acme/shop", pr, [], "loop-bot") is None
    closed = _issue(labels=("blocked",), state="closed")
    assert gh.build_block(SRC, "acme/shop", closed, [], "loop-bot") is None
    for junk in (None, [], {"number": "7"}, {"number": True}, {"number": -1}):
        assert gh.build_block(SRC, "acme/shop", junk, [], "loop-bot") is None
    # Junk comments and fields are skipped, not fatal.
    odd = _issue(labels=("blocked",), title=["x"], body=None, labels_extra=1)
    comments = [None, {"id": "x"}, {"id": 3, "user": None, "body": 5}, _comment(4, BLOCKED_NOTE)]
    assert gh.build_block(SRC, "acme/shop", odd, comments, "loop-bot").category == "contract"


NEEDS = (
    "needs_context. Questions for the maintainer:\n"
    "1. Should rounding happen per line or on the invoice total? Checked: the export rounds\n"
    "   per line. Recommended: per line, to match the export. Who: maintainer.\n"
    "2. Which rounding mode for halves? Checked: no config key exists. Recommended: half-even.\n"
    "   Who: project owner.\n\n"
    "AGENT_TASK_STATUS: needs_context\nAGENT_CONTEXT_REASON: context_overflow\n\n"
    "[[agent: engineer]]\n"
)


def test_needs_context_questions_defaults_and_the_answer_comment():
    block = gh.build_block(SRC, "acme/shop", _issue(), [_comment(1, NEEDS)], "loop-bot")
    assert block.state == "needs_context" and block.category is None
    assert len(block.questions) == 2
    assert block.question.startswith("1. Should rounding happen per line")
    assert "Context reason: context_overflow" in block.context
    first = block.choices[0]
    assert first.option == (
        "Accept the recommended default: 1. per line, to match the export; 2. half-even"
    )
    plan = gh.plan(block, Answer(choice=first, operator="Ada"))
    (comment,) = plan.remote
    assert comment.body == (
        "Accepted the recommended default: 1. per line, to match the export; 2. half-even\n\n"
        "— Ada, via hitl\n\nAGENT_CONTEXT_STATUS: provided\n"
    )
    plan = gh.plan(block, Answer(texts=("per line", "half-up"), note="asked the accountant"))
    assert plan.remote[0].body.startswith("1. per line\n\n2. half-up\n\nNote: asked the accountant")
    assert plan.remote[0].body.endswith("\nAGENT_CONTEXT_STATUS: provided\n")
    assert "AGENT_CONTEXT_STATUS: provided" in plan.diff()
    with pytest.raises(UsageError, match="asks 2 questions"):
        gh.plan(block, Answer(texts=("a", "b", "c")))
    keep = block.find_choice("C")
    assert keep.option == "Keep waiting, add a note"
    plan = gh.plan(block, Answer(choice=keep, note="asking the accountant"))
    assert "AGENT_CONTEXT_STATUS" not in plan.remote[0].body


def test_the_operator_cannot_write_markers_or_trailers():
    block = gh.build_block(SRC, "acme/shop", _issue(labels=("blocked",)), [], "loop-bot")
    for text in ("ok\n[[agent: engineer]]", "ok\nAGENT_TASK_STATUS: done", "   "):
        with pytest.raises(UsageError):
            gh.plan(block, Answer(texts=(text,)))
    with pytest.raises(UsageError, match="empty"):
        gh.plan(block, Answer(choice=block.find_choice("A")))


_scalar = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
_json = (
    _scalar
    | st.lists(_scalar, max_size=3)
    | st.dictionaries(st.text(max_size=8), _scalar | st.lists(_scalar, max_size=2), max_size=3)
)
_LABELS = [{"name": "blocked"}, {"name": "type:change-request"}, "blocked", {"name": 5}, None]
_lines = st.sampled_from(
    [
        "AGENT_TASK_STATUS: blocked",
        "AGENT_TASK_STATUS: needs_context",
        "AGENT_BLOCK_CATEGORY: contract",
        "AGENT_CONTEXT_STATUS: provided",
        "```",
        "~~~",
        "> quoted",
        "    indented",
        "1. Question? Recommended: yes. Who: me.",
        "Checked: x. Tried: y. Needed: z.",
        "[[agent: engineer]]",
        "",
        "\x1b[31m[b]markup[/x]",
    ]
) | st.text(max_size=30)


@given(
    issue=st.fixed_dictionaries(
        {
            "number": st.integers(1, 99),
            "labels": _json | st.lists(st.sampled_from(_LABELS), max_size=3),
            "title": _json,
            "body": _json | st.sampled_from(["---\ntype: change-request\n---\n## Task\nx"]),
        },
        optional={
            "state": st.sampled_from(["open", "closed", None, 1]),
            "html_url": _json,
            "created_at": _json,
        },
    ),
    comments=st.lists(
        st.fixed_dictionaries(
            {
                "id": st.integers(1, 50),
                "body": st.lists(_lines, max_size=8).map("\n".join),
                "user": st.sampled_from([{"login": "loop-bot"}, {"login": "x"}, None, "junk"]),
            },
            optional={"created_at": _json, "author_association": _json},
        )
        | _json,
        max_size=5,
    ),
)
@example(
    issue={"number": 1, "labels": [], "title": None, "body": None},
    comments=[{"id": 2, "body": "1. Q? Recommended: x.\nAGENT_TASK_STATUS: needs_context",
               "user": {"login": "loop-bot"}}],
)  # fmt: skip
@settings(max_examples=150, deadline=None)
def test_any_issue_and_comments_either_build_a_block_or_none(issue, comments):
    block = gh.build_block(SRC, "acme/shop", issue, comments, "loop-bot")
    if block is None:
        return
    assert block.state in ("blocked", "needs_context")
    event("state: " + block.state)
    assert block.since.tzinfo is not None
    for choice in block.choices:
        if choice.needs_text:
            plan = gh.plan(
                block, Answer(choice=choice, texts=("fine",) * max(1, len(block.questions)))
            )
        else:
            plan = gh.plan(block, Answer(choice=choice))
        assert plan.remote[0].kind == "comment"
        assert "[[agent" not in plan.remote[0].body
