"""Fleet stats (issue 29): `hitl_tui.stats` and `hitl stats`.

The journal is built through real answers (the answer service on real git repositories, a
controlled clock for the journal and the resume book; each block's start is its file's time,
as the since book first sees it), real undos, a real failed restart and the resume book's own
checks; every figure is checked against values computed by hand. The unknowns: a journal
pruned by retention (real rotation and retention), and [[remote]] hosts over a real sshd, one
never reached and one reached, then down."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import fields
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hitl_tui import journal
from hitl_tui.answers.service import answer, plan_answer
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.journal import entries as journal_entries
from hitl_tui.journal import store as journalstore
from hitl_tui.loops.commands import Loop
from hitl_tui.loops.resume import NAME as RESUME_FILE
from hitl_tui.loops.resume import ResumeBook
from hitl_tui.model import Answer
from hitl_tui.state import files as statefile
from hitl_tui.stats import Day, Figures, Stats, Unknown, compute
from hitl_tui.stats import index as stats_index
from tests.sshd import Sshd
from tests.support.repos import git_shop

HITL = Path(sys.executable).parent / "hitl"
HOUR = timedelta(hours=1)
MIN = timedelta(minutes=1)
#: Midnight UTC five days ago: every time of the scenario is in the past (the since book
#: never dates a block later than now).
D = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=5)


class Fleet:
    """Three real git repositories (shop, api, web) answered on a controlled clock."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.repos = {name: git_shop(root / name) for name in ("shop", "api", "web")}
        self.blocked = (self.repos["shop"] / "BLOCKED.md").read_bytes()
        for repo in self.repos.values():
            (repo / "BLOCKED.md").unlink()
        self.clock = [D]
        monkeypatch.setattr(journal_entries, "_now", lambda: self.clock[0])
        monkeypatch.setattr(journalstore, "_now", lambda: self.clock[0])
        self.book = ResumeBook(statefile.in_state(RESUME_FILE), clock=lambda: self.clock[0])

    def block(self, name: str, at: datetime) -> None:
        """The loop of `name` blocks at `at` (its BLOCKED.md dated then)."""
        path = self.repos[name] / "BLOCKED.md"
        path.write_bytes(self.blocked)
        os.utime(path, (at.timestamp(), at.timestamp()))

    def answer(self, name: str, at: datetime, loops: tuple[Loop, ...] = ()) -> str:
        self.clock[0] = at
        inbox = Inbox.open([self.repos[name]], cached=True)  # with the since book, as hitl
        inbox.use_resumes(self.book, loops)
        [block] = inbox.blocks.values()
        plan = plan_answer(inbox, block, Answer(choice=block.choices[1], operator="Ada"))
        done = answer(inbox, plan, loops)
        assert done.entry is not None
        inbox.save_cache()
        # hitl looks again (`hitl list`, the app): the answered block is gone and forgotten,
        # so the loop's next block begins anew
        Inbox.open([self.repos[name]], cached=True).save_cache()
        return done.entry

    def undo(self, entry: str, at: datetime) -> None:
        self.clock[0] = at
        journal.undo(entry, operator="Ada")
        self.book.undone(entry)

    def check(self, at: datetime) -> None:
        self.clock[0] = at
        self.book.check(at)


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _isolated_state: Path) -> Fleet:
    """The scenario every figure below is computed by hand from (times after D, UTC):

    day 0  shop blocks 01:00, answered 01:10 (wait 10m)
           api  blocks 02:00, answered 02:30 (30m)
           web  blocks 03:00, answered 03:05, undone 03:06 (its block is back, begun 03:00:
                the book forgets the answer's record), answered again 04:00 (wait 1h)
    day 1  nothing
    day 2  shop blocks again 01:00; the book's check at 01:01 sees it: shop's answer was
                asked again, web's (due 04:10) not resumed, api's too, until api's block is
                answered again (the book keeps the newest answer of a block)
           shop answered 03:00 (2h)
           api  blocks 05:00, answered 05:20 (20m), its [[loop]] restart fails (exit 3)
    day 3  web blocks 02:00, still open at 12:00 (now): 10h
    """
    f = Fleet(tmp_path / "loops", monkeypatch)
    f.block("shop", D + 1 * HOUR)
    f.answer("shop", D + 1 * HOUR + 10 * MIN)
    f.block("api", D + 2 * HOUR)
    f.answer("api", D + 2 * HOUR + 30 * MIN)
    f.block("web", D + 3 * HOUR)
    undone = f.answer("web", D + 3 * HOUR + 5 * MIN)
    f.undo(undone, D + 3 * HOUR + 6 * MIN)
    f.answer("web", D + 4 * HOUR)
    f.block("shop", D + timedelta(days=2) + 1 * HOUR)
    f.check(D + timedelta(days=2) + 1 * HOUR + 1 * MIN)
    f.answer("shop", D + timedelta(days=2) + 3 * HOUR)
    f.block("api", D + timedelta(days=2) + 5 * HOUR)
    failing = Loop(
        match=(str(tmp_path / "loops" / "api"),), restart=(sys.executable, "-c", "exit(3)")
    )
    f.answer("api", D + timedelta(days=2) + 5 * HOUR + 20 * MIN, (failing,))
    f.block("web", D + timedelta(days=3) + 2 * HOUR)
    f.clock[0] = NOW
    return f


NOW = D + timedelta(days=3, hours=12)


def _open(f: Fleet) -> list:
    inbox = Inbox.open(list(f.repos.values()), cached=True)
    return inbox.sorted_blocks()


def _stats(f: Fleet, by: str = "repo", since: datetime = D, **kw) -> Stats:
    return compute(
        since=since,
        by=by,
        now=NOW,
        repos=[str(r) for r in f.repos.values()],
        open_blocks=_open(f),
        resumes=f.book.recent(since=timedelta(days=30)),
        tz=UTC,
        **kw,
    )


def test_the_scenario_is_what_the_figures_are_computed_from(fleet: Fleet) -> None:
    """The resume book and the journal hold what the scenario says (else the hand-computed
    figures below would check something else)."""
    records = fleet.book.recent(since=timedelta(days=30))
    states = sorted((Path(r.repo).name, r.state, r.how or "") for r in records)
    assert states == [
        ("api", "restart-failed", ""),
        ("shop", "resumed", "asked again (new BLOCKED.md)"),
        ("shop", "waiting", ""),
        ("web", "not-resumed", ""),
    ]
    answers = [e for e in journal.history()]
    assert len(answers) == 6 and sum(e.undone for e in answers) == 1


def test_every_overall_figure_by_hand(fleet: Fleet) -> None:
    stats = _stats(fleet)
    o = stats.overall
    # waits of the answers that stand: 10m, 30m, 1h, 2h, 20m (the undone one left out)
    assert o.answered == 6 and o.undone == 1
    assert o.wait_median_s == 1800.0  # 600 1200 [1800] 3600 7200
    assert o.wait_p90_s == 7200.0  # nearest rank: ceil(0.9 * 5) = the 5th
    assert o.wait_max_s == 7200.0
    assert o.opened == 6  # five answered blocks (web's counted once) and web's open one
    assert o.blocked_s == 600 + 1800 + 3600 + 7200 + 1200 + 10 * 3600
    assert o.open_now == 1 and o.oldest_open_s == 10 * 3600
    # outcomes of the four answers the book holds
    assert o.outcomes_known == 4
    assert (o.asked_again, o.asked_again_rate) == (1, 0.25)
    assert (o.not_resumed, o.not_resumed_rate) == (1, 0.25)
    assert o.restarts_failed == 1
    assert stats.unknowns == ()


def test_per_repo_per_day_and_a_day_with_nothing(fleet: Fleet) -> None:
    stats = _stats(fleet)
    rows = {Path(r.key).name: r for r in stats.rows}
    assert [Path(r.key).name for r in stats.rows] == ["web", "shop", "api"]  # most blocked first
    shop, api, web = rows["shop"], rows["api"], rows["web"]
    assert (shop.answered, shop.wait_median_s, shop.wait_max_s) == (2, 3900.0, 7200.0)
    assert (shop.asked_again, shop.asked_again_rate, shop.open_now) == (1, 0.5, 0)
    assert shop.oldest_open_s is None and shop.blocked_s == 600 + 7200
    assert (api.answered, api.wait_median_s, api.wait_p90_s) == (2, 1500.0, 1800.0)
    assert (api.not_resumed, api.restarts_failed, api.not_resumed_rate) == (0, 1, 0.0)
    assert (web.answered, web.undone, web.wait_median_s, web.opened) == (2, 1, 3600.0, 2)
    assert (web.not_resumed, web.not_resumed_rate, web.outcomes_known) == (1, 1.0, 1)
    assert (web.open_now, web.oldest_open_s, web.blocked_s) == (1, 36000.0, 3600.0 + 36000)
    assert stats.days == (
        Day(D.date(), 3, 4, 600.0 + 1800 + 3600),
        Day((D + timedelta(days=1)).date(), 0, 0, 0.0),  # the day with nothing
        Day((D + timedelta(days=2)).date(), 2, 2, 7200.0 + 1200),
        Day((D + timedelta(days=3)).date(), 1, 0, 36000.0),
    )
    by_day = _stats(fleet, by="day")
    assert [r.key for r in by_day.rows] == [d.day.isoformat() for d in stats.days]
    quiet = by_day.rows[1]
    assert (quiet.opened, quiet.answered, quiet.blocked_s, quiet.wait_median_s) == (0, 0, 0, None)
    assert by_day.rows[2].wait_median_s == 4200.0  # 2h and 20m, answered that day
    by_source = _stats(fleet, by="source")
    assert [(r.key, r.answered, r.open_now) for r in by_source.rows] == [("loopkit", 6, 1)]


def test_a_window_counts_only_what_is_in_it(fleet: Fleet) -> None:
    """From day 2: two answers given in it, the blocks begun in it, the blocked time within."""
    since = D + timedelta(days=2)
    o = _stats(fleet, since=since).overall
    assert (o.answered, o.wait_median_s, o.opened) == (2, 4200.0, 3)
    assert o.blocked_s == 7200 + 1200 + 36000
    assert stats_index.read_window(since).segments_read == 0  # no rotation: the active file


def test_segments_closed_before_the_window_are_never_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _isolated_state: Path
) -> None:
    f = Fleet(tmp_path / "loops", monkeypatch)
    monkeypatch.setattr(journalstore, "SEGMENT_BYTES", 1)  # every end record rotates
    for day in range(4):
        f.block("shop", D + timedelta(days=day, hours=1))
        f.answer("shop", D + timedelta(days=day, hours=1, minutes=5 * (day + 1)))
    closed = [s.closed for s in journalstore.segments()]
    assert len(closed) == 4 and closed[0] == D + timedelta(hours=1, minutes=5)
    opened: list[str] = []
    real = stats_index.segment_summary

    def spy(segment):
        opened.append(segment.path.name)
        return real(segment)

    monkeypatch.setattr(stats_index, "segment_summary", spy)
    since = D + timedelta(days=2)
    stats = compute(since=since, now=NOW, open_blocks=[], resumes=[], tz=UTC)
    assert opened == [s.path.name for s in journalstore.segments()[2:]]
    assert stats.overall.answered == 2 and stats.overall.wait_max_s == 20 * 60
    # the summaries are cached, named by segment and size; a damaged one is made again
    cache = stats_index.cache_folder()
    names = sorted(p.name for p in cache.iterdir())
    assert names == sorted(f"{s.path.name}.json" for s in journalstore.segments()[2:])
    (cache / names[0]).write_bytes(b'{"v": 1, "name": "x", "begins": [[')
    again = compute(since=since, now=NOW, open_blocks=[], resumes=[], tz=UTC)
    assert again == stats
    assert json.loads((cache / names[0]).read_bytes())["size"] > 0


def test_a_pruned_segment_makes_the_figures_before_it_unknown_never_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _isolated_state: Path
) -> None:
    f = Fleet(tmp_path / "loops", monkeypatch)
    monkeypatch.setattr(journalstore, "SEGMENT_BYTES", 1)
    for day in range(4):
        f.block("shop", D + timedelta(days=day, hours=1))
        f.answer("shop", D + timedelta(days=day, hours=1, minutes=10))
    segments = journalstore.segments()
    # retention of 2 days, run on day 3 at noon: the segments closed on days 0 and 1 go
    config = Path(os.environ["HITL_CONFIG"])
    config.write_text('journal_keep = "2d"\n')
    removed = journalstore.apply_retention(now=D + timedelta(days=3, hours=12))
    assert [p.name for p in removed if p.suffix == ".jsonl"] == [s.path.name for s in segments[:2]]
    cut = segments[1].closed  # day 1, 01:10
    stats = compute(since=D, now=NOW, by="day", open_blocks=[], resumes=[], tz=UTC)
    [unknown] = stats.unknowns
    assert (unknown.kind, unknown.since) == ("journal", cut)
    assert "pruned" in unknown.why
    o = stats.overall
    assert (o.answered, o.opened, o.blocked_s, o.wait_median_s, o.undone) == (None,) * 5
    assert o.open_now == 0  # what is open now is known all the same
    assert [(d.answered, d.opened, d.blocked_s) for d in stats.days] == [
        (None, None, None),  # day 0: pruned
        (None, None, None),  # day 1: its first hour is before the cut
        (1, 1, 600.0),
        (1, 1, 600.0),
    ]
    assert [r.answered for r in stats.rows] == [None, None, 1, 1]
    # a window after the cut is known whole, and nothing is said
    later = compute(since=cut, now=NOW, open_blocks=[], resumes=[], tz=UTC)
    assert later.unknowns == () and later.overall.answered == 2
    # a journal pruned by an older hitl (no pruned.json): the oldest kept segment's number
    # says so, and its first record dates it
    (journalstore.folder() / journalstore.PRUNED).unlink()
    older = compute(since=D, now=NOW, open_blocks=[], resumes=[], tz=UTC)
    assert [u.kind for u in older.unknowns] == ["journal"]
    assert older.unknowns[0].since == D + timedelta(days=2, hours=1, minutes=10)
    assert older.overall.answered is None


def test_answers_an_older_hitl_journaled_without_their_start_are_said(fleet: Fleet) -> None:
    """A begin record without `block.since` (as hitl wrote them before it recorded it): the
    answer counts, its wait is left out, and what needs it (opened, blocked) is unknown."""
    active = journalstore.active_file()
    lines = active.read_bytes().splitlines()
    first = json.loads(lines[0])
    assert first["type"] == "begin" and first["block"]["since"] == (D + HOUR).isoformat()
    del first["block"]["since"]
    lines[0] = json.dumps(first).encode()
    active.write_bytes(b"\n".join(lines) + b"\n")
    stats = _stats(fleet)
    o = stats.overall
    # waits 20m, 30m, 1h, 2h: the median between 30m and 1h
    assert (o.answered, o.wait_median_s, o.opened, o.blocked_s) == (6, 2700.0, None, None)
    [unknown] = stats.unknowns
    assert (unknown.kind, unknown.since) == ("since", D + HOUR + 10 * MIN)
    assert unknown.what == "when the blocks of 1 answer began"
    rows = {Path(r.key).name: r for r in stats.rows}
    assert rows["shop"].blocked_s is None and rows["api"].blocked_s == 1800 + 1200
    assert stats.days[0].blocked_s is None and stats.days[0].answered == 4
    # the days after that answer's are not touched by it
    assert [d.blocked_s for d in stats.days[1:]] == [0.0, 7200.0 + 1200, 36000.0]


def test_unknown_open_blocks_are_none_never_zero(fleet: Fleet) -> None:
    stats = compute(since=D, now=NOW, resumes=[], tz=UTC)
    assert stats.overall.open_now is None and stats.overall.opened is None
    assert stats.overall.blocked_s is None and stats.overall.answered == 6
    assert all(d.blocked_s is None and d.answered is not None for d in stats.days)
    # no loop outcome known for answers given: unknown, not 0 of them
    assert stats.overall.asked_again is None and stats.overall.outcomes_known == 0


def test_the_json_field_names_are_pinned() -> None:
    """`hitl stats --json` (README "Fleet stats"): a field is only ever added, never renamed
    or removed. Adding one: add it here and to the README."""
    assert [f.name for f in fields(Figures)] == [
        "key",
        "opened",
        "answered",
        "wait_median_s",
        "wait_p90_s",
        "wait_max_s",
        "blocked_s",
        "open_now",
        "oldest_open_s",
        "undone",
        "asked_again",
        "asked_again_rate",
        "not_resumed",
        "not_resumed_rate",
        "restarts_failed",
        "outcomes_known",
    ]
    now = datetime(2026, 12, 3, tzinfo=UTC)
    row = Figures("", *([None] * 15))
    stats = Stats(now, now, "repo", row, (row,), (Day(now.date(), 1, 1, 1.0),), ())
    data = stats.to_json()
    assert list(data) == ["format", "since", "until", "by", "overall", "rows", "days", "unknowns"]
    assert list(data["overall"]) == [f.name for f in fields(Figures)]
    assert list(data["days"][0]) == ["day", "opened", "answered", "blocked_s"]
    unknown = Unknown("host", "host x (ssh)", None, "down", "ssh", "x").to_json()
    assert list(unknown) == ["kind", "what", "since", "why", "source", "host"]
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = readme[readme.index("## Fleet stats") :]
    for name in [*data, *data["overall"], *data["days"][0], *unknown]:
        assert f"`{name}`" in section, f"the README's Fleet stats does not document {name}"


def _hitl(*args: str, config: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if config is not None:
        env["HITL_CONFIG"] = str(config)
    return subprocess.run(
        [str(HITL), *args], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def test_hitl_stats_prints_the_table_and_the_json(fleet: Fleet) -> None:
    """The real command on the real journal: --json has the figures computed above (its own
    now: the window is the last 30 days), the table says them with hitl's durations."""
    root = str(next(iter(fleet.repos.values())).parent)
    done = _hitl("stats", root, "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    o = data["overall"]
    assert (o["answered"], o["undone"], o["wait_median_s"], o["wait_p90_s"]) == (6, 1, 1800, 7200)
    assert (o["asked_again"], o["not_resumed"], o["restarts_failed"]) == (1, 1, 1)
    assert o["open_now"] == 1 and [Path(r["key"]).name for r in data["rows"]][1:] == [
        "shop",
        "api",
    ]
    assert len(data["days"]) == 31 and data["by"] == "repo"
    table = _hitl("stats", root, "--since", "10d")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    header = next(line for line in lines if line.startswith("repo "))
    assert "wait med" in header and "asked again" in header
    shop = next(line for line in lines if line.startswith("shop "))
    # opened 2, answered 2, median 1h (65m), p90 2h, max 2h, blocked 2h (130m), open 0,
    # oldest -, undone 0, asked again 1 (50%)
    assert shop.split()[1:11] == ["2", "2", "1h", "2h", "2h", "2h", "0", "-", "0", "1"]
    assert "(50%)" in shop
    quiet = (D + timedelta(days=1)).date().isoformat()
    assert any(line.split() == [quiet, "0", "0", "0s"] for line in lines)
    bad = _hitl("stats", root, "--by", "week")
    assert bad.returncode == 2 and "--by" in bad.stderr
    bad = _hitl("stats", root, "--since", "soon")
    assert bad.returncode == 2 and "--since" in bad.stderr and bad.stdout == ""


def _remote_config(tmp_path: Path, server: Sshd, hosts: list[str]) -> Path:
    loops = server.tmp / "far" / "loops"
    (loops / "shop" / ".git").mkdir(parents=True, exist_ok=True)
    (loops / "shop" / "BLOCKED.md").write_text(
        "# Blocked\n\n## Question:\nKeep the invoices?\n\n## Choices:\n- A) yes\n- B) no\n"
    )
    here = tmp_path / "here"
    here.mkdir(exist_ok=True)
    config = tmp_path / "config.toml"
    text = f'repos = [{json.dumps(str(here))}]\noperator = "Ada"\n'
    for host in hosts:
        text += (
            f"[[remote]]\nhost = {json.dumps(host)}\npaths = [{json.dumps(str(loops))}]\n"
            f"hitl = {json.dumps(str(server.remote_hitl()))}\n"
            f"ssh = {json.dumps(server.ssh_argv())}\n"
        )
    config.write_text(text)
    return config


def test_a_host_never_reached_and_one_down_since_are_unknown_never_zero(
    tmp_path: Path, sshd: Sshd, _isolated_state: Path
) -> None:
    config = _remote_config(tmp_path, sshd, ["build-1", "down-1"])
    first = _hitl("stats", "--json", config=config)
    assert first.returncode == 0, first.stderr
    assert "down-1: unreachable" in first.stderr
    data = json.loads(first.stdout)
    [down] = [u for u in data["unknowns"] if u["kind"] == "host"]
    assert (down["kind"], down["host"], down["since"]) == ("host", "down-1", None)
    assert data["overall"]["open_now"] is None  # never 1 (build-1's) as if that were all
    # build-1 was reached: its repo's open block is counted
    assert [(r["key"].split(":")[0], r["open_now"]) for r in data["rows"] if ":" in r["key"]] == [
        ("build-1", 1)
    ]
    table = _hitl("stats", config=config)
    assert "? unknown: host down-1 (remote), never reached" in table.stdout

    sshd.kill()  # build-1 goes down: unknown since the last time it was reached
    later = _hitl("stats", "--json", config=config)
    assert later.returncode == 0, later.stderr
    after = json.loads(later.stdout)
    unknowns = {u["host"]: u for u in after["unknowns"] if u["host"]}
    assert set(unknowns) == {"build-1", "down-1"} and unknowns["down-1"]["since"] is None
    # the last run that reached it (the table's, after the first) says since when
    reached = datetime.fromisoformat(unknowns["build-1"]["since"])
    assert datetime.fromisoformat(data["until"]) < reached < datetime.fromisoformat(after["until"])
    assert after["overall"]["open_now"] is None
    assert all(r["open_now"] is None for r in after["rows"] if r["key"].startswith("build-1:"))
    table = _hitl("stats", config=config)
    assert "? unknown: host build-1 (remote), not reached since" in table.stdout


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS refuses undecodable file names")
def test_hitl_stats_json_keeps_an_undecodable_repository_name(tmp_path: Path) -> None:
    """A repository whose name is not UTF-8 is one row of `hitl stats --json`, its key valid
    UTF-8 JSON whose `os.fsencode` gives the name's bytes back (orjson refuses the lone
    surrogates: the stdlib encoder writes them as escapes)."""
    root = tmp_path / "fleet"
    repo = os.path.join(os.fsencode(root), b"caf\xe9")
    os.makedirs(os.path.join(repo, b".git"))
    with open(os.path.join(repo, b"BLOCKED.md"), "w") as f:
        f.write("# Blocked\n\n## Question\nWhich cache?\n")
    done = subprocess.run(
        [str(HITL), "stats", str(root), "--json"], capture_output=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout.decode("utf-8"))  # strict UTF-8: no raw surrogate
    assert [os.fsencode(r["key"]) for r in data["rows"]] == [repo]
    assert data["overall"]["open_now"] == 1
