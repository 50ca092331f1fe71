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
