"""Issue 14 from a script: `hitl list --filter/--sort/--all`, `hitl snooze`, `hitl unsnooze`.

Through real subprocesses, on copies of the sample repos, with the state folder of the test
(conftest); what is asserted is what a script reads on stdout and finds in the state folder.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.hostile_cases import run_hitl


@pytest.fixture
def fleet(shop: Path, billing: Path) -> Path:
    assert shop.parent == billing.parent
    return shop.parent


def ids(*args: object) -> list[str]:
    done = run_hitl("list", "--json", *args)
    assert done.returncode == 0, done.stderr
    return [b["id"] for b in json.loads(done.stdout)]


def test_filter_and_sort_as_the_app_reads_them(fleet: Path) -> None:
    everything = ids(fleet)
    assert len(everything) == 4 and "shop" in everything
    assert ids(fleet, "--filter", "repo:billing") == [i for i in everything if i != "shop"]
    assert ids(fleet, "--filter", "sftp") == ["billing/T-009"]
    assert (
        ids(fleet, "--filter=-repo:billing") == ids(fleet, "--filter", "!repo:billing") == ["shop"]
    )
    assert ids(fleet, "--filter", "state:needs_context") == ["billing/T-012"]
    rows = json.loads(run_hitl("list", "--json", "--sort", "newest", fleet).stdout)
    since = [datetime.fromisoformat(r["since"]) for r in rows]
    assert since == sorted(since, reverse=True) and len(rows) == 4
    done = run_hitl("list", fleet, "--filter", "nothing-matches-this")
    assert (done.returncode, done.stdout) == (0, b"no blocks match in 2 repos\n")


def test_a_bad_filter_or_order_is_one_line_and_exit_2(fleet: Path) -> None:
    done = run_hitl("list", fleet, "--filter", "age:>soon")
    assert done.returncode == 2 and done.stdout == b""
    assert done.stderr.decode().count("\n") == 1 and "not a duration" in done.stderr.decode()
    done = run_hitl("list", fleet, "--sort", "size")
    assert done.returncode == 2 and b"invalid choice" in done.stderr


def test_snooze_hides_until_its_time_and_unsnooze_brings_it_back(
    fleet: Path, _isolated_state: Path
) -> None:
    before = datetime.now(UTC)
    done = run_hitl("snooze", "shop", fleet, "--for", "1h", "--json")
    assert done.returncode == 0, done.stderr
    until = datetime.fromisoformat(json.loads(done.stdout)["until"])
    assert timedelta(minutes=59) < until - before < timedelta(minutes=61)
    saved = json.loads((_isolated_state / "snoozed.json").read_text())
    assert [s["id"] for s in saved["snoozes"]] == ["shop"]

    assert "shop" not in ids(fleet)
    listing = run_hitl("list", fleet)
    assert b"shop " not in listing.stdout and b"1 snoozed not listed" in listing.stderr
    rows = json.loads(run_hitl("list", "--json", "--all", fleet).stdout)
    shop = next(r for r in rows if r["id"] == "shop")
    assert shop["snoozed"] is True and shop["snoozed_until"] == until.isoformat()
    assert all(r["snoozed"] is False for r in rows if r["id"] != "shop")

    # The time is up: the same file read later lists it again.
    saved["snoozes"][0]["until"] = (before - timedelta(seconds=1)).isoformat()
    (_isolated_state / "snoozed.json").write_text(json.dumps(saved))
    assert "shop" in ids(fleet)

    run_hitl("snooze", "shop", fleet, "--for", "4h")
    assert "shop" not in ids(fleet)
    done = run_hitl("unsnooze", "shop", fleet)
    assert (done.returncode, done.stdout) == (0, b"shop: back in the list\n")
    assert "shop" in ids(fleet)


def test_until_change_ends_when_the_loop_rewrites_the_block(fleet: Path) -> None:
    done = run_hitl("snooze", "billing/T-009", fleet, "--until-change")
    assert (done.returncode, done.stdout) == (0, b"billing/T-009: snoozed until it changes\n")
    assert "billing/T-009" not in ids(fleet)
    task = fleet / "billing" / ".agenticloop" / "tasks" / "T-009.md"
    task.write_bytes(task.read_bytes() + b"\n- 2026-12-01: still blocked, tried again.\n")
    assert "billing/T-009" in ids(fleet)


def test_a_snooze_is_the_operators_view_only(fleet: Path) -> None:
    """`guard` still stops the loop, and nothing in the repository changed."""
    before = {p: p.read_bytes() for p in (fleet / "shop").rglob("*") if p.is_file()}
    assert run_hitl("snooze", "shop", fleet, "--until", "tomorrow").returncode == 0
    assert run_hitl("guard", fleet / "shop").returncode == 2
    after = {p: p.read_bytes() for p in (fleet / "shop").rglob("*") if p.is_file()}
    assert after == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope", "--for", "1h"], "no open block"),
        (["shop", "--for", "soon"], "not a duration"),
        (["shop", "--until", "25:99"], "not a time of day"),
        (["shop"], "one of the arguments"),
    ],
)
def test_snooze_refuses_with_one_line(fleet: Path, args: list[str], message: str) -> None:
    done = run_hitl("snooze", args[0], fleet, *args[1:])
    assert done.returncode == 2 and done.stdout == b""
    assert message in done.stderr.decode() and done.stderr.decode().count("\n") == 1


def test_a_corrupt_snooze_file_hides_nothing(fleet: Path, _isolated_state: Path) -> None:
    (_isolated_state / "snoozed.json").write_bytes(b"\xff{not json")
    done = run_hitl("list", "--json", fleet)
    assert done.returncode == 0 and len(json.loads(done.stdout)) == 4
    assert b"ignored" in done.stderr and done.stderr.count(b"\n") == 1
    os.chmod(_isolated_state, 0o700)


def test_list_json_says_on_stderr_how_many_are_snoozed(fleet: Path) -> None:
    assert run_hitl("snooze", "shop", fleet, "--for", "1h").returncode == 0
    assert run_hitl("snooze", "billing/T-009", fleet, "--for", "1h").returncode == 0
    plain = run_hitl("list", fleet)
    as_json = run_hitl("list", "--json", fleet)
    assert as_json.returncode == 0
    assert as_json.stderr == plain.stderr == b"hitl: 2 snoozed not listed (--all lists them)\n"
    assert {r["id"] for r in json.loads(as_json.stdout)}.isdisjoint({"shop", "billing/T-009"})
    every = run_hitl("list", "--json", "--all", fleet)
    assert every.stderr == b"" and len(json.loads(every.stdout)) == 4


def test_every_block_snoozed_still_says_how_many_are_set_aside(shop: Path) -> None:
    assert run_hitl("snooze", "shop", shop, "--for", "1h").returncode == 0
    listing = run_hitl("list", shop)
    assert listing.stdout == b"no blocks match in 1 repo\n"
    assert listing.stderr == b"hitl: 1 snoozed not listed (--all lists them)\n"


def test_cat_that_finds_none_says_loopkit_blocks_carry_none_unless_declared(shop: Path) -> None:
    """Issue 27, item 9: `cat:credentials` over a loopkit block that declares no category and
    an ask (category `question`) lists none, and says why on stderr, for --json too."""
    from hitl_tui.agent.asking import Asker

    Asker(shop).ask("Which database?", ["Postgres", "SQLite"], "We need one.", ["read docs"])
    note = (
        'hitl: cat: loopkit blocks carry no category unless BLOCKED.md says "Category: NAME" '
        "(1 here)\n"
    )
    done = run_hitl("list", shop, "--filter", "cat:credentials")
    assert (done.returncode, done.stdout) == (0, b"no blocks match in 1 repo\n")
    assert done.stderr.decode() == note
    done = run_hitl("list", "--json", shop, "--filter", "cat:credentials")
    assert (done.stdout, done.stderr.decode()) == (b"[]\n", note)
    # The ask carries its category; a term that finds a block, or excludes, says nothing more.
    done = run_hitl("list", "--json", shop, "--filter", "cat:question")
    assert [b["source"] for b in json.loads(done.stdout)] == ["ask"] and done.stderr == b""
    done = run_hitl("list", "--json", shop, "--filter=-cat:credentials")
    assert len(json.loads(done.stdout)) == 2 and done.stderr == b""
    # Declared, the loopkit block is found and the note goes.
    blocked = shop / "BLOCKED.md"
    blocked.write_text("Category: credentials\n" + blocked.read_text())
    done = run_hitl("list", "--json", shop, "--filter", "cat:credentials")
    assert [b["id"] for b in json.loads(done.stdout)] == ["shop"] and done.stderr == b""
