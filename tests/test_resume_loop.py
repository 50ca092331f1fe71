"""Issue 15, "Done when": a real loop. A loopkit-shaped runner (`tests/loops/run.sh`, with a fake
agent that reads the decision from PROMPT.md and commits, or asks the same question again) is
started by the configured `[[loop]] restart` after `hitl answer`; `hitl status --json` sees
*waiting* turn *resumed*; a loop that never restarts turns *not resumed* (exit 4) and `hitl
restart` puts it back to waiting; a loop that escalates again resolves it as *asked again*.

Every step runs real `hitl` processes against real files, with the state folder in tmp.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from tests.hostile_cases import run_hitl
from tests.support import until_sync
from tests.support.repos import git, git_shop

LOOPS = Path(__file__).resolve().parent / "loops"
pytestmark = pytest.mark.skipif(
    shutil.which("git") is None or shutil.which("bash") is None or shutil.which("setsid") is None,
    reason="needs git, bash and setsid",
)


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    return git_shop(tmp_path / "loops" / "shop")


@pytest.fixture
def runners(tmp_path: Path) -> Iterator[Path]:
    """Where start.sh records its runner's pid; each runner still alive is ended afterwards
    (by its own process group: setsid made it a session leader)."""
    folder = tmp_path / "runners"
    folder.mkdir()
    yield folder
    for pidfile in folder.glob("*.pid"):
        try:
            os.killpg(int(pidfile.read_text().strip()), signal.SIGTERM)
        except (OSError, ValueError):
            pass


def config(tmp_path: Path, restart: list[str], within: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        "\n".join(
            [
                f"repos = [{json.dumps(str(tmp_path / 'loops'))}]",
                "[[loop]]",
                f"match = [{json.dumps(str(tmp_path / 'loops' / '*'))}]",
                f"restart = {json.dumps(restart)}",
                f"resume_within = {json.dumps(within)}",
            ]
        )
        + "\n"
    )
    return path


def runner(tmp_path: Path, runners: Path, mode: str = "commit") -> list[str]:
    """The restart command: start.sh in the repo, detached, the agent in `mode`; its first
    turn waits for the test's `go` file (`gate`), so that the test sees the answer waiting
    first however slow the machine."""
    blocked = tmp_path / "asked-before.md"
    shutil.copy(FIXTURES / "loopkit-shop" / "BLOCKED.md", blocked)
    return [
        "env",
        f"FAKE_AGENT_MODE={mode}",
        f"FAKE_AGENT_BLOCKED={blocked}",
        "LOOP_PAUSE=0.2",
        f"LOOP_GATE={gate(tmp_path)}",
        "bash",
        str(LOOPS / "start.sh"),
        "{repo}",
        str(runners / "{name}.pid"),
        str(runners / "{name}.log"),
    ]


def gate(tmp_path: Path) -> Path:
    return tmp_path / "go"


def status(cfg: Path) -> tuple[int, dict]:
    done = run_hitl("status", "--json", "--config", cfg)
    assert done.returncode in (0, 4), done.stderr
    return done.returncode, json.loads(done.stdout)


def shop_row(report: dict) -> dict:
    [row] = [r for r in report["repos"] if r["name"] == "shop"]
    return row


def status_until(
    cfg: Path, wanted: Callable[[dict], bool], timeout: float = 30.0
) -> tuple[int, dict]:
    last: list[tuple[int, dict]] = []

    def check() -> tuple[int, dict] | None:
        last[:] = [status(cfg)]
        return last[0] if wanted(last[0][1]) else None

    saw = lambda: json.dumps(last[0][1] if last else None, indent=1)  # noqa: E731
    return until_sync(check, timeout, every=0.3, what="the status wanted", saw=saw)


def test_the_loop_restarts_reads_the_decision_commits_and_resumes(
    tmp_path: Path, shop: Path, runners: Path
):
    cfg = config(tmp_path, runner(tmp_path, runners), "1m")
    done = run_hitl("answer", "shop", "--choice", "B", "--config", cfg)
    assert done.returncode == 0, done.stderr
    assert b"shop: restarted: env FAKE_AGENT_MODE=commit" in done.stdout
    code, report = status(cfg)
    [waiting] = shop_row(report)["waiting"]
    assert code == 0 and report["counts"]["waiting"] == 1
    assert waiting["id"] == "shop" and waiting["state"] == "waiting"
    assert waiting["answered"].startswith("B) Keep invoices") and waiting["entry"]
    text = run_hitl("status", "--config", cfg)
    assert text.returncode == 0 and b"  waiting      shop  answered " in text.stdout
    gate(tmp_path).touch()  # the loop's first turn may begin

    code, report = status_until(cfg, lambda r: bool(shop_row(r)["resumed"]))
    [resumed] = shop_row(report)["resumed"]
    head = git(shop, "rev-parse", "HEAD")
    assert code == 0 and resumed["how"] == f"new commit {head[:7]}"
    assert resumed["resumed_at"] >= resumed["answered_at"] and shop_row(report)["waiting"] == []
    # The agent read the operator's decision from PROMPT.md and did the work with it.
    assert "Keep invoices, detach them from the workspace" in (shop / "DECISION.txt").read_text()
    assert git(shop, "log", "-1", "--format=%an") == "fake agent"
    deadline = time.monotonic() + 10
    while "done" not in (runners / "shop.log").read_text():
        assert time.monotonic() < deadline, (runners / "shop.log").read_text()
        time.sleep(0.2)
    text = run_hitl("status", "--config", cfg)
    assert b"  resumed      shop  resumed " in text.stdout
    assert f": new commit {head[:7]}; answered ".encode() in text.stdout
    # The history of `hitl status`: kept, and still resumed on the next look.
    assert status(cfg)[1]["counts"] == {
        "repos": 1,
        "open": 0,
        "waiting": 0,
        "resumed": 1,
        "not_resumed": 0,
        "restart_failed": 0,
    }


def test_a_loop_that_never_restarts_is_not_resumed_then_restarted_again(tmp_path: Path, shop: Path):
    cfg = config(tmp_path, ["true"], "2s")
    began = time.monotonic()
    done = run_hitl("answer", "shop", "--choice", "C", "--config", cfg)
    assert done.returncode == 0, done.stderr
    code, report = status(cfg)
    if time.monotonic() - began < 1.5:  # on a very slow machine it may be due already
        assert code == 0 and len(shop_row(report)["waiting"]) == 1
    time.sleep(max(0.0, 2.3 - (time.monotonic() - began)))
    code, report = status(cfg)
    [late] = shop_row(report)["not_resumed"]
    assert code == 4 and report["counts"]["not_resumed"] == 1
    assert late["id"] == "shop" and late["state"] == "not-resumed" and late["resumed_at"] is None
    text = run_hitl("status", "--config", cfg)
    assert text.returncode == 4
    assert (
        b"  not resumed  shop  answered " in text.stdout and b"(hitl restart shop)" in text.stdout
    )

    again = run_hitl("restart", "shop", "--config", cfg)
    assert again.returncode == 0, again.stderr
    assert (
        b"shop: restarted: true" in again.stdout and b"waiting for the loop again" in again.stdout
    )
    code, report = status(cfg)
    [waiting] = shop_row(report)["waiting"]
    assert code == 0 and waiting["restarts"] == 1
    assert waiting["deadline"] > late["deadline"]


def test_a_loop_that_asks_again_resolves_it_as_asked_again(
    tmp_path: Path, shop: Path, runners: Path
):
    cfg = config(tmp_path, runner(tmp_path, runners, mode="escalate"), "1m")
    before = git(shop, "rev-parse", "HEAD")
    done = run_hitl("answer", "shop", "--choice", "A", "--config", cfg)
    assert done.returncode == 0, done.stderr
    assert not (shop / "BLOCKED.md").exists()
    gate(tmp_path).touch()
    code, report = status_until(cfg, lambda r: bool(shop_row(r)["resumed"]))
    [resumed] = shop_row(report)["resumed"]
    assert code == 0 and resumed["how"] == "asked again (new BLOCKED.md)"
    assert shop_row(report)["open"]["count"] == 1  # the same question is open again
    assert git(shop, "rev-parse", "HEAD") == before  # the agent did no work
    listed = json.loads(run_hitl("list", "--json", "--config", cfg).stdout)
    assert [b["question"] for b in listed] == [resumed["question"]]
    deadline = time.monotonic() + 10
    while "blocked: BLOCKED.md is open" not in (runners / "shop.log").read_text():
        assert time.monotonic() < deadline, (runners / "shop.log").read_text()
        time.sleep(0.2)


def test_a_restart_that_exits_127_is_restart_failed_in_hitl_status_until_one_succeeds(
    tmp_path: Path, shop: Path
):
    """`hitl answer` runs the [[loop]] restart, which really exits 127 (its ./run.sh is
    missing): the answer stands, and `hitl status` says *restart failed*, exit 5, with why and
    the log, and counts the restart; once run.sh is there `hitl restart` clears it."""
    cfg = config(tmp_path, ["sh", "-c", "./run.sh"], "10m")
    done = run_hitl("answer", "shop", "--choice", "B", "--config", cfg)
    assert done.returncode == 0, done.stderr
    assert b"restart failed (exit 127)" in done.stderr
    report_run = run_hitl("status", "--json", "--config", cfg)
    assert report_run.returncode == 5, report_run.stderr
    report = json.loads(report_run.stdout)
    [failed] = shop_row(report)["restart_failed"]
    assert report["counts"]["restart_failed"] == 1 and shop_row(report)["waiting"] == []
    assert failed["state"] == "restart-failed" and failed["restarts"] == 1
    assert failed["restart_problem"] == "exit 127" and failed["restart_at"] is not None
    assert "./run.sh: not found" in Path(failed["restart_log"]).read_text()
    text = run_hitl("status", "--config", cfg)
    assert text.returncode == 5
    assert b"  restart failed (exit 127)  shop  answered " in text.stdout, text.stdout
    assert f"failed: exit 127, output: {failed['restart_log']}".encode() in text.stdout
    assert b"1 restart failed" in text.stdout
    # Still failing: still restart failed, one more restart counted.
    again = run_hitl("restart", "shop", "--config", cfg)
    assert again.returncode == 1
    [failed] = shop_row(json.loads(run_hitl("status", "--json", "--config", cfg).stdout))[
        "restart_failed"
    ]
    assert failed["restarts"] == 2
    script = shop / "run.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755)
    again = run_hitl("restart", "shop", "--config", cfg)
    assert again.returncode == 0, again.stderr
    code, report = status(cfg)
    [waiting] = shop_row(report)["waiting"]
    assert code == 0 and shop_row(report)["restart_failed"] == []
    assert waiting["restarts"] == 3 and waiting["restart_problem"] is None


def test_a_restart_program_not_on_path_or_a_missing_script_warns_as_the_config_loads(
    tmp_path: Path, shop: Path
):
    """A [[loop]] restart whose program is not on PATH, or whose ./run.sh is missing in
    repositories it restarts: a warning on stderr (the config stands), naming the table, the
    count and one repository. A program that is there, or a placeholder, warns of nothing."""
    api = git_shop(tmp_path / "loops" / "api")
    web = git_shop(tmp_path / "loops" / "web")
    (web / "run.sh").write_text("#!/bin/sh\n")
    loops = tmp_path / "loops"
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        "\n".join(
            [
                f"repos = [{json.dumps(str(loops))}]",
                "[[loop]]",
                f"match = [{json.dumps(str(shop))}]",
                'restart = ["tmuxx", "send-keys", "-t", "{name}", "Enter"]',
                "[[loop]]",
                f"match = [{json.dumps(str(loops / '*'))}]",
                'restart = ["./run.sh", "{name}"]',
                "[[loop]]",
                f"match = [{json.dumps(str(tmp_path / 'elsewhere' / '*'))}]",
                'restart = ["{repo}/run.sh"]',
                "[[loop]]",
                f"match = [{json.dumps(str(tmp_path / 'other' / '*'))}]",
                'restart = ["sh", "-c", "./run.sh"]',
            ]
        )
        + "\n"
    )
    done = run_hitl("status", "--config", cfg)
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.decode().splitlines() if "[[loop]]" in line]
    assert warnings == [
        f"hitl: warning: {cfg}: [[loop]] #1: restart: program 'tmuxx' not found on PATH",
        f"hitl: warning: {cfg}: [[loop]] #2: restart: './run.sh' is missing in 1 of the 2 "
        f"repos it matches (like {api})",
    ]
    listed = run_hitl("list", "--config", cfg)
    assert b"[[loop]] #1: restart: program 'tmuxx' not found on PATH" in listed.stderr
