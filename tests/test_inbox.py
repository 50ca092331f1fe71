"""Inbox.handle with injected paths (no watcher): the deltas, the order, and resolve()."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from hitl_tui.answers.service import plan_answer
from hitl_tui.inbox.inbox import Delta, Inbox
from hitl_tui.model import Answer, StaleError, UsageError

#: One "now" for every test here, so that equal ages give equal times.
NOW = time.time()
QUESTION = "## Question\n{q}\n## Choices\n- A) yes\n- B) no\n"


def blocked(repo: Path, question: str = "Go?", age: float | None = None) -> Path:
    path = repo / "BLOCKED.md"
    path.write_text(QUESTION.format(q=question))
    if age is not None:
        when = NOW - age
        os.utime(path, (when, when))
    return path


def make_repo(path: Path) -> Path:
    (path / ".git").mkdir(parents=True)
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A folder of repos: a (blocked, oldest), b (blocked), c (no block)."""
    root = tmp_path / "loops"
    blocked(make_repo(root / "a"), "A first?", age=300)
    blocked(make_repo(root / "b"), "B second?", age=100)
    make_repo(root / "c")
    return root


def ids(delta: Delta) -> tuple[list[str], list[str], list[Path]]:
    return (
        [b.id for b in delta.added],
        [b.id for b in delta.changed],
        [path for _source, path in delta.removed],
    )


def test_scan_and_sorted_blocks_oldest_first(root: Path):
    inbox = Inbox.open([root])
    assert [(b.id, b.question) for b in inbox.sorted_blocks()] == [
        ("a", "A first?"),
        ("b", "B second?"),
    ]
    assert inbox.repo_count() == 2
    assert set(inbox.watch_dirs()) == {root, root / "a", root / "b", root / "c"}


def test_repo_count_is_the_repositories_of_the_blocks_after_every_change(root: Path):
    """The header's count (kept from each repository's keys) equals the distinct repositories
    of the blocks listed, through scans, arrivals, removals, a repo deleted, remote blocks."""
    import dataclasses

    inbox = Inbox.open([root])

    def distinct() -> int:
        return len({b.repo for b in inbox.blocks.values()})

    assert inbox.repo_count() == distinct() == 2
    inbox.handle([blocked(root / "c", "C now?")])
    assert inbox.repo_count() == distinct() == 3
    (root / "a" / "BLOCKED.md").unlink()
    inbox.handle([root / "a" / "BLOCKED.md"])
    assert inbox.repo_count() == distinct() == 2
    shutil.rmtree(root / "b")
    inbox.handle([root / "b"])
    assert inbox.repo_count() == distinct() == 1
    far = dataclasses.replace(next(iter(inbox.blocks.values())), repo="far:shop", source="ssh")
    inbox.replace_remote("ssh", "far", [far])
    assert inbox.repo_count() == distinct() == 2
    inbox.scan()
    assert inbox.repo_count() == distinct() == 2


def test_sorted_blocks_ties_break_by_id(tmp_path: Path):
    for name in ["zeta", "alpha", "mid"]:
        blocked(make_repo(tmp_path / name), name, age=50)
    blocked(make_repo(tmp_path / "old"), "old", age=60)
    assert [b.id for b in Inbox.open([tmp_path]).sorted_blocks()] == ["old", "alpha", "mid", "zeta"]


def test_added(root: Path):
    inbox = Inbox.open([root])
    path = blocked(root / "c", "C now?")
    delta = inbox.handle([path])
    assert ids(delta) == (["c"], [], [])
    assert delta.rewatch is False
    assert delta.added[0].question == "C now?"
    assert inbox.blocks[("loopkit", path)] is delta.added[0]
    assert [b.id for b in inbox.sorted_blocks()] == ["a", "b", "c"]


def test_changed(root: Path):
    inbox = Inbox.open([root])
    path = blocked(root / "a", "A reworded?", age=10)
    delta = inbox.handle([path])
    assert ids(delta) == ([], ["a"], [])
    assert inbox.blocks[("loopkit", path)].question == "A reworded?"
    assert [b.id for b in inbox.sorted_blocks()] == ["b", "a"]


def test_touched_with_the_same_bytes_is_changed_only_by_its_time(root: Path):
    inbox = Inbox.open([root])
    path = root / "a" / "BLOCKED.md"
    assert not inbox.handle([path])  # nothing changed at all
    os.utime(path, (time.time() + 5, time.time() + 5))
    assert ids(inbox.handle([path])) == ([], ["a"], [])


def test_removed(root: Path):
    inbox = Inbox.open([root])
    path = root / "b" / "BLOCKED.md"
    path.unlink()
    delta = inbox.handle([path])
    assert delta.removed == [("loopkit", path)]
    assert (delta.added, delta.changed, delta.rewatch) == ([], [], False)
    assert [b.id for b in inbox.sorted_blocks()] == ["a"]
    assert not inbox.handle([path])  # removing twice says nothing


def test_one_batch_with_every_kind(root: Path):
    inbox = Inbox.open([root])
    (root / "a" / "BLOCKED.md").unlink()
    blocked(root / "b", "B again?")
    blocked(root / "c", "C?")
    paths = [root / name / "BLOCKED.md" for name in "abc"]
    assert ids(inbox.handle(paths + paths)) == (["c"], ["b"], [root / "a" / "BLOCKED.md"])


def test_deltas_merged_say_what_the_two_did_in_turn(root: Path):
    """The watcher merges what an event batch changed with what a look at the files found
    after it (`Delta.merge`): the merged delta is what the two did in turn. A block made then
    removed was never there (applied added-then-removed, it stayed listed for good); changed
    then removed is removed; made then changed is added as it is now."""
    from hitl_tui.inbox.view import RowOrder, row_of

    inbox = Inbox.open([root])
    rows = RowOrder(inbox.sorted_blocks())
    a, b, c = (root / name / "BLOCKED.md" for name in "abc")

    made = inbox.handle([blocked(root / "c", "C?")])
    c.unlink()
    merged = made.merge(inbox.handle([c]))
    assert ids(merged) == ([], [], [])
    rows.apply(merged, None)

    blocked(root / "b", "B again?")
    changed = inbox.handle([b])
    b.unlink()
    merged = changed.merge(inbox.handle([b]))
    assert ids(merged) == ([], [], [b])
    rows.apply(merged, None)

    made = inbox.handle([blocked(root / "c", "C first?")])
    merged = made.merge(inbox.handle([blocked(root / "c", "C now?")]))
    assert ids(merged) == (["c"], [], []) and merged.added[0].question == "C now?"
    rows.apply(merged, None)

    a.unlink()
    gone = inbox.handle([a])
    merged = gone.merge(inbox.handle([blocked(root / "a", "A again?")]))  # removed, made again
    assert ids(merged) == (["a"], [], [a])
    made_again = merged
    a.unlink()
    merged = made_again.merge(inbox.handle([a]))  # ... and removed: removed
    assert ids(merged) == ([], [], [a])
    rows.apply(merged, None)

    listed = {rk: rows.blocks[rk].question for rk in rows.order}
    assert listed == {row_of(x): x.question for x in inbox.sorted_blocks()}
    assert sorted(listed.values()) == ["C now?"]


def test_unrelated_paths_change_nothing(root: Path, tmp_path: Path):
    inbox = Inbox.open([root])
    (root / "a" / "README.md").write_text("hi")
    (root / "a" / ".hitl-tmp-x.tmp").write_text("## Question\nnot a block\n")
    paths = [
        root / "a" / "README.md",
        root / "a" / ".hitl-tmp-x.tmp",
        root / "a" / "src" / "BLOCKED.md",
        tmp_path / "elsewhere" / "BLOCKED.md",
        Path("/"),
    ]
    delta = inbox.handle(paths)
    assert not delta
    assert len(inbox.blocks) == 2


def test_block_replaced_by_a_folder_becomes_unreadable(root: Path):
    # Issue 23: a BLOCKED.md that is no file keeps its loop stopped (`guard`), so it stays.
    inbox = Inbox.open([root])
    path = root / "a" / "BLOCKED.md"
    path.unlink()
    path.mkdir()
    assert ids(inbox.handle([path])) == ([], ["a"], [])
    block = inbox.blocks[("loopkit", path)]
    assert block.problems == ("BLOCKED.md could not be read: it is a folder, not a file.",)
    path.rmdir()
    assert ids(inbox.handle([path])) == ([], [], [path])


def test_new_repo_in_a_root(root: Path):
    inbox = Inbox.open([root])
    new = make_repo(root / "d")
    blocked(new, "D?")
    delta = inbox.handle([new])
    assert ids(delta) == (["d"], [], [])
    assert delta.rewatch is True
    assert new in inbox.watch_dirs()
    # Its block is now followed through its own events.
    blocked(new, "D reworded?")
    assert ids(inbox.handle([new / "BLOCKED.md"])) == ([], ["d"], [])


def test_new_repo_at_depth_two(root: Path):
    inbox = Inbox.open([root])
    group = root / "group"
    group.mkdir()
    delta = inbox.handle([group])
    assert ids(delta) == ([], [], [])
    assert delta.rewatch is True
    assert group in inbox.watch_dirs()
    repo = make_repo(group / "e")
    blocked(repo, "E?")
    # Its id is its path under the root: `group/e`, whatever else is found (issue 12).
    assert ids(inbox.handle([repo])) == (["group/e"], [], [])


def test_new_repo_without_a_block_then_a_block(root: Path):
    inbox = Inbox.open([root])
    new = make_repo(root / "d")
    delta = inbox.handle([new])
    assert ids(delta) == ([], [], []) and delta.rewatch
    assert ids(inbox.handle([blocked(new, "D?")])) == (["d"], [], [])


def test_a_plain_folder_that_becomes_a_repo(root: Path):
    inbox = Inbox.open([root])
    folder = root / "plain"
    folder.mkdir()
    inbox.handle([folder])
    (folder / ".git").mkdir()
    blocked(folder, "Plain?")
    # The event is for `.git` appearing inside a watched folder of the root.
    assert ids(inbox.handle([folder / ".git"])) == (["plain"], [], [])


def test_repo_deleted(root: Path):
    inbox = Inbox.open([root])
    shutil.rmtree(root / "a")
    delta = inbox.handle([root / "a"])
    assert ids(delta) == ([], [], [root / "a" / "BLOCKED.md"])
    assert delta.rewatch is True
    assert root / "a" not in inbox.watch_dirs()
    assert [b.id for b in inbox.sorted_blocks()] == ["b"]


def test_repo_deleted_and_recreated_in_place(root: Path):
    inbox = Inbox.open([root])
    shutil.rmtree(root / "a")
    blocked(make_repo(root / "a"), "A reborn?")
    delta = inbox.handle([root / "a"])
    assert ids(delta) == ([], ["a"], [])
    assert inbox.blocks[("loopkit", root / "a" / "BLOCKED.md")].question == "A reborn?"
    assert root / "a" in inbox.watch_dirs()


def test_repo_deleted_then_recreated_in_two_batches(root: Path):
    inbox = Inbox.open([root])
    shutil.rmtree(root / "a")
    assert ids(inbox.handle([root / "a"])) == ([], [], [root / "a" / "BLOCKED.md"])
    blocked(make_repo(root / "a"), "A reborn?")
    assert ids(inbox.handle([root / "a"])) == (["a"], [], [])


def test_a_path_repo_deleted_and_recreated(tmp_path: Path):
    repo = make_repo(tmp_path / "solo")
    blocked(repo, "Solo?")
    inbox = Inbox.open([repo])
    shutil.rmtree(repo)
    assert ids(inbox.handle([repo])) == ([], [], [repo / "BLOCKED.md"])
    assert inbox.watch_dirs() == []
    blocked(make_repo(repo), "Solo again?")
    # What the watcher does when it has nothing left to watch: hand it the PATHs again.
    assert ids(inbox.handle(list(inbox.workspace.paths))) == (["solo"], [], [])
    assert inbox.watch_dirs() == [repo]


def test_same_named_repo_arriving_keeps_ids_unique(root: Path, tmp_path: Path):
    inbox = Inbox.open([root])
    group = root / "group"
    group.mkdir()
    inbox.handle([group])
    twin = make_repo(group / "a")
    blocked(twin, "Twin?")
    delta = inbox.handle([twin])
    assert [b.id for b in delta.added] == ["group/a"]
    assert len({b.id for b in inbox.blocks.values()}) == len(inbox.blocks)


# -- resolve ------------------------------------------------------------------------------------


def test_resolve_by_id_path_and_repo(root: Path, monkeypatch: pytest.MonkeyPatch):
    inbox = Inbox.open([root])
    a = inbox.blocks[("loopkit", root / "a" / "BLOCKED.md")]
    assert inbox.resolve("a") is a
    assert inbox.resolve(str(root / "a" / "BLOCKED.md")) is a
    assert inbox.resolve(str(root / "a")) is a
    assert inbox.resolve(str(root / "a") + "/") is a
    monkeypatch.chdir(root)
    assert inbox.resolve("a/BLOCKED.md") is a
    assert inbox.resolve("./a") is a
    monkeypatch.chdir(root / "a")
    assert inbox.resolve("BLOCKED.md") is a
    assert inbox.resolve(".") is a


def test_resolve_prefers_the_id(root: Path, monkeypatch: pytest.MonkeyPatch):
    inbox = Inbox.open([root])
    monkeypatch.chdir(root / "a")
    (root / "a" / "b").mkdir()  # a folder called like another block's id
    assert inbox.resolve("b").repo == root / "b"


def test_resolve_errors(root: Path, monkeypatch: pytest.MonkeyPatch):
    inbox = Inbox.open([root])
    with pytest.raises(UsageError, match=r"^no open block with id 'zzz' \(see 'hitl list'\)$"):
        inbox.resolve("zzz")
    with pytest.raises(UsageError, match=r"^no open block in .*/c$"):
        inbox.resolve(str(root / "c"))
    (root / "a" / "PROMPT.md").write_text("# P\n")
    with pytest.raises(UsageError, match=r"^no open block in .*/a/PROMPT\.md$"):
        inbox.resolve(str(root / "a" / "PROMPT.md"))
    with pytest.raises(
        StaleError, match=r"^.*/c/BLOCKED\.md does not exist \(already answered\?\)$"
    ):
        inbox.resolve(str(root / "c" / "BLOCKED.md"))
    monkeypatch.chdir(root)
    with pytest.raises(UsageError, match=r"^no open block in c$"):
        inbox.resolve("c")


def test_resolve_a_block_removed_since_the_scan_then_planning_is_stale(root: Path):
    inbox = Inbox.open([root])
    path = root / "a" / "BLOCKED.md"
    path.unlink()
    block = inbox.resolve(str(path))  # the inbox is a snapshot until its next event
    with pytest.raises(StaleError, match=r"^a: BLOCKED\.md changed since it was read$"):
        plan_answer(inbox, block, Answer(choice=block.find_choice("A")))


def test_event_on_a_path_repo_folder_lists_its_block_once(tmp_path: Path):
    repo = make_repo(tmp_path / "solo")
    path = blocked(repo, "Solo?")
    inbox = Inbox.open([repo])
    assert not inbox.handle([repo])  # the folder's own event (a chmod, say): nothing new
    assert list(inbox.blocks) == [("loopkit", path)]
    blocked(repo, "Solo reworded?")
    assert ids(inbox.handle([repo])) == ([], ["solo"], [])
    path.unlink()
    assert ids(inbox.handle([repo])) == ([], [], [path])
    assert inbox.blocks == {}


def test_resolve_a_repo_with_several_blocks(billing: Path):
    blocked(billing, "And a loopkit block?")
    inbox = Inbox.open([billing])
    with pytest.raises(
        UsageError,
        match=r"^.*/billing has 4 open blocks; name one: billing, billing/T-007, billing/T-009, "
        r"billing/T-012$",
    ):
        inbox.resolve(str(billing))
    assert inbox.resolve("billing/T-009").path == billing / ".agenticloop" / "tasks" / "T-009.md"
    assert inbox.resolve(str(billing / "BLOCKED.md")).source == "loopkit"


def test_a_file_changing_in_a_root_changes_nothing(root: Path):
    """A README or editor file next to the repos must not restart the watch on every write."""
    inbox = Inbox.open([root])
    for name in ["notes.txt", ".DS_Store", "ws.code-workspace"]:
        (root / name).write_text("x")
        assert inbox.handle([root / name]) == Delta()
    (root / "notes.txt").unlink()
    assert inbox.handle([root / "notes.txt"]) == Delta()
    assert [b.id for b in inbox.sorted_blocks()] == ["a", "b"]


def test_a_plain_folder_in_a_root_is_watched_for_repos(root: Path):
    inbox = Inbox.open([root])
    (root / "group").mkdir()
    delta = inbox.handle([root / "group"])
    assert delta == Delta(rewatch=True)
    shutil.rmtree(root / "group")
    assert inbox.handle([root / "group"]) == Delta(rewatch=True)
    assert root / "group" not in inbox.watch_dirs()
