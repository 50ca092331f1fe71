"""The TOML config, read once into one typed object.

```toml
repos = ["~/loops", "~/work/api"]   # repositories, or folders of repositories
operator = "Ada"                     # who answers (default: git user.name, else the login)
bell = true                          # ring the terminal bell when a block arrives
journal_keep = "90d"                 # how long the answer journal is kept ("12w", "forever")

[keys]                               # remap a binding, by its id (hitl_tui/keys.py)
"hitl.answer-1" = "f1"

[sla]                                # a block's age turns amber, then red
warn = "15m"
alert = "1h"

[notify]                             # notices beyond the bell (see notices.py)
desktop = "auto"
command = ["ntfy", "publish", "my-topic"]

[telegram]                           # answer from the phone (see telegram/)
chat_id = 123456789

[[loop]]                             # how to restart / open loops (see loops.py)
match = ["~/loops/*"]
restart = ["tmux", "send-keys", "-t", "{name}", "./run.sh", "Enter"]
```
"""

from __future__ import annotations

import difflib
import getpass
import subprocess
import tomllib
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from hitl_tui.journal.retention import DEFAULT_KEEP
from hitl_tui.journal.retention import parse as parse_keep
from hitl_tui.journal.sent import SentJournal
from hitl_tui.loops.commands import Loop, loops_from_config
from hitl_tui.loops.notices import NoticeConfig
from hitl_tui.loops.notices import from_config as notices_from_config
from hitl_tui.model import HitlError, UsageError
from hitl_tui.paths import config_file
from hitl_tui.sources.base import Source
from hitl_tui.sources.registry import REMOTE, remote_sources
from hitl_tui.telegram.settings import TelegramConfig
from hitl_tui.telegram.settings import from_config as telegram_from_config

#: The config's own keys, and one table per remote backend (`[[github]]`, see `registry`).
KNOWN_KEYS = {
    *("repos", "operator", "bell", "journal_keep", "keys", "sla", "loop", "notify", "mcp"),
    "telegram",
    *REMOTE,
}
#: How long closed journal segments are kept, by default (see retention).
JOURNAL_KEEP = DEFAULT_KEEP
#: `[sla]` by default: a block's age is amber from 15 minutes, red from an hour.
SLA_WARN, SLA_ALERT = timedelta(minutes=15), timedelta(hours=1)
#: `[mcp] approve_wait`: how long `hitl mcp`'s approve waits for the operator, by default and
#: at most.
APPROVE_WAIT, MAX_APPROVE_WAIT = timedelta(seconds=30), timedelta(minutes=10)


@dataclass(frozen=True)
class Config:
    repos: tuple[Path, ...] = ()
    operator: str | None = None
    bell: bool = True
    #: The remote backends of the config's tables, each validated once, at load.
    remotes: tuple[Source, ...] = ()
    path: Path | None = None
    #: None: the journal is kept forever.
    journal_keep: timedelta | None = JOURNAL_KEEP
    extra: dict[str, Any] = field(default_factory=dict)
    #: `[keys]`: binding id -> the keys that replace its defaults (`"hitl.answer-1" = "f1"`).
    keys: dict[str, str] = field(default_factory=dict)
    #: `[sla]`: how long a block may wait before its age is amber (warn), then red (alert).
    sla_warn: timedelta = SLA_WARN
    sla_alert: timedelta = SLA_ALERT
    #: `[[loop]]`: how to restart and open the loops of matching repositories.
    loops: tuple[Loop, ...] = ()
    #: `[notify]`: the notices beyond the bell (desktop, terminal escape, command, webhook).
    notify: NoticeConfig = field(default_factory=NoticeConfig)
    #: `[mcp] approve_wait`: how long `hitl mcp`'s approve tool waits for an answer.
    approve_wait: timedelta = APPROVE_WAIT
    #: `[telegram]`: the bot that sends blocks to a chat and takes taps and replies (None: off).
    telegram: TelegramConfig | None = None

    def operator_name(self) -> str:
        return self.operator or git_user_name() or _login()


def _login() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "operator"


def git_user_name() -> str | None:
    try:
        out = subprocess.run(
            ["git", "config", "user.name"], capture_output=True, text=True, timeout=2, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    name = out.stdout.strip()
    return name or None


def load_config(explicit: str | Path | None = None) -> Config:
    """Read `--config FILE`, else `$HITL_CONFIG`, else the user config file (if it exists)."""
    path = Path(explicit).expanduser() if explicit else config_file()
    if not path.exists():
        if explicit:
            raise UsageError(f"config file not found: {path}")
        return Config()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise HitlError(f"{path}: cannot read the config: {exc}") from None
    unknown = sorted(set(data) - KNOWN_KEYS)
    if unknown:
        raise UsageError(
            f"{path}: unknown key {unknown[0]!r} (known: {', '.join(sorted(KNOWN_KEYS))})"
        )
    repos = data.get("repos", [])
    if isinstance(repos, str):
        repos = [repos]
    if not isinstance(repos, list) or not all(isinstance(r, str) for r in repos):
        raise UsageError(f"{path}: 'repos' must be a list of paths")
    operator = data.get("operator")
    if operator is not None and not isinstance(operator, str):
        raise UsageError(f"{path}: 'operator' must be a string")
    bell = data.get("bell", True)
    if not isinstance(bell, bool):
        raise UsageError(f"{path}: 'bell' must be true or false")
    try:
        # Each backend checks its own table now, with the file named, before any command
        # reads or writes anything.
        tables = {key: data[key] for key in REMOTE if key in data}
        remotes = remote_sources(tables, journal=SentJournal())
    except UsageError as exc:
        raise UsageError(f"{path}: {exc}") from None
    keep = parse_keep(path, data.get("journal_keep", "90d"))
    keys = _keys(path, data.get("keys", {}))
    warn, alert = _sla(path, data.get("sla", {}))
    loops = loops_from_config(path, data["loop"]) if "loop" in data else ()
    notices = notices_from_config(path, data.get("notify", {}))
    approve_wait = _mcp(path, data.get("mcp", {}))
    telegram = telegram_from_config(path, data["telegram"]) if "telegram" in data else None
    base = path.parent
    resolved = tuple(base / _expand(path, r) for r in repos)
    return Config(
        tuple(p.absolute() for p in resolved),
        operator,
        bell,
        remotes,
        path,
        journal_keep=keep,
        keys=keys,
        sla_warn=warn,
        sla_alert=alert,
        loops=loops,
        notify=notices,
        approve_wait=approve_wait,
        telegram=telegram,
    )


def approve_wait_of(text: str) -> timedelta:
    """`--approve-wait` / `[mcp] approve_wait`: a duration from 0 to MAX_APPROVE_WAIT;
    ValueError with a message fit to show when it is not one."""
    from hitl_tui.timefmt import parse_duration

    wait = parse_duration(text)
    if wait > MAX_APPROVE_WAIT:
        raise ValueError(f"{text.strip()!r} is longer than {MAX_APPROVE_WAIT.seconds // 60}m")
    return wait


def _mcp(path: Path, table: object) -> timedelta:
    """`[mcp] approve_wait = "30s"`: `hitl mcp`'s settings."""
    if not isinstance(table, dict):
        raise UsageError(f"{path}: 'mcp' must be an [mcp] table (approve_wait = \"30s\")")
    unknown = sorted(set(table) - {"approve_wait"})
    if unknown:
        raise UsageError(f"{path}: [mcp]: unknown key {unknown[0]!r} (known: approve_wait)")
    value = table.get("approve_wait", "30s")
    try:
        if not isinstance(value, str):
            raise ValueError(f'{value!r} is not a duration in quotes (like "30s")')
        return approve_wait_of(value)
    except ValueError as exc:
        raise UsageError(f"{path}: [mcp]: approve_wait: {exc}") from None


def _sla(path: Path, table: object) -> tuple[timedelta, timedelta]:
    """`[sla] warn = "15m", alert = "1h"`: durations, warn no later than alert."""
    from hitl_tui.timefmt import parse_duration

    if not isinstance(table, dict):
        raise UsageError(f'{path}: \'sla\' must be a [sla] table (warn = "15m", alert = "1h")')
    unknown = sorted(set(table) - {"warn", "alert"})
    if unknown:
        raise UsageError(f"{path}: [sla]: unknown key {unknown[0]!r} (known: alert, warn)")
    found = {"warn": SLA_WARN, "alert": SLA_ALERT}
    for name, value in table.items():
        try:
            if not isinstance(value, str):
                raise ValueError(f'{value!r} is not a duration in quotes (like "15m")')
            found[name] = parse_duration(value)
        except ValueError as exc:
            raise UsageError(f"{path}: [sla]: {name}: {exc}") from None
    if found["warn"] > found["alert"]:
        raise UsageError(f"{path}: [sla]: warn ({table.get('warn')}) is after alert")
    return found["warn"], found["alert"]


def _keys(path: Path, table: object) -> dict[str, str]:
    """`[keys]`: each a binding id of `hitl_tui.keys` and a string of Textual key names."""
    from hitl_tui.keys import IDS, clashes

    if not isinstance(table, dict):
        raise UsageError(f"{path}: 'keys' must be a [keys] table of binding id = \"keys\"")
    for name, value in table.items():
        if name not in IDS:
            close = difflib.get_close_matches(name, sorted(IDS), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else " (the README's Keys lists them)"
            raise UsageError(f"{path}: [keys]: unknown binding id {name!r}{hint}")
        if not isinstance(value, str) or not value.strip() or "\0" in value:
            raise UsageError(f'{path}: [keys]: {name!r} must be a string of keys, like "f1"')
    for key, one, other in clashes(table):
        raise UsageError(
            f"{path}: [keys]: {key!r} is both {one!r} and {other!r}; give one of them other keys"
        )
    return dict(table)


def _expand(config: Path, raw: str) -> Path:
    """`~` and `~user` expanded; a path no one could mean is a one-line error naming the file."""
    if "\0" in raw:
        raise UsageError(f"{config}: 'repos': a path cannot contain a NUL character")
    try:
        return Path(raw).expanduser()
    except RuntimeError:  # ~user with no such user, or no home folder at all
        user = raw[1:].split("/", 1)[0]
        who = f"no user {user}" if user else "no home folder"
        raise UsageError(f"{config}: 'repos': {who} for {raw}") from None
