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
