"""Where a repository's HEAD points, read from its files (no git process), and the folders
whose events show a commit.

A repository's git folder is `.git`, or what a `.git` *file* names (`gitdir: ...`, a worktree
or a submodule); a worktree's branches live in the common folder its `commondir` names. HEAD
is `ref: refs/heads/NAME` (the ref's loose file, else its line in `packed-refs`) or a commit id
(detached). Every commit appends to `logs/HEAD` and rewrites `index` in the git folder, so
watching the git folder and its `logs/` (non-recursively) sees every commit.

Everything here reads untrusted bytes: a file too large, not UTF-8, a ref leaving the git
folder, a loop of symbolic refs, all read as "no commit" (None), never an exception.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from hitl_tui.fsio import read_small

#: Longest file read here (HEAD, a ref, `.git` file, commondir); packed-refs may be larger.
MAX_SMALL = 4096
MAX_PACKED = 64 << 20
#: How much of the end of `logs/HEAD` (the reflog) is read for HEAD's last moves.
MAX_REFLOG_TAIL = 256 << 10
_OID = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")
_REF = re.compile(r"refs/[A-Za-z0-9._/@+-]+")


def _small(path: Path, limit: int = MAX_SMALL) -> str | None:
    data = read_small(path, limit)
    if data is None or len(data) > limit:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def git_dir(repo: Path) -> Path | None:
    """The repository's git folder: `.git`, or the folder a `.git` file names; None without
    one."""
    dot = repo / ".git"
    if os.path.isdir(dot):
        return dot
    text = _small(dot)
    if text is None or not text.startswith("gitdir:"):
        return None
    target = text[len("gitdir:") :].strip()
    if not target or "\0" in target:
        return None
    folder = Path(target) if os.path.isabs(target) else repo / target
    return folder if os.path.isdir(folder) else None


def common_dir(gitdir: Path) -> Path:
    """Where branches are kept: the `commondir` of a worktree's git folder, else itself."""
    text = _small(gitdir / "commondir")
    if text is None or not text.strip() or "\0" in text:
        return gitdir
    name = text.strip()
    folder = Path(name) if os.path.isabs(name) else gitdir / name
    return folder if os.path.isdir(folder) else gitdir


def _packed(common: Path, ref: str) -> str | None:
    data = read_small(common / "packed-refs", MAX_PACKED)
    if data is None or len(data) > MAX_PACKED:
        return None
    wanted = ref.encode("utf-8")
    for line in data.split(b"\n"):
        if not line or line[:1] in (b"#", b"^"):
            continue
        oid, _, name = line.partition(b" ")
        if name.rstrip(b"\r") == wanted:
            text = oid.decode("ascii", "replace")
            return text if _OID.fullmatch(text) else None
    return None


def head(repo: Path) -> str | None:
    """The commit id HEAD points at now; None: no git folder, no commit yet, or unreadable."""
    gitdir = git_dir(repo)
    if gitdir is None:
        return None
    common = common_dir(gitdir)
    text = _small(gitdir / "HEAD")
    for _ in range(5):  # a symbolic ref may point at another one; a loop ends here
        if text is None:
            return None
        text = text.strip()
        if _OID.fullmatch(text):
            return text
        if not text.startswith("ref:"):
            return None
        ref = text[len("ref:") :].strip()
        if not _REF.fullmatch(ref) or ".." in ref.split("/"):
            return None
        loose = _small(gitdir / ref)
        if loose is None and common != gitdir:
            loose = _small(common / ref)
        if loose is None:
            return _packed(common, ref)
        text = loose
    return None


def watch_dirs(repo: Path) -> list[Path]:
    """The folders whose events show a commit: the git folder and its `logs/` (those that
    exist)."""
    gitdir = git_dir(repo)
    if gitdir is None:
        return []
    return [d for d in (gitdir, gitdir / "logs") if os.path.isdir(d)]


@dataclass(frozen=True)
class Move:
    """One move of HEAD, as the reflog (`logs/HEAD`) recorded it."""

    #: The commit HEAD moved to.
    new: str
    #: When, in seconds since the epoch.
    when: int
    #: What moved it, as git wrote it: `commit: the subject`, `reset: moving to HEAD~1`, ...
    message: str

    @property
    def is_commit(self) -> bool:
        """A commit made here (`commit`, `commit (amend)`, `commit (merge)`, ...)."""
        return self.message.startswith("commit")

    @property
    def subject(self) -> str:
        """The message without git's `commit: ` in front."""
        return self.message.partition(": ")[2] if ": " in self.message else self.message


def _reflog_tail(path: Path) -> bytes | None:
    """The last MAX_REFLOG_TAIL bytes of a regular file, from a whole line; None: unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        start = max(0, info.st_size - MAX_REFLOG_TAIL)
        data = os.pread(fd, MAX_REFLOG_TAIL, start)
    except OSError:
        return None
    finally:
        os.close(fd)
    if start:
        data = data.partition(b"\n")[2]  # the first line is cut: dropped
    return data


def head_moves(repo: Path, after: str | None = None, since: float | None = None) -> list[Move]:
    """HEAD's moves recorded after the line that moved it to `after` (the last such line), or,
    without `after` or when no line has it, those made at or after `since` (seconds since the
    epoch; git records whole seconds, so a move in the same second counts), oldest first.
    Read from the end of the reflog only; none when there is no reflog (or it is off)."""
    gitdir = git_dir(repo)
    data = _reflog_tail(gitdir / "logs" / "HEAD") if gitdir is not None else None
    if not data:
        return []
    moves: list[Move] = []
    for raw in data.split(b"\n"):
        head, _, message = raw.partition(b"\t")
        fields = head.split()
        if len(fields) < 4:
            continue
        new = fields[1].decode("ascii", "replace")
        try:
            when = int(fields[-2])
        except ValueError:
            continue
        if not _OID.fullmatch(new):
            continue
        text = " ".join(message.decode("utf-8", "replace").split())
        moves.append(Move(new, when, text))
    if after is not None:
        marks = [i for i, move in enumerate(moves) if move.new == after]
        if marks:
            return moves[marks[-1] + 1 :]
    if since is None:
        return []
    return [move for move in moves if move.when >= int(since)]
