"""The journal's storage (issue 11, items 9 and 10): start-up that does not grow with history,
rotation into segments, retention, paging, the old single-file layout, malformed records.

What is checked is what a user sees (`hitl` subprocesses: exit codes, stdout, stderr) and what
is on disk in the state folder; which journal files a command opens is recorded by an audit hook
in the subprocess, so "start-up reads no history" is a structural check, not a timing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hitl_tui import journal
from hitl_tui.answers.apply import apply_plan
from hitl_tui.cli.commands import main
from hitl_tui.journal import retention
from hitl_tui.journal import store as journalstore
from tests.hostile_cases import copy_shop, hitl_env, snapshot
from tests.test_journal import Crash, crash_at, plan_for

AUDIT = r"""
import os, sys
watch = os.environ["HITL_WATCH"]
log = open(os.environ["HITL_OPENED"], "w")
def hook(event, args):
    if event == "open" and args and isinstance(args[0], (str, bytes)):
        path = os.fsdecode(args[0])
        if path.startswith(watch):
            log.write(path + "\n")
            log.flush()
sys.addaudithook(hook)
from hitl_tui.cli.commands import main
code = main(sys.argv[1:])
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
"""


def jdir() -> Path:
    return journal.journal_dir()


def hitl(*args: object, tmp: Path) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run `hitl ARGS`; also returns the names of the files it opened in journal/."""
    opened = tmp / f"opened-{os.urandom(4).hex()}"
    done = subprocess.run(
        [sys.executable, "-c", AUDIT, *map(str, args)],
        env=hitl_env({"HITL_WATCH": str(jdir()), "HITL_OPENED": opened}),
        capture_output=True,
        text=True,
        timeout=120,
    )
    names = [str(Path(p).relative_to(jdir())) for p in opened.read_text().splitlines()]
    return done, names


def record_files(names: list[str]) -> list[str]:
    """The journal record files among `names` (the active file and closed segments)."""
    return [n for n in names if re.fullmatch(r"journal(-\d+-\w+)?\.jsonl", n)]


def seg_names() -> list[str]:
    return sorted(n for n in os.listdir(jdir()) if journalstore.SEGMENT_RE.match(n))


def answer_many(repo: Path, count: int, monkeypatch, per_segment: bool = True) -> list[str]:
    """Journal `count` distinct answers to `repo` (each its own PROMPT.md bytes), in order."""
    if per_segment:
        monkeypatch.setattr(journalstore, "SEGMENT_BYTES", 1)  # every end record rotates
    ids = []
    for n in range(count):
        entry = journal.begin(plan_for(repo, note=f"answer {n}"))
        journal.commit(entry)
        ids.append(entry)
    return ids


@pytest.fixture
def keep_all():
    retention.use(None)
    yield
    retention.reset()


# -- start-up reads no history -------------------------------------------------------------


def test_start_up_opens_no_journal_record_when_nothing_is_open(
    shop: Path, tmp_path: Path, monkeypatch, keep_all
):
    answer_many(shop, 12, monkeypatch)
    assert len(seg_names()) >= 10
    for args in (("guard", shop), ("list", shop), ("list", "--json", shop)):
        done, opened = hitl(*args, tmp=tmp_path)
        assert done.returncode in (0, 2), done.stderr
        assert done.stderr == ""
        assert record_files(opened) == [], (args, opened)
    # An answer crashed mid-way: start-up reads its open file and the newest records only.
    other = copy_shop(tmp_path / "other")
    old = snapshot(other)
    with pytest.raises(Crash):
        apply_plan(plan_for(other), hook=crash_at("update:PROMPT.md"))
    [name] = os.listdir(jdir() / "open")
    done, opened = hitl("list", other, tmp=tmp_path)
    assert done.returncode == 0
    assert done.stderr.startswith("hitl: rolled back an interrupted answer to other")
    assert snapshot(other) == old
    assert f"open/{name}" in opened
    assert set(record_files(opened)) == {"journal.jsonl"}, opened
    assert os.listdir(jdir() / "open") == []
    done, opened = hitl("guard", shop, tmp=tmp_path)
    assert done.stderr == "" and record_files(opened) == []


def test_a_stale_open_file_is_removed_without_a_second_recovery(shop: Path, tmp_path: Path):
    """A crash between an answer's end record and the removal of its open file."""
    entry = journal.begin(plan_for(shop))
    saved = (jdir() / "open" / entry).read_bytes()
    journal.commit(entry)
    (jdir() / "open" / entry).write_bytes(saved)
    done, _ = hitl("list", shop, tmp=tmp_path)
    assert done.returncode == 0 and done.stderr == ""
    assert os.listdir(jdir() / "open") == []
    [only] = journal.history()
    assert only.status == "done"


# -- rotation, newest first ----------------------------------------------------------------


def test_rotation_and_newest_first_reads(tmp_path: Path, monkeypatch, keep_all):
    a = copy_shop(tmp_path / "a")
    ids = answer_many(a, 8, monkeypatch)
    names = seg_names()
    assert len(names) == 8
    assert names[0].startswith("journal-000001-") and names[-1].startswith("journal-000008-")
    assert [e.id for e in journal.history()] == ids[::-1]

    done, opened = hitl("history", "-n", "2", tmp=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [line.split()[2] for line in done.stdout.splitlines()[:2]] == ids[:-3:-1]
    assert names[0] not in opened and names[3] not in opened  # it stopped at what it needed

    # Undo by id reads back to that answer only. (Its files are not the answer's new bytes:
    # these answers were journaled, not written, so it refuses, exit 3, writing nothing.)
    done, opened = hitl("undo", ids[5], tmp=tmp_path)
    assert done.returncode == 3, done.stderr
    assert "PROMPT.md changed since" in done.stderr
    assert not {names[0], names[4]} & set(opened)
    done, opened = hitl("undo", tmp=tmp_path)
    assert done.returncode == 3 and ids[-1] in done.stderr
    assert names[0] not in opened


def test_an_undo_in_a_newer_segment_marks_its_answer(tmp_path: Path, monkeypatch, keep_all):
    a = copy_shop(tmp_path / "a")
    monkeypatch.setattr(journalstore, "SEGMENT_BYTES", 1)
    apply_plan(plan_for(a))
    answer_many(copy_shop(tmp_path / "b"), 4, monkeypatch)
    target = journal.history()[-1]
    assert target.block_id == "a"
    done, _ = hitl("undo", target.id, tmp=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"undid {target.id}")
    done, _ = hitl("history", "--json", "--limit", "0", tmp=tmp_path)
    data = json.loads(done.stdout)
    assert [d["undone"] for d in data] == [False] * 4 + [True]


# -- paging --------------------------------------------------------------------------------


def test_history_pages(shop: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    ids = answer_many(shop, 60, monkeypatch, per_segment=False)[::-1]
    done, _ = hitl("history", tmp=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[2] for line in lines[:50]] == ids[:50]
    assert lines[50:] == ["(older answers: hitl history --page 2; all of them: --limit 0)"]
    done, _ = hitl("history", "--page", "2", tmp=tmp_path)
    assert [line.split()[2] for line in done.stdout.splitlines()] == ids[50:]
    done, _ = hitl("history", "-n", "20", "--page", "3", tmp=tmp_path)
    assert [line.split()[2] for line in done.stdout.splitlines()] == ids[40:]
    done, _ = hitl("history", "--limit", "0", tmp=tmp_path)
    assert [line.split()[2] for line in done.stdout.splitlines()] == ids
    done, _ = hitl("history", "--json", "-n", "5", "--page", "2", tmp=tmp_path)
    assert [d["id"] for d in json.loads(done.stdout)] == ids[5:10]
    assert done.stderr == "hitl: older answers: hitl history --json -n 5 --page 3\n"
    done, _ = hitl("history", "--page", "0", tmp=tmp_path)
    assert done.returncode == 2 and "--page" in done.stderr


# -- retention -----------------------------------------------------------------------------


def age(name: str, days: int) -> str:
    """Rename segment `name` as if it had been closed `days` ago."""
    match = journalstore.SEGMENT_RE.match(name)
    assert match
    when = datetime.now(UTC) - timedelta(days=days)
    new = f"journal-{match.group(1)}-{when:%Y%m%dT%H%M%SZ}.jsonl"
    os.rename(jdir() / name, jdir() / new)
    return new


def named_blobs() -> set[str]:
    names = set()
    for path in [jdir() / "journal.jsonl", *(jdir() / n for n in seg_names())]:
        if not path.exists():
            continue
        for line in path.read_bytes().splitlines():
            record = json.loads(line)
            for step in record.get("files", []):
                names |= {step["old_sha256"], step["new_sha256"]} - {None}
    return names


def test_retention_prunes_old_segments_and_their_blobs_never_an_open_answer(
    tmp_path: Path, monkeypatch
):
    config = Path(os.environ["HITL_CONFIG"])
    config.write_text('journal_keep = "30d"\n')
    # Nothing hands the retention over: the journal reads it from the config file (retention).
    a = copy_shop(tmp_path / "a")
    old_ids = answer_many(a, 4, monkeypatch)
    # An answer crashed mid-way, long ago, and never recovered since: it must survive.
    crashed = copy_shop(tmp_path / "crashed")
    with pytest.raises(Crash):
        apply_plan(plan_for(crashed), hook=crash_at("update:PROMPT.md"))
    answer_many(a, 2, monkeypatch)  # closes the crashed answer's begin into a segment
    for name in seg_names():
        age(name, 60)
    old_blobs = {p.name for p in (jdir() / "blobs").iterdir()}
    new_ids = answer_many(copy_shop(tmp_path / "b"), 2, monkeypatch)  # rotates: retention runs
    left = seg_names()
    # The old answers' segments are gone; the crashed answer's segment and all after it stay.
    assert not any(e.id in old_ids for e in journal.history(include_undos=True))
    assert [n[:14] for n in left] == [f"journal-00000{n}" for n in (5, 6, 7, 8)], left
    blobs = {p.name for p in (jdir() / "blobs").iterdir()}
    assert blobs == named_blobs()
    assert old_blobs - blobs  # the old answers' own bytes were pruned with them
    [message] = journal.recover()
    assert message.startswith("rolled back an interrupted answer to crashed")
    assert snapshot(crashed) == snapshot(copy_shop(tmp_path / "pristine" / "crashed"))
    assert [e.id for e in journal.history()][:2] == new_ids[::-1]


@pytest.mark.parametrize(
    ("config", "pruned"),
    [
        (None, False),  # no config file: the default, 90 days
        ('journal_keep = "7d"\n', True),
        ('journal_keep = "forever"\n', False),
        ('journal_keep = "soon"\n', False),  # not a duration: keep everything
        ('journal_keep = "7d"\nrepos = [\n', False),  # not TOML: keep everything
        ('operator = "Ada"\n', False),  # says nothing of it: the default
    ],
)
def test_answers_and_undos_outside_the_cli_keep_what_the_config_file_says(
    tmp_path: Path, monkeypatch, config: str | None, pruned: bool
):
    """No command ran (the app started some other way, a script, a test): the journal still
    reads `journal_keep` from the config file when an answer or an undo rotates it."""
    if config is not None:
        Path(os.environ["HITL_CONFIG"]).write_text(config)
    old_ids = answer_many(copy_shop(tmp_path / "a"), 3, monkeypatch)
    for name in seg_names():
        age(name, 10)
    shop = copy_shop(tmp_path / "shop")
    apply_plan(plan_for(shop))  # commits, rotates: retention runs
    kept = {e.id for e in journal.history()}
    assert kept.isdisjoint(old_ids) if pruned else set(old_ids) <= kept
    assert journal.undo(operator="Ada").startswith("undid ")  # rotates again, the same rule
    kept = {e.id for e in journal.history()}
    assert kept.isdisjoint(old_ids) if pruned else set(old_ids) <= kept
    assert {p.name for p in (jdir() / "blobs").iterdir()} == named_blobs()


def test_a_config_handed_over_outweighs_the_config_file(tmp_path: Path, monkeypatch):
    """`--config FILE`: the command hands its Config's `journal_keep` over (cli_base)."""
    Path(os.environ["HITL_CONFIG"]).write_text('journal_keep = "forever"\n')
    old_ids = answer_many(copy_shop(tmp_path / "a"), 3, monkeypatch)
    for name in seg_names():
        age(name, 10)
    retention.use(timedelta(days=7))
    try:
        apply_plan(plan_for(copy_shop(tmp_path / "shop")))
    finally:
        retention.reset()
    assert {e.id for e in journal.history()}.isdisjoint(old_ids)
    assert retention.current() is None  # back to the file's "forever"


@pytest.mark.parametrize(
    ("value", "ok"),
    [('"90d"', True), ('"12w"', True), ('"48h"', True), ('"forever"', True), ('"soon"', False),
     ("90", False), ('"0d"', False), ('"-3d"', False), ('""', False)],
)  # fmt: skip
def test_journal_keep_config(tmp_path: Path, shop: Path, value: str, ok: bool):
    config = tmp_path / "hitl.toml"
    config.write_text(f"journal_keep = {value}\n")
    done, _ = hitl("list", "--config", config, shop, tmp=tmp_path)
    if ok:
        assert done.returncode == 0, done.stderr
        return
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(f"hitl: {config}: 'journal_keep' must be a duration"), line


# -- the old layout ------------------------------------------------------------------------


def legacy_records(repo: Path) -> list[dict]:
    """One answer committed and one crashed, as the single-file layout recorded them."""
    journal.begin(plan_for(repo))  # only to store the blobs; its records are replaced below
    begin = json.loads((jdir() / "journal.jsonl").read_bytes().splitlines()[0])
    shutil.rmtree(jdir() / "open", ignore_errors=True)
    (jdir() / "journal.jsonl").unlink()
    done = {**begin, "id": "20240101-000000-aaaaaa", "time": "2024-01-01T00:00:00+00:00"}
    crashed = {**begin, "id": "20240102-000000-bbbbbb", "time": "2024-01-02T00:00:00+00:00"}
    commit = {"v": 1, "type": "commit", "id": done["id"], "time": done["time"], "by": "apply"}
    return [done, commit, crashed]


def test_the_single_file_layout_keeps_working(shop: Path, tmp_path: Path, monkeypatch):
    records = legacy_records(shop)
    lines = b"".join(json.dumps(r).encode() + b"\n" for r in records)
    (jdir() / "journal.jsonl").write_bytes(lines)
    old = snapshot(shop)
    (shop / "PROMPT.md").write_bytes(b"half of the crashed answer\n")
    done, _ = hitl("list", shop, tmp=tmp_path)
    assert done.returncode == 0
    assert "rolled back an interrupted answer to shop (20240102-000000-bbbbbb)" in done.stderr
    assert snapshot(shop) != old  # PROMPT.md was not the answer's new bytes: left as it is
    assert (jdir() / "open").is_dir() and os.listdir(jdir() / "open") == []
    done, _ = hitl("history", "--json", tmp=tmp_path)
    data = json.loads(done.stdout)
    assert [(d["id"], d["status"]) for d in data] == [
        ("20240102-000000-bbbbbb", "rolled back"),
        ("20240101-000000-aaaaaa", "done"),
    ]
    # Past the cap, the old file becomes the first segment, and reads back the same.
    monkeypatch.setattr(journalstore, "SEGMENT_BYTES", 1)
    retention.use(None)
    try:
        journal.commit(journal.begin(plan_for(copy_shop(tmp_path / "b"))))
    finally:
        retention.reset()
    assert seg_names()[0].startswith("journal-000001-")
    assert [e.id for e in journal.history()][1:] == [d["id"] for d in data]


# -- malformed records (item 10) -----------------------------------------------------------

GOOD_TIME = "2024-05-01T10:00:00+00:00"


def a_begin(entry_id: str, repo: Path) -> dict:
    return {
        "v": 1,
        "type": "begin",
        "id": entry_id,
        "time": GOOD_TIME,
        "kind": "answer",
        "undoes": None,
        "operator": "Eve",
        "repo": str(repo),
        "block": {"id": "x", "source": "loopkit", "path": str(repo / "BLOCKED.md"),
                  "fingerprint": "sha256:" + "0" * 64, "question": "?"},
        "answer": {"decision": "A) yes"},
        "summary": "s",
        "files": [{"path": str(repo / "PROMPT.md"), "action": "update", "old_sha256": "1" * 64,
                   "new_sha256": "2" * 64, "old_mode": 0o644, "new_mode": None}],
    }  # fmt: skip


HUGE = "1" + "0" * 5000  # past Python's int-from-text digit limit
WRONG = ["[1]", "{}", "1.5", "true", "10000000000000000000000000000000", '"x"']
FIELDS = [
    ("v",), ("type",), ("id",), ("time",), ("kind",), ("undoes",), ("operator",), ("repo",),
    ("block",), ("answer",), ("summary",), ("files",),
    ("block", "id"), ("block", "source"), ("block", "path"), ("block", "fingerprint"),
    ("block", "question"), ("answer", "decision"),
    ("files", 0), ("files", 0, "path"), ("files", 0, "action"), ("files", 0, "old_sha256"),
    ("files", 0, "new_sha256"), ("files", 0, "old_mode"), ("files", 0, "new_mode"),
]  # fmt: skip
#: Fields where any string is a fine value (the others want a type, a format or a keyword).
STRINGS = {("id",), ("undoes",), ("operator",), ("repo",), ("summary",), ("block", "id"),
           ("block", "source"), ("block", "path"), ("block", "fingerprint"),
           ("block", "question"), ("answer", "decision"), ("files", 0, "path")}  # fmt: skip


def mutated(repo: Path, where: tuple, value: str, n: int) -> bytes:
    record = a_begin(f"20240501-100000-{n:06x}", repo)
    marker = "@@WRONG@@"
    target = record
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = marker
    return json.dumps(record).replace(f'"{marker}"', value).encode()


BAD_LINES = {
    "block is a string": json.dumps({**a_begin("20240501-100000-000b10", Path("/r")),
                                     "block": "a string"}).encode(),
    "naive time": json.dumps({**a_begin("20240501-100000-000b11", Path("/r")),
                              "time": "2024-05-01T10:00:00"}).encode(),
    "naive time, commit": b'{"v":1,"type":"commit","id":"x1","time":"2024-05-01T10:00:00"}',
    "huge int": json.dumps(a_begin("20240501-100000-000b12", Path("/r"))).replace(
        '"old_mode": 420', f'"old_mode": {HUGE}').encode(),
    "huge int time": b'{"v":1,"type":"commit","id":"x2","time":' + HUGE.encode() + b"}",
    "nested junk": b'{"v":1,"type":"begin","id":"x3","files":' + b"[" * 200_000 + b"]" * 200_000
    + b"}",
    "nested junk in files": json.dumps({**a_begin("20240501-100000-000b13", Path("/r")),
                                        "files": [[[[{"path": {}}]]]]}).encode(),
    "a list": b"[1, 2, 3]",
    "a string": b'"begin"',
    "null": b"null",
    "a number": b"17",
    "not JSON": b"\xff\xfe not json at all {",
    "bad id (a path)": json.dumps(a_begin("../../etc", Path("/r"))).encode(),
    "unknown version": json.dumps({**a_begin("20240501-100000-000b14", Path("/r")),
                                   "v": 99}).encode(),
    "end with a bad by": b'{"v":1,"type":"rollback","id":"x4","time":"' + GOOD_TIME.encode()
    + b'","by":[1]}',
}  # fmt: skip


def good_answer(shop: Path) -> str:
    apply_plan(plan_for(shop))
    return journal.history()[0].id


def append_line(line: bytes, newline: bool = True) -> int:
    """Append one raw line to the active journal file; returns its line number."""
    path = jdir() / "journal.jsonl"
    data = path.read_bytes()
    path.write_bytes(data + line + (b"\n" if newline else b""))
    return data.count(b"\n") + 1


@pytest.mark.parametrize("case", list(BAD_LINES))
def test_a_malformed_record_is_skipped_and_reported(shop: Path, tmp_path: Path, case: str):
    entry = good_answer(shop)
    line = append_line(BAD_LINES[case])
    report = f"hitl: skipped 1 malformed journal record (journal.jsonl line {line})\n"
    done, _ = hitl("history", tmp=tmp_path)
    assert done.returncode == 0, done.stderr
    assert entry in done.stdout and "[done]" in done.stdout
    assert done.stderr == report
    done, _ = hitl("history", "--json", "--all", tmp=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [d["id"] for d in json.loads(done.stdout)] == [entry]
    assert done.stderr == report
    done, _ = hitl("undo", tmp=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"undid {entry}")
    assert done.stderr == report
    assert (shop / "BLOCKED.md").exists()
    done, _ = hitl("guard", shop, tmp=tmp_path)
    assert done.returncode == 2 and done.stderr == ""  # start-up never reads it


@pytest.mark.parametrize("where", FIELDS, ids=lambda w: ".".join(map(str, w)))
def test_every_field_of_the_wrong_type_is_skipped(shop: Path, capsys, where: tuple):
    entry = good_answer(shop)
    values = [v for v in WRONG if not (v == '"x"' and where in STRINGS)]
    values = [v for v in values if not (v == "{}" and where in (("block",), ("answer",)))]
    for n, value in enumerate(values):
        append_line(mutated(shop, where, value, n))
    assert main(["history", "--json"]) == 0
    captured = capsys.readouterr()
    assert [d["id"] for d in json.loads(captured.out)] == [entry]
    [report] = captured.err.splitlines()
    assert report.startswith(f"hitl: skipped {len(values)} malformed journal records (")
    assert main(["undo"]) == 0
    assert capsys.readouterr().out.startswith(f"undid {entry}")


def test_a_torn_last_line_and_duplicate_ids(shop: Path, tmp_path: Path):
    entry = good_answer(shop)
    begin = json.loads((jdir() / "journal.jsonl").read_bytes().splitlines()[0])
    dup = append_line(json.dumps({**begin, "answer": {"decision": "Z) forged"}}).encode())
    torn = append_line(b'{"v":1,"type":"commit","id":"' + entry.encode() + b'","ti', False)
    done, _ = hitl("history", tmp=tmp_path)
    assert done.returncode == 0
    [line] = done.stdout.splitlines()
    assert entry in line and "Z) forged" in line  # newest first: the newer begin counts
    assert done.stderr == (
        f"hitl: skipped 2 malformed journal records (journal.jsonl line 1, journal.jsonl line "
        f"{torn})\n"
    )
    assert dup == 3


def test_a_malformed_open_file_is_reported_and_left(shop: Path, tmp_path: Path):
    (jdir() / "open").mkdir(parents=True)
    (jdir() / "open" / "20240501-100000-0000aa").write_bytes(b'{"segment": "x"}')
    done, _ = hitl("guard", shop, tmp=tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        "hitl: skipped 1 malformed journal record (open/20240501-100000-0000aa)\n"
    )


# -- crash safety of rotation and retention --------------------------------------------------


def test_a_crash_at_any_point_of_rotation_and_pruning(tmp_path: Path, monkeypatch):
    """A real `hitl answer` whose commit rotates the journal and prunes old segments and blobs,
    stopped before each of its last file-system calls: the journal reads back and recovers, and
    every blob a kept record names is there."""
    import re as regex

    from tests.hostile_cases import run_hitl

    template = tmp_path / "template"
    monkeypatch.setenv("HITL_STATE_DIR", str(template / "state"))
    a = copy_shop(template / "a")
    old_ids = answer_many(a, 3, monkeypatch)  # three segments, each with bytes of its own
    for name in seg_names():
        age(name, 100)  # past the default retention (90 days)
    monkeypatch.setattr(journalstore, "SEGMENT_BYTES", 4 * 1024 * 1024)
    assert journalstore.SEGMENT_BYTES == 4 * 1024 * 1024
    journal.commit(journal.begin(plan_for(a)))
    # Pad the active file to just under the cap with a well-formed record that names no entry:
    # the next answer's end record pushes it past, and that command rotates and prunes.
    active = jdir() / "journal.jsonl"
    pad = {"v": 1, "type": "rollback", "id": "padding", "time": GOOD_TIME, "reason": ""}
    room = journalstore.SEGMENT_BYTES - 100 - active.stat().st_size - len(json.dumps(pad)) - 1
    pad["reason"] = "x" * room
    with open(active, "a") as out:
        out.write(json.dumps(pad) + "\n")
    copy_shop(template / "shop")

    def trial(name: str, fault: dict):
        folder = tmp_path / name
        shutil.copytree(template, folder, symlinks=True)
        monkeypatch.setenv("HITL_STATE_DIR", str(folder / "state"))
        repo = folder / "shop"
        return repo, run_hitl("answer", repo / "BLOCKED.md", "--choice", "B", fault=fault)

    repo, full = trial("full", {"count": True})
    assert full.returncode == 0, full.err
    total = int(regex.search(r"FAULT-CALLS (\d+)", full.err).group(1))
    assert [n[:14] for n in seg_names()] == ["journal-000004"]  # rotated, the old ones pruned
    new = snapshot(repo)
    old = snapshot(template / "shop")
    kept_ids = {e.id for e in journal.history(limit=0)}
    assert not kept_ids & set(old_ids)

    states = set()
    # After its end record `hitl answer` also saves the since memory and the memory of the
    # recent answers (`similar`, for `hitl list`), and the pruning notes what it deleted
    # (pruned.json): the sweep starts far enough back to cross the rotation and the pruning
    # before those.
    for n in range(max(1, total - 80), total + 1):
        repo, run = trial(f"crash-{n}", {"crash_at": n})
        assert run.returncode in (0, 86), (n, run.err)
        journal.recover()
        assert snapshot(repo) in (old, new), n
        entries = journal.history(limit=0)
        ids = [e.id for e in entries]
        assert len(ids) == len(set(ids)), n
        assert all(e.status != "in progress" for e in entries), n
        blobs = {p.name for p in (jdir() / "blobs").iterdir()}
        assert named_blobs() <= blobs, n
        assert journalstore.skipped_report() is None, n
        states.add(tuple(name[:14] for name in seg_names()))
        journalstore.apply_retention()  # the next pass finishes what was cut short
        assert {e.id for e in journal.history(limit=0)} == set(ids) - set(old_ids), n
        assert {p.name for p in (jdir() / "blobs").iterdir()} == named_blobs(), n
    # The sweep crossed the moments of interest: before the rotation, between the rotation and
    # the pruning, half-way through pruning, and after it.
    old_names = ("journal-000001", "journal-000002", "journal-000003")
    assert old_names in states
    assert (*old_names, "journal-000004") in states
    assert ("journal-000004",) in states
    assert len(states) >= 4, states
