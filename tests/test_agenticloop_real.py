"""agenticloop as agenticloop reads it, on files its own CLI wrote (fixtures/agenticloop-real).

`fresh/` is a project just after `agenticloop init` and one `task new --scaffold`; `shop/` has
four blocks written by agenticloop's own `task status`. These run hitl as a user does: `list`,
`list --json` and `guard` as real subprocesses, the app under Pilot.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from tests.hostile_cases import run_hitl as _run_hitl

REAL = FIXTURES / "agenticloop-real"
PROJECT = Path(".agenticloop") / "project.md"
TASKS = Path(".agenticloop") / "tasks"


class Ran:
    def __init__(self, *args: object) -> None:
        done = _run_hitl(*args)
        self.rc = done.returncode
        self.stdout = done.stdout.decode()
        self.stderr = done.stderr.decode()


def run_hitl(*args: object) -> Ran:
    """`hitl ARGS` in a real subprocess: exit code, stdout and stderr as text."""
    return Ran(*args)


def _copy(tmp_path: Path, name: str, dest: str | None = None) -> Path:
    repo = tmp_path / (dest or name)
    shutil.copytree(REAL / name, repo)
    (repo / ".git").mkdir()
    return repo


@pytest.fixture
def fresh(tmp_path: Path) -> Path:
    return _copy(tmp_path, "fresh")


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    return _copy(tmp_path, "shop")


def _ids(stdout: str) -> list[str]:
    return sorted(row["id"] for row in json.loads(stdout))


# -- 1. a fresh project is not a block ---------------------------------------------------------


def test_fresh_project_lists_nothing_and_guard_lets_the_loop_run(fresh: Path) -> None:
    listed = run_hitl("list", fresh)
    assert (listed.rc, listed.stdout, listed.stderr) == (0, "no open blocks in 1 repo\n", "")
    as_json = run_hitl("list", "--json", fresh)
    assert (as_json.rc, json.loads(as_json.stdout), as_json.stderr) == (0, [], "")
    guarded = run_hitl("guard", fresh)
    assert (guarded.rc, guarded.stdout, guarded.stderr) == (0, "", "")


def test_fresh_project_md_reads_as_agenticloop_reads_it(fresh: Path) -> None:
    from hitl_tui.sources.agenticloop import frontmatter

    data = frontmatter.read_frontmatter((fresh / PROJECT).read_text()).data
    assert data is not None
    assert data["task_id_regex"] == "^T-\\d{3,}$"  # quoted: taken literally, no escapes
    assert data["task_file_template"] == ".agenticloop/tasks/{taskId}.md"
    assert data["event_logging_command"] == ""
    assert data["default_attempt_budget"] == "5"  # agenticloop's reader keeps every scalar text
    assert data["group_closeout"] == "false"
    # The commented-out examples stay comments.
    assert "documents" not in data and "engineer_context_window_tokens" not in data


def test_shop_lists_its_four_blocks(shop: Path) -> None:
    run = run_hitl("list", "--json", shop)
    assert run.rc == 0 and run.stderr == ""
    rows = {row["id"]: row for row in json.loads(run.stdout)}
    assert sorted(rows) == ["shop/T-001", "shop/T-002", "shop/T-003", "shop/T-004"]
    assert (rows["shop/T-001"]["state"], rows["shop/T-001"]["category"]) == ("blocked", "contract")
    assert rows["shop/T-001"]["choices"][1]["option"] == "Approve the change request"
    assert rows["shop/T-003"]["category"] == "credentials"
    assert rows["shop/T-002"]["state"] == rows["shop/T-004"]["state"] == "needs_context"
    assert len(rows["shop/T-004"]["questions"]) == 2


# -- 2. a custom task folder --------------------------------------------------------------------


def test_quoted_custom_task_folder_is_where_the_tasks_are(shop: Path) -> None:
    project = shop / PROJECT
    project.write_text(
        project.read_text().replace(
            'task_file_template: ".agenticloop/tasks/{taskId}.md"',
            'task_file_template: "work/tasks/{taskId}.md"',
        )
    )
    (shop / "work").mkdir()
    (shop / TASKS).rename(shop / "work" / "tasks")
    run = run_hitl("list", "--json", shop)
    assert (run.rc, run.stderr) == (0, "")
    rows = json.loads(run.stdout)
    assert sorted(r["id"] for r in rows) == ["shop/T-001", "shop/T-002", "shop/T-003", "shop/T-004"]
    assert {Path(r["path"]).parent for r in rows} == {shop / "work" / "tasks"}
    guarded = run_hitl("guard", shop)
    assert guarded.rc == 2 and guarded.stdout.count("\n") == 4


# -- 4. a config problem is a warning, never a block --------------------------------------------


def _break_project(repo: Path) -> None:
    """An invalid line in project.md (line 7 of the file), as a hand edit might leave it."""
    project = repo / PROJECT
    lines = project.read_text().split("\n")
    lines.insert(6, "this line is not a key")
    project.write_text("\n".join(lines))


BROKEN_WARNING = (
    "hitl: warning: shop: .agenticloop/project.md could not be read (line 7: 'this line is "
    "not a key' is neither `key: value`, a `- item` nor a # comment); looking for tasks "
    "in .agenticloop/tasks/ (where agenticloop itself looks)\n"
)


def test_broken_project_md_is_one_warning_and_the_blocks_still_list(shop: Path) -> None:
    _break_project(shop)
    listed = run_hitl("list", shop)
    assert listed.rc == 0
    assert [line.split()[0] for line in listed.stdout.splitlines()] == [
        "shop/T-001",
        "shop/T-002",
        "shop/T-003",
        "shop/T-004",
    ]
    assert listed.stderr == BROKEN_WARNING
    as_json = run_hitl("list", "--json", shop)
    assert as_json.rc == 0 and len(json.loads(as_json.stdout)) == 4
    assert as_json.stderr == listed.stderr
    guarded = run_hitl("guard", shop)
    assert guarded.rc == 2 and len(guarded.stdout.splitlines()) == 4
    assert ".agenticloop:" not in guarded.stdout and guarded.stderr == listed.stderr


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"\x00\x01\xffbinary\x00", "it is not UTF-8 text"),
        (b"- a\n- b\n", "it has no --- header"),
        (b"---\n- just\n- a list\n---\n", "line 2: '- just' is neither"),
        (b'---\ntask_id_regex: "^T-\\d{3,}$\n---\n', "line 2: the value in"),
    ],
)
def test_unreadable_project_md_never_stops_the_loop(fresh: Path, content: bytes, why: str) -> None:
    (fresh / PROJECT).write_bytes(content)
    guarded = run_hitl("guard", fresh)
    assert (guarded.rc, guarded.stdout) == (0, "")
    assert guarded.stderr.startswith("hitl: warning: fresh: .agenticloop/project.md could not ")
    assert why in guarded.stderr
    assert guarded.stderr.endswith(
        "looking for tasks in .agenticloop/tasks/ (where agenticloop itself looks)\n"
    )
    assert guarded.stderr.count("\n") == 1
    listed = run_hitl("list", "--json", fresh)
    assert (listed.rc, json.loads(listed.stdout), listed.stderr) == (0, [], guarded.stderr)


def test_template_leaving_the_repo_is_a_warning_and_reads_no_folder(shop: Path) -> None:
    project = shop / PROJECT
    project.write_text(
        project.read_text().replace(
            '"'.join(["task_file_template: ", ".agenticloop/tasks/{taskId}.md", ""]),
            'task_file_template: "../elsewhere/{taskId}.md"',
        )
    )
    guarded = run_hitl("guard", shop)
    assert (guarded.rc, guarded.stdout) == (0, "")
    assert guarded.stderr == (
        "hitl: warning: shop: the task folder is refused: task_file_template "
        "'../elsewhere/{taskId}.md' points outside the repository; no task folder is read\n"
    )


async def test_the_app_shows_a_warning_in_its_header_and_one_toast(tmp_path: Path) -> None:
    from tests.tui_support import make_app

    shop = _copy(tmp_path, "shop")
    _break_project(shop)
    app = make_app([shop])
    async with app.run_test(size=(150, 40)) as pilot:
        for _ in range(100):
            await pilot.pause()
            if app.loaded:
                break
        await app.workers.wait_for_complete()
        await pilot.pause()
        topbar = str(app.query_one("#topbar").render())
        assert "4 blocks in 1 repo" in topbar and "1 warning" in topbar
        toasts = [n for n in app._notifications if n.title == "Warning"]
        assert len(toasts) == 1
        assert toasts[0].message == BROKEN_WARNING.removeprefix("hitl: warning: ").rstrip("\n")
        assert [b.id for b in app.inbox.sorted_blocks()] == [
            "shop/T-001",
            "shop/T-002",
            "shop/T-003",
            "shop/T-004",
        ]
        # The same warning after a rescan is not toasted again.
        app.apply_delta(app.inbox.handle([shop / PROJECT]), announce=True)
        await pilot.pause()
        assert len([n for n in app._notifications if n.title == "Warning"]) == 1


# -- 5. placeholder words: exactly agenticloop's list -------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Mount the cache config at /etc/shop/cache.toml",
        "Use redis, postgres, etc and nothing else",
        "Whatever is needed, as needs go",
        "The ETCD cluster; TBDX is a tool name",
    ],
)
def test_words_agenticloop_accepts_are_written(shop: Path, text: str) -> None:
    run = run_hitl("answer", "shop/T-002", "--text", text, "--dry-run", shop)
    assert run.rc == 0, run.stderr
    assert text in run.stdout


@pytest.mark.parametrize(
    ("text", "word"),
    [
        ("TBD", "TBD"),
        ("keep 5 minutes, tbd later", "TBD"),
        ("Scale as needed", "as needed"),
        ("Cache prices, rates, etc.", "etc."),
        ("Do it similar to previous task", "similar to previous task"),
        ("To be filled during review", "to be filled"),
    ],
)
def test_placeholder_refusal_names_the_word_and_why(shop: Path, text: str, word: str) -> None:
    before = (shop / TASKS / "T-002.md").read_bytes()
    run = run_hitl("answer", "shop/T-002", "--text", text, shop)
    assert run.rc == 2
    assert f"placeholder {word!r}" in run.stderr
    assert "agenticloop's task linter rejects" in run.stderr
    assert (shop / TASKS / "T-002.md").read_bytes() == before


# -- 6. the list says what the task is ----------------------------------------------------------


def test_list_rows_name_the_task_then_what_is_needed(shop: Path) -> None:
    run = run_hitl("list", shop)
    assert run.rc == 0, run.stderr
    rows = [line.split(None, 2) for line in run.stdout.splitlines()]
    assert [(r[0], r[2]) for r in rows] == [
        (
            "shop/T-001",
            "Switch session storage to Postgres — a human approves the docs change before "
            "implementation.",
        ),
        (
            "shop/T-002",
            "[needs_context] Cache invalidation for price lists — How long may a cached price "
            "list live?",
        ),
        (
            "shop/T-003",
            "Rotate the staging database password — a human adds STAGING_DB_PASSWORD to the CI "
            "secrets.",
        ),
        (
            "shop/T-004",
            "[needs_context] Refund rounding rules — 2 questions: Which rounding applies to "
            "refunds? May a refund exceed the original charge?",
        ),
    ]


def test_a_single_question_is_the_question(shop: Path) -> None:
    run = run_hitl("list", "--json", shop)
    rows = {row["id"]: row for row in json.loads(run.stdout)}
    t2 = rows["shop/T-002"]
    assert t2["question"] == "How long may a cached price list live?"
    assert "Checked: config/cache.yml has no TTL." in t2["context"]
    assert t2["choices"][0]["option"] == "Accept the recommended default: 5 minutes"


def test_warnings_survive_a_scan_in_worker_processes(tmp_path: Path) -> None:
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.inbox.scan import PARALLEL_MIN_REPOS
    from hitl_tui.inbox.workspace import Workspace

    for i in range(PARALLEL_MIN_REPOS):
        (tmp_path / f"r{i:02d}" / ".git").mkdir(parents=True)
    shop = _copy(tmp_path, "shop")
    _break_project(shop)
    inbox = Inbox(Workspace.discover([tmp_path]))
    inbox.scan(workers=2)
    assert len(inbox.blocks) == 4
    assert inbox.warnings == [BROKEN_WARNING.removeprefix("hitl: warning: ").rstrip("\n")]
