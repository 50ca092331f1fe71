"""An undone answer waits for no loop: `hitl undo` forgets its record (`resume.forget_undone`),
so `hitl status` no longer lists it and the app's row goes (tests/test_tui_history.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.hostile_cases import SHOP, run_hitl


def test_hitl_undo_forgets_the_answer_waiting_for_its_loop(tmp_path: Path) -> None:
    root = tmp_path / "loops"
    shutil.copytree(SHOP, root / "shop")
    (root / "shop" / ".git").mkdir()  # a repository, also once its block is answered
    answered = run_hitl("answer", "shop", "--choice", "A", root)
    assert answered.returncode == 0, answered.stderr
    status = json.loads(run_hitl("status", root, "--json").stdout)
    assert status["counts"]["waiting"] == 1
    [waiting] = status["repos"][0]["waiting"]

    undone = run_hitl("undo", waiting["entry"])
    assert undone.returncode == 0, undone.stderr
    assert (root / "shop" / "BLOCKED.md").exists()
    status = json.loads(run_hitl("status", root, "--json").stdout)
    assert status["counts"]["waiting"] == 0 and status["counts"]["open"] == 1


def test_hitl_history_says_what_each_answers_loop_did(tmp_path: Path) -> None:
    import subprocess

    root = tmp_path / "loops"
    repo = root / "shop"
    shutil.copytree(SHOP, repo)
    ident = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "s"]):
        subprocess.run(["git", *ident, *args], cwd=repo, check=True, capture_output=True)
    assert run_hitl("answer", "shop", "--choice", "A", root).returncode == 0
    [entry] = json.loads(run_hitl("history", "--json").stdout)
    assert entry["loop"] == {"state": "waiting", "resumed_at": None, "how": None}
    assert b"[done]  loop waiting\n" in run_hitl("history").stdout

    (repo / "work.txt").write_text("done\n")
    for args in (["add", "-A"], ["commit", "-q", "-m", "the loop's work"]):
        subprocess.run(["git", *ident, *args], cwd=repo, check=True, capture_output=True)
    assert run_hitl("status", root).returncode == 0  # looks at the files: resumed
    [entry] = json.loads(run_hitl("history", "--json").stdout)
    assert entry["loop"]["state"] == "resumed" and entry["loop"]["how"].startswith("new commit")
    assert b"[done]  loop resumed " in run_hitl("history").stdout


# -- an answer the loop has acted on: refused unless --force (real git, real `hitl`) ----------


def _git(repo: Path, *args: str) -> str:
    import subprocess

    ident = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    done = subprocess.run(
        ["git", *ident, *args], cwd=repo, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def _answered_then_committed(tmp_path: Path) -> tuple[Path, str, str]:
    """A real git repository whose block `hitl answer` answered, then a commit by the loop
    (its decision committed with its work): (the repo, the answer's id, the commit's id)."""
    repo = tmp_path / "loops" / "shop"
    shutil.copytree(SHOP, repo)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "start")
    answered = run_hitl("answer", "shop", "--choice", "B", repo.parent)
    assert answered.returncode == 0, answered.stderr
    [entry] = json.loads(run_hitl("history", "--json").stdout)
    (repo / "work.txt").write_text("the loop's work\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", 'Keep invoices: "archive" them [done]')
    return repo, entry["id"], _git(repo, "rev-parse", "HEAD")


def _tree(repo: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in repo.iterdir() if p.is_file()}


def test_hitl_undo_refuses_an_answer_the_loop_committed_on_and_force_undoes_it(
    tmp_path: Path,
) -> None:
    repo, entry, head = _answered_then_committed(tmp_path)
    before = _tree(repo)

    for args in (("undo", entry), ("undo",), ("undo", "shop")):
        refused = run_hitl(*args)
        err = refused.stderr.decode()
        assert refused.returncode == 3, (args, err)  # as for a file changed since
        assert (
            f'the loop has acted on this answer (commit {head[:7]} "Keep invoices: "archive" '
            'them [done]" after it)' in err
        ), err
        assert f"hitl undo {entry} --force to undo anyway" in err
        assert "\n" not in err.strip()
        assert _tree(repo) == before and not (repo / "BLOCKED.md").exists()
        assert _git(repo, "status", "--porcelain") == ""  # the tree stays clean
    assert not json.loads(run_hitl("history", "--json").stdout)[0]["undone"]

    forced = run_hitl("undo", entry, "--force")
    assert forced.returncode == 0, forced.stderr
    assert f"undid {entry} (shop): restored" in forced.stdout.decode()
    assert (repo / "BLOCKED.md").read_bytes() == (SHOP / "BLOCKED.md").read_bytes()
    assert (repo / "PROMPT.md").read_bytes() == (SHOP / "PROMPT.md").read_bytes()
    assert json.loads(run_hitl("history", "--json").stdout)[0]["undone"]


def test_hitl_undo_sees_the_commit_without_the_answers_record(tmp_path: Path) -> None:
    """resume.json lost (or its record pruned after a week): the reflog still shows a commit
    after the answer's time (git's whole seconds: a commit in the same second counts too)."""
    import os

    repo, entry, head = _answered_then_committed(tmp_path)
    os.remove(Path(os.environ["HITL_STATE_DIR"]) / "resume.json")
    refused = run_hitl("undo", entry)
    assert refused.returncode == 3, refused.stderr
    err = refused.stderr.decode()
    assert "the loop has acted on this answer (" in err and f' {head[:7]} "Keep' in err, err
    assert not (repo / "BLOCKED.md").exists()


def test_hitl_undo_of_an_answer_no_loop_acted_on_needs_no_force(tmp_path: Path) -> None:
    """A commit before the answer is no sign; the undo goes through, as before."""
    repo = tmp_path / "loops" / "shop"
    shutil.copytree(SHOP, repo)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "s"]):
        _git(repo, *args)
    assert run_hitl("answer", "shop", "--choice", "B", repo.parent).returncode == 0
    undone = run_hitl("undo")
    assert undone.returncode == 0, undone.stderr
    assert (repo / "BLOCKED.md").exists()


def test_hitl_undo_help_names_force() -> None:
    done = run_hitl("undo", "--help")
    text = done.stdout.decode()
    assert done.returncode == 0
    assert "--force" in text and "the loop has acted on the answer" in text


def test_a_remote_answer_its_loop_committed_on_is_refused_there_and_force_is_passed_on(
    tmp_path: Path, sshd
) -> None:
    """Another machine's answer (a real sshd, that machine's hitl): its `hitl undo` refuses,
    this one says so with its own id and exit code, and `--force` undoes it there."""
    from tests.test_remote_ssh import hitl, write_config

    config, loops = write_config(tmp_path, sshd)
    repo = loops / "shop"
    shutil.copytree(SHOP, repo)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "s"]):
        _git(repo, *args)
    out = hitl(config, "answer", "build-1:shop", "--choice", "B")
    assert out.returncode == 0, out.stderr
    [entry] = json.loads(hitl(config, "history", "--json").stdout)
    (repo / "work.txt").write_text("the loop's work\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "work on build-1")
    head = _git(repo, "rev-parse", "HEAD")

    refused = hitl(config, "undo")
    assert refused.returncode == 3, refused.stderr
    assert (
        f'the loop has acted on this answer (commit {head[:7]} "work on build-1" after it, on '
        "build-1)" in refused.stderr
    ), refused.stderr
    assert f"hitl undo {entry['id']} --force to undo anyway" in refused.stderr
    assert not (repo / "BLOCKED.md").exists()
    assert not json.loads(hitl(config, "history", "--json").stdout)[0]["undone"]

    forced = hitl(config, "undo", entry["id"], "--force")
    assert forced.returncode == 0, forced.stderr
    assert "on build-1: undid" in forced.stdout
    assert (repo / "BLOCKED.md").read_bytes() == (SHOP / "BLOCKED.md").read_bytes()
    assert json.loads(hitl(config, "history", "--json").stdout)[0]["undone"]


def test_a_hostile_reflog_is_read_as_text_and_cut(tmp_path: Path) -> None:
    """The reflog is the loop's bytes: an escape sequence, bytes that are not UTF-8, a line
    that is no reflog line, a subject of 10,000 characters; what the refusal quotes is one
    printable line, cut."""
    from datetime import UTC, datetime
    from types import SimpleNamespace

    from hitl_tui.loops.resume import ResumeBook, loop_acted
    from hitl_tui.sources.loopkit import gitref

    one, two, three = "1" * 40, "2" * 40, "3" * 40
    repo = tmp_path / "shop"
    (repo / ".git" / "logs").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text(f"{three}\n")  # detached
    log = b"".join(
        [
            f"{'0' * 40} {one} t <t@x> 1700000000 +0000\tcommit (initial): start\n".encode(),
            b"not a reflog line at all\n",
            f"{one} {two} t <t@x> 1900000000 +0000\tcommit: ".encode()
            + b"\x1b[31mred\x1b[0m \xff\xfe [b]bold[/b]\n",
            f"{two} {three} t <t@x> 1900000001 +0000\tcommit: ".encode() + b"x" * 10_000 + b"\n",
        ]
    )
    (repo / ".git" / "logs" / "HEAD").write_bytes(log)
    moves = gitref.head_moves(repo, after=one)
    assert [m.new for m in moves] == [two, three]
    assert "\x1b" in moves[0].subject  # read as it is; shown printable
    entry = SimpleNamespace(
        id="e1", remote=False, repo=repo, time=datetime.fromtimestamp(1_800_000_000, UTC)
    )
    said = loop_acted(entry, repo, book=ResumeBook(None))
    assert said is not None and said.startswith(f'2 commits after it, the last {three[:7]} "xxx')
    assert said.endswith('…"') and len(said) < 120
    moves_one = gitref.head_moves(repo, since=1_900_000_000 - 1)[:1]
    from hitl_tui.loops.resume import _moves_said

    text = _moves_said(moves_one)
    assert "\x1b" not in text and "\n" not in text and "[b]bold[/b]" in text
