"""`hitl escalate`: the canonical BLOCKED.md, the five-line message, every channel and failure.

A real HTTP server on 127.0.0.1 stands in for Slack and Telegram and records each request; a
dial command records its standard input. Most tests run the CLI as the agent would.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import parse_qs

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hitl_tui.agent import channels as notify
from hitl_tui.agent import escalate
from hitl_tui.agent.channels import scrub
from hitl_tui.agent.escalate import EscalationError, from_args, from_draft, message
from hitl_tui.model import Choice
from hitl_tui.sources.loopkit.render import Escalation, render
from hitl_tui.sources.loopkit.source import parse_blocked
from tests.fake_chat import FakeChat, serve_chat
from tests.hostile_servers import Echo, SlowLoris

QUESTION = "Should deleting a workspace also delete its archived invoices?"
CONTEXT = (
    'Feature "delete workspace", src/workspaces/delete.ts, commit a1b2c3d.\n'
    "PROMPT.md says delete removes all data; billing needs invoices kept 7 years."
)
ATTEMPTED = [
    "Searched PROMPT.md, AGENTS.md and the last 3 commits: no retention rule.",
    "Cascade delete: /verify rejected it as a silent decision.",
]
CHOICES = [
    "Cascade delete everything — simplest; breaks invoice retention.",
    "Keep invoices, detach them — needs a migration adding owner_id.",
    "Refuse deletion while invoices exist — no data loss; support ticket.",
]
ARGS = [
    "--question",
    QUESTION,
    "--context",
    CONTEXT,
    *[x for a in ATTEMPTED for x in ("--attempted", a)],
    *[x for c in CHOICES for x in ("--choice", c)],
]

EXPECTED = b"""\
# Blocked

## Question:
Should deleting a workspace also delete its archived invoices?

## Context:
Feature "delete workspace", src/workspaces/delete.ts, commit a1b2c3d.
PROMPT.md says delete removes all data; billing needs invoices kept 7 years.

## Attempted:
- Searched PROMPT.md, AGENTS.md and the last 3 commits: no retention rule.
- Cascade delete: /verify rejected it as a silent decision.

## Choices:
- A) Cascade delete everything \xe2\x80\x94 simplest; breaks invoice retention.
- B) Keep invoices, detach them \xe2\x80\x94 needs a migration adding owner_id.
- C) Refuse deletion while invoices exist \xe2\x80\x94 no data loss; support ticket.
"""

MESSAGE_TAIL = [
    "Q: Should deleting a workspace also delete its archived invoices?",
    'Context: Feature "delete workspace", src/workspaces/delete.ts, commit a1b2c3d. '
    "PROMPT.md says delete removes all data; billing needs invoices kept 7 years.",
    "Attempted: Searched PROMPT.md, AGENTS.md and the last 3 commits: no retention rule.; "
    "Cascade delete: /verify rejected it as a silent decision.",
    "Choices: Cascade delete everything | Keep invoices, detach them | "
    "Refuse deletion while invoices exist",
]
FIRST_LINE = re.compile(r"^\[loopkit\] blocked in shopx on \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")

TOKEN = "123456:SECRET-TOKEN-abc"
HOOK_PATH = "/services/T000/B000/SECRETHOOKxyz"


# -- fixtures ---------------------------------------------------------------------------------


@pytest.fixture
def chat():
    yield from serve_chat(FakeChat())


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "shopx"
    (path / ".git").mkdir(parents=True)
    return path


def clean_env(**extra: str) -> dict[str, str]:
    """The test's environment without any LOOPKIT_HITL_* or proxy variable, plus `extra`."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("LOOPKIT_HITL_") and "proxy" not in k.lower()
    }
    env.update(extra)
    return env


def run(args: list[str], cwd: Path, env: dict[str, str] | None = None, stdin: bytes = b""):
    return subprocess.run(
        [sys.executable, "-m", "hitl_tui", "escalate", *args],
        cwd=cwd,
        env=env if env is not None else clean_env(),
        input=stdin,
        capture_output=True,
        timeout=30,
    )


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_message(text: str) -> None:
    lines = text.split("\n")
    assert len(lines) == 5, text
    assert FIRST_LINE.match(lines[0]), lines[0]
    assert lines[1:] == MESSAGE_TAIL


# -- the happy paths --------------------------------------------------------------------------


def test_slack_gets_the_exact_json_and_the_file_is_canonical(repo: Path, chat: FakeChat) -> None:
    env = clean_env(LOOPKIT_HITL_CHANNEL="slack", LOOPKIT_HITL_SLACK_WEBHOOK=chat.url + HOOK_PATH)
    result = run(ARGS, repo, env)
    assert result.returncode == 2, result.stderr
    assert (repo / "BLOCKED.md").read_bytes() == EXPECTED
    assert result.stderr == b""
    assert result.stdout.decode() == (
        f"blocked: wrote {repo / 'BLOCKED.md'} (notified via slack); "
        "stop now and wait for the human\n"
    )
    [request] = chat.requests
    assert request.path == HOOK_PATH
    assert request.content_type == "application/json"
    body = json.loads(request.body)
    assert list(body) == ["text", "mrkdwn"] and body["mrkdwn"] is False
    check_message(body["text"])


def test_slack_shows_agent_text_literally(repo: Path, chat: FakeChat) -> None:
    """Slack reads <!channel> as "notify everyone" and <url|label> as a disguised link."""
    env = clean_env(LOOPKIT_HITL_CHANNEL="slack", LOOPKIT_HITL_SLACK_WEBHOOK=chat.url + HOOK_PATH)
    question = "Ping <!channel> and open <https://evil.example|the docs> & *now*?"
    args = list(ARGS)
    args[args.index("--question") + 1] = question
    result = run(args, repo, env)
    assert result.returncode == 2, result.stderr
    [request] = chat.requests
    text = json.loads(request.body)["text"]
    assert (
        "Q: Ping &lt;!channel&gt; and open &lt;https://evil.example|the docs&gt; &amp; *now*?"
        in text
    )
    assert "<" not in text and ">" not in text
    assert question in (repo / "BLOCKED.md").read_text()  # the file keeps the words as written


def test_telegram_gets_the_token_in_the_path_and_a_form(repo: Path, chat: FakeChat) -> None:
    env = clean_env(
        LOOPKIT_HITL_CHANNEL="telegram",
        LOOPKIT_HITL_TELEGRAM_TOKEN=TOKEN,
        LOOPKIT_HITL_TELEGRAM_CHAT="-100987",
        LOOPKIT_HITL_TELEGRAM_API=chat.url + "/",
    )
    result = run(ARGS, repo, env)
    assert result.returncode == 2, result.stderr
    assert result.stderr == b""
    assert (repo / "BLOCKED.md").read_bytes() == EXPECTED
    [request] = chat.requests
    assert request.path == f"/bot{TOKEN}/sendMessage"
    assert request.content_type == "application/x-www-form-urlencoded"
    form = parse_qs(request.body.decode(), keep_blank_values=True)
    assert sorted(form) == ["chat_id", "text"]
    assert form["chat_id"] == ["-100987"]
    check_message(form["text"][0])
    assert TOKEN.encode() not in result.stdout


def test_telegram_defaults_to_the_public_api(monkeypatch) -> None:
    seen: list[tuple[str, float, dict]] = []

    def fake_send(url: str, timeout: float, **body) -> tuple[int, str]:
        seen.append((url, timeout, body))
        return 200, "OK"

    monkeypatch.setattr(notify, "send", fake_send)
    env = {
        "LOOPKIT_HITL_CHANNEL": "Telegram",
        "LOOPKIT_HITL_TELEGRAM_TOKEN": TOKEN,
        "LOOPKIT_HITL_TELEGRAM_CHAT": "42",
    }
    assert notify.notify("hello", env) == ("telegram", None)
    [(url, timeout, body)] = seen
    assert url == f"https://api.telegram.org/bot{TOKEN}/sendMessage"
    assert (timeout, body) == (5.0, {"data": {"chat_id": "42", "text": "hello"}})


def test_dial_gets_the_message_on_stdin(repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "dialled.txt"
    env = clean_env(
        LOOPKIT_HITL_CHANNEL="dial", LOOPKIT_HITL_DIAL_CMD=f"cat > {shlex.quote(str(out))}"
    )
    result = run(ARGS, repo, env)
    assert result.returncode == 2, result.stderr
    assert result.stderr == b""
    assert (repo / "BLOCKED.md").read_bytes() == EXPECTED
    text = out.read_text(encoding="utf-8")
    assert text.endswith("\n")
    check_message(text[:-1])


@pytest.mark.parametrize("channel", [None, "none", " NONE "])
def test_no_channel_sends_nothing(repo: Path, chat: FakeChat, channel: str | None) -> None:
    extra = {"LOOPKIT_HITL_SLACK_WEBHOOK": chat.url + HOOK_PATH}
    if channel is not None:
        extra["LOOPKIT_HITL_CHANNEL"] = channel
    result = run(ARGS, repo, clean_env(**extra))
    assert result.returncode == 2
    assert result.stderr == b""
    assert b"(no channel configured)" in result.stdout
    assert (repo / "BLOCKED.md").read_bytes() == EXPECTED
    assert chat.requests == []


# -- every failure is soft ---------------------------------------------------------------------


def _failures(chat: FakeChat, tmp_path: Path) -> dict[str, tuple[dict[str, str], str]]:
    hook = chat.url + HOOK_PATH
    refused = f"http://127.0.0.1:{free_port()}{HOOK_PATH}"
    tg = {
        "LOOPKIT_HITL_CHANNEL": "telegram",
        "LOOPKIT_HITL_TELEGRAM_TOKEN": TOKEN,
        "LOOPKIT_HITL_TELEGRAM_CHAT": "42",
        "LOOPKIT_HITL_TELEGRAM_API": chat.url,
    }
    slack = {"LOOPKIT_HITL_CHANNEL": "slack", "LOOPKIT_HITL_SLACK_WEBHOOK": hook}
    dial = {"LOOPKIT_HITL_CHANNEL": "dial"}
    return {
        "slack-500": (slack, r"slack not notified: HTTP 500 Internal Server Error"),
        "telegram-403": (tg, r"telegram not notified: HTTP 403 Forbidden"),
        "slack-refused": (
            {**slack, "LOOPKIT_HITL_SLACK_WEBHOOK": refused},
            r"slack not notified: could not connect \(.*\)",
        ),
        "telegram-refused": (
            {**tg, "LOOPKIT_HITL_TELEGRAM_API": refused},
            r"telegram not notified: could not connect \(.*\)",
        ),
        "slack-timeout": (slack, r"slack not notified: no answer within 0.5 s"),
        "slack-bad-url": (
            {**slack, "LOOPKIT_HITL_SLACK_WEBHOOK": "hooks.example/SECRETHOOKxyz"},
            r"slack not notified: not a valid http\(s\) URL in LOOPKIT_HITL_SLACK_WEBHOOK",
        ),
        "slack-bad-port": (
            # httpx's own message would quote the port: "Invalid port: 'SECRETPORT'".
            {**slack, "LOOPKIT_HITL_SLACK_WEBHOOK": "http://127.0.0.1:SECRETPORT/hook"},
            r"slack not notified: not a valid http\(s\) URL in LOOPKIT_HITL_SLACK_WEBHOOK",
        ),
        "telegram-bad-api": (
            {**tg, "LOOPKIT_HITL_TELEGRAM_API": "ftp://gateway"},
            r"telegram not notified: not a valid http\(s\) URL in "
            r"LOOPKIT_HITL_TELEGRAM_API and LOOPKIT_HITL_TELEGRAM_TOKEN",
        ),
        "dial-exit-1": (
            {**dial, "LOOPKIT_HITL_DIAL_CMD": "cat >/dev/null; echo SECRET >&2; exit 1"},
            r"dial not notified: LOOPKIT_HITL_DIAL_CMD exited with status 1",
        ),
        "dial-timeout": (
            {**dial, "LOOPKIT_HITL_DIAL_CMD": "sleep 20 # SECRET"},
            r"dial not notified: LOOPKIT_HITL_DIAL_CMD did not finish within 0.5 s",
        ),
        "dial-missing": (dial, r"dial not notified: LOOPKIT_HITL_DIAL_CMD is not set"),
        "slack-missing": (
            {"LOOPKIT_HITL_CHANNEL": "slack"},
            r"slack not notified: LOOPKIT_HITL_SLACK_WEBHOOK is not set",
        ),
        "telegram-no-token": (
            {**tg, "LOOPKIT_HITL_TELEGRAM_TOKEN": ""},
            r"telegram not notified: LOOPKIT_HITL_TELEGRAM_TOKEN is not set",
        ),
        "telegram-no-chat": (
            {k: v for k, v in tg.items() if k != "LOOPKIT_HITL_TELEGRAM_CHAT"},
            r"telegram not notified: LOOPKIT_HITL_TELEGRAM_CHAT is not set",
        ),
        "unknown-channel": (
            {"LOOPKIT_HITL_CHANNEL": "pigeon"},
            r"pigeon not notified: unknown LOOPKIT_HITL_CHANNEL 'pigeon' "
            r"\(use telegram, slack, dial or none\)",
        ),
    }


FAILURES = list(_failures(FakeChat(), Path()).keys())


@pytest.mark.parametrize("case", FAILURES)
def test_a_failed_notification_still_blocks(
    case: str, repo: Path, chat: FakeChat, tmp_path: Path
) -> None:
    env_extra, expected = _failures(chat, tmp_path)[case]
    chat.status = {"slack-500": 500, "telegram-403": 403}.get(case, 200)
    chat.delay = 10.0 if case == "slack-timeout" else 0.0
    env = clean_env(**env_extra, LOOPKIT_HITL_TIMEOUT="0.5")
    started = time.monotonic()
    result = run(ARGS, repo, env)
    assert time.monotonic() - started < 8
    assert result.returncode == 2
    assert (repo / "BLOCKED.md").read_bytes() == EXPECTED
    stderr = result.stderr.decode()
    assert stderr.count("\n") == 1, stderr
    assert re.fullmatch(f"hitl: {expected}\n", stderr), stderr
    assert result.stdout.decode().startswith(f"blocked: wrote {repo / 'BLOCKED.md'} (")
    for output in (result.stdout, result.stderr):
        assert b"SECRET" not in output
        assert b"%3A" not in output


def test_scrub_removes_every_form_of_a_secret() -> None:
    hook = "https://hooks.slack.com/services/T0/B0/abcdef"
    text = (
        f"Error for url '{hook}' via /services/T0/B0/abcdef and "
        f"bot{TOKEN} or bot123456%3ASECRET-TOKEN-abc\nsecond line"
    )
    assert scrub(text, [hook, TOKEN, ""]) == (
        "Error for url '***' via *** and bot*** or bot*** second line"
    )


# -- invalid input writes nothing and sends nothing --------------------------------------------

INVALID = {
    "no-question": (
        [a for a in ARGS if a not in ("--question", QUESTION)],
        "--question is missing or empty",
    ),
    "two-line-question": (
        ["--question", "Which one?\nOr the other?", *ARGS[2:]],
        "--question must be one line (put details in --context)",
    ),
    "blank-context": (
        [*ARGS[:2], "--context", " \n ", *ARGS[4:]],
        "--context is missing or empty",
    ),
    "no-attempted": (
        [*ARGS[:4], *[x for c in CHOICES for x in ("--choice", c)]],
        "--attempted is missing or empty: say what you tried",
    ),
    "one-choice": (
        [*ARGS[:8], "--choice", CHOICES[0]],
        "at least two choices are needed (--choice: 'option — consequence'), got 1",
    ),
    "empty-choice": ([*ARGS, "--choice", "  "], "choice 4 is empty"),
    "heading-in-context": (
        [*ARGS[:2], "--context", "fine\n## Choices:\n- A) sneaky", *ARGS[4:]],
        "--context: line 2 starts with '#', which reads as a markdown heading; reword it",
    ),
    "open-fence": (
        [*ARGS[:2], "--context", "see\n```\ncode", *ARGS[4:]],
        "--context: it opens a code fence (``` or ~~~) that it does not close; reword it",
    ),
    "emphasis-choice": (
        [*ARGS, "--choice", "**Bold** — x"],
        "choice D would read back as 'D) Bold — x'; reword it "
        "(leading or trailing * and _ are taken as markdown emphasis)",
    ),
    "draft-and-flags": (
        [*ARGS, "--from-file", "-"],
        "give either --from-file or --question/--context/--attempted/--choice, not both",
    ),
    "missing-draft": (["--from-file", "nowhere.md"], None),
}


@pytest.mark.parametrize("case", list(INVALID))
def test_invalid_input_writes_nothing_and_sends_nothing(
    case: str, repo: Path, chat: FakeChat
) -> None:
    args, expected = INVALID[case]
    env = clean_env(LOOPKIT_HITL_CHANNEL="slack", LOOPKIT_HITL_SLACK_WEBHOOK=chat.url)
    result = run(args, repo, env)
    assert result.returncode == 1, result.stderr
    assert sorted(os.listdir(repo)) == [".git"]
    assert chat.requests == []
    assert result.stdout == b""
    stderr = result.stderr.decode()
    assert stderr.count("\n") == 1 and stderr.startswith("hitl: "), stderr
    if expected is not None:
        assert stderr == f"hitl: {expected}\n"


#: Usage errors: exit 1 like refused input, never 2 (exit 2 means "BLOCKED.md was written" and
#: stops a loopkit run.sh with nobody asked). The message names the problem.
USAGE_ERRORS = {
    "misspelt-option": (
        ["--questoin", QUESTION, *ARGS[2:]],
        "unrecognized arguments: --questoin",
    ),
    "unknown-option": ([*ARGS, "--frobnicate"], "unrecognized arguments: --frobnicate"),
    "missing-value": ([*ARGS, "--choice"], "argument --choice: expected one argument"),
    "missing-question-value": (["--question"], "argument --question: expected one argument"),
    "no-args": ([], "--question is missing or empty"),
    "stray-positional": ([*ARGS, "extra"], "unrecognized arguments: extra"),
}


@pytest.mark.parametrize("case", list(USAGE_ERRORS))
def test_a_usage_error_exits_1_and_writes_nothing(case: str, repo: Path, chat: FakeChat) -> None:
    args, mentions = USAGE_ERRORS[case]
    env = clean_env(LOOPKIT_HITL_CHANNEL="slack", LOOPKIT_HITL_SLACK_WEBHOOK=chat.url)
    result = run(args, repo, env)
    stderr = result.stderr.decode()
    assert result.returncode == 1, stderr
    assert sorted(os.listdir(repo)) == [".git"]
    assert chat.requests == []
    assert result.stdout == b""
    assert stderr.count("\n") == 1 and stderr.startswith("hitl: "), stderr
    assert mentions in stderr


def test_a_refused_replace_exits_1(repo: Path) -> None:
    (repo / "BLOCKED.md").mkdir()
    result = run([*ARGS, "--replace"], repo)
    assert result.returncode == 1
    assert result.stderr == b"hitl: BLOCKED.md in shopx is a folder\n"
    assert sorted(os.listdir(repo)) == [".git", "BLOCKED.md"]
    assert os.listdir(repo / "BLOCKED.md") == []


# -- an open block is kept unless --replace ----------------------------------------------------


def test_an_existing_block_is_kept(repo: Path, chat: FakeChat) -> None:
    old = b"# Blocked\r\n\r\n## Question:\r\nold one?\r\n"
    (repo / "BLOCKED.md").write_bytes(old)
    env = clean_env(LOOPKIT_HITL_CHANNEL="slack", LOOPKIT_HITL_SLACK_WEBHOOK=chat.url)
    result = run(ARGS, repo, env)
    assert result.returncode == 1
    assert result.stderr == (
        b"hitl: BLOCKED.md already exists in shopx: the loop is already blocked "
        b"(use --replace to overwrite it)\n"
    )
    assert (repo / "BLOCKED.md").read_bytes() == old
    assert chat.requests == []


def test_replace_overwrites_and_keeps_the_mode(repo: Path) -> None:
    (repo / "BLOCKED.md").write_bytes(b"old")
    (repo / "BLOCKED.md").chmod(0o640)
    result = run([*ARGS, "--replace"], repo)
    assert result.returncode == 2
    assert (repo / "BLOCKED.md").read_bytes() == EXPECTED
    assert (repo / "BLOCKED.md").stat().st_mode & 0o777 == 0o640
    assert [p for p in os.listdir(repo) if p.startswith(".hitl-tmp")] == []


def test_no_writable_state_folder_is_not_fatal(repo: Path, tmp_path: Path) -> None:
    """A sandboxed agent may have no state folder for the lock: the block is still written."""
    not_a_folder = tmp_path / "state-file"
    not_a_folder.write_text("")
    result = run(ARGS, repo, clean_env(HITL_STATE_DIR=str(not_a_folder)))
    assert result.returncode == 2, result.stderr
    assert result.stderr == b""
    assert (repo / "BLOCKED.md").read_bytes() == EXPECTED


def test_telegram_token_is_quoted_into_the_path(monkeypatch) -> None:
    urls: list[str] = []
    monkeypatch.setattr(notify, "send", lambda url, timeout, **kw: urls.append(url) or (200, ""))
    env = {
        "LOOPKIT_HITL_CHANNEL": "telegram",
        "LOOPKIT_HITL_TELEGRAM_TOKEN": "12:a#b/c?d",
        "LOOPKIT_HITL_TELEGRAM_CHAT": "1",
        "LOOPKIT_HITL_TELEGRAM_API": "http://gw.local/api/",
    }
    assert notify.notify("hi", env) == ("telegram", None)
    assert urls == ["http://gw.local/api/bot12:a%23b%2Fc%3Fd/sendMessage"]


def test_a_symlink_leaving_the_repo_is_not_written_through(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_bytes(b"precious")
    (repo / "BLOCKED.md").symlink_to(outside)
    result = run([*ARGS, "--replace"], repo)
    assert result.returncode == 1
    assert result.stderr.startswith(b"hitl: refusing to write BLOCKED.md")
    assert outside.read_bytes() == b"precious"
    assert (repo / "BLOCKED.md").is_symlink()


# -- where the file goes -----------------------------------------------------------------------


def test_default_repo_is_the_git_top_level(repo: Path) -> None:
    deep = repo / "src" / "workspaces"
    deep.mkdir(parents=True)
    result = run(ARGS, deep)
    assert result.returncode == 2
    assert (repo / "BLOCKED.md").read_bytes() == EXPECTED
    assert not (deep / "BLOCKED.md").exists()


def test_without_git_the_current_folder_is_the_repo(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    result = run(ARGS, plain)
    assert result.returncode == 2
    assert (plain / "BLOCKED.md").read_bytes() == EXPECTED


def test_repo_flag(repo: Path, tmp_path: Path) -> None:
    result = run([*ARGS, "--repo", str(repo)], tmp_path)
    assert result.returncode == 2
    assert (repo / "BLOCKED.md").read_bytes() == EXPECTED
    missing = run([*ARGS, "--repo", str(tmp_path / "nope")], tmp_path)
    assert missing.returncode == 1
    assert missing.stderr.decode().startswith("hitl: not a folder: ")


# -- drafts ------------------------------------------------------------------------------------

MESSY_DRAFT = (
    "\ufeff### QUESTION\r\n"
    "Should deleting a workspace also delete its archived invoices?\r\n"
    "#### context:\r\n"
    'Feature "delete workspace", src/workspaces/delete.ts, commit a1b2c3d.\r\n'
    "PROMPT.md says delete removes all data; billing needs invoices kept 7 years.\r\n\r\n"
    "## Tried\r\n"
    "* Searched PROMPT.md, AGENTS.md and the last 3 commits: no retention rule.\r\n"
    "* Cascade delete: /verify rejected it\r\n"
    "  as a silent decision.\r\n"
    "## Options\r\n"
    "(1) Cascade delete everything -- simplest; breaks invoice retention.\r\n"
    "(2) Keep invoices, detach them – needs a migration adding owner_id.\r\n"
    "(3) Refuse deletion while invoices exist - no data loss; support ticket.\r\n"
).encode()


def test_a_messy_draft_is_written_canonically(repo: Path, tmp_path: Path) -> None:
    draft = tmp_path / "draft.md"
    draft.write_bytes(MESSY_DRAFT)
    result = run(["--from-file", str(draft)], repo)
    assert result.returncode == 2, result.stderr
    assert result.stderr == b""
    assert (repo / "BLOCKED.md").read_bytes() == EXPECTED


def test_a_draft_on_stdin_with_an_extra_section(repo: Path) -> None:
    draft = EXPECTED + b"\n## Notes\nsee the thread\n"
    result = run(["--from-file", "-"], repo, stdin=draft)
    assert result.returncode == 2
    assert (repo / "BLOCKED.md").read_bytes() == EXPECTED
    assert result.stderr == (
        b"hitl: left out the draft's section 'Notes' (BLOCKED.md has four sections)\n"
    )


@pytest.mark.parametrize(
    ("draft", "expected"),
    [
        (b"", "the draft has no '## Context:', '## Attempted:' or '## Choices:' section (see"),
        (b"## Question:\nonly this?\n", "the draft has no '## Context:'"),
        (b"just prose, please help\n", "the draft has no "),
        (EXPECTED.replace(b"## Question:\n", b"## Question:\nfirst\n\n"), "the draft's question"),
        (EXPECTED.split(b"- B)")[0], "at least two choices are needed (Choices: "),
    ],
)
def test_an_invalid_draft_writes_nothing(repo: Path, draft: bytes, expected: str) -> None:
    result = run(["--from-file", "-"], repo, stdin=draft)
    assert result.returncode == 1
    assert result.stderr.decode().startswith(f"hitl: {expected}")
    assert not (repo / "BLOCKED.md").exists()


# -- what is written reads back the same -------------------------------------------------------

HOSTILE = [
    ("Use [b]bold[/b] or [@click=app.quit]?", "a [/x] tag\n[b unclosed", ["[red]x"], ["a", "b"]),
    (
        "Which — of these?",
        "em — dash, en – dash, -- and - too",
        ["tried — something"],
        ["Use A—B — costs — more", "Keep it: forever", "Split -- then - join", "x – y"],
    ),
    (
        "Is `#1` a heading?",
        "```\n# a shell comment inside a fence\n```\n  indented # text",
        ["- already a bullet", "1. numbered", "* star"],
        ["A) Already labelled — fine", "(b) also — fine", "1) number — kept"],
    ),
    ("\x1b[31mred\x1b[0m?", "NUL\x00 and BEL\x07 and \u202e RTL", ["\x1b]0;title\x07"], ["a", "b"]),
]


@pytest.mark.parametrize(("question", "context", "attempted", "choices"), HOSTILE)
def test_hostile_text_reads_back_the_same(question, context, attempted, choices) -> None:
    esc = from_args(question, context, attempted, choices)
    fields, problems = parse_blocked(render(esc).decode("utf-8"))
    assert problems == []
    assert fields["question"] == question
    assert fields["context"] == context
    assert fields["attempted"] == attempted
    assert [(c.option, c.consequence) for c in fields["choices"]] == [
        escalate.split_choice(c) for c in choices
    ]
    assert [c.key for c in fields["choices"]] == list("ABCD"[: len(choices)])


def test_choice_splitting() -> None:
    assert escalate.split_choice("Use A—B — costs — more") == ("Use A—B", "costs — more")
    assert escalate.split_choice("Split -- then - join") == ("Split", "then - join")
    assert escalate.split_choice("x – y") == ("x", "y")
    assert escalate.split_choice("A) Already labelled — fine") == ("Already labelled", "fine")
    assert escalate.split_choice("  spaced\n option  ") == ("spaced option", None)


def test_cli_file_reads_back_through_the_parser(repo: Path) -> None:
    question, context, attempted, choices = HOSTILE[1]
    args = ["--question", question, "--context", context]
    args += [x for a in attempted for x in ("--attempted", a)]
    args += [x for c in choices for x in ("--choice", c)]
    result = run(args, repo)
    assert result.returncode == 2, result.stderr
    fields, problems = parse_blocked((repo / "BLOCKED.md").read_text(encoding="utf-8"))
    assert problems == []
    assert (fields["question"], fields["context"], fields["attempted"]) == (
        question,
        context,
        attempted,
    )
    assert fields["choices"] == [
        Choice("A", "Use A—B", "costs — more"),
        Choice("B", "Keep it", "forever"),
        Choice("C", "Split", "then - join"),
        Choice("D", "x", "y"),
    ]


def test_a_written_file_is_a_valid_draft(repo: Path) -> None:
    esc, ignored = from_draft(EXPECTED.decode())
    assert ignored == []
    assert render(esc) == EXPECTED


_piece = st.characters(blacklist_categories=["Cs"], max_codepoint=0x2100) | st.sampled_from(
    ["#", "```", "~~~", "—", " – ", " - ", " -- ", "\n", "\r\n", "**", "_", "[b]", "A) ", ": "]
)
_text = st.lists(_piece, max_size=12).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    question=_text,
    context=_text,
    attempted=st.lists(_text, max_size=3),
    choices=st.lists(_text, max_size=4),
)
def test_anything_either_is_refused_or_reads_back(question, context, attempted, choices) -> None:
    try:
        esc = from_args(question, context, attempted, choices)
    except EscalationError as exc:
        assert "\n" not in str(exc)
        return
    _assert_reads_back(esc, question)


#: Hostile text that must always be accepted: markup, dashes, labels, separators, escapes. Only
#: what the parser cannot carry is left out (headings, fences, emphasis, line separators).
_safe_char = st.characters(
    blacklist_categories=["Cs", "Zl", "Zp"],
    blacklist_characters="*_#`~\n\r\x0b\x0c\x1c\x1d\x1e\x85",
    max_codepoint=0x2100,
)
_safe_piece = _safe_char | st.sampled_from(
    ["—", " – ", " - ", " -- ", "[b]", "[/x]", "[@click=app.quit]", "A) ", "(b) ", ": ", "\x1b["]
)
_word = st.text("abcXYZ?", min_size=1, max_size=3)
_safe_line = st.builds(
    lambda a, b, c: a + b + c, _word, st.lists(_safe_piece, max_size=10).map("".join), _word
)
_safe_lines = st.lists(_safe_line, min_size=1, max_size=4).map("\n".join)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    question=_safe_line,
    context=_safe_lines,
    attempted=st.lists(_safe_line, min_size=1, max_size=3),
    choices=st.lists(_safe_line, min_size=2, max_size=5),
)
def test_hostile_but_carriable_text_is_accepted_and_reads_back(
    question, context, attempted, choices
) -> None:
    esc = from_args(question, context, attempted, choices)
    _assert_reads_back(esc, question)
    assert esc.context == context.strip()
    assert [(c.option, c.consequence) for c in esc.choices] == [
        escalate.split_choice(c) for c in choices
    ]


def _assert_reads_back(esc: Escalation, question: str) -> None:
    data = render(esc)
    fields, problems = parse_blocked(data.decode("utf-8"))
    assert problems == []
    assert fields["question"] == esc.question == question.strip()
    assert fields["context"] == esc.context
    assert tuple(fields["attempted"]) == esc.attempted
    assert tuple(fields["choices"]) == esc.choices
    again, _ = from_draft(data.decode("utf-8"))
    assert again == esc


# -- the message -------------------------------------------------------------------------------


def test_message_is_five_one_line_fields() -> None:
    esc = from_args(QUESTION, CONTEXT, ATTEMPTED, CHOICES)
    when = datetime(2026, 11, 29, 21, 5, 7, 999, tzinfo=UTC)
    text = message(esc, "shop", when)
    assert text.split("\n") == [
        "[loopkit] blocked in shop on 2026-11-29T21:05:07Z",
        *MESSAGE_TAIL,
    ]


def test_a_long_field_is_cut_to_fit_a_telegram_message() -> None:
    esc = from_args("q?", "word " * 2000, ["a"], ["x", "y"])
    text = message(esc, "shop", datetime(2026, 1, 1, tzinfo=UTC))
    context = text.split("\n")[2]
    assert len(context) == len("Context: ") + escalate.FIELD_LIMIT
    assert context.endswith("…")
    assert len(text) < 4096


# -- the CLI stays light -----------------------------------------------------------------------


def test_the_cli_loads_neither_textual_nor_httpx() -> None:
    code = (
        "import sys\n"
        "from hitl_tui.cli import commands as cli; from hitl_tui.agent import escalate\n"
        "from hitl_tui.cli import agent as agent_cli\n"
        "assert 'escalate' in cli.COMMANDS and 'guard' in cli.COMMANDS\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('textual', 'httpx')]\n"
        "assert not bad, bad\n"
        "cli.build_parsers()\n"
        "bad = [m for m in sys.modules if m.split('.')[0] == 'textual']\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=30)
    assert result.returncode == 0, result.stderr


def test_help_has_examples(tmp_path: Path) -> None:
    result = run(["--help"], tmp_path)
    assert result.returncode == 0
    assert b"hitl escalate --from-file -" in result.stdout
    assert b"LOOPKIT_HITL_TIMEOUT" in result.stdout


# -- hostile channels: slow, echoing ------------------------------------------------------------


@pytest.fixture
def loris():
    server = SlowLoris().start()
    yield server
    server.stop()


def _channel_env(channel: str, url: str, **extra: str) -> dict[str, str]:
    if channel == "slack":
        return clean_env(
            LOOPKIT_HITL_CHANNEL="slack", LOOPKIT_HITL_SLACK_WEBHOOK=url + HOOK_PATH, **extra
        )
    return clean_env(
        LOOPKIT_HITL_CHANNEL="telegram",
        LOOPKIT_HITL_TELEGRAM_TOKEN=TOKEN,
        LOOPKIT_HITL_TELEGRAM_CHAT="42",
        LOOPKIT_HITL_TELEGRAM_API=url,
        **extra,
    )


@pytest.mark.parametrize("channel", ["slack", "telegram"])
def test_a_slow_loris_channel_is_cut_at_the_timeout(
    channel: str, repo: Path, loris: SlowLoris
) -> None:
    """One byte every 0.3 s resets a per-read timeout forever; the timeout bounds the send."""
    env = _channel_env(channel, loris.url, LOOPKIT_HITL_TIMEOUT="2")
    started = time.monotonic()
    result = run(ARGS, repo, env)
    took = time.monotonic() - started
    assert result.returncode == 2
    assert (repo / "BLOCKED.md").read_bytes() == EXPECTED
    assert result.stderr.decode() == f"hitl: {channel} not notified: no answer within 2 s\n"
    assert took < 2 + 3, took
    assert loris.connections == 1


def test_a_channel_that_dribbles_its_body_is_not_waited_for(repo: Path) -> None:
    """The status line is the answer: a body that never ends is not read."""
    server = SlowLoris(body=True).start()
    try:
        env = _channel_env("slack", server.url, LOOPKIT_HITL_TIMEOUT="2")
        started = time.monotonic()
        result = run(ARGS, repo, env)
        took = time.monotonic() - started
    finally:
        server.stop()
    assert result.returncode == 2
    assert result.stderr == b"", result.stderr
    assert b"(notified via slack)" in result.stdout
    assert took < 2 + 3, took


SLACK_SECRETS = ("T0A1B2C3D", "B0E4F5G6H", "SECRETHOOKxyz123", "QUERYSECRET1")


def test_secret_parts_echoed_in_a_reason_phrase_are_scrubbed(repo: Path) -> None:
    """A gateway that quotes the path back, split into its segments, shows no secret."""
    hook = "/services/T0A1B2C3D/B0E4F5G6H/SECRETHOOKxyz123?key=QUERYSECRET1"
    server = Echo().start()
    try:
        env = clean_env(
            LOOPKIT_HITL_CHANNEL="slack",
            LOOPKIT_HITL_SLACK_WEBHOOK=server.url + hook,
            LOOPKIT_HITL_TIMEOUT="5",
        )
        result = run(ARGS, repo, env)
    finally:
        server.stop()
    assert result.returncode == 2
    stderr = result.stderr.decode()
    assert stderr.startswith("hitl: slack not notified: HTTP 404 no such hook services "), stderr
    assert stderr.count("\n") == 1
    for secret in SLACK_SECRETS:
        assert secret not in stderr and secret not in result.stdout.decode()


def test_a_telegram_token_echoed_in_any_form_is_scrubbed(repo: Path) -> None:
    """The token whole, URL-encoded in either case, and its secret half alone."""
    server = Echo(extra="token 123456%3aSECRET-TOKEN-abc half SECRET-TOKEN-abc").start()
    try:
        env = _channel_env("telegram", server.url, LOOPKIT_HITL_TIMEOUT="5")
        result = run(ARGS, repo, env)
    finally:
        server.stop()
    assert result.returncode == 2
    stderr = result.stderr.decode()
    assert stderr.startswith("hitl: telegram not notified: HTTP 404 no such hook"), stderr
    assert "SECRET" not in stderr and "SECRET" not in result.stdout.decode(), stderr


def test_scrub_masks_each_secret_part_of_a_webhook() -> None:
    hook = "https://hooks.slack.com/services/T0A1B2C3D/B0E4F5G6H/SECRETHOOKxyz123?k=QUERYSECRET1"
    text = "bad team T0A1B2C3D, bot B0E4F5G6H, hook SECRETHOOKxyz123, key QUERYSECRET1"
    assert scrub(text, [hook]) == "bad team ***, bot ***, hook ***, key ***"
    # Plain words of the path are not secrets, and stay readable.
    assert scrub("see services at hooks.slack.com", [hook]) == "see services at hooks.slack.com"
    assert scrub("123456%3aSECRET-TOKEN-abc and SECRET-TOKEN-abc", [TOKEN]) == "*** and ***"


# -- the category (issue 27, item 9) ------------------------------------------------------------

WITH_CATEGORY = EXPECTED.replace(b"# Blocked\n\n", b"# Blocked\n\nCategory: credentials\n\n", 1)


def test_a_category_is_written_under_the_title_and_read_back_by_hitl(
    repo: Path, chat: FakeChat
) -> None:
    env = clean_env(LOOPKIT_HITL_CHANNEL="slack", LOOPKIT_HITL_SLACK_WEBHOOK=chat.url)
    result = run([*ARGS, "--category", "Credentials"], repo, env)
    assert result.returncode == 2, result.stderr
    # One `Category:` line under the title: the seed's four sections stay as they were.
    assert (repo / "BLOCKED.md").read_bytes() == WITH_CATEGORY
    assert [json.loads(r.body)["text"].splitlines()[1:] for r in chat.requests] == [MESSAGE_TAIL]
    listed = subprocess.run(
        [sys.executable, "-m", "hitl_tui", "list", "--json", str(repo)],
        env=clean_env(),
        capture_output=True,
        timeout=30,
    )
    assert listed.returncode == 0, listed.stderr
    [block] = json.loads(listed.stdout)
    assert (block["source"], block["category"]) == ("loopkit", "credentials")
    assert block["question"] == QUESTION and [c["key"] for c in block["choices"]] == list("ABC")


def test_a_drafts_category_section_is_kept_and_category_overrides_it(repo: Path) -> None:
    draft = EXPECTED + b"\n## Category\n- Credentials\n"
    result = run(["--from-file", "-"], repo, stdin=draft)
    assert result.returncode == 2 and result.stderr == b""  # not left out as an extra section
    assert (repo / "BLOCKED.md").read_bytes() == WITH_CATEGORY
    result = run(["--from-file", "-", "--category", "contract", "--replace"], repo, stdin=draft)
    assert result.returncode == 2, result.stderr
    written = (repo / "BLOCKED.md").read_bytes()
    assert written == WITH_CATEGORY.replace(b"credentials", b"contract")
    assert parse_blocked(written.decode())[0]["category"] == "contract"


@pytest.mark.parametrize(
    "category", ["", "two\nlines", "**bold**", "# heading", "a" * 41, "cred: entials"]
)
def test_a_category_that_is_no_short_name_writes_nothing(repo: Path, category: str) -> None:
    result = run([*ARGS, "--category", category], repo)
    assert result.returncode == 1
    assert sorted(os.listdir(repo)) == [".git"]
    assert result.stderr.decode() == (
        "hitl: --category must be a short name (letters, digits, '-', at most 40 characters), "
        "like: transient, credentials, contract, review-exhausted, review-unknown, "
        "merge-conflict, ci-failure, tooling-failure, no-artifact, no-progress\n"
    )
