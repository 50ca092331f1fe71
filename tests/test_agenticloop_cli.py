"""`hitl list` and `hitl answer` on agenticloop task files, run as a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

TASKS = Path(".agenticloop") / "tasks"


@pytest.fixture(autouse=True)
def _operator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A named operator, so that the notes written are known to the byte."""
    config = tmp_path / "config.toml"
    config.write_text('operator = "Ada"\n')
    monkeypatch.setenv("HITL_CONFIG", str(config))


def hitl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hitl_tui", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _today() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d")


def _task(billing: Path, task: str) -> Path:
    return billing / TASKS / f"{task}.md"


def test_list_json(billing: Path) -> None:
    result = hitl("list", "--json", str(billing), cwd=billing.parent)
    assert result.returncode == 0, result.stderr
    rows = {row["id"]: row for row in json.loads(result.stdout)}
    assert sorted(rows) == ["billing/T-007", "billing/T-009", "billing/T-012"]
    assert {row["source"] for row in rows.values()} == {"agenticloop"}
    t7, t12 = rows["billing/T-007"], rows["billing/T-012"]
    assert (t7["state"], t7["category"]) == ("blocked", "contract")
    assert t7["title"] == "Switch session storage from SQLite to Postgres"
    assert [c["key"] for c in t7["choices"]] == ["A", "B", "C", "D"]
    assert t7["choices"][1]["option"] == "Approve the change request"
    assert t7["path"] == str(_task(billing, "T-007"))
    assert t7["fingerprint"].startswith("sha256:")
    assert (t12["state"], t12["category"]) == ("needs_context", None)
    assert len(t12["questions"]) == 2


def test_list_plain_shows_needs_context(billing: Path) -> None:
    result = hitl("list", str(billing), cwd=billing.parent)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 3
    assert any(line.startswith("billing/T-012") and "[needs_context]" in line for line in lines)


def test_answer_choice_approves_and_prints_hint(billing: Path) -> None:
    path = _task(billing, "T-007")
    before = path.read_text()
    result = hitl("answer", "billing/T-007", "--choice", "B", cwd=billing.parent)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "billing/T-007: updated .agenticloop/tasks/T-007.md",
        "Restart the loop on the task: /agenticloop T-007",
    ]
    expected = before.replace(
        "status: blocked\nblock_category: contract\n", "status: agent-ready\napproved: true\n"
    ).replace(
        "## Comments\n",
        f"## Comments\n- {_today()}: Approved by Ada: the change request is approved.\n",
    )
    assert path.read_text() == expected


def test_answer_by_task_file_path_with_text(billing: Path) -> None:
    path = _task(billing, "T-009")
    before = path.read_text()
    result = hitl("answer", str(path), "--text", "SFTP_PASSWORD is set now.", cwd=billing.parent)
    assert result.returncode == 0, result.stderr
    after = path.read_text()
    assert "status: agent-ready\n" in after and "block_category" not in after
    head, note = after.split("## Comments\n")
    assert head == before.split("## Comments\n")[0].replace(
        "status: blocked\nblock_category: credentials\n", "status: agent-ready\n"
    )
    assert note.split("\n", 1)[0] == f"- {_today()}: Answer from Ada: SFTP_PASSWORD is set now."
    assert note.split("\n", 1)[1] == before.split("## Comments\n")[1]


def test_answer_keep_blocked_with_note(billing: Path) -> None:
    path = _task(billing, "T-009")
    before = path.read_text()
    result = hitl(
        "answer", "billing/T-009", "--choice", "B", "--note", "Asking ops.", cwd=billing.parent
    )
    assert result.returncode == 0, result.stderr
    after = path.read_text()
    assert after.split("## Comments\n")[0] == before.split("## Comments\n")[0]
    first = after.split("## Comments\n")[1].split("\n")[0]
    assert first == f"- {_today()}: Note from Ada (still blocked): Asking ops."


def test_answer_needs_context_one_text_per_question(billing: Path) -> None:
    path = _task(billing, "T-012")
    result = hitl(
        "answer", "billing/T-012", "--text", "per line", "--text", "half-up", cwd=billing.parent
    )
    assert result.returncode == 0, result.stderr
    after = path.read_text()
    assert "status: agent-ready\n" in after
    first = after.split("## Comments\n")[1].split("\n")[0]
    assert first == f"- {_today()}: Answers from Ada: 1. per line. 2. half-up."


def test_wrong_count_placeholder_unknown_choice_exit_2(billing: Path) -> None:
    t12, t9 = _task(billing, "T-012"), _task(billing, "T-009")
    before12, before9 = t12.read_bytes(), t9.read_bytes()
    cases = [
        (("answer", "billing/T-012", "--text", "per line"), "asks 2 questions"),
        (("answer", "billing/T-009", "--text", "password TBD"), "placeholder 'TBD'"),
        (("answer", "billing/T-009", "--text", "rotate, etc."), "placeholder 'etc.'"),
        (("answer", "billing/T-009", "--choice", "Z"), "no choice 'Z'"),
        (("answer", "billing/T-009", "--choice", "A"), "needs your words"),
    ]
    for args, message in cases:
        result = hitl(*args, cwd=billing.parent)
        assert result.returncode == 2, (args, result.stderr)
        assert message in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    assert (t12.read_bytes(), t9.read_bytes()) == (before12, before9)


def test_expect_mismatch_exit_3(billing: Path) -> None:
    path = _task(billing, "T-007")
    before = path.read_bytes()
    result = hitl(
        "answer", "billing/T-007", "--choice", "B", "--expect", "sha256:0000", cwd=billing.parent
    )
    assert result.returncode == 3
    assert "changed" in result.stderr
    assert path.read_bytes() == before


def test_expect_match_and_dry_run(billing: Path) -> None:
    path = _task(billing, "T-007")
    before = path.read_bytes()
    listed = json.loads(hitl("list", "--json", str(billing), cwd=billing.parent).stdout)
    fp = next(r["fingerprint"] for r in listed if r["id"] == "billing/T-007")
    result = hitl(
        "answer", "billing/T-007", "--choice", "B", "--expect", fp, "--dry-run", cwd=billing.parent
    )
    assert result.returncode == 0, result.stderr
    assert "-block_category: contract\n" in result.stdout
    assert "+approved: true\n" in result.stdout
    assert path.read_bytes() == before
    result = hitl("answer", "billing/T-007", "--choice", "B", "--expect", fp, cwd=billing.parent)
    assert result.returncode == 0, result.stderr
    assert path.read_bytes() != before


def test_broken_header_listed_and_refused(billing: Path) -> None:
    path = _task(billing, "T-099")
    path.write_text("---\nstatus: blocked\nx: [oops\n---\n")
    listed = json.loads(hitl("list", "--json", str(billing), cwd=billing.parent).stdout)
    row = next(r for r in listed if r["id"] == "billing/T-099")
    assert "does not parse" in row["problems"][0]
    result = hitl("answer", "billing/T-099", "--text", "fix", cwd=billing.parent)
    assert result.returncode == 1
    assert "does not parse" in result.stderr
    assert path.read_text() == "---\nstatus: blocked\nx: [oops\n---\n"
