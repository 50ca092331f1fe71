"""The operator's loops: how to restart one and how to jump to it, from `[[loop]]` in the config.

```toml
[[loop]]
match = ["~/loops/*", "~/work/api"]            # repository paths (globs; ** for any depth)
restart = ["tmux", "send-keys", "-t", "{name}", "./run.sh", "Enter"]
open = ["tmux", "switch-client", "-t", "{name}"]
resume_within = "10m"
timeout_seconds = 30
```

A command comes only from the operator's config, never from a repository or anything an agent
wrote. It runs as an argument list (no shell, unless the list itself calls one), in the
repository folder, with stdin closed, in a session of its own (so a timeout ends all of it),
and its output goes to a log in the state folder, through a keeper that bounds it (KEEPER).
`{repo}`, `{name}`, `{id}` and `{task_id}` are filled in *inside* single arguments: a value
with spaces or `;` stays one argument, never a word of a shell line. `{{` and `}}` are
literal braces. A value holding a control character (a newline too) is refused, not cleaned
(`ControlInValue`): nothing runs.

Domain code: no Textual; the CLI and the app run the same `run_command`.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hitl_tui.model import Block, HitlError, UsageError
from hitl_tui.state import files as statefile

#: What a `{placeholder}` may name.
FIELDS = ("repo", "name", "id", "task_id")
KNOWN_KEYS = {"match", "restart", "open", "resume_within", "timeout_seconds"}
RESUME_WITHIN = timedelta(minutes=10)
TIMEOUT = 30.0
#: Bytes a command's log holds at most: its first line (the command), the first of its output
#: (the rest is read and dropped, and the log says so), and hitl's own last line.
MAX_LOG = 1 << 20
#: Logs kept in the state folder; the oldest go first.
KEEP_LOGS = 200
#: Bytes all the logs in the state folder's `loops/` hold at most (a log still being written
#: counts as MAX_LOG); the oldest go first.
LOGS_TOTAL = 64 << 20
#: What a log's keeper writes when the command wrote more than MAX_LOG.
_PAST = f"[hitl: output past {MAX_LOG >> 20} MiB not kept]"
#: Room kept at a log's end for hitl's own lines ("[hitl: exit 3]").
_TAIL = 512
#: The first line of a log (the command) is cut to this many bytes.
_HEAD = 4096
_PLACE = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")


@dataclass(frozen=True)
class Loop:
    """One `[[loop]]` table: which repositories it covers and what it runs for them."""

    match: tuple[str, ...]
    restart: tuple[str, ...] | None = None
    open: tuple[str, ...] | None = None
    resume_within: timedelta = RESUME_WITHIN
    timeout: float = TIMEOUT

    def covers(self, repo: Path) -> bool:
        return any(glob_match(pattern, repo) for pattern in self.match)


def glob_match(pattern: str, path: Path) -> bool:
    """Whether `path` matches `pattern` component by component: `*`, `?` and `[...]` within
    one folder name, `**` for any number of folders (`~/loops/*` is each repo just under it)."""
    want = Path(pattern).parts
    have = Path(os.path.abspath(path)).parts

    def match(i: int, j: int) -> bool:
        if i == len(want):
            return j == len(have)
        if want[i] == "**":
            return any(match(i + 1, k) for k in range(j, len(have) + 1))
        return j < len(have) and fnmatch.fnmatchcase(have[j], want[i]) and match(i + 1, j + 1)

    return match(0, 0)


def loop_for(loops: tuple[Loop, ...], block: Block) -> Loop | None:
    """The first `[[loop]]` that covers the block's repository (None: none, or a remote block)."""
    if not isinstance(block.repo, Path):
        return None
    return next((loop for loop in loops if loop.covers(block.repo)), None)


def values_for(block: Block) -> dict[str, str]:
    repo = block.repo if isinstance(block.repo, Path) else Path(str(block.repo))
    task_id = block.meta.get("task_id") if isinstance(block.meta, dict) else None
    return {
        "repo": os.fsdecode(repo),
        "name": block.repo_name,
        "id": block.id,
        "task_id": task_id if isinstance(task_id, str) else "",
    }


#: What never goes into a command: C0 controls, DEL, C1 controls, and a path's undecodable
#: bytes (`os.fsdecode` makes byte 0x9b U+DC9B, and the command gets the byte back). Typed into
#: a terminal (`tmux send-keys`) Ctrl-O or a newline runs the line so far; ESC starts a key.
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\udc80-\udcff]")


def escaped(text: str) -> str:
    """`text` for a one-line message: each control character as `\\xNN` (an undecodable byte
    as the byte), anything else a terminal could act on as `printable` shows it."""
    from hitl_tui.textio import printable

    def one(m: re.Match[str]) -> str:
        code = ord(m.group())
        return f"\\x{code - 0xDC00 if code >= 0xDC00 else code:02x}"

    return printable(CONTROL.sub(one, text))


class ControlInValue(HitlError):
    """A value for a command holds a control character: the command is refused, not cleaned."""

    def __init__(self, name: str, value: str) -> None:
        self.name = name
        self.value = value
        found: list[str] = []
        for m in CONTROL.finditer(value):
            if escaped(m.group()) not in found:
                found.append(escaped(m.group()))
        self.found = ", ".join(found[:4]) + (", ..." if len(found) > 4 else "")
        shown_value = escaped(value if len(value) <= 200 else value[:199] + "…")
        holds = "a control character" if len(found) == 1 else "control characters"
        super().__init__(f"{name} holds {holds} ({self.found}) in '{shown_value}'")

    def line(self, what: str) -> str:
        """The one line that says `what` (restart, open, t) was refused, and why."""
        return f"{what} refused: {self}"


def check_value(name: str, value: str) -> None:
    """ControlInValue when `value` (what `name` stands for) may not be part of a command."""
    if CONTROL.search(value):
        raise ControlInValue(name, value)


def fill(template: tuple[str, ...], values: dict[str, str]) -> list[str]:
    """The argument list with each placeholder replaced inside its own argument. A value that
    holds a control character is refused (ControlInValue), never cleaned into something else:
    only the values the template uses are looked at."""

    def one(arg: str) -> str:
        def put(m: re.Match[str]) -> str:
            token = m.group(0)
            if token in ("{{", "}}"):
                return token[0]
            check_value(token, values[m.group(1)])
            return values[m.group(1)]

        return _PLACE.sub(put, arg)

    return [one(arg) for arg in template]


def check_template(where: str, name: str, value: object) -> tuple[str, ...]:
    """A command of the config: a non-empty list of strings whose placeholders are known."""
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(a, str) and "\0" not in a for a in value)
        or not value[0].strip()
    ):
        raise UsageError(
            f"{where}: {name} must be a list of strings, the command and its arguments "
            f'(like ["tmux", "send-keys", "-t", "{{name}}", "./run.sh", "Enter"])'
        )
    for arg in value:
        for m in _PLACE.finditer(arg):
            token = m.group(0)
            if token in ("{{", "}}"):
                continue
            if m.group(1) is None or m.group(1) not in FIELDS:
                known = ", ".join(f"{{{f}}}" for f in FIELDS)
                raise UsageError(
                    f"{where}: {name}: {token!r} is not a placeholder (known: {known}; "
                    "write {{ and }} for a literal brace)"
                )
    return tuple(value)


def loops_from_config(path: Path, tables: object) -> tuple[Loop, ...]:
    """`[[loop]]` tables, each checked now (one-line errors naming the file and the table)."""
    from hitl_tui.timefmt import parse_duration

    if isinstance(tables, dict):
        tables = [tables]
    if not isinstance(tables, list):
        raise UsageError(f"{path}: 'loop' must be a [[loop]] table or an array of them")
    loops = []
    for n, table in enumerate(tables, 1):
        where = f"{path}: [[loop]] #{n}"
        if not isinstance(table, dict):
            raise UsageError(f"{where}: must be a table")
        unknown = sorted(set(table) - KNOWN_KEYS)
        if unknown:
            raise UsageError(
                f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(KNOWN_KEYS))})"
            )
        match = table.get("match")
        if isinstance(match, str):
            match = [match]
        if not isinstance(match, list) or not match or not all(isinstance(m, str) for m in match):
            raise UsageError(f"{where}: match must be a list of repository paths or globs")
        base = path.parent
        patterns = tuple(
            os.path.abspath(base / os.path.expanduser(m)) if "\0" not in m else "" for m in match
        )
        if "" in patterns:
            raise UsageError(f"{where}: match: a path cannot contain a NUL character")
        restart = table.get("restart")
        opener = table.get("open")
        if restart is None and opener is None:
            raise UsageError(f"{where}: give restart, open, or both")
        within = table.get("resume_within", "10m")
        try:
            if not isinstance(within, str):
                raise ValueError(f'{within!r} is not a duration in quotes (like "10m")')
            resume_within = parse_duration(within)
        except ValueError as exc:
            raise UsageError(f"{where}: resume_within: {exc}") from None
        timeout = table.get("timeout_seconds", TIMEOUT)
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not (0 < timeout <= 3600)
        ):
            raise UsageError(f"{where}: timeout_seconds must be a number from 1 to 3600")
        loops.append(
            Loop(
                patterns,
                None if restart is None else check_template(where, "restart", restart),
                None if opener is None else check_template(where, "open", opener),
                resume_within,
                float(timeout),
            )
        )
    return tuple(loops)


def restart_warnings(
    loops: tuple[Loop, ...], repos: Iterable[Path], origin: object = "config"
) -> list[str]:
    """What a `[[loop]]` restart will fail on, seen as the config is loaded (warnings: the
    config stands): its program (the first argument, when it has no placeholder) not found on
    PATH, or a relative file (`./run.sh`, run in each repository) missing in repositories the
    loop restarts (of `repos`, those it is the first to cover: `loop_for`)."""
    found: list[str] = []
    repos = list(repos)
    for n, loop in enumerate(loops, 1):
        if loop.restart is None:
            continue
        program = loop.restart[0]
        if any(m.group(1) is not None for m in _PLACE.finditer(program)):
            continue  # it depends on the block: seen when it runs
        program = program.replace("{{", "{").replace("}}", "}")
        where = f"{origin}: [[loop]] #{n}: restart"
        if "/" not in program:
            if shutil.which(program) is None:
                found.append(f"{where}: program {program!r} not found on PATH")
        elif os.path.isabs(program):
            if not os.path.isfile(program):
                found.append(f"{where}: program {program!r} not found")
        else:
            mine = [r for r in repos if next((x for x in loops if x.covers(r)), None) is loop]
            missing = [r for r in mine if not os.path.isfile(r / program)]
            if missing:
                found.append(
                    f"{where}: {program!r} is missing in {len(missing)} of the {len(mine)} "
                    f"repos it matches (like {os.fsdecode(missing[0])})"
                )
    return found


# -- running -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ran:
    """What a command did: its argument list, exit code (None: it did not finish), and log."""

    argv: tuple[str, ...]
    returncode: int | None
    log: Path | None
    #: Why it failed, in a few words ("exit 3", "timed out after 30 s", "not found: tmux"); for
    #: a refused one, the whole line (`ControlInValue.line`).
    problem: str | None
    seconds: float
    #: Not run at all: a value it needed holds a control character (nothing ran, no log).
    refused: bool = False

    @property
    def ok(self) -> bool:
        return self.problem is None


def shown(argv: list[str] | tuple[str, ...]) -> str:
    """An argument list as an operator reads it (each argument quoted where a shell would need
    it, so `{name}` = `a b` shows as one)."""
    import shlex

    return " ".join(shlex.quote(a) for a in argv)


#: The log keeper (`/bin/sh -c KEEPER hitl-log BYTES LOG NOTE`), stdin the pipe the command
#: writes to, stdout its log: in the background (so hitl neither waits for it nor reaps it),
#: it copies the first BYTES to the log, writes NOTE if there was more, marks the log done
#: (mode 0400), and then reads the rest and drops it until the last writer closes the pipe.
#: The loop a restart leaves running in the background writes to that pipe for its whole
#: life: it is never stalled (a full pipe) nor killed (SIGPIPE, a pipe without a reader), and
#: never fills the disk. What stays behind per running loop is one `cat`. (GNU head -c reads
#: no more than it writes, so the check for more is exact; a head that reads ahead may drop
#: the note, never the bound.)
KEEPER = """exec 4<&0
(
  head -c "$1" 2>/dev/null
  if [ "$(head -c 1 | wc -c)" -gt 0 ]; then
    printf '\\n%s\\n' "$3" 2>/dev/null
  fi
  chmod 0400 "$2" 2>/dev/null
  exec cat >/dev/null 2>&1
) <&4 4<&- &
"""


def run_command(
    what: str, template: tuple[str, ...], block: Block, timeout: float, logs: Path | None
) -> Ran:
    """Run `template` for `block` in its repository; never raises for the command's sake. A
    value holding a control character runs nothing (`Ran.refused`, the line in `problem`).

    Its output (stdout and stderr, and whatever it leaves running writes there) goes through a
    pipe to a log keeper (KEEPER): the log never passes MAX_LOG, the logs in `logs` never
    LOGS_TOTAL. hitl waits for the command itself (`timeout` s), not for its output to end."""
    try:
        argv = fill(template, values_for(block))
    except ControlInValue as exc:
        return Ran((), None, None, exc.line(what), 0.0, refused=True)
    cwd = block.repo if isinstance(block.repo, Path) and block.repo.is_dir() else None
    began = time.monotonic()
    log, fd, room = _new_log(logs, what, block, argv) if logs is not None else (None, None, (0, ""))
    out: int | None = None
    if fd is not None:
        try:
            out = _keeper(fd, log, room)
        except OSError as exc:
            _note(fd, f"output not kept: no log keeper ({exc.strerror or exc})")
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out if out is not None else subprocess.DEVNULL,
            stderr=subprocess.STDOUT if out is not None else subprocess.DEVNULL,
            start_new_session=True,
        )
    except FileNotFoundError:
        return _done(argv, None, log, f"not found: {argv[0]}", began, fd, out)
    except OSError as exc:
        return _done(argv, None, log, f"could not start: {exc.strerror or exc}", began, fd, out)
    if out is not None:  # the command (and what it leaves running) holds the pipe now
        os.close(out)
        out = None
    try:
        code = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        return _done(argv, None, log, f"timed out after {timeout:g} s", began, fd, out)
    return _done(argv, code, log, None if code == 0 else f"exit {code}", began, fd, out)


def _keeper(log_fd: int, log: Path | None, room: tuple[int, str]) -> int:
    """Start the log keeper on a new pipe whose reader it is; the pipe's write end. `room`:
    the bytes this log may hold in all (`prune`), and the note for what did not fit."""
    cap, note = room
    keep = cap - os.fstat(log_fd).st_size - _TAIL
    read, write = os.pipe()
    try:
        starter = subprocess.Popen(
            ["/bin/sh", "-c", KEEPER, "hitl-log", str(max(keep, 0)), os.fspath(log or ""), note],
            stdin=read,
            stdout=log_fd,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # no terminal's signals, and outside the command's group
        )
        starter.wait()  # the keeper itself runs on in the background
    except BaseException:
        os.close(write)
        raise
    finally:
        os.close(read)
    return write


def _kill(proc: subprocess.Popen[bytes]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except OSError:
            pass
        try:
            proc.wait(1.0)
            return
        except subprocess.TimeoutExpired:
            continue


def _done(
    argv: Iterable[str],
    code: int | None,
    log: Path | None,
    problem: str | None,
    began: float,
    fd: int | None,
    out: int | None,
) -> Ran:
    if out is not None:
        os.close(out)
    if fd is not None:
        try:
            if problem is not None:
                _note(fd, problem)
        finally:
            os.close(fd)
    return Ran(tuple(argv), code, log, problem, time.monotonic() - began)


def _note(fd: int, text: str) -> None:
    """hitl's own line at the end of a log (within the room kept for it)."""
    line = f"[hitl: {text}"[: _TAIL - 4] + "]\n"
    try:
        os.write(fd, line.encode("utf-8", "replace"))
    except OSError:
        pass


def _new_log(
    logs: Path, what: str, block: Block, argv: list[str]
) -> tuple[Path | None, int | None, tuple[int, str]]:
    """A new log (mode 0600, its first line the command) and its descriptor, open to append,
    and its room (`prune`: the bytes it may hold, the note for the rest); the oldest finished
    logs go first. (None, None, ...) when it cannot be made: the command runs all the same."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", block.id)[:80] or "block"
    log = logs / f"{stamp}-{what}-{safe}.log"
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        logs.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(log, flags, 0o600)
    except OSError:
        return None, None, (0, "")
    room = prune(logs, log.name)
    cap = room[0]
    head = f"$ {shown(argv)}".encode("utf-8", "surrogateescape")
    fits = min(_HEAD, cap - _TAIL)  # the command's line too stays within the room
    if len(head) + 1 > fits:
        head = head[: max(fits - 5, 0)] + b"..." if fits > 5 else b""
    try:
        if head:
            os.write(fd, head + b"\n")
    except OSError:
        pass
    return log, fd, room


def _writing(logs: Path) -> set[str] | None:
    """The logs in `logs` some process holds open for writing (a keeper, or a hitl starting
    one), from /proc; None where there is no /proc to ask."""
    proc = Path("/proc")
    if not (proc / "self" / "fd").is_dir():
        return None
    prefix = os.fspath(logs) + os.sep
    found: set[str] = set()
    for pid in os.listdir(proc):
        if not pid.isdigit():
            continue
        fds = proc / pid / "fd"
        try:
            names = os.listdir(fds)
        except OSError:
            continue  # gone, or not ours to look at
        for name in names:
            try:
                target = os.readlink(fds / name)
            except OSError:
                continue
            if not target.startswith(prefix) or not target.endswith(".log"):
                continue
            try:
                info = (proc / pid / "fdinfo" / name).read_text()
                flags = int(info.split("flags:", 1)[1].split()[0], 8)
            except (OSError, ValueError, IndexError):
                flags = os.O_WRONLY  # cannot tell: counted as written
            if flags & os.O_ACCMODE != os.O_RDONLY:
                found.add(target[len(prefix) :])
    return found


def prune(logs: Path, new: str | None = None) -> tuple[int, str]:
    """Keep `logs` within KEEP_LOGS logs and LOGS_TOTAL bytes, whatever runs: a log still being
    written (held open for writing, per /proc; elsewhere, not yet marked done, mode 0400)
    counts as the MAX_LOG it may grow to and is never removed (its loop would write on into a
    file nobody sees); the oldest finished logs go first. The room of the `new` log: the bytes
    it may hold (MAX_LOG, less when the logs still being written leave less of LOGS_TOTAL), and
    the note its keeper writes when there was more. Run after the new log is made: of two hitl
    making one at once, the second to list sees both."""
    try:
        names = sorted((p for p in os.listdir(logs) if p.endswith(".log")), reverse=True)
    except OSError:
        return MAX_LOG, _PAST
    writing = _writing(logs)
    sizes: dict[str, int] = {}
    growing: list[str] = []
    for name in names:
        if name == new:
            continue
        try:
            st = os.lstat(logs / name)
        except OSError:
            continue
        held = name in writing if writing is not None else bool(st.st_mode & 0o200)
        if held:
            growing.append(name)
        else:
            sizes[name] = st.st_size
    budget = LOGS_TOTAL - MAX_LOG * len(growing)
    cap = max(0, min(MAX_LOG, budget))
    note = _PAST
    if cap < MAX_LOG:
        note = (
            f"[hitl: output past {cap >> 10} KiB not kept: {len(growing)} other logs are still "
            f"being written, and loops/ keeps {LOGS_TOTAL >> 20} MiB in all]"
        )
    kept, total = len(growing) + 1, 0
    for name, size in sizes.items():  # newest first: the names start with the time
        if kept < KEEP_LOGS and total + size + cap <= budget:
            kept += 1
            total += size
            continue
        try:
            os.unlink(logs / name)
        except OSError:
            pass
    return cap, note


def logs_dir() -> Path | None:
    """Where commands' output is kept (the state folder's `loops/`); None without one."""
    return statefile.in_state("loops")
