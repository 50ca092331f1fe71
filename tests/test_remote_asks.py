"""Asks (`hitl mcp`) filed in a repository on another machine (`[[remote]]`, a real sshd on
127.0.0.1 and the far side's hitl): listed here, answered here, and read by the agent's side
there (`Asker.check`), a question and a permission prompt answered Allow always (a grant
written on the far side with the answer)."""

from __future__ import annotations

import json
from pathlib import Path

from hitl_tui.agent.asking import Asker
from hitl_tui.sources.asks.grants import grants_path, read_grants
from tests.sshd import Sshd
from tests.test_remote_ssh import hitl, write_config


def test_an_ask_on_another_machine_is_listed_and_answered_here(tmp_path: Path, sshd: Sshd):
    config, loops = write_config(tmp_path, sshd)
    far = loops / "shop"
    (far / ".git").mkdir(parents=True)
    agent = Asker(far, client="claude-code")
    question = agent.ask("Which store for sessions?", ["A — Postgres — safe", "B — Redis"])
    prompt = agent.ask_permission("Bash", {"command": "rm -rf build/"}, "toolu_01")

    listed = hitl(config, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    blocks = {b["id"]: b for b in json.loads(listed.stdout)}
    q, p = blocks[f"build-1:shop/{question.id}"], blocks[f"build-1:shop/{prompt.id}"]
    assert q["question"] == "Which store for sessions?"
    assert [(c["key"], c["option"]) for c in q["choices"]] == [("A", "Postgres"), ("B", "Redis")]
    assert p["question"] == "Allow Bash: `rm -rf build/`?"
    assert p["category"] == "permission"
    assert [c["option"] for c in p["choices"]] == ["Allow once", "Allow always", "Deny"]

    out = hitl(config, "answer", f"build-1:shop/{question.id}", "--choice", "B")
    assert out.returncode == 0, out.stderr
    got = agent.check(question.id)
    assert (got["status"], got["choice"], got["answer"]) == ("answered", "Redis", "Redis"), got

    before = (far / ".hitl" / "asks" / f"{prompt.id}.json").read_bytes()
    out = hitl(config, "answer", f"build-1:shop/{prompt.id}", "--choice", "B")
    assert out.returncode == 0, out.stderr
    # Both files of the plan were written there, and undone from here as one.
    assert grants_path(far).exists()
    out = hitl(config, "undo")
    assert out.returncode == 0, out.stderr
    assert (far / ".hitl" / "asks" / f"{prompt.id}.json").read_bytes() == before
    assert not grants_path(far).exists()  # the plan made it: the undo removes it
    out = hitl(config, "answer", f"build-1:shop/{prompt.id}", "--choice", "B")
    assert out.returncode == 0, out.stderr
    data = json.loads((far / ".hitl" / "asks" / f"{prompt.id}.json").read_bytes())
    assert data["status"] == "answered"
    assert (data["answer"]["verdict"], data["answer"]["always"]) == ("allow", True)
    assert data["answer"]["by"] == "Ada"  # who answered, from here
    [grant] = read_grants(grants_path(far).read_bytes())
    assert (grant.tool, grant.summary, grant.ask) == ("Bash", "Bash: rm -rf build/", prompt.id)
    # The agent's request gets the answer (allowed, once handed over), then the grant allows
    # the same request again with no ask.
    verdict, ask_id = agent.approve_at_once("Bash", {"command": "rm -rf build/"})
    assert (verdict and verdict.allow, ask_id) == (True, prompt.id)
    verdict, ask_id = agent.approve_at_once("Bash", {"command": "rm -rf build/"})
    assert (verdict and verdict.allow, ask_id) == (True, "")
    # Neither is listed any more, here or there.
    ids = {b["id"] for b in json.loads(hitl(config, "list", "--json").stdout)}
    assert not any(i.startswith("build-1:shop/") for i in ids), ids
