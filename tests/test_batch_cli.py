"""`hitl answer` for many blocks (ids, --filter, --similar; --option or --text), `hitl undo
BATCH` and the batch's line in `hitl history`, run as a user runs them (a real `hitl`
process), over loopkit and agenticloop blocks; every test reads the files on disk."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hitl_tui import journal
from hitl_tui.cli import main

KEEP = "Keep invoices, detach them from the workspace"
LOOPKIT = ("shop", "store", "mall")


def hitl(*args: object, cwd: Path) -> subprocess.CompletedProcess[str]:
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
def ws(tmp_path: Path, fixtures_dir: Path) -> Path:
    """A workspace: three loopkit repositories asking the same question, and an agenticloop
    project with three blocked tasks (T-007, T-009, T-012), none with that option."""
    ws = tmp_path / "ws"
    for name in LOOPKIT:
        shutil.copytree(fixtures_dir / "loopkit-shop", ws / name)
        (ws / name / ".git").mkdir()
    shutil.copytree(fixtures_dir / "agenticloop-billing", ws / "billing")
    (ws / "billing" / ".git").mkdir()
    return ws


def disk(ws: Path) -> dict[str, bytes]:
    return {str(p.relative_to(ws)): p.read_bytes() for p in sorted(ws.rglob("*")) if p.is_file()}


def answered_loopkit(ws: Path, name: str, words: str = "Keep invoices, detach them") -> bool:
    return not (ws / name / "BLOCKED.md").exists() and words in (ws / name / "PROMPT.md").read_text(
        encoding="utf-8"
    )


def test_ids_with_option_across_sources_exit_3_names_the_skipped(ws: Path) -> None:
    before = disk(ws)
    result = hitl(
        "answer", "shop", "store", "billing/T-009", "--option", "keep INVOICES, detach them "
        "from the workspace.", "--json", "--no-restart", cwd=ws,
    )  # fmt: skip
    assert result.returncode == 3, result.stderr
    rows = json.loads(result.stdout)
    assert [(r["id"], r["status"]) for r in rows] == [
        ("shop", "written"),
        ("store", "written"),
        ("billing/T-009", "skipped"),
    ]
    assert set(rows[0]) == {"id", "status", "reason", "entry"}
    assert rows[2]["reason"].startswith("billing/T-009: no option reads") and not rows[2]["entry"]
    assert answered_loopkit(ws, "shop") and answered_loopkit(ws, "store")
    now = disk(ws)
    for name in ("mall/BLOCKED.md", "billing/.agenticloop/tasks/T-009.md"):
        assert now[name] == before[name]
    entries = {e.id: e for e in journal.history()}
    assert set(entries) == {rows[0]["entry"], rows[1]["entry"]}
    assert len({e.batch for e in entries.values()}) == 1


def test_ids_every_one_written_exit_0_and_history_one_line(ws: Path, tmp_path: Path) -> None:
    """From another folder, the PATH to look in named after the ids (a folder that is no
    repository), as `hitl answer ID ... PATH` takes it for one block."""
    result = hitl("answer", *LOOPKIT, "--option", KEEP, "--note", "legal asked", ws, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert all(answered_loopkit(ws, n, "legal asked") for n in LOOPKIT)
    assert "3 written" in result.stdout and "hitl undo batch-" in result.stdout
    (batch,) = {e.batch for e in journal.history()}
    lines = hitl("history", cwd=ws).stdout.splitlines()
    assert len(lines) == 1 and batch in lines[0] and "3 blocks (shop, store, mall)" in lines[0]
    (row,) = json.loads(hitl("history", "--json", cwd=ws).stdout)
    assert row["batch"] == batch and row["answers"] == 3 and row["undone"] == 0
    assert sorted(e["block"]["id"] for e in row["entries"]) == sorted(LOOPKIT)
    assert {e["batch"] for e in row["entries"]} == {batch}


def test_filter_with_own_words_across_loopkit_and_agenticloop(ws: Path) -> None:
    """--text applies to every block --filter lists; the task asking two questions refuses
    one text (its own rule): exit 3, the others written."""
    listed = json.loads(hitl("list", "--json", "--filter=-id:T-007", cwd=ws).stdout)
    result = hitl(
        "answer", "--filter=-id:T-007", "--text", "Use Node 22 in CI", "--json", ".", cwd=ws
    )
    assert result.returncode == 3, result.stderr
    rows = json.loads(result.stdout)
    assert [r["id"] for r in rows] == [b["id"] for b in listed]  # what list --filter lists
    status = {r["id"]: r["status"] for r in rows}
    assert status.pop("billing/T-012") == "refused"
    assert set(status.values()) == {"written"} and len(status) == 4
    t009 = (ws / "billing/.agenticloop/tasks/T-009.md").read_text(encoding="utf-8")
    assert "Use Node 22 in CI" in t009 and "status: agent-ready" in t009
    assert "status: blocked" in (ws / "billing/.agenticloop/tasks/T-007.md").read_text()
    assert all(answered_loopkit(ws, n, "Use Node 22 in CI") for n in LOOPKIT)


def test_similar_answers_the_same_question_only(ws: Path) -> None:
    before = disk(ws)
    dry = hitl("answer", "--similar", "store", "--option", KEEP, "--dry-run", "--json", cwd=ws)
    assert dry.returncode == 0, dry.stderr
    plans = json.loads(dry.stdout)
    assert plans[0]["id"] == "store" and sorted(p["id"] for p in plans) == sorted(LOOPKIT)
    assert all(p["status"] == "ready" and "+++ b/PROMPT.md" in p["plan"]["diff"] for p in plans)
    assert disk(ws) == before  # a dry run writes nothing
    result = hitl("answer", "--similar", "store", "--option", KEEP, cwd=ws)
    assert result.returncode == 0, result.stderr
    assert all(answered_loopkit(ws, n) for n in LOOPKIT)
    now = disk(ws)
    assert {k: v for k, v in now.items() if k.startswith("billing/")} == {
        k: v for k, v in before.items() if k.startswith("billing/")
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["shop", "nope", "--option", KEEP], "no open block with id 'nope' (see 'hitl list')"),
        (["--filter", "zzz-none", "--option", KEEP], "no open block matches --filter"),
        (["--similar", "nope", "--option", KEEP], "no open block with id 'nope'"),
        (["shop", "store", "--text", "decide TBD"], "the answer contains"),
        (["--filter", "shop", "--choice", "B"], "--choice answers one block"),
        (["--filter", "shop"], "one of the arguments --option --text is required"),
        (["shop", "--option", KEEP, "--choice", "B"], "argument --option: not allowed with"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(ws: Path, args: list[str], message: str) -> None:
    before = disk(ws)
    result = hitl("answer", *args, cwd=ws)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("hitl: ") and message in result.stderr
    assert result.stdout == "" and result.stderr.count("\n") == 1
    assert disk(ws) == before
    assert journal.history() == []


def test_two_repositories_named_with_text_are_two_blocks(ws: Path) -> None:
    """`hitl answer shop store --text ...`: store is a folder, but shop is no block in it, so
    both words are blocks (a batch); `TARGET PATH` still finds one block in PATH."""
    result = hitl("answer", "shop", "store", "--text", "Keep them 7 years", cwd=ws)
    assert result.returncode == 0, result.stderr
    assert answered_loopkit(ws, "shop", "Keep them 7 years")
    assert answered_loopkit(ws, "store", "Keep them 7 years")
    one = hitl("answer", "billing/T-009", "billing", "--text", "Use the vault", cwd=ws)
    assert one.returncode == 0, one.stderr
    assert "Use the vault" in (ws / "billing/.agenticloop/tasks/T-009.md").read_text()
    assert journal.history()[0].batch is None  # answered alone


def test_a_block_changed_mid_batch_is_refused_the_others_written(ws: Path, monkeypatch, capsys):
    """The loop of `store` rewrites its BLOCKED.md while `shop` is being written: store is
    refused and named, mall is still written; exit 3."""
    from hitl_tui.answers import service

    real = service.write_answer

    def loop_writes_meanwhile(inbox, plan, replan=False):
        if plan.block.id == "shop":
            blocked = ws / "store" / "BLOCKED.md"
            blocked.write_bytes(blocked.read_bytes() + b"\nAlso: which region?\n")
        return real(inbox, plan, replan)

    monkeypatch.setattr(service, "write_answer", loop_writes_meanwhile)
    monkeypatch.chdir(ws)
    code = main(["answer", *LOOPKIT, "--option", KEEP, "--json", "--no-restart"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 3
    status = {r["id"]: (r["status"], r["reason"]) for r in rows}
    assert status["shop"][0] == status["mall"][0] == "written"
    assert status["store"][0] == "refused"
    assert "store" in status["store"][1] and "BLOCKED.md" in status["store"][1]
    assert answered_loopkit(ws, "shop") and answered_loopkit(ws, "mall")
    assert (ws / "store" / "BLOCKED.md").read_bytes().endswith(b"which region?\n")
    assert "Keep invoices, detach" not in (ws / "store" / "PROMPT.md").read_text()


def test_undo_batch_restores_each_and_refuses_one_that_moved_on(ws: Path) -> None:
    before = disk(ws)
    assert hitl("answer", *LOOPKIT, "--option", KEEP, cwd=ws).returncode == 0
    (batch,) = {e.batch for e in journal.history()}
    moved = (ws / "mall" / "PROMPT.md").read_bytes() + b"\n- the loop's next step\n"
    (ws / "mall" / "PROMPT.md").write_bytes(moved)
    result = hitl("undo", batch, "--json", cwd=ws)
    assert result.returncode == 3, result.stderr
    data = json.loads(result.stdout)
    assert data["batch"] == batch
    status = {e["block"]: (e["status"], e["message"]) for e in data["entries"]}
    assert status["shop"][0] == status["store"][0] == "undone"
    assert status["mall"][0] == "refused" and "PROMPT.md" in status["mall"][1]
    now = disk(ws)
    for name in ("shop", "store"):
        assert {k: v for k, v in now.items() if k.startswith(name + "/")} == {
            k: v for k, v in before.items() if k.startswith(name + "/")
        }
    assert (ws / "mall" / "PROMPT.md").read_bytes() == moved
    line = hitl("history", cwd=ws).stdout.splitlines()[0]
    assert batch in line and "[2 undone]" in line
    # Its loop's change reverted by hand: the rest of the batch is undone, exit 0.
    (ws / "mall" / "PROMPT.md").write_bytes(moved[: -len(b"\n- the loop's next step\n")])
    again = hitl("undo", batch, cwd=ws)
    assert again.returncode == 0, again.stderr
    assert disk(ws) == before
    assert "1 undone, 0 refused" in again.stdout
    assert hitl("undo", "batch-20200101-000000-abcdef", cwd=ws).returncode == 2


def test_restarts_start_together_not_one_after_another(ws: Path, tmp_path: Path) -> None:
    """Each loop's restart waits (bounded) until all four restarts have started: run one
    after the other, each would time out and fail. The two agenticloop tasks of one project
    restart it once."""
    marks = tmp_path / "marks"
    marks.mkdir()
    script = (
        'touch "$1/$2"; i=0; '
        'while [ "$(ls "$1" | wc -l)" -lt 4 ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; '
        '[ "$(ls "$1" | wc -l)" -ge 4 ]'
    )
    config = tmp_path / "config.toml"
    config.write_text(
        "[[loop]]\n"
        f"match = [{json.dumps(str(ws / '*'))}]\n"
        f"restart = {json.dumps(['/bin/sh', '-c', script, 'sh', str(marks), '{name}'])}\n",
        encoding="utf-8",
    )
    result = hitl(
        "answer", "--filter=-id:T-012", "--text", "Use Node 22 in CI", "--config", config,
        ws, cwd=ws,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr + result.stdout
    assert sorted(p.name for p in marks.iterdir()) == ["billing", "mall", "shop", "store"]
    assert "failed" not in result.stdout + result.stderr
    assert result.stdout.count(": restarted: ") == 4  # billing's two tasks: one restart


def _git(repo: Path, *args: str) -> str:
    ident = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    done = subprocess.run(
        ["git", *ident, *args], cwd=repo, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_undo_batch_refuses_the_answer_a_loop_committed_on_force_undoes_it(
    tmp_path: Path, fixtures_dir: Path
) -> None:
    """Real git repositories: after the batch, the loop of `store` commits its work. `hitl
    undo BATCH` undoes shop and mall, refuses store naming the commit (exit 3); --force
    undoes it too."""
    ws = tmp_path / "ws"
    for name in LOOPKIT:
        shutil.copytree(fixtures_dir / "loopkit-shop", ws / name)
        _git(ws / name, "init", "-q", "-b", "main")
        _git(ws / name, "add", "-A")
        _git(ws / name, "commit", "-q", "-m", "start")
    before = disk(ws)
    assert hitl("answer", *LOOPKIT, "--option", KEEP, cwd=ws).returncode == 0
    (batch,) = {e.batch for e in journal.history()}
    (ws / "store" / "work.txt").write_text("the loop's work\n")
    _git(ws / "store", "add", "-A")
    _git(ws / "store", "commit", "-q", "-m", "store: keep invoices")
    head = _git(ws / "store", "rev-parse", "HEAD")
    refused = hitl("undo", batch, cwd=ws)
    assert refused.returncode == 3, refused.stderr
    assert "store: refused: refused to undo" in refused.stdout
    assert f"the loop has acted on this answer (commit {head[:7]}" in refused.stdout
    assert "2 undone, 1 refused" in refused.stdout
    assert not (ws / "store" / "BLOCKED.md").exists()
    for name in ("shop", "mall"):
        assert (ws / name / "BLOCKED.md").read_bytes() == before[f"{name}/BLOCKED.md"]
    forced = hitl("undo", batch, "--force", cwd=ws)
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert (ws / "store" / "BLOCKED.md").read_bytes() == before["store/BLOCKED.md"]
    assert "1 undone, 0 refused" in forced.stdout
