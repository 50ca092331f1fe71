"""How long the journal keeps its closed segments: `journal_keep` of the config.

Its default and its parsing live here, for `config.load_config` (which reports a bad value, the
file named) and for `journalstore`, which asks `current()` each time retention runs (after a
rotation). So every entry point gets the same answer: a command, the app however it was
started, a script or a test that calls apply or undo directly. `current()` is

- the `journal_keep` of a Config its owner handed over with `use` (a command that read
  `--config FILE`: `cli_base.use_config`), until `reset`;
- else that of the config file hitl reads by default (`$HITL_CONFIG`, else the user config
  file), read when asked: DEFAULT_KEEP when there is no file or it does not say;
- None (keep everything) when that file cannot be read or its value is not a duration: a
  broken config never prunes the history.

A leaf: it imports neither `config` (which imports the backends, and they the journal) nor
the journal.
"""

from __future__ import annotations

import re
import tomllib
from datetime import timedelta
from pathlib import Path

from hitl_tui.model import UsageError
from hitl_tui.paths import config_file

#: How long closed segments are kept when no config says otherwise.
DEFAULT_KEEP = timedelta(days=90)
KEY = "journal_keep"

_DURATION = re.compile(r"\s*(\d{1,6})\s*([hdw])\s*\Z")
_UNITS = {"h": "hours", "d": "days", "w": "weeks"}
_UNSET = object()
_used: object = _UNSET


def parse(path: Path, value: object) -> timedelta | None:
    """`"90d"`, `"12w"`, `"48h"` or `"forever"` (None); a one-line UsageError naming `path`."""
    if isinstance(value, str) and value.strip().lower() == "forever":
        return None
    match = _DURATION.match(value) if isinstance(value, str) else None
    if match is None or int(match.group(1)) == 0:
        raise UsageError(
            f'{path}: \'journal_keep\' must be a duration such as "90d" (days), "12w" '
            f'(weeks), "48h" (hours) or "forever"; got {value!r}'
        )
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


def use(keep: timedelta | None) -> None:
    """The retention of the Config this process runs with (None: forever), until `reset`."""
    global _used
    _used = keep


def reset() -> None:
    """Back to the default config file's (a command hands its own over again)."""
    global _used
    _used = _UNSET


def current() -> timedelta | None:
    """How long closed segments are kept now (None: forever); see the module docstring."""
    if _used is not _UNSET:
        return _used  # type: ignore[return-value]
    return configured()


def configured() -> timedelta | None:
    """`journal_keep` of the default config file, read now."""
    path = config_file()
    if not path.exists():  # as `load_config`: no file is the defaults
        return DEFAULT_KEEP
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None
    if KEY not in data:
        return DEFAULT_KEEP
    try:
        return parse(path, data[KEY])
    except UsageError:
        return None
