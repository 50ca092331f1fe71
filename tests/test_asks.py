"""hitl's own asks (`.hitl/asks/<id>.json`, `hitl mcp`'s format) as a user finds them on disk and
in the CLI: filed by the agent's side (`Asker`, plain Python), listed, answered, undone and
guarded by the real `hitl` commands; hostile ask files written by hand; the live watcher.

The MCP protocol itself is tests/test_mcp.py's.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import orjson
import pytest

from hitl_tui.agent.asking import Asker, AskError
from hitl_tui.answers.apply import apply_plan
from hitl_tui.cli.commands import main
from hitl_tui.inbox.inbox import Delta, Inbox
from hitl_tui.inbox.watch import watch_inbox
from hitl_tui.model import Answer, StaleError, fingerprint
from hitl_tui.sources.asks import format as fmt
from hitl_tui.sources.asks import grants as grantfile
from hitl_tui.sources.asks.source import AskSource
from tests.support import until
from tests.support.repos import git

BLOCKED = "## Question\nWhich port?\n\n## Choices\n- A) 8080\n- B) 9090\n"
COMMAND = {"command": "rm -rf build/"}


# -- helpers -----------------------------------------------------------------------------------


def run(*args: object, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The real `hitl`, in a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "hitl_tui", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        env={**os.environ, "PYTHONUTF8": "1"},
    )


@pytest.fixture
def hitl(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture):
    """`hitl ...` in this process (same result shape as `run`)."""

    def call(*args: object, cwd: Path) -> subprocess.CompletedProcess[str]:
        monkeypatch.chdir(cwd)
        capsys.readouterr()
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(list(args), code, out, err)

    return call


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A real git repository at one commit, `shop`, with no `.hitl`; the operator is Ada."""
    repo = tmp_path / "shop"
    repo.mkdir()
    (repo / "README.md").write_text("shop\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "start")
    config = tmp_path / "hitl.toml"
    config.write_text('operator = "Ada"\n')
    monkeypatch.setenv("HITL_CONFIG", str(config))
    return repo


def tree(folder: Path) -> dict[str, bytes | str]:
    """Every entry under `folder`: a file's bytes, else what it is."""
    found: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if path.is_symlink():
            found[name] = "symlink -> " + os.readlink(path)
        elif path.is_file():
            found[name] = path.read_bytes()
        else:
            found[name] = "folder" if path.is_dir() else "other"
    return found


def ask_file(repo: Path, ask_id: str) -> Path:
    return repo / ".hitl" / "asks" / f"{ask_id}.json"


def listed(hitl, repo: Path) -> list[dict]:
    result = hitl("list", "--json", repo, cwd=repo.parent)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return json.loads(result.stdout)


def one_line_error(result: subprocess.CompletedProcess[str], code: int) -> str:
    assert result.returncode == code, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert result.stderr.startswith("hitl: ") and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    return result.stderr


def changed_lines(before: bytes, after: bytes) -> tuple[list[bytes], list[bytes]]:
    """The lines only in `before` and the lines only in `after`, with every other line (and
    its place) the same."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    i = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), len(old))
    j = 0
    while j < len(old) - i and j < len(new) - i and old[-1 - j] == new[-1 - j]:
        j += 1
    return old[i : len(old) - j], new[i : len(new) - j]


# -- 1. filing ---------------------------------------------------------------------------------


def test_an_ask_is_one_file_in_hitl_asks_that_git_never_sees(repo: Path) -> None:
    ask = Asker(repo).ask(
        "Which database?", ["Postgres — safe", "SQLite"], "We need one.", ["read the docs"]
    )
    assert fmt.ID_RE.match(ask.id)
    assert (
        repo / ".hitl" / ".gitignore"
    ).read_bytes() == b"# hitl's asks and grants: never committed\n*\n"
    assert sorted(tree(repo / ".hitl")) == [".gitignore", "asks", f"asks/{ask.id}.json"]
    lines = ask_file(repo, ask.id).read_text().splitlines()
    assert lines[0] == "{" and lines[-1] == "}"
    assert lines[1:5] == [
        ' "hitl_ask": 1,',
        f' "id": "{ask.id}",',
        ' "kind": "question",',
        ' "status": "open",',
    ]
    assert lines[6:-1] == [
        ' "question": "Which database?",',
        ' "context": "We need one.",',
        ' "attempted": ["read the docs"],',
        ' "choices": ["Postgres — safe","SQLite"]',
    ]
    assert git(repo, "status", "--porcelain") == ""
    # A second ask is a second file beside it.
    second = Asker(repo).ask_permission("Bash", COMMAND)
    assert sorted(p.name for p in (repo / ".hitl" / "asks").iterdir()) == sorted(
        [f"{ask.id}.json", f"{second.id}.json"]
    )
    assert git(repo, "status", "--porcelain") == ""


def test_a_hitl_folder_made_without_its_gitignore_gets_one(repo: Path) -> None:
    """A `.hitl` that is already there (an older hitl, made by hand, its `.gitignore` removed)
    still ends up ignored: a loop that commits everything never commits an ask."""
    (repo / ".hitl").mkdir()
    Asker(repo).ask("Which database?")
    assert git(repo, "status", "--porcelain") == ""
    assert (repo / ".hitl" / ".gitignore").read_bytes() == fmt.GITIGNORE


def test_a_hitl_gitignore_of_the_users_own_is_kept(repo: Path) -> None:
    (repo / ".hitl").mkdir()
    (repo / ".hitl" / ".gitignore").write_bytes(b"# mine\n*\n")
    Asker(repo).ask("Which database?")
    assert (repo / ".hitl" / ".gitignore").read_bytes() == b"# mine\n*\n"


def _long(n: int) -> str:
    return "x" * n


#: (what an agent sends, the one line it is refused with).
TOO_MUCH = [
    (dict(question=_long(4001)), "question is 4,001 characters (at most 4,000)"),
    (dict(question="q", context=_long(16001)), "context is 16,001 characters (at most 16,000)"),
    (dict(question="q", attempted=["a"] * 21), "attempted has 21 items (at most 20)"),
    (dict(question="q", attempted=[_long(1001)]), "attempted[0] is 1,001 characters"),
    (dict(question="q", choices=["c"] * 21), "choices has 21 items (at most 20)"),
    (dict(question="q", choices=["ok", _long(501)]), "choices[1] is 501 characters"),
    (dict(question=""), "question is empty"),
    (dict(question="  \n"), "question is empty"),
    (dict(question=5), "question must be a string"),
    (dict(question="q", choices="A or B"), "choices must be a list of strings"),
    (dict(question="q", choices=["A", 2]), "choices[1] must be a string"),
    (dict(question="q", context=["c"]), "context must be a string"),
    (dict(question="\ud800"), "question"),
    (dict(question="q", choices=["\udfff"]), "choices"),
]

TOO_MUCH_PERMISSION = [
    (("B" * 201, COMMAND), "tool_name is 201 characters (at most 200)"),
    (("Bash", {"command": _long(256 * 1024)}), "input is 262,158 bytes of JSON (at most 262,144)"),
    (("Bash", ["rm"]), "input must be an object"),
    (("", COMMAND), "tool_name is empty"),
    (("Bash", {"command": "\ud800"}), "input"),
    (("Bash", {"when": {1, 2}}), "input"),
]


@pytest.mark.parametrize(("fields", "message"), TOO_MUCH)
def test_a_question_beyond_a_bound_is_refused_in_one_line_and_nothing_is_written(
    repo: Path, fields: dict, message: str
) -> None:
    with pytest.raises(AskError) as caught:
        Asker(repo).ask(**fields)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)
    assert not (repo / ".hitl").exists()


@pytest.mark.parametrize(("request_", "message"), TOO_MUCH_PERMISSION)
def test_a_permission_request_beyond_a_bound_is_refused_and_nothing_is_written(
    repo: Path, request_: tuple, message: str
) -> None:
    asker = Asker(repo)
    for call in (asker.ask_permission, asker.approve_at_once):
        with pytest.raises(AskError) as caught:
            call(*request_, tool_use_id="")
        assert message in str(caught.value)
        assert "\n" not in str(caught.value)
    with pytest.raises(AskError, match="tool_use_id is 201 characters"):
        asker.ask_permission("Bash", COMMAND, "t" * 201)
    assert not (repo / ".hitl").exists()


def test_an_ask_at_every_bound_is_filed_and_listed(repo: Path, hitl) -> None:
    limits = fmt.LIMITS
    ask = Asker(repo).ask(
        "?" * limits["question"],
        ["\x1b" * limits["choice"]] * limits["choices"],
        "\x00" * limits["context"],
        ["\u2028" * limits["attempted_item"]] * limits["attempted"],
    )
    assert ask_file(repo, ask.id).stat().st_size < fmt.MAX_FILE
    (block,) = listed(hitl, repo)
    assert block["question"] == "?" * limits["question"]
    assert len(block["choices"]) == limits["choices"]


def test_the_open_asks_of_a_repo_are_bounded(repo: Path, hitl) -> None:
    asker = Asker(repo)
    ids = [asker.ask(f"question {i}").id for i in range(fmt.MAX_OPEN)]
    before = tree(repo / ".hitl")
    with pytest.raises(AskError, match=f"shop already has {fmt.MAX_OPEN} open asks"):
        asker.ask("one more")
    with pytest.raises(AskError, match="open asks"):
        asker.approve_at_once("Bash", COMMAND)
    assert tree(repo / ".hitl") == before
    # One answered: room for one more.
    assert hitl("answer", f"shop/{ids[0]}", "--text", "yes", cwd=repo).returncode == 0
    asker.ask("one more")
    with pytest.raises(AskError, match="open asks"):
        asker.ask("and another")


@pytest.mark.parametrize("which", [".hitl", ".hitl/asks"])
def test_a_symlinked_hitl_folder_is_refused_and_nothing_is_written_outside(
    repo: Path, tmp_path: Path, hitl, which: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    # A valid ask waits there: hitl must neither write beside it nor list it.
    planted = fmt.render(
        {
            "hitl_ask": 1,
            "id": "ask-planted1",
            "kind": "question",
            "status": "open",
            "question": "from outside",
        }
    )
    (outside / "ask-planted1.json").write_bytes(planted)
    if which == ".hitl/asks":
        (repo / ".hitl").mkdir()
    (repo / which).symlink_to(outside, target_is_directory=True)
    before = tree(outside)
    with pytest.raises(AskError, match="a symlink is refused") as caught:
        Asker(repo).ask("Which database?")
    assert "\n" not in str(caught.value)
    with pytest.raises(AskError, match="a symlink is refused"):
        Asker(repo).approve_at_once("Bash", COMMAND)
    assert tree(outside) == before
    assert listed(hitl, repo) == []
    assert hitl("guard", repo, cwd=repo).returncode == 0


def test_a_dangling_hitl_symlink_makes_nothing_where_it_points(repo: Path, tmp_path: Path) -> None:
    (repo / ".hitl").symlink_to(tmp_path / "nowhere")
    with pytest.raises(AskError, match="a symlink is refused"):
        Asker(repo).ask("Which database?")
    assert not (tmp_path / "nowhere").exists()


# -- 2. listing and guard ----------------------------------------------------------------------


def test_list_json_shows_each_open_ask_beside_a_blocked_md(repo: Path) -> None:
    (repo / "BLOCKED.md").write_text(BLOCKED)
    blocked = (repo / "BLOCKED.md").read_bytes()
    asker = Asker(repo)
    question = asker.ask(
        "Which database?", ["Postgres — safe, slower", "SQLite"], "We need one.", ["read docs"]
    )
    second = asker.ask("And which port?")
    permission = asker.ask_permission("Bash", COMMAND, "toolu_01")
    result = run("list", "--json", repo, cwd=repo.parent)
    assert result.returncode == 0, result.stderr
    blocks = {b["id"]: b for b in json.loads(result.stdout)}
    assert set(blocks) == {
        "shop",
        f"shop/{question.id}",
        f"shop/{second.id}",
        f"shop/{permission.id}",
    }
    q = blocks[f"shop/{question.id}"]
    assert (q["source"], q["category"], q["state"]) == ("ask", "question", "blocked")
    assert q["path"] == str(ask_file(repo, question.id))
    assert (q["question"], q["context"], q["attempted"]) == (
        "Which database?",
        "We need one.",
        ["read docs"],
    )
    assert q["choices"] == [
        {"key": "A", "option": "Postgres", "consequence": "safe, slower"},
        {"key": "B", "option": "SQLite", "consequence": None},
    ]
    assert q["fingerprint"] == fingerprint(ask_file(repo, question.id).read_bytes())
    assert blocks[f"shop/{second.id}"]["choices"] == []
    p = blocks[f"shop/{permission.id}"]
    assert (p["source"], p["category"], p["title"]) == ("ask", "permission", "Permission: Bash")
    assert p["question"] == "Allow Bash: `rm -rf build/`?"
    assert '"command": "rm -rf build/"' in p["context"]
    assert [(c["key"], c["option"]) for c in p["choices"]] == [
        ("A", "Allow once"),
        ("B", "Allow always"),
        ("C", "Deny"),
    ]
    assert blocks["shop"]["source"] == "loopkit"
    assert (repo / "BLOCKED.md").read_bytes() == blocked


def test_guard_stops_the_loop_while_an_ask_is_open(repo: Path, hitl) -> None:
    assert run("guard", repo, cwd=repo).returncode == 0
    ask = Asker(repo).ask("Which database?")
    result = run("guard", repo, cwd=repo)
    assert result.returncode == 2
    assert result.stdout == f"shop/{ask.id}: blocked (question): Which database?\n"
    assert hitl("answer", f"shop/{ask.id}", "--text", "Postgres", cwd=repo).returncode == 0
    result = run("guard", repo, cwd=repo)
    assert (result.returncode, result.stdout) == (0, "")


# -- 3. answering ------------------------------------------------------------------------------


def test_an_answer_changes_the_status_line_and_adds_one_answer_line(repo: Path, hitl) -> None:
    asker = Asker(repo)
    ask = asker.ask("Which database?", ["Postgres — safe", "SQLite"])
    before = ask_file(repo, ask.id).read_bytes()
    result = hitl("answer", f"shop/{ask.id}", "--choice", "A", "--note", "keep it", cwd=repo)
    assert result.returncode == 0, result.stderr
    after = ask_file(repo, ask.id).read_bytes()
    gone, came = changed_lines(before, after)
    assert gone == [b' "status": "open",\n']
    assert came[0] == b' "status": "answered",\n'
    assert len(came) == 2 and came[1].startswith(b' "answer": {') and came[1].endswith(b"},\n")
    answer = orjson.loads(came[1].strip()[len(b'"answer": ') : -1])
    assert {k: answer[k] for k in ("key", "choice", "answer", "by")} == {
        "key": "A",
        "choice": "Postgres",
        "answer": "Postgres (operator note: keep it)",
        "by": "Ada",
    }
    assert listed(hitl, repo) == []
    # The agent's side gets it once: the file says delivered, and it stays so.
    assert asker.check(ask.id) == {
        "status": "answered",
        "id": f"shop/{ask.id}",
        "choice": "Postgres",
        "answer": "Postgres (operator note: keep it)",
    }
    delivered = ask_file(repo, ask.id).read_bytes()
    gone, came = changed_lines(after, delivered)
    assert gone == [b' "status": "answered",\n']
    assert came[0] == b' "status": "delivered",\n' and came[1].startswith(b' "delivered": "')
    assert asker.check(ask.id)["status"] == "answered"
    assert ask_file(repo, ask.id).read_bytes() == delivered


def test_own_words_answer_a_question_and_check_finds_the_newest(repo: Path, hitl) -> None:
    asker = Asker(repo)
    asker.ask("First?")
    ask = asker.ask("Which database?", ["Postgres", "SQLite"])
    assert asker.check() == {
        "status": "waiting",
        "id": f"shop/{ask.id}",
        "choice": None,
        "answer": None,
    }
    assert hitl("answer", f"shop/{ask.id}", "--text", "neither: MySQL", cwd=repo).returncode == 0
    assert asker.check() == {
        "status": "answered",
        "id": f"shop/{ask.id}",
        "choice": None,
        "answer": "neither: MySQL",
    }
    assert asker.check("ask-unknown1")["status"] == "unknown"


def test_an_answer_beyond_the_bound_is_a_usage_error_and_writes_nothing(repo: Path, hitl) -> None:
    ask = Asker(repo).ask("Which database?")
    before = tree(repo / ".hitl")
    text = "x" * (fmt.LIMITS["answer"] + 1)
    result = hitl("answer", f"shop/{ask.id}", "--text", text, cwd=repo)
    assert "16,001 characters (at most 16,000)" in one_line_error(result, 2)
    assert tree(repo / ".hitl") == before


def test_allow_always_writes_a_grant_that_allows_at_once(repo: Path, hitl) -> None:
    asker = Asker(repo)
    verdict, ask_id = asker.approve_at_once("Bash", COMMAND)
    assert verdict is None
    before = ask_file(repo, ask_id).read_bytes()
    result = hitl("answer", f"shop/{ask_id}", "--choice", "B", cwd=repo)
    assert result.returncode == 0, result.stderr
    assert "created .hitl/grants.jsonl" in result.stdout
    gone, came = changed_lines(before, ask_file(repo, ask_id).read_bytes())
    assert gone == [b' "status": "open",\n'] and came[0] == b' "status": "answered",\n'
    assert b'"verdict":"allow","always":true' in came[1]
    lines = (repo / ".hitl" / "grants.jsonl").read_bytes().splitlines(keepends=True)
    assert len(lines) == 1 and lines[0].endswith(b"}\n")
    grant = orjson.loads(lines[0])
    assert grant["tool"] == "Bash" and grant["summary"] == "Bash: rm -rf build/"
    assert (grant["by"], grant["ask"]) == ("Ada", ask_id)
    assert grant["input_sha"] == fmt.input_sha(COMMAND)
    # The grant allows at once, every time, with no ask filed; the answered ask itself is used
    # by the first call (delivered), and the keys' order of the input does not matter.
    for _ in range(3):
        got, _ = asker.approve_at_once("Bash", dict(reversed(list({"a": 1, **COMMAND}.items()))))
        assert got is None or got.allow
        verdict, _ = asker.approve_at_once("Bash", COMMAND)
        assert verdict is not None and verdict.allow
    assert git(repo, "status", "--porcelain") == ""
    listed_grants = json.loads(hitl("grants", "--json", repo, cwd=repo).stdout)
    assert listed_grants == [{**grant, "repo": str(repo), "repo_id": "shop"}]
    # A different input is asked.
    verdict, other = asker.approve_at_once("Bash", {"command": "rm -rf /"})
    assert verdict is None and other != ask_id


@pytest.mark.parametrize(
    ("existing", "kept", "ending"),
    [
        pytest.param(b"# mine\n", b"# mine\n", b"\n", id="lf"),
        pytest.param(b"# mine", b"# mine\n", b"\n", id="no-final-newline"),
        pytest.param(b"# mine\r\n", b"# mine\r\n", b"\r\n", id="crlf"),
        pytest.param(b"# 1\r\n# 2", b"# 1\r\n# 2\r\n", b"\r\n", id="crlf-no-final-newline"),
    ],
)
def test_a_grant_is_appended_to_a_grants_file_in_its_own_line_endings(
    repo: Path, hitl, existing: bytes, kept: bytes, ending: bytes
) -> None:
    asker = Asker(repo)
    _, ask_id = asker.approve_at_once("Bash", COMMAND)
    grants = repo / ".hitl" / "grants.jsonl"
    grants.write_bytes(existing)
    assert hitl("answer", f"shop/{ask_id}", "--choice", "B", cwd=repo).returncode == 0
    data = grants.read_bytes()
    assert data.startswith(kept)
    added = data[len(kept) :]
    assert added.endswith(ending) and added.count(b"\n") == 1
    assert orjson.loads(added)["ask"] == ask_id
    assert grantfile.find(repo, "Bash", fmt.input_sha(COMMAND)) is not None
    # Undo gives the file its exact bytes back.
    assert hitl("undo", cwd=repo).returncode == 0
    assert grants.read_bytes() == existing


def test_allow_once_allows_the_next_identical_request_once(repo: Path, hitl) -> None:
    asker = Asker(repo)
    verdict, first = asker.approve_at_once("Bash", COMMAND)
    assert verdict is None
    # Asked again before the operator answers: the same open ask, no second one.
    assert asker.approve_at_once("Bash", COMMAND) == (None, first)
    assert len(list((repo / ".hitl" / "asks").iterdir())) == 1
    assert hitl("answer", f"shop/{first}", "--choice", "A", cwd=repo).returncode == 0
    verdict, used = asker.approve_at_once("Bash", COMMAND)
    assert verdict is not None and verdict.allow and used == first
    assert b'"status": "delivered",' in ask_file(repo, first).read_bytes()
    verdict, second = asker.approve_at_once("Bash", COMMAND)
    assert verdict is None and second != first
    assert [b["id"] for b in listed(hitl, repo)] == [f"shop/{second}"]
    assert not (repo / ".hitl" / "grants.jsonl").exists()


def test_deny_in_own_words_tells_the_agent_why(repo: Path, hitl) -> None:
    asker = Asker(repo)
    _, ask_id = asker.approve_at_once("Bash", COMMAND)
    assert hitl("answer", f"shop/{ask_id}", "--text", "build/ is shared", cwd=repo).returncode == 0
    verdict, _ = asker.approve_at_once("Bash", COMMAND)
    assert verdict is not None and not verdict.allow
    assert verdict.message == f"build/ is shared (hitl: shop/{ask_id})"
    _, denied = asker.approve_at_once("Bash", COMMAND)
    assert hitl("answer", f"shop/{denied}", "--choice", "C", cwd=repo).returncode == 0
    verdict, _ = asker.approve_at_once("Bash", COMMAND)
    assert verdict is not None and not verdict.allow
    assert verdict.message.startswith("The operator denied this.")


def test_two_agents_racing_for_one_allow_once_answer_get_it_once(
    repo: Path, hitl, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two identical requests at once (an agent and its subagent) after an Allow once: the
    answer is handed over once; the other is asked again."""
    first_agent, second_agent = Asker(repo), Asker(repo)
    _, ask_id = first_agent.approve_at_once("Bash", COMMAND)
    assert hitl("answer", f"shop/{ask_id}", "--choice", "A", cwd=repo).returncode == 0
    real = fmt.delivered_bytes
    raced: list[tuple] = []

    def racing(data: bytes, when):  # the second agent takes it between our read and write
        if not raced:
            raced.append(())
            raced.append(second_agent.approve_at_once("Bash", COMMAND))
        return real(data, when)

    monkeypatch.setattr(fmt, "delivered_bytes", racing)
    verdict, new_id = first_agent.approve_at_once("Bash", COMMAND)
    other, taken = raced[1]
    assert other is not None and other.allow and taken == ask_id  # the second agent got it
    assert verdict is None  # and the first is asked again: a new ask in the inbox
    assert [b["id"] for b in listed(hitl, repo)] == [f"shop/{new_id}"]


# -- 4. undo, grants ---------------------------------------------------------------------------


def test_undo_puts_the_ask_back_open_byte_for_byte(repo: Path, hitl) -> None:
    asker = Asker(repo)
    _, ask_id = asker.approve_at_once("Bash", COMMAND)
    before = tree(repo / ".hitl")
    assert hitl("answer", f"shop/{ask_id}", "--choice", "B", cwd=repo).returncode == 0
    result = hitl("undo", cwd=repo)
    assert result.returncode == 0, result.stderr
    assert tree(repo / ".hitl") == before  # the grant's file, created by the answer, is gone
    assert [b["id"] for b in listed(hitl, repo)] == [f"shop/{ask_id}"]
    assert asker.approve_at_once("Bash", COMMAND) == (None, ask_id)


def test_undo_after_the_agent_got_the_answer_is_refused_even_forced(repo: Path, hitl) -> None:
    asker = Asker(repo)
    ask = asker.ask("Which database?", ["Postgres", "SQLite"])
    assert hitl("answer", f"shop/{ask.id}", "--choice", "A", cwd=repo).returncode == 0
    assert asker.deliver(ask.id).status == "delivered"
    delivered = tree(repo / ".hitl")
    for args in (("undo",), ("undo", "--force")):
        message = one_line_error(hitl(*args, cwd=repo), 3)
        assert f".hitl/asks/{ask.id}.json changed since the answer; nothing was changed" in message
    assert tree(repo / ".hitl") == delivered


def test_undo_of_an_answer_the_loop_committed_after_is_refused(repo: Path, hitl) -> None:
    ask = Asker(repo).ask("Which database?")
    assert hitl("answer", f"shop/{ask.id}", "--text", "Postgres", cwd=repo).returncode == 0
    answered = ask_file(repo, ask.id).read_bytes()
    git(repo, "commit", "-q", "--allow-empty", "-m", "use Postgres")
    message = one_line_error(hitl("undo", cwd=repo), 3)
    assert "commit" in message and '"use Postgres" after it' in message
    assert ask_file(repo, ask.id).read_bytes() == answered


def test_revoking_a_grant_is_journaled_and_undone_byte_for_byte(repo: Path, hitl) -> None:
    asker = Asker(repo)
    grants = repo / ".hitl" / "grants.jsonl"
    ids = []
    for command in ("make", "make test"):
        _, ask_id = asker.approve_at_once("Bash", {"command": command})
        assert hitl("answer", f"shop/{ask_id}", "--choice", "B", cwd=repo).returncode == 0
        ids.append(orjson.loads(grants.read_bytes().splitlines()[-1])["id"])
        assert asker.approve_at_once("Bash", {"command": command})[0] is not None  # delivered
    before = grants.read_bytes()
    result = hitl("grants", repo, cwd=repo)
    assert result.stdout.splitlines()[0].startswith(f"{ids[0]}  shop  Bash: make  (by Ada, ")
    result = hitl("grants", "--revoke", ids[0], repo, cwd=repo)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"revoked {ids[0]} in shop: Bash: make"
    assert grants.read_bytes() == before.splitlines(keepends=True)[1]
    assert asker.approve_at_once("Bash", {"command": "make"})[0] is None
    assert asker.approve_at_once("Bash", {"command": "make test"})[0] is not None
    assert [g["id"] for g in json.loads(hitl("grants", "--json", repo, cwd=repo).stdout)] == ids[1:]
    git(repo, "commit", "-q", "--allow-empty", "-m", "the agent's work")  # not about grants
    # Revoked twice: one line, nothing written.
    assert "no grant" in one_line_error(hitl("grants", "--revoke", ids[0], repo, cwd=repo), 2)
    assert hitl("undo", cwd=repo).returncode == 0
    assert grants.read_bytes() == before


def test_a_grant_line_copied_twice_is_revoked_whole(repo: Path, hitl) -> None:
    """A grant's line twice in the file (copied by hand, or by an agent that wants to keep
    it): `--revoke` removes both, so the tool is asked again (it said the grant was in two
    repositories, and nothing could revoke it)."""
    asker = Asker(repo)
    _, ask_id = asker.approve_at_once("Bash", COMMAND)
    assert hitl("answer", f"shop/{ask_id}", "--choice", "B", cwd=repo).returncode == 0
    assert asker.approve_at_once("Bash", COMMAND)[0] is not None  # delivered
    grants = repo / ".hitl" / "grants.jsonl"
    line = grants.read_bytes()
    grants.write_bytes(b"# kept\n" + line + line)
    grant_id = orjson.loads(line)["id"]
    result = hitl("grants", "--revoke", grant_id, repo, cwd=repo)
    assert result.returncode == 0, result.stderr
    assert grants.read_bytes() == b"# kept\n"
    assert asker.approve_at_once("Bash", COMMAND)[0] is None
    assert hitl("undo", cwd=repo).returncode == 0
    assert grants.read_bytes() == b"# kept\n" + line + line


def test_grants_with_none_and_a_hostile_grants_file(repo: Path, hitl) -> None:
    assert hitl("grants", repo, cwd=repo).stdout == "no grants\n"
    assert hitl("grants", "--json", repo, cwd=repo).stdout == "[]\n"
    (repo / ".hitl").mkdir()
    evil = {
        "id": "grant-abcd1",
        "tool": "Bash",
        "input_sha": "x",
        "summary": "\x1b[2J[bold red]boom[/]",
        "granted": "2026-12-03T10:00:00+00:00",
        "by": "\x07",
        "ask": "ask-x",
    }
    (repo / ".hitl" / "grants.jsonl").write_bytes(
        b"not json\n[1]\n\x00\xff\n" + orjson.dumps(evil) + b"\n" + orjson.dumps({**evil, "id": 5})
    )
    result = hitl("grants", repo, cwd=repo)
    assert result.returncode == 0
    assert result.stdout.count("\n") == 1 and "\x1b" not in result.stdout
    assert "[bold red]boom[/]" in result.stdout
    assert [g["summary"] for g in json.loads(hitl("grants", "--json", repo, cwd=repo).stdout)] == [
        evil["summary"]
    ]


# -- 5. stale ----------------------------------------------------------------------------------


def test_an_ask_rewritten_after_it_was_read_is_not_answered(repo: Path, hitl) -> None:
    ask = Asker(repo).ask("Which database?", ["Postgres", "SQLite"])
    path = ask_file(repo, ask.id)
    inbox = Inbox.open([repo])
    (block,) = inbox.blocks.values()
    source = AskSource()
    answer = Answer(choice=block.choices[0], operator="Ada")
    plan = source.plan(block, answer)  # planned from what the operator read ...
    rewritten = path.read_bytes().replace(b"Which database?", b"Drop the database?")
    path.write_bytes(rewritten)  # ... and then the agent changed its question
    with pytest.raises(StaleError) as caught:
        apply_plan(plan)
    assert "\n" not in str(caught.value)
    with pytest.raises(StaleError, match="the ask changed since it was read"):
        source.plan(block, answer)
    assert path.read_bytes() == rewritten
    result = hitl(
        "answer", f"shop/{ask.id}", "--choice", "A", "--expect", block.fingerprint, cwd=repo
    )
    one_line_error(result, 3)
    assert path.read_bytes() == rewritten
    assert hitl("history", cwd=repo).stdout == "no answers in the journal yet\n"


def test_an_ask_answered_twice_is_refused_the_second_time(repo: Path, hitl) -> None:
    ask = Asker(repo).ask("Which database?")
    (block,) = Inbox.open([repo]).blocks.values()
    assert hitl("answer", f"shop/{ask.id}", "--text", "one", cwd=repo).returncode == 0
    answered = ask_file(repo, ask.id).read_bytes()
    with pytest.raises(StaleError):
        apply_plan(AskSource().plan(block, Answer(texts=("two",))))
    assert ask_file(repo, ask.id).read_bytes() == answered


# -- 6. hostile ask files ----------------------------------------------------------------------


WRONG_TYPES = {
    "hitl_ask": "one",
    "id": "ask-types1",
    "kind": 5,
    "status": [],
    "asked": 7,
    "question": {"a": 1},
    "context": 3,
    "attempted": "x",
    "choices": [1, 2],
    "client": [],
    "tool": 1,
    "input": "s",
    "input_sha": 2,
    "tool_use_id": 3,
    "answer": "x",
    "delivered": 5,
}

ESCAPES = "\x1b[2J\x1b]0;pwned\x07 [bold red]boom[/] \r\n\u202e done"

#: (file name, how it is made, what its block's question says)
HOSTILE = [
    ("ask-notjson1.json", b"not json", "(this ask could not be read: it is not JSON"),
    ("ask-binary01.json", b"\x00\x01\xff\xfe", "(this ask could not be read: it is not JSON"),
    ("ask-array001.json", b"[1, 2]", "(this ask could not be read: it is not a JSON object)"),
    ("ask-types1.json", orjson.dumps(WRONG_TYPES), "(no question given)"),
    ("ask-huge0001.json", "huge", "(this ask could not be read: it is 5,000,000 bytes"),
    ("ask-fifo0001.json", "fifo", "(this ask could not be read: it is a FIFO, not a file)"),
    ("ask-folder01.json", "folder", "(this ask could not be read: it is a folder, not a file)"),
    ("ask-other01.json", orjson.dumps({"id": "ask-named2", "question": "whose?"}), "whose?"),
    ("ask-escape1.json", orjson.dumps({"id": "ask-escape1", "question": ESCAPES}), ESCAPES),
    ("notanid.json", orjson.dumps({"id": "../../x", "question": "q"}), "(this ask could not"),
]


def plant(folder: Path, name: str, what: bytes | str) -> None:
    path = folder / name
    if what == "huge":
        path.write_bytes(b" " * 5_000_000)
    elif what == "fifo":
        os.mkfifo(path)
    elif what == "folder":
        path.mkdir()
    else:
        assert isinstance(what, bytes)
        path.write_bytes(what)


@pytest.mark.parametrize(("name", "what", "shown"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_ask_file_is_listed_as_text_and_nothing_is_written(
    repo: Path, hitl, name: str, what: bytes | str, shown: str
) -> None:
    folder = repo / ".hitl" / "asks"
    folder.mkdir(parents=True)
    plant(folder, name, what)
    before = tree(repo)
    (block,) = listed(hitl, repo)
    assert block["id"] == f"shop/{name[: -len('.json')]}"
    assert block["question"].startswith(shown)
    if block["question"].startswith("(this ask could not be read"):
        assert block["problems"] and block["problems"][0].startswith(f"{name} could not be read")
        result = hitl("answer", block["id"], "--text", "yes", cwd=repo)
        assert "cannot be read" in one_line_error(result, 1)
    plain = hitl("list", repo, cwd=repo)
    assert plain.returncode == 0 and plain.stdout.count("\n") == 1
    assert not any(ch in plain.stdout for ch in "\x1b\x07\r\u202e")
    assert run("guard", repo, cwd=repo).returncode == 2
    # The agent's side reads past it too.
    asker = Asker(repo)
    assert asker.check()["status"] in ("unknown", "waiting")
    assert asker.approve_at_once("Bash", COMMAND)[0] is None
    after = tree(repo)
    assert {k: v for k, v in after.items() if k in before} == before


@pytest.mark.parametrize("target", ["outside", "nowhere", "inside"])
def test_a_symlink_in_the_asks_folder_is_shown_never_followed(
    repo: Path, tmp_path: Path, hitl, target: str
) -> None:
    """A valid ask behind a symlink (outside the repo, dangling, or inside it) is an
    unreadable block: never read through, never answered, and the loop stays stopped."""
    folder = repo / ".hitl" / "asks"
    folder.mkdir(parents=True)
    real = fmt.render(
        {
            "hitl_ask": 1,
            "id": "ask-linked1",
            "kind": "question",
            "status": "open",
            "question": "behind a link",
        }
    )
    where = {
        "outside": tmp_path / "x.json",
        "nowhere": tmp_path / "none.json",
        "inside": repo / "x.json",
    }[target]
    if target != "nowhere":
        where.write_bytes(real)
    (folder / "ask-linked1.json").symlink_to(where)
    before = tree(tmp_path)
    (block,) = [b for b in listed(hitl, repo)]
    assert block["id"] == "shop/ask-linked1"
    assert block["question"] == (
        "(this ask could not be read: it is a symlink (hitl reads asks only as files))"
    )
    assert "cannot be read" in one_line_error(
        hitl("answer", block["id"], "--text", "y", cwd=repo), 1
    )
    assert run("guard", repo, cwd=repo).returncode == 2
    assert Asker(repo).check("ask-linked1")["status"] == "unknown"
    assert tree(tmp_path) == before


@pytest.mark.parametrize(
    "asked", ["0001-01-01T00:00:00-12:00", "9999-12-31T23:59:59-12:00", "1969-12-31T23:59:59Z"]
)
def test_an_asked_time_out_of_range_spoils_no_block_s_age(repo: Path, hitl, asked: str) -> None:
    """hitl remembers when each block began (its state folder): an agent's absurd `asked`
    must not make that memory unreadable, which resets every block's age."""
    (repo / "BLOCKED.md").write_text(BLOCKED)
    os.utime(repo / "BLOCKED.md", (1_700_000_000, 1_700_000_000))
    folder = repo / ".hitl" / "asks"
    folder.mkdir(parents=True)
    data = {"id": "ask-when0001", "status": "open", "asked": asked, "question": "when?"}
    (folder / "ask-when0001.json").write_bytes(orjson.dumps(data))
    for _ in range(2):
        result = hitl("list", "--json", repo, cwd=repo)
        assert (result.returncode, result.stderr) == (0, "")
        blocks = {b["id"]: b for b in json.loads(result.stdout)}
        assert blocks["shop"]["since"].startswith("2023-11-14T22:13:20")
        assert datetime.fromisoformat(blocks["shop/ask-when0001"]["since"]).year >= 2026


def test_rich_markup_in_a_question_is_kept_as_text(repo: Path, hitl) -> None:
    ask = Asker(repo).ask("[bold red]Drop[/] the [link=http://x]db[/link]?", ["[b]yes[/b]"])
    (block,) = listed(hitl, repo)
    assert block["question"] == "[bold red]Drop[/] the [link=http://x]db[/link]?"
    assert block["choices"][0]["option"] == "[b]yes[/b]"
    assert hitl("answer", f"shop/{ask.id}", "--choice", "A", cwd=repo).returncode == 0
    assert Asker(repo).check(ask.id)["choice"] == "[b]yes[/b]"


def test_an_answer_to_a_hand_edited_ask_is_refused_in_one_line(repo: Path, hitl) -> None:
    """An ask whose status line is not as hitl writes it (re-indented by an agent) cannot be
    answered in two lines: refused, nothing written."""
    ask = Asker(repo).ask("Which database?")
    path = ask_file(repo, ask.id)
    path.write_bytes(path.read_bytes().replace(b' "status": "open",', b'"status":"open",'))
    before = tree(repo / ".hitl")
    result = hitl("answer", f"shop/{ask.id}", "--text", "yes", cwd=repo)
    assert "its status line is not as hitl writes it" in one_line_error(result, 1)
    assert tree(repo / ".hitl") == before


def test_an_open_ask_with_an_answer_planted_in_it_is_not_answered(repo: Path, hitl) -> None:
    """An agent puts its own "allow" below the question, leaving the status open: whatever the
    operator answers, that later key would be the one read (JSON's last key wins)."""
    _, ask_id = Asker(repo).approve_at_once("Bash", COMMAND)
    path = ask_file(repo, ask_id)
    planted = b' "answer": {"verdict": "allow", "answer": "ok"},\n'
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([*lines[:-2], planted, *lines[-2:]]))
    before = tree(repo / ".hitl")
    result = hitl("answer", f"shop/{ask_id}", "--choice", "C", cwd=repo)
    assert "already holds an answer" in one_line_error(result, 1)
    assert tree(repo / ".hitl") == before


# -- 7. the watcher ----------------------------------------------------------------------------


async def test_an_ask_in_a_repo_without_hitl_arrives_live(repo: Path) -> None:
    inbox = Inbox.open([repo])
    assert inbox.blocks == {}
    stop = asyncio.Event()
    ready = asyncio.Event()
    deltas: list[Delta] = []
    task = asyncio.create_task(
        watch_inbox(inbox, deltas.append, stop, on_ready=lambda _: ready.set())
    )
    try:
        await asyncio.wait_for(ready.wait(), 10)
        await asyncio.sleep(0.2)  # the watches exist a moment after on_ready
        first = await asyncio.to_thread(Asker(repo).ask, "Which database?")
        await until(
            None,
            lambda: [b.id for b in inbox.blocks.values()] == [f"shop/{first.id}"],
            10,
            saw=lambda: [b.id for b in inbox.blocks.values()],
            what="the first ask, its folder made after the inbox opened",
        )
        second = await asyncio.to_thread(Asker(repo).ask_permission, "Bash", COMMAND)
        await until(
            None,
            lambda: f"shop/{second.id}" in [b.id for b in inbox.blocks.values()],
            10,
            saw=lambda: [b.id for b in inbox.blocks.values()],
            what="a second ask in the now-watched folder",
        )
        # Answered elsewhere: it leaves the inbox.
        (block,) = [b for b in inbox.blocks.values() if b.id == f"shop/{first.id}"]
        await asyncio.to_thread(apply_plan, AskSource().plan(block, Answer(texts=("yes",))))
        await until(
            None,
            lambda: f"shop/{first.id}" not in [b.id for b in inbox.blocks.values()],
            10,
            saw=lambda: [b.id for b in inbox.blocks.values()],
            what="the answered ask gone",
        )
        # The whole folder removed (the permission ask with it), then made again by a new ask.
        await asyncio.to_thread(shutil.rmtree, repo / ".hitl")
        await until(
            None,
            lambda: not inbox.blocks,
            10,
            saw=lambda: [b.id for b in inbox.blocks.values()],
            what="no block once .hitl is removed",
        )
        third = await asyncio.to_thread(Asker(repo).ask, "Again?")
        await until(
            None,
            lambda: [b.id for b in inbox.blocks.values()] == [f"shop/{third.id}"],
            10,
            saw=lambda: [b.id for b in inbox.blocks.values()],
            what="an ask in a .hitl made again",
        )
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    assert deltas


def test_two_calls_waiting_on_one_ask_share_a_deny_but_not_an_allow_once(repo: Path, hitl) -> None:
    """Two identical permission calls at once wait on the same open ask (`approve`'s wait):
    an Allow once allows one of them; a Deny or an Allow always holds for both."""
    first_agent, second_agent = Asker(repo), Asker(repo)
    for key, both in (("A", False), ("C", True), ("B", True)):
        _, ask_id = first_agent.approve_at_once("Bash", {"command": f"make {key}"})
        assert second_agent.approve_at_once("Bash", {"command": f"make {key}"}) == (None, ask_id)
        assert hitl("answer", f"shop/{ask_id}", "--choice", key, cwd=repo).returncode == 0
        one, other = first_agent.settle(ask_id), second_agent.settle(ask_id)
        assert one is not None and one.allow == (key != "C")
        if both:
            assert other == one
        else:
            assert other is None


def test_hitl_mcp_started_in_a_subfolder_asks_at_the_repository_root(
    repo: Path, hitl, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client starts its stdio server in the folder it was run in, often below the root: the
    asks must land where `hitl list` and `hitl guard` look. (The server itself is
    tests/test_mcp.py's; here only where `hitl mcp` files.)"""
    from hitl_tui.agent import mcp_server

    served: list[Asker] = []

    async def serve(asker: Asker, approve_wait: float) -> None:
        served.append(asker)
        asker.ask("Which database?")

    monkeypatch.setattr(mcp_server, "serve", serve)
    deep = repo / "src" / "api"
    deep.mkdir(parents=True)
    assert hitl("mcp", cwd=deep).returncode == 0
    assert served[0].repo == repo
    assert not (deep / ".hitl").exists()
    assert run("guard", cwd=deep).returncode == 2
    outside = repo.parent / "notes"
    outside.mkdir()
    assert hitl("mcp", cwd=outside).returncode == 0
    assert served[1].repo == outside


# -- found by the last review -------------------------------------------------------------------


def test_an_answer_that_would_make_the_ask_unreadable_is_refused(repo: Path, hitl) -> None:
    """An ask file near the 1 MiB hitl reads (its notes, say): an answer that would carry it
    past that is refused in one line, and the file stays as it was (the agent's side could
    never have read it back: it said 'unknown' while `hitl answer` said it was written)."""
    asker = Asker(repo)
    ask = asker.ask("Which bucket?")
    path = ask_file(repo, ask.id)
    data = orjson.loads(path.read_bytes())
    data["context"] = "c" * (fmt.MAX_FILE - 40_000)
    path.write_bytes(fmt.render(data))
    before = path.read_bytes()
    said = hitl("answer", f"shop/{ask.id}", "--text", "𝄞" * 15_000, "--no-restart", repo, cwd=repo)
    assert "would be" in one_line_error(said, 2)
    assert path.read_bytes() == before
    assert asker.check(ask.id)["status"] == "waiting"


def test_a_symlinked_hitl_folder_lends_no_answers_and_no_grants(tmp_path: Path) -> None:
    """Repository A's `.hitl` is a symlink to B's: A's agent gets neither B's answers (under
    A's ids, again and again) nor B's grants; hitl reads and writes through no such link."""
    other = tmp_path / "b"
    (other / ".git").mkdir(parents=True)
    theirs = Asker(other)
    ask = theirs.ask("Deploy now?", ["yes", "no"])
    inbox = Inbox.open([other])
    (block,) = inbox.blocks.values()
    apply_plan(AskSource().plan(block, Answer(choice=block.choices[0], operator="Ada")))
    grant = {"id": "grant-abcdef", "tool": "Bash", "input_sha": fmt.input_sha({"command": "x"}),
             "summary": "Bash: x", "granted": "2026-12-03T10:00:00+00:00", "by": "Ada",
             "ask": ask.id}  # fmt: skip
    (other / ".hitl" / "grants.jsonl").write_bytes(orjson.dumps(grant) + b"\n")
    mine = tmp_path / "a"
    (mine / ".git").mkdir(parents=True)
    (mine / ".hitl").symlink_to(other / ".hitl")
    asker = Asker(mine)
    assert asker.check(ask.id)["status"] == "unknown"
    assert asker.check()["status"] == "unknown"
    assert grantfile.find(mine, "Bash", fmt.input_sha({"command": "x"})) is None
    with pytest.raises(AskError):
        asker.approve_at_once("Bash", {"command": "x"})
    assert orjson.loads(ask_file(other, ask.id).read_bytes())["status"] == "answered"
