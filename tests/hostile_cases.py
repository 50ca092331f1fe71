"""Hostile and broken repositories, one row per case, and a harness to run hitl on them.

Used by tests/test_hostile.py (the CLI half: list, list --json, answer --dry-run, answer, undo)
and meant for the TUI tests too: each Case builds a repository under a folder and says what a
correct hitl does with it, so the app half only has to add "the app keeps running and shows
the text literally" over the same CASES (`from tests.hostile_cases import CASES`).

`run_hitl` runs `hitl` in a real subprocess through DRIVER, which can inject faults (a crash
before the N-th file-system call, an errno on a matching call, a denied os.access, an unreadable
folder, a repo renamed or deleted at the worst moment) without any test hook in hitl itself.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SHOP = FIXTURES / "loopkit-shop"

#: File-system calls counted by the `crash_at` fault (module `os` attributes).
COUNTED = ("open", "write", "fsync", "replace", "rename", "unlink", "remove", "chmod", "fchmod")

DRIVER = r"""
import errno, json, os, shutil, sys, time
spec = json.loads(os.environ.get("HITL_TEST_FAULT") or "{}")
import hitl_tui.cli.commands as cli
import hitl_tui.answers.service, hitl_tui.answers.apply, hitl_tui.config, hitl_tui.fsio as fsio
import hitl_tui.inbox.inbox, hitl_tui.journal, hitl_tui.cli.journal, hitl_tui.textio
import hitl_tui.timefmt, hitl_tui.inbox.workspace
from hitl_tui.sources.loopkit import source as loopkit

calls = [0]

def path_of(arg, folder=None):
    if isinstance(arg, int):
        try:
            return os.readlink(f"/proc/self/fd/{arg}")
        except OSError:
            return ""
    if not isinstance(arg, (str, bytes, os.PathLike)):
        return ""
    name = os.fsdecode(arg)
    if folder is not None and not os.path.isabs(name):
        name = os.path.join(path_of(folder), name)
    return name

def where_of(name, args, kwargs):
    # The paths a call works on, made absolute where they are relative to a folder fd.
    if name == "renameat2":
        return f"{path_of(args[1], args[0])} {path_of(args[3], args[2])}"
    dirs = [kwargs.get("src_dir_fd", kwargs.get("dir_fd")), kwargs.get("dst_dir_fd")]
    return " ".join(path_of(a, d) for a, d in zip(args[:2], dirs))

def wrap(name, real):
    def fake(*args, **kwargs):
        calls[0] += 1
        if spec.get("crash_at") == calls[0]:
            os._exit(86)
        if spec.get("slow"):
            time.sleep(spec["slow"])
        fail = spec.get("fail")
        if fail and fail["func"] == name:
            where = where_of(name, args, kwargs)
            if fail["match"] in where:
                fail["seen"] = fail.get("seen", 0) + 1
                if fail["seen"] == fail.get("nth", 1):
                    code = getattr(errno, fail["errno"])
                    raise OSError(code, os.strerror(code), where)
        return real(*args, **kwargs)
    return fake

for name in COUNTED:
    setattr(os, name, wrap(name, getattr(os, name)))
import hitl_tui.answers.repofs as repofs
repofs.renameat2 = wrap("renameat2", repofs.renameat2)

if spec.get("deny_access"):
    real_access = os.access
    def access(path, mode, *a, **k):
        if path_of(path, k.get("dir_fd")).endswith(spec["deny_access"]) and mode & os.W_OK:
            return False
        return real_access(path, mode, *a, **k)
    os.access = access

if spec.get("unreadable"):
    prefix = spec["unreadable"]
    real_open, real_scandir = open, os.scandir
    def deny(path):
        if os.path.abspath(os.fspath(path)).startswith(prefix):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
    def guarded_open(path, *a, **k):
        if not isinstance(path, int):
            deny(path)
        return real_open(path, *a, **k)
    def guarded_scandir(path="."):
        deny(path)
        return real_scandir(path)
    real_opener = fsio._open_nonblocking
    def guarded_opener(path, flags):  # read_file opens its descriptor with this
        deny(path)
        return real_opener(path, flags)
    fsio.open = guarded_open
    fsio._open_nonblocking = guarded_opener
    os.scandir = guarded_scandir

if spec.get("rename_repo_before_apply"):
    src, dst = spec["rename_repo_before_apply"]
    real_apply = hitl_tui.answers.apply.apply_plan
    def apply_plan(plan, hook=None):
        os.rename(src, dst)
        return real_apply(plan, hook)
    hitl_tui.answers.apply.apply_plan = apply_plan

if spec.get("move_repo_after_write") or spec.get("crash_after_write") or spec.get("after_write"):
    # After the N-th file an answer (or undo) writes: move the repository, play the loop
    # (append to files, write a file), hold still for a while, and/or crash.
    real_replace = repofs.RepoDir.replace
    writes = [0]
    def replace(self, spot, expected, new, mode=None):
        real_replace(self, spot, expected, new, mode)
        writes[0] += 1
        move = spec.get("move_repo_after_write")
        if move and writes[0] == move[2]:
            os.rename(move[0], move[1])
        then = spec.get("after_write")
        if then and writes[0] == then["n"]:
            for path, text in then.get("append", {}).items():
                with open(path, "ab") as f:
                    f.write(text.encode())
            for path, text in then.get("write", {}).items():
                with open(path, "wb") as f:
                    f.write(text.encode())
            if then.get("rmtree"):
                shutil.rmtree(then["rmtree"])
            if then.get("sleep"):
                time.sleep(then["sleep"])
        if spec.get("crash_after_write") == writes[0]:
            os._exit(86)
    repofs.RepoDir.replace = replace

if spec.get("append_before_exchange"):
    # The loop appends to a file just before hitl swaps it, and hitl dies right after the swap.
    path, text = spec["append_before_exchange"]
    real_rename2 = repofs.renameat2
    def renameat2(src_dir, src, dst_dir, dst, flags):
        if flags == repofs.RENAME_EXCHANGE and os.path.basename(path) in (src, dst):
            with open(path, "ab") as f:
                f.write(text.encode())
            real_rename2(src_dir, src, dst_dir, dst, flags)
            os._exit(86)
        return real_rename2(src_dir, src, dst_dir, dst, flags)
    repofs.renameat2 = renameat2

if spec.get("delete_repo_during_scan"):
    doomed = spec["delete_repo_during_scan"]
    real_parse = loopkit.LoopkitSource.parse
    def parse(self, repo, path, label):
        if os.fspath(repo) == doomed and os.path.exists(doomed):
            shutil.rmtree(doomed)
        return real_parse(self, repo, path, label)
    loopkit.LoopkitSource.parse = parse

# Where the answer's own calls end: the resume note (resume.json) comes after them.
import hitl_tui.loops.resume as resume
noted_at = []
real_note = resume.ResumeBook.note
def note(self, *args, **kwargs):
    noted_at.append(calls[0])
    return real_note(self, *args, **kwargs)
resume.ResumeBook.note = note

code = cli.main(sys.argv[1:])
if os.environ.get("HITL_TEST_RSS"):
    # VmHWM is the peak RSS of this program's own memory since exec. (ru_maxrss would also
    # count the pytest process this one was vforked from.)
    with open("/proc/self/status") as status:
        peak = next(line for line in status if line.startswith("VmHWM:")).split()[1]
    with open(os.environ["HITL_TEST_RSS"], "w") as out:
        out.write(peak)
if spec.get("count"):
    print(f"FAULT-CALLS {calls[0]}", file=sys.stderr)
    if noted_at:
        print(f"FAULT-NOTED-AT {noted_at[0]}", file=sys.stderr)
sys.stderr.flush()
sys.stdout.flush()
os._exit(code)
""".replace("COUNTED", repr(COUNTED))


@dataclass
class Run:
    returncode: int
    stdout: bytes
    stderr: bytes
    #: Peak resident memory of the process, in bytes.
    max_rss: int
    seconds: float

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace")


def hitl_env(extra: dict | None = None) -> dict:
    return {**os.environ, "PYTHONUTF8": "1", **{k: str(v) for k, v in (extra or {}).items()}}


def start_hitl(*args: object, fault: dict | None = None, cwd: Path | None = None, **popen):
    """Start `hitl ARGS` (through DRIVER) without waiting."""
    env = hitl_env({"HITL_TEST_FAULT": json.dumps(fault or {})})
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER, *map(str, args)], env=env, cwd=cwd, **popen
    )


def run_hitl(
    *args: object, fault: dict | None = None, cwd: Path | None = None, timeout: float = 60
) -> Run:
    """Run `hitl ARGS` to completion, with its own peak RSS (VmHWM) and wall time."""
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        rss = Path(scratch) / "rss"
        began = time.monotonic()
        try:
            done = subprocess.run(
                [sys.executable, "-c", DRIVER, *map(str, args)],
                env=hitl_env({"HITL_TEST_FAULT": json.dumps(fault or {}), "HITL_TEST_RSS": rss}),
                cwd=cwd,
                capture_output=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            raise AssertionError(f"hitl {args} hung for more than {timeout}s") from None
        seconds = time.monotonic() - began
        peak = int(rss.read_text()) * 1024 if rss.exists() else 0
        return Run(done.returncode, done.stdout, done.stderr, peak, seconds)


def snapshot(folder: Path) -> dict[str, tuple[str, bytes | str, int]]:
    """Every entry under `folder`: kind, bytes (or link target), permission bits."""
    result: dict[str, tuple[str, bytes | str, int]] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(folder))
            st = path.lstat()
            if path.is_symlink():
                result[rel] = ("link", os.readlink(path), 0)
            elif path.is_dir():
                result[rel] = ("dir", b"", st.st_mode & 0o7777)
            elif not stat.S_ISREG(st.st_mode):
                result[rel] = ("special", b"", st.st_mode)  # a FIFO: never open it
            else:
                result[rel] = ("file", path.read_bytes(), st.st_mode & 0o7777)
    return result


def temp_files(folder: Path) -> list[str]:
    return [str(p) for p in folder.rglob(".hitl-tmp-*")]


def copy_shop(dest: Path) -> Path:
    shutil.copytree(SHOP, dest)
    (dest / ".git").mkdir()
    return dest


# -- the cases ---------------------------------------------------------------------------------

MARKUP = "[b]bold [/x] [@click=app.quit]quit[/] [link=file:///etc/passwd]x[/link] [b"
ESCAPES = "\x1b[31mred\x1b[0m \x1b]0;pwned title\x07 \x1b[2J\x1b[H \x9b31m \x07"
HOSTILE = MARKUP + " " + ESCAPES

HOSTILE_BLOCKED = (
    f"# {HOSTILE}\n\n## Question:\n{HOSTILE} retention?\n\n## Context:\n{HOSTILE}\n\n"
    f"## Attempted:\n- {HOSTILE}\n- tried {MARKUP}\n\n"
    f"## Choices:\n- A) {HOSTILE} — {ESCAPES}\n- B) Keep {MARKUP} — {ESCAPES}\n\n"
    f"## {ESCAPES} extra\n{HOSTILE}\n"
).encode()


def _shop_with(blocked: bytes | None = None, **files: bytes) -> Callable[[Path], Path]:
    def build(root: Path) -> Path:
        repo = copy_shop(root / "shop")
        if blocked is not None:
            (repo / "BLOCKED.md").write_bytes(blocked)
        for name, data in files.items():
            (repo / name.replace("__", "/")).write_bytes(data)
        return repo

    return build


def _big(size: int, line: bool) -> Callable[[Path], Path]:
    def build(root: Path) -> Path:
        repo = copy_shop(root / "shop")
        head = (SHOP / "BLOCKED.md").read_bytes()
        with open(repo / "BLOCKED.md", "ab") as f:
            if line:
                f.write(b"\n" + b"x" * size + b"\n")
            else:
                chunk = b"- more context, repeated by a runaway agent loop\n" * 20_000
                written = 0
                while written < size:
                    f.write(chunk)
                    written += len(chunk)
        assert (repo / "BLOCKED.md").read_bytes()[: len(head)] == head
        return repo

    return build


def _symlink_out(name: str) -> Callable[[Path], Path]:
    def build(root: Path) -> Path:
        repo = copy_shop(root / "shop")
        outside = root / "outside"
        outside.mkdir()
        target = outside / name
        target.write_bytes((repo / name).read_bytes() if (repo / name).exists() else b"x\n")
        (repo / name).unlink()
        (repo / name).symlink_to(target)
        return repo

    return build


def _symlink_inside(root: Path) -> Path:
    repo = copy_shop(root / "shop")
    (repo / "docs").mkdir()
    (repo / "PROMPT.md").rename(repo / "docs" / "PROMPT.md")
    (repo / "PROMPT.md").symlink_to(Path("docs") / "PROMPT.md")
    return repo


def _odd_path(root: Path) -> Path:
    return copy_shop(root / "my loops ünïcödé 日本" / "shop repo")


def _fifo_blocked(root: Path) -> Path:
    repo = copy_shop(root / "shop")
    (repo / "BLOCKED.md").unlink()
    os.mkfifo(repo / "BLOCKED.md")
    return repo


def _dev_zero_blocked(root: Path) -> Path:
    repo = copy_shop(root / "shop")
    (repo / "BLOCKED.md").unlink()
    (repo / "BLOCKED.md").symlink_to("/dev/zero")
    return repo


def _dangling_blocked(root: Path) -> Path:
    repo = copy_shop(root / "shop")
    (repo / "BLOCKED.md").unlink()
    (repo / "BLOCKED.md").symlink_to(root / "nowhere" / "BLOCKED.md")
    return repo


TASK_TAIL = (
    "---\n# T-001 - Title\n\n## Comments\n- 2026-08-21: Blocked (contract): ok? Needed: you.\n"
)


def _task(header: str) -> Callable[[Path], Path]:
    def build(root: Path) -> Path:
        repo = root / "shop"
        tasks = repo / ".agenticloop" / "tasks"
        tasks.mkdir(parents=True)
        (repo / ".git").mkdir()
        text = "---\ntask_id: T-001\nstatus: blocked\nblock_category: contract\n" + header
        (tasks / "T-001.md").write_text(text + TASK_TAIL)
        return repo

    return build


def _yaml_bomb() -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [{','.join([f'*{prev}'] * 9)}]")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Case:
    """One hostile repository and what hitl must do with it.

    `answer_rc` 0 means the answer is written (and `hitl undo` then restores every byte);
    any other code means nothing at all changed and stderr says `message`.
    """

    name: str
    build: Callable[[Path], Path]
    answer: tuple[str, ...] = ("--choice", "B")
    list_rc: int = 0
    #: Whether `list` shows the block (False: the repo is listed as having none).
    listed: bool = True
    dry_rc: int = 0
    answer_rc: int = 0
    message: str = ""
    #: A fault injected into the `answer` run only (see DRIVER).
    fault: Callable[[Path], dict] | None = None
    #: Paths (relative to the case folder) outside the repo that must never change.
    outside: tuple[str, ...] = ()
    #: The block file answered, relative to the repo.
    target: str = "BLOCKED.md"
    #: The `answer` run's peak RSS must stay under this.
    max_rss: int = 200 * 1024 * 1024
    tags: frozenset[str] = field(default_factory=frozenset)


CASES: list[Case] = [
    Case("canonical", _shop_with()),
    Case("markup and escapes in every field", _shop_with(HOSTILE_BLOCKED)),
    Case(
        "markup and escapes in PROMPT.md and the plan",
        _shop_with(None, **{"PROMPT.md": HOSTILE.encode() + b"\n", "IMPLEMENTATION_PLAN.md": b""}),
    ),
    Case(
        "NUL bytes",
        _shop_with(b"## Question:\nwhy\x00\x00 now?\n## Choices:\n- A) a\x00b\n- B) b\n"),
    ),
    Case(
        "invalid UTF-8",
        _shop_with(
            b"## Question:\n\xff\xfe caf\xe9 \xc3(\n## Choices:\n- A) \x80x\n- B) \xed\xa0\x80\n"
        ),
    ),
    Case(
        "BOM and CRLF everywhere",
        _shop_with(
            b"\xef\xbb\xbf# Blocked\r\n## Question:\r\nq?\r\n## Choices:\r\n- A) a\r\n- B) b\r\n",
            **{"PROMPT.md": b"\xef\xbb\xbf# P\r\n\r\n## Goal\r\ng\r\n"},
        ),
    ),
    Case("only whitespace", _shop_with(b"  \n\t\n \r\n"), answer=("--text", "carry on")),
    Case("empty file", _shop_with(b""), answer=("--text", "carry on")),
    Case("binary garbage", _shop_with(bytes(range(256)) * 64), answer=("--text", "carry on")),
    Case(
        "50 MB BLOCKED.md",
        _big(50 * 1024 * 1024, line=False),
        tags=frozenset({"slow", "truncated"}),
    ),
    Case("5 MB single line", _big(5 * 1024 * 1024, line=True), tags=frozenset({"truncated"})),
    Case(
        "BLOCKED.md is a symlink leaving the repo",
        _symlink_out("BLOCKED.md"),
        answer_rc=1,
        message="refusing to write BLOCKED.md",
        outside=("outside/BLOCKED.md",),
    ),
    Case(
        "PROMPT.md is a symlink leaving the repo",
        _symlink_out("PROMPT.md"),
        dry_rc=1,
        answer_rc=1,
        message="refusing to write PROMPT.md",
        outside=("outside/PROMPT.md",),
    ),
    Case(
        "IMPLEMENTATION_PLAN.md is a symlink leaving the repo",
        _symlink_out("IMPLEMENTATION_PLAN.md"),
        dry_rc=1,
        answer_rc=1,
        message="refusing to write IMPLEMENTATION_PLAN.md",
        outside=("outside/IMPLEMENTATION_PLAN.md",),
    ),
    Case("PROMPT.md is a symlink inside the repo (followed)", _symlink_inside),
    Case(
        "PROMPT.md not writable",
        _shop_with(),
        answer_rc=1,
        message="cannot write PROMPT.md: permission denied",
        fault=lambda repo: {"deny_access": "/PROMPT.md"},
    ),
    Case(
        "rename over IMPLEMENTATION_PLAN.md refused (EPERM, after PROMPT.md was written)",
        _shop_with(),
        answer_rc=1,
        message="could not write IMPLEMENTATION_PLAN.md: permission denied; nothing was changed",
        fault=lambda repo: {
            "fail": {"func": "renameat2", "match": "/IMPLEMENTATION_PLAN.md", "errno": "EPERM"}
        },
    ),
    Case(
        "disk full writing IMPLEMENTATION_PLAN.md",
        _shop_with(),
        answer_rc=1,
        message="could not write IMPLEMENTATION_PLAN.md: the disk is full; nothing was changed",
        fault=lambda repo: {
            "fail": {"func": "fsync", "match": f"{repo}/.hitl-tmp-", "nth": 2, "errno": "ENOSPC"}
        },
    ),
    Case(
        "disk full writing PROMPT.md",
        _shop_with(),
        answer_rc=1,
        message="could not write PROMPT.md: the disk is full; nothing was changed",
        fault=lambda repo: {
            "fail": {"func": "fsync", "match": f"{repo}/.hitl-tmp-", "nth": 1, "errno": "ENOSPC"}
        },
    ),
    Case(
        "disk full in the state folder (the journal)",
        _shop_with(),
        answer_rc=1,
        message="cannot write the journal",
        fault=lambda repo: {
            "fail": {"func": "fsync", "match": "/journal/", "nth": 1, "errno": "ENOSPC"}
        },
    ),
    Case(
        "removing BLOCKED.md fails",
        _shop_with(),
        answer_rc=1,
        message="could not write BLOCKED.md: permission denied; nothing was changed",
        fault=lambda repo: {"fail": {"func": "rename", "match": "/BLOCKED.md", "errno": "EACCES"}},
    ),
    Case(
        "repo renamed between reading and writing",
        _shop_with(),
        answer_rc=3,
        message="the block is gone",
        fault=lambda repo: {"rename_repo_before_apply": [str(repo), f"{repo}-moved"]},
    ),
    Case(
        "BLOCKED.md cannot be read",
        _shop_with(),
        answer=("--text", "carry on"),
        dry_rc=1,
        answer_rc=1,
        message="cannot be read",
        fault=lambda repo: {"unreadable": str(repo / "BLOCKED.md")},
    ),
    Case("repo path with spaces and non-ASCII", _odd_path),
    Case(
        "BLOCKED.md is a FIFO (no hang)",
        _fifo_blocked,
        # Listed as a block that cannot be read (the loop stays stopped), never answered.
        answer=("--text", "carry on"),
        dry_rc=1,
        answer_rc=1,
        message="cannot be read",
    ),
    Case(
        "BLOCKED.md is a symlink to /dev/zero (no endless read)",
        _dev_zero_blocked,
        answer=("--text", "carry on"),
        dry_rc=1,
        answer_rc=1,
        message="cannot be read",
    ),
    Case(
        "BLOCKED.md is a dangling symlink",
        _dangling_blocked,
        # Listed as a block that cannot be read (the loop stays stopped), never answered.
        answer=("--text", "carry on"),
        dry_rc=1,
        answer_rc=1,
        message="cannot be read",
    ),
    Case(
        # agenticloop's reader has no aliases: the "bomb" is nine short strings, and the task
        # is answered like any other.
        "task file with a YAML bomb (nested aliases)",
        _task(_yaml_bomb()),
        answer=("--text", "approved by ops"),
        target=".agenticloop/tasks/T-001.md",
    ),
    Case(
        "task file with a 10 MB frontmatter",
        _task("".join(f"k{i}: {'v' * 100}\n" for i in range(100_000))),
        answer=("--text", "approved by ops"),
        dry_rc=1,
        answer_rc=1,
        message="the task header does not parse",
        target=".agenticloop/tasks/T-001.md",
    ),
    Case(
        "BLOCKED.md is a folder",
        lambda root: _mkdir_blocked(root),
        # Listed as a block that cannot be read (the loop stays stopped), never answered.
        answer=("--text", "carry on"),
        dry_rc=1,
        answer_rc=1,
        message="cannot be read",
    ),
]


def _mkdir_blocked(root: Path) -> Path:
    repo = copy_shop(root / "shop")
    (repo / "BLOCKED.md").unlink()
    (repo / "BLOCKED.md").mkdir()
    return repo
