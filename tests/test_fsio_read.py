"""fsio.read_file on a bare descriptor: what it reads and what it refuses, as open() did."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from hitl_tui import fsio
from hitl_tui.model import HitlError, fingerprint


def test_a_file_is_read_whole_and_fingerprinted_over_every_byte(tmp_path: Path) -> None:
    for size in (0, 1, 65_535, 65_536, 65_537, 3 << 20):
        path = tmp_path / f"f{size}"
        data = os.urandom(size)
        path.write_bytes(data)
        read = fsio.read_file(path, limit=1 << 20)
        assert read.head == data[: 1 << 20] and read.size == size
        assert read.fingerprint == fingerprint(data)
        assert read.truncated == (size > 1 << 20)
        assert fsio.read_bytes(path) == data


def test_a_folder_is_refused_as_open_refuses_it(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError) as caught:
        fsio.read_file(tmp_path)
    assert caught.value.errno == errno.EISDIR
    assert str(caught.value) == f"[Errno 21] Is a directory: '{tmp_path}'"
    with pytest.raises(HitlError, match=r"cannot read .*: Is a directory$"):
        fsio.read_bytes(tmp_path)
    assert fsio.current_fingerprint(tmp_path) == "directory"


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "BLOCKED.md"
    os.mkfifo(fifo)
    with pytest.raises(IsADirectoryError, match="not a regular file"):
        fsio.read_file(fifo)


def test_a_missing_file_is_the_error_open_gives(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as caught:
        fsio.read_file(tmp_path / "gone.md")
    assert str(caught.value) == f"[Errno 2] No such file or directory: '{tmp_path / 'gone.md'}'"
    assert fsio.read_bytes(tmp_path / "gone.md") is None
