"""The CLI contract of issue 2, through a real subprocess: `hitl list`, `hitl answer`, config.

Every run is `python -m hitl_tui ...` in a fresh process, so these tests see exactly what a script
sees: stdout, one-line errors on stderr, exit codes, and the bytes left on disk.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hitl_tui import __version__
from hitl_tui.cli.commands import main
from hitl_tui.model import Answer
from hitl_tui.sources.loopkit.source import LoopkitSource

FIXTURES = Path(__file__).resolve().parent / "fixtures"
HOUR = 3600

API_BLOCKED = (
    "# Blocked\n\n## Question\nWhich rate limit for the public API?\n\n## Context\nRoute /v1.\n\n"
    "## Attempted\n- read the SLA\n\n## Choices\n- A) 100/min — safe\n- B) 1000/min\n"
)


def run(*args: object, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hitl_tui", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        env={**os.environ, "PYTHONUTF8": "1", **(env or {})},
    )


@pytest.fixture
def inproc(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture):
    """`hitl ...` in this process (for the big tables; the subprocess tests cover the rest).

    Same result shape as `run`: exit code, stdout, stderr.
    """

    def call(*args: object, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
        monkeypatch.chdir(cwd)
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        capsys.readouterr()
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:  # --help and --version end in argparse's exit
            code = exc.code
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(list(args), code, out, err)

    return call


def assert_error(result: subprocess.CompletedProcess, code: int, message: str) -> None:
    """Exactly one line on stderr, this exit code, nothing on stdout, no traceback."""
    assert result.returncode == code, result.stderr
    assert result.stderr == f"hitl: {message}\n"
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def set_age(path: Path, seconds: float) -> float:
    when = time.time() - seconds
    os.utime(path, (when, when))
    return when


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder of three repos: shop (blocked 3h), api (blocked 5h), clean (no block).

    The operator is fixed by a config in $HITL_CONFIG so that written notes are predictable.
    """
    root = tmp_path / "ws"
    root.mkdir()
    shutil.copytree(FIXTURES / "loopkit-shop", root / "shop")
    (root / "shop" / ".git").mkdir()
    (root / "api").mkdir()
    (root / "api" / ".git").mkdir()
    (root / "api" / "BLOCKED.md").write_text(API_BLOCKED)
    (root / "clean").mkdir()
    (root / "clean" / ".git").mkdir()
    set_age(root / "shop" / "BLOCKED.md", 3 * HOUR + 60)
    set_age(root / "api" / "BLOCKED.md", 5 * HOUR + 60)
    config = tmp_path / "hitl.toml"
    config.write_text('operator = "Ada"\n')
    monkeypatch.setenv("HITL_CONFIG", str(config))
    return root


def list_json(*args: object, cwd: Path, runner=run) -> list[dict]:
    result = runner("list", "--json", *args, cwd=cwd)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return json.loads(result.stdout)


def today() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d")


# -- list -------------------------------------------------------------------------------------


def test_list_plain_one_line_per_block_oldest_first(ws: Path):
    result = run("list", ws, cwd=ws)
    assert result.returncode == 0
    assert result.stderr == ""
    assert result.stdout == (
        "api     5h  Which rate limit for the public API?\n"
        "shop    3h  Should deleting a workspace also delete its archived invoices, or keep them "
        "for 7 years?\n"
    )


def test_list_plain_with_no_blocks(ws: Path, inproc):
    result = inproc("list", ws / "clean", cwd=ws)
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        "no open blocks in 1 repo\n",
        "",
    )


def test_list_plain_never_prints_escapes(ws: Path, inproc):
    (ws / "api" / "BLOCKED.md").write_text("## Question\n\x1b[2J\x1b]0;pwned\x07 [b]wipe?\n")
    set_age(ws / "api" / "BLOCKED.md", 5 * HOUR + 60)
    result = inproc("list", ws / "api", cwd=ws)
    assert result.stdout == "api    5h  ␛[2J␛]0;pwned␇ [b]wipe?\n"
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout


def test_list_json_contract(ws: Path):
    shop_when = set_age(ws / "shop" / "BLOCKED.md", 3 * HOUR)
    blocks = list_json(ws, cwd=ws)
    assert [b["id"] for b in blocks] == ["api", "shop"]
    shop = blocks[1]
    contract = {
        "id",
        "repo",
        "source",
        "path",
        "state",
        "category",
        "title",
        "question",
        "context",
        "attempted",
        "choices",
        "since",
        "fingerprint",
    }
    assert contract <= set(shop)
    data = (ws / "shop" / "BLOCKED.md").read_bytes()
    assert {k: shop[k] for k in contract - {"since", "context"}} == {
        "id": "shop",
        "repo": str(ws / "shop"),
        "source": "loopkit",
        "path": str(ws / "shop" / "BLOCKED.md"),
        "state": "blocked",
        "category": None,
        "title": None,
        "question": (
            "Should deleting a workspace also delete its archived invoices, or keep them for 7 "
            "years?"
        ),
        "attempted": [
            "Searched PROMPT.md, AGENTS.md and the last 3 commits for a retention rule: none "
            "found.",
            "Drafted a cascade delete: /verify rejected it as a silent decision.",
            "Drafted keep-invoices: /verify rejected it as off-spec.",
        ],
        "choices": [
            {
                "key": "A",
                "option": "Cascade delete everything",
                "consequence": "simplest; breaks the invoice retention promise.",
            },
            {
                "key": "B",
                "option": "Keep invoices, detach them from the workspace",
                "consequence": "needs a migration adding owner_id.",
            },
            {
                "key": "C",
                "option": "Block deletion while invoices exist",
                "consequence": "no data loss; users must contact support.",
            },
        ],
        "fingerprint": "sha256:" + hashlib.sha256(data).hexdigest(),
    }
    assert shop["context"].startswith('Feature: "delete workspace" (IMPLEMENTATION_PLAN.md')
    assert shop["context"].endswith("retention note requires invoices to survive 7 years.")
    assert shop["context"].count("\n") == 3
    since = datetime.fromisoformat(shop["since"])
    assert since.tzinfo is not None
    assert abs(since.timestamp() - shop_when) < 0.001
    assert Path(shop["repo"]).is_absolute() and Path(shop["path"]).is_absolute()
    assert blocks[0]["choices"][1] == {"key": "B", "option": "1000/min", "consequence": None}


def test_list_json_empty_is_an_empty_array(ws: Path, inproc):
    assert list_json(ws / "clean", cwd=ws, runner=inproc) == []


def test_ids_unique_and_stable_across_runs(ws: Path, tmp_path: Path):
    other = tmp_path / "other"
    shutil.copytree(ws / "shop", other / "shop")  # a second repo called shop
    first = list_json(ws, other, cwd=tmp_path)
    second = list_json(ws, other, cwd=tmp_path)
    ids = [b["id"] for b in first]
    assert len(ids) == 3 and len(set(ids)) == 3
    assert ids == [b["id"] for b in second]
    assert {b["path"]: b["id"] for b in first} == {b["path"]: b["id"] for b in second}
    # Two PATHs: each id starts with its PATH's name, whatever else is listed (issue 12).
    assert sorted(ids) == ["other/shop", "ws/api", "ws/shop"]


def test_list_oldest_first_across_many(ws: Path, inproc):
    for i, name in enumerate(["r1", "r2", "r3", "r4"]):
        repo = ws / name
        repo.mkdir()
        (repo / "BLOCKED.md").write_text(f"## Question\n{name}?\n")
        set_age(repo / "BLOCKED.md", [10, 30, 20, 40][i] * HOUR)
    assert [b["id"] for b in list_json(ws, cwd=ws, runner=inproc)] == [
        "r4",
        "r2",
        "r3",
        "r1",
        "api",
        "shop",
    ]


def test_list_defaults_to_the_current_folder(ws: Path):
    assert [b["id"] for b in list_json(cwd=ws)] == ["api", "shop"]
    assert [b["id"] for b in list_json(cwd=ws / "shop")] == ["shop"]


def test_python_m_runs_like_hitl(ws: Path):
    result = run("list", cwd=ws / "api")
    assert result.returncode == 0
    assert result.stdout == "api    5h  Which rate limit for the public API?\n"


# -- answer: how a block is named ----------------------------------------------------------------


def expected_decision(when: str = "") -> bytes:
    return (
        f"- {when or today()}: Should deleting a workspace also delete its archived invoices, or "
        "keep them for 7 years? → B) Keep invoices, detach them from the workspace — needs a "
        "migration adding owner_id.\n"
    ).encode()


@pytest.mark.parametrize(
    "target",
    ["shop/BLOCKED.md", "{ws}/shop/BLOCKED.md", "shop", "{ws}/shop", "shop/"],
)
def test_answer_by_path_or_repo(ws: Path, target: str, inproc):
    prompt = (ws / "shop" / "PROMPT.md").read_bytes()
    result = inproc("answer", target.format(ws=ws), "--choice", "B", cwd=ws)
    assert result.stderr == ""
    assert result.returncode == 0
    assert result.stdout == (
        "shop: updated PROMPT.md; updated IMPLEMENTATION_PLAN.md; removed BLOCKED.md\n"
        "The loop can resume: restart it the way you started it (shop has no run.sh).\n"
    )
    assert (ws / "shop" / "PROMPT.md").read_bytes() == (
        prompt + b"\n## Decisions\n" + expected_decision()
    )
    assert not (ws / "shop" / "BLOCKED.md").exists()
    assert (ws / "api" / "BLOCKED.md").exists()


@pytest.mark.parametrize(
    ("mode", "hint"),
    [
        (0o755, "Restart the loop: cd {repo} && ./run.sh"),
        (0o644, "Restart the loop: cd {repo} && bash run.sh"),
        (None, "The loop can resume: restart it the way you started it (shop has no run.sh)."),
    ],
)
def test_after_a_loopkit_answer_the_restart_hint_is_true_for_the_repo(
    ws: Path, tmp_path: Path, mode: int | None, hint: str
):
    shop = ws / "shop"
    if mode is not None:
        (shop / "run.sh").write_text("#!/usr/bin/env bash\nset -euo pipefail\n")
        (shop / "run.sh").chmod(mode)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = run("answer", shop / "BLOCKED.md", "--choice", "B", cwd=elsewhere)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1:] == [hint.format(repo=shop)]


def test_the_restart_hint_quotes_a_folder_with_spaces(tmp_path: Path):
    repo = tmp_path / "my loops" / "shop"
    shutil.copytree(FIXTURES / "loopkit-shop", repo)
    (repo / ".git").mkdir()
    (repo / "run.sh").write_text("#!/bin/sh\n")
    (repo / "run.sh").chmod(0o755)
    result = run("answer", repo, "--choice", "B", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1] == f"Restart the loop: cd '{repo}' && ./run.sh"


def test_answer_by_path_from_anywhere(ws: Path, tmp_path: Path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = run("answer", ws / "shop" / "BLOCKED.md", "--choice", "B", cwd=elsewhere)
    assert result.returncode == 0, result.stderr
    assert not (ws / "shop" / "BLOCKED.md").exists()


def test_answer_by_id_from_list(ws: Path, tmp_path: Path):
    other = tmp_path / "other"
    shutil.copytree(ws / "shop", other / "shop")
    blocks = list_json(ws, other, cwd=tmp_path)
    target = next(b for b in blocks if b["path"] == str(other / "shop" / "BLOCKED.md"))
    result = run("answer", target["id"], "--choice", "B", ws, other, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"{target['id']}: updated PROMPT.md;")
    assert not (other / "shop" / "BLOCKED.md").exists()
    assert (ws / "shop" / "BLOCKED.md").exists()


@pytest.mark.parametrize(
    ("key", "line"),
    [
        ("B", "→ B) Keep invoices, detach them from the workspace"),
        ("b", "→ B) Keep invoices, detach them from the workspace"),
        ("2", "→ B) Keep invoices, detach them from the workspace"),
        ("c", "→ C) Block deletion while invoices exist"),
        ("1", "→ A) Cascade delete everything"),
    ],
)
def test_answer_choice_by_label_any_case_or_position(ws: Path, key: str, line: str, inproc):
    result = inproc("answer", "shop", "--choice", key, cwd=ws)
    assert result.returncode == 0, result.stderr
    last = (ws / "shop" / "PROMPT.md").read_text().splitlines()[-1]
    assert line in last


def test_answer_text_and_note(ws: Path, inproc):
    plan = (ws / "shop" / "IMPLEMENTATION_PLAN.md").read_bytes()
    result = inproc(
        "answer", "shop", "--text", "Keep them 7 years", "--note", "legal asked", cwd=ws
    )
    assert result.returncode == 0, result.stderr
    decision = (
        "Should deleting a workspace also delete its archived invoices, or keep them for 7 years? "
        "→ Keep them 7 years (operator note: legal asked)"
    )
    assert (
        (ws / "shop" / "PROMPT.md")
        .read_text()
        .endswith(f"\n## Decisions\n- {today()}: {decision}\n")
    )
    assert (ws / "shop" / "IMPLEMENTATION_PLAN.md").read_bytes() == plan + (
        f"- {today()}: Block answered by Ada via hitl: {decision}. BLOCKED.md removed; the loop "
        "can resume.\n"
    ).encode()


def test_answer_choice_with_note(ws: Path, inproc):
    result = inproc("answer", "api", "--choice", "a", "--note", "for now", cwd=ws)
    assert result.returncode == 0, result.stderr
    assert (ws / "api" / "PROMPT.md").read_text() == (
        f"## Decisions\n- {today()}: Which rate limit for the public API? → A) 100/min — safe "
        "(operator note: for now)\n"
    )


def test_dry_run_prints_the_diff_and_writes_nothing(ws: Path):
    before = snapshot(ws)
    result = run("answer", "shop", "--choice", "B", "--dry-run", cwd=ws)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    block = LoopkitSource().parse(ws / "shop", ws / "shop" / "BLOCKED.md", "shop")
    assert block is not None
    answer = Answer(choice=block.find_choice("B"), operator="Ada")
    assert result.stdout == LoopkitSource().plan(block, answer).diff()
    assert result.stdout.startswith("--- a/PROMPT.md\n+++ b/PROMPT.md\n")
    assert "+" + expected_decision().decode() in result.stdout
    assert "--- a/BLOCKED.md\n+++ /dev/null\n" in result.stdout
    assert snapshot(ws) == before


def test_expect_with_the_right_fingerprint_writes(ws: Path):
    [api] = list_json(ws / "api", cwd=ws)
    result = run("answer", "api", "--choice", "B", "--expect", api["fingerprint"], cwd=ws)
    assert result.returncode == 0, result.stderr
    assert not (ws / "api" / "BLOCKED.md").exists()


def make_bare(ws: Path) -> Path:
    """A repo whose block lists no choices: it is answered in the operator's own words."""
    bare = ws / "bare"
    bare.mkdir()
    (bare / "BLOCKED.md").write_text("The staging DB is read-only. What now?\n")
    return bare


def test_a_block_without_choices_is_answered_with_text(ws: Path, inproc):
    bare = make_bare(ws)
    result = inproc("answer", "bare", "--text", "Wait for the DBA", cwd=ws)
    assert result.returncode == 0, result.stderr
    assert (bare / "PROMPT.md").read_text() == (
        f"## Decisions\n- {today()}: The staging DB is read-only. What now? → Wait for the DBA\n"
    )


# -- answer: errors, and nothing written --------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["shop", "--choice", "Z"], "no choice 'Z' in shop (choices: A, B, C)"),
        (["shop", "--choice", "4"], "no choice '4' in shop (choices: A, B, C)"),
        (["shop", "--text", ""], "--text is empty"),
        (["shop", "--text", "  \n "], "--text is empty"),
        (
            ["shop"],
            "one of the arguments --choice --text is required (see 'hitl answer --help')",
        ),
        (
            ["shop", "--choice", "B", "--text", "x"],
            "argument --text: not allowed with argument --choice (see 'hitl answer --help')",
        ),
        (
            ["shop", "--choice", "B", "--bogus"],
            "unrecognized arguments: --bogus (see 'hitl answer --help')",
        ),
        (["nope", "--choice", "B"], "no open block with id 'nope' (see 'hitl list')"),
        (["clean", "--choice", "B"], "no open block in clean"),
        (["bare", "--choice", "A"], "no choice 'A' in bare (choices: none; answer with --text)"),
    ],
)
def test_usage_errors_exit_2_and_write_nothing(ws: Path, args: list[str], message: str, inproc):
    make_bare(ws)
    before = snapshot(ws)
    assert_error(inproc("answer", *args, cwd=ws), 2, message)
    assert snapshot(ws) == before


def test_expect_wrong_fingerprint_exits_3(ws: Path):
    before = snapshot(ws)
    wrong = "sha256:" + "0" * 64
    result = run("answer", "shop", "--choice", "B", "--expect", wrong, cwd=ws)
    assert_error(result, 3, "shop: the block changed since sha256:000000000000…")
    assert snapshot(ws) == before


def test_expect_after_the_agent_rewrote_the_block_exits_3(ws: Path):
    [shop] = list_json(ws / "shop", cwd=ws)
    (ws / "shop" / "BLOCKED.md").write_text("## Question\nA new question?\n")
    before = snapshot(ws)
    result = run("answer", "shop", "--choice", "1", "--expect", shop["fingerprint"], cwd=ws)
    assert result.returncode == 3
    assert result.stderr.startswith("hitl: shop: the block changed since sha256:")
    assert result.stderr.count("\n") == 1
    assert snapshot(ws) == before


def test_block_removed_meanwhile_exits_3(ws: Path):
    [shop] = list_json(ws / "shop", cwd=ws)
    (ws / "shop" / "BLOCKED.md").unlink()
    before = snapshot(ws)
    result = run("answer", shop["path"], "--choice", "B", "--expect", shop["fingerprint"], cwd=ws)
    assert_error(result, 3, f"{shop['path']} does not exist (already answered?)")
    assert snapshot(ws) == before


def test_answering_twice_exits_3_the_second_time(ws: Path):
    assert run("answer", "shop/BLOCKED.md", "--choice", "B", cwd=ws).returncode == 0
    after = snapshot(ws)
    result = run("answer", "shop/BLOCKED.md", "--choice", "B", cwd=ws)
    assert_error(result, 3, "shop/BLOCKED.md does not exist (already answered?)")
    assert snapshot(ws) == after


def test_unsafe_prompt_symlink_exits_1_and_writes_nothing(ws: Path, tmp_path: Path):
    outside = tmp_path / "outside.md"
    outside.write_bytes(b"mine\n")
    (ws / "shop" / "PROMPT.md").unlink()
    (ws / "shop" / "PROMPT.md").symlink_to(outside)
    before = snapshot(ws)
    result = run("answer", "shop", "--choice", "B", cwd=ws)
    assert result.returncode == 1
    assert result.stderr.startswith("hitl: refusing to write PROMPT.md: it is a symlink")
    assert result.stderr.count("\n") == 1
    assert outside.read_bytes() == b"mine\n"
    assert snapshot(ws) == before


@pytest.mark.parametrize("command", ["list", "answer"])
def test_missing_path_is_a_one_line_error(ws: Path, command: str, inproc):
    args = ["shop", "--choice", "B"] if command == "answer" else []
    result = inproc(command, *args, ws / "missing", cwd=ws)
    assert_error(result, 2, f"no such folder: {ws / 'missing'}")


def test_path_that_is_a_file_is_a_one_line_error(ws: Path, inproc):
    assert_error(inproc("list", "shop/PROMPT.md", cwd=ws), 2, "not a folder: shop/PROMPT.md")


def test_list_bad_option(ws: Path, inproc):
    assert_error(
        inproc("list", "--jsn", cwd=ws), 2, "unrecognized arguments: --jsn (see 'hitl list --help')"
    )


# -- help and version ---------------------------------------------------------------------------


def test_version(ws: Path, inproc):
    result = inproc("--version", cwd=ws)
    assert (result.returncode, result.stdout, result.stderr) == (0, f"hitl {__version__}\n", "")


@pytest.mark.parametrize(
    ("args", "usage", "mentions"),
    [
        (["--help"], "usage: hitl [-h]", ["hitl list", "hitl answer", "exit codes"]),
        (["-h"], "usage: hitl [-h]", ["--config FILE"]),
        (["list", "--help"], "usage: hitl list [-h]", ["--json", "--config FILE", "PATH"]),
        (
            ["answer", "--help"],
            "usage: hitl answer [-h]",
            ["--choice KEY", "--text TEXT", "--note TEXT", "--expect FINGERPRINT", "--dry-run"],
        ),
    ],
)
def test_help(ws: Path, args: list[str], usage: str, mentions: list[str], inproc):
    result = inproc(*args, cwd=ws)
    assert result.returncode == 0
    assert result.stderr == ""
    assert result.stdout.startswith(usage)
    for text in mentions:
        assert text in result.stdout


def test_every_command_is_listed_and_has_its_help(ws: Path, inproc):
    """One table of commands: `hitl --help` names each, and each answers `--help` with its
    own usage (renaming a command module is an import error, never four commands gone)."""
    from hitl_tui.cli import commands as cli

    assert set(cli.COMMANDS) == {
        *("list", "answer", "demo", "undo", "history", "escalate", "guard"),
        *("snooze", "unsnooze", "restart", "status", "serve", "mcp", "grants", "note", "stats"),
    }
    listing = inproc("--help", cwd=ws).stdout
    for name in cli.COMMANDS:
        assert f"hitl {name}" in listing, name
        result = inproc(name, "--help", cwd=ws)
        assert result.returncode == 0, (name, result.stderr)
        assert result.stdout.startswith(f"usage: hitl {name}"), name


# -- no textual on the scripting paths ----------------------------------------------------------

NO_TEXTUAL = """
import sys
from hitl_tui.cli.commands import main
codes = [main(["list", "--json", sys.argv[1]]), main(["list", sys.argv[1]])]
codes.append(main(["answer", sys.argv[2], "--choice", "B", "--dry-run"]))
codes.append(main(["answer", sys.argv[2], "--choice", "B"]))
loaded = sorted(m for m in sys.modules if m == "textual" or m.startswith("textual."))
print("RESULT", codes, loaded)
"""


def test_list_and_answer_never_load_textual(ws: Path):
    result = subprocess.run(
        [sys.executable, "-c", NO_TEXTUAL, str(ws), str(ws / "shop" / "BLOCKED.md")],
        cwd=ws,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "RESULT [0, 0, 0, 0] []"
    assert not (ws / "shop" / "BLOCKED.md").exists()  # the answer really ran


# -- config ---------------------------------------------------------------------------------------


def test_config_file_repos_relative_to_its_folder(ws: Path, tmp_path: Path):
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    config = conf_dir / "hitl.toml"
    config.write_text('repos = ["../ws/api", "../ws/shop"]\noperator = "Bo"\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    blocks = list_json("--config", config, cwd=elsewhere)
    assert [b["repo"] for b in blocks] == [str(ws / "api"), str(ws / "shop")]
    result = run("answer", "api", "--choice", "A", "--config", config, cwd=elsewhere)
    assert result.returncode == 0, result.stderr
    assert "Block answered by Bo via hitl" in (ws / "api" / "IMPLEMENTATION_PLAN.md").read_text()


def test_hitl_config_env(ws: Path, tmp_path: Path):
    config = tmp_path / "env.toml"
    config.write_text(f"repos = [{json.dumps(str(ws / 'shop'))}]\n")
    result = run("list", "--json", cwd=tmp_path, env={"HITL_CONFIG": str(config)})
    assert [b["id"] for b in json.loads(result.stdout)] == ["shop"]


def test_paths_override_the_config(ws: Path, tmp_path: Path, inproc):
    config = tmp_path / "c.toml"
    config.write_text('repos = ["ws/shop"]\n')
    assert [
        b["id"] for b in list_json("--config", config, ws / "api", cwd=tmp_path, runner=inproc)
    ] == ["api"]


def test_config_repos_as_a_folder_of_repos(ws: Path, inproc):
    config = ws.parent / "c.toml"
    config.write_text('repos = "ws"\n')
    assert [b["id"] for b in list_json("--config", config, cwd=ws / "clean", runner=inproc)] == [
        "api",
        "shop",
    ]


def test_invalid_toml_is_a_one_line_exit_2(ws: Path, tmp_path: Path):
    config = tmp_path / "bad.toml"
    config.write_text('repos = ["a"\noperator = \n')
    result = run("list", "--config", config, cwd=ws)
    assert result.returncode == 2
    assert result.stderr.startswith(f"hitl: {config}: not valid TOML: ")
    assert result.stderr.count("\n") == 1 and result.stdout == ""


def test_invalid_toml_in_hitl_config_env(ws: Path, tmp_path: Path, inproc):
    config = tmp_path / "bad.toml"
    config.write_text("= nope\n")
    result = inproc("list", cwd=ws, env={"HITL_CONFIG": str(config)})
    assert result.returncode == 2
    assert result.stderr.startswith(f"hitl: {config}: not valid TOML: ")
    assert result.stderr.count("\n") == 1


def test_unknown_config_key_is_a_one_line_exit_2(ws: Path, tmp_path: Path, inproc):
    config = tmp_path / "c.toml"
    config.write_text('repos = []\nrepoz = ["x"]\n')
    assert_error(
        inproc("list", "--config", config, cwd=ws),
        2,
        f"{config}: unknown key 'repoz' "
        "(known: bell, github, journal_keep, keys, loop, mcp, notify, operator, remote, repos, "
        "sla)",
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("repos = [1]\n", "'repos' must be a list of paths"),
        ("operator = 3\n", "'operator' must be a string"),
        ('bell = "yes"\n', "'bell' must be true or false"),
    ],
)
def test_bad_config_values(ws: Path, tmp_path: Path, text: str, message: str, inproc):
    config = tmp_path / "c.toml"
    config.write_text(text)
    assert_error(inproc("list", "--config", config, cwd=ws), 2, f"{config}: {message}")


def test_missing_config_file_named_explicitly(ws: Path, tmp_path: Path, inproc):
    missing = tmp_path / "nope.toml"
    assert_error(
        inproc("list", "--config", missing, cwd=ws), 2, f"config file not found: {missing}"
    )


def test_missing_default_config_is_fine(ws: Path, tmp_path: Path, inproc):
    result = inproc("list", ws / "api", cwd=ws, env={"HITL_CONFIG": str(tmp_path / "absent.toml")})
    assert result.returncode == 0 and result.stderr == ""


# -- one subprocess per exit code, for the tables run in-process above --------------------------


def test_exit_codes_through_a_real_process(ws: Path):
    before = snapshot(ws)
    assert_error(
        run("answer", "shop", "--choice", "Z", cwd=ws),
        2,
        "no choice 'Z' in shop (choices: A, B, C)",
    )
    assert_error(
        run("answer", "shop", cwd=ws),
        2,
        "one of the arguments --choice --text is required (see 'hitl answer --help')",
    )
    assert_error(run("list", ws / "missing", cwd=ws), 2, f"no such folder: {ws / 'missing'}")
    assert snapshot(ws) == before
    result = run("answer", "shop", "--choice", "b", cwd=ws)
    assert (result.returncode, result.stderr) == (0, "")
    assert not (ws / "shop" / "BLOCKED.md").exists()


def test_help_through_a_real_process(ws: Path):
    result = run("answer", "--help", cwd=ws)
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.startswith("usage: hitl answer [-h]")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{ws}/missing"], "no such folder: {ws}/missing"),
        (["--config", "{ws}/missing.toml"], "config file not found: {ws}/missing.toml"),
    ],
)
def test_the_app_reports_a_bad_path_or_config_before_starting(
    ws: Path, args: list[str], message: str
):
    result = subprocess.run(
        [sys.executable, "-m", "hitl_tui", *(a.format(ws=ws) for a in args)],
        cwd=ws,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=30,
    )
    assert_error(result, 2, message.format(ws=ws))


def test_concurrent_answers_write_once(ws: Path):
    """Three processes answer the same block at once: one writes, the others exit 3."""
    prompt = (ws / "shop" / "PROMPT.md").read_bytes()
    target = str(ws / "shop" / "BLOCKED.md")
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "hitl_tui", "answer", target, "--choice", key],
            cwd=ws,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUTF8": "1"},
        )
        for key in ("B", "B", "B")
    ]
    results = [(p.wait(timeout=60), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    assert sorted(code for code, _ in results) == [0, 3, 3], results
    for code, err in results:
        assert err.count("\n") == (0 if code == 0 else 1)
    assert (ws / "shop" / "PROMPT.md").read_bytes() == (
        prompt + b"\n## Decisions\n" + expected_decision()
    )
    assert not (ws / "shop" / "BLOCKED.md").exists()


def test_list_json_keeps_hostile_text_exact(ws: Path, inproc):
    hostile = "\x1b[2J [b]x[/b] [@click=app.quit] \u202e"
    (ws / "api" / "BLOCKED.md").write_text(f"## Question\n{hostile}\n")
    [api] = list_json(ws / "api", cwd=ws, runner=inproc)
    assert api["question"] == hostile
    result = inproc("list", "--json", ws / "api", cwd=ws)
    assert "\\u001b[2J" in result.stdout and "\x1b" not in result.stdout


def test_config_tilde_and_bom(ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inproc):
    monkeypatch.setenv("HOME", str(ws.parent))
    config = tmp_path / "bom.toml"
    config.write_bytes(b'\xef\xbb\xbfrepos = ["~/ws/api"]\n')
    assert [b["id"] for b in list_json("--config", config, cwd=tmp_path, runner=inproc)] == ["api"]


def test_config_not_utf8_is_one_line(ws: Path, tmp_path: Path, inproc):
    config = tmp_path / "latin.toml"
    config.write_bytes(b'operator = "Jos\xe9"\n')
    result = inproc("list", "--config", config, cwd=ws)
    assert result.returncode == 1
    assert result.stderr.startswith(f"hitl: {config}: cannot read the config: ")
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize("cwd_name", ["ws", "elsewhere"])
def test_expect_on_an_id_answered_meanwhile_exits_3(ws: Path, tmp_path: Path, cwd_name: str):
    """The scripted flow: `list --json`, then `answer ID --expect FP` after someone else did."""
    cwd = ws if cwd_name == "ws" else tmp_path
    [api] = list_json(ws / "api", cwd=ws)
    (ws / "api" / "BLOCKED.md").unlink()
    before = snapshot(ws)
    result = run("answer", api["id"], "--choice", "B", "--expect", api["fingerprint"], ws, cwd=cwd)
    assert_error(
        result,
        3,
        f"api: no open block has {api['fingerprint'][:19]}… any more (answered or changed)",
    )
    assert snapshot(ws) == before


def test_expect_with_an_ambiguous_or_wrong_target_is_still_usage(ws: Path, inproc):
    [api] = list_json(ws / "api", cwd=ws, runner=inproc)
    result = inproc("answer", "apo", "--choice", "B", "--expect", api["fingerprint"], cwd=ws)
    assert_error(result, 2, "no open block with id 'apo' (see 'hitl list')")


def test_an_id_that_is_also_a_folder_here_means_the_id(ws: Path, tmp_path: Path, inproc):
    """From inside another repo with an `api` folder, `answer api` is the configured block."""
    mono = tmp_path / "mono"
    (mono / ".git").mkdir(parents=True)
    (mono / "api").mkdir()
    config = tmp_path / "c.toml"
    config.write_text(f"repos = [{json.dumps(str(ws))}]\n")
    result = inproc("answer", "api", "--choice", "A", "--config", config, cwd=mono)
    assert result.returncode == 0, result.stderr
    assert not (ws / "api" / "BLOCKED.md").exists()
    assert not (mono / "PROMPT.md").exists()
