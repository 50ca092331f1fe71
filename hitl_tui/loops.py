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
and its output goes to a log in the state folder. `{repo}`, `{name}`, `{id}` and `{task_id}`
are filled in *inside* single arguments: a value with spaces, `;` or newlines stays one
argument, never a word of a shell line. `{{` and `}}` are literal braces.

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

from hitl_tui import statefile
from hitl_tui.model import Block, UsageError

#: What a `{placeholder}` may name.
FIELDS = ("repo", "name", "id", "task_id")
KNOWN_KEYS = {"match", "restart", "open", "resume_within", "timeout_seconds"}
RESUME_WITHIN = timedelta(minutes=10)
TIMEOUT = 30.0
#: Bytes of a command's output kept in its log (the rest is cut, and the log says so).
MAX_LOG = 1 << 20
#: Logs kept in the state folder; the oldest go first.
KEEP_LOGS = 200
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


def fill(template: tuple[str, ...], values: dict[str, str]) -> list[str]:
    """The argument list with each placeholder replaced inside its own argument."""

    def one(arg: str) -> str:
        def put(m: re.Match) -> str:
            token = m.group(0)
            if token in ("{{", "}}"):
                return token[0]
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
    #: Why it failed, in a few words ("exit 3", "timed out after 30 s", "not found: tmux").
    problem: str | None
    seconds: float

    @property
    def ok(self) -> bool:
        return self.problem is None


def shown(argv: list[str] | tuple[str, ...]) -> str:
    """An argument list as an operator reads it (each argument quoted where a shell would need
    it, so `{name}` = `a b` shows as one)."""
    import shlex

    return " ".join(shlex.quote(a) for a in argv)


def run_command(
    what: str, template: tuple[str, ...], block: Block, timeout: float, logs: Path | None
) -> Ran:
    """Run `template` for `block` in its repository; never raises for the command's sake."""
    argv = fill(template, values_for(block))
    cwd = block.repo if isinstance(block.repo, Path) and block.repo.is_dir() else None
    log = _log_path(logs, what, block) if logs is not None else None
    began = time.monotonic()
    out = None
    try:
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            out = open(log, "wb")  # noqa: SIM115 (closed below, after the process)
            out.write(f"$ {shown(argv)}\n".encode("utf-8", "surrogateescape"))
            out.flush()
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out if out is not None else subprocess.DEVNULL,
            stderr=subprocess.STDOUT if out is not None else subprocess.DEVNULL,
            start_new_session=True,
        )
    except FileNotFoundError:
        return _done(argv, None, log, f"not found: {argv[0]}", began, out)
    except OSError as exc:
        return _done(argv, None, log, f"could not start: {exc.strerror or exc}", began, out)
    try:
        code = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        return _done(argv, None, log, f"timed out after {timeout:g} s", began, out)
    return _done(argv, code, log, None if code == 0 else f"exit {code}", began, out)


def _kill(proc: subprocess.Popen) -> None:
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


def _done(argv, code, log, problem, began, out) -> Ran:
    if out is not None:
        try:
            if out.tell() > MAX_LOG:
                out.truncate(MAX_LOG)
                out.seek(MAX_LOG)
                out.write(b"\n[hitl: output cut at 1 MiB]\n")
            if problem is not None:
                out.write(f"[hitl: {problem}]\n".encode())
        finally:
            out.close()
    return Ran(tuple(argv), code, log, problem, time.monotonic() - began)


def _log_path(logs: Path, what: str, block: Block) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", block.id)[:80] or "block"
    try:  # the names sort by time: keep the newest KEEP_LOGS - 1, and this one
        old = sorted(p for p in os.listdir(logs) if p.endswith(".log"))
        for name in old[: max(0, len(old) - KEEP_LOGS + 1)]:
            os.unlink(logs / name)
    except OSError:
        pass
    return logs / f"{stamp}-{what}-{safe}.log"


def logs_dir() -> Path | None:
    """Where commands' output is kept (the state folder's `loops/`); None without one."""
    return statefile.in_state("loops")
