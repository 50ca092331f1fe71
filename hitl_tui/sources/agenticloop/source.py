"""agenticloop, files backend: task files with a frontmatter header (FORMATS.md §2), as one
`Source` (the registry builds it).

Headers and `.agenticloop/project.md` are read by agenticloop's own rules (`frontmatter`), not as
YAML: what its reader makes of a header is what the loop acts on. Where the tasks are is
`layout`; a task file read as a block is `parse`; an answer written into a task file is
`writer`. A project.md that cannot be read, or a task folder that would lead outside the
repository, is a warning for the repository (`warnings`), never a block.

Layer: sources (the agenticloop backend package).
"""

from __future__ import annotations

import functools
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hitl_tui import fsio
from hitl_tui.model import Answer, Block, Plan, fingerprint
from hitl_tui.sources.agenticloop import writer
from hitl_tui.sources.agenticloop.layout import PROJECT, Layout, read_layout, unlisted
from hitl_tui.sources.agenticloop.parse import NAME, read_task, status_of, unlisted_folder
from hitl_tui.sources.base import AnswerWaiting, Source, keep_answer


class AgenticloopSource(Source):
    """Task files of agenticloop's files backend."""

    name = NAME

    def __init__(self) -> None:
        self._layouts: dict[Path, Layout] = {}

    def layout(self, repo: Path, fresh: bool = False) -> Layout:
        """The repo's layout, cached until `block_files` (a full scan) reads it again."""
        layout = None if fresh else self._layouts.get(repo)  # (one look: several a file)
        if layout is None:
            layout = self._layouts[repo] = read_layout(repo)
        return layout

    def watch_dirs(self, repo: Path) -> list[Path]:
        layout = self.layout(repo)
        dirs = [repo / ".agenticloop"]
        if layout.folder is not None:
            existing = layout.folder
            while not os.path.isdir(existing) and existing != repo:
                existing = existing.parent
            dirs.append(existing)
        return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]

    def block_files(self, repo: Path) -> list[Path]:
        layout = self.layout(repo, fresh=True)
        files: list[Path] = []
        if layout.folder is None or layout.absent:
            return files  # (absent: the listing would fail, its folder and parent not there)
        try:
            entries = list(os.scandir(layout.folder))
        except OSError as exc:
            if unlisted(repo, layout.folder, exc) is not None:
                files.append(layout.folder)  # `parse` makes it an unreadable block
            return files
        # Every `.md` entry, files or not: one that is not a file to read (a FIFO, a folder, a
        # symlink to nothing) may hide a blocked task, so `parse` makes it an unreadable block.
        names = [
            entry.name
            for entry in entries
            if entry.name.endswith(".md") and not entry.name.startswith(fsio.TEMP_PREFIX)
        ]
        # Names in one folder sort as their paths do; sorting strings skips pathlib's parts.
        folder = layout.folder
        files.extend(fsio.child(folder, name) for name in sorted(names))
        return files

    def warnings(self, repo: Path) -> list[str]:
        """What is wrong with the repo's project.md or template (read by the last scan), each
        saying which task folder is read instead: warnings, never blocks."""
        warning = self.layout(repo).warning
        return [warning] if warning else []

    def layout_files(self, repo: Path) -> list[Path]:
        return [repo / PROJECT]

    def claims(self, repo: Path, path: Path) -> bool:
        folder = self.layout(repo).folder
        if folder is None:
            return False
        return path == folder or (path.parent == folder and path.name.endswith(".md"))

    def layout_changed(self, repo: Path, path: Path) -> bool:
        if path in (repo / PROJECT, repo / ".agenticloop"):
            return True
        folder = self.layout(repo).folder
        if folder is None:
            return False
        inside = path != repo and fsio.is_inside(path, repo)
        return inside and (path == folder or path in folder.parents)

    # -- parsing ---------------------------------------------------------------------------

    def cacheable(self, repo: Path, path: Path) -> bool:
        # A task's block is its file's bytes, mtime and the label. project.md's block is the
        # layout, which depends on other files, and the task folder's is a failed listing:
        # always read afresh.
        if path.name == PROJECT.name and path == repo / PROJECT:
            return False
        return path != self.layout(repo).folder

    def parse(self, repo: Path, path: Path, label: str) -> Block | None:
        if path.name == PROJECT.name and path == repo / PROJECT:
            return None  # a layout problem is a warning (`warnings`), never a block
        if path == self.layout(repo).folder:
            return unlisted_folder(repo, path, label)
        return read_task(repo, path, label)

    # -- when a block began ----------------------------------------------------------------

    def began(self, block: Block, first_seen: datetime) -> datetime:
        """The date of the note that explains the block (agenticloop's notes carry a day, read
        as UTC), or when hitl first saw it if that was later the same day, or earlier (a note
        dated in the future: never later than hitl first saw the block, or it would never age).
        """
        day = block.meta.get("note_date")
        if not isinstance(day, str):
            return first_seen
        start = _day_start(day) if len(day) <= 16 else _parse_day(day)
        if start is None or start > first_seen:
            return first_seen
        if first_seen.astimezone(UTC).date() == start.date():
            return first_seen
        return start

    # -- answering -------------------------------------------------------------------------

    def decision_text(self, block: Block, answer: Answer) -> str:
        """The dated note's text, without its date; the operator may edit it in the preview."""
        return writer.decision_text(block, answer)

    def plan(self, block: Block, answer: Answer) -> Plan:
        return writer.plan(block, answer)

    def plan_note(self, block: Block, note: str, operator: str, when: datetime) -> Plan:
        """The task's own "keep blocked, add a note" transition (its `keep` choice): a dated
        note under `## Comments`, the status unchanged."""
        return writer.plan(block, keep_answer(block, note, operator, when))

    # -- did the loop resume? ------------------------------------------------------------------

    def resume_signs(self, block: Block, plan: Plan) -> dict[str, Any]:
        """The task file's fingerprint as the answer wrote it, and the status it set."""
        path = Path(block.path)
        new = next((c.new for c in plan.changes if c.path == path), None)
        if new is None:
            return {"file": fsio.current_fingerprint(path), "status": block.state}
        return {"file": fingerprint(new), "status": status_of(new)}

    def resumed(self, waiting: AnswerWaiting) -> str | None:
        """The task's status moved on from what the answer set, or the loop changed the file
        (a note, a comment) since."""
        signs = waiting.signs if isinstance(waiting.signs, dict) else {}
        path = Path(waiting.path)
        try:
            read = fsio.read_file(path)
        except FileNotFoundError:
            return "the task file was moved or removed"
        except OSError:
            return None
        if read.fingerprint == signs.get("file"):
            return None
        before, now = signs.get("status"), status_of(read.head)
        if now is not None and now != before:
            return f"status {before or '?'} → {now}"
        return "the task file changed (a note by the loop)"

    def resume_dirs(self, waiting: AnswerWaiting) -> list[Path]:
        """The task's folder (already watched while the repository is)."""
        return [Path(waiting.path).parent]


def _parse_day(day: str) -> datetime | None:
    """Midnight UTC of a `YYYY-MM-DD` note date; None if it is not one."""
    try:
        return datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        return None


#: The same, remembered: a fleet's notes share few days, and strptime costs tens of
#: microseconds a call. Only short texts are kept (a note's day is ten characters).
_day_start = functools.lru_cache(maxsize=4096)(_parse_day)
