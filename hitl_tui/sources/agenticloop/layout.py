"""agenticloop's layout: where a repository keeps its tasks, read from
`.agenticloop/project.md` as agenticloop loads it (its lenient reader decides the task folder;
what its strict reader refuses is a warning for the repository, never a block), and why a task
folder that cannot be listed is unreadable.

Layer: sources (the agenticloop backend package).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import hitl_tui.sources.agenticloop.frontmatter as frontmatter
from hitl_tui import fsio
from hitl_tui.textio import one_line

PROJECT = Path(".agenticloop") / "project.md"
DEFAULT_TEMPLATE = ".agenticloop/tasks/{taskId}.md"
DEFAULT_FOLDER = DEFAULT_TEMPLATE.rpartition("/")[0]
#: Deepest `[`/`{` nesting parsed; real headers nest two or three levels.
MAX_DEPTH = frontmatter.MAX_DEPTH


@dataclass(frozen=True, slots=True)
class Layout:
    """Where a repo keeps its tasks, read from `.agenticloop/project.md`."""

    backend: str = "files"
    folder: Path | None = None
    #: What is wrong with project.md or its template, and which folder is read instead: a
    #: warning for the repository, never a block.
    warning: str | None = None
    stamp: str = "layout"
    #: Nothing at `.agenticloop` when the layout was read (not even something unreadable):
    #: no task folder to list (`block_files` lists nothing without a look).
    absent: bool = False


def _mtime(path: str | Path) -> datetime | None:
    try:
        return datetime.fromtimestamp(os.lstat(path).st_mtime, UTC)
    except OSError:
        return None


def _read_project(project: Path) -> tuple[str | None, dict[str, Any], str]:
    """(what is wrong with project.md or None, the mapping agenticloop loads from it, stamp).

    agenticloop loads project.md with its lenient reader (`loadProjectMap`: invalid lines are
    skipped, no header means every default), so that mapping decides the task folder, exactly
    as the loop's own commands find it. What its strict reader refuses is the warning.
    """
    if not os.path.isfile(project):  # a folder, a FIFO, a dangling symlink: never opened
        return "it is not a regular file", {}, "layout"
    read = fsio.read_file(project)
    raw = read.head
    if read.truncated:
        return f"it is larger than {len(raw) // 1024} KiB", {}, read.fingerprint
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or "\0" in text:
        loose = raw.decode("utf-8", "replace")  # what agenticloop's readFileSync gives
        lenient = _lenient(loose)
        return "it is not UTF-8 text", lenient, read.fingerprint
    lenient = _lenient(text)
    try:
        strict = frontmatter.read_frontmatter(text)
    except frontmatter.TooDeep:
        return f"its header nests more than {MAX_DEPTH} levels deep", lenient, read.fingerprint
    if strict.state == "absent":
        return "it has no --- header", lenient, read.fingerprint
    if strict.state == "malformed":
        problem = frontmatter.describe(strict.reason or "", strict.text)
        return problem, lenient, read.fingerprint
    if text.startswith("\ufeff"):
        return (
            "it starts with a byte-order mark, so agenticloop ignores its header",
            {},
            (read.fingerprint),
        )
    return None, lenient, read.fingerprint


def _lenient(text: str) -> dict[str, Any]:
    try:
        return frontmatter.read_lenient(text) or {}
    except frontmatter.TooDeep:
        return {}


def shown_folder(repo: Path, folder: Path) -> str:
    rel = os.path.relpath(folder, repo)
    return "the repository's top folder" if rel == "." else f"{rel}/"


def read_layout(repo: Path) -> Layout:
    """The task backend and folder of `repo`, and a warning when project.md or its template
    is not what agenticloop accepts (saying which folder is read instead, if any)."""
    own = fsio.child(repo, ".agenticloop")
    project = fsio.child(own, PROJECT.name)
    project_time = _mtime(project)
    if project_time is None:
        try:
            os.lstat(own)
        except FileNotFoundError:
            # No .agenticloop at all (most repos of a mixed fleet): the default folder, which
            # cannot lead anywhere because none of it exists.
            return Layout("files", fsio.child(own, "tasks"), absent=True)
        except OSError:  # something there that cannot be looked at: listed (and said) as ever
            return Layout("files", fsio.child(own, "tasks"))
    problems: list[str] = []
    meta: dict[str, Any] = {}
    stamp = "layout"
    if project_time is not None:  # no project.md: agenticloop's defaults, nothing to say
        try:
            problem, meta, stamp = _read_project(project)
        except OSError as exc:
            problem = exc.strerror or str(exc)
        if problem is not None:
            problems.append(f"{PROJECT} could not be read ({problem})")
    backend = meta.get("task_backend", "files")
    if backend == "github":
        warning = None
        if problems:
            warning = "; ".join(problems) + "; task_backend is github, so no task folder is read"
        return Layout("github", None, warning, stamp)
    if backend != "files":
        problems.append(f"{PROJECT} names an unknown task_backend {_shown(backend)}")
    folder, refused = _task_folder(repo, meta.get("task_file_template", DEFAULT_TEMPLATE))
    if refused:
        problems.append(f"the task folder is refused: {refused}")
    if not problems:
        return Layout("files", folder, None, stamp)
    if folder is None:
        where = "no task folder is read"
    else:
        where = f"looking for tasks in {shown_folder(repo, folder)}"
        if project_time is not None and problems[0].startswith(str(PROJECT) + " could not"):
            where += " (where agenticloop itself looks)"
    return Layout("files", folder, "; ".join([*problems, where]), stamp)


def _shown(value: object) -> str:
    text = value if isinstance(value, str) else ("an empty value" if value == {} else str(value))
    return repr(one_line(text)) if isinstance(value, str) else text


def _task_folder(repo: Path, template: object) -> tuple[Path | None, str | None]:
    if not isinstance(template, str) or not template.strip():
        return None, f"task_file_template is {_shown(template)}, not a path"
    shown = one_line(template)
    # agenticloop reads a backslash as a folder separator (`task_file_template` on Windows).
    head, _, name = template.strip().replace("\\", "/").rpartition("/")
    if "{taskId}" not in name:
        return None, f"task_file_template {shown!r} does not end in a {{taskId}} file name"
    if "{" in head:
        return None, f"task_file_template {shown!r} puts a placeholder in the folder part"
    if head.startswith(("/", "~")) or os.path.isabs(head):
        return None, f"task_file_template {shown!r} is an absolute path"
    # Strings, not Paths: this runs for every repository at every scan.
    top = os.fspath(repo)
    where = os.path.normpath(os.path.join(top, head)) if head else top
    if not _real_inside(where, top):  # both absolute and normalised, like realpath's results
        return None, f"task_file_template {shown!r} points outside the repository"
    folder = Path(where) if where != top else repo
    existing = where
    while not os.path.lexists(existing) and existing != top:
        existing = os.path.dirname(existing)
    # The repo itself is inside itself: only a folder below it can lead out, through a symlink.
    if (
        existing != top
        and _has_symlink_below(top, existing)
        and not _real_inside(os.path.realpath(existing), os.path.realpath(top))
    ):
        return None, f"{head or '.'} leads outside the repository (a symlink)"
    return folder, None


def unlisted(repo: Path, folder: Path, exc: OSError) -> str | None:
    """Why the task folder, whose listing failed with `exc`, is there but unreadable, or None
    when it is simply not there (nor the one it would be made in: a repo with no tasks yet)."""
    if folder == repo:
        return None
    if not isinstance(exc, (FileNotFoundError, NotADirectoryError)):
        return exc.strerror or str(exc)  # there, but not for us (EACCES, EIO)
    here = folder
    while here != repo and not os.path.lexists(here):
        here = here.parent
    if here == repo:
        return None
    if os.path.isdir(here):
        return None  # a folder on the way, without the task folder in it yet
    why = fsio.why_not_a_file(here) or "it is a file"  # None: a regular file
    why = why.removesuffix(", not a file") + ", not a folder"
    rel = os.path.relpath(here, repo)
    return why if here == folder else f"{rel} is in the way: {why}"


def _has_symlink_below(top: str, inner: str) -> bool:
    """Whether a folder on the way from `top` down to `inner` (normalised, below it) is a
    symlink. A few lstats: os.path.realpath costs a dozen, and this runs for every repo."""
    here = top
    for part in inner[len(top) :].strip(os.sep).split(os.sep):
        here = os.path.join(here, part)
        if os.path.islink(here):
            return True
    return False


def _real_inside(child: str, parent: str) -> bool:
    """is_inside for two results of os.path.realpath (absolute, normalised, no symlinks)."""
    return child == parent or child.startswith(parent.rstrip("/") + "/")
