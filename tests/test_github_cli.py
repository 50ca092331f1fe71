"""`hitl list` and `hitl answer owner/name#12` against the fake GitHub server, via subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.github_fake import CREDENTIALS_NOTE as NOTE
from tests.github_fake import TOKEN, FakeGithub
from tests.hostile_cases import run_hitl
from tests.hostile_servers import EndlessPages, HugeBody, SlowLoris


@pytest.fixture
def fake():
    server = FakeGithub().start()
    server.add_issue("acme/shop", 12, title="Nightly export", labels=("blocked",))
    server.add_comment("acme/shop", 12, NOTE)
    server.add_issue("acme/api", 3, labels=("blocked",))
    yield server
    server.stop()


@pytest.fixture
def setup(tmp_path: Path, fake: FakeGithub) -> tuple[Path, Path]:
    work = tmp_path / "work"
    work.mkdir()
    config = tmp_path / "config.toml"
    config.write_text(
        'operator = "Ada"\n'
        f'[[github]]\nrepo = "acme/shop"\napi_url = "{fake.url}"\n'
        f'[[github]]\nrepo = "acme/api"\napi_url = "{fake.url}"\nloop_account = "loop-bot"\n'
    )
    return work, config


def hitl(*args: object, cwd: Path, token: str | None = TOKEN) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "GH_TOKEN")}
    env["PATH"] = str(cwd / "no-gh-here")  # no gh CLI: the token comes from the env or nowhere
    if token:
        env["GITHUB_TOKEN"] = token
    result = subprocess.run(
        [sys.executable, "-m", "hitl_tui", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        env={**env, "PYTHONUTF8": "1"},
    )
    assert TOKEN not in result.stdout + result.stderr
    return result


def test_list_includes_github_blocks(setup, fake):
    work, config = setup
    result = hitl("list", "--json", "--config", config, work, cwd=work)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    blocks = {b["id"]: b for b in json.loads(result.stdout)}
    shop = blocks["acme/shop#12"]
    assert (shop["source"], shop["repo"], shop["path"], shop["state"], shop["category"]) == (
        "github",
        "acme/shop",
        "https://github.example/acme/shop/issues/12",
        "blocked",
        "credentials",
    )
    assert shop["question"] == "an operator provides SFTP_PASSWORD"
    assert [c["key"] for c in shop["choices"]] == ["A", "B"]
    assert "acme/api#3" in blocks
    text = hitl("list", "--config", config, work, cwd=work)
    assert "acme/shop#12" in text.stdout and "an operator provides SFTP_PASSWORD" in text.stdout


def test_list_warns_once_per_failing_source_and_exits_0(setup, fake):
    work, config = setup
    fake.fail("GET", r"/repos/acme/api/issues", 401, times=5)
    result = hitl("list", "--json", "--config", config, work, cwd=work)
    assert result.returncode == 0
    assert [b["id"] for b in json.loads(result.stdout)] == ["acme/shop#12"]
    (line,) = result.stderr.splitlines()
    assert line.startswith("hitl: github acme/api (127.0.0.1:") and "unauthorised" in line


def test_list_without_a_token_warns_and_lists_what_it_can(setup, fake):
    work, config = setup
    result = hitl("list", "--config", config, work, cwd=work, token=None)
    assert result.returncode == 0
    # acme/shop needs GET /user (no loop_account) and says how to get a token; acme/api has a
    # loop_account, so it is read anonymously (the fake refuses that: unauthorised).
    lines = result.stderr.splitlines()
    assert len(lines) == 2 and "GITHUB_TOKEN" in lines[0]


def test_an_invalid_github_entry_is_a_usage_error(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[[github]]\nrepo = "not a repo"\n')
    result = hitl("list", "--config", config, tmp_path, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == f'hitl: {config}: [[github]] #1: repo must be "owner/name"\n'


def test_answer_dry_run_then_for_real(setup, fake):
    work, config = setup
    dry = hitl(
        "answer", "acme/shop#12", "--choice", "A", "--note", "It is set.", "--dry-run",
        "--config", config, cwd=work,
    )  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout == (
        "# post a comment on acme/shop#12\n| It is set.\n|\n| — Ada, via hitl\n"
        "# remove the label 'blocked' from acme/shop#12\n"
    )
    assert not fake.sent("POST") and not fake.sent("DELETE")
    done = hitl("answer", "acme/shop#12", "--text", "It is set.", "--config", config, cwd=work)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == (
        "acme/shop#12: posted the comment; removed label 'blocked'"
    )
    assert fake.comments[("acme/shop", 12)][-1]["body"] == "It is set.\n\n— Ada, via hitl\n"
    assert fake.labels_of("acme/shop", 12) == []
    # Answered: the issue holds no block any more (exit 3, nothing sent).
    again = hitl("answer", "acme/shop#12", "--text", "x", "--config", config, cwd=work)
    assert again.returncode == 3 and "no open block" in again.stderr
    assert len(fake.sent("POST")) == 1


def test_answer_errors_are_one_line(setup, fake):
    work, config = setup
    result = hitl(
        "answer", "acme/shop#12", "--text", "x", "--expect", "sha256:0000", "--config", config,
        cwd=work,
    )  # fmt: skip
    assert result.returncode == 3 and "changed since" in result.stderr
    assert not fake.sent("POST")
    result = hitl("answer", "other/repo#1", "--text", "x", "--config", config, cwd=work)
    assert (result.returncode, result.stderr) == (
        2,
        "hitl: other/repo is not in the [[github]] config (repo or org)\n",
    )
    result = hitl("answer", "acme/shop#12", "--choice", "Z", "--config", config, cwd=work)
    assert result.returncode == 2 and result.stderr.startswith("hitl: no choice 'Z'")
    fake.fail("GET", r"/issues/12$", 500, times=10)
    result = hitl("answer", "acme/shop#12", "--text", "x", "--config", config, cwd=work)
    assert result.returncode == 1 and len(result.stderr.splitlines()) == 1
    assert "server error 500" in result.stderr and "Traceback" not in result.stderr


def test_list_and_answer_with_github_never_load_textual(setup, fake):
    work, config = setup
    cfg = str(config)
    code = (
        "import sys; from hitl_tui.cli.commands import main; "
        f"main(['list', '--config', {cfg!r}, {str(work)!r}]); "
        f"main(['answer', 'acme/shop#12', '--text', 'ok', '--dry-run', '--config', {cfg!r}]); "
        "print('TEXTUAL', sorted(m for m in sys.modules if m.split('.')[0] == 'textual'))"
    )
    env = {**os.environ, "GITHUB_TOKEN": TOKEN}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env, cwd=work
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "TEXTUAL []"


# -- hostile servers: slow, endless, huge ------------------------------------------------------


def _hostile_setup(tmp_path: Path, url: str, extra: str = "") -> tuple[Path, Path]:
    """A workspace with one local block, and a config whose one GitHub source is `url`."""
    work = tmp_path / "work"
    (work / "shop" / ".git").mkdir(parents=True)
    (work / "shop" / "BLOCKED.md").write_text("## Question\nLocal question?\n## Choices\n- A) y\n")
    config = tmp_path / "config.toml"
    config.write_text(
        f'[[github]]\nrepo = "acme/shop"\napi_url = "{url}"\nloop_account = "loop-bot"\n{extra}'
    )
    return work, config


def _timed_list(work: Path, config: Path) -> tuple[subprocess.CompletedProcess, float]:
    began = time.monotonic()
    result = hitl("list", "--config", config, work, cwd=work)
    return result, time.monotonic() - began


def test_list_with_a_slow_loris_github_still_lists_local_blocks(tmp_path):
    """One byte every 0.3 s: each request is cut at the CLI's 5 s, tried twice, then reported."""
    server = SlowLoris().start()
    try:
        work, config = _hostile_setup(tmp_path, server.url)
        result, took = _timed_list(work, config)
    finally:
        server.stop()
    assert result.returncode == 0
    assert "Local question?" in result.stdout
    host = server.url.removeprefix("http://")
    assert result.stderr == (
        f"hitl: github acme/shop ({host}): unreachable: {host}: no complete answer within 5 s; "
        "its blocks are not listed\n"
    )
    assert took < 2 * 5 + 1.5 + 3, took  # two tries, a backoff of at most 1.5 s


def test_list_gives_up_at_the_poll_deadline(tmp_path):
    server = SlowLoris().start()
    try:
        work, config = _hostile_setup(tmp_path, server.url, "poll_timeout_seconds = 2\n")
        result, took = _timed_list(work, config)
    finally:
        server.stop()
    assert result.returncode == 0
    assert "Local question?" in result.stdout
    host = server.url.removeprefix("http://")
    assert result.stderr == (
        f"hitl: github acme/shop ({host}): unreachable: no complete answer within 2 s; "
        "its blocks are not listed\n"
    )
    assert took < 2 + 3, took


def test_list_gives_up_on_endless_pagination(tmp_path):
    """Comment pages nest in issue pages; the default budget is 1000 requests per poll."""
    server = EndlessPages(max_requests=3000).start()
    try:
        work, config = _hostile_setup(tmp_path, server.url)
        result, _took = _timed_list(work, config)
    finally:
        server.stop()
    assert result.returncode == 0
    assert "Local question?" in result.stdout
    host = server.url.removeprefix("http://")
    assert result.stderr == (
        f"hitl: github acme/shop ({host}): error: gave up after 1000 requests in one poll "
        "(poll_max_requests); its blocks are not listed\n"
    )
    # At most the budget; the last few may be cancelled in flight when the poll gives up.
    assert 990 <= len(server.requests) <= 1000


def test_list_caps_a_huge_response_in_bounded_memory(tmp_path, monkeypatch):
    """A 256 MiB issue list: read whole, the process peaked at over 600 MB."""
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    server = HugeBody(size=256 << 20).start()
    try:
        work, config = _hostile_setup(tmp_path, server.url)
        run = run_hitl("list", "--config", config, work, cwd=work)
    finally:
        server.stop()
    assert run.returncode == 0, run.err
    assert "Local question?" in run.out
    assert run.err == (
        f"hitl: github acme/shop ({server.url.removeprefix('http://')}): error: "
        f"{server.url}/repos/acme/shop/issues?state=open&per_page=100: the response is larger "
        "than 16 MiB; not read; its blocks are not listed\n"
    )
    print(f"peak RSS {run.max_rss / 1e6:.0f} MB, {run.seconds:.1f} s")
    assert run.max_rss < 150e6, run.max_rss


def test_answer_against_a_slow_loris_github_is_one_line_and_bounded(tmp_path):
    server = SlowLoris().start()
    try:
        work, config = _hostile_setup(tmp_path, server.url, "poll_timeout_seconds = 2\n")
        began = time.monotonic()
        result = hitl("answer", "acme/shop#1", "--text", "x", "--config", config, cwd=work)
        took = time.monotonic() - began
    finally:
        server.stop()
    assert result.returncode == 1
    assert result.stderr == "hitl: acme/shop#1: no complete answer within 2 s\n"
    assert took < 2 + 3, took


def test_a_github_answer_waits_until_the_loop_comments_or_relabels(setup, fake):
    """Did the loop resume, on GitHub: read afresh by `hitl status` (two requests an issue)."""
    work, config = setup

    def status() -> tuple[int, dict]:
        result = hitl("status", "--json", "--config", config, work, cwd=work)
        assert result.returncode in (0, 4), result.stderr
        return result.returncode, {r["name"]: r for r in json.loads(result.stdout)["repos"]}

    for target in ("acme/shop#12", "acme/api#3"):
        done = hitl("answer", target, "--text", "It is set.", "--config", config, cwd=work)
        assert done.returncode == 0, done.stderr
    code, repos = status()
    assert code == 0 and [w["id"] for w in repos["acme/shop"]["waiting"]] == ["acme/shop#12"]
    assert [w["id"] for w in repos["acme/api"]["waiting"]] == ["acme/api#3"]
    # hitl's own comment and label change are the baseline; a comment by someone other than
    # acme/api's loop account is no sign either.
    fake.add_comment("acme/api", 3, "me too", author="passer-by")
    fake.add_comment("acme/shop", 12, "Picked it up.\n\nAGENT_TASK_STATUS: in_progress\n")
    code, repos = status()
    [resumed] = repos["acme/shop"]["resumed"]
    assert resumed["how"] == "new comment by loop-bot" and repos["acme/api"]["waiting"]
    fake.set_labels("acme/api", 3, ["in-progress"])
    code, repos = status()
    [resumed] = repos["acme/api"]["resumed"]
    assert code == 0 and resumed["how"] == "labels changed: +in-progress"


def test_an_answer_sent_by_the_command_is_journaled(setup, fake):
    """`hitl answer owner/name#12`: what was sent is in the journal (`hitl history`), which
    the config gives the backend it builds (the sources never import the journal)."""
    work, config = setup
    done = hitl("answer", "acme/shop#12", "--text", "It is set.", "--config", config, cwd=work)
    assert done.returncode == 0, done.stderr
    listed = hitl("history", "--json", cwd=work)
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    assert [(d["block"]["id"], d["summary"], d["block"]["source"]) for d in data] == [
        (
            "acme/shop#12",
            "acme/shop#12: sent to GitHub: posted the comment; removed label 'blocked'",
            "github",
        )
    ]


def test_cat_filters_every_format_alike(setup, fake):
    """Issue 27, item 9: `cat:credentials` finds a loopkit block that declares it (written by
    `hitl escalate --category`), an agenticloop task, a GitHub issue; the asks carry theirs;
    and a term that finds none names the blocks that carry no category, by format."""
    import shutil

    from hitl_tui.agent.asking import Asker

    work, config = setup
    fixtures = Path(__file__).resolve().parent / "fixtures"
    shutil.copytree(fixtures / "agenticloop-billing", work / "billing")
    shutil.copytree(fixtures / "loopkit-shop", work / "plain")  # declares no category
    for repo in ("billing", "plain", "keys"):
        (work / repo / ".git").mkdir(parents=True)
    escalated = hitl(
        "escalate", "--question", "Where is STRIPE_KEY?", "--context", "Billing needs it.",
        "--attempted", "Looked in .env", "--choice", "Add it — you do", "--choice", "Mock it",
        "--category", "credentials", cwd=work / "keys",
    )  # fmt: skip
    assert escalated.returncode == 2, escalated.stderr
    Asker(work / "plain").ask("Which database?", ["Postgres", "SQLite"], "We need one.", ["docs"])
    Asker(work / "plain").ask_permission("Bash", {"command": "rm -rf build/"})

    def found(query: str) -> tuple[list[tuple[str, str]], str]:
        result = hitl("list", "--json", "--config", config, "--filter", query, work, cwd=work)
        assert result.returncode == 0, result.stderr
        return sorted((b["source"], b["id"]) for b in json.loads(result.stdout)), result.stderr

    assert found("cat:credentials") == (
        [("agenticloop", "billing/T-009"), ("github", "acme/shop#12"), ("loopkit", "keys")],
        "",
    )
    assert found("cat:contract") == ([("agenticloop", "billing/T-007")], "")
    [(source, _id)], said = found("cat:question")
    assert (source, said) == ("ask", "")
    [(source, _id)], said = found("cat:permission")
    assert (source, said) == ("ask", "")
    # The needs_context task, the issue without a loop comment, the undeclared BLOCKED.md.
    assert found("cat:review-exhausted") == (
        [],
        'hitl: cat: loopkit blocks carry no category unless BLOCKED.md says "Category: NAME" '
        "(1 here); 1 agenticloop, 1 github blocks carry none either\n",
    )
