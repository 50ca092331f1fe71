"""Which folders are repositories (Workspace.discover), and their short unique labels."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hitl_tui.inbox.inbox import Inbox
from hitl_tui.inbox.workspace import Workspace, labels_for
from hitl_tui.model import UsageError


def repo(path: Path, marker: str = ".git") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    if marker == "BLOCKED.md":
        (path / marker).write_text("## Question\nQ?\n")
    else:
        (path / marker).mkdir()
    return path


def test_a_path_that_is_a_repo(tmp_path: Path):
    shop = repo(tmp_path / "shop")
    repo(shop / "vendor" / "lib")  # a repo inside a repo is the outer repo's business
    ws = Workspace.discover([shop])
    assert ws.repos == [shop]
    assert ws.roots == []


@pytest.mark.parametrize("marker", [".git", "BLOCKED.md", ".agenticloop"])
def test_each_marker_makes_a_repo(tmp_path: Path, marker: str):
    found = repo(tmp_path / "r", marker)
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "README.md").write_text("not a repo\n")
    assert Workspace.discover([tmp_path]).repos == [found]


def test_git_file_marks_a_worktree(tmp_path: Path):
    wt = tmp_path / "wt"
    wt.mkdir()
    (wt / ".git").write_text("gitdir: /elsewhere/.git/worktrees/wt\n")
    assert Workspace.discover([tmp_path]).repos == [wt]


def test_depth_one_and_two_not_three(tmp_path: Path):
    one = repo(tmp_path / "one")
    two = repo(tmp_path / "group" / "two")
    repo(tmp_path / "a" / "b" / "three")
    ws = Workspace.discover([tmp_path])
    assert sorted(ws.repos) == sorted([one, two])
    assert sorted(ws.roots) == sorted([tmp_path, tmp_path / "a", tmp_path / "group"])


def test_repos_are_not_searched_below(tmp_path: Path):
    outer = repo(tmp_path / "outer")
    repo(outer / "inner")
    assert Workspace.discover([tmp_path]).repos == [outer]


def test_node_modules_and_hidden_folders_are_skipped(tmp_path: Path):
    kept = repo(tmp_path / "kept")
    for name in ["node_modules", ".cache", ".hidden", "__pycache__", ".venv", "venv"]:
        repo(tmp_path / name)
        repo(tmp_path / name / "deeper")
    repo(tmp_path / "group" / "node_modules")
    repo(tmp_path / "group" / ".secret")
    ws = Workspace.discover([tmp_path])
    assert ws.repos == [kept]
    assert sorted(ws.roots) == [tmp_path, tmp_path / "group"]


def test_symlinked_repo_folder_is_followed(tmp_path: Path):
    real = repo(tmp_path / "real" / "shop")
    root = tmp_path / "root"
    root.mkdir()
    (root / "shop").symlink_to(real)
    assert Workspace.discover([root]).repos == [root / "shop"]


def test_several_paths_and_duplicates(tmp_path: Path):
    a = repo(tmp_path / "a")
    b = repo(tmp_path / "group" / "b")
    ws = Workspace.discover([a, tmp_path / "group", a, tmp_path / "group" / "b"])
    assert ws.repos == [a, b]


def test_relative_paths_become_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    shop = repo(tmp_path / "shop")
    monkeypatch.chdir(tmp_path)
    ws = Workspace.discover([Path("shop")])
    assert ws.repos == [shop]
    assert ws.paths == (shop,)


def test_empty_folder_has_no_repos(tmp_path: Path):
    ws = Workspace.discover([tmp_path])
    assert (ws.repos, ws.roots) == ([], [tmp_path])


def test_missing_path_and_file_path_are_usage_errors(tmp_path: Path):
    with pytest.raises(UsageError, match=r"^no such folder: .*missing$"):
        Workspace.discover([tmp_path / "missing"])
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(UsageError, match=r"^not a folder: .*file\.txt$"):
        Workspace.discover([tmp_path / "file.txt"])


def test_rescan_sees_new_and_deleted_repos(tmp_path: Path):
    a = repo(tmp_path / "a")
    ws = Workspace.discover([tmp_path])
    b = repo(tmp_path / "b")
    (a / ".git").rmdir()
    ws.rescan()
    assert ws.repos == [b]
    assert sorted(ws.roots) == [tmp_path, a]  # `a` is now a plain folder, searched below


# -- names with spaces and non-ASCII characters -------------------------------------------------


def test_spaces_and_non_ascii(tmp_path: Path):
    root = tmp_path / "my loops ✓"
    a = repo(root / "шоп ünï", "BLOCKED.md")
    b = repo(root / "group one" / "日本 api")
    ws = Workspace.discover([root])
    assert sorted(ws.repos) == sorted([a, b])
    inbox = Inbox.open([root])
    [block] = inbox.sorted_blocks()
    assert (block.id, block.repo, block.path) == ("шоп ünï", a, a / "BLOCKED.md")
    assert inbox.resolve(str(a)) is block
    assert inbox.resolve(str(a / "BLOCKED.md")) is block


def test_undecodable_folder_name(tmp_path: Path):
    name = os.fsdecode(b"caf\xe9")  # latin-1 bytes: a surrogate-escaped str
    weird = repo(tmp_path / name, "BLOCKED.md")
    inbox = Inbox.open([tmp_path])
    [block] = inbox.sorted_blocks()
    assert block.repo == weird
    assert block.id == name


# -- labels -----------------------------------------------------------------------------------


def test_labels_are_folder_names_when_unique():
    repos = [Path("/w/shop"), Path("/w/api"), Path("/x/billing")]
    assert labels_for(repos) == {repo: repo.name for repo in repos}


def test_labels_add_parents_only_where_names_collide():
    labels = labels_for([Path("/a/shop"), Path("/b/shop"), Path("/c/api")])
    assert labels == {Path("/a/shop"): "a/shop", Path("/b/shop"): "b/shop", Path("/c/api"): "api"}


def test_labels_climb_as_far_as_needed():
    labels = labels_for([Path("/x/team/shop"), Path("/y/team/shop"), Path("/z/shop")])
    assert labels == {
        Path("/x/team/shop"): "x/team/shop",
        Path("/y/team/shop"): "y/team/shop",
        Path("/z/shop"): "z/shop",
    }


@pytest.mark.parametrize(
    ("repos", "expected"),
    [
        ([Path("/shop"), Path("/a/shop")], ["shop", "a/shop"]),
        ([Path("/a/shop"), Path("/b/shop"), Path("/b/a/shop")], ["a/shop", "b/shop", "b/a/shop"]),
    ],
)
def test_labels_never_show_the_root_slash(repos: list[Path], expected: list[str]):
    labels = labels_for(repos)
    assert [labels[r] for r in repos] == expected


def test_labels_with_spaces_and_non_ascii():
    labels = labels_for([Path("/w/a b/ünï"), Path("/v/a b/ünï"), Path("/v/日本")])
    assert labels == {
        Path("/w/a b/ünï"): "w/a b/ünï",
        Path("/v/a b/ünï"): "v/a b/ünï",
        Path("/v/日本"): "日本",
    }


def test_inbox_ids_unique_for_same_named_repos(tmp_path: Path):
    a = repo(tmp_path / "team a" / "shop", "BLOCKED.md")
    b = repo(tmp_path / "team b" / "shop", "BLOCKED.md")
    inbox = Inbox.open([tmp_path])
    assert {blk.repo: blk.id for blk in inbox.blocks.values()} == {
        a: "team a/shop",
        b: "team b/shop",
    }


# -- one repository reached by two spellings (a symlink) ---------------------------------------


def test_a_symlink_to_a_repo_beside_it_is_one_repo(tmp_path: Path):
    root = tmp_path / "loops"
    shop = repo(root / "shop", "BLOCKED.md")
    (root / "shop-link").symlink_to(shop)
    (root / "a-link").symlink_to("shop")  # sorts first, relative: still the same folder
    ws = Workspace.discover([root])
    assert ws.repos == [root / "a-link"]  # the first spelling met, in discovery order
    [block] = Inbox.open([root]).sorted_blocks()
    assert block.id == "a-link"


def test_a_path_given_both_ways_is_one_repo(tmp_path: Path):
    shop = repo(tmp_path / "shop", "BLOCKED.md")
    link = tmp_path / "shop-link"
    link.symlink_to(shop)
    assert Workspace.discover([shop, link]).repos == [shop]
    assert Workspace.discover([link, shop]).repos == [link]
    group = tmp_path / "group"
    group.mkdir()
    (group / "again").symlink_to(shop)
    assert Workspace.discover([shop, group]).repos == [shop]
    assert len(Inbox.open([shop, group, link]).blocks) == 1


def test_a_rescan_keeps_the_spelling_already_known(tmp_path: Path):
    root = tmp_path / "loops"
    shop = repo(root / "shop")
    ws = Workspace.discover([root])
    (root / "a-link").symlink_to(shop)  # sorts before `shop`, appears later
    ws.rescan()
    assert ws.repos == [shop]
    assert ws.roots == [root]


def test_a_symlinked_root_is_searched_once(tmp_path: Path):
    root = tmp_path / "loops"
    shop = repo(root / "group" / "shop")
    (root / "group-link").symlink_to(root / "group")
    ws = Workspace.discover([root])
    assert ws.repos == [shop]
    assert ws.roots == [root, root / "group"]
