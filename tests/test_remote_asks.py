"""Asks (`hitl mcp`) filed in a repository on another machine (`[[remote]]`, a real sshd on
127.0.0.1 and the far side's hitl): listed here, answered here, and read by the agent's side
there (`Asker.check`), a question and a permission prompt answered Allow always (a grant
written on the far side with the answer); and the app's grants screen listing and revoking a
grant there."""

from __future__ import annotations

import json
from pathlib import Path

from textual.widgets import Static

from hitl_tui.agent.asking import Asker
from hitl_tui.cli import commands as cli
from hitl_tui.config import Config
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.inbox.workspace import Workspace
from hitl_tui.sources.asks.grants import grants_path, read_grants
from hitl_tui.sources.registry import remote_sources
from hitl_tui.tui.app import HitlApp
from hitl_tui.tui.grants_screen import ConfirmRevoke, GrantsScreen
from tests.sshd import Sshd
from tests.support import until
from tests.test_remote_ssh import hitl, write_config
from tests.tui_support import SIZE


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
    # The grant allows the agent's request there, and the same request again, with no ask.
    for _ in range(2):
        verdict, ask_id = agent.approve_at_once("Bash", {"command": "rm -rf build/"})
        assert (verdict and verdict.allow, ask_id) == (True, ""), (verdict, ask_id)
    assert json.loads((far / ".hitl" / "asks" / f"{prompt.id}.json").read_bytes())["status"] == (
        "delivered"
    )
    # Neither is listed any more, here or there.
    ids = {b["id"] for b in json.loads(hitl(config, "list", "--json").stdout)}
    assert not any(i.startswith("build-1:shop/") for i in ids), ids


async def test_the_grants_screen_lists_and_revokes_a_grant_on_another_machine(
    tmp_path: Path, sshd: Sshd
) -> None:
    """`A` lists the grants here and on each [[remote]] host (one that cannot be reached is a
    line under the list); `x`, `y` on a far grant revokes it there, journaled there."""
    _config, loops = write_config(tmp_path, sshd)
    far = loops / "shop"
    (far / ".git").mkdir(parents=True)
    prompt = Asker(far).ask_permission("Bash", {"command": "make deploy"})
    assert cli.main(["answer", str(far / ".hitl" / "asks" / f"{prompt.id}.json"),
                     "--choice", "B", "--operator", "Grace"]) == 0  # fmt: skip
    before = grants_path(far).read_bytes()
    here = tmp_path / "here" / "api"
    (here / ".git").mkdir(parents=True)
    tables = [
        {"host": h, "paths": [str(loops)], "hitl": str(sshd.remote_hitl()),
         "ssh": sshd.ssh_argv()}
        for h in ("build-1", "down-1")
    ]  # fmt: skip
    config = Config(operator="Ada", bell=False, remotes=remote_sources({"remote": tables}))
    app = HitlApp(Inbox(Workspace.discover([tmp_path / "here"])), config=config, watch=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.loaded, 30, what="the app to load")
        await pilot.press("A")
        await until(
            pilot,
            lambda: isinstance(app.screen, GrantsScreen) and app.screen.rows is not None,
            60,
            what="the grants, here and there",
        )
        screen = app.screen
        assert [(r.label, r.grant.summary, r.grant.by, r.host) for r in screen.rows] == [
            ("build-1:shop", "Bash: make deploy", "Grace", "build-1")
        ]
        problems = str(screen.query_one("#grants-problems", Static).content)
        assert problems.startswith("down-1: its grants could not be read: "), problems
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmRevoke), 5, what="the question")
        await pilot.press("y")
        await until(
            pilot,
            lambda: [n.title for n in app._notifications][-1:] == ["Revoked"],
            30,
            what="the Revoked toast",
            saw=lambda: [(n.title, n.message) for n in app._notifications],
        )
        toast = list(app._notifications)[-1].message
        assert read_grants(grants_path(far).read_bytes()) == []
        assert screen.rows == []
        app.stop_event.set()
    assert toast.startswith("Revoked ") and "in build-1:shop: Bash: make deploy." in toast
    entry = toast.split("journal entry ")[1].split(":")[0]
    assert f"On build-1, journal entry {entry}: hitl undo {entry} there" in toast
    # Journaled there, by the operator here: that machine's hitl undo puts it back.
    far_history = json.loads(
        sshd.ssh("build-1", str(sshd.remote_hitl()), "history", "--json").stdout
    )
    assert [(e["id"], e["operator"]) for e in far_history][:1] == [(entry, "Ada")]
    undone = sshd.ssh("build-1", str(sshd.remote_hitl()), "undo", entry)
    assert undone.returncode == 0, undone.stderr
    assert grants_path(far).read_bytes() == before
