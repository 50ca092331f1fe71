"""Where hitl keeps its own files: the config, and the state folder (locks, journal)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP = "hitl"


def config_file() -> Path:
    """The default config: `$HITL_CONFIG`, else `config.toml` in the user config folder."""
    env = os.environ.get("HITL_CONFIG")
    if env:
        return Path(env).expanduser()
    return platformdirs.user_config_path(APP) / "config.toml"


def state_dir() -> Path:
    """The operator's state folder (`$HITL_STATE_DIR` overrides it, for tests and sandboxes)."""
    env = os.environ.get("HITL_STATE_DIR")
    if env:
        return Path(env).expanduser()
    return platformdirs.user_state_path(APP)


#: What to do about an unusable state folder, at the end of every message about one.
STATE_HINT = "set HITL_STATE_DIR to a writable folder"


def check_state_dir(write: bool = True) -> Path:
    """The state folder, or a one-line HitlError naming it, what is wrong and what to do.

    Checked before a command that journals or locks (answer, undo, the app), so that an
    unusable folder stops it before anything is written anywhere, instead of failing half-way
    with an OSError. Nothing is created here: the folder is made when first written.
    """
    from hitl_tui.model import HitlError

    folder = state_dir()
    probe = Path(os.path.abspath(folder))
    while not os.path.lexists(probe) and probe.parent != probe:
        probe = probe.parent  # the nearest existing folder is where it would be created
    why = None
    if not probe.is_dir():
        if os.path.islink(probe) and not probe.exists():
            what = "it is" if probe == folder else f"{probe} is"
            why = f"{what} a symlink to nothing"
        else:
            why = (
                "it is a file, not a folder"
                if probe == folder
                else f"{probe} is a file, not a folder"
            )
    elif write and not os.access(probe, os.W_OK | os.X_OK):
        try:
            read_only = bool(os.statvfs(probe).f_flag & os.ST_RDONLY)
        except (OSError, AttributeError):
            read_only = False
        where = "it" if probe == folder else str(probe)
        why = f"{where} is on a read-only file system" if read_only else f"{where} is not writable"
    if why is not None:
        raise HitlError(f"cannot use the state folder {folder}: {why} ({STATE_HINT})")
    return folder
