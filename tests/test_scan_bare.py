"""A repository without a source's folder is asked one lstat by that source's scan (most of a
fleet: no `.agenticloop/`, no `.hitl/`). The short cut must give what the full listing gives for
every shape those names can take: absent, a file, a folder, an empty folder, a symlink to a
folder, a dangling symlink, a FIFO. Each case states the files the source lists (and so the
blocks a scan shows), checked against the whole inbox too."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hitl_tui.inbox.inbox import Inbox
from hitl_tui.sources.agenticloop.source import AgenticloopSource
from hitl_tui.sources.asks.source import AskSource

TASK = "---\ntask_id: T-1\nstatus: blocked\n---\n\n# T-1\n\n## Task\nDo it.\n"


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    return repo


def _shape(path: Path, shape: str, elsewhere: Path) -> None:
    if shape == "absent":
        return
    if shape == "file":
        path.write_text("not a folder\n")
    elif shape == "fifo":
        os.mkfifo(path)
    elif shape == "dangling":
        path.symlink_to(path.parent / "nowhere")
    elif shape == "link":
        elsewhere.mkdir(parents=True, exist_ok=True)
        path.symlink_to(elsewhere)
    else:
        path.mkdir()


#: (shape of `.agenticloop`, the names `block_files` lists relative to the repo, blocks shown)
AGENTICLOOP = [
    ("absent", [], 0),
    ("empty", [], 0),
    ("file", [".agenticloop/tasks"], 1),  # in the way of the task folder: an unreadable block
    ("fifo", [".agenticloop/tasks"], 1),
    ("dangling", [".agenticloop/tasks"], 1),
    ("link", [".agenticloop/tasks/T-1.md"], 1),
]


@pytest.mark.parametrize(("shape", "listed", "shown"), AGENTICLOOP)
def test_agenticloop_lists_what_is_there_for_every_shape_of_its_folder(
    tmp_path: Path, shape: str, listed: list[str], shown: int
) -> None:
    repo = _repo(tmp_path)
    elsewhere = repo / "real-agenticloop"
    _shape(repo / ".agenticloop", shape, elsewhere)
    if shape == "link":
        (elsewhere / "tasks").mkdir()
        (elsewhere / "tasks" / "T-1.md").write_text(TASK)
    files = AgenticloopSource().block_files(repo)
    assert [os.path.relpath(f, repo) for f in files] == listed
    blocks = [b for b in Inbox.open([repo]).blocks.values() if b.source == "agenticloop"]
    assert len(blocks) == shown, [b.title for b in blocks]


#: (shape of `.hitl`, the asks `block_files` lists)
ASKS = [
    ("absent", []),
    ("empty", []),
    ("file", []),
    ("fifo", []),
    ("dangling", []),
    ("link", []),  # hitl never reads its own files through a symlink
    ("asks", [".hitl/asks/a1.json"]),
]


@pytest.mark.parametrize(("shape", "listed"), ASKS)
def test_asks_lists_what_is_there_for_every_shape_of_hitl_folder(
    tmp_path: Path, shape: str, listed: list[str]
) -> None:
    repo = _repo(tmp_path)
    elsewhere = repo / "real-hitl"
    _shape(repo / ".hitl", "empty" if shape == "asks" else shape, elsewhere)
    top = {"asks": repo / ".hitl", "link": elsewhere}.get(shape)
    if top is not None:  # an ask in the folder `.hitl` is or leads to
        (top / "asks").mkdir()
        (top / "asks" / "a1.json").write_text("{}\n")
    assert [os.path.relpath(f, repo) for f in AskSource().block_files(repo)] == listed
